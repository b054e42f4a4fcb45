#include "commands/decide.hpp"

#include <fmt/format.h>

#include "events/errors.hpp"
#include "projections/rules.hpp"

namespace cplane {

Event decide_create_project(const std::optional<ProjectRow>& existing, const std::string& id,
                            const std::string& title, const std::string& status, Micros now) {
  if (id.empty()) throw InvalidArgument("a project id must not be empty");
  if (status.empty()) throw InvalidArgument("a project status must not be empty");
  if (existing) throw InvalidArgument(fmt::format("project {} already exists", quote_id(id)));
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
                   Micros lease, Micros now) {
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
               ItemClaimed{owner, candidate.fence + 1, now + lease, candidate.attempts + 1}};
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
      // Older fences are stale; a higher one was never issued. Both are the
      // same refusal to a program, told apart for a person.
      return FenceVerdict::denied(
          *refusal,
          fence < item->fence
              ? fmt::format("fence {} is stale: item {} is held under fence {}", fence,
                            quote_id(item_id), item->fence)
              : fmt::format("fence {} is not the current fence: item {} is held under fence {}",
                            fence, quote_id(item_id), item->fence));
  }
  return FenceVerdict::allowed();
}

Event decide_finish(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                    Outcome outcome, const std::string& detail, const std::string& actor,
                    Micros now) {
  require(judge_fence(item ? &*item : nullptr, item_id, fence));
  return Event{now, actor.empty() ? item->owner : actor, item->project_id, item->item_id,
               ItemFinished{outcome, fence, detail}};
}

Event decide_heartbeat(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                       Micros lease, const std::string& actor, Micros now) {
  require(judge_fence(item ? &*item : nullptr, item_id, fence));
  if (lease <= 0) throw InvalidArgument("a lease must be a positive number of seconds");
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
                       const std::optional<std::string>& head, Micros now) {
  const auto reason = gate_refusal(row, session_open, session, fence, action, head, now);
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
  }
  return GateVerdict::denied(*reason, std::move(message));
}

AssignDecision decide_assign(const std::optional<ItemRow>& row, bool visible,
                             const std::string& session, const std::vector<std::string>& actions,
                             Micros lease, const std::string& actor, Micros now) {
  AssignDecision out;
  out.answer.item_id = row ? row->item_id : std::string();
  // R3: terminal, invisible and missing are one answer, and an invisible
  // item never makes a scoped session wait.
  if (!row || !visible || is_terminal(row->status)) {
    out.answer.outcome = AssignOutcome::no_safe_work;
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
  // Ready, or its lease lapsed: a fresh fence, whoever held it.
  ItemAssigned assigned{session, row->fence + 1, now + lease, row->attempts + 1, actions, row->head};
  out.answer = Assignment{AssignOutcome::assigned, row->item_id, assigned.fence,
                          assigned.lease_expires_at, row->head, actions, 0};
  out.event = Event{now, actor, row->project_id, row->item_id, std::move(assigned)};
  return out;
}

}  // namespace cplane
