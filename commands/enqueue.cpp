// Enqueue: one item, one under an idempotency key or with the forge's
// fields, and a batch (its ids checked in one read and its events appended
// together).
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "commands/combine.hpp"
#include "commands/control_store.hpp"
#include "commands/decide.hpp"
#include "commands/internal.hpp"
#include "events/clock.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "storage/backend.hpp"

namespace cplane {

using namespace detail;
namespace cmd = detail::cmd;

Event ControlStore::Impl::queued_event(const ProjectRow& project, const std::string& id,
                                       const std::string& payload_json,
                                       const std::optional<std::string>& actor, Micros at,
                                       const EnqueueOptions* forge) {
  Event event = decide_enqueue(project, id, payload_json, actor.value_or(kControlPlane), at);
  auto& queued = std::get<ItemQueued>(event.body);
  std::optional<RetryPolicy> own;
  if (forge != nullptr) own = RetryPolicy{forge->max_attempts, forge->backoff};
  const RetryPolicy policy = resolve_policy(project, own);
  queued.max_attempts = policy.max_attempts;
  queued.backoff = policy.max_attempts > 0 ? policy.backoff : "";
  if (forge != nullptr) {
    if (forge->run_at) queued.run_at = *forge->run_at;
    if (forge->delay) queued.run_at = std::min(at + *forge->delay, kMaxNow);
    queued.kind = forge->kind;
    queued.ref = forge->ref;
    queued.head = forge->head;
    queued.author = forge->author;
    queued.priority = forge->priority;
    queued.key = forge->key;
    queued.concurrency_key = forge->concurrency_key;
  }
  return event;
}

std::string ControlStore::Impl::enqueue_in_tx(const ProjectRow& project, const std::string& payload_json,
                                              const std::optional<std::string>& actor, Micros at,
                                              const EnqueueOptions* forge) {
  std::string id = new_item_id(at);
  while (backend_->find_item(id)) id = new_item_id(at);  // never reuse an id, however unlikely
  const Event event = queued_event(project, id, payload_json, actor, at, forge);
  const Seq seq = backend_->append(event);
  backend_->insert_item(apply(ItemRow{}, StoredEvent{seq, event}));
  backend_->announce_work();  // wakes claims waiting for work when this commits
  return event.item_id;
}

std::vector<std::string> ControlStore::Impl::enqueue_batch_in_tx(
    const ProjectRow& project, const std::vector<std::string>& payloads,
    const std::optional<std::string>& actor, Micros at) {
  // Fresh ids, none in use, checked in one read, and the events appended
  // together: on PostgreSQL a few round trips for the batch, where one item
  // after another took two each (1,000 items, 2,000 round trips).
  std::vector<std::string> ids(payloads.size());
  std::set<std::string> taken;
  for (auto& id : ids) {
    do id = new_item_id(at);
    while (!taken.insert(id).second);
  }
  for (;;) {
    const auto found = backend_->find_items(ids);
    bool clash = false;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (!found[i]) continue;
      clash = true;  // never reuse an id, however unlikely
      do ids[i] = new_item_id(at);
      while (!taken.insert(ids[i]).second);
    }
    if (!clash) break;
  }
  std::vector<Event> events;
  events.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    events.push_back(queued_event(project, ids[i], payloads[i], actor, at, nullptr));
  }
  const auto seqs = backend_->append_batch(events);
  for (std::size_t i = 0; i < events.size(); ++i) {
    backend_->insert_item(apply(ItemRow{}, StoredEvent{seqs[i], events[i]}));
  }
  backend_->announce_work();  // wakes claims waiting for work when this commits
  return ids;
}

std::string ControlStore::Impl::enqueue(const std::string& project_id, const std::string& payload_json,
                                        const std::optional<std::string>& actor,
                                        std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(project_id, "project id");
  require_actor(actor);
  require_payload(payload_json);
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::Enqueue{.sync = sync_for_claims(),
                                                .project_id = project_id,
                                                .payload = payload_json,
                                                .actor = actor,
                                                .now = now});
}

std::string CommandRunner::exec(ControlStore::Impl& s, const cmd::Enqueue& c) {
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(c.now);
  const ProjectRow project = s.visible_project(c.project_id, c.actor);
  if (!c.forge) return s.enqueue_in_tx(project, c.payload, c.actor, at);
  std::optional<ItemRow> first;
  if (!c.key.empty()) first = s.backend_->find_item_by_key(c.project_id, c.key);
  // Enqueued before under this key: that item, and nothing appended.
  if (auto earlier = decide_keyed_enqueue(project, c.key, first)) return *earlier;
  // ... also when that item was archived since (docs/retention.md): its
  // anchor keeps the key for as long as the anchor is kept.
  if (!c.key.empty()) {
    if (auto archived = s.backend_->find_anchor_by_key(c.project_id, c.key)) {
      return archived->stream_id;
    }
  }
  const ControlStore::EnqueueOptions forge{.kind = c.kind, .ref = c.ref, .head = c.head,
                                           .author = c.author, .priority = c.priority,
                                           .key = c.key, .actor = c.actor, .now = c.now,
                                           .max_attempts = c.max_attempts, .backoff = c.backoff,
                                           .run_at = c.run_at, .delay = c.delay,
                                           .concurrency_key = c.concurrency_key};
  return s.enqueue_in_tx(project, c.payload, c.actor, at, &forge);
}

std::string ControlStore::Impl::enqueue(const std::string& project_id, const std::string& payload_json,
                                        const EnqueueOptions& options) {
  const InUse in_use(*this);
  require_name(project_id, "project id");
  require_actor(options.actor);
  require_payload(payload_json);
  if (!options.ref.empty()) require_name(options.ref, "ref");
  if (options.kind != WorkKind::task && options.kind != WorkKind::issue &&
      options.kind != WorkKind::pr) {
    throw InvalidArgument(fmt::format("unknown kind {}: expected task, issue or pr",
                                      static_cast<int>(options.kind)));
  }
  for (const auto& [what, value] : {std::pair{"head", &options.head},
                                    std::pair{"author", &options.author}}) {
    if (value->empty()) continue;
    if (options.kind != WorkKind::pr) {
      throw InvalidArgument(InvalidArgument::Reason::conflict,
                            fmt::format("only a pr has a {}; this item is {} {}", what,
                                        options.kind == WorkKind::issue ? "an" : "a",
                                        to_string(options.kind)));
    }
    require_name(*value, what);
  }
  if (!options.key.empty()) require_name(options.key, "key");
  if (!options.concurrency_key.empty()) require_concurrency_key(options.concurrency_key);
  if (options.key.rfind("schedule:", 0) == 0) {
    throw InvalidArgument(fmt::format("key {} starts with \"schedule:\", which is reserved for "
                                      "the items schedules make",
                                      quote_id(options.key)));
  }
  if (options.now) require_now(*options.now);
  require_backoff(options.backoff);
  if (options.run_at && options.delay) {
    throw InvalidArgument(InvalidArgument::Reason::conflict,
                          "an enqueue takes a run_at or a delay, not both");
  }
  if (options.run_at) require_now(*options.run_at);
  if (options.delay && (*options.delay <= 0 || *options.delay > kMaxNow)) {
    throw InvalidArgument(fmt::format("a delay must be a positive number of microseconds, not {}",
                                      *options.delay));
  }
  return CommandRunner::run(*this, cmd::Enqueue{.sync = sync_for_claims(),
                                                .project_id = project_id,
                                                .payload = payload_json,
                                                .forge = true,
                                                .kind = options.kind,
                                                .ref = options.ref,
                                                .head = options.head,
                                                .author = options.author,
                                                .priority = options.priority,
                                                .key = options.key,
                                                .actor = options.actor,
                                                .now = options.now,
                                                .max_attempts = options.max_attempts,
                                                .backoff = options.backoff,
                                                .run_at = options.run_at,
                                                .delay = options.delay,
                                                .concurrency_key = options.concurrency_key});
}

std::vector<std::string> ControlStore::Impl::enqueue_batch(const std::string& project_id,
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
      throw InvalidArgument(e.reason(), fmt::format("payload {} of {}: {}", i + 1,
                                                    payloads_json.size(), e.what()));
    }
  }
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::EnqueueBatch{.sync = sync_for_claims(),
                                                     .project_id = project_id,
                                                     .payloads = payloads_json,
                                                     .actor = actor,
                                                     .now = now});
}

std::vector<std::string> CommandRunner::exec(ControlStore::Impl& s, const cmd::EnqueueBatch& c) {
  // Read once the write lock is held: the decision is made at this time.
  const Micros at = s.clock(c.now);
  const ProjectRow project = s.visible_project(c.project_id, c.actor);
  return s.enqueue_batch_in_tx(project, c.payloads, c.actor, at);
}

}  // namespace cplane
