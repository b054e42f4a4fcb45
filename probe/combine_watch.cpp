#include "probe/combine_watch.hpp"

#include <unistd.h>

#include "commands/testing.hpp"
#include "probe/fleet.hpp"
#include "storage/backend.hpp"

namespace cplane::probe {

storage::CombineArea* combine_area(ControlStore& store) {
  return testing::backend(store).combine_area();
}

BatchPhase batch_phase(const storage::CombineArea& area) {
  bool staged = false;
  for (std::uint32_t i = 0; i < storage::CombineArea::kSlots; ++i) {
    const auto state = area.state(i);
    if (state == storage::CombineArea::kTaken) return BatchPhase::running;
    if (state == storage::CombineArea::kStaged) staged = true;
  }
  return staged ? BatchPhase::staged : BatchPhase::none;
}

Combiner await_combiner(const storage::CombineArea& area,
                        const std::vector<std::pair<pid_t, int>>& slots, BatchPhase aim,
                        double patience) {
  const double give_up = fleet::seconds_now() + patience;
  Combiner seen;
  do {
    seen = {};
    const pid_t pid = area.combiner();
    for (std::size_t i = 0; pid != 0 && i < slots.size(); ++i) {
      if (slots[i].first == pid) seen = {static_cast<int>(i), batch_phase(area)};
    }
    if (seen.slot >= 0 && seen.phase == aim) return seen;
    ::usleep(20);
  } while (fleet::seconds_now() < give_up);
  return seen;
}

void CombinerKills::add(BatchPhase phase) {
  ++total;
  if (phase == BatchPhase::running) ++running;
  if (phase == BatchPhase::staged) ++staged;
}

void CombinerKills::print(ScenarioResult& out) const {
  out.count("combiner_kills", total);
  out.count("combiner_kills_before_commit", running);
  out.count("combiner_kills_all_staged", staged);
}

}  // namespace cplane::probe
