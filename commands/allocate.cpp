// The allocator (allocate_next) and the terminal path it routes first.
#include "commands/allocate.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "commands/decide.hpp"
#include "commands/flow.hpp"
#include "commands/internal.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"
#include "storage/backend.hpp"

namespace cplane {

using namespace detail;
using storage::Sync;
using storage::Transaction;

std::string_view to_string(AllocateOutcome outcome) {
  switch (outcome) {
    case AllocateOutcome::preview: return "preview";
    case AllocateOutcome::assigned: return "assigned";
    case AllocateOutcome::wait: return "wait";
    case AllocateOutcome::no_safe_work: return "no_safe_work";
  }
  return "unknown";
}

std::string_view to_string(SkipReason reason) {
  switch (reason) {
    case SkipReason::routed_to_author: return "routed_to_author";
    case SkipReason::foreign_lease: return "foreign_lease";
    case SkipReason::project_paused: return "project_paused";
    case SkipReason::key_full: return "key_full";
    case SkipReason::rate_limited: return "rate_limited";
  }
  return "unknown";
}

bool ranks_before(const ItemRow& a, const ItemRow& b) {
  const bool a_path = a.terminal_since != 0;
  const bool b_path = b.terminal_since != 0;
  if (a_path != b_path) return a_path;
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.queued_seq < b.queued_seq;
}

CandidateFate judge_candidate(const ItemRow& row, std::string_view session, Micros now) {
  // Scheduled for later, or lapsed with no attempts left: nothing to take
  // (a claim or the sweep fails the exhausted), and nothing to wait for.
  if ((row.status == ItemStatus::scheduled && row.run_at > now) || lapsed_exhausted(row, now)) {
    return CandidateFate::unavailable;
  }
  const bool live = lease_live(row, now);
  // What the session holds is not a candidate at all, whatever its routing.
  if (live && row.session == session) return CandidateFate::own;
  // A change requested goes back to its author (a pr with no author has
  // nobody to go back to: it is routed as any other item).
  if (row.review == ReviewState::changes_requested && !row.author.empty() &&
      row.author != session) {
    return CandidateFate::routed_to_author;
  }
  return live ? CandidateFate::foreign_lease : CandidateFate::take;
}

Candidate candidate_of(const ItemRow& row, CandidateFate fate) {
  return Candidate{row.item_id, row.terminal_since != 0, row.priority, row.queued_seq, fate,
                   row.lease_expires_at};
}

AllocationPlan plan_allocation(std::vector<Candidate> candidates, std::size_t max_listed) {
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.on_path != b.on_path) return a.on_path;
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.queued_seq < b.queued_seq;
  });
  AllocationPlan plan;
  for (auto& row : candidates) {
    const CandidateFate fate = row.fate;
    if (fate == CandidateFate::own || fate == CandidateFate::unavailable) continue;
    if (fate == CandidateFate::take) {
      plan.chosen = std::move(row);
      break;
    }
    ++plan.skipped_total;
    if (fate == CandidateFate::foreign_lease &&
        (plan.until == 0 || row.lease_expires_at < plan.until)) {
      plan.until = row.lease_expires_at;
    }
    if (plan.skipped.size() < max_listed) {
      SkipReason reason = SkipReason::foreign_lease;
      switch (fate) {
        case CandidateFate::routed_to_author: reason = SkipReason::routed_to_author; break;
        case CandidateFate::project_paused: reason = SkipReason::project_paused; break;
        case CandidateFate::key_full: reason = SkipReason::key_full; break;
        case CandidateFate::rate_limited: reason = SkipReason::rate_limited; break;
        default: break;
      }
      plan.skipped.push_back({row.item_id, reason});
    }
  }
  // A wait names a foreign lease: routing alone never makes a session wait.
  if (plan.chosen) plan.until = 0;
  return plan;
}

namespace {
// How many walks an allocation makes in one transaction when its choice is
// taken meanwhile (PostgreSQL), before the command runs again.
constexpr int kAllocatorWalks = 8;
}  // namespace

Allocation ControlStore::Impl::allocate_next(const std::string& session, AllocateMode mode,
                                             const std::vector<std::string>& actions,
                                             std::optional<Seconds> lease,
                                             std::optional<Micros> now) {
  const InUse in_use(*this);
  if (mode != AllocateMode::preview && mode != AllocateMode::apply) {
    throw InvalidArgument(fmt::format("unknown allocate mode {}: expected preview or apply",
                                      static_cast<int>(mode)));
  }
  const bool apply = mode == AllocateMode::apply;
  require_name(session, "session id");
  const auto allowed = checked_actions(actions, true);
  const Micros lease_us = require_lease(lease.value_or(options_.lease));
  if (now) require_now(*now);
  // A preview reads one snapshot; apply decides under the write lock, so
  // that nothing can take the item between the choice and the reservation.
  return transact(apply, sync_for_claims(), [&](Transaction& tx) -> Allocation {
    const Micros at = clock(now);
    const SessionRow holder = open_session_row(session);
    // Per project in scope, an index walk in the allocator's order that stops
    // at the first item the session may take: the cost grows with the
    // candidates skipped before it, never with the depth of the queue.
    KeyGate gate(*backend_, at);
    const auto walk = [&] {
      std::vector<Candidate> candidates;
      for (const auto& project :
           backend_->project_ids(holder.actor.empty() ? nullptr : &holder.actor)) {
        const auto project_row = backend_->find_project(project);
        const bool paused = project_row && project_row->paused;
        auto cursor = backend_->scan_allocatable(project);
        ItemRow row;
        while (cursor->next(row)) {
          CandidateFate fate = judge_candidate(row, session, at);
          if (fate == CandidateFate::own || fate == CandidateFate::unavailable) continue;
          // A paused project offers nothing, and nothing to wait for: its
          // first candidate is listed as skipped, once.
          if (paused) fate = CandidateFate::project_paused;
          // A full or rate-limited key: listed, and the walk goes on past it.
          if (fate == CandidateFate::take) {
            if (const auto block = gate.block(row.concurrency_key)) {
              fate = block->kind == KeyBlock::Kind::key_full ? CandidateFate::key_full
                                                             : CandidateFate::rate_limited;
            }
          }
          candidates.push_back(candidate_of(row, fate));
          if (fate == CandidateFate::take || fate == CandidateFate::project_paused) break;
        }
      }
      return plan_allocation(std::move(candidates), kMaxSkippedListed);
    };
    // On PostgreSQL a walk reads an earlier snapshot than the lock on its
    // choice sees (READ COMMITTED): a choice another session took or ended
    // meanwhile (the walk reads only live statuses, so the judge does not
    // look for an end) is a race lost. The lock waited for that session's
    // commit, so a new walk sees it: walk again, a few times, then let the
    // command run again (Conflict). Under one writer (SQLite) the walk and
    // the lock agree, and a refusal below is a bug.
    AllocationPlan plan;
    std::optional<ItemRow> chosen;
    for (int walks = 1;; ++walks) {
      plan = walk();
      if (!plan.chosen) break;
      // The walk read what ranks and judges; the choice is read whole.
      chosen = backend_->find_item(plan.chosen->item_id);
      if (!chosen) throw InternalError("the allocator's choice vanished inside its transaction");
      if (!apply || (!is_terminal(chosen->status) &&
                     judge_candidate(*chosen, session, at) == CandidateFate::take)) {
        break;
      }
      if (walks == kAllocatorWalks) {
        throw storage::Conflict(fmt::format("item {} was taken by another session meanwhile",
                                            quote_id(chosen->item_id)));
      }
    }
    Allocation out;
    out.skipped = std::move(plan.skipped);
    out.skipped_total = plan.skipped_total;
    if (!plan.chosen) {
      out.outcome = plan.until != 0 ? AllocateOutcome::wait : AllocateOutcome::no_safe_work;
      out.until = plan.until;
      return out;
    }
    AssignDecision decision =
        decide_assign(chosen, true, session, allowed, lease_us, acting_for(holder), at);
    if (!decision.answer.is_assigned() || !decision.event ||
        !std::holds_alternative<ItemAssigned>(decision.event->body)) {
      throw InternalError(fmt::format("the allocator chose item {}, which assign would not take",
                                      quote_id(chosen->item_id)));
    }
    out.item_id = chosen->item_id;
    out.fence = decision.answer.fence;
    out.lease_expires_at = decision.answer.lease_expires_at;
    out.expected_head = decision.answer.expected_head;
    out.actions = decision.answer.actions;
    if (!apply) {
      out.outcome = AllocateOutcome::preview;
      return out;  // the read transaction ends: nothing written
    }
    const StoredEvent stored{backend_->append(*decision.event), *decision.event};
    backend_->update_item(cplane::apply(*chosen, stored));
    gate.claimed(chosen->concurrency_key, stored);
    tx.commit();
    out.outcome = AllocateOutcome::assigned;
    return out;
  });
}

// ---- the terminal path ------------------------------------------------------------

std::vector<TerminalLockRow> ControlStore::Impl::terminal_path() {
  const InUse in_use(*this);
  auto tx = Transaction::read(*backend_);
  std::vector<TerminalLockRow> out;
  auto cursor = backend_->scan_terminal_locks();
  TerminalLockRow row;
  while (cursor->next(row)) out.push_back(row);
  tx.commit();
  return out;
}

}  // namespace cplane
