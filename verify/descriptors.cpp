// The projection descriptors' field diffs and problems (declared, with
// their short members, in verify/descriptors.hpp): for each row table,
// which fields verify compares with the fold, the problem kind each
// difference is named by, and the problems for rows only one side has.
#include "verify/descriptors.hpp"

#include <fmt/format.h>

#include "events/json.hpp"
#include "verify/quote.hpp"

namespace cplane::verify_detail {

namespace {

// Collects field differences, each as text, under the kind given last.
class Differ {
 public:
  explicit Differ(ProblemKind kind) : kind_(kind) {}
  // The kind the fields added from now on are reported as.
  Differ& as(ProblemKind kind) {
    kind_ = kind;
    return *this;
  }
  template <class A, class B>
  Differ& add(const char* field, const A& stored, const B& folded) {
    if (stored != folded) {
      out_.push_back({field, kind_, fmt::format("{}", stored), fmt::format("{}", folded)});
    }
    return *this;
  }
  // Compared as they are; quoted only when they differ (the hot path of a
  // clean verify formats nothing).
  Differ& text(const char* field, const std::string& stored, const std::string& folded) {
    if (stored != folded) out_.push_back({field, kind_, quoted(stored), quoted(folded)});
    return *this;
  }
  std::vector<FieldDiff> done() { return std::move(out_); }

 private:
  ProblemKind kind_;
  std::vector<FieldDiff> out_;
};

ProblemKind status_kind(ItemStatus stored, ItemStatus folded, int log_terminals) {
  // A terminal row whose log has a terminal event but folds to something else
  // (an event after the terminal one) is reported as event_after_terminal by
  // the audit; the row itself then merely disagrees.
  if (is_terminal(stored) && !is_terminal(folded)) {
    return log_terminals > 0 ? ProblemKind::status_disagrees : ProblemKind::terminal_without_event;
  }
  if (!is_terminal(stored) && is_terminal(folded)) return ProblemKind::event_without_terminal;
  if (is_terminal(stored) && is_terminal(folded)) return ProblemKind::terminal_events_disagree;
  if (stored == ItemStatus::ready && folded == ItemStatus::claimed) {
    return ProblemKind::ready_after_claim;
  }
  return ProblemKind::status_disagrees;
}

// A cursor over rows already read (projects and grants are few).
template <class Row>
class VectorCursor final : public storage::Cursor<Row> {
 public:
  explicit VectorCursor(std::vector<Row> rows) : rows_(std::move(rows)) {}
  bool next(Row& row) override {
    if (at_ >= rows_.size()) return false;
    row = std::move(rows_[at_++]);
    return true;
  }

 private:
  std::vector<Row> rows_;
  std::size_t at_ = 0;
};

// An optional text field as verify shows it.
std::string opt(const std::optional<std::string>& v) {
  return v ? quoted(*v) : std::string("NULL");
}

}  // namespace

std::vector<FieldDiff> ItemsProjection::diff(const Stored& scanned, const Row& folded) {
  const ItemRow& stored = scanned.row;
  Differ d(ProblemKind::project_disagrees);
  d.text("project_id", stored.project_id, folded.project_id);
  d.as(ProblemKind::payload_disagrees).text("payload", stored.payload, folded.payload);
  d.as(ProblemKind::key_disagrees).text("key", stored.key, folded.key);
  d.text("concurrency_key", stored.concurrency_key, folded.concurrency_key);
  // (disagree tells the terminal cases of a status apart.)
  d.as(ProblemKind::status_disagrees);
  if (!scanned.invalid_status.empty()) {
    // Not a status at all: always a difference, whatever the fold says.
    d.add("status", quoted(scanned.invalid_status) + " (not a status)",
          std::string(to_string(folded.status)));
  } else {
    d.add("status", to_string(stored.status), to_string(folded.status));
  }
  d.as(ProblemKind::owner_disagrees).text("owner", stored.owner, folded.owner);
  d.as(ProblemKind::fence_disagrees).add("fence", stored.fence, folded.fence);
  d.as(ProblemKind::attempts_disagrees).add("attempts", stored.attempts, folded.attempts);
  d.as(ProblemKind::lease_disagrees)
      .add("lease_expires_at", stored.lease_expires_at, folded.lease_expires_at);
  d.as(ProblemKind::detail_disagrees).text("detail", stored.detail, folded.detail);
  d.as(ProblemKind::queued_disagrees)
      .add("queued_seq", stored.queued_seq, folded.queued_seq)
      .add("queued_at", stored.queued_at, folded.queued_at);
  d.as(ProblemKind::last_seq_disagrees)
      .add("updated_at", stored.updated_at, folded.updated_at)
      .add("last_seq", stored.last_seq, folded.last_seq);
  d.as(ProblemKind::forge_disagrees);
  if (!scanned.invalid_kind.empty()) {
    d.add("kind", quoted(scanned.invalid_kind) + " (not a kind)",
          std::string(to_string(folded.kind)));
  } else {
    d.add("kind", to_string(stored.kind), to_string(folded.kind));
  }
  d.text("ref", stored.ref, folded.ref);
  d.text("head", stored.head, folded.head);
  if (!scanned.invalid_review.empty()) {
    d.add("review", quoted(scanned.invalid_review) + " (not a review state)",
          std::string(to_string(folded.review)));
  } else {
    d.add("review", to_string(stored.review), to_string(folded.review));
  }
  d.text("author", stored.author, folded.author);
  d.as(ProblemKind::assignment_disagrees);
  d.text("session", stored.session, folded.session);
  d.text("actions", join_list(stored.actions), join_list(folded.actions));
  d.text("expected_head", stored.expected_head, folded.expected_head);
  d.add("head_moved", stored.head_moved, folded.head_moved);
  d.as(ProblemKind::routing_disagrees);
  if (!scanned.invalid_routing.empty()) {
    // Read back as the engine never writes it: always a difference.
    d.add("priority", scanned.invalid_routing + " (not as cplane writes it)",
          fmt::format("{}, terminal_since {}", folded.priority, folded.terminal_since));
  } else {
    d.add("priority", stored.priority, folded.priority);
    d.add("terminal_since", stored.terminal_since, folded.terminal_since);
  }
  d.text("terminal_reason", stored.terminal_reason, folded.terminal_reason);
  d.as(ProblemKind::forge_disagrees)
      .text("close_reason", stored.close_reason, folded.close_reason);
  d.as(ProblemKind::schedule_disagrees)
      .add("run_at", stored.run_at, folded.run_at)
      .add("max_attempts", stored.max_attempts, folded.max_attempts)
      .text("backoff", stored.backoff, folded.backoff)
      .add("attempt_limit", stored.attempt_limit, folded.attempt_limit)
      .add("ended_fence", stored.ended_fence, folded.ended_fence);
  return d.done();
}

std::vector<LedgerProblem> ItemsProjection::disagree(const Stored& stored, const Row& folded,
                                                     const StreamAudit& a) {
  std::vector<LedgerProblem> out;
  for (const auto& d : diff(stored, folded)) {
    const ProblemKind kind = d.kind == ProblemKind::status_disagrees &&
                                     stored.invalid_status.empty()
                                 ? status_kind(stored.row.status, folded.status, a.terminals)
                                 : d.kind;
    out.push_back({kind, a.stream.id, stored.row.project_id,
                   fmt::format("item {}: {} is {} in the row but {} in the log", a.stream.id,
                               d.field, d.stored, d.folded)});
  }
  return out;
}

std::optional<LedgerProblem> ItemsProjection::missing(const Row& folded, const StreamAudit& a) {
  return LedgerProblem{ProblemKind::orphan_events, a.stream.id, folded.project_id,
                       fmt::format("item {} has {} event(s), the last at seq {}, but no row",
                                   a.stream.id, a.events, folded.last_seq)};
}

std::optional<LedgerProblem> ItemsProjection::unexplained(const Stored& stored,
                                                          const StreamAudit&) {
  const std::string status = stored.invalid_status.empty()
                                 ? std::string(to_string(stored.row.status))
                                 : stored.invalid_status;
  return LedgerProblem{ProblemKind::no_creation_event, stored.row.item_id, stored.row.project_id,
                       fmt::format("item {} has a row ({}) but no events at all",
                                   stored.row.item_id, status)};
}

void ItemsProjection::cross_check(const StreamAudit& a, const LogFacts& facts,
                                  std::vector<LedgerProblem>& out) {
  if (a.created && !facts.project_log_unreadable && !facts.projects.contains(a.item.project_id)) {
    out.push_back({ProblemKind::item_in_unknown_project, a.stream.id, a.item.project_id,
                   fmt::format("item {} was queued into project {}, which the log never created",
                               a.stream.id, a.item.project_id)});
  }
}

std::string ItemsProjection::evidence_of_loss(const Stored& stored, const Row& folded) {
  if (stored.row.fence > folded.fence) {
    return fmt::format("fence {} in the row is above the log's {}: the log lost events; left "
                       "alone, so that no fence up to {} is handed out twice",
                       stored.row.fence, folded.fence, stored.row.fence);
  }
  if (stored.row.last_seq > folded.last_seq) {
    return fmt::format("last_seq {} in the row is newer than the log's {}: the log lost "
                       "events; left alone",
                       stored.row.last_seq, folded.last_seq);
  }
  if (stored.row.updated_at > folded.updated_at) {
    return fmt::format("updated_at {} in the row is later than the log's {}: the log lost "
                       "events; left alone",
                       stored.row.updated_at, folded.updated_at);
  }
  return {};
}

std::unique_ptr<storage::Cursor<ProjectRow>> ProjectsProjection::scan(storage::RowSource& rows) {
  return std::make_unique<VectorCursor<Stored>>(rows.all_projects());
}

std::vector<FieldDiff> ProjectsProjection::diff(const Stored& stored, const Row& folded) {
  return Differ(ProblemKind::project_row_disagrees)
      .text("title", stored.title, folded.title)
      .text("status", stored.status, folded.status)
      .add("created_at", stored.created_at, folded.created_at)
      .add("last_seq", stored.last_seq, folded.last_seq)
      .add("max_attempts", stored.max_attempts, folded.max_attempts)
      .text("backoff", stored.backoff, folded.backoff)
      .add("paused", stored.paused, folded.paused)
      .text("pause_reason", stored.pause_reason, folded.pause_reason)
      .add("weight", stored.weight, folded.weight)
      .done();  // fair_pass: the claims' (verify/flow_check.cpp)
}

std::vector<LedgerProblem> ProjectsProjection::disagree(const Stored& stored, const Row& folded,
                                                        const StreamAudit&) {
  std::vector<LedgerProblem> out;
  for (const auto& d : diff(stored, folded)) {
    out.push_back({d.kind, "", stored.project_id,
                   fmt::format("project {}: {} is {} in the row but {} in the log",
                               stored.project_id, d.field, d.stored, d.folded)});
  }
  return out;
}

std::optional<LedgerProblem> ProjectsProjection::missing(const Row& folded, const StreamAudit&) {
  return LedgerProblem{ProblemKind::project_row_missing, "", folded.project_id,
                       fmt::format("project {} was created at seq {} but has no row",
                                   folded.project_id, folded.last_seq)};
}

std::optional<LedgerProblem> ProjectsProjection::unexplained(const Stored& stored,
                                                             const StreamAudit& a) {
  if (a.unreadable) return std::nullopt;  // the creation may be the unreadable event
  return LedgerProblem{ProblemKind::project_row_without_event, "", stored.project_id,
                       fmt::format("project {} has a row but no project_created event",
                                   stored.project_id)};
}

std::unique_ptr<storage::Cursor<ProjectActorRow>> GrantsProjection::scan(storage::RowSource& rows) {
  return std::make_unique<VectorCursor<Stored>>(rows.all_assignments());
}

std::vector<FieldDiff> GrantsProjection::diff(const Stored& stored, const Row& folded) {
  return Differ(ProblemKind::project_row_disagrees)
      .add("assigned_at", stored.assigned_at, folded.assigned_at)
      .add("last_seq", stored.last_seq, folded.last_seq)
      .done();
}

std::vector<LedgerProblem> GrantsProjection::disagree(const Stored& stored, const Row& folded,
                                                      const StreamAudit&) {
  std::vector<LedgerProblem> out;
  for (const auto& d : diff(stored, folded)) {
    out.push_back({d.kind, "", stored.project_id,
                   fmt::format("assignment of {} to {}: {} is {} in the row but {} in the log",
                               stored.actor, stored.project_id, d.field, d.stored, d.folded)});
  }
  return out;
}

std::optional<LedgerProblem> GrantsProjection::missing(const Row& folded, const StreamAudit&) {
  return LedgerProblem{ProblemKind::assignment_missing, "", folded.project_id,
                       fmt::format("actor {} was assigned to project {} at seq {} but the "
                                   "assignment has no row",
                                   folded.actor, folded.project_id, folded.last_seq)};
}

std::optional<LedgerProblem> GrantsProjection::unexplained(const Stored& stored,
                                                           const StreamAudit& a) {
  if (a.unreadable) return std::nullopt;
  return LedgerProblem{ProblemKind::assignment_without_event, "", stored.project_id,
                       fmt::format("actor {} is assigned to project {} with no actor_assigned "
                                   "event",
                                   stored.actor, stored.project_id)};
}

std::vector<TerminalLockRow> TerminalLocksProjection::folded(StreamAudit& a) {
  if (!a.created) return {};
  ItemRow row = a.item;
  if (row.item_id.empty()) row.item_id = a.stream.id;
  auto lock = terminal_lock_of(row);
  if (!lock) return {};
  return {*lock};
}

std::vector<FieldDiff> TerminalLocksProjection::diff(const Stored& stored, const Row& folded) {
  return Differ(ProblemKind::terminal_lock_disagrees)
      .add("since", stored.since, folded.since)
      .text("reason", stored.reason, folded.reason)
      .done();
}

std::vector<LedgerProblem> TerminalLocksProjection::disagree(const Stored& stored,
                                                             const Row& folded,
                                                             const StreamAudit& a) {
  std::vector<LedgerProblem> out;
  for (const auto& d : diff(stored, folded)) {
    out.push_back({d.kind, stored.item_id, a.item.project_id,
                   fmt::format("item {} on the terminal path: {} is {} in terminal_locks but {} "
                               "in the log",
                               stored.item_id, d.field, d.stored, d.folded)});
  }
  return out;
}

std::optional<LedgerProblem> TerminalLocksProjection::missing(const Row& folded,
                                                              const StreamAudit& a) {
  return LedgerProblem{ProblemKind::terminal_lock_missing, folded.item_id, a.item.project_id,
                       fmt::format("item {} is on the terminal path (since {}) but has no "
                                   "terminal_locks row",
                                   folded.item_id, folded.since)};
}

std::optional<LedgerProblem> TerminalLocksProjection::unexplained(const Stored& stored,
                                                                  const StreamAudit& a) {
  if (a.unreadable) return std::nullopt;
  return LedgerProblem{ProblemKind::terminal_lock_without_event, stored.item_id,
                       a.item.project_id,
                       fmt::format("item {} has a terminal_locks row but its log does not put "
                                   "it on the terminal path (or took it off)",
                                   stored.item_id)};
}

template <class D, class R>
std::vector<LedgerProblem> OneRowPerStream<D, R>::disagree(const Stored& stored, const Row& folded,
                                                           const StreamAudit&) {
  std::vector<LedgerProblem> out;
  for (const auto& d : D::diff(stored, folded)) {
    out.push_back({d.kind, "", "",
                   fmt::format("{} {}: {} is {} in the row but {} in the log", D::noun,
                               quoted(D::id(stored)), d.field, d.stored, d.folded)});
  }
  return out;
}

template <class D, class R>
std::optional<LedgerProblem> OneRowPerStream<D, R>::missing(const Row& folded, const StreamAudit&) {
  return LedgerProblem{D::missing_kind, "", "",
                       fmt::format("{} {} has events (the last at seq {}) but no row", D::noun,
                                   quoted(D::id(folded)), folded.last_seq)};
}

template <class D, class R>
std::optional<LedgerProblem> OneRowPerStream<D, R>::unexplained(const Stored& stored,
                                                                const StreamAudit& a) {
  if (a.unreadable) return std::nullopt;
  return LedgerProblem{D::without_event_kind, "", "",
                       fmt::format("{} {} has a row but no {} event", D::noun,
                                   quoted(D::id(stored)), D::creation)};
}

template <class D, class R>
std::string OneRowPerStream<D, R>::evidence_of_loss(const Stored& stored, const Row& folded) {
  if (stored.last_seq > folded.last_seq) {
    return fmt::format("last_seq {} in the row is newer than the log's {}: the log lost "
                       "events; left alone",
                       stored.last_seq, folded.last_seq);
  }
  return {};
}

template struct OneRowPerStream<IncidentsProjection, IncidentLinkRow>;
template struct OneRowPerStream<SchedulesProjection, ScheduleRow>;
template struct OneRowPerStream<SessionsProjection, SessionRow>;

std::vector<FieldDiff> IncidentsProjection::diff(const Stored& stored, const Row& folded) {
  Differ d(ProblemKind::incident_link_disagrees);
  d.text("provider", stored.provider, folded.provider)
      .text("fingerprint", stored.fingerprint, folded.fingerprint)
      .text("org", stored.org, folded.org)
      .text("repo", stored.repo, folded.repo)
      .text("environment", stored.environment, folded.environment)
      .text("target", stored.target, folded.target)
      .add("status", opt(stored.status), opt(folded.status))
      .add("event_count",
           stored.event_count ? std::to_string(*stored.event_count) : std::string("NULL"),
           folded.event_count ? std::to_string(*folded.event_count) : std::string("NULL"))
      .add("permalink", opt(stored.permalink), opt(folded.permalink))
      .add("first_seen", opt(stored.first_seen), opt(folded.first_seen))
      .add("last_seen", opt(stored.last_seen), opt(folded.last_seen))
      .add("linked_prs", opt(stored.linked_prs), opt(folded.linked_prs))
      .add("linked_at", stored.linked_at, folded.linked_at)
      .add("updated_at", stored.updated_at, folded.updated_at)
      .add("last_seq", stored.last_seq, folded.last_seq);
  return d.done();
}

std::vector<FieldDiff> SchedulesProjection::diff(const Stored& stored, const Row& folded) {
  return Differ(ProblemKind::schedule_row_disagrees)
      .text("project_id", stored.project_id, folded.project_id)
      .text("cron", stored.cron, folded.cron)
      .text("zone", stored.zone, folded.zone)
      .text("payload", stored.payload, folded.payload)
      .add("overlap_skip", stored.overlap_skip, folded.overlap_skip)
      .add("catch_up", stored.catch_up, folded.catch_up)
      .add("next_at", stored.next_at, folded.next_at)
      .add("paused", stored.paused, folded.paused)
      .add("removed", stored.removed, folded.removed)
      .text("last_item", stored.last_item, folded.last_item)
      .add("last_occurrence", stored.last_occurrence, folded.last_occurrence)
      .add("fired", stored.fired, folded.fired)
      .add("created_at", stored.created_at, folded.created_at)
      .add("updated_at", stored.updated_at, folded.updated_at)
      .add("last_seq", stored.last_seq, folded.last_seq)
      .done();
}

std::vector<FieldDiff> SessionsProjection::diff(const Stored& stored, const Row& folded) {
  return Differ(ProblemKind::session_row_disagrees)
      .text("actor", stored.actor, folded.actor)
      .add("opened_at", stored.opened_at, folded.opened_at)
      .add("last_seen_at", stored.last_seen_at, folded.last_seen_at)
      .add("closed_at", stored.closed_at, folded.closed_at)
      .add("last_seq", stored.last_seq, folded.last_seq)
      .done();
}

}  // namespace cplane::verify_detail
