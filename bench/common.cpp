#include "bench/common.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "bench/fleet_run.hpp"

namespace cplane::bench {

using fleet::seconds_now;

Mode parse_mode(std::string_view s) {
  if (s == "plain") return Mode::plain;
  if (s == "batch") return Mode::batch;
  if (s == "next") return Mode::next;
  throw InvalidArgument(fmt::format("unknown mode '{}': expected plain, batch or next", s));
}

std::string_view to_string(Mode m) {
  switch (m) {
    case Mode::plain: return "plain";
    case Mode::batch: return "batch";
    case Mode::next: return "next";
  }
  return "?";
}

ScratchDir::ScratchDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "cplane-bench-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void fill(const std::string& db, std::int64_t items, Durability durability, int page_size) {
  ControlStore store{db, {.durability = durability, .sqlite = {.page_size = page_size}}};
  if (store.visible_projects().empty()) store.create_project("bench", "Benchmark");
  std::vector<std::string> payloads;
  for (std::int64_t done = 0; done < items;) {
    const auto n = std::min<std::int64_t>(1000, items - done);
    payloads.assign(static_cast<std::size_t>(n), R"({"task":"benchmark item"})");
    store.enqueue_batch("bench", payloads);
    done += n;
  }
}

fleet::WorkerRecord drain(ControlStore& store, const std::string& owner, Mode mode,
                          std::size_t claim_batch, std::int64_t limit) {
  fleet::WorkerRecord r;
  auto timed = [&](auto&& f) {
    const double t0 = seconds_now();
    auto result = f();
    const double dt = seconds_now() - t0;
    r.longest_wait = std::max(r.longest_wait, dt);
    return std::pair{std::move(result), dt};
  };
  // A finish refused busy did nothing: the items are still this worker's,
  // so it reports them again (abandoned, they stayed claimed until their
  // leases lapsed and the drain came up short). A claim refused busy took
  // nothing: the loop claims again.
  auto finish = [&](auto&& report) {
    for (;;) {
      try {
        timed([&] {
          report();
          return 0;
        });
        return;
      } catch (const StorageError& e) {
        if (e.category() != StorageError::Category::busy) throw;
        ++r.busy_errors;
      }
    }
  };
  std::optional<ClaimedItem> current;
  while (limit < 0 || r.finishes < limit) {
    try {
      if (mode == Mode::batch) {
        auto [batch, dt] = timed([&] { return store.claim_batch(owner, claim_batch); });
        r.claim_latency.push_back(dt);
        if (batch.empty()) break;
        r.claims += static_cast<std::int64_t>(batch.size());
        std::vector<ControlStore::Report> reports;
        for (const auto& c : batch) reports.push_back({c.item_id, c.fence, Outcome::done, ""});
        finish([&] { store.finish_batch(reports); });
        r.finishes += static_cast<std::int64_t>(reports.size());
      } else if (mode == Mode::next && current) {
        auto [next, dt] = timed([&] {
          return store.finish_and_claim(current->item_id, current->fence, Outcome::done, owner);
        });
        r.claim_latency.push_back(dt);
        ++r.finishes;
        current = std::move(next);
        if (!current) break;
        ++r.claims;
      } else {
        auto [claimed, dt] = timed([&] { return store.claim(owner); });
        r.claim_latency.push_back(dt);
        if (!claimed) break;
        ++r.claims;
        if (mode == Mode::next) {
          current = std::move(claimed);
          continue;
        }
        finish([&] { store.finish(claimed->item_id, claimed->fence, Outcome::done); });
        ++r.finishes;
      }
    } catch (const StorageError& e) {
      if (e.category() != StorageError::Category::busy) throw;
      ++r.busy_errors;
    }
  }
  return r;
}

DrainResult drain_fleet(const Options& o, const std::string& db, int workers, Mode mode,
                        Durability durability, bool writer_flock,
                        const std::string& scratch_prefix) {
  FleetRun run = run_fleet(workers, scratch_prefix, [&](int w) {
    auto store = std::make_shared<ControlStore>(
        db, StoreOptions{.durability = durability,
                         .sqlite = {.writer_flock = writer_flock,
                                    .combine = o.combine,
                                    .sticky_ms = o.sticky_ms,
                                    .coalesce_wal_writes = o.coalesce}});
    return std::function<fleet::WorkerRecord()>(
        [store, w, mode, batch = o.claim_batch] {
          return drain(*store, fmt::format("worker-{}", w), mode, batch);
        });
  });
  DrainResult result;
  result.seconds = run.seconds;
  result.workers = std::move(run.records);
  for (const auto& r : result.workers) result.items += r.finishes;
  return result;
}

std::string_view store_kind(std::string_view url) {
  std::string scheme(url.substr(0, url.find("://") + 1));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return scheme == "postgresql:" || scheme == "postgres:" ? "postgresql" : "sqlite";
}

void drain_figures(JsonObject& out, const DrainResult& r) {
  std::vector<double> latency;
  std::int64_t min_claims = -1, max_claims = 0, busy = 0;
  double longest = 0;
  for (const auto& w : r.workers) {
    latency.insert(latency.end(), w.claim_latency.begin(), w.claim_latency.end());
    min_claims = min_claims < 0 ? w.claims : std::min(min_claims, w.claims);
    max_claims = std::max(max_claims, w.claims);
    busy += w.busy_errors;
    longest = std::max(longest, w.longest_wait);
  }
  const double mean = r.workers.empty() ? 0 : double(r.items) / r.workers.size();
  out.num("items", r.items)
      .fixed("seconds", r.seconds, 3)
      .fixed("items_per_s", r.items / r.seconds, 0)
      .fixed("claim_p50_ms", 1e3 * fleet::percentile(latency, 50), 3)
      .fixed("claim_p99_ms", 1e3 * fleet::percentile(latency, 99), 3)
      .fixed("claim_max_ms", 1e3 * fleet::percentile(latency, 100), 3)
      .fixed("longest_wait_ms", 1e3 * longest, 1)
      .num("min_claims", min_claims)
      .num("max_claims", max_claims)
      .fixed("mean_claims", mean, 1)
      .boolean("fair", min_claims >= mean / 4)
      .num("busy_errors", busy);
}

double peak_rss_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

}  // namespace cplane::bench
