// The key-race scenario: concurrency keys under real contention, its
// workers, their journals and the judgement (cplane-probe --scenario
// key-race).
//
// One project, kKeys (10) concurrency keys named <project>/k0 .. k9, key i
// limited to limit_of(i) = 1 + i % 3 live leases (1..3), and M items
// (default 2,000) queued over the keys in runs of kBlock (so that the head
// of the queue holds several items of a key, and keys fill). W worker
// processes (default 16) drain them: each claims (lease kLease, 0.4 s),
// works 2-10 ms (one item in kLongEvery: kLongWork of the lease), and
// finishes done, heartbeating as a timer would whenever a third of the
// lease has passed since the claim or the last renewal. Meanwhile the
// probe, aiming by a shared flag file (byte `slot`: 1 while its worker works
// on an item, 2 while it works long), SIGSTOPs workers that hold an item
// for longer than the lease and SIGCONTs them afterwards (the stalled worker
// carries on: its heartbeat timer is due, so it renews, late, then
// finishes), and SIGKILLs others holding an item, starting a fresh worker
// in each one's place. Every other stall is aimed at a worker working long.
//
// A slot is a live lease: at any moment at most limit_of(i) items of key i
// may be claimed under a lease that has not lapsed. The scenario checks it
// three ways:
//   * the journals: every worker knows when it held an item. A claim's
//     answer came after its commit and a finish was sent before its commit,
//     so the stretch from a claim's answer (t1) to its finish's call (t0),
//     cut at the lease end the worker was last told (a claim's or an
//     accepted heartbeat's), lies inside the time the store had the item
//     under a live lease. A heartbeat answered after the lease it extends
//     ended may have revived a lapsed lease: the stretch is cut at that end
//     and starts again at the heartbeat's answer. Per key, these stretches
//     must never overlap more than the limit;
//   * the log: every keyed item's events replayed in log order (apply):
//     after each claim and each lease extension, the key's items under a
//     live lease at that event's time must be at most the limit; and verify
//     (concurrency_exceeded, rate_exceeded, limit_row_*) finds nothing;
//   * the store's own view: the probe samples limits(now) all along, and
//     `live` must never exceed the limit.
// Besides: every claim's lease still live when its worker was told it
// (answered before its end: a lease that had lapsed by then was never the
// worker's to use), every item done exactly once (check_ledger), every
// key's items all done, every accepted finish in the log and none told
// twice.
//
// A stall lands outside any store call: a worker clears its flag before
// each call (heartbeats included) and sets it again after, and the probe,
// once the worker shows as stopped, lets it go at once if its flag is clear
// (stalls_let_go): a process stopped inside a transaction stalls everyone
// (crash-writes and combiner-kill cover that), not only its own lease.
//
// Each worker appends one line per answer to its journal with a single
// write(2), so that a killed worker's journal holds every answer it had.
// Every line has the same eight fields, separated by one space ("-" for an
// empty text):
//
//   kind item key fence lease_end result t0 t1
//
//   O  the worker started: item is its owner
//   C  claim: result claimed (item, key, fence, lease_end) or busy
//   H  heartbeat(item, fence): result accepted (lease_end: the new end), a
//      FenceRejected reason, or busy
//   F  finish(item, fence, done): result accepted, a FenceRejected reason,
//      or busy
//   E  the worker found nothing left to do and exited
//
// t0 is taken just before the call and t1 just after, as now_micros (the
// clock SQLite's commands read; a local PostgreSQL server's is the same
// host's). A claim that found nothing is not journaled.
#pragma once

#include "probe/scenario.hpp"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <cplane/cplane.hpp>

namespace cplane::probe::keys {

inline constexpr int kKeys = 10;
inline constexpr int kBlock = 5;           // items queued in runs of 5 of one key
inline constexpr double kLease = 0.4;      // seconds
inline constexpr int kLongEvery = 37;      // one item in 37 works long (prime: every key gets some)
inline constexpr double kLongWork = 1.5;   // of the lease

// Key i's limit: 1, 2, 3, 1, 2, ...
inline std::uint32_t limit_of(int key) { return 1 + static_cast<std::uint32_t>(key % 3); }
// The key of the n-th item queued: k0 x5, k1 x5, ..., k9 x5, k0 x5, ...
inline int key_of_item(std::int64_t n) { return static_cast<int>((n / kBlock) % kKeys); }
// Key i of a run's project.
std::string key_name(const std::string& project, int key);

enum class EntryKind : char {
  opened = 'O',
  claimed = 'C',
  heartbeat = 'H',
  finished = 'F',
  exited = 'E',
};

struct Entry {
  EntryKind kind = EntryKind::claimed;
  std::string item;      // O: the owner
  std::string key;
  Fence fence = 0;
  Micros lease_end = 0;  // C, and an accepted H: the lease's end as told
  std::string result;    // claimed, accepted, busy, or a FenceRejected reason
  Micros t0 = 0, t1 = 0;
};

struct Journal {
  std::string owner;
  std::vector<Entry> entries;  // in the order the worker made its calls
  std::int64_t malformed_lines = 0;
};

// Reads a journal, however far it got (an absent file is an empty journal).
Journal read_journal(const std::string& path);

// One worker's process (cplane-probe --worker keys).
struct WorkerConfig {
  std::string store;
  std::string project;  // its actor: it claims from this project only
  std::string owner;
  std::string journal;  // appended to
  int gate_fd = -1;     // the start gate (fleet::StartGate), if any
  std::string flags;    // the shared flag file
  int slot = -1;        // its byte there
  bool combine = true;  // SQLite's group commit
};
// 0 once nothing is left to do (nothing ready or claimed); 1 when a call
// failed otherwise (the journal says how far it got).
int run_worker(const WorkerConfig& config);

// Every count the judgement makes; the scenario turns them into checks.
struct Findings {
  // The journals.
  std::int64_t journals = 0, journals_incomplete = 0, malformed_lines = 0;
  std::int64_t claims_told = 0, heartbeats_accepted = 0, heartbeats_refused = 0;
  std::int64_t finishes_accepted = 0, finishes_refused = 0, busy_told = 0;
  std::int64_t late_heartbeats_accepted = 0;  // answered after the lease they extend ended
  std::int64_t late_finishes_accepted = 0;    // sent after the lease ended
  std::int64_t claims_answered_lapsed = 0;    // the claim's lease had ended by its answer
  std::string first_lapsed_claim;
  std::vector<double> claim_latency;          // seconds, t1 - t0 of each claim told
  std::map<std::string, std::int64_t> journal_max_held;  // per key: most stretches at once
  std::int64_t journal_overlaps = 0;  // moments (stretch starts) over a key's limit
  std::string first_overlap;          // the first of them, described
  // The log.
  std::map<std::string, std::int64_t> log_max_live;  // per key, at claims and extensions
  std::int64_t log_over_limit = 0;    // events after which a key had more live than its limit
  std::string first_log_over;
  // The journals against the log.
  std::int64_t accepts_not_logged = 0;   // told accepted, yet not the item's done under that fence
  std::int64_t finishes_told_twice = 0;  // items two workers were told their finish was accepted
  std::int64_t claims_not_logged = 0;    // told claimed, no such claim (owner, fence) in the log
};

// `ledger`: every item's events (ControlStore::events), by item id;
// `limits`: each key's limit.
Findings judge(const std::vector<Journal>& journals,
               const std::map<std::string, std::vector<StoredEvent>>& ledger,
               const std::map<std::string, std::uint32_t>& limits);

// The probe's side: sets up the project, the limits and the queue, runs the
// fleet with its stalls and kills, judges. The caller adds verify's checks
// (check_ledger does, here).
struct ScenarioConfig {
  std::string store;
  std::string project;  // created here
  std::string scratch;  // a directory for the journals and the flag file
  int workers = 16;
  std::int64_t items = 2'000;
  double deadline = 0;  // fleet::seconds_now() after which the run gives up (FAIL)
  bool combine = true;  // SQLite's group commit, for every process of the run
};
ScenarioResult run(const ScenarioConfig& config);

}  // namespace cplane::probe::keys
