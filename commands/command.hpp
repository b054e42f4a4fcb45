// Commands as values: what a write call asks for, with everything the
// caller's store resolved already (its default lease, its durability, the
// checked input), so that another process can run it for it and hand back
// its answer (SQLite's group commit, commands/combine.cpp). Both travel
// through the shared area as bytes (encode / decode below): little-endian
// integers, length-prefixed texts, fields in declaration order. Only
// processes of one build share an area (its header names the layout), so
// the encoding needs no versions.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <cplane/store.hpp>

#include "storage/backend.hpp"

namespace cplane::detail {

namespace cmd {

// The durability the command's commit needs: a batch commits with the
// strongest any member needs.
using storage::Sync;

struct Enqueue {
  Sync sync = Sync::full;
  std::string project_id;
  std::string payload;
  bool forge = false;  // the options form: kind, ref, head, author, priority, key
  WorkKind kind = WorkKind::task;
  std::string ref, head, author;
  std::int32_t priority = 0;
  std::string key;
  std::optional<std::string> actor;
  std::optional<Micros> now;
  std::uint32_t max_attempts = 0;  // the item's own policy (0: the project's)
  std::string backoff;
  std::optional<Micros> run_at, delay;  // checked: at most one
  std::string concurrency_key;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.project_id, s.payload, s.forge, s.kind, s.ref, s.head, s.author,
                    s.priority, s.key, s.actor, s.now, s.max_attempts, s.backoff, s.run_at,
                    s.delay, s.concurrency_key);
  }
};

struct EnqueueBatch {
  Sync sync = Sync::full;
  std::string project_id;
  std::vector<std::string> payloads;
  std::optional<std::string> actor;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.project_id, s.payloads, s.actor, s.now);
  }
};

struct Claim {
  Sync sync = Sync::full;
  std::string owner;
  std::optional<std::string> actor;
  Micros lease = 0;
  std::optional<Micros> now;
  bool fair = true;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.owner, s.actor, s.lease, s.now, s.fair);
  }
};

struct ClaimBatch {
  Sync sync = Sync::full;
  std::string owner;
  std::uint64_t max_items = 1;
  std::optional<std::string> actor;
  Micros lease = 0;
  std::optional<Micros> now;
  bool fair = true;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.owner, s.max_items, s.actor, s.lease, s.now, s.fair);
  }
};

struct Finish {
  Sync sync = Sync::normal;
  std::string item_id;
  Fence fence = 0;
  Outcome outcome = Outcome::done;
  std::string detail;
  std::optional<std::string> actor;
  std::optional<Micros> now;
  bool no_retry = false;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.item_id, s.fence, s.outcome, s.detail, s.actor, s.now, s.no_retry);
  }
};

struct Report {
  std::string item_id;
  Fence fence = 0;
  Outcome outcome = Outcome::done;
  std::string detail;
  template <class S> static auto fields(S& s) {
    return std::tie(s.item_id, s.fence, s.outcome, s.detail);
  }
};

struct FinishBatch {
  Sync sync = Sync::normal;
  std::vector<Report> reports;
  std::optional<std::string> actor;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) { return std::tie(s.sync, s.reports, s.actor, s.now); }
};

struct FinishAndClaim {
  Sync sync = Sync::full;
  std::string item_id;
  Fence fence = 0;
  Outcome outcome = Outcome::done;
  std::string detail;
  std::string owner;
  std::optional<std::string> actor;
  Micros lease = 0;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.item_id, s.fence, s.outcome, s.detail, s.owner, s.actor, s.lease,
                    s.now);
  }
};

struct Heartbeat {
  Sync sync = Sync::full;
  std::string item_id;
  Fence fence = 0;
  Micros lease = 0;
  std::optional<std::string> actor;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.item_id, s.fence, s.lease, s.actor, s.now);
  }
};

struct Release {
  Sync sync = Sync::normal;
  std::string item_id;
  Fence fence = 0;
  std::string reason;
  std::optional<std::string> actor;
  std::optional<Micros> now;
  std::optional<std::string> by;  // ReleaseOptions::by
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.item_id, s.fence, s.reason, s.actor, s.now, s.by);
  }
};

struct CreateProject {
  Sync sync = Sync::full;
  std::string id, title, status;
  std::optional<Micros> now;
  std::uint32_t max_attempts = 0;
  std::string backoff;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.id, s.title, s.status, s.now, s.max_attempts, s.backoff);
  }
};

// set_retry_policy, pause_project, resume_project: one fact about a project.
struct ProjectChange {
  enum Kind : std::uint8_t { policy, pause, resume, weight };  // weight: in max_attempts
  Sync sync = Sync::full;
  Kind kind = policy;
  std::string project_id;
  std::uint32_t max_attempts = 0;
  std::string text;  // the backoff SPEC, or the pause's reason
  std::optional<std::string> actor;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.kind, s.project_id, s.max_attempts, s.text, s.actor, s.now);
  }
};

// retry, reschedule, cancel of one item; `operation` names a bulk action.
struct ItemChange {
  enum Kind : std::uint8_t { retry, reschedule, cancel };
  Sync sync = Sync::full;
  Kind kind = retry;
  std::string item_id;
  std::optional<std::uint32_t> attempts;  // retry's
  Micros run_at = 0;                      // reschedule's
  Micros delay = 0;                       // reschedule_in's (then run_at is unused)
  std::string reason;                     // cancel's
  std::string operation;
  std::optional<std::string> actor;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.kind, s.item_id, s.attempts, s.run_at, s.delay, s.reason,
                    s.operation, s.actor, s.now);
  }
};

// One batch of a bulk cancel or retry: the first `limit` items of
// `project_id` in `status`; answers the ids it changed (each leaves `status`).
struct BulkBatch {
  Sync sync = Sync::full;
  ItemChange::Kind kind = ItemChange::cancel;
  std::string project_id;
  ItemStatus status = ItemStatus::ready;
  std::uint64_t limit = 0;
  std::optional<std::uint32_t> attempts;
  std::string reason;
  std::string operation;
  std::optional<std::string> actor;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.kind, s.project_id, s.status, s.limit, s.attempts,
                    s.reason, s.operation, s.actor, s.now);
  }
};

struct Grant {
  Sync sync = Sync::full;
  std::string project_id, actor;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) { return std::tie(s.sync, s.project_id, s.actor, s.now); }
};

struct OpenSession {
  Sync sync = Sync::full;
  std::string session;
  std::optional<std::string> actor;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) { return std::tie(s.sync, s.session, s.actor, s.now); }
};

struct SessionHeartbeat {
  Sync sync = Sync::full;
  std::string session;
  Micros lease = 0;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) { return std::tie(s.sync, s.session, s.lease, s.now); }
};

struct CloseSession {
  Sync sync = Sync::normal;
  std::string session;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) { return std::tie(s.sync, s.session, s.now); }
};

// observe_head, observe_review, observe_close, enter_terminal_path,
// leave_terminal_path: one fact about one item.
struct Observe {
  enum Kind : std::uint8_t { head_moved, review_changed, closed, terminal_entered, terminal_left };
  Sync sync = Sync::full;
  Kind kind = head_moved;
  std::string item_id;
  std::string text;  // the head, or the terminal path's reason
  ReviewState review = ReviewState::none;
  CloseReason close_reason = CloseReason::closed;
  std::optional<Micros> now;
  std::string actor;  // terminal_left by an operator: named in the event ("" otherwise)
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.kind, s.item_id, s.text, s.review, s.close_reason, s.now, s.actor);
  }
};

struct AssignAndLease {
  Sync sync = Sync::full;
  std::string session, item_id;
  std::vector<std::string> actions;  // checked
  Micros lease = 0;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.session, s.item_id, s.actions, s.lease, s.now);
  }
};

struct RecordMutation {
  Sync sync = Sync::full;
  std::string session, item_id;
  Fence fence = 0;
  std::string action;
  std::optional<std::string> head;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.session, s.item_id, s.fence, s.action, s.head, s.now);
  }
};

struct ExpireLeases {
  Sync sync = Sync::normal;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) { return std::tie(s.sync, s.now); }
};

struct LinkIncident {
  Sync sync = Sync::full;
  IncidentKey key;
  std::string target;
  IncidentObservation observation;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.key, s.target, s.observation, s.now);
  }
};

// add_schedule, pause_schedule, resume_schedule, remove_schedule.
struct ScheduleChange {
  enum Kind : std::uint8_t { add, pause, resume, remove };
  Sync sync = Sync::full;
  Kind kind = add;
  std::string name;
  ControlStore::ScheduleSpec spec;  // add's; its `now` is every kind's
  template <class S> static auto fields(S& s) { return std::tie(s.sync, s.kind, s.name, s.spec); }
};

// limit set (the limit whole) and limit remove of one concurrency key.
struct LimitChange {
  enum Kind : std::uint8_t { set, remove };
  Sync sync = Sync::full;
  Kind kind = set;
  std::string key;
  std::uint32_t concurrency = 0;
  std::uint32_t rate_count = 0;
  Micros rate_period = 0;
  std::uint32_t burst = 0;
  std::optional<std::string> actor;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) {
    return std::tie(s.sync, s.kind, s.key, s.concurrency, s.rate_count, s.rate_period, s.burst,
                    s.actor, s.now);
  }
};

// Fires the due occurrences of every schedule (tick); answers the items made.
struct Tick {
  Sync sync = Sync::full;
  std::optional<Micros> now;
  template <class S> static auto fields(S& s) { return std::tie(s.sync, s.now); }
};

}  // namespace cmd

// Every write command a combiner runs for another process. Two run in a
// transaction of their own, under the same write lock: allocate_next
// (its walk holds a cursor across the decision) and
// import_incident_links (a bulk import, larger than a slot).
using Command = std::variant<cmd::Enqueue, cmd::EnqueueBatch, cmd::Claim, cmd::ClaimBatch,
                             cmd::Finish, cmd::FinishBatch, cmd::FinishAndClaim, cmd::Heartbeat,
                             cmd::Release, cmd::CreateProject, cmd::Grant, cmd::OpenSession,
                             cmd::SessionHeartbeat, cmd::CloseSession, cmd::Observe,
                             cmd::AssignAndLease, cmd::RecordMutation, cmd::ExpireLeases,
                             cmd::LinkIncident, cmd::ProjectChange, cmd::ItemChange,
                             cmd::BulkBatch, cmd::ScheduleChange, cmd::Tick,
                             cmd::LimitChange>;

// A refusal or failure as a value: thrown again, as the same type with the
// same reason, in the process that asked.
struct ErrorValue {
  enum Kind : std::uint8_t {
    fence_rejected, scope_denied, invalid_argument, not_found, mutation_denied, storage, internal,
    // Nothing was done: the answer would not fit a slot. The caller runs
    // the command in a transaction of its own.
    run_alone,
  };
  Kind kind = internal;
  std::int32_t code = 0;  // the reason or category
  std::string message;
  template <class S> static auto fields(S& s) { return std::tie(s.kind, s.code, s.message); }
};
// The exception in flight (inside a catch), as a value.
ErrorValue capture_error();
[[noreturn]] void throw_error(const ErrorValue& error);

// A ClaimedItem as handed back; its payload left out (`elided`) when the
// answer would not fit the area: the caller reads it from the item.
struct ClaimedValue {
  ClaimedItem item;
  bool elided = false;
};

using Value = std::variant<std::monostate, std::string, std::vector<std::string>,
                           std::optional<ClaimedValue>, std::vector<ClaimedValue>, Micros, bool,
                           std::vector<std::pair<std::string, Micros>>, Assignment, GateVerdict>;

struct Answer {
  Value value;
  std::optional<ErrorValue> error;
};

std::string encode_command(const Command& command);
// InternalError if the bytes are not a command of this build.
Command decode_command(std::string_view bytes);
// Payloads longer than `max_payload` are elided.
std::string encode_answer(const Answer& answer, std::size_t max_payload = SIZE_MAX);
Answer decode_answer(std::string_view bytes);

// A fingerprint of this build's encoding of every command and answer: two
// builds whose messages differ in any field do not share an area
// (CombineArea::accepts_codec).
std::uint64_t codec_fingerprint();

// The durability a command's commit needs.
storage::Sync sync_of(const Command& command);

}  // namespace cplane::detail
