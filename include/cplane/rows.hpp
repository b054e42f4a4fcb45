// The projected rows: what commands read to decide and queries answer from.
// Each is a cache of the fold of its stream of events (see apply.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <cplane/events.hpp>

namespace cplane {

enum class ItemStatus { ready, claimed, done, failed };

std::string_view to_string(ItemStatus status);
std::optional<ItemStatus> parse_item_status(std::string_view text);
inline bool is_terminal(ItemStatus s) { return s == ItemStatus::done || s == ItemStatus::failed; }

struct ItemRow {
  std::string item_id;
  std::string project_id;
  std::string payload;            // JSON text
  ItemStatus status = ItemStatus::ready;
  std::string owner;              // "" until first claimed; kept after finish
  Fence fence = 0;                // 0 until first claimed
  std::uint32_t attempts = 0;     // number of claims
  Micros lease_expires_at = 0;    // 0 unless claimed
  std::string detail;             // the finish detail, "" otherwise
  Seq queued_seq = 0;             // seq of the queued event: claim order
  Micros queued_at = 0;
  Micros updated_at = 0;          // `at` of the last event applied
  Seq last_seq = 0;               // seq of the last event applied
  bool operator==(const ItemRow&) const = default;
};

struct ProjectRow {
  std::string project_id;
  std::string title;
  std::string status;
  Micros created_at = 0;
  Seq last_seq = 0;
  bool operator==(const ProjectRow&) const = default;
};

struct ProjectActorRow {
  std::string project_id;
  std::string actor;
  Micros assigned_at = 0;
  Seq last_seq = 0;
  bool operator==(const ProjectActorRow&) const = default;
};

}  // namespace cplane
