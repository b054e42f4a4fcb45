// The decisions: pure functions from the current projected state and a
// command to the events that follow, or a refusal. No I/O, no clock: the
// command layer reads the rows, calls these, appends what they return.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cplane/store.hpp>
#include <cplane/verdict.hpp>

#include "events/event.hpp"
#include "projections/rows.hpp"

namespace cplane {

// Creating a project: refuses (InvalidArgument) an empty id and an id that is
// already taken (already_exists).
Event decide_create_project(const std::optional<ProjectRow>& existing, const std::string& id,
                            const std::string& title, const std::string& status, Micros now);

// Granting an actor a project: no event when the grant exists.
std::optional<Event> decide_grant(const ProjectRow& project, bool already_assigned,
                                   const std::string& actor, Micros now);

// Queueing an item; the payload must already be valid JSON.
Event decide_enqueue(const ProjectRow& project, const std::string& item_id,
                     const std::string& payload, const std::string& actor, Micros now);

// Claiming `candidate` (ready, or claimed with a lapsed lease) for `owner`:
// the fence rises by one, the attempt count by one. Requires a lease > 0.
// The event names the item's concurrency key and the project's new
// fair-share pass (0: unchanged).
Event decide_claim(const ItemRow& candidate, const std::string& owner, const std::string& actor,
                   Micros lease, Micros now, std::int64_t fair_pass = 0);

// Extending the current claim's lease to `now + lease`; releasing the item
// back to the queue. Both refuse (FenceRejected) exactly as a finish does.
// `slot_taken`: the item's lease lapsed and its concurrency key is full
// now (the other holders' live leases alone reach the limit): renewing it
// would put the key over its limit, so it is refused (slot_taken).
Event decide_heartbeat(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                       Micros lease, const std::string& actor, Micros now,
                       bool slot_taken = false);
Event decide_release(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                     const std::string& reason, const std::string& actor, Micros now);

// Whether a fenced report on `item` (null: unknown) under `fence` may be
// accepted: allowed, or denied with FenceRejected's reason and a sentence.
FenceVerdict judge_fence(const ItemRow* item, std::string_view item_id, Fence fence);

// Finishing an item. Throws FenceRejected unless the item exists, is claimed
// and `fence` is its current fence. A failed finish of an item under a retry
// policy with attempts left is attempt_failed (scheduled until its backoff
// ends), unless `no_retry` (a permanent error): then, and with no attempts
// left, the terminal failed.
Event decide_finish(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                    Outcome outcome, const std::string& detail, const std::string& actor,
                    Micros now, bool no_retry = false);

// The mutation gate (see ControlStore::require_valid_assignment): the
// verdict with a sentence naming what failed.
GateVerdict judge_gate(const ItemRow* row, bool session_open, std::string_view session,
                       std::string_view item_id, Fence fence, std::string_view action,
                       const std::optional<std::string>& head, Micros now, bool key_held = false);

// Assigning `row` (nullopt: no such item) to `session`: the answer, and
// the event that follows (assigned; lease_extended for a renewal by its
// holder; none for wait and no_safe_work). `visible`: the session's actor
// may see the item's project. `actions` sorted, without duplicates.
struct AssignDecision {
  Assignment answer;
  std::optional<Event> event;
};
// `paused`: the item's project is paused (no_safe_work). A scheduled item
// not yet due is wait, until its run_at. `key_wait`: its concurrency key
// is full or rate-limited (KeyGate::block), wait until this time (a
// holder's lease end, the next token) unless the session holds it already.
AssignDecision decide_assign(const std::optional<ItemRow>& row, bool visible,
                             const std::string& session, const std::vector<std::string>& actions,
                             Micros lease, const std::string& actor, Micros now,
                             bool paused = false, std::optional<Micros> key_wait = {});

// A candidate may be claimed at `now`: ready, or claimed with lease lapsed.
bool is_claimable(const ItemRow& row, Micros now);

// ---- the sweep ------------------------------------------------------------------

// expire_leases over `row`, a claimed item whose lease lapsed at or before
// `now`, whose stream's last event is `last` (nullopt: the stream is empty):
// lease_expired under the current fence, by the control plane; nullopt when
// `last` already is this claim's expiry (recorded once per claim, never
// again for the same fence). InternalError if `row` is not claimed with a
// lapsed lease: the sweep was handed a row it must not have been.
std::optional<Event> decide_expire_lease(const ItemRow& row, const std::optional<Event>& last,
                                         Micros now);

// ---- the lifecycle (commands/lifecycle.cpp) ---------------------------------------

// A backoff SPEC as given: "none", "fixed:DURATION", "exponential:BASE[:CAP]"
// (CAP 1h when left out). InvalidArgument when it does not parse; "" is
// "none".
struct Backoff {
  enum Kind : std::uint8_t { none, fixed, exponential };
  Kind kind = none;
  Micros base = 0;
  Micros cap = 0;
};
Backoff parse_backoff(std::string_view spec);
// How long the attempt-th failed attempt of `item_id` waits: none 0; fixed
// the duration; exponential min(BASE x 2^(attempt-1), CAP), then a jitter of
// at most +-10% derived from the item id and the attempt (the same answer
// for the same item and attempt, spreading a fleet's retries apart).
Micros backoff_wait(const Backoff& backoff, std::string_view item_id, std::uint32_t attempt);
// When a failed attempt of `row` (its attempts count: the attempt that
// failed) may run again: now + backoff_wait, at most kMaxNow.
Micros retry_at(const ItemRow& row, Micros now);

// The retry policy an item is queued under: its own when given (attempts
// > 0), else its project's.
struct RetryPolicy {
  std::uint32_t max_attempts = 0;
  std::string backoff;
};
RetryPolicy resolve_policy(const ProjectRow& project, const std::optional<RetryPolicy>& own);

// A lapsed lease with no attempts left: the terminal failed, by the control
// plane, detail "lease lapsed, attempts exhausted".
Event decide_exhaust(const ItemRow& row, Micros now);
inline constexpr std::string_view kExhaustedDetail = "lease lapsed, attempts exhausted";

// Setting a project's retry policy: nullopt when it is the policy already.
std::optional<Event> decide_set_policy(const ProjectRow& project, const RetryPolicy& policy,
                                       Micros now);
// Pausing (nullopt when paused already) and resuming (nullopt when not paused).
std::optional<Event> decide_pause(const ProjectRow& project, const std::string& reason,
                                  const std::string& actor, Micros now);
std::optional<Event> decide_resume(const ProjectRow& project, const std::string& actor,
                                   Micros now);

// Redriving a failed or cancelled item: ready at the back of the queue with
// `attempts` more (nullopt: its policy's, max_attempts; 0 there: without
// limit). NotFound for no row; InvalidArgument (conflict) for any other status.
Event decide_retry(const std::optional<ItemRow>& row, std::string_view item_id,
                   std::optional<std::uint32_t> attempts, const std::string& actor,
                   const std::string& operation, Micros now);
// Running a ready or scheduled item at `run_at` instead. InvalidArgument
// (conflict) for a claimed or terminal item; NotFound for none.
Event decide_reschedule(const std::optional<ItemRow>& row, std::string_view item_id,
                        Micros run_at, const std::string& actor, Micros now);
// Cancelling a ready, scheduled or claimed item (the claim's fence ends).
// InvalidArgument (conflict) for a terminal one; NotFound for none.
Event decide_cancel(const std::optional<ItemRow>& row, std::string_view item_id,
                    const std::string& reason, const std::string& actor,
                    const std::string& operation, Micros now);

// ---- flow control (commands/limits.cpp) -------------------------------------------

// Setting a key's limit whole (`existing`: its row, or nullopt): limit_set;
// nullopt when it is the limit already. InvalidArgument for no bound at all
// or a burst without a rate.
std::optional<Event> decide_set_limit(const std::optional<LimitRow>& existing, const LimitSet& set,
                                      const std::string& actor, Micros now);
// Removing it: limit_removed; nullopt when removed already. NotFound
// (unknown_limit) for a key never limited.
std::optional<Event> decide_remove_limit(const std::optional<LimitRow>& existing,
                                         const std::string& key, const std::string& actor,
                                         Micros now);
// A project's weight: project_weight_set; nullopt when it is the weight
// already. InvalidArgument outside 1..kMaxWeight.
std::optional<Event> decide_set_weight(const ProjectRow& project, std::uint32_t weight,
                                       const std::string& actor, Micros now);

// ---- cron schedules (commands/schedules.cpp) ------------------------------------

// Adding schedule `name` to `project` (existing: the row of that name, or
// nullopt), first firing at `next_at`: schedule_created. InvalidArgument
// (already_exists) for a name taken, even by a removed schedule, or by one
// archived (`archived_in`: the segment its anchor names; "" none).
Event decide_add_schedule(const std::optional<ScheduleRow>& existing,
                          const std::string& archived_in, const ProjectRow& project,
                          const std::string& name, const ControlStore::ScheduleSpec& spec,
                          Micros next_at, Micros now);

// What firing `row` at `now` does, given its occurrences due (ascending,
// from row.next_at, none after now; the last `keep` of `count` due), the
// first occurrence after them (kMaxNow: none), and whether the item of its
// last fire is still open. Each step fires (an item) or skips (overlap).
struct FireStep {
  Micros occurrence = 0;
  bool skip = false;
  std::int64_t missed = 0;  // occurrences before it passed over by catch-up
  Micros next_at = 0;
};
std::vector<FireStep> plan_fires(const ScheduleRow& row, const std::vector<Micros>& due,
                                 std::int64_t count, Micros next_after, bool previous_open);

// ---- sessions -------------------------------------------------------------------

// Who an item event made for a session is by: its actor, else its id.
const std::string& session_actor(const SessionRow& session);

// The session `session` as found (nullopt: no such row), if it is open.
// NotFound: unknown_session for none, session_closed for a closed one.
SessionRow require_open_session(std::optional<SessionRow> row, std::string_view session);

// Opening `session` for `actor` (nullopt: unscoped) over the row of that id
// (nullopt: none): session_opened, by the actor; nullopt when it is open
// already under the same scope (nothing to record). InvalidArgument
// (already_exists) for a closed session (ids are not reused), one archived
// (`archived_in`: the segment its anchor names; "" none), and one open
// under another scope.
std::optional<Event> decide_open_session(const std::optional<SessionRow>& existing,
                                         const std::string& archived_in,
                                         const std::string& session,
                                         const std::optional<std::string>& actor, Micros now);

// An item's row as read, and the event that follows on it: the caller
// appends `event` and puts apply(before, event).
struct ItemChange {
  ItemRow before;
  Event event;
};

// A session heartbeat of `session` (its row `row`; nullopt: none) holding
// `items` (its claimed items, lapsed ones included; read only when the
// session is open, else ignored): one lease_extended to `now + lease` per
// live lease, in the order of `items`, by session_actor (a lapsed lease
// stays lapsed), then session_seen by the session's actor. Refuses as
// require_open_session; InvalidArgument for a lease <= 0; InternalError for
// an item that is not a claimed item of this session.
struct SessionHeartbeatDecision {
  std::vector<ItemChange> extended;
  Event seen;
};
SessionHeartbeatDecision decide_session_heartbeat(const std::optional<SessionRow>& row,
                                                  std::string_view session,
                                                  std::vector<ItemRow> items, Micros lease,
                                                  Micros now);

// Closing `session` (its row `row`; nullopt: none) holding `items` (as for
// a heartbeat): one item_released ("session closed") per item, lapsed
// leases too, in the order of `items`, by session_actor, then
// session_closed by the session's actor. A closed session: nothing at all
// (`closed` nullopt, `released` empty, `items` ignored). NotFound
// (unknown_session) for no row; InternalError for an item that is not a
// claimed item of this session.
struct SessionCloseDecision {
  std::vector<ItemChange> released;
  std::optional<Event> closed;
};
SessionCloseDecision decide_close_session(const std::optional<SessionRow>& row,
                                          std::string_view session, std::vector<ItemRow> items,
                                          Micros now);

// ---- the forge, as observed -----------------------------------------------------

// Each observation of item `item_id` (its row `row`; nullopt: none) is an
// event by the control plane, or nullopt when it changes nothing (nothing
// is recorded). All refuse NotFound (unknown_item) for no row.
//
// The head of a pr: nullopt when terminal or the head is the same.
// InvalidArgument (conflict) for a task or an issue.
std::optional<Event> decide_observe_head(const std::optional<ItemRow>& row,
                                         std::string_view item_id, const std::string& head,
                                         Micros now);
// The review state of a pr: nullopt when terminal or the state is the same.
// InvalidArgument (conflict) for a task or an issue.
std::optional<Event> decide_observe_review(const std::optional<ItemRow>& row,
                                           std::string_view item_id, ReviewState review,
                                           Micros now);
// The forge closed the item (any kind): nullopt when it is terminal already.
std::optional<Event> decide_observe_close(const std::optional<ItemRow>& row,
                                          std::string_view item_id, CloseReason reason,
                                          Micros now);
// Putting the item on the terminal path: nullopt when it is on it already
// (the first reason stays). InvalidArgument (conflict) for a terminal item:
// only an open item goes on the path.
std::optional<Event> decide_enter_terminal_path(const std::optional<ItemRow>& row,
                                                std::string_view item_id,
                                                const std::string& reason, Micros now);
// Taking it off: nullopt when it is not on it (as no terminal item is:
// closing or finishing takes it off).
// `actor`: the operator who took it off ("" for the control plane).
std::optional<Event> decide_leave_terminal_path(const std::optional<ItemRow>& row,
                                                std::string_view item_id, Micros now,
                                                const std::string& actor = "");

// ---- idempotent enqueue ---------------------------------------------------------

// An enqueue into `project` under the idempotency key `key` ("": none), where
// `first` is the item enqueued under that key in that project (nullopt:
// none, or not looked up because the key is ""): the first item's id, to
// answer with while nothing is appended (its payload is not compared); nullopt
// to enqueue anew. InternalError if `first` is of another project or key.
std::optional<std::string> decide_keyed_enqueue(const ProjectRow& project, const std::string& key,
                                                const std::optional<ItemRow>& first);

// ---- incident links -------------------------------------------------------------

// Linking incident `key` to `target` over the link as it stands (`before`;
// nullopt: none): incident_linked with the link as it will stand, whole (the
// parts `observation` gives replace, the others stay), by the control plane;
// nullopt when that is the link as it stands (nothing new: nothing recorded).
std::optional<Event> decide_link_incident(const std::optional<IncidentLinkRow>& before,
                                          const IncidentKey& key, const std::string& target,
                                          const IncidentObservation& observation, Micros now);

// Whether `link` says what `row` holds: target and every observed part (the
// key is not compared: the row is found by it).
bool link_unchanged(const IncidentLinked& link, const IncidentLinkRow& row);

}  // namespace cplane
