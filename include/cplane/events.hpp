// Event value types: what the log says happened, independent of how it is
// encoded (events.capnp) or stored (storage/). Types are past-tense facts.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>
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

// The holder of the current fence keeps its lease: it now ends later.
struct LeaseExtended {
  Fence fence = 0;
  Micros lease_expires_at = 0;  // the new end: the command's time + the lease
  bool operator==(const LeaseExtended&) const = default;
};

// The holder of the current fence gives the item back: it is ready again,
// and the next claim takes a higher fence.
struct ItemReleased {
  Fence fence = 0;
  std::string reason;
  bool operator==(const ItemReleased&) const = default;
};

// A claim's lease lapsed and the sweep (expire_leases) recorded it: the
// history shows who lost the item, under which fence, and when. The row
// stays claimed (lapsed): only a new claim, with a higher fence, or the
// holder's own report moves it on.
struct LeaseExpired {
  Fence fence = 0;
  std::string owner;
  Micros lease_expires_at = 0;  // when the lease had ended
  bool operator==(const LeaseExpired&) const = default;
};

using EventBody = std::variant<ProjectCreated, ActorAssigned, ItemQueued, ItemClaimed,
                               ItemFinished, LeaseExtended, ItemReleased, LeaseExpired>;

// ---- streams ----------------------------------------------------------------
// Every event belongs to exactly one stream: a kind and an id. Replays,
// scans and projections go by stream; nothing is inferred from an empty id.
enum class StreamKind : std::uint8_t {
  item,     // id: the item id. queued, claimed, done, failed
  project,  // id: the project id. project_created, actor_assigned
};

// "item", "project": the stored names (the events table's stream_kind).
std::string_view to_string(StreamKind kind);
std::optional<StreamKind> parse_stream_kind(std::string_view text);

struct StreamRef {
  StreamKind kind = StreamKind::item;
  std::string id;
  bool operator==(const StreamRef&) const = default;
};

// ---- the traits table: one entry per event kind ---------------------------
// What each kind is called in the log, which stream it belongs to and which
// fence it carries. Adding an event kind: a struct above, a member of
// EventBody, a specialisation here, a member of the body union in
// events.capnp with its encode/decode case (events/codec.cpp), and a case in
// each exhaustive visit (apply, verify): each of those fails to compile
// until it is there (see docs/architecture.md).
template <class E>
struct EventTraits;  // deliberately undefined: every kind must specialise it

template <>
struct EventTraits<ProjectCreated> {
  static constexpr StreamKind stream = StreamKind::project;
  static std::string_view name(const ProjectCreated&) { return "project_created"; }
  static std::optional<Fence> fence(const ProjectCreated&) { return std::nullopt; }
};
template <>
struct EventTraits<ActorAssigned> {
  static constexpr StreamKind stream = StreamKind::project;
  static std::string_view name(const ActorAssigned&) { return "actor_assigned"; }
  static std::optional<Fence> fence(const ActorAssigned&) { return std::nullopt; }
};
template <>
struct EventTraits<ItemQueued> {
  static constexpr StreamKind stream = StreamKind::item;
  static std::string_view name(const ItemQueued&) { return "queued"; }
  static std::optional<Fence> fence(const ItemQueued&) { return std::nullopt; }
};
template <>
struct EventTraits<ItemClaimed> {
  static constexpr StreamKind stream = StreamKind::item;
  static std::string_view name(const ItemClaimed&) { return "claimed"; }
  static std::optional<Fence> fence(const ItemClaimed& e) { return e.fence; }
};
template <>
struct EventTraits<ItemFinished> {
  static constexpr StreamKind stream = StreamKind::item;
  static std::string_view name(const ItemFinished& e) { return to_string(e.outcome); }
  static std::optional<Fence> fence(const ItemFinished& e) { return e.fence; }
};

template <>
struct EventTraits<LeaseExtended> {
  static constexpr StreamKind stream = StreamKind::item;
  static std::string_view name(const LeaseExtended&) { return "lease_extended"; }
  static std::optional<Fence> fence(const LeaseExtended& e) { return e.fence; }
};
template <>
struct EventTraits<ItemReleased> {
  static constexpr StreamKind stream = StreamKind::item;
  static std::string_view name(const ItemReleased&) { return "released"; }
  static std::optional<Fence> fence(const ItemReleased& e) { return e.fence; }
};

template <>
struct EventTraits<LeaseExpired> {
  static constexpr StreamKind stream = StreamKind::item;
  static std::string_view name(const LeaseExpired&) { return "lease_expired"; }
  static std::optional<Fence> fence(const LeaseExpired& e) { return e.fence; }
};

// A kind with a complete traits entry.
template <class E>
concept EventKind = requires(const E& e) {
  { EventTraits<E>::stream } -> std::convertible_to<StreamKind>;
  { EventTraits<E>::name(e) } -> std::convertible_to<std::string_view>;
  { EventTraits<E>::fence(e) } -> std::same_as<std::optional<Fence>>;
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

struct Event {
  Micros at = 0;
  std::string actor;       // "" for the control plane
  std::string project_id;
  std::string item_id;     // "" for events of another stream than an item's
  EventBody body;
  bool operator==(const Event&) const = default;
};

// The stream an event belongs to: its kind's, with the id of that stream.
StreamRef stream_of(const Event& event);

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

// The stream kind an event of this body belongs to.
StreamKind stream_kind_of(const EventBody& body);

}  // namespace cplane
