// The kill-and-reclaim scenario (cplane-probe --scenario kill-and-reclaim):
// a worker claims an item (lease 1 s) and is SIGKILLed holding it. During
// the lease a competing claim gets another item and the held one stays with
// the dead worker; once the lease has lapsed a survivor reclaims it under a
// higher fence and, while the survivor holds it, the dead worker's late
// finish is refused as stale_fence. Then W drain workers (probe/drain.hpp)
// drain the rest: every item claimed once, the victim's item with exactly
// one terminal event, the ledger and verify clean (probe/end_checks.hpp).
#pragma once

#include "probe/scenario.hpp"

namespace cplane::probe::reclaim {

// Every figure in print order, and every check, verify's included. Throws
// what the store throws while setting up, and std::runtime_error when the
// victim never claimed before the deadline. Every process it started is
// gone when it returns.
ScenarioResult run(const RunConfig& run);

}  // namespace cplane::probe::reclaim
