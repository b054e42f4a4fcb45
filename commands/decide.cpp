#include "commands/decide.hpp"

#include <fmt/format.h>

#include "events/errors.hpp"
#include "events/json.hpp"
#include "projections/rules.hpp"

namespace cplane {

Event decide_create_project(const std::optional<ProjectRow>& existing, const std::string& id,
                            const std::string& title, const std::string& status, Micros now) {
  if (id.empty()) throw InvalidArgument("a project id must not be empty");
  if (status.empty()) throw InvalidArgument("a project status must not be empty");
  if (existing) {
    throw InvalidArgument(InvalidArgument::Reason::already_exists,
                          fmt::format("project {} already exists", quote_id(id)));
  }
  return Event{now, "", id, "", ProjectCreated{title, status}};
}

std::optional<Event> decide_grant(const ProjectRow& project, bool already_assigned,
                                   const std::string& actor, Micros now) {
  if (actor.empty()) throw InvalidArgument("an actor name must not be empty");
  if (already_assigned) return std::nullopt;
  return Event{now, "", project.project_id, "", ActorAssigned{actor}};
}

Event decide_enqueue(const ProjectRow& project, const std::string& item_id,
                     const std::string& payload, const std::string& actor, Micros now) {
  return Event{now, actor, project.project_id, item_id, ItemQueued{payload}};
}

bool is_claimable(const ItemRow& row, Micros now) { return claimable(row, now); }

Event decide_claim(const ItemRow& candidate, const std::string& owner, const std::string& actor,
                   Micros lease, Micros now, std::int64_t fair_pass) {
  if (owner.empty()) throw InvalidArgument("a claim needs a non-empty owner");
  if (lease <= 0) throw InvalidArgument("a lease must be a positive number of seconds");
  if (!is_claimable(candidate, now)) {
    throw InternalError(fmt::format("item {} was offered to a claim but is not claimable",
                                    quote_id(candidate.item_id)));
  }
  return Event{now,
               actor.empty() ? owner : actor,
               candidate.project_id,
               candidate.item_id,
               ItemClaimed{owner, candidate.fence + 1, now + lease, candidate.attempts + 1,
                           candidate.concurrency_key, fair_pass}};
}

FenceVerdict judge_fence(const ItemRow* item, std::string_view item_id, Fence fence) {
  using Reason = FenceRejected::Reason;
  const auto refusal = fence_refusal(item, fence);
  if (!refusal) return FenceVerdict::allowed();
  switch (*refusal) {
    case Reason::unknown_item:
      return FenceVerdict::denied(*refusal, fmt::format("item {} does not exist", quote_id(item_id)));
    case Reason::terminal:
      return FenceVerdict::denied(*refusal, fmt::format("item {} is already {}", quote_id(item_id),
                                                        to_string(item->status)));
    case Reason::not_claimed:
      return FenceVerdict::denied(*refusal,
                                  fmt::format("item {} is not claimed", quote_id(item_id)));
    case Reason::stale_fence:
      if (item->status != ItemStatus::claimed) {
        return FenceVerdict::denied(
            *refusal, fmt::format("fence {} is stale: its attempt of item {} already ended (the "
                                  "item is {})",
                                  fence, quote_id(item_id), to_string(item->status)));
      }
      // Older fences are stale; a higher one was never issued. Both are the
      // same refusal to a program, told apart for a person.
      return FenceVerdict::denied(
          *refusal,
          fence < item->fence
              ? fmt::format("fence {} is stale: item {} is held under fence {}", fence,
                            quote_id(item_id), item->fence)
              : fmt::format("fence {} is not the current fence: item {} is held under fence {}",
                            fence, quote_id(item_id), item->fence));
    case Reason::cancelled:
      return FenceVerdict::denied(
          *refusal, fmt::format("item {} was cancelled{}: its work is no longer wanted",
                                quote_id(item_id),
                                item->detail.empty() ? "" : " (" + item->detail + ")"));
    case Reason::slot_taken:
      break;  // a heartbeat's own refusal (decide_heartbeat), never the fence's
  }
  // A refusal this switch does not name must never become an acceptance.
  return FenceVerdict::denied(*refusal, fmt::format("item {} refuses fence {}", quote_id(item_id),
                                                    fence));
}

Event decide_finish(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                    Outcome outcome, const std::string& detail, const std::string& actor,
                    Micros now, bool no_retry) {
  require(judge_fence(item ? &*item : nullptr, item_id, fence));
  const std::string& by = actor.empty() ? item->owner : actor;
  // Under a policy, a failed attempt with attempts left waits its backoff.
  if (outcome == Outcome::failed && !no_retry && item->attempt_limit != 0 &&
      attempts_left(*item)) {
    return Event{now, by, item->project_id, item->item_id,
                 AttemptFailed{fence, detail, retry_at(*item, now)}};
  }
  return Event{now, by, item->project_id, item->item_id, ItemFinished{outcome, fence, detail}};
}

Event decide_heartbeat(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                       Micros lease, const std::string& actor, Micros now, bool slot_taken) {
  require(judge_fence(item ? &*item : nullptr, item_id, fence));
  if (lease <= 0) throw InvalidArgument("a lease must be a positive number of seconds");
  if (slot_taken && lease_lapsed(*item, now)) {
    throw FenceRejected(FenceRejected::Reason::slot_taken,
                        fmt::format("the lease of item {} lapsed and concurrency key {} is "
                                    "full now: it cannot be renewed; finish or release it",
                                    quote_id(item_id), quote_id(item->concurrency_key)));
  }
  return Event{now, actor.empty() ? item->owner : actor, item->project_id, item->item_id,
               LeaseExtended{fence, now + lease}};
}

Event decide_release(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                     const std::string& reason, const std::string& actor, Micros now) {
  require(judge_fence(item ? &*item : nullptr, item_id, fence));
  return Event{now, actor.empty() ? item->owner : actor, item->project_id, item->item_id,
               ItemReleased{fence, reason}};
}

GateVerdict judge_gate(const ItemRow* row, bool session_open, std::string_view session,
                       std::string_view item_id, Fence fence, std::string_view action,
                       const std::optional<std::string>& head, Micros now, bool key_held) {
  const auto reason = gate_refusal(row, session_open, session, fence, action, head, now, key_held);
  if (!reason) return GateVerdict::allowed();
  std::string message;
  switch (*reason) {
    case GateReason::no_live_lease:
      if (!session_open) {
        message = fmt::format("session {} is not open", quote_id(session));
      } else if (row == nullptr || row->session != session) {
        // One sentence for a missing item and another's: a scoped session
        // learns nothing of items outside its scope (R3).
        message = fmt::format("session {} holds no lease on item {}", quote_id(session),
                              quote_id(item_id));
      } else if (row->status == ItemStatus::claimed) {
        message = fmt::format("the lease of session {} on item {} lapsed at {}", quote_id(session),
                              quote_id(item_id), row->lease_expires_at);
      } else {
        message = fmt::format("item {} is {}: session {} holds no lease on it", quote_id(item_id),
                              to_string(row->status), quote_id(session));
      }
      break;
    case GateReason::stale_fence:
      message = fmt::format("fence {} is not the current fence of item {} ({})", fence,
                            quote_id(item_id), row->fence);
      break;
    case GateReason::work_terminal:
      message = fmt::format("item {} is {}{}", quote_id(item_id), to_string(row->status),
                            row->close_reason.empty() ? "" : " (" + row->close_reason + ")");
      break;
    case GateReason::action_not_allowed:
      message = fmt::format("action {} is not allowed by the assignment of item {}",
                            quote_id(action), quote_id(item_id));
      break;
    case GateReason::head_drift:
      message = row->head_moved || row->head != row->expected_head
                    ? fmt::format("the head of item {} moved since {} was pinned (now {}): "
                                  "release it and assign it again to work on the new head",
                                  quote_id(item_id), quote_id(row->expected_head),
                                  quote_id(row->head))
                    : fmt::format("head {} is not the pinned head {} of item {}", quote_id(*head),
                                  quote_id(row->expected_head), quote_id(item_id));
      break;
    case GateReason::key_held:
      message = fmt::format("concurrency key {} of item {} (limit 1) is held by another live "
                            "lease: only one holder may mutate",
                            quote_id(row->concurrency_key), quote_id(item_id));
      break;
  }
  return GateVerdict::denied(*reason, std::move(message));
}

AssignDecision decide_assign(const std::optional<ItemRow>& row, bool visible,
                             const std::string& session, const std::vector<std::string>& actions,
                             Micros lease, const std::string& actor, Micros now, bool paused,
                             std::optional<Micros> key_wait) {
  AssignDecision out;
  out.answer.item_id = row ? row->item_id : std::string();
  // R3: terminal, invisible and missing are one answer, and an invisible
  // item never makes a scoped session wait. A paused project's item, and a
  // lapsed one with no attempts left, are no work to take either.
  if (!row || !visible || is_terminal(row->status) || paused || lapsed_exhausted(*row, now)) {
    out.answer.outcome = AssignOutcome::no_safe_work;
    return out;
  }
  if (row->status == ItemStatus::scheduled && row->run_at > now) {
    out.answer.outcome = AssignOutcome::wait;  // not due yet: it will be at run_at
    out.answer.until = row->run_at;
    return out;
  }
  if (lease_live(*row, now)) {
    if (row->session != session) {
      // R2: someone else holds it.
      out.answer.outcome = AssignOutcome::wait;
      out.answer.until = row->lease_expires_at;
      return out;
    }
    // The holder asking again (a retry after a lost reply): the same fence,
    // a renewed lease, the assignment as it was made.
    out.event = Event{now, actor, row->project_id, row->item_id,
                      LeaseExtended{row->fence, now + lease}};
    out.answer = Assignment{AssignOutcome::assigned, row->item_id, row->fence, now + lease,
                            row->expected_head, row->actions, 0};
    return out;
  }
  // Its key has no room now: ask again when a slot or a token may be there.
  if (key_wait) {
    out.answer.outcome = AssignOutcome::wait;
    out.answer.until = *key_wait;
    return out;
  }
  // Ready, or its lease lapsed: a fresh fence, whoever held it.
  ItemAssigned assigned{session, row->fence + 1, now + lease, row->attempts + 1,
                        actions, row->head,   row->concurrency_key};
  out.answer = Assignment{AssignOutcome::assigned, row->item_id, assigned.fence,
                          assigned.lease_expires_at, row->head, actions, 0};
  out.event = Event{now, actor, row->project_id, row->item_id, std::move(assigned)};
  return out;
}

// ---- the sweep ------------------------------------------------------------------

std::optional<Event> decide_expire_lease(const ItemRow& row, const std::optional<Event>& last,
                                         Micros now) {
  if (row.status != ItemStatus::claimed || lease_live(row, now)) {
    throw InternalError(fmt::format("item {} was offered to the lease sweep but its lease has "
                                    "not lapsed",
                                    quote_id(row.item_id)));
  }
  // Under a policy, a lapsed lease with no attempts left ends the item.
  if (lapsed_exhausted(row, now)) return decide_exhaust(row, now);
  if (last) {
    const auto* expired = std::get_if<LeaseExpired>(&last->body);
    if (expired != nullptr && expired->fence == row.fence) return std::nullopt;
  }
  return Event{now, "", row.project_id, row.item_id,
               LeaseExpired{row.fence, row.owner, row.lease_expires_at}};
}

// ---- sessions -------------------------------------------------------------------

const std::string& session_actor(const SessionRow& session) {
  return session.actor.empty() ? session.session_id : session.actor;
}

namespace {

[[noreturn]] void unknown_session(std::string_view session) {
  throw NotFound(NotFound::Reason::unknown_session,
                 fmt::format("no such session: {}", quote_id(session)));
}

// The items a session's heartbeat or close is handed are its claimed items.
void require_held(const ItemRow& item, std::string_view session) {
  if (item.status != ItemStatus::claimed || item.session != session) {
    throw InternalError(fmt::format("item {} was offered as a lease of session {} but is not one",
                                    quote_id(item.item_id), quote_id(session)));
  }
}

}  // namespace

SessionRow require_open_session(std::optional<SessionRow> row, std::string_view session) {
  if (!row) unknown_session(session);
  if (!row->is_open()) {
    throw NotFound(NotFound::Reason::session_closed,
                   fmt::format("session {} was closed at {}: open a new session",
                               quote_id(session), row->closed_at));
  }
  return std::move(*row);
}

std::optional<Event> decide_open_session(const std::optional<SessionRow>& existing,
                                         const std::string& archived_in,
                                         const std::string& session,
                                         const std::optional<std::string>& actor, Micros now) {
  const std::string scope = actor.value_or("");
  if (!existing && !archived_in.empty()) {
    throw InvalidArgument(InvalidArgument::Reason::already_exists,
                          fmt::format("session {} was closed and archived (segment {}); session "
                                      "ids are not reused: open a new one",
                                      quote_id(session), archived_in));
  }
  if (existing) {
    if (!existing->is_open()) {
      throw InvalidArgument(InvalidArgument::Reason::already_exists,
                            fmt::format("session {} was closed at {}; session ids are not "
                                        "reused: open a new one",
                                        quote_id(session), existing->closed_at));
    }
    if (existing->actor != scope) {
      throw InvalidArgument(InvalidArgument::Reason::already_exists,
                            fmt::format("session {} is already open {}", quote_id(session),
                                        existing->actor.empty()
                                            ? std::string("unscoped")
                                            : "as actor " + quote_id(existing->actor)));
    }
    return std::nullopt;  // open already, as asked
  }
  return Event{now, scope, "", "", SessionOpened{session, scope}};
}

SessionHeartbeatDecision decide_session_heartbeat(const std::optional<SessionRow>& row,
                                                  std::string_view session,
                                                  std::vector<ItemRow> items, Micros lease,
                                                  Micros now) {
  const SessionRow open = require_open_session(row, session);
  if (lease <= 0) throw InvalidArgument("a lease must be a positive number of seconds");
  SessionHeartbeatDecision out{{}, Event{now, open.actor, "", "", SessionSeen{std::string(session)}}};
  for (auto& item : items) {
    require_held(item, session);
    if (!lease_live(item, now)) continue;  // a lapsed lease stays lapsed
    Event event{now, session_actor(open), item.project_id, item.item_id,
                LeaseExtended{item.fence, now + lease}};
    out.extended.push_back({std::move(item), std::move(event)});
  }
  return out;
}

SessionCloseDecision decide_close_session(const std::optional<SessionRow>& row,
                                          std::string_view session, std::vector<ItemRow> items,
                                          Micros now) {
  if (!row) unknown_session(session);
  SessionCloseDecision out;
  if (!row->is_open()) return out;  // closed already: nothing to record
  for (auto& item : items) {
    require_held(item, session);
    Event event{now, session_actor(*row), item.project_id, item.item_id,
                ItemReleased{item.fence, "session closed"}};
    out.released.push_back({std::move(item), std::move(event)});
  }
  out.closed = Event{now, row->actor, "", "", SessionClosed{std::string(session)}};
  return out;
}

// ---- the forge, as observed -----------------------------------------------------

namespace {

const ItemRow& require_item(const std::optional<ItemRow>& row, std::string_view item_id) {
  if (!row) {
    throw NotFound(NotFound::Reason::unknown_item,
                   fmt::format("no such item: {}", quote_id(item_id)));
  }
  return *row;
}

void require_pr(const ItemRow& row, const char* what) {
  if (row.kind != WorkKind::pr) {
    throw InvalidArgument(InvalidArgument::Reason::conflict,
                          fmt::format("item {} is {} {}: only a pr has a {}", quote_id(row.item_id),
                                      row.kind == WorkKind::issue ? "an" : "a", to_string(row.kind),
                                      what));
  }
}

Event observed(const ItemRow& row, Micros now, EventBody body) {
  return Event{now, "", row.project_id, row.item_id, std::move(body)};
}

}  // namespace

std::optional<Event> decide_observe_head(const std::optional<ItemRow>& row,
                                         std::string_view item_id, const std::string& head,
                                         Micros now) {
  const ItemRow& item = require_item(row, item_id);
  require_pr(item, "head");
  if (is_terminal(item.status) || item.head == head) return std::nullopt;
  return observed(item, now, HeadMoved{head});
}

std::optional<Event> decide_observe_review(const std::optional<ItemRow>& row,
                                           std::string_view item_id, ReviewState review,
                                           Micros now) {
  const ItemRow& item = require_item(row, item_id);
  require_pr(item, "review state");
  if (is_terminal(item.status) || item.review == review) return std::nullopt;
  return observed(item, now, ReviewChanged{review});
}

std::optional<Event> decide_observe_close(const std::optional<ItemRow>& row,
                                          std::string_view item_id, CloseReason reason,
                                          Micros now) {
  const ItemRow& item = require_item(row, item_id);
  if (is_terminal(item.status)) return std::nullopt;
  return observed(item, now, ItemClosed{reason});
}

std::optional<Event> decide_enter_terminal_path(const std::optional<ItemRow>& row,
                                                std::string_view item_id,
                                                const std::string& reason, Micros now) {
  const ItemRow& item = require_item(row, item_id);
  if (is_terminal(item.status)) {
    throw InvalidArgument(InvalidArgument::Reason::conflict,
                          fmt::format("item {} is {}: only an open item goes on the "
                                      "terminal path",
                                      quote_id(item_id), to_string(item.status)));
  }
  if (item.terminal_since != 0) return std::nullopt;  // on it already
  return observed(item, now, TerminalPathEntered{reason});
}

std::optional<Event> decide_leave_terminal_path(const std::optional<ItemRow>& row,
                                                std::string_view item_id, Micros now,
                                                const std::string& actor) {
  const ItemRow& item = require_item(row, item_id);
  if (item.terminal_since == 0) return std::nullopt;
  Event event = observed(item, now, TerminalPathLeft{});
  event.actor = actor;
  return event;
}

// ---- idempotent enqueue ---------------------------------------------------------

std::optional<std::string> decide_keyed_enqueue(const ProjectRow& project, const std::string& key,
                                                const std::optional<ItemRow>& first) {
  if (key.empty() || !first) return std::nullopt;
  if (first->project_id != project.project_id || first->key != key) {
    throw InternalError(fmt::format("item {} was found under key {} in project {} but is not "
                                    "its item",
                                    quote_id(first->item_id), quote_id(key),
                                    quote_id(project.project_id)));
  }
  return first->item_id;
}

// ---- incident links -------------------------------------------------------------

bool link_unchanged(const IncidentLinked& e, const IncidentLinkRow& row) {
  return e.target == row.target && e.status == row.status && e.event_count == row.event_count &&
         e.permalink == row.permalink && e.first_seen == row.first_seen &&
         e.last_seen == row.last_seen && e.linked_prs == row.linked_prs;
}

std::optional<Event> decide_link_incident(const std::optional<IncidentLinkRow>& before,
                                          const IncidentKey& key, const std::string& target,
                                          const IncidentObservation& o, Micros now) {
  IncidentLinked e{key.provider, key.fingerprint, key.org, key.repo, key.environment, target,
                   {}, {}, {}, {}, {}, {}};
  if (before) {
    e.status = before->status;
    e.event_count = before->event_count;
    e.permalink = before->permalink;
    e.first_seen = before->first_seen;
    e.last_seen = before->last_seen;
    e.linked_prs = before->linked_prs;
  }
  if (o.status) e.status = o.status;
  if (o.event_count) e.event_count = o.event_count;
  if (o.permalink) e.permalink = o.permalink;
  if (o.first_seen) e.first_seen = o.first_seen;
  if (o.last_seen) e.last_seen = o.last_seen;
  if (o.linked_prs) e.linked_prs = join_list(*o.linked_prs);
  if (before && link_unchanged(e, *before)) return std::nullopt;  // nothing new
  return Event{now, "", "", "", std::move(e)};
}

}  // namespace cplane
