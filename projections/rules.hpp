// The fence and lease rules, in one place. decide (what a command may do),
// verify (what the log may hold) and the probe (what a fleet did) all judge
// by these, so that the three can never disagree about what is allowed.
// Pure: no I/O, no clock.
#pragma once

#include <optional>

#include "events/errors.hpp"
#include "projections/rows.hpp"

namespace cplane {

// A claim made at `at` may take the item: it is ready, or it is claimed and
// its lease lapsed at or before `at` (reclaimable exactly at expiry, not a
// microsecond before). Terminal items are never claimable.
inline bool claimable(const ItemRow& row, Micros at) {
  return row.status == ItemStatus::ready ||
         (row.status == ItemStatus::claimed && row.lease_expires_at <= at);
}

// A claim's fence must be strictly above every earlier fence of the item.
inline bool fence_rises(Fence before, Fence claimed) { return claimed > before; }

// Why a fenced report (finish; later heartbeat, release) presenting `fence`
// must be refused, or nullopt when `fence` is the current claim's. `row` is
// null for an unknown item. The fence, not the clock, decides: a lapsed
// lease that nobody reclaimed yet still accepts its current fence.
inline std::optional<FenceRejected::Reason> fence_refusal(const ItemRow* row, Fence fence) {
  using Reason = FenceRejected::Reason;
  if (row == nullptr) return Reason::unknown_item;
  if (is_terminal(row->status)) return Reason::terminal;
  if (row->status != ItemStatus::claimed) return Reason::not_claimed;
  if (fence != row->fence) return Reason::stale_fence;
  return std::nullopt;
}

}  // namespace cplane
