// The raw SQLite baseline of cplane-bench (`--scenario raw`): a fleet of
// forked workers drains a queue with the statements a claim and a finish
// amount to, as plain sqlite3 calls, one transaction each, writers queued
// on a fair flock as cplane's are, without cplane's layers (no encoded
// events, no hash chain, no projections, no checks). It is the
// per-transaction limit of the disk: a cplane drain on the same machine
// divided by this figure is cplane's overhead, or, with group commit, its
// gain.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probe/fleet.hpp"

namespace cplane::bench {

struct SqliteRawDrain {
  double seconds = 0;  // from the start gate to the last worker's exit
  std::int64_t items = 0;
  std::vector<fleet::WorkerRecord> workers;
};

// Drains `items` items with `workers` forked processes, each with its own
// connection to a new database at `path` (WAL), one item per transaction:
// claims commit with synchronous FULL when `full_claims`, finishes when
// `full_finishes`, else NORMAL (cplane's durability levels: normal,
// fenced = FULL claims, full). Workers write their
// records to `record_prefix`.<n>. Throws std::runtime_error when a worker
// fails or the drain did not finish each item exactly once.
SqliteRawDrain drain_sqlite_raw(const std::string& path, int workers, std::int64_t items,
                                bool full_claims, bool full_finishes,
                                const std::string& record_prefix);

}  // namespace cplane::bench
