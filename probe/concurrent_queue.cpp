#include "probe/concurrent_queue.hpp"


#include "probe/drain.hpp"
#include "probe/end_checks.hpp"
#include "probe/workers.hpp"

namespace cplane::probe::queue {

using fleet::seconds_now;
using fleet::sleep_for;

ScenarioResult run(const RunConfig& run) {
  ScenarioResult out;
  const auto ids = drain::setup(run, run.items);
  Workers processes(run);
  fleet::StartGate gate;
  for (int w = 0; w < run.workers; ++w) processes.spawn("drain", w, &gate, 60);
  sleep_for(0.2);  // every worker connects
  const double t0 = seconds_now();
  gate.release();
  int failures = 0;
  const bool finished = processes.wait_all(run.deadline, failures);
  const double elapsed = seconds_now() - t0;
  const auto rs = processes.records(0, run.workers);
  out.count("workers", run.workers);
  const drain::Stats stats = drain::worker_stats(out, rs, run.items);
  out.fixed("elapsed_s", elapsed);
  out.fixed("items_per_s", run.items / elapsed, 0);
  out.count("worker_failures", failures);
  out.count("timed_out", finished ? 0 : 1);
  out.check(finished, "the drain finished before --timeout");
  out.check(failures == 0, "every worker exited cleanly");
  out.check(stats.claimed == run.items, "claimed == items");
  out.check(stats.distinct == run.items, "distinct == items");
  out.check(stats.claimed == stats.distinct, "no duplicate claims");
  check_ledger(out, run.store, ids);
  return out;
}

}  // namespace cplane::probe::queue
