// The drain worker the queue scenarios share (concurrent-queue,
// kill-and-reclaim, lease-storm, crash-writes, combiner-kill), the queue
// they drain, and the statistics of what the workers saw.
#pragma once

#include "probe/fleet.hpp"
#include "probe/scenario.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include <cplane/cplane.hpp>

namespace cplane::probe::drain {

// One worker's process (cplane-probe --worker drain, or hold).
struct WorkerConfig {
  bool hold = false;   // hold: claim one item, write the record, wait to be killed
  std::string store;
  std::string project;  // its actor: it claims from this project only
  std::string owner;
  std::string record;   // fleet::WorkerRecord, written when it is done
  int gate_fd = -1;     // the start gate (fleet::StartGate), if any
  double lease = 30;
  double stall_probability = 0;  // per claim: sleep `stall` seconds before the finish
  double stall = 0;
  std::string flags;    // shared flag file: byte `slot` is 1 while inside a command
  int slot = -1;
  Durability durability = Durability::fenced;
};
// drain: claims and finishes done until nothing is ready or claimed, then
// writes its record and returns 0; a busy error or a refused finish is
// counted, any other error thrown. hold: 3 when there was nothing to
// claim, else never returns.
int run_worker(const WorkerConfig& config);

// Creates the run's project (titled "cplane probe <scenario>"), grants it
// itself as its actor and queues `items` items: their ids, in order.
std::vector<std::string> setup(const RunConfig& run, std::int64_t items);
// Queues items first .. first + count - 1 (payload {"n": i}) in `project`
// (retry-storm's queue too).
std::vector<std::string> enqueue_more(ControlStore& store, const std::string& project,
                                      std::int64_t first, std::int64_t count);

// What the workers' records add up to (figures: items, claimed, distinct,
// duplicate_claims or, with `reclaims_expected` (a claim of an item already
// claimed is a reclaim, as in lease-storm), repeat_claims, busy_errors,
// stale_reports_refused, per-worker claims, claim latency, longest wait;
// checks: no busy error reached a worker).
struct Stats {
  std::int64_t claimed = 0, distinct = 0, refused = 0;
};
Stats worker_stats(ScenarioResult& out, const std::vector<fleet::WorkerRecord>& records,
                   std::int64_t items, bool reclaims_expected = false);

}  // namespace cplane::probe::drain
