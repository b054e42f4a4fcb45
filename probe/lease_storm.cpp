#include "probe/lease_storm.hpp"


#include "probe/drain.hpp"
#include "probe/end_checks.hpp"
#include "probe/workers.hpp"

namespace cplane::probe::leases {

using fleet::seconds_now;
using fleet::sleep_for;

ScenarioResult run(const RunConfig& run) {
  ScenarioResult out;
  const double lease = 0.2, stall = 0.35, stall_probability = 0.05;
  const auto ids = drain::setup(run, run.items);
  Workers processes(run);
  fleet::StartGate gate;
  for (int w = 0; w < run.workers; ++w) {
    processes.spawn("drain", w, &gate, lease, stall_probability, stall);
  }
  sleep_for(0.2);  // every worker connects
  const double t0 = seconds_now();
  gate.release();
  int failures = 0;
  const bool finished = processes.wait_all(run.deadline, failures);
  out.count("workers", run.workers);
  out.fixed("lease_s", lease);
  out.fixed("stall_s", stall);
  const drain::Stats stats =
      drain::worker_stats(out, processes.records(0, run.workers), run.items, true);
  out.fixed("elapsed_s", seconds_now() - t0);
  out.check(finished && failures == 0, "every worker finished before --timeout");
  const std::int64_t reclaims = check_ledger(out, run.store, ids);
  out.check(reclaims > 0, "lapsed leases were reclaimed (the storm happened)");
  out.check(stats.refused > 0, "stale reports were refused (the storm happened)");
  return out;
}

}  // namespace cplane::probe::leases
