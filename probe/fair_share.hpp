// The fair-share scenario: weighted round-robin across projects under a
// real fleet (cplane-probe --scenario fair-share).
//
// Project A (the run's project) gets M items (--items, default 100,000),
// then project B (<project>-b) kSmallItems (100), both at weight 1 and both
// granted to the run's actor. W drain workers (--workers, default 16; the
// shared drain worker, probe/drain.hpp) claim from both and finish each
// item at once. B's items were queued behind all of A's: without fairness
// they would start after A's M; with weights wA:wB a claim that can choose
// takes B's items at B's share, so B's last item must start within
//
//   bound = ceil(kSmallItems * (wA + wB) / wB * kSlack) + W
//
// claims of the drain's first (kSlack 1.1: a tenth of slack; W: the claims
// already in flight when B's turn comes). Each of B's items' wait is
// counted in claims (every claim of A or B whose claimed event comes before
// its own, by seq) and in seconds (its claimed event's time minus the
// drain's first claim's); the scenario reports B's p50, p99 and last, and
// checks the bound. On SQLite A's items are claimed in queue order
// (nothing is released or lapses; the check), so their claims are read in
// that order only until well past B's last; on PostgreSQL claims commit in
// any order, so that order is reported, not checked, and read further.
#pragma once

#include "probe/scenario.hpp"

#include <cstdint>

namespace cplane::probe::fair {

inline constexpr std::int64_t kSmallItems = 100;
inline constexpr double kSlack = 1.1;

ScenarioResult run(const RunConfig& run);

}  // namespace cplane::probe::fair
