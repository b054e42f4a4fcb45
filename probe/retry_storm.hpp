// The retry-storm scenario: its workers, their journals and the judgement
// (cplane-probe --scenario retry-storm).
//
// W worker processes (default 16) drain M items (default 2,000) queued in a
// project whose retry policy allows kMaxAttempts (3) attempts with a backoff
// of kBackoff (fixed:1ms). Each worker claims (lease kLease, 0.3 s), works
// a millisecond or two, then reports done or, kFailProbability (40%) of the
// time, failed. Now and then a worker (one at a time) stalls past its lease
// and waits until the item has moved on (reclaimed, or failed as
// exhausted) before it reports: that late report must be refused (unless
// nobody took the item within the stall's cap: a lapsed lease nobody
// reclaimed still accepts its fence).
// Meanwhile the probe SIGKILLs workers while they hold an item (half of the
// kills aimed at a worker holding an item's last attempt) and replaces each
// with a fresh one, so that leases lapse: a lapsed item with attempts left
// is reclaimed once its lease has ended, one with none left is failed by
// the next claim ("lease lapsed, attempts exhausted").
//
// While a worker holds an item its byte in a shared flag file (byte `slot`)
// is the attempt number it holds; 0 otherwise (and while it stalls). The
// probe aims its kills by it. The file's last byte is the stall token.
//
// Each worker keeps a journal, appended one line per answer with a single
// write(2), so that a killed worker's journal holds every answer it had
// been given before the kill. Every line has the same nine fields,
// separated by one space; "-" stands for an empty text:
//
//   kind item fence attempt outcome result late t0 t1
//
//   O  the worker started: item is its owner name
//   C  claim: result claimed (item, fence, attempt) or busy
//   F  finish(item, fence, outcome): result accepted, a FenceRejected
//      reason (stale_fence, terminal, ...) or busy; late 1 when the worker
//      stalled past its lease first
//   E  the worker found nothing left to do and exited
//
// t0 is taken just before the call and t1 just after, on the store's clock
// (now_micros). A claim that found nothing is not journaled.
//
// The judgement reads each item's events and every journal:
//   * the ledger, item by item, under the rules (projections/rules.hpp):
//     each claim takes a claimable item (ready, due, or lapsed with attempts
//     left) under the fence one above the last, its attempt number equal to
//     its fence, at most kMaxAttempts of them; each claim has exactly one
//     end: a report under its fence (attempt_failed while attempts remain,
//     waiting exactly the backoff; done; failed once none remain), the next
//     claim after its lease lapsed, or, for a lapsed last attempt, the
//     control plane's failed "lease lapsed, attempts exhausted"; exactly one
//     terminal event per item, and a failed item had exactly kMaxAttempts
//     claims;
//   * the journals against the ledger: every claim a worker was told is in
//     the log under its owner; every report it was told was accepted is the
//     end of its claim, as the outcome it reported, exactly once; every
//     refused report is not in the log, and its reason is one the rules
//     (fence_refusal) give for a state the item was in while the call ran
//     (from its claim up to the last event stamped by t1); every claim and
//     report in the log was told to its worker, but for the last answer of a
//     killed worker (the kill may land between the commit and the journal).
#pragma once

#include "probe/scenario.hpp"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <cplane/cplane.hpp>

namespace cplane::probe::storm {

inline constexpr std::uint32_t kMaxAttempts = 3;
inline constexpr const char* kBackoff = "fixed:1ms";
inline constexpr Micros kBackoffMicros = 1'000;
inline constexpr double kLease = 0.3;              // seconds
inline constexpr double kFailProbability = 0.4;
// The detail of the control plane's failed for a lapsed last attempt, as the
// API states it (restated: the probe judges the store, not agrees with it).
inline constexpr const char* kExhaustedDetail = "lease lapsed, attempts exhausted";

enum class EntryKind : char {
  opened = 'O',
  claimed = 'C',
  reported = 'F',
  exited = 'E',
};

struct Entry {
  EntryKind kind = EntryKind::claimed;
  std::string item;      // O: the owner
  Fence fence = 0;
  std::uint32_t attempt = 0;
  std::string outcome;   // F: done or failed
  std::string result;    // C: claimed or busy; F: accepted, the refusal's reason, or busy
  bool late = false;     // F: reported after stalling past the lease
  Micros t0 = 0, t1 = 0;
};

struct Journal {
  std::string owner;
  std::vector<Entry> entries;  // in the order the worker made its calls
  std::int64_t malformed_lines = 0;
};

// Reads a journal, however far it got (an absent file is an empty journal).
Journal read_journal(const std::string& path);

// One worker's process (cplane-probe --worker storm).
struct WorkerConfig {
  std::string store;
  std::string project;   // its actor: it claims from this project only
  std::string owner;
  std::string journal;   // appended to
  int gate_fd = -1;      // the start gate (fleet::StartGate), if any
  double lease = kLease;
  std::string flags;     // the shared flag file
  int slot = -1;         // its byte there
  double stall_probability = 0;  // per attempt, at most once per worker, one at a time
  double stall_cap = 5;  // seconds a stalled worker waits at most for the item to move on
};
// 0 once nothing is left to do (nothing ready, scheduled or claimed); 1
// when a call failed otherwise (the journal says how far it got).
int run_worker(const WorkerConfig& config);

// Every count the scenario reports; the probe decides PASS from them.
struct Findings {
  // The ledger, item by item.
  std::int64_t items = 0;
  std::int64_t claim_events = 0, attempt_failed_events = 0, done_events = 0;
  std::int64_t failed_events = 0;     // a worker's failed finish (terminal)
  std::int64_t exhausted_events = 0;  // the control plane's failed for a lapsed last attempt
  std::int64_t lease_expired_events = 0;  // a sweep someone else ran: allowed, not an end
  std::int64_t foreign_events = 0;    // released, assigned, cancelled, ... on storm items
  std::int64_t items_done = 0, items_failed_after_last = 0, items_exhausted_by_lapse = 0;
  std::int64_t items_not_ended_once = 0;  // not exactly one terminal event
  std::int64_t items_left_open = 0;       // no terminal event, or the row is not terminal
  std::int64_t policy_mismatches = 0;     // queued without the project's policy
  std::int64_t failed_without_all_attempts = 0;  // failed with other than kMaxAttempts claims
  std::int64_t done_over_limit = 0;       // done after more than kMaxAttempts claims
  std::int64_t max_claims_per_item = 0;
  std::int64_t fence_gaps = 0;            // a claim's fence not one above the last (from 1)
  std::int64_t attempt_mismatches = 0;    // a claim's attempt number not its fence
  std::int64_t claims_against_rules = 0;  // not claimable when it was made
  std::int64_t ends_unmatched = 0;        // an end with no open claim under its fence
  std::int64_t claims_unended = 0;        // a claim with no end
  std::int64_t ends_against_rules = 0;    // attempt_failed without attempts left, and so on
  std::int64_t backoff_mismatches = 0;    // retry_at not the failure's time + the backoff
  std::int64_t lapses_reclaimed = 0;      // claims ended by the next claim
  std::int64_t stamps_out_of_order = 0;   // an event stamped before the one before it
  // The journals.
  std::int64_t journals = 0, journals_incomplete = 0, malformed_lines = 0;
  std::int64_t claims_told = 0, reports_told = 0, accepted = 0, busy_told = 0;
  std::map<std::string, std::int64_t> refused;  // by reason
  std::int64_t late_reports = 0, late_accepted = 0;
  // The journals against the ledger.
  std::int64_t unledgered_claims = 0;     // told claimed, not so in the log
  std::int64_t unledgered_accepts = 0;    // told accepted, not the claim's end as reported
  std::int64_t refused_but_logged = 0;    // told refused (or busy), yet its claim ended by a report
  std::int64_t refusals_against_rules = 0;  // no state in the call's window gives that reason
  std::int64_t untold_events = 0;         // a claim or report in the log its worker was not told
  std::int64_t untold_last_of_killed = 0;  // ... the last answer of a killed worker (allowed)
  std::int64_t kills_left_lapsed = 0;     // killed workers whose last claim ended by a lapse
};

// `ledger`: each storm item's events (ControlStore::events), by item id.
// `killed`: the owners the probe SIGKILLed.
Findings judge(const std::vector<Journal>& journals,
               const std::map<std::string, std::vector<StoredEvent>>& ledger,
               const std::set<std::string>& killed);

// The probe's side: sets up the project, runs the fleet and its kills,
// judges. Everything it reports, in print order, and its checks; the
// caller adds verify's (and integrity_check's).
struct ScenarioConfig {
  std::string store;
  std::string project;  // created here, with the retry policy
  std::string scratch;  // a directory for the journals and the flag file
  int workers = 16;
  std::int64_t items = 2'000;
  double deadline = 0;  // fleet::seconds_now() after which the run gives up (FAIL)
};
using Result = ScenarioResult;  // probe/scenario.hpp
// Throws what the store throws while setting up; a worker's failure is a
// failed check. Every process it started is gone when it returns.
Result run(const ScenarioConfig& config);

}  // namespace cplane::probe::storm
