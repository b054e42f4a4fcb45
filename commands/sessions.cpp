// Sessions (open, seen, close) and the forge as observed (issues and pull
// requests seen, heads moved, reviews changed): ControlStore::Impl's
// commands for them, split from control_store.cpp by subject.
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

// ---- sessions ------------------------------------------------------------------

namespace {

void refuse_if_archived(storage::Backend& backend, const std::string& session) {
  // Closed and archived: said as for a closed session, not as for one
  // never opened (one index seek, only when the row is missing).
  if (const auto anchor = backend.find_anchor({StreamKind::session, session})) {
    throw NotFound(NotFound::Reason::session_closed,
                   fmt::format("session {} was closed and archived (segment {}): open a new "
                               "session",
                               quote_id(session), anchor->segment_id));
  }
}

}  // namespace

SessionRow ControlStore::Impl::open_session_row(const std::string& session) {
  auto row = backend_->find_session(session);
  if (!row) refuse_if_archived(*backend_, session);
  return require_open_session(std::move(row), session);
}

void ControlStore::Impl::open_session(const std::string& session, const std::optional<std::string>& actor,
                                      std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(session, "session id");
  require_actor(actor);
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::OpenSession{.sync = sync_for_claims(), .session = session, .actor = actor, .now = now});
}

void CommandRunner::exec(ControlStore::Impl& s, const cmd::OpenSession& c) {
  const auto& [session, actor, now] = std::tie(c.session, c.actor, c.now);
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(now);
  const auto existing = s.backend_->find_session(session);
  // A new id: one that was archived is not new (one index seek, only then).
  const auto archived =
      existing ? std::nullopt : s.backend_->find_anchor({StreamKind::session, session});
  const auto event = decide_open_session(existing, archived ? archived->segment_id : std::string(),
                                         session, actor, at);
  if (!event) return;  // open already, as asked: nothing to record
  const Seq seq = s.backend_->append(*event);
  s.backend_->put_session(apply(SessionRow{}, StoredEvent{seq, *event}));
}

std::vector<std::pair<std::string, Micros>> ControlStore::Impl::session_heartbeat(
    const std::string& session, std::optional<Seconds> lease, std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(session, "session id");
  const Micros lease_us = require_lease(lease.value_or(options_.lease));
  if (now) require_now(*now);
  // Leases extended are promises, as durable as a claim.
  return CommandRunner::run(*this, cmd::SessionHeartbeat{.sync = sync_for_claims(), .session = session, .lease = lease_us, .now = now});
}

std::vector<std::pair<std::string, Micros>> CommandRunner::exec(ControlStore::Impl& s, const cmd::SessionHeartbeat& c) {
  const auto& [session, lease_us, now] = std::tie(c.session, c.lease, c.now);
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(now);
  const auto row = s.backend_->find_session(session);
  if (!row) refuse_if_archived(*s.backend_, session);
  // Its leases are read only when it is open (as before: a refusal reads no item).
  auto items = row && row->is_open() ? s.backend_->session_items(session) : std::vector<ItemRow>{};
  auto decision = decide_session_heartbeat(row, session, std::move(items), lease_us, at);
  std::vector<std::pair<std::string, Micros>> extended;
  for (auto& [before, event] : decision.extended) {
    const Seq seq = s.backend_->append(event);
    s.backend_->update_item(apply(std::move(before), StoredEvent{seq, event}));
    extended.emplace_back(event.item_id, std::get<LeaseExtended>(event.body).lease_expires_at);
  }
  const Seq seq = s.backend_->append(decision.seen);
  s.backend_->put_session(apply(*row, StoredEvent{seq, decision.seen}));
  return extended;
}

std::vector<std::string> ControlStore::Impl::close_session(const std::string& session,
                                                           std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(session, "session id");
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::CloseSession{.sync = sync_for_finish(), .session = session, .now = now});
}

std::vector<std::string> CommandRunner::exec(ControlStore::Impl& s, const cmd::CloseSession& c) {
  const auto& [session, now] = std::tie(c.session, c.now);
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(now);
  auto row = s.backend_->find_session(session);
  // Closed and archived since: closed already, as a retried close expects.
  if (!row && s.backend_->find_anchor({StreamKind::session, session})) return {};
  // Its leases are read only when it is open (as before).
  auto items = row && row->is_open() ? s.backend_->session_items(session) : std::vector<ItemRow>{};
  auto decision = decide_close_session(row, session, std::move(items), at);
  if (!decision.closed) return {};  // closed already: nothing to record
  std::vector<std::string> released;
  for (auto& [before, event] : decision.released) {
    const Seq seq = s.backend_->append(event);
    s.backend_->update_item(apply(std::move(before), StoredEvent{seq, event}));
    released.push_back(event.item_id);
  }
  const Seq seq = s.backend_->append(*decision.closed);
  s.backend_->put_session(apply(std::move(*row), StoredEvent{seq, *decision.closed}));
  if (!released.empty()) s.backend_->announce_work();  // released items wake waiting claims
  return released;
}

std::vector<SessionInfo> ControlStore::Impl::sessions(std::optional<Micros> now) {
  const InUse in_use(*this);
  if (now) require_now(*now);
  auto tx = Transaction::read(*backend_);
  const Micros at = clock(now);
  std::vector<SessionInfo> out;
  auto cursor = backend_->scan_sessions();
  SessionRow row;
  while (cursor->next(row)) out.push_back({row, {}});
  for (auto& info : out) {
    for (const auto& item : backend_->session_items(info.row.session_id)) {
      if (lease_live(item, at)) info.items.push_back(item.item_id);
    }
  }
  tx.commit();
  return out;
}

// ---- the forge, as observed ----------------------------------------------------

template <class Observe>
bool ControlStore::Impl::observe_in_tx(const std::string& item_id, Micros at, Observe&& observe) {
  auto row = backend_->find_item(item_id);
  // NotFound for no row; nullopt: nothing changed, nothing recorded.
  const std::optional<Event> event = observe(row, at);
  if (!event) return false;
  const Seq seq = backend_->append(*event);
  const ItemRow next = apply(*row, StoredEvent{seq, *event});
  backend_->update_item(next);
  sync_terminal_lock(*row, next);
  announce_if_freed(*row, next, at);  // a close ends a lease, and frees its key's slot
  return true;
}

// Observations are as durable as claims: the gate's head check (R4) rests
// on the head it last recorded.
bool ControlStore::Impl::observe_head(const std::string& item_id, const std::string& head,
                                      std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  require_name(head, "head");
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::Observe{.sync = sync_for_claims(), .kind = cmd::Observe::head_moved, .item_id = item_id, .text = head, .now = now});
}

bool ControlStore::Impl::observe_review(const std::string& item_id, ReviewState review,
                                        std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  if (review != ReviewState::none && review != ReviewState::approved &&
      review != ReviewState::changes_requested) {
    throw InvalidArgument(fmt::format("unknown review state {}", static_cast<int>(review)));
  }
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::Observe{.sync = sync_for_claims(), .kind = cmd::Observe::review_changed, .item_id = item_id, .review = review, .now = now});
}

bool ControlStore::Impl::observe_close(const std::string& item_id, CloseReason reason,
                                       std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  if (reason != CloseReason::merged && reason != CloseReason::closed) {
    throw InvalidArgument(fmt::format("unknown close reason {}", static_cast<int>(reason)));
  }
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::Observe{.sync = sync_for_claims(), .kind = cmd::Observe::closed, .item_id = item_id, .close_reason = reason, .now = now});
}

// The terminal path (the allocator routes it first; see commands/allocate.cpp).
bool ControlStore::Impl::enter_terminal_path(const std::string& item_id, const std::string& reason,
                                             std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  require_size(reason, 64 << 10, "reason");
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::Observe{.sync = sync_for_finish(), .kind = cmd::Observe::terminal_entered, .item_id = item_id, .text = reason, .now = now});
}

bool ControlStore::Impl::leave_terminal_path(const std::string& item_id, std::optional<Micros> now,
                                             const std::optional<std::string>& actor) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  if (now) require_now(*now);
  require_actor(actor);
  return CommandRunner::run(*this, cmd::Observe{.sync = sync_for_finish(), .kind = cmd::Observe::terminal_left, .item_id = item_id, .now = now, .actor = actor.value_or("")});
}

// Observations are as durable as claims: the gate's head check (R4) rests
// on the head it last recorded. The terminal path is routing, not a
// promise: as durable as a finish.
bool CommandRunner::exec(ControlStore::Impl& s, const cmd::Observe& c) {
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(c.now);
  return s.observe_in_tx(c.item_id, at,
                         [&](const std::optional<ItemRow>& row, Micros when) -> std::optional<Event> {
    switch (c.kind) {
      case cmd::Observe::head_moved: return decide_observe_head(row, c.item_id, c.text, when);
      case cmd::Observe::review_changed:
        return decide_observe_review(row, c.item_id, c.review, when);
      case cmd::Observe::closed: return decide_observe_close(row, c.item_id, c.close_reason, when);
      case cmd::Observe::terminal_entered:
        return decide_enter_terminal_path(row, c.item_id, c.text, when);
      case cmd::Observe::terminal_left:
        return decide_leave_terminal_path(row, c.item_id, when, c.actor);
    }
    throw InternalError("an observation of an unknown kind");
  });
}

void ControlStore::Impl::sync_terminal_lock(const ItemRow& before, const ItemRow& after) {
  if (before.terminal_since == after.terminal_since &&
      before.terminal_reason == after.terminal_reason) {
    return;
  }
  if (auto lock = terminal_lock_of(after)) {
    backend_->put_terminal_lock(*lock);
  } else {
    backend_->delete_terminal_lock(after.item_id);
  }
}

}  // namespace cplane
