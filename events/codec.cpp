#include "events/codec.hpp"

#include <cstring>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "events/errors.hpp"
#include "events/events.capnp.h"

namespace cplane {
namespace {

kj::StringPtr text(const std::string& s) { return kj::StringPtr(s.c_str(), s.size()); }
std::string str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

wire::StreamKind to_wire(StreamKind kind) {
  switch (kind) {
    case StreamKind::item: return wire::StreamKind::ITEM;
    case StreamKind::project: return wire::StreamKind::PROJECT;
    case StreamKind::session: return wire::StreamKind::SESSION;
    case StreamKind::incident: return wire::StreamKind::INCIDENT;
  }
  return wire::StreamKind::UNSPECIFIED;
}

wire::WorkKind to_wire(WorkKind kind) {
  switch (kind) {
    case WorkKind::task: return wire::WorkKind::TASK;
    case WorkKind::issue: return wire::WorkKind::ISSUE;
    case WorkKind::pr: return wire::WorkKind::PR;
  }
  return wire::WorkKind::TASK;
}

wire::ReviewState to_wire(ReviewState review) {
  switch (review) {
    case ReviewState::none: return wire::ReviewState::NONE;
    case ReviewState::approved: return wire::ReviewState::APPROVED;
    case ReviewState::changes_requested: return wire::ReviewState::CHANGES_REQUESTED;
  }
  return wire::ReviewState::NONE;
}

// An enumerant this build does not know is an unreadable body, never a guess.
[[noreturn]] void unknown_enumerant(const char* what, unsigned value) {
  throw UnreadableEvent(std::string("event has an unknown ") + what + " (" +
                        std::to_string(value) + ")");
}

WorkKind from_wire(wire::WorkKind kind) {
  switch (kind) {
    case wire::WorkKind::TASK: return WorkKind::task;
    case wire::WorkKind::ISSUE: return WorkKind::issue;
    case wire::WorkKind::PR: return WorkKind::pr;
  }
  unknown_enumerant("kind", static_cast<unsigned>(kind));
}

ReviewState from_wire(wire::ReviewState review) {
  switch (review) {
    case wire::ReviewState::NONE: return ReviewState::none;
    case wire::ReviewState::APPROVED: return ReviewState::approved;
    case wire::ReviewState::CHANGES_REQUESTED: return ReviewState::changes_requested;
  }
  unknown_enumerant("review state", static_cast<unsigned>(review));
}

CloseReason from_wire(wire::CloseReason reason) {
  switch (reason) {
    case wire::CloseReason::MERGED: return CloseReason::merged;
    case wire::CloseReason::CLOSED: return CloseReason::closed;
  }
  unknown_enumerant("close reason", static_cast<unsigned>(reason));
}

}  // namespace

std::string encode(const Event& event) {
  capnp::MallocMessageBuilder message(64);
  auto root = message.initRoot<wire::Event>();
  root.setAt(event.at);
  root.setActor(text(event.actor));
  root.setProjectId(text(event.project_id));
  root.setItemId(text(event.item_id));
  const StreamRef stream = stream_of(event);
  root.setStreamKind(to_wire(stream.kind));
  root.setStreamId(text(stream.id));
  root.setRequestId(event.request_id);
  auto body = root.initBody();
  std::visit(Overloaded{
                 [&](const ProjectCreated& e) {
                   auto b = body.initProjectCreated();
                   b.setTitle(text(e.title));
                   b.setStatus(text(e.status));
                 },
                 [&](const ActorAssigned& e) { body.initActorAssigned().setActor(text(e.actor)); },
                 [&](const ItemQueued& e) {
                   auto b = body.initItemQueued();
                   b.setPayload(text(e.payload));
                   b.setKind(to_wire(e.kind));
                   b.setRef(text(e.ref));
                   b.setHead(text(e.head));
                   b.setAuthor(text(e.author));
                   b.setPriority(e.priority);
                   b.setKey(text(e.key));
                 },
                 [&](const TerminalPathEntered& e) {
                   body.initTerminalPathEntered().setReason(text(e.reason));
                 },
                 [&](const TerminalPathLeft&) { body.initTerminalPathLeft(); },
                 [&](const IncidentLinked& e) {
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
                 },
                 [&](const ItemAssigned& e) {
                   auto b = body.initItemAssigned();
                   b.setSession(text(e.session));
                   b.setFence(e.fence);
                   b.setLeaseExpiresAt(e.lease_expires_at);
                   b.setAttempt(e.attempt);
                   auto actions = b.initActions(static_cast<unsigned>(e.actions.size()));
                   for (unsigned i = 0; i < e.actions.size(); ++i) actions.set(i, text(e.actions[i]));
                   b.setExpectedHead(text(e.expected_head));
                 },
                 [&](const HeadMoved& e) { body.initHeadMoved().setHead(text(e.head)); },
                 [&](const ReviewChanged& e) {
                   body.initReviewChanged().setReview(to_wire(e.review));
                 },
                 [&](const ItemClosed& e) {
                   body.initItemClosed().setReason(e.reason == CloseReason::merged
                                                       ? wire::CloseReason::MERGED
                                                       : wire::CloseReason::CLOSED);
                 },
                 [&](const MutationRecorded& e) {
                   auto b = body.initMutationRecorded();
                   b.setSession(text(e.session));
                   b.setFence(e.fence);
                   b.setAction(text(e.action));
                   b.setHead(text(e.head));
                 },
                 [&](const SessionOpened& e) {
                   auto b = body.initSessionOpened();
                   b.setSession(text(e.session));
                   b.setActor(text(e.actor));
                 },
                 [&](const SessionSeen& e) { body.initSessionSeen().setSession(text(e.session)); },
                 [&](const SessionClosed& e) {
                   body.initSessionClosed().setSession(text(e.session));
                 },
                 [&](const ItemClaimed& e) {
                   auto b = body.initItemClaimed();
                   b.setOwner(text(e.owner));
                   b.setFence(e.fence);
                   b.setLeaseExpiresAt(e.lease_expires_at);
                   b.setAttempt(e.attempt);
                 },
                 [&](const LeaseExtended& e) {
                   auto b = body.initLeaseExtended();
                   b.setFence(e.fence);
                   b.setLeaseExpiresAt(e.lease_expires_at);
                 },
                 [&](const LeaseExpired& e) {
                   auto b = body.initLeaseExpired();
                   b.setFence(e.fence);
                   b.setOwner(text(e.owner));
                   b.setLeaseExpiresAt(e.lease_expires_at);
                 },
                 [&](const ItemReleased& e) {
                   auto b = body.initItemReleased();
                   b.setFence(e.fence);
                   b.setReason(text(e.reason));
                 },
                 [&](const ItemFinished& e) {
                   auto b = body.initItemFinished();
                   b.setOutcome(e.outcome == Outcome::done ? wire::Outcome::DONE
                                                           : wire::Outcome::FAILED);
                   b.setFence(e.fence);
                   b.setDetail(text(e.detail));
                 },
             },
             event.body);
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

namespace {

Event decode_aligned(kj::ArrayPtr<const capnp::word> words) {
  capnp::ReaderOptions options;
  // Proportional to the body: text is charged against the limit, and a
  // stored body can hold a payload of up to 1 MiB.
  options.traversalLimitInWords = 4 * words.size() + 1024;
  options.nestingLimit = 16;
  capnp::FlatArrayMessageReader reader(words, options);
  auto root = reader.getRoot<wire::Event>();
  Event event;
  event.at = root.getAt();
  event.request_id = root.getRequestId();
  event.actor = str(root.getActor());
  event.project_id = str(root.getProjectId());
  event.item_id = str(root.getItemId());
  auto body = root.getBody();
  switch (body.which()) {
    case wire::Event::Body::PROJECT_CREATED: {
      auto b = body.getProjectCreated();
      event.body = ProjectCreated{str(b.getTitle()), str(b.getStatus())};
      break;
    }
    case wire::Event::Body::ACTOR_ASSIGNED:
      event.body = ActorAssigned{str(body.getActorAssigned().getActor())};
      break;
    case wire::Event::Body::ITEM_QUEUED: {
      auto b = body.getItemQueued();
      event.body = ItemQueued{str(b.getPayload()), from_wire(b.getKind()), str(b.getRef()),
                              str(b.getHead()), str(b.getAuthor()), b.getPriority(),
                              str(b.getKey())};
      break;
    }
    case wire::Event::Body::TERMINAL_PATH_ENTERED:
      event.body = TerminalPathEntered{str(body.getTerminalPathEntered().getReason())};
      break;
    case wire::Event::Body::TERMINAL_PATH_LEFT:
      event.body = TerminalPathLeft{};
      break;
    case wire::Event::Body::INCIDENT_LINKED: {
      auto b = body.getIncidentLinked();
      IncidentLinked e{str(b.getProvider()), str(b.getFingerprint()), str(b.getOrg()),
                       str(b.getRepo()), str(b.getEnvironment()), str(b.getTarget()),
                       {}, {}, {}, {}, {}, {}};
      if (b.hasStatus()) e.status = str(b.getStatus());
      if (b.getHasEventCount()) e.event_count = b.getEventCount();
      if (b.hasPermalink()) e.permalink = str(b.getPermalink());
      if (b.hasFirstSeen()) e.first_seen = str(b.getFirstSeen());
      if (b.hasLastSeen()) e.last_seen = str(b.getLastSeen());
      if (b.hasLinkedPrs()) e.linked_prs = str(b.getLinkedPrs());
      event.body = std::move(e);
      break;
    }
    case wire::Event::Body::ITEM_ASSIGNED: {
      auto b = body.getItemAssigned();
      ItemAssigned e{str(b.getSession()), b.getFence(), b.getLeaseExpiresAt(), b.getAttempt(),
                     {}, str(b.getExpectedHead())};
      for (auto action : b.getActions()) e.actions.push_back(str(action));
      event.body = std::move(e);
      break;
    }
    case wire::Event::Body::HEAD_MOVED:
      event.body = HeadMoved{str(body.getHeadMoved().getHead())};
      break;
    case wire::Event::Body::REVIEW_CHANGED:
      event.body = ReviewChanged{from_wire(body.getReviewChanged().getReview())};
      break;
    case wire::Event::Body::ITEM_CLOSED:
      event.body = ItemClosed{from_wire(body.getItemClosed().getReason())};
      break;
    case wire::Event::Body::MUTATION_RECORDED: {
      auto b = body.getMutationRecorded();
      event.body = MutationRecorded{str(b.getSession()), b.getFence(), str(b.getAction()),
                                    str(b.getHead())};
      break;
    }
    case wire::Event::Body::SESSION_OPENED: {
      auto b = body.getSessionOpened();
      event.body = SessionOpened{str(b.getSession()), str(b.getActor())};
      break;
    }
    case wire::Event::Body::SESSION_SEEN:
      event.body = SessionSeen{str(body.getSessionSeen().getSession())};
      break;
    case wire::Event::Body::SESSION_CLOSED:
      event.body = SessionClosed{str(body.getSessionClosed().getSession())};
      break;
    case wire::Event::Body::ITEM_CLAIMED: {
      auto b = body.getItemClaimed();
      event.body = ItemClaimed{str(b.getOwner()), b.getFence(), b.getLeaseExpiresAt(),
                               b.getAttempt()};
      break;
    }
    case wire::Event::Body::ITEM_FINISHED: {
      auto b = body.getItemFinished();
      Outcome outcome;
      switch (b.getOutcome()) {
        case wire::Outcome::DONE: outcome = Outcome::done; break;
        case wire::Outcome::FAILED: outcome = Outcome::failed; break;
        default:
          throw UnreadableEvent("event has an unknown outcome (" +
                                std::to_string(static_cast<unsigned>(b.getOutcome())) + ")");
      }
      event.body = ItemFinished{outcome, b.getFence(), str(b.getDetail())};
      break;
    }
    case wire::Event::Body::LEASE_EXTENDED: {
      auto b = body.getLeaseExtended();
      event.body = LeaseExtended{b.getFence(), b.getLeaseExpiresAt()};
      break;
    }
    case wire::Event::Body::LEASE_EXPIRED: {
      auto b = body.getLeaseExpired();
      event.body = LeaseExpired{b.getFence(), str(b.getOwner()), b.getLeaseExpiresAt()};
      break;
    }
    case wire::Event::Body::ITEM_RELEASED: {
      auto b = body.getItemReleased();
      event.body = ItemReleased{b.getFence(), str(b.getReason())};
      break;
    }
    default:
      throw UnknownEventType("unknown event type (union member " +
                            std::to_string(static_cast<unsigned>(body.which())) +
                            "): written by a newer cplane?");
  }
  // The stream the body names must be the one its kind and ids make; events
  // written before streams were recorded name none (UNSPECIFIED) and are
  // filed by their kind. A body that contradicts itself is not readable.
  if (root.getStreamKind() != wire::StreamKind::UNSPECIFIED) {
    const StreamRef derived = stream_of(event);
    if (root.getStreamKind() != to_wire(derived.kind) || str(root.getStreamId()) != derived.id) {
      throw UnreadableEvent("event names stream (" +
                            std::to_string(static_cast<unsigned>(root.getStreamKind())) + ", '" +
                            str(root.getStreamId()) + "') but a " +
                            std::string(type_name(event.body)) + " event belongs to (" +
                            std::string(to_string(derived.kind)) + ", '" + derived.id + "')");
    }
  }
  return event;
}

}  // namespace

Event decode(std::span<const unsigned char> bytes) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    throw UnreadableEvent("event body of " + std::to_string(bytes.size()) +
                          " bytes is not a whole number of 8-byte words");
  }
  // Cap'n Proto 0.9 readers reject unaligned buffers: copy into words first.
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    return decode_aligned(words);
  } catch (const UnreadableEvent&) {
    throw;
  } catch (const kj::Exception& e) {
    throw UnreadableEvent(std::string("event body cannot be decoded: ") +
                          e.getDescription().cStr());
  }
}

}  // namespace cplane
