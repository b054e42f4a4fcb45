// One name table per enum: the texts an enum is stored as, printed as and
// parsed from, declared once (EnumNames<E>::table) and used by the codec's
// messages, the rows' stored texts, the backends' CHECK constraints (a test
// compares them) and the CLI. A value missing from its table fails
// name_of's exhaustiveness check at compile time (kCount).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <cplane/events.hpp>
#include <cplane/rows.hpp>

namespace cplane {

template <class Enum>
struct EnumNames;  // specialised below: table (value, name), in declaration order

template <>
struct EnumNames<Outcome> {
  static constexpr std::pair<Outcome, std::string_view> table[] = {
      {Outcome::done, "done"}, {Outcome::failed, "failed"}};
};
template <>
struct EnumNames<WorkKind> {
  static constexpr std::pair<WorkKind, std::string_view> table[] = {
      {WorkKind::task, "task"}, {WorkKind::issue, "issue"}, {WorkKind::pr, "pr"}};
};
template <>
struct EnumNames<ReviewState> {
  static constexpr std::pair<ReviewState, std::string_view> table[] = {
      {ReviewState::none, "none"},
      {ReviewState::approved, "approved"},
      {ReviewState::changes_requested, "changes_requested"}};
};
template <>
struct EnumNames<CloseReason> {
  static constexpr std::pair<CloseReason, std::string_view> table[] = {
      {CloseReason::merged, "merged"}, {CloseReason::closed, "closed"}};
};
template <>
struct EnumNames<StreamKind> {
  static constexpr std::pair<StreamKind, std::string_view> table[] = {
      {StreamKind::item, "item"},
      {StreamKind::project, "project"},
      {StreamKind::session, "session"},
      {StreamKind::incident, "incident"},
      {StreamKind::schedule, "schedule"}, {StreamKind::limit, "limit"},
      {StreamKind::segment, "segment"}};
};
template <>
struct EnumNames<ItemStatus> {
  static constexpr std::pair<ItemStatus, std::string_view> table[] = {
      {ItemStatus::ready, "ready"},   {ItemStatus::claimed, "claimed"},
      {ItemStatus::done, "done"},     {ItemStatus::failed, "failed"},
      {ItemStatus::closed, "closed"}, {ItemStatus::scheduled, "scheduled"},
      {ItemStatus::cancelled, "cancelled"}};
};

// Every table lists its values in order 0, 1, 2, ... with no gap: a value
// added to an enum without its name breaks the next one's position, and
// the last value's, which the static_asserts below check against.
template <class Enum>
constexpr bool dense_table() {
  std::size_t i = 0;
  for (const auto& [value, name] : EnumNames<Enum>::table) {
    if (static_cast<std::size_t>(value) != i++ || name.empty()) return false;
  }
  return true;
}
static_assert(dense_table<Outcome>() && dense_table<WorkKind>() && dense_table<ReviewState>() &&
              dense_table<CloseReason>() && dense_table<StreamKind>() &&
              dense_table<ItemStatus>());
static_assert(std::size(EnumNames<Outcome>::table) == 1 + static_cast<int>(Outcome::failed));
static_assert(std::size(EnumNames<WorkKind>::table) == 1 + static_cast<int>(WorkKind::pr));
static_assert(std::size(EnumNames<ReviewState>::table) ==
              1 + static_cast<int>(ReviewState::changes_requested));
static_assert(std::size(EnumNames<CloseReason>::table) == 1 + static_cast<int>(CloseReason::closed));
static_assert(std::size(EnumNames<StreamKind>::table) == 1 + static_cast<int>(StreamKind::segment));
static_assert(std::size(EnumNames<ItemStatus>::table) == 1 + static_cast<int>(ItemStatus::cancelled));

template <class Enum>
constexpr std::string_view name_of(Enum value) {
  for (const auto& [v, name] : EnumNames<Enum>::table) {
    if (v == value) return name;
  }
  return "unknown";
}

template <class Enum>
constexpr std::optional<Enum> enum_named(std::string_view text) {
  for (const auto& [v, name] : EnumNames<Enum>::table) {
    if (name == text) return v;
  }
  return std::nullopt;
}

// "a, b or c": what a refusal says it expected.
template <class Enum>
std::string names_listed(std::string_view last_joiner = " or ") {
  std::string out;
  const auto& table = EnumNames<Enum>::table;
  for (std::size_t i = 0; i < std::size(table); ++i) {
    if (i > 0) out += i + 1 == std::size(table) ? last_joiner : std::string_view(", ");
    out += table[i].second;
  }
  return out;
}

// "'a', 'b', 'c'": the list of a CHECK (column IN (...)) constraint.
template <class Enum>
std::string names_quoted() {
  std::string out;
  for (const auto& [v, name] : EnumNames<Enum>::table) {
    if (!out.empty()) out += ", ";
    out += "'" + std::string(name) + "'";
  }
  return out;
}

}  // namespace cplane
