// The registration of every event kind: one EventTraits entry each, beside
// the value types of <cplane/events.hpp>. An entry says what the kind is
// called in the log, which stream it belongs to and how that stream's id is
// found, which fence it carries, and its fields by name (for every writer
// that shows an event field by field: `cplane events --json`, `tail`).
//
// Adding an event kind (docs/architecture.md, "Adding an event kind"), each
// step a compile error until it is done:
//   1. the struct and a member of EventBody (<cplane/events.hpp>);
//   2. its EventTraits entry here (AllEventKinds below);
//   3. its member of the body union in events.capnp and its WireCodec entry
//      (events/codec.cpp: encode and decode, no catch-all);
//   4. its case in apply (projections/apply.cpp);
//   5. its case in verify's audit of its stream kind (verify/audit_<kind>.cpp, declared in verify/event_checks.hpp).
// Nothing else names kinds one by one: type_name, fence_of, stream_of and
// the JSON writer go through these entries.
#pragma once

#include <concepts>
#include <type_traits>

#include <cplane/events.hpp>

namespace cplane {

template <class E>
struct EventTraits;  // deliberately undefined: every kind must specialise it

// A field that holds JSON text (a payload): a writer embeds it as JSON.
struct JsonText {
  const std::string& text;
};

// How a kind's stream id is found, by stream kind.
struct OnItemStream {
  static constexpr StreamKind stream = StreamKind::item;
  template <class E>
  static std::string stream_id(const Event& event, const E&) {
    return event.item_id;
  }
};
struct OnProjectStream {
  static constexpr StreamKind stream = StreamKind::project;
  template <class E>
  static std::string stream_id(const Event& event, const E&) {
    return event.project_id;
  }
};
// A session's events name it in their body.
struct OnSessionStream {
  static constexpr StreamKind stream = StreamKind::session;
  template <class E>
  static std::string stream_id(const Event&, const E& e) {
    return e.session;
  }
};

// Kinds that carry no fence.
struct Unfenced {
  template <class E>
  static std::optional<Fence> fence(const E&) {
    return std::nullopt;
  }
};
// Kinds that carry the fence of the claim they act under.
struct Fenced {
  template <class E>
  static std::optional<Fence> fence(const E& e) {
    return e.fence;
  }
};

// fields(e, f) calls f(name, value) for each field of the body, in order,
// with the name a JSON reader sees. The fence is left out (fence_of gives
// it); names never repeat an event's own ("actor", "at", "seq", "type").

template <>
struct EventTraits<ProjectCreated> : OnProjectStream, Unfenced {
  static std::string_view name(const ProjectCreated&) { return "project_created"; }
  template <class F>
  static void fields(const ProjectCreated& e, F&& f) {
    f("title", e.title);
    f("status", e.status);
  }
};
template <>
struct EventTraits<ActorAssigned> : OnProjectStream, Unfenced {
  static std::string_view name(const ActorAssigned&) { return "actor_assigned"; }
  template <class F>
  static void fields(const ActorAssigned& e, F&& f) {
    f("granted_actor", e.actor);
  }
};
template <>
struct EventTraits<ItemQueued> : OnItemStream, Unfenced {
  static std::string_view name(const ItemQueued&) { return "queued"; }
  template <class F>
  static void fields(const ItemQueued& e, F&& f) {
    f("payload", JsonText{e.payload});
    f("kind", e.kind);
    f("ref", e.ref);
    f("head", e.head);
    f("author", e.author);
    f("priority", e.priority);
    f("key", e.key);
    f("max_attempts", e.max_attempts);
    f("backoff", e.backoff);
    f("run_at", e.run_at);
    f("concurrency_key", e.concurrency_key);
  }
};
template <>
struct EventTraits<AttemptFailed> : OnItemStream, Fenced {
  static std::string_view name(const AttemptFailed&) { return "attempt_failed"; }
  template <class F>
  static void fields(const AttemptFailed& e, F&& f) {
    f("detail", e.detail);
    f("retry_at", e.retry_at);
  }
};
template <>
struct EventTraits<KeyReleased> : OnItemStream, Unfenced {
  static std::string_view name(const KeyReleased&) { return "key_released"; }
  template <class F>
  static void fields(const KeyReleased& e, F&& f) {
    f("key", e.key);
  }
};
template <>
struct EventTraits<ItemRetried> : OnItemStream, Unfenced {
  static std::string_view name(const ItemRetried&) { return "retried"; }
  template <class F>
  static void fields(const ItemRetried& e, F&& f) {
    f("attempts", e.attempts);
    f("operation", e.operation);
  }
};
template <>
struct EventTraits<ItemRescheduled> : OnItemStream, Unfenced {
  static std::string_view name(const ItemRescheduled&) { return "rescheduled"; }
  template <class F>
  static void fields(const ItemRescheduled& e, F&& f) {
    f("run_at", e.run_at);
  }
};
template <>
struct EventTraits<ItemCancelled> : OnItemStream {
  static std::string_view name(const ItemCancelled&) { return "cancelled"; }
  // The fence of the claim it ended; none when nobody held the item.
  static std::optional<Fence> fence(const ItemCancelled& e) {
    return e.fence == 0 ? std::nullopt : std::optional<Fence>(e.fence);
  }
  template <class F>
  static void fields(const ItemCancelled& e, F&& f) {
    f("reason", e.reason);
    f("operation", e.operation);
  }
};
template <>
struct EventTraits<RetryPolicySet> : OnProjectStream, Unfenced {
  static std::string_view name(const RetryPolicySet&) { return "retry_policy_set"; }
  template <class F>
  static void fields(const RetryPolicySet& e, F&& f) {
    f("max_attempts", e.max_attempts);
    f("backoff", e.backoff);
  }
};
template <>
struct EventTraits<ProjectPaused> : OnProjectStream, Unfenced {
  static std::string_view name(const ProjectPaused&) { return "project_paused"; }
  template <class F>
  static void fields(const ProjectPaused& e, F&& f) {
    f("reason", e.reason);
  }
};
// A schedule's events name it in their body.
struct OnScheduleStream {
  static constexpr StreamKind stream = StreamKind::schedule;
  template <class E>
  static std::string stream_id(const Event&, const E& e) {
    return e.name;
  }
};
template <>
struct EventTraits<ScheduleCreated> : OnScheduleStream, Unfenced {
  static std::string_view name(const ScheduleCreated&) { return "schedule_created"; }
  template <class F>
  static void fields(const ScheduleCreated& e, F&& f) {
    f("schedule", e.name);
    f("cron", e.cron);
    f("zone", e.zone);
    f("payload", JsonText{e.payload});
    f("overlap", std::string(e.overlap_skip ? "skip" : "allow"));
    f("catch_up", e.catch_up);
    f("next_at", e.next_at);
  }
};
template <>
struct EventTraits<ScheduleFired> : OnScheduleStream, Unfenced {
  static std::string_view name(const ScheduleFired&) { return "schedule_fired"; }
  template <class F>
  static void fields(const ScheduleFired& e, F&& f) {
    f("schedule", e.name);
    f("occurrence", e.occurrence);
    f("fired_item", e.item_id);
    f("missed", e.missed);
    f("next_at", e.next_at);
  }
};
template <>
struct EventTraits<ScheduleSkipped> : OnScheduleStream, Unfenced {
  static std::string_view name(const ScheduleSkipped&) { return "schedule_skipped"; }
  template <class F>
  static void fields(const ScheduleSkipped& e, F&& f) {
    f("schedule", e.name);
    f("occurrence", e.occurrence);
    f("reason", e.reason);
    f("next_at", e.next_at);
  }
};
template <>
struct EventTraits<SchedulePaused> : OnScheduleStream, Unfenced {
  static std::string_view name(const SchedulePaused&) { return "schedule_paused"; }
  template <class F>
  static void fields(const SchedulePaused& e, F&& f) {
    f("schedule", e.name);
  }
};
template <>
struct EventTraits<ScheduleResumed> : OnScheduleStream, Unfenced {
  static std::string_view name(const ScheduleResumed&) { return "schedule_resumed"; }
  template <class F>
  static void fields(const ScheduleResumed& e, F&& f) {
    f("schedule", e.name);
    f("next_at", e.next_at);
  }
};
template <>
struct EventTraits<ScheduleRemoved> : OnScheduleStream, Unfenced {
  static std::string_view name(const ScheduleRemoved&) { return "schedule_removed"; }
  template <class F>
  static void fields(const ScheduleRemoved& e, F&& f) {
    f("schedule", e.name);
  }
};
template <>
struct EventTraits<ProjectWeightSet> : OnProjectStream, Unfenced {
  static std::string_view name(const ProjectWeightSet&) { return "project_weight_set"; }
  template <class F>
  static void fields(const ProjectWeightSet& e, F&& f) {
    f("weight", e.weight);
  }
};
// A limit's events name its key in their body.
struct OnLimitStream {
  static constexpr StreamKind stream = StreamKind::limit;
  template <class E>
  static std::string stream_id(const Event&, const E& e) {
    return e.key;
  }
};
template <>
struct EventTraits<LimitSet> : OnLimitStream, Unfenced {
  static std::string_view name(const LimitSet&) { return "limit_set"; }
  template <class F>
  static void fields(const LimitSet& e, F&& f) {
    f("limit_key", e.key);
    f("concurrency", e.concurrency);
    f("rate_count", e.rate_count);
    f("rate_period", e.rate_period);
    f("burst", e.burst);
  }
};
template <>
struct EventTraits<LimitRemoved> : OnLimitStream, Unfenced {
  static std::string_view name(const LimitRemoved&) { return "limit_removed"; }
  template <class F>
  static void fields(const LimitRemoved& e, F&& f) {
    f("limit_key", e.key);
  }
};
// A segment's event names it in its body.
struct OnSegmentStream {
  static constexpr StreamKind stream = StreamKind::segment;
  template <class E>
  static std::string stream_id(const Event&, const E& e) {
    return e.segment_id;
  }
};
template <>
struct EventTraits<SegmentArchived> : OnSegmentStream, Unfenced {
  static std::string_view name(const SegmentArchived&) { return "segment_archived"; }
  template <class F>
  static void fields(const SegmentArchived& e, F&& f) {
    f("segment_id", e.segment_id);
    f("digest", e.digest);
    f("file", e.file);
    f("before", e.before);
    f("archived_project", e.project_id);
    f("streams", e.streams);
    f("events", e.events);
    f("bytes", e.bytes);
    f("items", e.items);
    f("sessions", e.sessions);
    f("schedules", e.schedules);
    f("redacted", e.redacted);
  }
};
template <>
struct EventTraits<LimitClockCarried> : OnLimitStream, Unfenced {
  static std::string_view name(const LimitClockCarried&) { return "limit_clock_carried"; }
  template <class F>
  static void fields(const LimitClockCarried& e, F&& f) {
    f("limit_key", e.key);
    f("tat", e.tat);
    f("segment_id", e.segment_id);
  }
};
template <>
struct EventTraits<ProjectResumed> : OnProjectStream, Unfenced {
  static std::string_view name(const ProjectResumed&) { return "project_resumed"; }
  template <class F>
  static void fields(const ProjectResumed&, F&&) {}
};
template <>
struct EventTraits<ItemClaimed> : OnItemStream, Fenced {
  static std::string_view name(const ItemClaimed&) { return "claimed"; }
  template <class F>
  static void fields(const ItemClaimed& e, F&& f) {
    f("owner", e.owner);
    f("lease_expires_at", e.lease_expires_at);
    f("attempt", e.attempt);
    f("concurrency_key", e.concurrency_key);
    f("fair_pass", e.fair_pass);
  }
};
template <>
struct EventTraits<ItemFinished> : OnItemStream, Fenced {
  static std::string_view name(const ItemFinished& e) { return to_string(e.outcome); }
  template <class F>
  static void fields(const ItemFinished& e, F&& f) {
    f("outcome", e.outcome);
    f("detail", e.detail);
  }
};
template <>
struct EventTraits<LeaseExtended> : OnItemStream, Fenced {
  static std::string_view name(const LeaseExtended&) { return "lease_extended"; }
  template <class F>
  static void fields(const LeaseExtended& e, F&& f) {
    f("lease_expires_at", e.lease_expires_at);
  }
};
template <>
struct EventTraits<ItemReleased> : OnItemStream, Fenced {
  static std::string_view name(const ItemReleased&) { return "released"; }
  template <class F>
  static void fields(const ItemReleased& e, F&& f) {
    f("reason", e.reason);
  }
};
template <>
struct EventTraits<LeaseExpired> : OnItemStream, Fenced {
  static std::string_view name(const LeaseExpired&) { return "lease_expired"; }
  template <class F>
  static void fields(const LeaseExpired& e, F&& f) {
    f("owner", e.owner);
    f("lease_expires_at", e.lease_expires_at);
  }
};
template <>
struct EventTraits<ItemAssigned> : OnItemStream, Fenced {
  static std::string_view name(const ItemAssigned&) { return "assigned"; }
  template <class F>
  static void fields(const ItemAssigned& e, F&& f) {
    f("session", e.session);
    f("lease_expires_at", e.lease_expires_at);
    f("attempt", e.attempt);
    f("actions", e.actions);
    f("expected_head", e.expected_head);
    f("concurrency_key", e.concurrency_key);
  }
};
template <>
struct EventTraits<HeadMoved> : OnItemStream, Unfenced {
  static std::string_view name(const HeadMoved&) { return "head_moved"; }
  template <class F>
  static void fields(const HeadMoved& e, F&& f) {
    f("head", e.head);
  }
};
template <>
struct EventTraits<ReviewChanged> : OnItemStream, Unfenced {
  static std::string_view name(const ReviewChanged&) { return "review_changed"; }
  template <class F>
  static void fields(const ReviewChanged& e, F&& f) {
    f("review", e.review);
  }
};
template <>
struct EventTraits<ItemClosed> : OnItemStream, Unfenced {
  static std::string_view name(const ItemClosed&) { return "closed"; }
  template <class F>
  static void fields(const ItemClosed& e, F&& f) {
    f("reason", e.reason);
  }
};
template <>
struct EventTraits<MutationRecorded> : OnItemStream, Fenced {
  static std::string_view name(const MutationRecorded&) { return "mutation_recorded"; }
  template <class F>
  static void fields(const MutationRecorded& e, F&& f) {
    f("session", e.session);
    f("action", e.action);
    f("head", e.head);
  }
};
template <>
struct EventTraits<SessionOpened> : OnSessionStream, Unfenced {
  static std::string_view name(const SessionOpened&) { return "session_opened"; }
  template <class F>
  static void fields(const SessionOpened& e, F&& f) {
    f("session", e.session);
    f("scope_actor", e.actor);
  }
};
template <>
struct EventTraits<SessionSeen> : OnSessionStream, Unfenced {
  static std::string_view name(const SessionSeen&) { return "session_heartbeat"; }
  template <class F>
  static void fields(const SessionSeen& e, F&& f) {
    f("session", e.session);
  }
};
template <>
struct EventTraits<SessionClosed> : OnSessionStream, Unfenced {
  static std::string_view name(const SessionClosed&) { return "session_closed"; }
  template <class F>
  static void fields(const SessionClosed& e, F&& f) {
    f("session", e.session);
  }
};
template <>
struct EventTraits<TerminalPathEntered> : OnItemStream, Unfenced {
  static std::string_view name(const TerminalPathEntered&) { return "terminal_path_entered"; }
  template <class F>
  static void fields(const TerminalPathEntered& e, F&& f) {
    f("reason", e.reason);
  }
};
template <>
struct EventTraits<TerminalPathLeft> : OnItemStream, Unfenced {
  static std::string_view name(const TerminalPathLeft&) { return "terminal_path_left"; }
  template <class F>
  static void fields(const TerminalPathLeft&, F&&) {}
};
template <>
struct EventTraits<IncidentLinked> : Unfenced {
  static constexpr StreamKind stream = StreamKind::incident;
  static std::string stream_id(const Event&, const IncidentLinked& e) {
    return incident_stream_id(e.provider, e.fingerprint, e.org, e.repo, e.environment);
  }
  static std::string_view name(const IncidentLinked&) { return "incident_linked"; }
  template <class F>
  static void fields(const IncidentLinked& e, F&& f) {
    f("provider", e.provider);
    f("fingerprint", e.fingerprint);
    f("org", e.org);
    f("repo", e.repo);
    f("environment", e.environment);
    f("target", e.target);
    f("status", e.status);
    f("event_count", e.event_count);
    f("permalink", e.permalink);
    f("first_seen", e.first_seen);
    f("last_seen", e.last_seen);
    f("linked_prs", e.linked_prs);
  }
};

// What a fields() callback is handed for every kind of value it may see:
// the concept below checks an entry's fields() against it.
struct FieldSink {
  void operator()(std::string_view, const std::string&) const {}
  void operator()(std::string_view, const JsonText&) const {}
  void operator()(std::string_view, std::int64_t) const {}
  void operator()(std::string_view, const std::vector<std::string>&) const {}
  void operator()(std::string_view, const std::optional<std::string>&) const {}
  void operator()(std::string_view, const std::optional<std::int64_t>&) const {}
  void operator()(std::string_view, Outcome) const {}
  void operator()(std::string_view, WorkKind) const {}
  void operator()(std::string_view, ReviewState) const {}
  void operator()(std::string_view, CloseReason) const {}
};

// A kind with a complete traits entry.
template <class E>
concept EventKind = requires(const E& e, const Event& event, FieldSink sink) {
  { EventTraits<E>::stream } -> std::convertible_to<StreamKind>;
  { EventTraits<E>::name(e) } -> std::convertible_to<std::string_view>;
  { EventTraits<E>::fence(e) } -> std::same_as<std::optional<Fence>>;
  { EventTraits<E>::stream_id(event, e) } -> std::same_as<std::string>;
  EventTraits<E>::fields(e, sink);
};

template <class Variant>
struct AllEventKinds;
template <class... E>
struct AllEventKinds<std::variant<E...>> : std::bool_constant<(EventKind<E> && ...)> {};
static_assert(AllEventKinds<EventBody>::value,
              "every alternative of EventBody needs an EventTraits entry");

// An overload set for std::visit: with one lambda per event kind and no
// catch-all, a kind that is not handled does not compile.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

// For the fold of one stream's rows, beside one case per kind of that
// stream: every kind of another stream leaves the row as it is (returns
// R{}). A kind of the fold's own stream without its case still does not
// compile, and a kind of a new stream needs no case in the others' folds.
template <StreamKind Own, class R = void>
struct OfOtherStreams {
  template <class E>
    requires(EventTraits<E>::stream != Own)
  R operator()(const E&) const {
    if constexpr (!std::is_void_v<R>) return R{};
  }
};

// Calls f.template operator()<E>() for every kind E of EventBody, in order:
// for what goes over kinds rather than over one event (the round-trip
// test, the codec's decode, the documentation of kinds).
template <class F>
void for_each_event_kind(F&& f) {
  [&]<class... E>(std::variant<E...>*) { (f.template operator()<E>(), ...); }(
      static_cast<EventBody*>(nullptr));
}

}  // namespace cplane
