// The wire side of every event kind's registration: a WireCodec entry per
// kind (its member of the body union in events.capnp, how its fields are
// written and read), checked whole by WireCodecs. Included by
// events/codec.cpp only (and by the compile checks in tests/compile_fail).
#pragma once

#include <concepts>
#include <string>

#include "events/errors.hpp"
#include "events/event.hpp"
#include "events/events.capnp.h"

namespace cplane::wire_codec {


inline kj::StringPtr text(const std::string& s) { return kj::StringPtr(s.c_str(), s.size()); }

// A payload's salt (events/chain.hpp): fresh random bytes per event, so
// that a redacted payload's digest cannot be matched against guesses.
inline constexpr std::size_t kPayloadSaltBytes = 16;
void fresh_salt(std::uint8_t (&out)[kPayloadSaltBytes]);
template <class Builder>
void put_payload_salt(Builder b) {
  std::uint8_t salt[kPayloadSaltBytes];
  fresh_salt(salt);
  b.setPayloadSalt(capnp::Data::Reader(salt, sizeof salt));
}
inline std::string str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

inline wire::StreamKind to_wire(StreamKind kind) {
  switch (kind) {
    case StreamKind::item: return wire::StreamKind::ITEM;
    case StreamKind::project: return wire::StreamKind::PROJECT;
    case StreamKind::session: return wire::StreamKind::SESSION;
    case StreamKind::incident: return wire::StreamKind::INCIDENT;
    case StreamKind::schedule: return wire::StreamKind::SCHEDULE;
    case StreamKind::limit: return wire::StreamKind::LIMIT;
    case StreamKind::segment: return wire::StreamKind::SEGMENT;
  }
  return wire::StreamKind::UNSPECIFIED;
}

inline wire::WorkKind to_wire(WorkKind kind) {
  switch (kind) {
    case WorkKind::task: return wire::WorkKind::TASK;
    case WorkKind::issue: return wire::WorkKind::ISSUE;
    case WorkKind::pr: return wire::WorkKind::PR;
  }
  return wire::WorkKind::TASK;
}

inline wire::ReviewState to_wire(ReviewState review) {
  switch (review) {
    case ReviewState::none: return wire::ReviewState::NONE;
    case ReviewState::approved: return wire::ReviewState::APPROVED;
    case ReviewState::changes_requested: return wire::ReviewState::CHANGES_REQUESTED;
  }
  return wire::ReviewState::NONE;
}

// An enumerant this build does not know is an unreadable body, never a guess.
[[noreturn]] inline void unknown_enumerant(const char* what, unsigned value) {
  throw UnreadableEvent(std::string("event has an unknown ") + what + " (" +
                        std::to_string(value) + ")");
}

inline WorkKind from_wire(wire::WorkKind kind) {
  switch (kind) {
    case wire::WorkKind::TASK: return WorkKind::task;
    case wire::WorkKind::ISSUE: return WorkKind::issue;
    case wire::WorkKind::PR: return WorkKind::pr;
  }
  unknown_enumerant("kind", static_cast<unsigned>(kind));
}

inline ReviewState from_wire(wire::ReviewState review) {
  switch (review) {
    case wire::ReviewState::NONE: return ReviewState::none;
    case wire::ReviewState::APPROVED: return ReviewState::approved;
    case wire::ReviewState::CHANGES_REQUESTED: return ReviewState::changes_requested;
  }
  unknown_enumerant("review state", static_cast<unsigned>(review));
}

inline CloseReason from_wire(wire::CloseReason reason) {
  switch (reason) {
    case wire::CloseReason::MERGED: return CloseReason::merged;
    case wire::CloseReason::CLOSED: return CloseReason::closed;
  }
  unknown_enumerant("close reason", static_cast<unsigned>(reason));
}

// ---- one entry per event kind ----------------------------------------------------
// Its member of the body union (tag), how its fields are written there and
// read back. A kind of EventBody without an entry does not compile
// (WireCodecs below); a union member no entry claims reads as
// UnknownEventType (a newer cplane wrote it).
using Body = wire::Event::Body;

template <class E>
struct WireCodec;  // deliberately undefined: every kind must specialise it

template <>
struct WireCodec<ProjectCreated> {
  static constexpr Body::Which tag = Body::PROJECT_CREATED;
  static void encode(Body::Builder body, const ProjectCreated& e) {
    auto b = body.initProjectCreated();
    b.setTitle(text(e.title));
    b.setStatus(text(e.status));
  }
  static ProjectCreated decode(Body::Reader body) {
    auto b = body.getProjectCreated();
    return {str(b.getTitle()), str(b.getStatus())};
  }
};
template <>
struct WireCodec<ActorAssigned> {
  static constexpr Body::Which tag = Body::ACTOR_ASSIGNED;
  static void encode(Body::Builder body, const ActorAssigned& e) {
    body.initActorAssigned().setActor(text(e.actor));
  }
  static ActorAssigned decode(Body::Reader body) {
    return {str(body.getActorAssigned().getActor())};
  }
};
template <>
struct WireCodec<ItemQueued> {
  static constexpr Body::Which tag = Body::ITEM_QUEUED;
  static void encode(Body::Builder body, const ItemQueued& e) {
    auto b = body.initItemQueued();
    b.setPayload(text(e.payload));
    b.setKind(to_wire(e.kind));
    b.setRef(text(e.ref));
    b.setHead(text(e.head));
    b.setAuthor(text(e.author));
    b.setPriority(e.priority);
    b.setKey(text(e.key));
    b.setMaxAttempts(e.max_attempts);
    b.setBackoff(text(e.backoff));
    b.setRunAt(e.run_at);
    b.setConcurrencyKey(text(e.concurrency_key));
    put_payload_salt(b);
  }
  static ItemQueued decode(Body::Reader body) {
    auto b = body.getItemQueued();
    return {str(b.getPayload()), from_wire(b.getKind()), str(b.getRef()), str(b.getHead()),
            str(b.getAuthor()),  b.getPriority(),        str(b.getKey()), b.getMaxAttempts(),
            str(b.getBackoff()), b.getRunAt(),           str(b.getConcurrencyKey())};
  }
};
template <>
struct WireCodec<AttemptFailed> {
  static constexpr Body::Which tag = Body::ATTEMPT_FAILED;
  static void encode(Body::Builder body, const AttemptFailed& e) {
    auto b = body.initAttemptFailed();
    b.setFence(e.fence);
    b.setDetail(text(e.detail));
    b.setRetryAt(e.retry_at);
  }
  static AttemptFailed decode(Body::Reader body) {
    auto b = body.getAttemptFailed();
    return {b.getFence(), str(b.getDetail()), b.getRetryAt()};
  }
};
template <>
struct WireCodec<ItemRetried> {
  static constexpr Body::Which tag = Body::ITEM_RETRIED;
  static void encode(Body::Builder body, const ItemRetried& e) {
    auto b = body.initItemRetried();
    b.setAttempts(e.attempts);
    b.setOperation(text(e.operation));
  }
  static ItemRetried decode(Body::Reader body) {
    auto b = body.getItemRetried();
    return {b.getAttempts(), str(b.getOperation())};
  }
};
template <>
struct WireCodec<KeyReleased> {
  static constexpr Body::Which tag = Body::KEY_RELEASED;
  static void encode(Body::Builder body, const KeyReleased& e) {
    body.initKeyReleased().setKey(text(e.key));
  }
  static KeyReleased decode(Body::Reader body) { return {str(body.getKeyReleased().getKey())}; }
};
template <>
struct WireCodec<ItemRescheduled> {
  static constexpr Body::Which tag = Body::ITEM_RESCHEDULED;
  static void encode(Body::Builder body, const ItemRescheduled& e) {
    body.initItemRescheduled().setRunAt(e.run_at);
  }
  static ItemRescheduled decode(Body::Reader body) {
    return {body.getItemRescheduled().getRunAt()};
  }
};
template <>
struct WireCodec<ItemCancelled> {
  static constexpr Body::Which tag = Body::ITEM_CANCELLED;
  static void encode(Body::Builder body, const ItemCancelled& e) {
    auto b = body.initItemCancelled();
    b.setFence(e.fence);
    b.setReason(text(e.reason));
    b.setOperation(text(e.operation));
  }
  static ItemCancelled decode(Body::Reader body) {
    auto b = body.getItemCancelled();
    return {b.getFence(), str(b.getReason()), str(b.getOperation())};
  }
};
template <>
struct WireCodec<RetryPolicySet> {
  static constexpr Body::Which tag = Body::RETRY_POLICY_SET;
  static void encode(Body::Builder body, const RetryPolicySet& e) {
    auto b = body.initRetryPolicySet();
    b.setMaxAttempts(e.max_attempts);
    b.setBackoff(text(e.backoff));
  }
  static RetryPolicySet decode(Body::Reader body) {
    auto b = body.getRetryPolicySet();
    return {b.getMaxAttempts(), str(b.getBackoff())};
  }
};
template <>
struct WireCodec<ProjectPaused> {
  static constexpr Body::Which tag = Body::PROJECT_PAUSED;
  static void encode(Body::Builder body, const ProjectPaused& e) {
    body.initProjectPaused().setReason(text(e.reason));
  }
  static ProjectPaused decode(Body::Reader body) {
    return {str(body.getProjectPaused().getReason())};
  }
};
template <>
struct WireCodec<ScheduleCreated> {
  static constexpr Body::Which tag = Body::SCHEDULE_CREATED;
  static void encode(Body::Builder body, const ScheduleCreated& e) {
    auto b = body.initScheduleCreated();
    b.setName(text(e.name));
    b.setCron(text(e.cron));
    b.setZone(text(e.zone));
    b.setPayload(text(e.payload));
    b.setOverlapSkip(e.overlap_skip);
    b.setCatchUp(e.catch_up);
    b.setNextAt(e.next_at);
    put_payload_salt(b);
  }
  static ScheduleCreated decode(Body::Reader body) {
    auto b = body.getScheduleCreated();
    return {str(b.getName()),    str(b.getCron()),   str(b.getZone()), str(b.getPayload()),
            b.getOverlapSkip(),  b.getCatchUp(),     b.getNextAt()};
  }
};
template <>
struct WireCodec<ScheduleFired> {
  static constexpr Body::Which tag = Body::SCHEDULE_FIRED;
  static void encode(Body::Builder body, const ScheduleFired& e) {
    auto b = body.initScheduleFired();
    b.setName(text(e.name));
    b.setOccurrence(e.occurrence);
    b.setItemId(text(e.item_id));
    b.setMissed(e.missed);
    b.setNextAt(e.next_at);
  }
  static ScheduleFired decode(Body::Reader body) {
    auto b = body.getScheduleFired();
    return {str(b.getName()), b.getOccurrence(), str(b.getItemId()), b.getMissed(), b.getNextAt()};
  }
};
template <>
struct WireCodec<ScheduleSkipped> {
  static constexpr Body::Which tag = Body::SCHEDULE_SKIPPED;
  static void encode(Body::Builder body, const ScheduleSkipped& e) {
    auto b = body.initScheduleSkipped();
    b.setName(text(e.name));
    b.setOccurrence(e.occurrence);
    b.setReason(text(e.reason));
    b.setNextAt(e.next_at);
  }
  static ScheduleSkipped decode(Body::Reader body) {
    auto b = body.getScheduleSkipped();
    return {str(b.getName()), b.getOccurrence(), str(b.getReason()), b.getNextAt()};
  }
};
template <>
struct WireCodec<SchedulePaused> {
  static constexpr Body::Which tag = Body::SCHEDULE_PAUSED;
  static void encode(Body::Builder body, const SchedulePaused& e) {
    body.initSchedulePaused().setName(text(e.name));
  }
  static SchedulePaused decode(Body::Reader body) {
    return {str(body.getSchedulePaused().getName())};
  }
};
template <>
struct WireCodec<ScheduleResumed> {
  static constexpr Body::Which tag = Body::SCHEDULE_RESUMED;
  static void encode(Body::Builder body, const ScheduleResumed& e) {
    auto b = body.initScheduleResumed();
    b.setName(text(e.name));
    b.setNextAt(e.next_at);
  }
  static ScheduleResumed decode(Body::Reader body) {
    auto b = body.getScheduleResumed();
    return {str(b.getName()), b.getNextAt()};
  }
};
template <>
struct WireCodec<ScheduleRemoved> {
  static constexpr Body::Which tag = Body::SCHEDULE_REMOVED;
  static void encode(Body::Builder body, const ScheduleRemoved& e) {
    body.initScheduleRemoved().setName(text(e.name));
  }
  static ScheduleRemoved decode(Body::Reader body) {
    return {str(body.getScheduleRemoved().getName())};
  }
};
template <>
struct WireCodec<ProjectResumed> {
  static constexpr Body::Which tag = Body::PROJECT_RESUMED;
  static void encode(Body::Builder body, const ProjectResumed&) { body.initProjectResumed(); }
  static ProjectResumed decode(Body::Reader) { return {}; }
};
template <>
struct WireCodec<TerminalPathEntered> {
  static constexpr Body::Which tag = Body::TERMINAL_PATH_ENTERED;
  static void encode(Body::Builder body, const TerminalPathEntered& e) {
    body.initTerminalPathEntered().setReason(text(e.reason));
  }
  static TerminalPathEntered decode(Body::Reader body) {
    return {str(body.getTerminalPathEntered().getReason())};
  }
};
template <>
struct WireCodec<TerminalPathLeft> {
  static constexpr Body::Which tag = Body::TERMINAL_PATH_LEFT;
  static void encode(Body::Builder body, const TerminalPathLeft&) { body.initTerminalPathLeft(); }
  static TerminalPathLeft decode(Body::Reader) { return {}; }
};
template <>
struct WireCodec<IncidentLinked> {
  static constexpr Body::Which tag = Body::INCIDENT_LINKED;
  static void encode(Body::Builder body, const IncidentLinked& e) {
    auto b = body.initIncidentLinked();
    b.setProvider(text(e.provider));
    b.setFingerprint(text(e.fingerprint));
    b.setOrg(text(e.org));
    b.setRepo(text(e.repo));
    b.setEnvironment(text(e.environment));
    b.setTarget(text(e.target));
    if (e.status) b.setStatus(text(*e.status));
    if (e.event_count) {
      b.setEventCount(*e.event_count);
      b.setHasEventCount(true);
    }
    if (e.permalink) b.setPermalink(text(*e.permalink));
    if (e.first_seen) b.setFirstSeen(text(*e.first_seen));
    if (e.last_seen) b.setLastSeen(text(*e.last_seen));
    if (e.linked_prs) b.setLinkedPrs(text(*e.linked_prs));
  }
  static IncidentLinked decode(Body::Reader body) {
    auto b = body.getIncidentLinked();
    IncidentLinked e{str(b.getProvider()), str(b.getFingerprint()), str(b.getOrg()),
                     str(b.getRepo()),     str(b.getEnvironment()), str(b.getTarget()),
                     {},                   {},                      {},
                     {},                   {},                      {}};
    if (b.hasStatus()) e.status = str(b.getStatus());
    if (b.getHasEventCount()) e.event_count = b.getEventCount();
    if (b.hasPermalink()) e.permalink = str(b.getPermalink());
    if (b.hasFirstSeen()) e.first_seen = str(b.getFirstSeen());
    if (b.hasLastSeen()) e.last_seen = str(b.getLastSeen());
    if (b.hasLinkedPrs()) e.linked_prs = str(b.getLinkedPrs());
    return e;
  }
};
template <>
struct WireCodec<ItemAssigned> {
  static constexpr Body::Which tag = Body::ITEM_ASSIGNED;
  static void encode(Body::Builder body, const ItemAssigned& e) {
    auto b = body.initItemAssigned();
    b.setSession(text(e.session));
    b.setFence(e.fence);
    b.setLeaseExpiresAt(e.lease_expires_at);
    b.setAttempt(e.attempt);
    auto actions = b.initActions(static_cast<unsigned>(e.actions.size()));
    for (unsigned i = 0; i < e.actions.size(); ++i) actions.set(i, text(e.actions[i]));
    b.setExpectedHead(text(e.expected_head));
    b.setConcurrencyKey(text(e.concurrency_key));
  }
  static ItemAssigned decode(Body::Reader body) {
    auto b = body.getItemAssigned();
    ItemAssigned e{str(b.getSession()), b.getFence(), b.getLeaseExpiresAt(), b.getAttempt(),
                   {}, str(b.getExpectedHead()), str(b.getConcurrencyKey())};
    for (auto action : b.getActions()) e.actions.push_back(str(action));
    return e;
  }
};
template <>
struct WireCodec<HeadMoved> {
  static constexpr Body::Which tag = Body::HEAD_MOVED;
  static void encode(Body::Builder body, const HeadMoved& e) {
    body.initHeadMoved().setHead(text(e.head));
  }
  static HeadMoved decode(Body::Reader body) { return {str(body.getHeadMoved().getHead())}; }
};
template <>
struct WireCodec<ReviewChanged> {
  static constexpr Body::Which tag = Body::REVIEW_CHANGED;
  static void encode(Body::Builder body, const ReviewChanged& e) {
    body.initReviewChanged().setReview(to_wire(e.review));
  }
  static ReviewChanged decode(Body::Reader body) {
    return {from_wire(body.getReviewChanged().getReview())};
  }
};
template <>
struct WireCodec<ItemClosed> {
  static constexpr Body::Which tag = Body::ITEM_CLOSED;
  static void encode(Body::Builder body, const ItemClosed& e) {
    body.initItemClosed().setReason(e.reason == CloseReason::merged ? wire::CloseReason::MERGED
                                                                    : wire::CloseReason::CLOSED);
  }
  static ItemClosed decode(Body::Reader body) {
    return {from_wire(body.getItemClosed().getReason())};
  }
};
template <>
struct WireCodec<MutationRecorded> {
  static constexpr Body::Which tag = Body::MUTATION_RECORDED;
  static void encode(Body::Builder body, const MutationRecorded& e) {
    auto b = body.initMutationRecorded();
    b.setSession(text(e.session));
    b.setFence(e.fence);
    b.setAction(text(e.action));
    b.setHead(text(e.head));
  }
  static MutationRecorded decode(Body::Reader body) {
    auto b = body.getMutationRecorded();
    return {str(b.getSession()), b.getFence(), str(b.getAction()), str(b.getHead())};
  }
};
template <>
struct WireCodec<SessionOpened> {
  static constexpr Body::Which tag = Body::SESSION_OPENED;
  static void encode(Body::Builder body, const SessionOpened& e) {
    auto b = body.initSessionOpened();
    b.setSession(text(e.session));
    b.setActor(text(e.actor));
  }
  static SessionOpened decode(Body::Reader body) {
    auto b = body.getSessionOpened();
    return {str(b.getSession()), str(b.getActor())};
  }
};
template <>
struct WireCodec<SessionSeen> {
  static constexpr Body::Which tag = Body::SESSION_SEEN;
  static void encode(Body::Builder body, const SessionSeen& e) {
    body.initSessionSeen().setSession(text(e.session));
  }
  static SessionSeen decode(Body::Reader body) {
    return {str(body.getSessionSeen().getSession())};
  }
};
template <>
struct WireCodec<SessionClosed> {
  static constexpr Body::Which tag = Body::SESSION_CLOSED;
  static void encode(Body::Builder body, const SessionClosed& e) {
    body.initSessionClosed().setSession(text(e.session));
  }
  static SessionClosed decode(Body::Reader body) {
    return {str(body.getSessionClosed().getSession())};
  }
};
template <>
struct WireCodec<ItemClaimed> {
  static constexpr Body::Which tag = Body::ITEM_CLAIMED;
  static void encode(Body::Builder body, const ItemClaimed& e) {
    auto b = body.initItemClaimed();
    b.setOwner(text(e.owner));
    b.setFence(e.fence);
    b.setLeaseExpiresAt(e.lease_expires_at);
    b.setAttempt(e.attempt);
    b.setConcurrencyKey(text(e.concurrency_key));
    b.setFairPass(e.fair_pass);
  }
  static ItemClaimed decode(Body::Reader body) {
    auto b = body.getItemClaimed();
    return {str(b.getOwner()),          b.getFence(),   b.getLeaseExpiresAt(), b.getAttempt(),
            str(b.getConcurrencyKey()), b.getFairPass()};
  }
};
template <>
struct WireCodec<ProjectWeightSet> {
  static constexpr Body::Which tag = Body::PROJECT_WEIGHT_SET;
  static void encode(Body::Builder body, const ProjectWeightSet& e) {
    body.initProjectWeightSet().setWeight(e.weight);
  }
  static ProjectWeightSet decode(Body::Reader body) {
    return {body.getProjectWeightSet().getWeight()};
  }
};
template <>
struct WireCodec<LimitSet> {
  static constexpr Body::Which tag = Body::LIMIT_SET;
  static void encode(Body::Builder body, const LimitSet& e) {
    auto b = body.initLimitSet();
    b.setKey(text(e.key));
    b.setConcurrency(e.concurrency);
    b.setRateCount(e.rate_count);
    b.setRatePeriod(e.rate_period);
    b.setBurst(e.burst);
  }
  static LimitSet decode(Body::Reader body) {
    auto b = body.getLimitSet();
    return {str(b.getKey()), b.getConcurrency(), b.getRateCount(), b.getRatePeriod(),
            b.getBurst()};
  }
};
template <>
struct WireCodec<LimitRemoved> {
  static constexpr Body::Which tag = Body::LIMIT_REMOVED;
  static void encode(Body::Builder body, const LimitRemoved& e) {
    body.initLimitRemoved().setKey(text(e.key));
  }
  static LimitRemoved decode(Body::Reader body) { return {str(body.getLimitRemoved().getKey())}; }
};
template <>
struct WireCodec<SegmentArchived> {
  static constexpr Body::Which tag = Body::SEGMENT_ARCHIVED;
  static void encode(Body::Builder body, const SegmentArchived& e) {
    auto b = body.initSegmentArchived();
    b.setSegmentId(text(e.segment_id));
    b.setDigest(text(e.digest));
    b.setFile(text(e.file));
    b.setBefore(e.before);
    b.setProjectId(text(e.project_id));
    b.setStreams(e.streams);
    b.setEvents(e.events);
    b.setBytes(e.bytes);
    b.setItems(e.items);
    b.setSessions(e.sessions);
    b.setSchedules(e.schedules);
    b.setRedacted(e.redacted);
  }
  static SegmentArchived decode(Body::Reader body) {
    auto b = body.getSegmentArchived();
    return {str(b.getSegmentId()), str(b.getDigest()), str(b.getFile()), b.getBefore(),
            str(b.getProjectId()), b.getStreams(), b.getEvents(), b.getBytes(),
            b.getItems(), b.getSessions(), b.getSchedules(), b.getRedacted()};
  }
};
template <>
struct WireCodec<LimitClockCarried> {
  static constexpr Body::Which tag = Body::LIMIT_CLOCK_CARRIED;
  static void encode(Body::Builder body, const LimitClockCarried& e) {
    auto b = body.initLimitClockCarried();
    b.setKey(text(e.key));
    b.setTat(e.tat);
    b.setSegmentId(text(e.segment_id));
  }
  static LimitClockCarried decode(Body::Reader body) {
    auto b = body.getLimitClockCarried();
    return {str(b.getKey()), b.getTat(), str(b.getSegmentId())};
  }
};
template <>
struct WireCodec<LeaseExtended> {
  static constexpr Body::Which tag = Body::LEASE_EXTENDED;
  static void encode(Body::Builder body, const LeaseExtended& e) {
    auto b = body.initLeaseExtended();
    b.setFence(e.fence);
    b.setLeaseExpiresAt(e.lease_expires_at);
  }
  static LeaseExtended decode(Body::Reader body) {
    auto b = body.getLeaseExtended();
    return {b.getFence(), b.getLeaseExpiresAt()};
  }
};
template <>
struct WireCodec<LeaseExpired> {
  static constexpr Body::Which tag = Body::LEASE_EXPIRED;
  static void encode(Body::Builder body, const LeaseExpired& e) {
    auto b = body.initLeaseExpired();
    b.setFence(e.fence);
    b.setOwner(text(e.owner));
    b.setLeaseExpiresAt(e.lease_expires_at);
  }
  static LeaseExpired decode(Body::Reader body) {
    auto b = body.getLeaseExpired();
    return {b.getFence(), str(b.getOwner()), b.getLeaseExpiresAt()};
  }
};
template <>
struct WireCodec<ItemReleased> {
  static constexpr Body::Which tag = Body::ITEM_RELEASED;
  static void encode(Body::Builder body, const ItemReleased& e) {
    auto b = body.initItemReleased();
    b.setFence(e.fence);
    b.setReason(text(e.reason));
  }
  static ItemReleased decode(Body::Reader body) {
    auto b = body.getItemReleased();
    return {b.getFence(), str(b.getReason())};
  }
};
template <>
struct WireCodec<ItemFinished> {
  static constexpr Body::Which tag = Body::ITEM_FINISHED;
  static void encode(Body::Builder body, const ItemFinished& e) {
    auto b = body.initItemFinished();
    b.setOutcome(e.outcome == Outcome::done ? wire::Outcome::DONE : wire::Outcome::FAILED);
    b.setFence(e.fence);
    b.setDetail(text(e.detail));
  }
  static ItemFinished decode(Body::Reader body) {
    auto b = body.getItemFinished();
    Outcome outcome = Outcome::done;
    switch (b.getOutcome()) {
      case wire::Outcome::DONE: outcome = Outcome::done; break;
      case wire::Outcome::FAILED: outcome = Outcome::failed; break;
      default: unknown_enumerant("outcome", static_cast<unsigned>(b.getOutcome()));
    }
    return {outcome, b.getFence(), str(b.getDetail())};
  }
};

template <class E>
concept HasWireCodec = requires(const E& e, Body::Builder builder, Body::Reader reader) {
  { WireCodec<E>::tag } -> std::convertible_to<Body::Which>;
  WireCodec<E>::encode(builder, e);
  { WireCodec<E>::decode(reader) } -> std::same_as<E>;
};
template <class Variant>
struct WireCodecs;
template <class... E>
struct WireCodecs<std::variant<E...>> {
  static_assert((HasWireCodec<E> && ...), "every kind of EventBody needs a WireCodec entry");
  // Two kinds on one union member would read back as the first.
  static constexpr bool distinct_tags() {
    const Body::Which tags[] = {WireCodec<E>::tag...};
    for (std::size_t i = 0; i < sizeof...(E); ++i) {
      for (std::size_t j = i + 1; j < sizeof...(E); ++j) {
        if (tags[i] == tags[j]) return false;
      }
    }
    return true;
  }
  static_assert(distinct_tags(), "two event kinds share a member of the body union");
  // The kind whose member `which` is, decoded; false if none claims it.
  static bool decode(Body::Reader body, EventBody& out) {
    const Body::Which which = body.which();
    return ((which == WireCodec<E>::tag ? (out = WireCodec<E>::decode(body), true) : false) ||
            ...);
  }
};
using BodyCodecs = WireCodecs<EventBody>;

}  // namespace cplane::wire_codec
