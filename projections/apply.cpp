#include "projections/apply.hpp"

namespace cplane {

std::string_view to_string(ItemStatus status) {
  switch (status) {
    case ItemStatus::ready: return "ready";
    case ItemStatus::claimed: return "claimed";
    case ItemStatus::done: return "done";
    case ItemStatus::failed: return "failed";
  }
  return "unknown";
}

std::optional<ItemStatus> parse_item_status(std::string_view text) {
  if (text == "ready") return ItemStatus::ready;
  if (text == "claimed") return ItemStatus::claimed;
  if (text == "done") return ItemStatus::done;
  if (text == "failed") return ItemStatus::failed;
  return std::nullopt;
}

ItemRow apply(ItemRow row, const StoredEvent& stored) {
  const Event& e = stored.event;
  if (auto* queued = std::get_if<ItemQueued>(&e.body)) {
    row.item_id = e.item_id;
    row.project_id = e.project_id;
    row.payload = queued->payload;
    row.status = ItemStatus::ready;
    row.queued_seq = stored.seq;
    row.queued_at = e.at;
  } else if (auto* claimed = std::get_if<ItemClaimed>(&e.body)) {
    row.status = ItemStatus::claimed;
    row.owner = claimed->owner;
    row.fence = claimed->fence;
    row.attempts = claimed->attempt;
    row.lease_expires_at = claimed->lease_expires_at;
  } else if (auto* finished = std::get_if<ItemFinished>(&e.body)) {
    row.status = finished->outcome == Outcome::done ? ItemStatus::done : ItemStatus::failed;
    row.lease_expires_at = 0;
    row.detail = finished->detail;
  } else {
    return row;  // not an item event
  }
  row.updated_at = e.at;
  row.last_seq = stored.seq;
  return row;
}

ProjectRow apply(ProjectRow row, const StoredEvent& stored) {
  const Event& e = stored.event;
  if (auto* created = std::get_if<ProjectCreated>(&e.body)) {
    row.project_id = e.project_id;
    row.title = created->title;
    row.status = created->status;
    row.created_at = e.at;
    row.last_seq = stored.seq;
  }
  return row;
}

ProjectActorRow apply(ProjectActorRow row, const StoredEvent& stored) {
  const Event& e = stored.event;
  if (auto* assigned = std::get_if<ActorAssigned>(&e.body)) {
    row.project_id = e.project_id;
    row.actor = assigned->actor;
    row.assigned_at = e.at;
    row.last_seq = stored.seq;
  }
  return row;
}

}  // namespace cplane
