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

}  // namespace cplane
