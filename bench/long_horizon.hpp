// cplane-bench --scenario long-horizon: a steady (or bursty) offered load
// for as long as it is let run, sampled at fixed ticks: the long-horizon
// protocol of the public PostgreSQL job-queue benchmarks, configured by the
// environment and written as JSON lines, so that their scripts can read
// cplane beside the queues they measure.
//
// Processes: this one samples; one forked producer enqueues; WORKER_COUNT
// forked workers claim (blocking up to CLAIM_WAIT_MS for an item), sleep
// JOB_WORK_MS and finish. They report through one shared-memory region:
// counters, and per worker a bounded log-linear histogram of the claim
// latency (from the producer's enqueue call to the claim's answer, in
// microseconds: 64 exact buckets, then 32 per power of two, at most 3%
// off), cumulative; each sample merges the workers' histograms and takes
// the difference from the previous tick's.
//
// Output on stdout: one descriptor line ("kind":"descriptor": the system,
// the backend, the durability and every setting), then one line per tick
// ("kind":"sample"): t (seconds since the start, a multiple of
// SAMPLE_EVERY_S on the monotonic clock: ticks are absolute, so they do not
// drift), claim_p50_ms / claim_p95_ms / claim_p99_ms / claim_max_ms (null
// when nothing was claimed in the interval), claims, enqueue_rate and
// completion_rate (per second over the interval), queue_depth (ready +
// claimed items of the run at the tick: enqueued - completed, each counted
// once its commit returned), producer_lag (items owed by the clock but not
// yet enqueued), errors, late_ms (how late the tick was read). On SIGTERM,
// SIGINT or after DURATION_S, the children are stopped (within a few
// seconds; those that do not stop are killed, and each dies with this
// process in any case) and a last sample ("final":true, t the actual time)
// covers the rest, with the whole run's run_claims and run_claim_p50_ms /
// _p95_ms / _p99_ms; the exit code is 0, or 1 when a child failed.
//
// The environment (default in brackets; docs/benchmarks.md, "Long-horizon"):
//   DATABASE_URL       SQLite path or postgresql:// URL [a fresh SQLite file
//                      in a scratch folder, removed at exit]
//   PRODUCER_RATE      items per second offered [1000]; credit is
//                      rate x elapsed - produced, so a stall is caught up
//   PRODUCER_MODE      fixed (credit accrues continuously) or burst (each
//                      BURST_EVERY_S period's items are owed at its start)
//                      [fixed]
//   BURST_EVERY_S      burst mode's period [1]
//   PRODUCER_BATCH_MAX most items per enqueue transaction when behind [100]
//   WORKER_COUNT       worker processes [16]
//   JOB_PAYLOAD_BYTES  bytes of each item's JSON payload [256]
//   JOB_WORK_MS        a worker's sleep between claim and finish [0]
//   SAMPLE_EVERY_S     seconds between samples [1]
//   DURATION_S         seconds to run; 0: until SIGTERM or SIGINT [0]
//   DURABILITY         full, fenced or normal [fenced, the store's default]
//   COMBINE            on or off: SQLite's group commit [on]
//   CLAIM_WAIT_MS      how long a claim blocks for an item [100]
#pragma once

#include "bench/common.hpp"

namespace cplane::bench {

// Runs until SIGTERM, SIGINT or DURATION_S. Throws InvalidArgument for a
// malformed variable (before anything is created), std::runtime_error when
// a child fails (after the final sample).
void long_horizon_scenario(const Options& o, const Emit& emit);

}  // namespace cplane::bench
