// The assign-race scenario: its sessions, their journals and the judgement
// (cplane-probe --scenario assign-race; the judgement in assign_race.cpp,
// the sessions and the probe's side in assign_race_run.cpp).
//
// S sessions, each in its own process, race for a few pr items with
// assign_and_lease while the control plane (the probe's own process) moves
// heads, closes held items (replacing each with a new item) and three times
// holds the write lock past a lease's length. R2: no two sessions ever hold
// one item at one moment.
//
// Each session runs in a process of its own and keeps a journal: one line
// per answer the store gave it, with the wall-clock bounds of the call, t0
// taken just before it and t1 just after, on the store's clock
// (now_micros). Every line has the same thirteen fields, separated by one
// space; no name holds a space, and "-" stands for an empty text:
//
//   kind item result fence lease_end until head write purpose action seen_seq t0 t1
//
//   A  assign_and_lease: result assigned (fence, lease_end, head pinned),
//      wait (until) or no_safe_work
//   E  a lease session_heartbeat extended: lease_end
//   R  release(item, fence): result ok or the refusal
//   G  a gate verdict: write 1 for record_mutation, 0 for
//      require_valid_assignment; result allowed or the reason; the
//      fence, action and head presented; purpose says why (work, check,
//      merge, stall, stale, lost, final); seen_seq is the item's last_seq
//      as read just before the call
//   C  an item close_session released
//
// The judgement reads every journal, each item's events and what the
// control plane did, and holds them to each other:
//   * the ledger: each assignment takes a lapsed or ready item, never a live
//     or terminal one, under the fence one above the last; each mutation
//     recorded passes the gate's rules at its own place in the log;
//   * the journals against the ledger, one to one: every assignment,
//     renewal, extension, release and allowed mutation a session was told
//     of is in the log, and everything in the log was told to its session;
//   * R2 in real time, from the journals alone: a session holds an item from
//     the moment it is told so (t1) until its lease ends as last told, or it
//     starts to give it back (t0); no two such intervals on one item overlap;
//   * every gate verdict is one the rules give for some state the item was
//     in while the call ran (from seen_seq up to the last event whose time
//     is not after t1), at t0 or t1;
//   * the gate judges a lease when it decides: the control plane now and then
//     holds the store's write lock past a lease's length (as a writer stopped
//     inside a transaction would), so that every record_mutation that starts
//     meanwhile decides only after it lets go. One whose lease had ended by
//     then must be denied, however early it started.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <cplane/cplane.hpp>

#include "probe/scenario.hpp"

namespace cplane::probe::race {

enum class EntryKind : char {
  answer = 'A',
  extended = 'E',
  released = 'R',
  gate = 'G',
  session_closed = 'C',
};

struct Entry {
  EntryKind kind = EntryKind::answer;
  std::string item;
  std::string result;    // A: the outcome; R: ok or the refusal; G: allowed or the reason
  Fence fence = 0;       // A (assigned), R, G
  Micros lease_end = 0;  // A (assigned), E
  Micros until = 0;      // A (wait)
  std::string head;      // A: the head pinned; G: the head presented ("" for none)
  bool write = false;    // G: record_mutation rather than require_valid_assignment
  std::string purpose;   // G
  std::string action;    // G
  Seq seen_seq = 0;      // G
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

// What the control plane did, as it was told.
struct Observation {
  enum class Kind { head, close } kind = Kind::head;
  std::string item;
  bool changed = false;
  Micros t0 = 0, t1 = 0;
};

// The control plane held the store's write lock from `held` (stamped once
// it had it) to `letting_go` (stamped before it let go): no write that
// started after `held` decided before `letting_go`.
struct WriterStall {
  Micros held = 0, letting_go = 0;
  // The item whose row lock was held (PostgreSQL, where writers lock rows),
  // or "" for the whole store's write lock (SQLite).
  std::string item;
};

// The gate's rules as the API states them (store.hpp, GateReason), restated
// here so that the probe judges the store instead of agreeing with it by
// construction: no_live_lease (another session's item, or no live lease;
// the holder on record of a terminal item is not refused for its lease),
// then stale_fence, work_terminal, action_not_allowed, head_drift (the head
// moved since it was pinned, even if back to the pinned one:
// `moved_since_pinned`, which the probe folds itself; or `head` is not the
// pinned one). "" for `head` presents none. nullopt: allowed.
std::optional<GateReason> expected_refusal(const ItemRow& row, bool moved_since_pinned,
                                           const std::string& session, Fence fence,
                                           const std::string& action, const std::string& head,
                                           Micros at);

// Every count the scenario reports; the probe decides PASS from them.
struct Findings {
  // What the sessions were told.
  std::int64_t rounds = 0;  // assign_and_lease calls
  std::int64_t assigned = 0, renewals = 0, wait = 0, no_safe_work = 0;
  std::int64_t extensions_told = 0, releases_ok = 0, releases_refused = 0;
  std::int64_t released_by_close = 0;
  std::int64_t gate_calls = 0, allowed = 0, allowed_writes = 0;
  std::map<std::string, std::int64_t> denials;  // by reason, every reason present
  std::int64_t stall_presentations = 0, stall_allowed = 0;
  std::int64_t stale_presentations = 0, stale_denied_as_stale_fence = 0;
  std::int64_t lost_presentations = 0, lost_allowed = 0;
  std::int64_t merge_presentations = 0;
  // The ledger.
  std::int64_t items = 0, assigned_events = 0, extended_events = 0, released_events = 0;
  std::int64_t mutations_recorded = 0, head_moves = 0, closes = 0;
  std::int64_t handovers_by_lapse = 0, handovers_after_release = 0;
  std::int64_t max_concurrent_holders = 0;     // by the ledger's own times
  std::int64_t assigned_over_live_lease = 0, assigned_after_terminal = 0;
  std::int64_t fence_violations = 0;           // not exactly one above the last
  std::int64_t extensions_of_dead_leases = 0;  // another fence, or a lapsed lease
  std::int64_t mutations_against_rules = 0;
  std::int64_t foreign_events = 0;             // claimed, done, failed, ... on race items
  // The journals against the ledger.
  std::int64_t unledgered_answers = 0;         // told assigned, renewal not in the log
  std::int64_t untold_assignments = 0;         // in the log, told to nobody
  std::int64_t unledgered_extensions = 0, untold_extensions = 0;
  std::int64_t release_mismatches = 0;         // told vs logged, either way
  std::int64_t mutation_mismatches = 0;        // allowed writes vs mutation_recorded, either way
  std::int64_t observation_mismatches = 0;     // head moves and closes told vs logged
  std::int64_t lease_shortened = 0;            // a session told a lease ends earlier than before
  // R2 in real time, from the journals.
  std::int64_t max_concurrent_believers = 0;
  std::int64_t handovers_observed = 0;         // one session's hold followed by another's
  double tightest_handover_ms = 0;             // the shortest gap between them
  // A gate that allows is answered before the lease it allows under ends,
  // and never while another session holds the item (by the journals'
  // clocks: a verdict returned late by a hair is not proof of a fault).
  std::int64_t allowed_after_lease_end = 0;
  std::int64_t allowed_during_other_hold = 0;
  double latest_allowed_ms = 0;                // the latest, after its lease end (0: none)
  // Behind a writer stall, where the decision came after the lease ended
  // for certain.
  std::int64_t gates_behind_writer_stall = 0;  // record_mutation calls started during one
  std::int64_t allowed_on_lapsed_lease = 0;    // of those: allowed, the lease ended before
  std::int64_t renewed_after_lapse = 0;        // assign renewals and heartbeats, likewise
  // Events stamped earlier than the item's event before them (a stamp is
  // taken before the write lock is had).
  std::int64_t stamps_out_of_order = 0;
  // Answers and verdicts against the states the item was in meanwhile.
  std::int64_t verdicts_exact = 0, verdicts_ambiguous = 0, verdict_mismatches = 0;
  std::int64_t unplaced_verdicts = 0;          // seen_seq not among the item's events
  std::int64_t verdicts_on_head_moved_back = 0;  // the holder's, the head back where pinned
  std::int64_t waits_unbacked = 0;             // no other session's lease ends at `until`
  std::int64_t no_safe_work_unbacked = 0;      // the item was not closed by then
  std::int64_t answered_after_close = 0;       // assigned or wait after the close returned
};

// `ledger`: each race item's events (ControlStore::events), by item id.
Findings judge(const std::vector<Journal>& journals,
               const std::map<std::string, std::vector<StoredEvent>>& ledger,
               const std::vector<Observation>& observations,
               const std::vector<WriterStall>& writer_stalls);

// One session's process (cplane-probe --worker assign). It asks for one of
// the items named in `slots` (one id a line, rewritten as the control plane
// replaces closed ones) over and over until `duration` has passed; given
// one, it makes a few mutations through the gate, then gives the item back,
// keeps it for a while (its heartbeats renew the lease), or stalls past its
// lease and presents the old fence. Then it closes its session.
struct SessionConfig {
  std::string store;
  std::string project;   // the session's actor
  std::string session;
  std::string journal;   // where the journal goes
  int gate_fd = -1;      // the start gate (fleet::StartGate), if any
  double lease = 0.3;    // the lease it asks for, seconds
  double stall_probability = 0;  // per round, besides its second fresh assignment
  std::string slots;
  double duration = 0;   // seconds
};
// 0 when every call went through; the journal is written either way.
int run_session(const SessionConfig& config);

// The probe's side: sets up the project and its items, runs the sessions
// and the control plane, judges. `run.items` is the number of items raced
// for at once. Every figure in print order, and every check, verify's
// included. Throws what the store throws while setting up; a session's
// failure is a failed check. Every process it started is gone when it
// returns.
ScenarioResult run(const RunConfig& run);

}  // namespace cplane::probe::race
