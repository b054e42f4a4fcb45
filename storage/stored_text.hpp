// Texts the backends store for enums, read back without throwing: a value
// that is none of them (only tampering stores one) is nullopt, so that the
// row can still be scanned, reported and repaired.
#pragma once

#include <optional>
#include <string_view>

#include <cplane/events.hpp>

namespace cplane::storage {

inline std::optional<WorkKind> parse_work_kind_text(std::string_view text) {
  if (text == "task") return WorkKind::task;
  if (text == "issue") return WorkKind::issue;
  if (text == "pr") return WorkKind::pr;
  return std::nullopt;
}

inline std::optional<ReviewState> parse_review_text(std::string_view text) {
  if (text == "none") return ReviewState::none;
  if (text == "approved") return ReviewState::approved;
  if (text == "changes_requested") return ReviewState::changes_requested;
  return std::nullopt;
}

}  // namespace cplane::storage
