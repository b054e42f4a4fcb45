// verify's checks of an item stream's events (verify/event_checks.hpp): one
// item at a time, one worker at a time, fences that rise by one, leases
// that run forward, one terminal event, and what the gate and the
// sessions allowed.
#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "events/errors.hpp"
#include "events/json.hpp"
#include "projections/rules.hpp"
#include "verify/event_checks.hpp"
#include "verify/quote.hpp"

namespace cplane::verify_detail {

void ItemChecks::cross_stream() const {
  // An item still held by a session after that session closed: closing
  // releases every item first.
  auto outlived = [&](const char* when) {
    if (a.unreadable || a.reported_outlived || a.item.status != ItemStatus::claimed ||
        a.item.session.empty()) {
      return;
    }
    const auto life = facts.sessions.find(a.item.session);
    if (life == facts.sessions.end() || life->second.closed == 0 || life->second.closed > seq) {
      return;
    }
    a.reported_outlived = true;
    problem(ProblemKind::session_closed_while_holding,
            fmt::format("item {} was still held by session {} {} (the session closed at seq {})",
                        a.stream.id, quoted(a.item.session), when, life->second.closed));
  };
  outlived(fmt::format("at seq {}", seq).c_str());
  // What the log must say on its own, whatever the rows: an item's events
  // come after its project's creation.
  const auto created = facts.project_created_at.find(e.project_id);
  if (created != facts.project_created_at.end() && seq < created->second &&
      !a.reported_before_project) {
    a.reported_before_project = true;
    problem(ProblemKind::event_before_project,
            fmt::format("event seq {} ({}) of item {} comes before project {} was created (seq "
                        "{})",
                        seq, type_name(e.body), a.stream.id, e.project_id, created->second));
  }
}

void ItemChecks::item_created_first() const {
  if (!a.created && !a.reported_no_creation) {
    a.reported_no_creation = true;
    problem(ProblemKind::no_creation_event,
            fmt::format("item {} has a {} event (seq {}) before any queued "
                        "event",
                        a.stream.id, type_name(e.body), seq));
  }
  if (a.terminals > 0) {
    problem(ProblemKind::event_after_terminal,
            fmt::format("event seq {} ({}) follows the terminal event of item {}", seq,
                        type_name(e.body), a.stream.id));
  }
}

void ItemChecks::audit_claim(const std::string& owner, Fence fence, std::uint32_t attempt,
                             Micros lease_expires_at) const {
  item_created_first();
  // After an unreadable event the fold no longer knows the fence,
  // status or lease it left: checks against them would only
  // restate that fault as another.
  if (a.unreadable) return;
  // Exactly one worker at a time: a claim takes a ready item or
  // one whose lease had lapsed when the claim was made.
  if (a.item.status == ItemStatus::scheduled && !claimable(a.item, e.at)) {
    problem(ProblemKind::lifecycle_not_allowed,
            fmt::format("claim seq {} by {} at {} took the item before its run_at {}", seq,
                        owner, e.at, a.item.run_at));
  }
  if (a.item.attempt_limit != 0 && a.item.attempts >= a.item.attempt_limit &&
      a.item.status != ItemStatus::claimed) {
    problem(ProblemKind::lifecycle_not_allowed,
            fmt::format("claim seq {} by {} is attempt {} of an item whose limit is {}", seq,
                        owner, a.item.attempts + 1, a.item.attempt_limit));
  } else if (lapsed_exhausted(a.item, e.at)) {
    problem(ProblemKind::lifecycle_not_allowed,
            fmt::format("claim seq {} by {} took the item after its {} attempt(s) ran out", seq,
                        owner, a.item.attempts));
  } else if (a.item.status == ItemStatus::claimed && !claimable(a.item, e.at)) {
    problem(ProblemKind::claim_while_leased,
            fmt::format("claim seq {} by {} at {} took the item while {}'s lease ran "
                        "until {}",
                        seq, owner, e.at, a.item.owner, a.item.lease_expires_at));
  }
  if (!fence_rises(a.item.fence, fence)) {
    problem(ProblemKind::fence_not_monotonic,
            fmt::format("claim seq {} has fence {}, not above the earlier fence {}", seq,
                        fence, a.item.fence));
  } else if (fence != a.item.fence + 1) {
    // Every claim takes the next fence: a jump means claims are
    // missing from the log (or a fence was forged).
    problem(ProblemKind::fence_skipped,
            fmt::format("claim seq {} has fence {}, but the fence before it was {}: "
                        "claims are missing",
                        seq, fence, a.item.fence));
  }
  // (A fence that does not rise already names this claim's fault.)
  if (fence == a.item.fence + 1 && attempt != a.item.attempts + 1) {
    problem(ProblemKind::attempt_not_rising,
            fmt::format("claim seq {} is attempt {}, after {} earlier claim(s)", seq,
                        attempt, a.item.attempts));
  }
  if (lease_expires_at <= e.at) {
    problem(ProblemKind::lease_before_claim,
            fmt::format("claim seq {} at {} has a lease that ends at {}, not after it",
                        seq, e.at, lease_expires_at));
  }
}

void ItemChecks::forge_fact() const {
  if (!a.unreadable && a.created && a.item.kind != WorkKind::pr) {
    problem(ProblemKind::forge_fact_invalid,
            fmt::format("{} seq {} on item {}, which is {} {}: only a pr "
                        "has one",
                        type_name(e.body), seq, a.stream.id,
                        a.item.kind == WorkKind::issue ? "an" : "a", to_string(a.item.kind)));
  }
}

void ItemChecks::operator()(const ItemQueued& queued) const {
  try {
    require_payload(queued.payload);
  } catch (const InvalidArgument& bad) {
    problem(ProblemKind::invalid_payload,
            fmt::format("queued seq {} of item {} has a payload no command accepts: {}",
                        seq, a.stream.id, bad.what()));
  }
  if (a.created) {
    problem(ProblemKind::duplicate_creation_event,
            fmt::format("item {} is queued again by event seq {}", a.stream.id, seq));
  }
  if (a.terminals > 0) {
    problem(ProblemKind::event_after_terminal,
            fmt::format("event seq {} (queued) follows the terminal event of item {}",
                        seq, a.stream.id));
  }
  a.created = true;
  if (queued.key.rfind("schedule:", 0) == 0) {
    facts.schedule_items.emplace(a.stream.id, queued.key);
  }
  if (queued.kind != WorkKind::pr && (!queued.head.empty() || !queued.author.empty())) {
    problem(ProblemKind::forge_fact_invalid,
            fmt::format("queued seq {} gives {} {} a head or an author: only a pr has "
                        "them",
                        seq, to_string(queued.kind), a.stream.id));
  }
}

void ItemChecks::operator()(const ItemClaimed& claimed) const {
  audit_claim(claimed.owner, claimed.fence, claimed.attempt, claimed.lease_expires_at);
}

void ItemChecks::operator()(const ItemAssigned& assigned) const {
  audit_claim(assigned.session, assigned.fence, assigned.attempt,
              assigned.lease_expires_at);
  // What assign_and_lease checks before it appends one.
  std::string why = facts.not_open(assigned.session, seq);
  const auto life = facts.sessions.find(assigned.session);
  if (why.empty() && life != facts.sessions.end() && !life->second.actor.empty() &&
      !facts.project_log_unreadable) {
    const auto grant = facts.grants.find({e.project_id, life->second.actor});
    if (grant == facts.grants.end() || grant->second > seq) {
      why = fmt::format("session {} works for {}, who may not see project {} (R3)",
                        quoted(assigned.session), quoted(life->second.actor),
                        quoted(e.project_id));
    }
  }
  if (why.empty() && std::adjacent_find(assigned.actions.begin(), assigned.actions.end(),
                                        std::greater_equal<>()) !=
                         assigned.actions.end()) {
    why = "its actions are unsorted or repeated";
  }
  if (why.empty() && !a.unreadable && assigned.expected_head != a.item.head) {
    why = fmt::format("it pins head {} while the item's head was {} (R4)",
                      quoted(assigned.expected_head), quoted(a.item.head));
  }
  if (!why.empty()) {
    problem(ProblemKind::assignment_not_allowed,
            fmt::format("assigned seq {} of item {} to {}: {}", seq, a.stream.id,
                        quoted(assigned.session), why));
  }
}

void ItemChecks::operator()(const HeadMoved&) const {
  item_created_first();
  forge_fact();
}

void ItemChecks::operator()(const ReviewChanged&) const {
  item_created_first();
  forge_fact();
}

void ItemChecks::operator()(const ItemClosed&) const {
  item_created_first();
  ++a.terminals;
  if (a.terminals == 2) {
    problem(ProblemKind::two_terminal_events,
            fmt::format("item {} has a second terminal event (closed at seq {})",
                        a.stream.id, seq));
  }
}

void ItemChecks::operator()(const MutationRecorded& m) const {
  item_created_first();
  if (a.unreadable) return;
  // The gate records a mutation only under the live assignment
  // that allowed it: the same rule judges it here.
  const std::optional<std::string> head =
      m.head.empty() ? std::nullopt : std::optional<std::string>(m.head);
  if (const auto closed = facts.not_open(m.session, seq); !closed.empty()) {
    problem(ProblemKind::mutation_without_assignment,
            fmt::format("mutation_recorded seq {} by {} ({}): {}", seq,
                        quoted(m.session), quoted(m.action), closed));
  } else if (auto why =
                 gate_refusal(&a.item, true, m.session, m.fence, m.action, head, e.at)) {
    problem(ProblemKind::mutation_without_assignment,
            fmt::format("mutation_recorded seq {} by {} ({}) would be denied: {} (the "
                        "item was {}, held by {} under fence {} until {})",
                        seq, quoted(m.session), quoted(m.action), to_string(*why),
                        to_string(a.item.status), quoted(a.item.session), a.item.fence,
                        a.item.lease_expires_at));
  }
}

void ItemChecks::operator()(const TerminalPathEntered&) const { item_created_first(); }

void ItemChecks::operator()(const TerminalPathLeft&) const { item_created_first(); }

void ItemChecks::operator()(const ItemFinished& finished) const {
  item_created_first();
  ++a.terminals;
  if (a.terminals == 2) {
    problem(ProblemKind::two_terminal_events,
            fmt::format("item {} has a second terminal event ({} at seq {})",
                        a.stream.id, type_name(e.body), seq));
  }
  if (!a.unreadable && fence_refusal(&a.item, finished.fence)) {
    problem(ProblemKind::stale_fence_accepted,
            fmt::format("{} at seq {} carries fence {} while the item was {} under "
                        "fence {}",
                        type_name(e.body), seq, finished.fence, to_string(a.item.status),
                        a.item.fence));
  }
}

void ItemChecks::operator()(const LeaseExtended& extended) const {
  item_created_first();
  if (!a.unreadable && fence_refusal(&a.item, extended.fence)) {
    problem(ProblemKind::stale_fence_accepted,
            fmt::format("lease_extended at seq {} carries fence {} while the item was {} "
                        "under fence {}",
                        seq, extended.fence, to_string(a.item.status), a.item.fence));
  }
  if (extended.lease_expires_at <= e.at) {
    problem(ProblemKind::lease_before_claim,
            fmt::format("lease_extended seq {} at {} ends the lease at {}, not after it",
                        seq, e.at, extended.lease_expires_at));
  }
}

void ItemChecks::operator()(const LeaseExpired& expired) const {
  item_created_first();
  if (a.unreadable) return;
  // Only the current claim's lease can lapse, and only once it
  // has: an expiry under another fence, or before the lease's
  // end, is not what the sweep records.
  if (fence_refusal(&a.item, expired.fence)) {
    problem(ProblemKind::stale_fence_accepted,
            fmt::format("lease_expired at seq {} names fence {} while the item was {} "
                        "under fence {}",
                        seq, expired.fence, to_string(a.item.status), a.item.fence));
  } else if (a.item.lease_expires_at > e.at ||
             expired.lease_expires_at != a.item.lease_expires_at ||
             expired.owner != a.item.owner) {
    problem(ProblemKind::expired_while_leased,
            fmt::format("lease_expired at seq {} (at {}) for {}'s lease to {}, but the "
                        "lease was {}'s and ran until {}",
                        seq, e.at, expired.owner, expired.lease_expires_at,
                        a.item.owner, a.item.lease_expires_at));
  }
}

void ItemChecks::operator()(const ItemReleased& released) const {
  item_created_first();
  if (!a.unreadable && fence_refusal(&a.item, released.fence)) {
    problem(ProblemKind::stale_fence_accepted,
            fmt::format("released at seq {} carries fence {} while the item was {} under "
                        "fence {}",
                        seq, released.fence, to_string(a.item.status), a.item.fence));
  }
}

void ItemChecks::operator()(const AttemptFailed& failed) const {
  item_created_first();
  if (a.unreadable) return;
  if (fence_refusal(&a.item, failed.fence)) {
    problem(ProblemKind::stale_fence_accepted,
            fmt::format("attempt_failed at seq {} carries fence {} while the item was {} "
                        "under fence {}",
                        seq, failed.fence, to_string(a.item.status), a.item.fence));
  } else if (a.item.attempt_limit == 0 || !attempts_left(a.item)) {
    problem(ProblemKind::lifecycle_not_allowed,
            fmt::format("attempt_failed at seq {} retries attempt {} of an item {}", seq,
                        a.item.attempts,
                        a.item.attempt_limit == 0
                            ? std::string("with no retry policy")
                            : fmt::format("whose {} attempts ran out",
                                          a.item.attempt_limit)));
  }
}

void ItemChecks::operator()(const ItemRetried&) const {
  // The one event that may follow a terminal one: it reopens the item.
  if (!a.created && !a.reported_no_creation) {
    a.reported_no_creation = true;
    problem(ProblemKind::no_creation_event,
            fmt::format("item {} has a retried event (seq {}) before any queued event",
                        a.stream.id, seq));
  }
  if (a.unreadable) return;
  if (a.item.status != ItemStatus::failed && a.item.status != ItemStatus::cancelled) {
    problem(ProblemKind::lifecycle_not_allowed,
            fmt::format("retried at seq {} redrove item {} while it was {}: only a "
                        "failed or cancelled item is retried",
                        seq, a.stream.id, to_string(a.item.status)));
  }
  a.terminals = 0;
}

void ItemChecks::operator()(const KeyReleased& released) const {
  // What an archive with forget_keys appends to an ended item (the one
  // event besides a retry that may follow a terminal one): the key the
  // item holds, never one a schedule's catch-up looks an occurrence up by.
  if (!a.created && !a.reported_no_creation) {
    a.reported_no_creation = true;
    problem(ProblemKind::no_creation_event,
            fmt::format("item {} has a key_released event (seq {}) before any queued event",
                        a.stream.id, seq));
  }
  if (a.unreadable || !a.created) return;
  if (!is_terminal(a.item.status)) {
    problem(ProblemKind::lifecycle_not_allowed,
            fmt::format("key_released at seq {} released item {}'s key while it was {}: only "
                        "an ended item's key is released",
                        seq, a.stream.id, to_string(a.item.status)));
  } else if (a.item.key.empty() || a.item.key != released.key ||
             released.key.rfind("schedule:", 0) == 0) {
    problem(ProblemKind::lifecycle_not_allowed,
            fmt::format("key_released at seq {} released key {} of item {}, which holds {}", seq,
                        quoted(released.key), a.stream.id,
                        a.item.key.empty() ? std::string("none") : quoted(a.item.key)));
  }
}

void ItemChecks::operator()(const ItemRescheduled&) const {
  item_created_first();
  if (!a.unreadable && a.item.status != ItemStatus::ready &&
      a.item.status != ItemStatus::scheduled) {
    problem(ProblemKind::lifecycle_not_allowed,
            fmt::format("rescheduled at seq {} moved item {} while it was {}", seq,
                        a.stream.id, to_string(a.item.status)));
  }
}

void ItemChecks::operator()(const ItemCancelled& cancelled) const {
  item_created_first();
  ++a.terminals;
  if (a.terminals == 2) {
    problem(ProblemKind::two_terminal_events,
            fmt::format("item {} has a second terminal event (cancelled at seq {})",
                        a.stream.id, seq));
  }
  if (a.unreadable) return;
  const Fence held = a.item.status == ItemStatus::claimed ? a.item.fence : 0;
  if (cancelled.fence != held) {
    problem(ProblemKind::stale_fence_accepted,
            fmt::format("cancelled at seq {} names fence {} while the item was {} under "
                        "fence {}",
                        seq, cancelled.fence, to_string(a.item.status), a.item.fence));
  }
}

void audit_end(StreamAudit& a, const LogFacts& facts) {
  if (a.unreadable || a.reported_outlived || a.item.status != ItemStatus::claimed ||
      a.item.session.empty()) {
    return;
  }
  const auto life = facts.sessions.find(a.item.session);
  if (life == facts.sessions.end() || life->second.closed == 0) return;
  a.reported_outlived = true;
  a.problems.push_back(a.problem(
      ProblemKind::session_closed_while_holding, a.item.project_id,
      fmt::format("item {} is still held by session {}, which closed at seq {} without "
                  "releasing it",
                  a.stream.id, quoted(a.item.session), life->second.closed)));
}

}  // namespace cplane::verify_detail
