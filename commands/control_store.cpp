#include "commands/control_store.hpp"
#include "storage/backend.hpp"
#include "storage/open.hpp"

#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "commands/decide.hpp"
#include "events/json.hpp"
#include "events/clock.hpp"
#include "events/codec.hpp"
#include "projections/apply.hpp"

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

Durability parse_durability(std::string_view text) {
  if (text == "full") return Durability::full;
  if (text == "fenced") return Durability::fenced;
  if (text == "normal") return Durability::normal;
  throw InvalidArgument(
      fmt::format("unknown durability '{}': expected full, fenced or normal", text));
}

namespace {
// Every text stored in an event: bounded, so that a body always decodes.
constexpr std::size_t kMaxTextBytes = 64 << 10;
}  // namespace

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
  if (now < 0) {
    throw InvalidArgument("now must be a number of microseconds since the epoch, not negative");
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

namespace {



// A scoped actor's name, when one is given.
void require_actor(const std::optional<std::string>& actor) {
  if (actor) require_name(*actor, "actor");
}

void require_size(const std::string& text, std::size_t limit, const char* what) {
  if (text.size() > limit) {
    throw InvalidArgument(fmt::format("the {} is {} bytes; the limit is {}", what, text.size(), limit));
  }
}

const std::string kControlPlane;

StoredEvent decode_stored(const storage::RawEvent& raw) {
  return StoredEvent{raw.seq, decode(raw.body)};
}

}  // namespace

namespace {

// The options are checked before the file is touched: a refused store
// leaves nothing behind.
const StoreOptions& checked(const StoreOptions& options) {
  require_lease(options.lease);
  if (options.lock_timeout.count() < 0) throw InvalidArgument("a lock timeout must not be negative");
  return options;
}

}  // namespace

ControlStore::ControlStore(const std::string& url, StoreOptions options)
    : ControlStore(storage::open_store(url, {.lock_timeout = checked(options).lock_timeout,
                                             .create = options.create,
                                             .read_only = options.read_only,
                                             .sqlite = options.sqlite}),
                   options) {}

ControlStore::ControlStore(std::unique_ptr<storage::Backend> backend, StoreOptions options)
    : backend_(std::move(backend)), options_(checked(options)) {}

ControlStore::~ControlStore() = default;

ControlStore::ControlStore(ControlStore&& other) noexcept
    : backend_(std::move(other.backend_)), options_(other.options_) {}

ControlStore& ControlStore::operator=(ControlStore&& other) noexcept {
  backend_ = std::move(other.backend_);
  options_ = other.options_;
  return *this;
}

ControlStore::InUse::InUse(ControlStore& store) : store_(store) {
  if (store.in_use_.exchange(true, std::memory_order_acquire)) {
    throw InvalidArgument(
        "a ControlStore is one connection: use one per thread (another thread is in a call on "
        "this one right now)");
  }
  if (!store.backend_) {
    store.in_use_.store(false, std::memory_order_release);
    throw InvalidArgument("this ControlStore was moved from: use the store it was moved to");
  }
}

// The caller's clock, checked, or the backend's (the database's own, where
// it has one).
Micros ControlStore::clock(std::optional<Micros> now) const {
  return now ? require_now(*now) : backend_->now();
}

ControlStore::InUse::~InUse() { store_.in_use_.store(false, std::memory_order_release); }


Sync ControlStore::sync_for_claims() const {
  return options_.durability == Durability::normal ? Sync::normal : Sync::full;
}

Sync ControlStore::sync_for_finish() const {
  return options_.durability == Durability::full ? Sync::full : Sync::normal;
}

// Validates a claim's input before any lock is taken: its lease and its clock.
std::pair<Micros, Micros> ControlStore::check_claim(const std::string& owner,
                                                   const ClaimOptions& options) const {
  const Micros lease = require_lease(options.lease.value_or(options_.lease));
  if (owner.empty()) throw InvalidArgument("a claim needs a non-empty owner");
  require_name(owner, "owner");
  require_actor(options.actor);
  return {lease, clock(options.now)};
}

void ControlStore::create_project(const std::string& id, const std::string& title,
                                  const std::string& status, std::optional<Micros> now) {
  const InUse in_use(*this);
  if (id.empty()) throw InvalidArgument("a project id must not be empty");
  require_name(id, "project id");
  require_size(title, kMaxTextBytes, "title");
  require_size(status, kMaxTextBytes, "status");
  if (status.empty()) throw InvalidArgument("a project status must not be empty");
  auto tx = Transaction::write(*backend_, sync_for_claims());
  const Event event =
      decide_create_project(backend_->find_project(id), id, title, status, clock(now));
  const Seq seq = backend_->append(event);
  backend_->put_project(apply(ProjectRow{}, StoredEvent{seq, event}));
  tx.commit();
}

void ControlStore::grant(const std::string& project_id, const std::string& actor,
                          std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(project_id, "project id");
  require_name(actor, "actor");
  const Micros at = clock(now);
  auto tx = Transaction::write(*backend_, sync_for_claims());
  auto project = backend_->find_project(project_id);
  if (!project) throw NotFound(NotFound::Reason::unknown_project, fmt::format("no such project: {}", quote_id(project_id)));
  auto event = decide_grant(*project, backend_->is_assigned(project_id, actor), actor, at);
  if (!event) return;  // already assigned: nothing changed, nothing to record
  const Seq seq = backend_->append(*event);
  backend_->put_assignment(apply(ProjectActorRow{}, StoredEvent{seq, *event}));
  tx.commit();
}

std::vector<std::string> ControlStore::visible_projects(const std::optional<std::string>& actor) {
  const InUse in_use(*this);
  require_actor(actor);
  auto tx = Transaction::read(*backend_);
  auto ids = backend_->project_ids(actor ? &*actor : nullptr);
  tx.commit();
  return ids;
}

ProjectRow ControlStore::visible_project(const std::string& project_id,
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

std::string ControlStore::enqueue_in_tx(const ProjectRow& project, const std::string& payload_json,
                                        const std::optional<std::string>& actor, Micros at) {
  std::string id = new_item_id(at);
  while (backend_->find_item(id)) id = new_item_id(at);  // never reuse an id, however unlikely
  const Event event = decide_enqueue(project, id, payload_json, actor.value_or(kControlPlane), at);
  const Seq seq = backend_->append(event);
  backend_->insert_item(apply(ItemRow{}, StoredEvent{seq, event}));
  return event.item_id;
}

std::string ControlStore::enqueue(const std::string& project_id, const std::string& payload_json,
                                  const std::optional<std::string>& actor,
                                  std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(project_id, "project id");
  require_actor(actor);
  require_payload(payload_json);
  const Micros at = clock(now);
  auto tx = Transaction::write(*backend_, sync_for_claims());
  const ProjectRow project = visible_project(project_id, actor);
  std::string id = enqueue_in_tx(project, payload_json, actor, at);
  tx.commit();
  return id;
}

std::vector<std::string> ControlStore::enqueue_batch(const std::string& project_id,
                                                     const std::vector<std::string>& payloads_json,
                                                     const std::optional<std::string>& actor,
                                                     std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(project_id, "project id");
  require_actor(actor);
  if (payloads_json.empty()) throw InvalidArgument("a batch enqueue needs at least one payload");
  for (std::size_t i = 0; i < payloads_json.size(); ++i) {
    try {
      require_payload(payloads_json[i]);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("payload {} of {}: {}", i + 1, payloads_json.size(), e.what()));
    }
  }
  const Micros at = clock(now);
  auto tx = Transaction::write(*backend_, sync_for_claims());
  const ProjectRow project = visible_project(project_id, actor);
  std::vector<std::string> ids;
  ids.reserve(payloads_json.size());
  for (const auto& payload : payloads_json) ids.push_back(enqueue_in_tx(project, payload, actor, at));
  tx.commit();
  return ids;
}

std::optional<ClaimedItem> ControlStore::claim_in_tx(const std::string& owner,
                                                     const ClaimOptions& options, Micros lease,
                                                     Micros at) {
  std::optional<ItemRow> best;
  auto consider = [&](std::optional<ItemRow> candidate) {
    if (candidate && (!best || candidate->queued_seq < best->queued_seq)) best = std::move(candidate);
  };
  // Two index seeks per project in scope: the cost grows with the number of
  // projects, never with the number of items.
  for (const auto& project : backend_->project_ids(options.actor ? &*options.actor : nullptr)) {
    consider(backend_->oldest_ready(project));
    consider(backend_->earliest_lapsed(at, project));
  }
  if (!best) return std::nullopt;

  const Event event = decide_claim(*best, owner, options.actor.value_or(owner), lease, at);
  const Seq seq = backend_->append(event);
  const ItemRow row = apply(std::move(*best), StoredEvent{seq, event});
  backend_->put_item(row);
  return ClaimedItem{row.item_id, row.project_id, row.payload, row.fence, row.attempts,
                     row.lease_expires_at};
}

std::optional<ClaimedItem> ControlStore::claim(const std::string& owner,
                                               const ClaimOptions& options) {
  const InUse in_use(*this);
  const auto [lease, at] = check_claim(owner, options);
  auto tx = Transaction::write(*backend_, sync_for_claims());
  auto claimed = claim_in_tx(owner, options, lease, at);
  if (claimed) tx.commit();
  return claimed;
}

std::vector<ClaimedItem> ControlStore::claim_batch(const std::string& owner, std::size_t max_items,
                                                   const ClaimOptions& options) {
  const InUse in_use(*this);
  const auto [lease, at] = check_claim(owner, options);
  if (max_items == 0) throw InvalidArgument("a batch claim needs max_items of at least 1");
  auto tx = Transaction::write(*backend_, sync_for_claims());
  std::vector<ClaimedItem> out;
  while (out.size() < max_items) {
    auto claimed = claim_in_tx(owner, options, lease, at);
    if (!claimed) break;
    out.push_back(std::move(*claimed));
  }
  if (!out.empty()) tx.commit();
  return out;
}

template <class Decide>
ItemRow ControlStore::report_in_tx(const std::string& item_id,
                                   const std::optional<std::string>& actor, Decide&& decide) {
  auto row = backend_->find_item(item_id);
  // A scoped actor may report only its projects' items, and learns nothing
  // (not even a fence) about others.
  if (actor && (!row || !backend_->is_assigned(row->project_id, *actor))) throw ScopeDenied();
  const Event event = decide(row);  // refuses (FenceRejected) unless row holds the fence
  const Seq seq = backend_->append(event);
  ItemRow next = apply(std::move(*row), StoredEvent{seq, event});
  backend_->put_item(next);
  return next;
}

void ControlStore::finish_in_tx(const std::string& item_id, Fence fence, Outcome outcome,
                                const std::string& detail, Micros at,
                                const std::optional<std::string>& actor) {
  report_in_tx(item_id, actor, [&](const std::optional<ItemRow>& row) {
    return decide_finish(row, item_id, fence, outcome, detail, kControlPlane, at);
  });
}

namespace {

void check_report(const std::string& item_id, Outcome outcome, const std::string& detail) {
  require_name(item_id, "item id");
  require_outcome(outcome);
  require_size(detail, kMaxTextBytes, "detail");
}

}  // namespace

void ControlStore::finish(const std::string& item_id, Fence fence, Outcome outcome,
                          const FinishOptions& options) {
  const InUse in_use(*this);
  check_report(item_id, outcome, options.detail);
  require_actor(options.actor);
  const Micros at = clock(options.now);
  auto tx = Transaction::write(*backend_, sync_for_finish());
  finish_in_tx(item_id, fence, outcome, options.detail, at, options.actor);
  tx.commit();
}

Micros ControlStore::heartbeat(const std::string& item_id, Fence fence,
                               const LeaseOptions& options) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  require_actor(options.actor);
  const Micros lease = require_lease(options.lease.value_or(options_.lease));
  const Micros at = clock(options.now);
  // A lease extended is a promise to a worker, like a claim: as durable.
  auto tx = Transaction::write(*backend_, sync_for_claims());
  const ItemRow next = report_in_tx(item_id, options.actor, [&](const std::optional<ItemRow>& row) {
    return decide_heartbeat(row, item_id, fence, lease, kControlPlane, at);
  });
  tx.commit();
  return next.lease_expires_at;
}

std::int64_t ControlStore::expire_leases(std::optional<Micros> now) {
  const InUse in_use(*this);
  const Micros at = clock(now);
  // A lost expiry record loses nothing but history: finish durability.
  auto tx = Transaction::write(*backend_, sync_for_finish());
  std::int64_t expired = 0;
  for (const auto& project : backend_->project_ids(nullptr)) {
    for (auto& row : backend_->lapsed_items(at, project)) {
      // Recorded once per claim: skip an item whose last event already is
      // this claim's expiry.
      const auto history = backend_->stream_events({StreamKind::item, row.item_id});
      if (!history.empty()) {
        const Event last = decode(history.back().body);
        const auto* done = std::get_if<LeaseExpired>(&last.body);
        if (done != nullptr && done->fence == row.fence) continue;
      }
      const Event event{at, kControlPlane, row.project_id, row.item_id,
                        LeaseExpired{row.fence, row.owner, row.lease_expires_at}};
      const Seq seq = backend_->append(event);
      backend_->put_item(apply(std::move(row), StoredEvent{seq, event}));
      ++expired;
    }
  }
  tx.commit();
  return expired;
}

void ControlStore::release(const std::string& item_id, Fence fence, const std::string& reason,
                           const ReleaseOptions& options) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  require_actor(options.actor);
  require_size(reason, kMaxTextBytes, "reason");
  const Micros at = clock(options.now);
  auto tx = Transaction::write(*backend_, sync_for_finish());
  report_in_tx(item_id, options.actor, [&](const std::optional<ItemRow>& row) {
    return decide_release(row, item_id, fence, reason, kControlPlane, at);
  });
  tx.commit();
}

FenceVerdict ControlStore::check_fence(const std::string& item_id, Fence fence,
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

void ControlStore::finish_batch(const std::vector<Report>& reports, std::optional<Micros> now,
                                const std::optional<std::string>& actor) {
  const InUse in_use(*this);
  require_actor(actor);
  std::set<std::string_view> seen;
  for (const auto& r : reports) {
    check_report(r.item_id, r.outcome, r.detail);
    if (!seen.insert(r.item_id).second) {
      throw InvalidArgument(fmt::format("item {} is listed twice in one finish batch",
                                        quote_id(r.item_id)));
    }
  }
  const Micros at = clock(now);
  auto tx = Transaction::write(*backend_, sync_for_finish());
  for (const auto& r : reports) finish_in_tx(r.item_id, r.fence, r.outcome, r.detail, at, actor);
  tx.commit();
}

std::optional<ClaimedItem> ControlStore::finish_and_claim(const std::string& item_id, Fence fence,
                                                          Outcome outcome, const std::string& owner,
                                                          const ClaimOptions& options,
                                                          const std::string& detail) {
  const InUse in_use(*this);
  check_report(item_id, outcome, detail);
  const auto [lease, at] = check_claim(owner, options);
  auto tx = Transaction::write(*backend_, sync_for_claims());
  finish_in_tx(item_id, fence, outcome, detail, at, options.actor);
  auto next = claim_in_tx(owner, options, lease, at);
  tx.commit();
  return next;
}

ControlStore::StatusCounts ControlStore::status_counts(const std::optional<std::string>& project_id) {
  const InUse in_use(*this);
  if (project_id) require_name(*project_id, "project id");
  auto tx = Transaction::read(*backend_);
  const auto c = backend_->status_counts(project_id ? &*project_id : nullptr);
  tx.commit();
  return StatusCounts{c[0], c[1], c[2], c[3], c[4]};
}

Item ControlStore::item(const std::string& item_id, const std::optional<std::string>& actor) {
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

std::vector<StoredEvent> ControlStore::events(const std::string& item_id,
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
