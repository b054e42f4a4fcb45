// The lease-storm scenario (cplane-probe --scenario lease-storm): W drain
// workers (probe/drain.hpp) on leases of 0.2 s, 5% of whose reports stall
// 0.35 s, past the lease: every stale report is refused, each item ends
// with one terminal event, fences rise, no claim is made while a lease
// holds, the ledger and verify are clean (probe/end_checks.hpp); lapsed
// leases were reclaimed and stale reports refused (the storm happened).
#pragma once

#include "probe/scenario.hpp"

namespace cplane::probe::leases {

// Every figure in print order, and every check, verify's included. Throws
// what the store throws while setting up. Every process it started is gone
// when it returns.
ScenarioResult run(const RunConfig& run);

}  // namespace cplane::probe::leases
