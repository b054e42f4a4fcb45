// Watching SQLite's group commit from outside (storage/sqlite/combine_area.hpp):
// which worker combines, and where its batch stands, so that a SIGKILL can
// be aimed at it (crash-writes, combiner-kill).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include <cplane/cplane.hpp>

#include "probe/scenario.hpp"
#include "storage/sqlite/combine_area.hpp"

namespace cplane::probe {

// The store's group-commit area, or nullptr: PostgreSQL, or SQLite with
// group commit off or unavailable.
storage::CombineArea* combine_area(ControlStore& store);

// Where the combiner's batch stands, as its slots show it: `running` while
// some request it took has no answer yet (its transaction is open, before
// COMMIT), `staged` once every one has (committing, or committed and not
// yet handed out), `none` between batches.
enum class BatchPhase { none, running, staged };
BatchPhase batch_phase(const storage::CombineArea& area);

struct Combiner {
  int slot = -1;  // the combiner's slot in the fleet, -1 when no worker combines
  BatchPhase phase = BatchPhase::none;
};

// Watches the area for up to `patience` seconds until it names one of the
// workers in `slots` (pid, worker id) as the combiner with its batch in
// phase `aim`; else what it showed last (possibly no worker).
Combiner await_combiner(const storage::CombineArea& area,
                        const std::vector<std::pair<pid_t, int>>& slots, BatchPhase aim,
                        double patience);

// Kills of the combiner, by where its batch stood (batch_phase) just
// before the SIGKILL.
struct CombinerKills {
  std::int64_t total = 0, running = 0, staged = 0;
  void add(BatchPhase phase);
  // combiner_kills, combiner_kills_before_commit, combiner_kills_all_staged
  void print(ScenarioResult& out) const;
};

}  // namespace cplane::probe
