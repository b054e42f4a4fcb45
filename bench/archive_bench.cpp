#include "bench/archive_bench.hpp"

#include <chrono>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "bench/pg_raw.hpp"
#include "json/json_writer.hpp"
#include "probe/fleet.hpp"

namespace cplane::bench {

using fleet::seconds_now;

namespace {

std::int64_t size_of(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<std::int64_t>(n);
}

}  // namespace

void archive_scenario(const Options& o, const Emit& emit) {
  const std::int64_t total = o.items_given ? o.items : 1'000'000;
  const std::int64_t every = o.batch > 1 ? o.batch : 100'000;
  ScratchDir dir;  // the segments, and the store unless --db
  // --db URL: a PostgreSQL schema of its own, empty (the bench archives
  // everything that ended in it).
  const auto db = o.db ? *o.db : dir.file("bench.db");
  const bool server = store_kind(db) == "postgresql";
  std::int64_t drained = 0, segment_bytes = 0;
  for (int cycle = 1; drained < total; ++cycle) {
    const std::int64_t n = std::min(every, total - drained);
    fill(db, n);
    ControlStore store{db, {.durability = Durability::normal}};
    // The drain: claims of 1,000 at a time, each batch finished at once.
    double claim_seconds = 0;
    std::int64_t claimed = 0;
    while (true) {
      const double t0 = seconds_now();
      auto batch = store.claim_batch("w", 1000);
      claim_seconds += seconds_now() - t0;
      if (batch.empty()) break;
      claimed += static_cast<std::int64_t>(batch.size());
      std::vector<ControlStore::Report> reports;
      for (const auto& c : batch) reports.push_back({c.item_id, c.fence, Outcome::done, ""});
      store.finish_batch(reports);
    }
    if (claimed != n) throw std::runtime_error(fmt::format("claimed {} of {}", claimed, n));
    drained += n;
    const std::string seg = dir.file(fmt::format("cycle-{}.seg", cycle));
    const double a0 = seconds_now();
    ArchiveOptions options;
    options.before = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    options.file = seg;
    const auto report = archive(store, options);
    const double archive_seconds = seconds_now() - a0;
    segment_bytes += report.bytes;
    const double v0 = seconds_now();
    const bool clean = verify_ledger(store).empty();
    const double verify_seconds = seconds_now() - v0;
    emit(JsonObject()
             .str("scenario", "archive")
             .num("cycle", cycle)
             .num("drained", drained)
             .num("archived_streams", report.streams)
             .num("live_db_bytes", server ? schema_bytes(db) : size_of(db) + size_of(db + "-wal"))
             .num("db_file_bytes", server ? -1 : size_of(db))
             .num("wal_bytes", server ? -1 : size_of(db + "-wal"))
             .fixed("verify_s", verify_seconds, 3)
             .boolean("clean", clean)
             .fixed("claim_us_per_item", claim_seconds * 1e6 / static_cast<double>(n), 2)
             .fixed("archive_s", archive_seconds, 3)
             .num("segment_bytes", report.bytes)
             .fixed("segment_bytes_per_item", static_cast<double>(report.bytes) / n, 1)
             .num("segments_total_bytes", segment_bytes)
             .done());
    if (!clean) throw std::runtime_error("verify found problems after an archive");
  }
}

}  // namespace cplane::bench
