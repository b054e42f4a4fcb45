// What the scenarios of cplane-bench share: the options of the command
// line, a scratch folder, filling and draining a queue, a fleet drain and
// the figures every drain reports. Each scenario (or family) has a file of
// its own and takes the Options and an Emit; bench.cpp parses the command
// line and dispatches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cplane/cplane.hpp>

#include "bench/pg_raw.hpp"
#include "json/json_writer.hpp"
#include "probe/fleet.hpp"

namespace cplane::bench {

// How a drain's worker takes its items. plain: claim + finish; batch:
// claim_batch + finish_batch of Options::claim_batch items; next:
// finish_and_claim.
enum class Mode { plain, batch, next };

// InvalidArgument unless "plain", "batch" or "next".
Mode parse_mode(std::string_view s);
std::string_view to_string(Mode m);

// The command line, as parsed (defaults as in --help).
struct Options {
  std::string scenario;
  std::int64_t items = 10'000;
  bool items_given = false;
  std::int64_t max = 1'000'000;  // --max-depth or --max-items
  bool max_given = false;
  int workers = 16;
  std::int64_t batch = 1;
  std::size_t claim_batch = 8;
  Mode mode = Mode::plain;
  std::string lock = "flock";
  Durability durability = Durability::normal;
  bool combine = true;   // SQLite's group commit
  bool coalesce = true;  // the coalescing WAL writer
  int page_size = SqliteOptions{}.page_size;  // drains on SQLite: a new store's page size
  int sticky_ms = 10;    // SqliteOptions::sticky_ms: how long a combiner goes on serving
  int idle_waiters = 0;  // drains: claims waiting on an empty project beside the fleet
  std::optional<std::string> db;
  std::optional<RawClaim> claim;
  std::optional<std::string> plot;
  std::int64_t rps = 20;
  std::optional<std::string> cplane;
};

// Prints one result line (a JSON object) on stdout.
using Emit = std::function<void(const std::string&)>;

// A fresh folder under the system's temporary one, removed with everything
// in it when this goes.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Queues `items` items in project "bench" (created when the store has no
// project), in batches of 1,000.
void fill(const std::string& db, std::int64_t items, Durability durability = Durability::normal,
          int page_size = SqliteOptions{}.page_size);

// Claims and finishes until the queue is dry (or `limit` items are
// finished, when >= 0). Every write transaction is timed: claim latency,
// and the longest wait of any. Busy errors are counted, others thrown.
fleet::WorkerRecord drain(ControlStore& store, const std::string& owner, Mode mode,
                          std::size_t claim_batch, std::int64_t limit = -1);

struct DrainResult {
  double seconds = 0;
  std::int64_t items = 0;
  std::vector<fleet::WorkerRecord> workers;
};

// `workers` forked processes drain `db` in `mode` at `durability`, with
// the options' combine and coalesce; records under `scratch_prefix`.
DrainResult drain_fleet(const Options& o, const std::string& db, int workers, Mode mode,
                        Durability durability, bool writer_flock,
                        const std::string& scratch_prefix);

// "sqlite" or "postgresql": the backend a store URL names.
std::string_view store_kind(std::string_view url);

// What every fleet drain reports: throughput, claim latency, fairness.
void drain_figures(JsonObject& out, const DrainResult& r);

// Peak resident memory of this process, MiB.
double peak_rss_mib();

}  // namespace cplane::bench
