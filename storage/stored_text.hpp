// Texts the backends store for enums, read back without throwing: a value
// that is none of them (only tampering stores one) is nullopt, so that the
// row can still be scanned, reported and repaired.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include <cplane/errors.hpp>
#include <cplane/events.hpp>
#include <cplane/rows.hpp>

#include "events/names.hpp"
#include "storage/backend.hpp"
#include "events/errors.hpp"

namespace cplane::storage {

inline std::optional<WorkKind> parse_work_kind_text(std::string_view text) {
  return enum_named<WorkKind>(text);
}

inline std::optional<ReviewState> parse_review_text(std::string_view text) {
  return enum_named<ReviewState>(text);
}

// Reads a stored enum's text into `field`. Returns "" when the text is one
// of its values, else what was stored ("(empty)" for nothing), which goes to
// the ScannedItem's `invalid_*`: the row is then reported by verify and
// repaired by rebuild.
template <class E, class Parse>
std::string read_stored(std::string text, Parse parse, E& field) {
  if (auto value = parse(text)) {
    field = *value;
    return {};
  }
  return text.empty() ? std::string("(empty)") : text;
}

// The row a command decides on: one whose status, kind, review or routing
// was stored as none of theirs is refused (corruption), never decided on.
inline ItemRow decidable(ScannedItem scanned) {
  for (const auto& [what, value] : {std::pair{"status", &scanned.invalid_status},
                                    std::pair{"kind", &scanned.invalid_kind},
                                    std::pair{"review state", &scanned.invalid_review},
                                    std::pair{"routing value", &scanned.invalid_routing}}) {
    if (value->empty()) continue;
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("item {} has an unknown {} '{}' (edited behind cplane's "
                                   "back?): run cplane verify, then cplane rebuild",
                                   quote_id(scanned.row.item_id), what, *value));
  }
  return std::move(scanned.row);
}

}  // namespace cplane::storage
