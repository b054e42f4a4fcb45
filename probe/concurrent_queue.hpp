// The concurrent-queue scenario (cplane-probe --scenario concurrent-queue):
// W drain workers (probe/drain.hpp), released at once, drain M items. Every
// item is claimed exactly once and done (claimed == distinct == done == M),
// no busy error reaches a worker, the ledger and verify are clean
// (probe/end_checks.hpp). Prints the drain's speed and claim latency.
#pragma once

#include "probe/scenario.hpp"

namespace cplane::probe::queue {

// Every figure in print order, and every check, verify's included. Throws
// what the store throws while setting up. Every process it started is gone
// when it returns.
ScenarioResult run(const RunConfig& run);

}  // namespace cplane::probe::queue
