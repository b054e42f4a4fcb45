// The fence and lease rules, in one place. decide (what a command may do),
// verify (what the log may hold) and the probe (what a fleet did) all judge
// by these, so that the three can never disagree about what is allowed.
// Pure: no I/O, no clock.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "events/errors.hpp"
#include "projections/rows.hpp"

namespace cplane {

// Attempts remain: the item has no attempt limit (no retry policy, the
// seed's semantics), or fewer attempts (claims) than its limit.
inline bool attempts_left(const ItemRow& row) {
  return row.attempt_limit == 0 || row.attempts < row.attempt_limit;
}

// The item is claimed and its lease lapsed at or before `at` (exactly at
// expiry, not a microsecond before).
inline bool lease_lapsed(const ItemRow& row, Micros at) {
  return row.status == ItemStatus::claimed && row.lease_expires_at <= at;
}

// A claim made at `at` may take the item: it is ready; or scheduled and due
// (run_at at or before `at`); or its lease lapsed and attempts remain.
// Terminal items are never claimable.
inline bool claimable(const ItemRow& row, Micros at) {
  return row.status == ItemStatus::ready ||
         (row.status == ItemStatus::scheduled && row.run_at <= at) ||
         (lease_lapsed(row, at) && attempts_left(row));
}

// Under a policy, a lapsed lease counts as an attempt: with none left, the
// item is never handed out again, and the next claim or sweep fails it.
inline bool lapsed_exhausted(const ItemRow& row, Micros at) {
  return lease_lapsed(row, at) && !attempts_left(row);
}

// When an available item became available: a ready one when queued (or
// retried), a scheduled one at run_at, a lapsed one when its lease ended.
inline Micros available_since(const ItemRow& row) {
  switch (row.status) {
    case ItemStatus::scheduled: return row.run_at;
    case ItemStatus::claimed: return row.lease_expires_at;
    default: return row.queued_at;
  }
}

// Which of two available items a claim takes first: the one available
// earliest, ties in queue order.
inline bool available_before(const ItemRow& a, const ItemRow& b) {
  const Micros x = available_since(a), y = available_since(b);
  return x != y ? x < y : a.queued_seq < b.queued_seq;
}

// Within a project, which of two available items a claim takes first: the
// higher priority, then the one available earliest, ties in queue order.
inline bool claim_before(const ItemRow& a, const ItemRow& b) {
  return a.priority != b.priority ? a.priority > b.priority : available_before(a, b);
}

// ---- limits --------------------------------------------------------------
// The rate is a GCRA (generic cell rate algorithm, a token bucket kept as
// one time): claims are spaced `interval` = period / count apart, and up to
// `burst` may start back to back. `tat` is the theoretical arrival time of
// the next claim; a claim at `at` is allowed when at >= tat - (burst - 1) *
// interval, and moves tat to max(tat, at) + interval.
inline Micros gcra_interval(const LimitRow& l) {
  if (l.rate_count == 0) return 0;
  return std::max<Micros>(1, l.rate_period / static_cast<Micros>(l.rate_count));
}
inline bool has_rate(const LimitRow& l) { return !l.removed && l.rate_count > 0; }
// The earliest time a claim of the key may start (the next token).
inline Micros gcra_next_token(const LimitRow& l) {
  if (!has_rate(l)) return 0;
  const Micros burst = std::max<Micros>(1, l.burst);
  return l.tat - (burst - 1) * gcra_interval(l);
}
inline Micros gcra_advance(const LimitRow& l, Micros at) {
  if (!has_rate(l)) return l.tat;
  return std::max(l.tat, at) + gcra_interval(l);
}

// Why a claim at `at` may not start an item of the key: its live leases
// (`live`, counted from the claimed rows) are at the bound, or the rate's
// next token is later. nullopt: it may.
struct KeyBlock {
  enum class Kind { key_full, rate_limited } kind = Kind::key_full;
  std::int64_t live = 0;  // key_full: the live leases, the bound is the limit's
  Micros until = 0;       // rate_limited: the next token
};
inline std::optional<KeyBlock> key_block(const LimitRow* limit, std::int64_t live, Micros at) {
  if (limit == nullptr || limit->removed) return std::nullopt;
  if (limit->concurrency > 0 && live >= static_cast<std::int64_t>(limit->concurrency)) {
    return KeyBlock{KeyBlock::Kind::key_full, live, 0};
  }
  if (has_rate(*limit) && at < gcra_next_token(*limit)) {
    return KeyBlock{KeyBlock::Kind::rate_limited, live, gcra_next_token(*limit)};
  }
  return std::nullopt;
}

// ---- fairness across projects -------------------------------------------------
// Weighted round-robin by claims (stride scheduling): of the projects with
// an item to take, the claim takes the one whose pass is lowest (ties: its
// item as claim_before ranks it), and that project's pass becomes
// fair_pass_after(...). `others_min` is the lowest pass of the other
// candidate projects: a project that comes back after being idle starts at
// most kFairStride (one claim at weight 1) behind them, so it takes its
// share, not a burst of everything it missed.
inline std::int64_t fair_stride(std::uint32_t weight) {
  return kFairStride / std::max<std::uint32_t>(1, weight);
}
inline std::int64_t fair_pass_after(std::int64_t pass, std::uint32_t weight,
                                    std::int64_t others_min) {
  return std::max(pass, others_min - kFairStride) + fair_stride(weight);
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
  if (row->status == ItemStatus::cancelled) return Reason::cancelled;
  if (is_terminal(row->status)) return Reason::terminal;
  // The attempt this fence was given for already failed, or was redriven.
  if (fence != 0 && fence <= row->ended_fence) return Reason::stale_fence;
  if (row->status != ItemStatus::claimed) return Reason::not_claimed;
  if (fence != row->fence) return Reason::stale_fence;
  return std::nullopt;
}

// A lease is live at `at` while it has not lapsed: it ends strictly after.
inline bool lease_live(const ItemRow& row, Micros at) {
  return row.status == ItemStatus::claimed && row.lease_expires_at > at;
}

// Why the mutation gate must deny `session` a mutation on `row` (null: an
// unknown item), or nullopt to allow it. The checks go in the order of
// GateReason, and the first that holds is the reason. `key_held_elsewhere`:
// the item's key has a limit of one and another item of the key is under a
// live lease (a limit lowered while both ran): key-scoped exclusivity. `session_open` is
// false for an unknown or closed session: it holds no lease.
//
// A terminal item has no lease, but its holder on record (the session of
// its last assignment, kept by done, failed and closed) is told
// work_terminal rather than no_live_lease: the work ended, not its lease.
inline std::optional<GateReason> gate_refusal(const ItemRow* row, bool session_open,
                                              std::string_view session, Fence fence,
                                              std::string_view action,
                                              const std::optional<std::string>& head,
                                              Micros at, bool key_held_elsewhere = false) {
  if (!session_open || row == nullptr || row->session != session) return GateReason::no_live_lease;
  const bool terminal = is_terminal(row->status);
  if (!terminal && !lease_live(*row, at)) return GateReason::no_live_lease;
  if (fence != row->fence) return GateReason::stale_fence;
  if (terminal) return GateReason::work_terminal;
  if (!std::binary_search(row->actions.begin(), row->actions.end(), action)) {
    return GateReason::action_not_allowed;
  }
  if (row->head_moved || row->head != row->expected_head ||
      (head && *head != row->expected_head)) {
    return GateReason::head_drift;
  }
  if (key_held_elsewhere) return GateReason::key_held;
  return std::nullopt;
}

}  // namespace cplane
