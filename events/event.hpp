// Event value types: what the log says happened, independent of how it is
// encoded (events.capnp) or stored (storage/). Types are past-tense facts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace cplane {

using Micros = std::int64_t;  // microseconds since the Unix epoch, UTC
using Fence = std::uint64_t;  // per item; rises strictly with every claim
using Seq = std::int64_t;     // global position in the log, from 1

enum class Outcome { done, failed };

std::string_view to_string(Outcome outcome);
// "done" or "failed"; anything else throws InvalidArgument.
Outcome parse_outcome(std::string_view text);

struct ProjectCreated {
  std::string title;
  std::string status;
  bool operator==(const ProjectCreated&) const = default;
};

struct ActorAssigned {
  std::string actor;
  bool operator==(const ActorAssigned&) const = default;
};

struct ItemQueued {
  std::string payload;  // JSON text
  bool operator==(const ItemQueued&) const = default;
};

struct ItemClaimed {
  std::string owner;
  Fence fence = 0;
  Micros lease_expires_at = 0;
  std::uint32_t attempt = 0;
  bool operator==(const ItemClaimed&) const = default;
};

struct ItemFinished {
  Outcome outcome = Outcome::done;
  Fence fence = 0;
  std::string detail;
  bool operator==(const ItemFinished&) const = default;
};

using EventBody =
    std::variant<ProjectCreated, ActorAssigned, ItemQueued, ItemClaimed, ItemFinished>;

struct Event {
  Micros at = 0;
  std::string actor;       // "" for the control plane
  std::string project_id;
  std::string item_id;     // "" for project events
  EventBody body;
  bool operator==(const Event&) const = default;
};

// An event as read back from the log.
struct StoredEvent {
  Seq seq = 0;
  Event event;
  // "queued", "claimed", "done", ... (see type_name below).
  std::string_view type() const;
};

// The name stored in the `type` column and shown to users:
// "project_created", "actor_assigned", "queued", "claimed", "done", "failed".
std::string_view type_name(const EventBody& body);

// The fence an event carries, if it carries one (claimed, done, failed).
std::optional<Fence> fence_of(const EventBody& body);

}  // namespace cplane
