// The combiner-kill scenario (cplane-probe --scenario combiner-kill), SQLite
// with group commit only: W drain workers (probe/drain.hpp) drain M items
// while the probe SIGKILLs whichever worker holds the combiner's lock
// (probe/combine_watch.hpp), again and again (at most 60, each replaced at
// once), alternately while its batch's requests run (before COMMIT) and
// once every answer is staged (at or after COMMIT, before they are handed
// out). The next holder of the lock recovers each dead combiner's batch
// (commands/combine.cpp): no item may be lost or finished twice, no
// survivor may fail or wait out its lock timeout, and the ledger and verify
// must be clean (probe/end_checks.hpp).
#pragma once

#include "probe/scenario.hpp"

namespace cplane::probe::combiner {

// Every figure in print order, and every check, verify's included; on a
// store with no group-commit area, a failed check and nothing else is
// done. Throws what the store throws while setting up. Every process it
// started is gone when it returns.
ScenarioResult run(const RunConfig& run);

}  // namespace cplane::probe::combiner
