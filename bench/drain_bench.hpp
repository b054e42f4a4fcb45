// cplane-bench's drains: --scenario drain, drain-matrix and latency (a fleet
// of forked workers drains a queue), and the raw baselines of the same
// drain without cplane's layers, raw (SQLite) and pg-raw (PostgreSQL).
#pragma once

#include <string>

#include "bench/common.hpp"

namespace cplane::bench {

// One drain of --items by `workers` processes, as one JSON line: on a
// fresh SQLite file, or on the store --db names, which is not cleared and
// must hold no open items. Throws std::runtime_error when the drain did not
// finish every item.
std::string drain_once(const Options& o, const char* scenario, int workers, Mode mode,
                       Durability durability);

// --workers processes at --mode and --durability.
void drain_scenario(const Options& o, const Emit& emit);
// 1, 2, 4, 16 and 64 processes x normal, fenced and full.
void drain_matrix_scenario(const Options& o, const Emit& emit);
// --workers processes, plain claim + finish: the latency figures.
void latency_scenario(const Options& o, const Emit& emit);

// The same statements as plain sqlite3 calls (bench/sqlite_raw.hpp).
void sqlite_raw_scenario(const Options& o, const Emit& emit);
// The same statements as plain libpq calls on *o.db (bench/pg_raw.hpp),
// each --claim variant (default both).
void pg_raw_scenario(const Options& o, const Emit& emit);

}  // namespace cplane::bench
