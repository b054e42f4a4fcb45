// The allocate-race scenario's sessions, journals and their judgement
// (cplane-probe --scenario allocate-race; the judgement in allocate_race.cpp,
// the sessions and the probe's side in allocate_race_run.cpp).
//
// Each session runs in a process of its own and drains one project through
// allocate_next(apply): given an item, it finishes it (done), gives it back
// (release) or, now and then, asks for a short lease and lets it lapse
// (abandons it). Meanwhile the control plane (the probe's own process) puts
// items on the terminal path and takes them off, and requests changes on
// pull requests whose author is one of the sessions, or approves them.
//
// Each session keeps a journal: one line per answer the store gave it, with
// the wall-clock bounds of the call, t0 taken just before it and t1 just
// after, on the store's clock (now_micros). Every line has the same ten
// fields, separated by one space; no name holds a space, and "-" stands for
// an empty text:
//
//   kind item result fence lease_end until skipped_total skipped t0 t1
//
//   A  allocate_next(apply): result assigned (item, fence, lease_end), wait
//      (until) or no_safe_work; skipped lists the candidates passed over,
//      as id:r (routed_to_author) or id:f (foreign_lease), joined by commas
//   P  allocate_next(preview): result preview (item, fence), wait or
//      no_safe_work, as A
//   F  finish(item, fence, done): result ok or the refusal
//   R  release(item, fence): result ok or the refusal
//   X  the session abandons the item it was just given: its lease (ending
//      at lease_end) lapses, and another session may take it over
//   C  an item close_session released
//
// The judgement reads every journal, each item's events and what the
// control plane did, and holds them to each other:
//   * the ledger, item by item: each assignment takes a ready or lapsed
//     item, never a live or terminal one, under the fence one above the
//     last; never gives a changes_requested item to anyone but its author;
//     each item is finished exactly once, done, by its holder;
//   * the allocator's choice, exactly: every write is stamped and sequenced
//     under the store's write lock, so the state an assignment was decided
//     on is the fold of every event before it in the log, at the time it
//     carries. The rules, restated here (terminal path first, then priority,
//     then queue order; routing, foreign leases, the session's own items),
//     must choose the same item and list the same skipped candidates;
//   * every wait and no_safe_work the sessions were told is what the rules
//     give for some state the project was in while the call ran (from the
//     state as of t0, which every write stamped before t0 had committed to,
//     up to the last event stamped by t1), at a clock in [t0, t1]: so no
//     session is told to wait while work it may take stands by;
//   * the journals against the ledger, one to one: every assignment, finish
//     and release a session was told of is in the log, and everything in
//     the log was told to its session; every change the control plane was
//     told it made is in the log;
//   * exclusivity in real time, from the journals alone: a session holds an
//     item from the moment it is told so (t1) until it starts to give it
//     back or finish it (t0), or its lease ends if it abandoned it; no two
//     such intervals on one item overlap.
// Previews read a snapshot without the write lock, whose place in the log
// the probe cannot pin down: they are judged against a wider window and
// counted, not required.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <cplane/cplane.hpp>

#include "probe/scenario.hpp"

namespace cplane::probe::alloc {

enum class EntryKind : char {
  applied = 'A',
  preview = 'P',
  finished = 'F',
  released = 'R',
  abandoned = 'X',
  session_closed = 'C',
};

struct Skip {
  std::string item;
  char reason = 'f';  // 'r' routed_to_author, 'f' foreign_lease
  bool operator==(const Skip&) const = default;
};

struct Entry {
  EntryKind kind = EntryKind::applied;
  std::string item;
  std::string result;    // A, P: the outcome; F, R: ok or the refusal
  Fence fence = 0;       // A and P (assigned, preview), F, R, X
  Micros lease_end = 0;  // A (assigned), X
  Micros until = 0;      // A, P (wait)
  std::int64_t skipped_total = 0;
  std::vector<Skip> skipped;  // A, P: as listed (at most kMaxSkippedListed)
  Micros t0 = 0, t1 = 0;
};

struct Journal {
  std::string session;
  std::vector<Entry> entries;  // in the order the session made its calls
};

// Writes atomically (a temporary file renamed into place); read_journal
// throws std::runtime_error for a missing or malformed journal.
void write_journal(const std::string& path, const Journal& journal);
Journal read_journal(const std::string& path);

// One session's process (cplane-probe --worker allocate).
struct SessionConfig {
  std::string store;
  std::string project;   // the session's actor: it sees this project only
  std::string session;
  std::string journal;   // where the journal goes
  int gate_fd = -1;      // the start gate (fleet::StartGate), if any
  double lease = 30;     // the lease it asks for
  double abandon_probability = 0;
  double abandon_lease = 0.25;  // the lease it asks for when it will abandon
  double give_up = 120;  // seconds: then it stops, its journal says how far it got
};
// 0 when every call went through and the project drained; the journal is
// written either way.
int run_session(const SessionConfig& config);

// What the control plane did, as it was told.
struct Observation {
  enum class Kind { enter_path, leave_path, review } kind = Kind::enter_path;
  std::string item;
  ReviewState review = ReviewState::none;  // review
  bool changed = false;
  Micros t0 = 0, t1 = 0;
};

// Every count the scenario reports; the probe decides PASS from them.
struct Findings {
  // What the sessions were told.
  std::int64_t rounds = 0;  // allocate_next(apply) calls
  std::int64_t assigned = 0, wait = 0, no_safe_work = 0;
  std::int64_t finishes_ok = 0, finishes_refused = 0;
  std::int64_t releases_ok = 0, releases_refused = 0;
  std::int64_t abandoned = 0, released_by_close = 0;
  std::int64_t told_routed_skips = 0, told_foreign_skips = 0;
  std::int64_t contended_assignments = 0;  // told assigned with something skipped
  std::int64_t previews = 0;
  // The ledger, item by item.
  std::int64_t items = 0, assigned_events = 0, released_events = 0, finished_done = 0;
  std::int64_t items_done_once = 0;         // exactly one finish, done, and the row says done
  std::int64_t items_never_assigned = 0, items_finished_twice = 0, items_not_done = 0;
  std::int64_t finished_by_non_holder = 0;  // under a fence that was not the current one
  std::int64_t assigned_over_live_lease = 0, assigned_after_terminal = 0;
  std::int64_t fence_violations = 0;        // an assignment not exactly one above the last
  std::int64_t max_concurrent_holders = 0;  // by the ledger's own times
  std::int64_t routing_violations = 0;      // a changes_requested item to another session
  std::int64_t routed_assignments = 0;      // ... to its author
  std::int64_t handovers_by_lapse = 0, handovers_after_release = 0;
  std::int64_t terminal_path_entered = 0, terminal_path_left = 0, review_changes = 0;
  std::int64_t foreign_events = 0;          // claimed, lease_extended, closed, ... on probe items
  std::int64_t stamps_out_of_order = 0;     // later in the log, earlier on the clock
  // The allocator's choices against the rules, at each assignment's place.
  std::int64_t plans_checked = 0;
  std::int64_t choice_mismatches = 0;       // the rules would have chosen another item
  std::int64_t skip_mismatches = 0;         // the skipped list or total told differs
  std::int64_t lease_mismatches = 0;        // lease_end is not the event's time + the lease
  std::int64_t assigned_on_terminal_path = 0;
  std::int64_t terminal_skipped_for_another = 0;  // a path item skipped, a later one chosen
  std::int64_t chosen_below_skipped_priority = 0;  // a higher priority skipped, a lower chosen
  // Waits and no_safe_work against the states the project was in meanwhile.
  std::int64_t idle_exact = 0;              // explained by exactly the state as of t0
  std::int64_t idle_unexplained = 0;        // no state in the window gives that answer
  std::int64_t idle_while_work_stood_by = 0;  // an item it could take sat untouched all along
  // Previews (a statistic): explained by a state in a window opened a
  // second before t0.
  std::int64_t previews_explained = 0, previews_unexplained = 0;
  // The journals against the ledger.
  std::int64_t unledgered_answers = 0;   // told assigned, not so in the log
  std::int64_t untold_assignments = 0;   // in the log, told to nobody
  std::int64_t finish_mismatches = 0;    // told vs logged, either way
  std::int64_t release_mismatches = 0;   // told vs logged, either way
  std::int64_t observation_mismatches = 0;
  std::int64_t malformed_answers = 0;    // an outcome or skip the API does not have
  // Exclusivity in real time, from the journals.
  std::int64_t max_concurrent_believers = 0;
  std::int64_t handovers_observed = 0;
  double tightest_handover_ms = 0;
};

// `ledger`: each probe item's events (ControlStore::events), by item id.
// `lease` and `abandon_lease`: what the sessions asked for (SessionConfig).
Findings judge(const std::vector<Journal>& journals,
               const std::map<std::string, std::vector<StoredEvent>>& ledger,
               const std::vector<Observation>& observations, Micros lease, Micros abandon_lease);

// The probe's side: sets up the project and its items (one session, s0, the
// author of about a third of the prs), runs the sessions and the control
// plane, judges. Every figure in print order, and every check, verify's
// included. Throws what the store throws while setting up; a session's
// failure is a failed check. Every process it started is gone when it
// returns.
ScenarioResult run(const RunConfig& run);

}  // namespace cplane::probe::alloc
