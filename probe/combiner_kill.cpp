#include "probe/combiner_kill.hpp"

#include <signal.h>

#include <iostream>
#include <random>

#include <cplane/cplane.hpp>

#include "probe/combine_watch.hpp"
#include "probe/drain.hpp"
#include "probe/end_checks.hpp"
#include "probe/workers.hpp"

namespace cplane::probe::combiner {

using fleet::seconds_now;
using fleet::sleep_for;

ScenarioResult run(const RunConfig& run) {
  ScenarioResult out;
  const double lease = 0.5;  // a dead worker's item comes back soon
  const int max_kills = 60;
  ControlStore store{run.store};
  const storage::CombineArea* area = combine_area(store);
  out.count("workers", run.workers);
  out.count("items", run.items);
  if (area == nullptr) {
    std::cerr << "cplane-probe: combiner-kill needs a SQLite store with group commit on (its "
                 "area, PATH-combine); this store has none (PostgreSQL, or group commit off "
                 "or unavailable)\n";
    out.check(false, "the store has a group-commit area (SQLite)");
    return out;
  }
  const auto ids = drain::setup(run, run.items);
  Workers processes(run);
  std::vector<std::pair<pid_t, int>> slots;  // live worker per slot, with its id
  int next_id = 0;
  for (int w = 0; w < run.workers; ++w) {
    slots.emplace_back(processes.spawn("drain", next_id, nullptr, lease), next_id);
    ++next_id;
  }
  std::mt19937 rng(std::random_device{}());
  CombinerKills kills;
  int failures = 0, looks_without_combiner = 0;
  const double t0 = seconds_now();
  double next_count = t0;
  while (seconds_now() < run.deadline) {
    if (seconds_now() >= next_count) {  // counting reads every item: not each round
      const auto counts = store.status_counts(run.project);
      if (counts.ready == 0 && counts.claimed == 0) break;
      next_count = seconds_now() + 0.1;
    }
    sleep_for(std::uniform_real_distribution<double>(0.002, 0.03)(rng));
    if (kills.total >= max_kills) continue;
    const auto aim = kills.total % 2 == 0 ? BatchPhase::running : BatchPhase::staged;
    const Combiner combiner = await_combiner(*area, slots, aim, 0.05);
    if (combiner.slot < 0) {
      ++looks_without_combiner;
      continue;
    }
    const int code = processes.kill(slots[combiner.slot].first);
    if (code == 128 + SIGKILL) {
      kills.add(combiner.phase);
    } else if (code != 0) {
      ++failures;  // it had failed on its own before the kill
    }
    slots[combiner.slot] = {processes.spawn("drain", next_id, nullptr, lease), next_id};
    ++next_id;
  }
  const bool finished = processes.wait_all(run.deadline, failures);
  const double elapsed = seconds_now() - t0;
  // The records of the workers that finished (the killed left none).
  std::int64_t busy = 0, refused = 0;
  for (const auto& r : processes.records(0, next_id)) {
    busy += r.busy_errors;
    refused += r.refused;
  }
  out.count("workers_started", next_id);
  kills.print(out);
  out.count("looks_without_a_worker_combining", looks_without_combiner);
  out.count("worker_failures", failures);
  out.count("timed_out", finished ? 0 : 1);
  out.count("busy_errors", busy);
  out.count("stale_reports_refused", refused);
  out.fixed("elapsed_s", elapsed);
  out.check(finished && failures == 0,
            "every worker exited cleanly (none failed or hung) before --timeout");
  out.check(busy == 0, "no worker waited out its lock timeout (busy)");
  out.check(kills.total > 0, "the combiner was killed (the area named a worker combining)");
  check_ledger(out, run.store, ids);
  return out;
}

}  // namespace cplane::probe::combiner
