// The crash-writes scenario (cplane-probe --scenario crash-writes): W drain
// workers (probe/drain.hpp) drain M items while the probe SIGKILLs one at
// a random moment, again and again (at most 40), and replaces it at once.
// Each worker's byte in a shared flag file is 1 while it is inside a
// command, and a kill waits briefly for one to be. On SQLite with group
// commit every other kill aims at the worker combining a batch
// (probe/combine_watch.hpp), alternately while its requests run (before
// COMMIT) and once every answer is staged. Nothing may be lost or done
// twice and no command left half-done: the ledger and verify are clean,
// integrity_check ok (probe/end_checks.hpp).
#pragma once

#include "probe/scenario.hpp"

namespace cplane::probe::crash {

// Every figure in print order, and every check, verify's included. Throws
// what the store throws while setting up. Every process it started is gone
// when it returns.
ScenarioResult run(const RunConfig& run);

}  // namespace cplane::probe::crash
