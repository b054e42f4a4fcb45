// The allocator's planner: pure (no I/O, no clock), so that a preview and
// an applied allocation choose alike from the same rows.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include <cplane/store.hpp>

#include "projections/rows.hpp"

namespace cplane {

// The allocator's order: on the terminal path first, then higher priority,
// then queued first (the order of the items_alloc index).
bool ranks_before(const ItemRow& a, const ItemRow& b);

// What the allocator does with one open item for `session` at `now`.
enum class CandidateFate {
  take,              // eligible
  routed_to_author,  // changes_requested, and `session` is not its author
  foreign_lease,     // another's live lease
  own,               // `session` holds it: not a candidate
};
CandidateFate judge_candidate(const ItemRow& row, std::string_view session, Micros now);

struct AllocationPlan {
  std::optional<ItemRow> chosen;
  std::vector<SkippedCandidate> skipped;  // at most max_listed, in rank order
  std::int64_t skipped_total = 0;
  Micros until = 0;  // the earliest end of a foreign lease skipped (0: none)
};

// Walks `candidates` (any order; open items only) in rank order: the first
// the session may take is chosen, and each skipped before it is listed.
AllocationPlan plan_allocation(std::vector<ItemRow> candidates, std::string_view session,
                               Micros now, std::size_t max_listed);

}  // namespace cplane
