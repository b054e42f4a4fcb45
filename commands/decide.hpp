// The decisions: pure functions from the current projected state and a
// command to the events that follow, or a refusal. No I/O, no clock: the
// command layer reads the rows, calls these, appends what they return.
#pragma once

#include <optional>
#include <string>

#include <cplane/store.hpp>
#include <cplane/verdict.hpp>

#include "events/event.hpp"
#include "projections/rows.hpp"

namespace cplane {

// Creating a project: refuses (InvalidArgument) an empty id and an id that is
// already taken.
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
Event decide_claim(const ItemRow& candidate, const std::string& owner, const std::string& actor,
                   Micros lease, Micros now);

// Extending the current claim's lease to `now + lease`; releasing the item
// back to the queue. Both refuse (FenceRejected) exactly as a finish does.
Event decide_heartbeat(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                       Micros lease, const std::string& actor, Micros now);
Event decide_release(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                     const std::string& reason, const std::string& actor, Micros now);

// Whether a fenced report on `item` (null: unknown) under `fence` may be
// accepted: allowed, or denied with FenceRejected's reason and a sentence.
FenceVerdict judge_fence(const ItemRow* item, std::string_view item_id, Fence fence);

// Finishing an item. Throws FenceRejected unless the item exists, is claimed
// and `fence` is its current fence.
Event decide_finish(const std::optional<ItemRow>& item, std::string_view item_id, Fence fence,
                    Outcome outcome, const std::string& detail, const std::string& actor,
                    Micros now);

// The mutation gate (see ControlStore::require_valid_assignment): the
// verdict with a sentence naming what failed.
GateVerdict judge_gate(const ItemRow* row, bool session_open, std::string_view session,
                       std::string_view item_id, Fence fence, std::string_view action,
                       const std::optional<std::string>& head, Micros now);

// Assigning `row` (nullopt: no such item) to `session`: the answer, and
// the event that follows (assigned; lease_extended for a renewal by its
// holder; none for wait and no_safe_work). `visible`: the session's actor
// may see the item's project. `actions` sorted, without duplicates.
struct AssignDecision {
  Assignment answer;
  std::optional<Event> event;
};
AssignDecision decide_assign(const std::optional<ItemRow>& row, bool visible,
                             const std::string& session, const std::vector<std::string>& actions,
                             Micros lease, const std::string& actor, Micros now);

// A candidate may be claimed at `now`: ready, or claimed with lease lapsed.
bool is_claimable(const ItemRow& row, Micros now);

}  // namespace cplane
