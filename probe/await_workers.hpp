// The end of a fault drill (key-race, retry-storm): once the queue is
// drained, its workers stop by themselves; the drill waits for them.
#pragma once

#include <vector>

#include "probe/fleet.hpp"

namespace cplane::probe {

// Unless `timed_out` is already true, waits until `workers` has no live
// process, reaping each slot's worker as it exits (its `running` cleared;
// one that did not exit 0 counted in `failures`), or until `deadline`
// (fleet::seconds_now()), when `timed_out` is set. Returns the moment the
// wait ended, then, when timed out, SIGKILLs and reaps every worker still
// running. `Fleet` has empty(), exited(pid) (the exit code once reaped,
// else nullopt) and kill(pid); `Slot` has `pid` and `running`.
template <class Fleet, class Slot>
double await_workers(Fleet& workers, std::vector<Slot>& slots, double deadline, bool& timed_out,
                     int& failures) {
  while (!timed_out && !workers.empty()) {
    if (fleet::seconds_now() > deadline) {
      timed_out = true;
      break;
    }
    for (auto& slot : slots) {
      if (!slot.running) continue;
      if (const auto code = workers.exited(slot.pid)) {
        slot.running = false;
        if (*code != 0) ++failures;
      }
    }
    fleet::sleep_for(0.005);
  }
  const double ended = fleet::seconds_now();
  for (auto& slot : slots) {
    if (slot.running && timed_out) workers.kill(slot.pid);
  }
  return ended;
}

}  // namespace cplane::probe
