// The checks every scenario ends with: the ledger of a drained queue, item
// by item, and verify of the whole store.
#pragma once

#include "probe/scenario.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include <cplane/cplane.hpp>

namespace cplane::probe {

// Per item of `ids`: exactly one terminal event, status done, claim fences
// strictly rising, the finish under the last claim's fence, no claim while
// another lease held it; then check_verify. Its figures and checks go to
// `out`; returns the reclaims it counted (claims of an attempt above 1).
std::int64_t check_ledger(ScenarioResult& out, const std::string& store_url,
                          const std::vector<std::string>& ids);

// Verifies the whole store: its rows against the fold of its log; on
// SQLite (`store_url` names its file), the file too (PRAGMA
// integrity_check). The first problems of each go to stderr.
void check_verify(ScenarioResult& out, ControlStore& store, const std::string& store_url);

// The sessions a run opened (named <project>-s<n>) once it is over: how
// many there are, how many are still open, how many still hold an item.
struct SessionsLeft {
  std::int64_t seen = 0, open = 0, holding = 0;
};
SessionsLeft sessions_left(ControlStore& store, const std::string& project);

}  // namespace cplane::probe
