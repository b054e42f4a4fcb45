#include "commands/control_store.hpp"
#include "storage/backend.hpp"
#include "storage/open.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <algorithm>

#include <fmt/format.h>

#include "commands/combine.hpp"
#include "commands/decide.hpp"
#include "commands/flow.hpp"
#include "commands/internal.hpp"
#include "events/json.hpp"
#include "events/clock.hpp"
#include "events/codec.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"
#include "events/errors.hpp"

namespace cplane {

using storage::Sync;
using storage::Transaction;

std::string_view to_string(Durability durability) {
  switch (durability) {
    case Durability::full: return "full";
    case Durability::fenced: return "fenced";
    case Durability::normal: return "normal";
  }
  return "unknown";
}

std::string_view to_string(AssignOutcome outcome) {
  switch (outcome) {
    case AssignOutcome::assigned: return "assigned";
    case AssignOutcome::wait: return "wait";
    case AssignOutcome::no_safe_work: return "no_safe_work";
  }
  return "unknown";
}

void require_action(std::string_view action) {
  require_name(action, "action");
  if (action.find(',') != std::string_view::npos) {
    throw InvalidArgument(fmt::format("action {} contains a comma", quote_id(action)));
  }
}

Durability parse_durability(std::string_view text) {
  if (text == "full") return Durability::full;
  if (text == "fenced") return Durability::fenced;
  if (text == "normal") return Durability::normal;
  throw InvalidArgument(
      fmt::format("unknown durability '{}': expected full, fenced or normal", text));
}

Micros require_lease(Seconds lease) {
  const double s = lease.count();
  if (!std::isfinite(s) || s <= 0) {
    throw InvalidArgument("a lease must be a positive, finite number of seconds");
  }
  if (s > kMaxLeaseSeconds) {
    throw InvalidArgument(fmt::format("a lease must be at most ten years ({} seconds)",
                                      static_cast<std::int64_t>(kMaxLeaseSeconds)));
  }
  const auto micros = static_cast<Micros>(std::llround(s * 1e6));
  if (micros <= 0) throw InvalidArgument("a lease must be at least one microsecond");
  return micros;
}

// Explicit clocks stay where lease arithmetic cannot overflow, and not
// before the epoch (so a lease expiry is never 0, which means "none").
Micros require_now(Micros now) {
  // 0 means "none" in rows (a closed_at, a terminal path's since, a lease's
  // end): a command's time is after the epoch.
  if (now <= 0) {
    throw InvalidArgument(
        "now must be a number of microseconds since the epoch, not negative and not 0");
  }
  if (now > kMaxNow) {
    throw InvalidArgument(fmt::format("now is {}, past the latest time cplane accepts ({} "
                                      "microseconds since the epoch)",
                                      now, kMaxNow));
  }
  return now;
}

void require_name(std::string_view text, const char* what) {
  if (text.empty()) throw InvalidArgument(fmt::format("{} must not be empty", what));
  if (text.size() > kMaxNameBytes) {
    throw InvalidArgument(fmt::format("{} {} is {} bytes; the limit is {}", what, quote_id(text),
                                      text.size(), kMaxNameBytes));
  }
  if (text.front() == ' ' || text.back() == ' ') {
    throw InvalidArgument(fmt::format("{} {} starts or ends with a space", what, quote_id(text)));
  }
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = utf8_sequence_length(text, at);
    if (length == 0) {
      throw InvalidArgument(fmt::format("{} {} is not valid UTF-8 (byte {})", what,
                                        quote_id(text), at));
    }
    std::uint32_t c = static_cast<unsigned char>(text[at]);
    if (length > 1) {
      c &= 0xffu >> (length + 1);
      for (std::size_t i = 1; i < length; ++i) c = (c << 6) | (static_cast<unsigned char>(text[at + i]) & 0x3fu);
    }
    if (is_invisible_control(c)) {
      throw InvalidArgument(fmt::format("{} {} contains a control character (byte {})", what,
                                        quote_id(text), at));
    }
    at += length;
  }
}

void require_outcome(Outcome outcome) {
  if (outcome != Outcome::done && outcome != Outcome::failed) {
    throw InvalidArgument(fmt::format("unknown outcome {}: expected done or failed",
                                      static_cast<int>(outcome)));
  }
}

namespace detail {

void require_actor(const std::optional<std::string>& actor) {
  if (actor) require_name(*actor, "actor");
}

void require_size(const std::string& text, std::size_t limit, const char* what) {
  if (text.size() > limit) {
    throw InvalidArgument(fmt::format("the {} is {} bytes; the limit is {}", what, text.size(), limit));
  }
}

const std::string kControlPlane;

const std::string& acting_for(const SessionRow& session) { return session_actor(session); }

std::vector<std::string> checked_actions(const std::vector<std::string>& actions,
                                         bool allow_none) {
  if (actions.empty() && !allow_none) {
    throw InvalidArgument("an assignment needs at least one allowed action");
  }
  for (const auto& a : actions) require_action(a);
  std::vector<std::string> out = actions;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace detail

using namespace detail;
namespace cmd = detail::cmd;

namespace {

// The options are checked before the file is touched: a refused store
// leaves nothing behind.
const StoreOptions& checked(const StoreOptions& options) {
  require_lease(options.lease);
  if (options.lock_timeout.count() < 0) throw InvalidArgument("a lock timeout must not be negative");
  return options;
}

}  // namespace

ControlStore::Impl::Impl(std::unique_ptr<storage::Backend> backend, StoreOptions options)
    : backend_(std::move(backend)), options_(checked(options)) {
  if (!backend_) {
    throw InvalidArgument(InvalidArgument::Reason::misuse, "a ControlStore needs a backend");
  }
}

namespace {

[[noreturn]] void throw_moved_from() {
  throw InvalidArgument(InvalidArgument::Reason::misuse,
                        "this ControlStore was moved from: use the store it was moved to");
}

}  // namespace

ControlStore::Impl& ControlStore::Impl::of(ControlStore& store) {
  if (!store.impl_) throw_moved_from();
  return *store.impl_;
}

const ControlStore::Impl& ControlStore::Impl::of(const ControlStore& store) {
  if (!store.impl_) throw_moved_from();
  return *store.impl_;
}

ControlStore ControlStore::Impl::over(std::unique_ptr<storage::Backend> backend,
                                      StoreOptions options) {
  return ControlStore(std::make_unique<Impl>(std::move(backend), std::move(options)));
}

ControlStore::ControlStore(const std::string& url, StoreOptions options)
    : impl_(std::make_unique<Impl>(
          storage::open_store(url, {.lock_timeout = checked(options).lock_timeout,
                                    .create = options.create,
                                    .read_only = options.read_only,
                                    .sqlite = options.sqlite}),
          options)) {}

ControlStore::ControlStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ControlStore::~ControlStore() = default;
ControlStore::ControlStore(ControlStore&& other) noexcept = default;
ControlStore& ControlStore::operator=(ControlStore&& other) noexcept = default;

ControlStore::Impl::InUse::InUse(Impl& impl) : impl_(impl) {
  if (impl.in_use_.exchange(true, std::memory_order_acquire)) {
    throw InvalidArgument(
        InvalidArgument::Reason::misuse,
        "a ControlStore is one connection: use one per thread (another thread is in a call on "
        "this one right now)");
  }
}

ControlStore::Impl::InUse::~InUse() { impl_.in_use_.store(false, std::memory_order_release); }

// ---- the implementation ----------------------------------------------------------

// The caller's clock, checked, or the backend's (the database's own, where
// it has one).
Micros ControlStore::Impl::clock(std::optional<Micros> now) const {
  return now ? require_now(*now) : backend_->now();
}


Sync ControlStore::Impl::sync_for_claims() const {
  return options_.durability == Durability::normal ? Sync::normal : Sync::full;
}

Sync ControlStore::Impl::sync_for_finish() const {
  return options_.durability == Durability::full ? Sync::full : Sync::normal;
}

// Validates a claim's input before any lock is taken: its lease (returned,
// in microseconds) and its clock. The time itself is read once the lock is
// held.
Micros ControlStore::Impl::check_claim(const std::string& owner,
                                                   const ClaimOptions& options) const {
  const Micros lease = require_lease(options.lease.value_or(options_.lease));
  if (owner.empty()) throw InvalidArgument("a claim needs a non-empty owner");
  require_name(owner, "owner");
  require_actor(options.actor);
  if (options.now) require_now(*options.now);
  return lease;
}

void ControlStore::Impl::create_project(const std::string& id, const std::string& title,
                                        const std::string& status, std::optional<Micros> now) {
  const InUse in_use(*this);
  if (id.empty()) throw InvalidArgument("a project id must not be empty");
  require_name(id, "project id");
  require_size(title, kMaxTextBytes, "title");
  require_size(status, kMaxTextBytes, "status");
  if (status.empty()) throw InvalidArgument("a project status must not be empty");
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::CreateProject{.sync = sync_for_claims(), .id = id, .title = title, .status = status, .now = now});
}

void CommandRunner::exec(ControlStore::Impl& s, const cmd::CreateProject& c) {
  const auto& [id, title, status, now] = std::tie(c.id, c.title, c.status, c.now);
  const Micros at = s.clock(now);
  const Event event = decide_create_project(s.backend_->lock_project(id), id, title, status, at);
  const Seq seq = s.backend_->append(event);
  ProjectRow row = apply(ProjectRow{}, StoredEvent{seq, event});
  if (auto policy = decide_set_policy(row, RetryPolicy{c.max_attempts, c.backoff}, at)) {
    row = apply(std::move(row), StoredEvent{s.backend_->append(*policy), *policy});
  }
  s.backend_->put_project(row);
}

void ControlStore::Impl::grant(const std::string& project_id, const std::string& actor,
                          std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(project_id, "project id");
  require_name(actor, "actor");
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::Grant{.sync = sync_for_claims(), .project_id = project_id, .actor = actor, .now = now});
}

void CommandRunner::exec(ControlStore::Impl& s, const cmd::Grant& c) {
  const auto& [project_id, actor, now] = std::tie(c.project_id, c.actor, c.now);
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(now);
  auto project = s.backend_->find_project(project_id);
  if (!project) throw NotFound(NotFound::Reason::unknown_project, fmt::format("no such project: {}", quote_id(project_id)));
  auto event = decide_grant(*project, s.backend_->is_assigned(project_id, actor), actor, at);
  if (!event) return;  // already assigned: nothing changed, nothing to record
  const Seq seq = s.backend_->append(*event);
  s.backend_->put_assignment(apply(ProjectActorRow{}, StoredEvent{seq, *event}));
  s.backend_->announce_work();  // the actor's waiting claims may take this project's items now
}

std::vector<std::string> ControlStore::Impl::visible_projects(const std::optional<std::string>& actor) {
  const InUse in_use(*this);
  require_actor(actor);
  auto tx = Transaction::read(*backend_);
  auto ids = backend_->project_ids(actor ? &*actor : nullptr);
  tx.commit();
  return ids;
}

ProjectRow ControlStore::Impl::visible_project(const std::string& project_id,
                                               const std::optional<std::string>& actor) {
  // Scope first: a scoped actor learns nothing about projects it cannot see,
  // not even whether they exist.
  if (actor && !backend_->is_assigned(project_id, *actor)) throw ScopeDenied();
  auto project = backend_->find_project(project_id);
  if (!project) {
    if (actor) throw ScopeDenied();
    throw NotFound(NotFound::Reason::unknown_project, fmt::format("no such project: {}", quote_id(project_id)));
  }
  return std::move(*project);
}

std::optional<ClaimedItem> ControlStore::Impl::claim_in_tx(const std::string& owner,
                                                           const ClaimOptions& options, Micros lease,
                                                           Micros at) {
  fire_due_schedules(at);  // an index seek when none is due
  // A few index seeks per project in scope: the cost grows with the number
  // of projects (and, past a full key, with the keys that have waiting
  // items), never with the number of items.
  KeyGate gate(*backend_, at);
  ClaimChooser chooser(*this, gate, at, options.actor ? &*options.actor : nullptr, options.fair,
                       1);
  auto choice = chooser.next();
  if (!choice) return std::nullopt;
  const Event event = decide_claim(choice->row, owner, options.actor.value_or(owner), lease, at,
                                   choice->fair_pass);
  const StoredEvent stored{backend_->append(event), event};
  chooser.claimed(*choice, stored);  // the key's state and the project's pass
  const ItemRow row = apply(std::move(choice->row), stored);
  backend_->update_item(row);
  return ClaimedItem{row.item_id, row.project_id, row.payload, row.fence, row.attempts,
                     row.lease_expires_at};
}

std::optional<ClaimedItem> ControlStore::Impl::claim(const std::string& owner,
                                                     const ClaimOptions& options) {
  const InUse in_use(*this);
  const Micros lease = check_claim(owner, options);
  if (options.wait && !(options.wait->count() >= 0 && options.wait->count() <= kMaxLeaseSeconds)) {
    throw InvalidArgument(fmt::format("a claim's wait must be between 0 and {} seconds, not {}",
                                      kMaxLeaseSeconds, options.wait->count()));
  }
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(options.wait.value_or(Seconds{0}));
  const cmd::Claim command{.sync = sync_for_claims(), .owner = owner, .actor = options.actor,
                           .lease = lease, .now = options.now, .fair = options.fair};
  for (;;) {
    auto claimed = CommandRunner::run(*this, command);
    if (claimed || std::chrono::steady_clock::now() >= deadline) return claimed;
    // A lapse or a due time already past that this claim could not take (a
    // paused project, a full key): not a reason to look again at once, which
    // spun a core for the whole wait.
    const auto soonest = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    backend_->wait_for_work(std::min(deadline, std::max(soonest, next_lapse_deadline(options))));
  }
}

std::optional<ClaimedItem> CommandRunner::exec(ControlStore::Impl& s, const cmd::Claim& c) {
  const Micros at = s.clock(c.now);
  return s.claim_in_tx(c.owner, ClaimOptions{.actor = c.actor, .fair = c.fair}, c.lease, at);
}

// When a claim in the caller's scope may next find something that no
// commit announces, on the steady clock: the first lease to lapse, the next
// token of a rate-limited key that holds a ready item back, the first lease
// to end of a full key's holders (of any project: a key spans them), a
// schedule's next occurrence. The far future when there is none.
std::chrono::steady_clock::time_point ControlStore::Impl::next_lapse_deadline(const ClaimOptions& options) {
  // The key groups of a project looked at: one index seek each.
  constexpr std::size_t kKeyGroupsLooked = 64;
  auto tx = Transaction::read(*backend_);
  const Micros at = clock(options.now);
  std::optional<Micros> first;
  auto consider = [&](std::optional<Micros> when) {
    if (when && (!first || *when < *first)) first = when;
  };
  detail::KeyGate gate(*backend_, at);
  for (const auto& project : backend_->project_ids(options.actor ? &*options.actor : nullptr)) {
    consider(backend_->next_lapse(project));
    // A waiter used to sleep past a key's next token (nothing commits when
    // a token comes) until its deadline or another process's commit.
    for (const auto& head : backend_->key_heads(project, ItemStatus::ready, kKeyGroupsLooked)) {
      if (!head.concurrency_key.empty()) consider(detail::key_wait_until(*backend_, gate, head, at));
    }
  }
  // A schedule's next occurrence makes an item then.
  if (auto due = backend_->due_schedules(kMaxNow - 1, 1); !due.empty()) consider(due[0].next_at);
  tx.commit();
  if (!first) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + std::chrono::microseconds(std::max<Micros>(*first - at, 0));
}

std::vector<ClaimedItem> ControlStore::Impl::claim_batch(const std::string& owner, std::size_t max_items,
                                                         const ClaimOptions& options) {
  const InUse in_use(*this);
  const Micros lease = check_claim(owner, options);
  if (max_items == 0) throw InvalidArgument("a batch claim needs max_items of at least 1");
  return CommandRunner::run(*this, cmd::ClaimBatch{.sync = sync_for_claims(),
                                                   .owner = owner,
                                                   .max_items = max_items,
                                                   .actor = options.actor,
                                                   .lease = lease,
                                                   .now = options.now,
                                                   .fair = options.fair});
}

std::vector<ClaimedItem> CommandRunner::exec(ControlStore::Impl& s, const cmd::ClaimBatch& c) {
  const Micros at = s.clock(c.now);
  s.fire_due_schedules(at);
  const std::string& actor = c.actor ? *c.actor : c.owner;
  // The claims one claim after another would make, decided one at a time
  // and appended together (one round trip on a server), except where a
  // read must see them first (a full key's groups, an exhausted item).
  std::vector<ClaimChooser::Choice> pending;
  std::vector<Event> events;
  std::vector<ClaimedItem> out;
  const auto flush = [&] {
    if (events.empty()) return;
    const auto seqs = s.backend_->append_batch(events);
    for (std::size_t i = 0; i < events.size(); ++i) {
      const ItemRow row = apply(std::move(pending[i].row), StoredEvent{seqs[i], events[i]});
      s.backend_->update_item(row);
      out.push_back(ClaimedItem{row.item_id, row.project_id, row.payload, row.fence, row.attempts,
                                row.lease_expires_at});
    }
    pending.clear();
    events.clear();
  };
  KeyGate gate(*s.backend_, at);
  ClaimChooser chooser(s, gate, at, c.actor ? &*c.actor : nullptr, c.fair, c.max_items, flush);
  while (out.size() + pending.size() < c.max_items) {
    auto choice = chooser.next();
    if (!choice) break;
    events.push_back(decide_claim(choice->row, c.owner, actor, c.lease, at, choice->fair_pass));
    // The key's state and the project's pass move on now (apply reads the
    // claim's time and key, not its seq), so that the next choice sees them.
    chooser.claimed(*choice, StoredEvent{0, events.back()});
    pending.push_back(std::move(*choice));
  }
  flush();
  return out;
}

template <class Decide>
ItemRow ControlStore::Impl::report_in_tx(const std::string& item_id,
                                         const std::optional<std::string>& actor, Decide&& decide) {
  auto row = backend_->find_item(item_id);
  // A scoped actor may report only its projects' items, and learns nothing
  // (not even a fence) about others.
  if (actor && (!row || !backend_->is_assigned(row->project_id, *actor))) throw ScopeDenied();
  const Event event = decide(row);  // refuses (FenceRejected) unless row holds the fence
  const Seq seq = backend_->append(event);
  ItemRow next = apply(*row, StoredEvent{seq, event});
  backend_->update_item(next);
  sync_terminal_lock(*row, next);
  announce_if_freed(*row, next, event.at);
  return next;
}

void ControlStore::Impl::announce_if_freed(const ItemRow& before, const ItemRow& after, Micros at) {
  const bool slot_freed = before.status == ItemStatus::claimed &&
                          after.status != ItemStatus::claimed && !before.concurrency_key.empty();
  // A new due time (a retry after its backoff, a reschedule): a waiting
  // claim's deadline counts it, so it looks again and waits until then.
  const bool new_due = after.status == ItemStatus::scheduled &&
                       (before.status != ItemStatus::scheduled || before.run_at != after.run_at);
  if (slot_freed || new_due || claimable(after, at)) backend_->announce_work();
}

void ControlStore::Impl::finish_in_tx(const std::string& item_id, Fence fence, Outcome outcome,
                                      const std::string& detail, Micros at,
                                      const std::optional<std::string>& actor, bool no_retry) {
  report_in_tx(item_id, actor, [&](const std::optional<ItemRow>& row) {
    return decide_finish(row, item_id, fence, outcome, detail, kControlPlane, at, no_retry);
  });
}

void ControlStore::Impl::exhaust_in_tx(const ItemRow& row, Micros at) {
  const Event event = decide_exhaust(row, at);
  const Seq seq = backend_->append(event);
  const ItemRow next = apply(row, StoredEvent{seq, event});
  backend_->update_item(next);
  sync_terminal_lock(row, next);
  announce_if_freed(row, next, at);
}

void detail::check_report(const std::string& item_id, Outcome outcome, const std::string& detail) {
  require_name(item_id, "item id");
  require_outcome(outcome);
  require_size(detail, kMaxTextBytes, "detail");
}

void ControlStore::Impl::finish(const std::string& item_id, Fence fence, Outcome outcome,
                                const FinishOptions& options) {
  const InUse in_use(*this);
  check_report(item_id, outcome, options.detail);
  require_actor(options.actor);
  if (options.now) require_now(*options.now);
  CommandRunner::run(*this, cmd::Finish{.sync = sync_for_finish(),
                                        .item_id = item_id,
                                        .fence = fence,
                                        .outcome = outcome,
                                        .detail = options.detail,
                                        .actor = options.actor,
                                        .now = options.now,
                                        .no_retry = options.no_retry});
}

void CommandRunner::exec(ControlStore::Impl& s, const cmd::Finish& c) {
  // Read once the write lock is held: the decision is made at this time.
  s.finish_in_tx(c.item_id, c.fence, c.outcome, c.detail, s.clock(c.now), c.actor, c.no_retry);
}

Micros ControlStore::Impl::heartbeat(const std::string& item_id, Fence fence,
                                     const LeaseOptions& options) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  require_actor(options.actor);
  const Micros lease = require_lease(options.lease.value_or(options_.lease));
  if (options.now) require_now(*options.now);
  // A lease extended is a promise to a worker, like a claim: as durable.
  return CommandRunner::run(*this, cmd::Heartbeat{.sync = sync_for_claims(),
                                                  .item_id = item_id,
                                                  .fence = fence,
                                                  .lease = lease,
                                                  .actor = options.actor,
                                                  .now = options.now});
}

Micros CommandRunner::exec(ControlStore::Impl& s, const cmd::Heartbeat& c) {
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(c.now);
  const ItemRow next = s.report_in_tx(c.item_id, c.actor, [&](const std::optional<ItemRow>& row) {
    // A lapsed lease renewed takes a slot again: only if one is free.
    bool slot_taken = false;
    if (row && lease_lapsed(*row, at) && !row->concurrency_key.empty()) {
      KeyGate gate(*s.backend_, at);
      if (const LimitRow* limit = gate.limit(row->concurrency_key); limit && limit->concurrency > 0) {
        slot_taken = s.backend_->live_leases(row->concurrency_key, at) >=
                     static_cast<std::int64_t>(limit->concurrency);
      }
    }
    return decide_heartbeat(row, c.item_id, c.fence, c.lease, kControlPlane, at, slot_taken);
  });
  return next.lease_expires_at;
}

std::int64_t ControlStore::Impl::expire_leases(std::optional<Micros> now) {
  const InUse in_use(*this);
  if (now) require_now(*now);
  // A lost expiry record loses nothing but history: finish durability.
  return CommandRunner::run(*this, cmd::ExpireLeases{.sync = sync_for_finish(), .now = now});
}

Micros CommandRunner::exec(ControlStore::Impl& s, const cmd::ExpireLeases& c) {
  const auto& now = c.now;
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(now);
  std::int64_t expired = 0;
  for (const auto& project : s.backend_->project_ids(nullptr)) {
    for (auto& row : s.backend_->lapsed_items(at, project)) {
      const auto history = s.backend_->stream_events({StreamKind::item, row.item_id});
      std::optional<Event> last;
      if (!history.empty()) last = decode(history.back().body);
      const auto event = decide_expire_lease(row, last, at);
      if (!event) continue;  // this claim's expiry is recorded already
      const Seq seq = s.backend_->append(*event);
      const ItemRow next = apply(row, StoredEvent{seq, *event});
      s.backend_->update_item(next);
      s.sync_terminal_lock(row, next);  // an exhausted item leaves the terminal path
      ++expired;
    }
  }
  return expired;
}

void ControlStore::Impl::release(const std::string& item_id, Fence fence, const std::string& reason,
                                 const ReleaseOptions& options) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  require_actor(options.actor);
  require_actor(options.by);
  require_size(reason, kMaxTextBytes, "reason");
  if (options.now) require_now(*options.now);
  CommandRunner::run(*this, cmd::Release{.sync = sync_for_finish(),
                                         .item_id = item_id,
                                         .fence = fence,
                                         .reason = reason,
                                         .actor = options.actor,
                                         .now = options.now,
                                         .by = options.by});
}

void CommandRunner::exec(ControlStore::Impl& s, const cmd::Release& c) {
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(c.now);
  s.report_in_tx(c.item_id, c.actor, [&](const std::optional<ItemRow>& row) {
    return decide_release(row, c.item_id, c.fence, c.reason, c.by.value_or(kControlPlane), at);
  });
  s.backend_->announce_work();  // the item is ready again: wake a waiting claim
}

}  // namespace cplane
