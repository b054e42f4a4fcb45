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
  unavailable,       // scheduled for later, or lapsed with no attempts left
  project_paused,    // eligible, but its project is paused
  key_full,          // eligible, but its concurrency key's live leases are at the limit
  rate_limited,      // eligible, but its concurrency key's rate has no token yet
};
CandidateFate judge_candidate(const ItemRow& row, std::string_view session, Micros now);

// What the planner keeps of a candidate: its rank, its fate and (for a
// foreign lease) when that lease ends. Small, so that a walk past many
// candidates keeps little.
struct Candidate {
  std::string item_id;
  bool on_path = false;
  std::int32_t priority = 0;
  Seq queued_seq = 0;
  CandidateFate fate = CandidateFate::take;
  Micros lease_expires_at = 0;
};
Candidate candidate_of(const ItemRow& row, CandidateFate fate);

struct AllocationPlan {
  std::optional<Candidate> chosen;
  std::vector<SkippedCandidate> skipped;  // at most max_listed, in rank order
  std::int64_t skipped_total = 0;
  Micros until = 0;  // the earliest end of a foreign lease skipped (0: none)
};

// Walks `candidates` (any order; open items only) in rank order: the first
// the session may take is chosen, and each skipped before it is listed.
// (Candidates the session holds are not passed in: they are not candidates.)
AllocationPlan plan_allocation(std::vector<Candidate> candidates, std::size_t max_listed);

}  // namespace cplane
