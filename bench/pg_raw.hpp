// The raw PostgreSQL baseline of cplane-bench (`--scenario pg-raw`): a fleet
// of forked workers drains a queue with the statements a claim and a finish
// amount to, written as plain libpq calls, without cplane's layers (no
// events encoded, no hash chain, no projections, no checks). A cplane drain
// on the same server divided by this figure is cplane's overhead.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "probe/fleet.hpp"

namespace cplane::bench {

// How a claim and a finish reach the server. multi_statement: BEGIN, one
// statement per row touched, COMMIT (5 round trips to claim, 4 to finish).
// one_statement: one statement with data-modifying CTEs, in autocommit
// (1 round trip each).
enum class RawClaim { one_statement, multi_statement };

// InvalidArgument unless "one-statement" or "multi-statement".
RawClaim parse_raw_claim(std::string_view text);
std::string_view to_string(RawClaim claim);

struct RawDrain {
  double seconds = 0;  // from the start gate to the last worker's exit
  std::int64_t items = 0;
  std::vector<fleet::WorkerRecord> workers;
  std::string synchronous_commit;  // the server's setting, as the workers ran
};

// Drains `items` items with `workers` forked processes, each on its own
// connection to `url` (a libpq URL), one item per transaction. Creates the
// tables in a schema of its own (cplane_raw_<pid>) and drops it at the end,
// whatever happens; touches nothing else on the server. Workers write their
// records to `record_prefix`.<n>. Throws std::runtime_error when the server
// refuses, a worker fails, or the drain did not finish each item exactly
// once (items done, events written, claims and finishes counted).
RawDrain drain_raw(const std::string& url, int workers, std::int64_t items, RawClaim claim,
                   const std::string& record_prefix);

// The size of the schema a libpq URL names: its tables with their indexes
// and TOAST, in bytes; -1 when it cannot be read (or without PostgreSQL).
// Here because this file is the bench's one door to libpq.
std::int64_t schema_bytes(const std::string& url);

}  // namespace cplane::bench
