// Assign + lease, the gate, and the reads of one item's history:
// ControlStore::Impl's commands for them, split from control_store.cpp by
// subject.
#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "commands/combine.hpp"
#include "commands/control_store.hpp"
#include "commands/decide.hpp"
#include "commands/flow.hpp"
#include "commands/internal.hpp"
#include "events/clock.hpp"
#include "events/codec.hpp"
#include "events/errors.hpp"
#include "events/json.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"
#include "storage/backend.hpp"

namespace cplane {

using namespace detail;
namespace cmd = detail::cmd;
using storage::Sync;
using storage::Transaction;

namespace {

StoredEvent decode_stored(const storage::RawEvent& raw) {
  return StoredEvent{raw.seq, decode(raw.body)};
}

}  // namespace

// ---- assign + lease, and the gate -------------------------------------------------

Assignment ControlStore::Impl::assign_and_lease(const std::string& session, const std::string& item_id,
                                                const std::vector<std::string>& allowed_actions,
                                                std::optional<Seconds> lease, std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(session, "session id");
  require_name(item_id, "item id");
  const auto actions = checked_actions(allowed_actions, false);
  const Micros lease_us = require_lease(lease.value_or(options_.lease));
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::AssignAndLease{.sync = sync_for_claims(), .session = session, .item_id = item_id, .actions = actions, .lease = lease_us, .now = now});
}

Assignment CommandRunner::exec(ControlStore::Impl& s, const cmd::AssignAndLease& c) {
  const auto& [session, item_id, actions, lease_us, now] =
      std::tie(c.session, c.item_id, c.actions, c.lease, c.now);
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(now);
  const SessionRow holder = s.open_session_row(session);
  auto row = s.backend_->find_item(item_id);
  const bool visible =
      row && (holder.actor.empty() || s.backend_->is_assigned(row->project_id, holder.actor));
  bool paused = false;
  KeyGate gate(*s.backend_, at);
  std::optional<Micros> key_wait;
  if (visible) {
    const auto project = s.backend_->find_project(row->project_id);
    paused = project && project->paused;
    key_wait = key_wait_until(*s.backend_, gate, *row, at);
  }
  AssignDecision decision = decide_assign(row, visible, session, actions, lease_us,
                                          acting_for(holder), at, paused, key_wait);
  decision.answer.item_id = item_id;
  if (decision.event) {
    const StoredEvent stored{s.backend_->append(*decision.event), *decision.event};
    s.backend_->update_item(apply(std::move(*row), stored));
    if (std::holds_alternative<ItemAssigned>(stored.event.body)) {
      gate.claimed(std::get<ItemAssigned>(stored.event.body).concurrency_key, stored);
    }
  }
  return decision.answer;
}

namespace {

// A name no session or item can have: the gate denies without a lookup.
bool well_formed(const std::string& name) {
  try {
    require_name(name, "name");
    return true;
  } catch (const InvalidArgument&) {
    return false;
  }
}

}  // namespace

GateVerdict ControlStore::Impl::gate_in_tx(const std::string& session, const std::string& item_id,
                                           Fence fence, const std::string& action,
                                           const std::optional<std::string>& head, Micros at,
                                           std::optional<ItemRow>* row_out,
                                           std::optional<SessionRow>* session_out) {
  std::optional<SessionRow> holder;
  std::optional<ItemRow> row;
  if (well_formed(session) && well_formed(item_id)) {
    holder = backend_->find_session(session);
    row = backend_->find_item(item_id);
  }
  // Key-scoped exclusivity: a key of limit one held by another live lease
  // (the limit was lowered while both ran) lets neither holder mutate.
  bool key_held = false;
  if (row && !row->concurrency_key.empty() && lease_live(*row, at)) {
    if (auto limit = backend_->find_limit(row->concurrency_key);
        limit && !limit->removed && limit->concurrency == 1) {
      key_held = backend_->live_leases(row->concurrency_key, at) > 1;
    }
  }
  auto verdict = judge_gate(row ? &*row : nullptr, holder && holder->is_open(), session, item_id,
                            fence, action, head, at, key_held);
  if (row_out != nullptr) *row_out = std::move(row);
  if (session_out != nullptr) *session_out = std::move(holder);
  return verdict;
}

GateVerdict ControlStore::Impl::require_valid_assignment(const std::string& session,
                                                         const std::string& item_id, Fence fence,
                                                         const std::string& action,
                                                         const std::optional<std::string>& head,
                                                         std::optional<Micros> now) {
  const InUse in_use(*this);
  if (now) require_now(*now);
  auto tx = Transaction::read(*backend_);
  const Micros at = clock(now);
  auto verdict = gate_in_tx(session, item_id, fence, action, head, at, nullptr, nullptr);
  tx.commit();
  return verdict;
}

GateVerdict ControlStore::Impl::record_mutation(const std::string& session, const std::string& item_id,
                                                Fence fence, const std::string& action,
                                                const std::optional<std::string>& head,
                                                std::optional<Micros> now) {
  const InUse in_use(*this);
  if (now) require_now(*now);
  // The record of a mutation made is as durable as the assignment it was
  // made under.
  return CommandRunner::run(*this, cmd::RecordMutation{.sync = sync_for_claims(), .session = session, .item_id = item_id, .fence = fence, .action = action, .head = head, .now = now});
}

GateVerdict CommandRunner::exec(ControlStore::Impl& s, const cmd::RecordMutation& c) {
  const auto& [session, item_id, fence, action, head, now] =
      std::tie(c.session, c.item_id, c.fence, c.action, c.head, c.now);
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(now);
  std::optional<ItemRow> row;
  std::optional<SessionRow> holder;
  auto verdict = s.gate_in_tx(session, item_id, fence, action, head, at, &row, &holder);
  if (!verdict) return verdict;  // a denial records nothing
  const Event event{at, acting_for(*holder), row->project_id, row->item_id,
                    MutationRecorded{session, fence, action, head.value_or("")}};
  const Seq seq = s.backend_->append(event);
  s.backend_->update_item(apply(std::move(*row), StoredEvent{seq, event}));
  return verdict;
}

FenceVerdict ControlStore::Impl::check_fence(const std::string& item_id, Fence fence,
                                             const std::optional<std::string>& actor) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  require_actor(actor);
  auto tx = Transaction::read(*backend_);
  auto row = backend_->find_item(item_id);
  if (actor && (!row || !backend_->is_assigned(row->project_id, *actor))) throw ScopeDenied();
  auto verdict = judge_fence(row ? &*row : nullptr, item_id, fence);
  tx.commit();
  return verdict;
}

void ControlStore::Impl::finish_batch(const std::vector<Report>& reports,
                                      const std::optional<std::string>& actor,
                                      std::optional<Micros> now) {
  const InUse in_use(*this);
  require_actor(actor);
  std::set<std::string_view> seen;
  for (const auto& r : reports) {
    check_report(r.item_id, r.outcome, r.detail);
    if (!seen.insert(r.item_id).second) {
      throw InvalidArgument(InvalidArgument::Reason::conflict,
                            fmt::format("item {} is listed twice in one finish batch",
                                        quote_id(r.item_id)));
    }
  }
  if (now) require_now(*now);
  cmd::FinishBatch command{.sync = sync_for_finish(), .actor = actor, .now = now};
  for (const auto& r : reports) command.reports.push_back({r.item_id, r.fence, r.outcome, r.detail});
  CommandRunner::run(*this, command);
}

void CommandRunner::exec(ControlStore::Impl& s, const cmd::FinishBatch& c) {
  auto& backend_ = s.backend_;
  const auto& reports = c.reports;
  const auto& actor = c.actor;
  {
    // Read once the write lock is held: the decision is made at this time.
    const Micros at = s.clock(c.now);
    // Every row read (and on PostgreSQL locked) at once, every head at once.
    std::vector<std::string> ids;
    for (const auto& r : reports) ids.push_back(r.item_id);
    const auto rows = backend_->find_items(ids);
    std::vector<Event> events;
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const auto& r = reports[i];
      // A scoped actor may report only its projects' items, and learns
      // nothing (not even a fence) about others.
      if (actor && (!rows[i] || !backend_->is_assigned(rows[i]->project_id, *actor))) {
        throw ScopeDenied();
      }
      events.push_back(decide_finish(rows[i], r.item_id, r.fence, r.outcome, r.detail,
                                     kControlPlane, at));
    }
    const auto seqs = backend_->append_batch(events);
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const ItemRow next = apply(*rows[i], StoredEvent{seqs[i], events[i]});
      backend_->update_item(next);
      s.sync_terminal_lock(*rows[i], next);
      s.announce_if_freed(*rows[i], next, at);
    }
  }
}

std::optional<ClaimedItem> ControlStore::Impl::finish_and_claim(const std::string& item_id, Fence fence,
                                                                Outcome outcome, const std::string& owner,
                                                                const ClaimOptions& options,
                                                                const std::string& detail) {
  const InUse in_use(*this);
  check_report(item_id, outcome, detail);
  const Micros lease = check_claim(owner, options);
  return CommandRunner::run(*this, cmd::FinishAndClaim{.sync = sync_for_claims(),
                                                       .item_id = item_id,
                                                       .fence = fence,
                                                       .outcome = outcome,
                                                       .detail = detail,
                                                       .owner = owner,
                                                       .actor = options.actor,
                                                       .lease = lease,
                                                       .now = options.now});
}

std::optional<ClaimedItem> CommandRunner::exec(ControlStore::Impl& s, const cmd::FinishAndClaim& c) {
  const Micros at = s.clock(c.now);
  s.finish_in_tx(c.item_id, c.fence, c.outcome, c.detail, at, c.actor);
  return s.claim_in_tx(c.owner, ClaimOptions{.actor = c.actor}, c.lease, at);
}

int ControlStore::Impl::schema_version() {
  const InUse in_use(*this);
  return backend_->schema_version();
}

ControlStore::StatusCounts ControlStore::Impl::status_counts(const std::optional<std::string>& project_id) {
  const InUse in_use(*this);
  if (project_id) require_name(*project_id, "project id");
  auto tx = Transaction::read(*backend_);
  const auto c = backend_->status_counts(project_id ? &*project_id : nullptr);
  tx.commit();
  return StatusCounts{c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]};
}

Item ControlStore::Impl::item(const std::string& item_id, const std::optional<std::string>& actor) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  require_actor(actor);
  auto tx = Transaction::read(*backend_);
  auto row = backend_->find_item(item_id);
  if (actor) {
    if (!row || !backend_->is_assigned(row->project_id, *actor)) throw ScopeDenied();
  } else if (!row) {
    throw NotFound(NotFound::Reason::unknown_item, fmt::format("no such item: {}", quote_id(item_id)));
  }
  tx.commit();
  return std::move(*row);
}

std::vector<StoredEvent> ControlStore::Impl::events(const std::string& item_id,
                                                    const std::optional<std::string>& actor) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  require_actor(actor);
  auto tx = Transaction::read(*backend_);
  if (actor) {
    auto row = backend_->find_item(item_id);
    if (!row || !backend_->is_assigned(row->project_id, *actor)) throw ScopeDenied();
  }
  auto raw = backend_->stream_events({StreamKind::item, item_id});
  if (raw.empty() && !actor) {
    if (!backend_->find_item(item_id)) throw NotFound(NotFound::Reason::unknown_item, fmt::format("no such item: {}", quote_id(item_id)));
  }
  tx.commit();
  std::vector<StoredEvent> out;
  out.reserve(raw.size());
  for (const auto& r : raw) out.push_back(decode_stored(r));
  return out;
}

}  // namespace cplane
