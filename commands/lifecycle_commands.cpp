// The job lifecycle's commands: retry policies, pause, redrive, reschedule,
// cancel, one item or in bulk. Each checks its input, runs through the
// CommandRunner (so that group commit can take it), and decides in
// commands/lifecycle.cpp.
#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "commands/combine.hpp"
#include "commands/control_store.hpp"
#include "commands/decide.hpp"
#include "commands/internal.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"

namespace cplane {

using namespace detail;
using storage::Transaction;

void require_backoff(std::string_view spec) { parse_backoff(spec); }

// ---- the public calls -------------------------------------------------------------

void ControlStore::create_project(const std::string& id, const std::string& title,
                                  const ProjectOptions& options) {
  Impl::of(*this).create_project(id, title, options);
}
bool ControlStore::set_retry_policy(const std::string& project_id, std::uint32_t max_attempts,
                                    const std::string& backoff, std::optional<Micros> now) {
  return Impl::of(*this).set_retry_policy(project_id, max_attempts, backoff, now);
}
bool ControlStore::pause_project(const std::string& project_id, const std::string& reason,
                                 const LifecycleOptions& options) {
  return Impl::of(*this).pause_project(project_id, true, reason, options);
}
bool ControlStore::resume_project(const std::string& project_id, const LifecycleOptions& options) {
  return Impl::of(*this).pause_project(project_id, false, "", options);
}
void ControlStore::retry(const std::string& item_id, std::optional<std::uint32_t> attempts,
                         const LifecycleOptions& options) {
  Impl::of(*this).change_item(cmd::ItemChange{.kind = cmd::ItemChange::retry,
                                              .item_id = item_id,
                                              .attempts = attempts,
                                              .actor = options.actor,
                                              .now = options.now});
}
void ControlStore::reschedule(const std::string& item_id, Micros run_at,
                              const LifecycleOptions& options) {
  Impl::of(*this).change_item(cmd::ItemChange{.kind = cmd::ItemChange::reschedule,
                                              .item_id = item_id,
                                              .run_at = run_at,
                                              .actor = options.actor,
                                              .now = options.now});
}
void ControlStore::reschedule_in(const std::string& item_id, Micros delay,
                                 const LifecycleOptions& options) {
  if (delay <= 0 || delay > kMaxNow) {
    throw InvalidArgument(fmt::format("a delay must be a positive number of microseconds, not {}",
                                      delay));
  }
  Impl::of(*this).change_item(cmd::ItemChange{.kind = cmd::ItemChange::reschedule,
                                              .item_id = item_id,
                                              .delay = delay,
                                              .actor = options.actor,
                                              .now = options.now});
}
void ControlStore::cancel(const std::string& item_id, const std::string& reason,
                          const LifecycleOptions& options) {
  Impl::of(*this).change_item(cmd::ItemChange{.kind = cmd::ItemChange::cancel,
                                              .item_id = item_id,
                                              .reason = reason,
                                              .actor = options.actor,
                                              .now = options.now});
}
ControlStore::BulkResult ControlStore::cancel_matching(const std::string& project_id,
                                                       const BulkOptions& options) {
  return Impl::of(*this).bulk(cmd::ItemChange::cancel, project_id, options);
}
ControlStore::BulkResult ControlStore::retry_matching(const std::string& project_id,
                                                      const BulkOptions& options) {
  return Impl::of(*this).bulk(cmd::ItemChange::retry, project_id, options);
}
ProjectRow ControlStore::project(const std::string& project_id,
                                 const std::optional<std::string>& actor) {
  return Impl::of(*this).project(project_id, actor);
}

// ---- projects ---------------------------------------------------------------------

namespace {

void check_policy(std::uint32_t max_attempts, const std::string& backoff) {
  require_backoff(backoff);
  if (max_attempts == 0 && !backoff.empty() && backoff != "none") {
    throw InvalidArgument(InvalidArgument::Reason::conflict,
                          "a backoff needs a retry policy: give max_attempts of at least 1");
  }
}

// `to_write`: the command writes the row (Backend::lock_project).
ProjectRow require_project(storage::Backend& backend, const std::string& project_id,
                           bool to_write = false) {
  auto project = to_write ? backend.lock_project(project_id) : backend.find_project(project_id);
  if (!project) {
    throw NotFound(NotFound::Reason::unknown_project,
                   fmt::format("no such project: {}", quote_id(project_id)));
  }
  return std::move(*project);
}

// A bulk operation's id: random, so that two operations never share one.
std::string new_operation_id() {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  return fmt::format("op-{:016x}", random());
}

}  // namespace

void ControlStore::Impl::create_project(const std::string& id, const std::string& title,
                                        const ProjectOptions& options) {
  const InUse in_use(*this);
  if (id.empty()) throw InvalidArgument("a project id must not be empty");
  require_name(id, "project id");
  require_size(title, kMaxTextBytes, "title");
  require_size(options.status, kMaxTextBytes, "status");
  if (options.status.empty()) throw InvalidArgument("a project status must not be empty");
  check_policy(options.max_attempts, options.backoff);
  if (options.now) require_now(*options.now);
  CommandRunner::run(*this, cmd::CreateProject{.sync = sync_for_claims(),
                                               .id = id,
                                               .title = title,
                                               .status = options.status,
                                               .now = options.now,
                                               .max_attempts = options.max_attempts,
                                               .backoff = options.backoff});
}

bool ControlStore::Impl::set_retry_policy(const std::string& project_id,
                                          std::uint32_t max_attempts, const std::string& backoff,
                                          std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(project_id, "project id");
  check_policy(max_attempts, backoff);
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::ProjectChange{.sync = sync_for_claims(),
                                                      .kind = cmd::ProjectChange::policy,
                                                      .project_id = project_id,
                                                      .max_attempts = max_attempts,
                                                      .text = backoff,
                                                      .now = now});
}

bool ControlStore::Impl::pause_project(const std::string& project_id, bool pause,
                                       const std::string& reason,
                                       const LifecycleOptions& options) {
  const InUse in_use(*this);
  require_name(project_id, "project id");
  require_size(reason, kMaxTextBytes, "reason");
  require_actor(options.actor);
  if (options.now) require_now(*options.now);
  return CommandRunner::run(
      *this, cmd::ProjectChange{.sync = sync_for_claims(),
                                .kind = pause ? cmd::ProjectChange::pause : cmd::ProjectChange::resume,
                                .project_id = project_id,
                                .text = reason,
                                .actor = options.actor,
                                .now = options.now});
}

bool CommandRunner::exec(ControlStore::Impl& s, const cmd::ProjectChange& c) {
  const Micros at = s.clock(c.now);
  const ProjectRow project = require_project(*s.backend_, c.project_id, true);
  const std::string by = c.actor.value_or(kControlPlane);
  std::optional<Event> event;
  switch (c.kind) {
    case cmd::ProjectChange::policy:
      event = decide_set_policy(project, RetryPolicy{c.max_attempts, c.text}, at);
      break;
    case cmd::ProjectChange::pause: event = decide_pause(project, c.text, by, at); break;
    case cmd::ProjectChange::resume: event = decide_resume(project, by, at); break;
    case cmd::ProjectChange::weight:
      event = decide_set_weight(project, c.max_attempts, by, at);
      break;
  }
  if (!event) return false;  // as it was already: nothing to record
  const Seq seq = s.backend_->append(*event);
  s.backend_->put_project(apply(project, StoredEvent{seq, *event}));
  // A resumed project's items may be claimed again: wake the waiting claims.
  if (c.kind == cmd::ProjectChange::resume) s.backend_->announce_work();
  return true;
}

ProjectRow ControlStore::Impl::project(const std::string& project_id,
                                       const std::optional<std::string>& actor) {
  const InUse in_use(*this);
  require_name(project_id, "project id");
  require_actor(actor);
  auto tx = Transaction::read(*backend_);
  ProjectRow row = visible_project(project_id, actor);
  tx.commit();
  return row;
}

// ---- items ------------------------------------------------------------------------

void ControlStore::Impl::change_item(cmd::ItemChange change) {
  const InUse in_use(*this);
  require_name(change.item_id, "item id");
  require_actor(change.actor);
  require_size(change.reason, kMaxTextBytes, "reason");
  if (change.kind == cmd::ItemChange::reschedule && change.delay == 0) require_now(change.run_at);
  if (change.attempts && *change.attempts == 0) {
    throw InvalidArgument("a retry's attempts must be at least 1");
  }
  if (change.now) require_now(*change.now);
  change.sync = sync_for_claims();
  CommandRunner::run(*this, change);
}

namespace {

// One item's change inside the command's transaction; the row as it was,
// and the event that follows.
void change_in_tx(ControlStore::Impl& s, const std::optional<ItemRow>& row,
                  const std::string& item_id, cmd::ItemChange::Kind kind,
                  const cmd::ItemChange& c, Micros at) {
  const std::string by = c.actor.value_or(kControlPlane);
  Event event;
  switch (kind) {
    case cmd::ItemChange::retry:
      event = decide_retry(row, item_id, c.attempts, by, c.operation, at);
      break;
    case cmd::ItemChange::reschedule:
      event = decide_reschedule(row, item_id,
                                c.delay > 0 ? std::min(at + c.delay, kMaxNow) : c.run_at, by, at);
      break;
    case cmd::ItemChange::cancel:
      event = decide_cancel(row, item_id, c.reason, by, c.operation, at);
      break;
  }
  const Seq seq = s.backend_->append(event);
  const ItemRow next = apply(*row, StoredEvent{seq, event});
  s.backend_->put_item(next);
  s.sync_terminal_lock(*row, next);
  s.announce_if_freed(*row, next, at);
}

}  // namespace

void CommandRunner::exec(ControlStore::Impl& s, const cmd::ItemChange& c) {
  const Micros at = s.clock(c.now);
  change_in_tx(s, s.backend_->find_item(c.item_id), c.item_id, c.kind, c, at);
}

std::vector<std::string> CommandRunner::exec(ControlStore::Impl& s, const cmd::BulkBatch& c) {
  const Micros at = s.clock(c.now);
  require_project(*s.backend_, c.project_id);
  const cmd::ItemChange change{.kind = c.kind,
                               .attempts = c.attempts,
                               .reason = c.reason,
                               .operation = c.operation,
                               .actor = c.actor};
  std::vector<std::string> ids;
  for (auto& row : s.backend_->items_in_status(c.project_id, c.status, c.limit)) {
    ids.push_back(row.item_id);
    change_in_tx(s, row, row.item_id, c.kind, change, at);
  }
  return ids;
}

ControlStore::BulkResult ControlStore::Impl::bulk(std::uint8_t kind_value,
                                                  const std::string& project_id,
                                                  const BulkOptions& options) {
  const InUse in_use(*this);
  const auto kind = static_cast<cmd::ItemChange::Kind>(kind_value);
  require_name(project_id, "project id");
  require_actor(options.actor);
  require_size(options.reason, kMaxTextBytes, "reason");
  if (options.attempts && *options.attempts == 0) {
    throw InvalidArgument("a retry's attempts must be at least 1");
  }
  if (options.now) require_now(*options.now);
  std::vector<ItemStatus> statuses = options.statuses;
  const bool cancel = kind == cmd::ItemChange::cancel;
  if (statuses.empty()) {
    statuses = cancel ? std::vector{ItemStatus::ready, ItemStatus::scheduled, ItemStatus::claimed}
                      : std::vector{ItemStatus::failed};
  }
  for (const ItemStatus status : statuses) {
    const bool fits = cancel ? !is_terminal(status)
                             : status == ItemStatus::failed || status == ItemStatus::cancelled;
    if (!fits) {
      throw InvalidArgument(
          fmt::format("{} takes items that are {}, not {}", cancel ? "cancel" : "retry",
                      cancel ? "ready, scheduled or claimed" : "failed or cancelled",
                      to_string(status)));
    }
  }
  std::sort(statuses.begin(), statuses.end());
  statuses.erase(std::unique(statuses.begin(), statuses.end()), statuses.end());
  BulkResult out;
  // The first ids in the order they are (or would be) changed: status by
  // status, each in its index's order.
  auto keep_first = [&](const std::vector<std::string>& ids) {
    for (const auto& id : ids) {
      if (out.first_ids.size() < kBulkListed) out.first_ids.push_back(id);
    }
  };
  if (options.dry_run) {
    // One snapshot: the counts by status and each status's first ids.
    auto tx = Transaction::read(*backend_);
    require_project(*backend_, project_id);
    const auto counts = backend_->status_counts(&project_id);
    for (const ItemStatus status : statuses) {
      out.count += counts[static_cast<std::size_t>(status)];
      std::vector<std::string> ids;
      for (const auto& row : backend_->items_in_status(project_id, status, kBulkListed)) {
        ids.push_back(row.item_id);
      }
      keep_first(ids);
    }
    tx.commit();
    return out;
  }
  out.operation = new_operation_id();
  // Pass after pass until one changes nothing: an item that moves between
  // the statuses asked for while the bulk runs (a scheduled item claimed, a
  // claimed one released) is caught by a later pass.
  for (int pass = 0; pass < kBulkPasses; ++pass) {
    const std::int64_t before = out.count;
    for (const ItemStatus status : statuses) {
      // Each batch moves its items out of `status`: the next takes the next.
      for (;;) {
        const auto ids = CommandRunner::run(*this, cmd::BulkBatch{.sync = sync_for_claims(),
                                                                  .kind = kind,
                                                                  .project_id = project_id,
                                                                  .status = status,
                                                                  .limit = kBulkBatch,
                                                                  .attempts = options.attempts,
                                                                  .reason = options.reason,
                                                                  .operation = out.operation,
                                                                  .actor = options.actor,
                                                                  .now = options.now});
        out.count += static_cast<std::int64_t>(ids.size());
        keep_first(ids);
        if (ids.size() < kBulkBatch) break;
      }
    }
    if (out.count == before) break;
  }
  return out;
}

}  // namespace cplane
