// verify's and rebuild's projection descriptors (internal to verify/): one
// struct with static members per row table, which the replay
// (verify/replay.cpp) merges with the fold of each stream. A new row table
// is one descriptor here and one entry in its stream kind's list in
// replay_all.
//
// A descriptor P gives:
//   Stored, Row          the row as scanned, and as the fold makes it
//   table, stream        the table's name, the stream kind its rows are of
//   no_creation          why rebuild keeps a row with no history
//   scan(rows)           the stored rows, in (stream id, key) order
//   stream_id(stored), same(stored, row), key(row), stored_key(stored)
//   folded(audit)        the rows one stream's fold makes
//   creates, comparable, erasable (audit): whether rebuild writes the fold,
//                        verify compares it, rebuild deletes a row it lacks
//   diff(stored, row)    the differing fields, each with its problem kind
//   disagree, missing, unexplained: verify's problems for a row that
//                        differs, a row the table lacks, a row the log lacks
//   cross_check          what the row shows against the other streams
//   put, erase           rebuild's writes
//   evidence_of_loss     why rebuild keeps a stored row ahead of the log
// The short members are here; the field diffs and problems in
// verify/descriptors.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cplane/ledger.hpp>

#include "projections/rows.hpp"
#include "storage/backend.hpp"
#include "storage/log_source.hpp"
#include "verify/stream_audit.hpp"

namespace cplane::verify_detail {

// A difference between a stored row and the fold, one field, and the kind
// of problem verify names it.
struct FieldDiff {
  std::string field;
  ProblemKind kind;
  std::string stored;
  std::string folded;
};

// items: one row per item stream.
struct ItemsProjection {
  using Stored = storage::ScannedItem;
  using Row = ItemRow;
  static constexpr const char* table = "items";
  static constexpr StreamKind stream = StreamKind::item;
  static constexpr const char* no_creation = "no queued event in the log";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& rows) {
    return rows.scan_items();
  }
  static const std::string& stream_id(const Stored& s) { return s.row.item_id; }
  static bool same(const Stored& s, const Row& r) { return s.row.item_id == r.item_id; }
  static std::string key(const Row& r) { return r.item_id; }
  static std::string stored_key(const Stored& s) { return s.row.item_id; }
  // The rows the stream folds to: any item stream with events has one
  // (verify reports one without a row); only a created one is written.
  static std::vector<Row> folded(StreamAudit& a) {
    if (a.events == 0) return {};
    std::vector<Row> out;
    out.push_back(std::move(a.item));  // the audit is done with it
    if (out[0].item_id.empty()) out[0].item_id = a.stream.id;
    return out;
  }
  static bool creates(const StreamAudit& a) { return a.created; }
  static bool comparable(const StreamAudit& a) { return a.created && !a.unreadable; }
  // A row with no history may be the last copy: never erased.
  static bool erasable(const StreamAudit&) { return false; }

  static std::vector<FieldDiff> diff(const Stored& scanned, const Row& folded);
  static std::vector<LedgerProblem> disagree(const Stored& stored, const Row& folded,
                                             const StreamAudit& a);
  static std::optional<LedgerProblem> missing(const Row& folded, const StreamAudit& a);
  static std::optional<LedgerProblem> unexplained(const Stored& stored, const StreamAudit&);
  // What only an item's row can show against the other streams.
  static void cross_check(const StreamAudit& a, const LogFacts& facts,
                          std::vector<LedgerProblem>& out);
  static void put(storage::Backend& b, const Row& r) { b.put_item(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_item(s.row.item_id); }
  // Why rebuild must leave a stored row alone rather than write the fold
  // over it, or "": a row whose fence is above the log's, or whose last
  // event is newer than the log's, was made by events the log has lost.
  // Writing the fold would hand that fence out again to a second holder.
  static std::string evidence_of_loss(const Stored& stored, const Row& folded);
};

// What the two projections of a project stream share: every row the fold
// makes is written by rebuild, compared unless the stream held an unreadable
// event, and nothing is checked across streams or kept as evidence of loss.
struct ProjectStreamProjection {
  static constexpr StreamKind stream = StreamKind::project;
  static bool creates(const StreamAudit&) { return true; }
  static bool erasable(const StreamAudit&) { return false; }
  static bool comparable(const StreamAudit& a) { return !a.unreadable; }
  static void cross_check(const StreamAudit&, const LogFacts&, std::vector<LedgerProblem>&) {}
  template <class Stored, class Row>
  static std::string evidence_of_loss(const Stored&, const Row&) {
    return {};
  }
};

// projects: one row per project stream.
struct ProjectsProjection : ProjectStreamProjection {
  using Stored = ProjectRow;
  using Row = ProjectRow;
  static constexpr const char* table = "projects";
  static constexpr const char* no_creation = "no project_created event in the log";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& rows);
  static const std::string& stream_id(const Stored& s) { return s.project_id; }
  static bool same(const Stored& s, const Row& r) { return s.project_id == r.project_id; }
  static std::string key(const Row& r) { return r.project_id; }
  static std::string stored_key(const Stored& s) { return s.project_id; }
  static std::vector<Row> folded(StreamAudit& a) {
    if (!a.project) return {};
    return {*a.project};
  }
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded);
  static std::vector<LedgerProblem> disagree(const Stored& stored, const Row& folded,
                                             const StreamAudit&);
  static std::optional<LedgerProblem> missing(const Row& folded, const StreamAudit&);
  static std::optional<LedgerProblem> unexplained(const Stored& stored, const StreamAudit& a);
  static void put(storage::Backend& b, const Row& r) { b.put_project(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_project(s.project_id); }
};

// project_actors: one row per actor granted a project, in the project's stream.
struct GrantsProjection : ProjectStreamProjection {
  using Stored = ProjectActorRow;
  using Row = ProjectActorRow;
  static constexpr const char* table = "project_actors";
  static constexpr const char* no_creation = "no actor_assigned event in the log";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& rows);
  static const std::string& stream_id(const Stored& s) { return s.project_id; }
  static bool same(const Stored& s, const Row& r) {
    return s.project_id == r.project_id && s.actor == r.actor;
  }
  static std::string key(const Row& r) { return r.project_id + "/" + r.actor; }
  static std::string stored_key(const Stored& s) { return key(s); }
  static std::vector<Row> folded(StreamAudit& a) {
    std::vector<Row> out;
    for (const auto& [actor, row] : a.grants) out.push_back(row);
    return out;
  }
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded);
  static std::vector<LedgerProblem> disagree(const Stored& stored, const Row& folded,
                                             const StreamAudit&);
  static std::optional<LedgerProblem> missing(const Row& folded, const StreamAudit&);
  static std::optional<LedgerProblem> unexplained(const Stored& stored, const StreamAudit& a);
  static void put(storage::Backend& b, const Row& r) { b.put_assignment(r); }
  static void erase(storage::Backend& b, const Stored& s) {
    b.delete_assignment(s.project_id, s.actor);
  }
};

// terminal_locks: a row for an item stream whose fold is on the terminal
// path. (Listed before items in replay: ItemsProjection takes the fold.)
struct TerminalLocksProjection {
  using Stored = TerminalLockRow;
  using Row = TerminalLockRow;
  static constexpr const char* table = "terminal_locks";
  static constexpr StreamKind stream = StreamKind::item;
  static constexpr const char* no_creation = "no terminal_path_entered event in the log";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& rows) {
    return rows.scan_terminal_locks();
  }
  static const std::string& stream_id(const Stored& s) { return s.item_id; }
  static bool same(const Stored& s, const Row& r) { return s.item_id == r.item_id; }
  static std::string key(const Row& r) { return r.item_id; }
  static std::string stored_key(const Stored& s) { return s.item_id; }
  static std::vector<Row> folded(StreamAudit& a);
  static bool creates(const StreamAudit& a) { return a.created; }
  static bool comparable(const StreamAudit& a) { return a.created && !a.unreadable; }
  // The item's history is whole and readable and does not put it on the
  // terminal path: the lock is made up (the item row is the data).
  static bool erasable(const StreamAudit& a) { return a.created && !a.unreadable; }
  static void cross_check(const StreamAudit&, const LogFacts&, std::vector<LedgerProblem>&) {}
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded);
  static std::vector<LedgerProblem> disagree(const Stored& stored, const Row& folded,
                                             const StreamAudit& a);
  static std::optional<LedgerProblem> missing(const Row& folded, const StreamAudit& a);
  static std::optional<LedgerProblem> unexplained(const Stored& stored, const StreamAudit& a);
  static void put(storage::Backend& b, const Row& r) { b.put_terminal_lock(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_terminal_lock(s.item_id); }
  static std::string evidence_of_loss(const Stored&, const Row&) { return {}; }
};

// What the projections of one row per stream, keyed by the stream id,
// share (sessions, incident links, schedules): a problem for a missing row,
// for a row without its creation event, and the diff's kind for each field;
// rows never erased, and a row whose last_seq is ahead of the log kept (the
// log lost its events). D gives Row, table, stream, missing_kind,
// without_event_kind, noun, creation (the event that makes the row),
// id(row), slot(audit) and diff. (The problems are defined, and each D
// instantiated, in verify/descriptors.cpp.)
template <class D, class R>
struct OneRowPerStream {
  using Stored = R;
  using Row = R;
  static const std::string& stream_id(const Stored& s) { return D::id(s); }
  static bool same(const Stored& s, const Row& r) { return D::id(s) == D::id(r); }
  static std::string key(const Row& r) { return D::id(r); }
  static std::string stored_key(const Stored& s) { return D::id(s); }
  static std::vector<Row> folded(StreamAudit& a) {
    const auto& slot = D::slot(a);
    if (!slot) return {};
    return {*slot};
  }
  static bool creates(const StreamAudit& a) { return D::slot(a).has_value(); }
  static bool erasable(const StreamAudit&) { return false; }
  static bool comparable(const StreamAudit& a) { return !a.unreadable; }
  static void cross_check(const StreamAudit&, const LogFacts&, std::vector<LedgerProblem>&) {}
  static std::vector<LedgerProblem> disagree(const Stored& stored, const Row& folded,
                                             const StreamAudit&);
  static std::optional<LedgerProblem> missing(const Row& folded, const StreamAudit&);
  static std::optional<LedgerProblem> unexplained(const Stored& stored, const StreamAudit& a);
  static std::string evidence_of_loss(const Stored& stored, const Row& folded);
};

// incident_links: one row per incident stream.
struct IncidentsProjection : OneRowPerStream<IncidentsProjection, IncidentLinkRow> {
  static constexpr const char* table = "incident_links";
  static constexpr StreamKind stream = StreamKind::incident;
  static constexpr const char* no_creation = "no incident_linked event in the log";
  static constexpr ProblemKind missing_kind = ProblemKind::incident_link_missing;
  static constexpr ProblemKind without_event_kind = ProblemKind::incident_link_without_event;
  static constexpr const char* noun = "incident";
  static constexpr const char* creation = "incident_linked";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& rows) {
    return rows.scan_incidents();
  }
  static const std::string& id(const Row& r) { return r.incident_id; }
  static const std::optional<Row>& slot(const StreamAudit& a) { return a.incident; }
  static void put(storage::Backend& b, const Row& r) { b.put_incident(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_incident(s.incident_id); }
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded);
};

// schedules: one row per schedule stream (a removed one keeps its row).
struct SchedulesProjection : OneRowPerStream<SchedulesProjection, ScheduleRow> {
  static constexpr const char* table = "schedules";
  static constexpr StreamKind stream = StreamKind::schedule;
  static constexpr const char* no_creation = "no schedule_created event in the log";
  static constexpr ProblemKind missing_kind = ProblemKind::schedule_row_missing;
  static constexpr ProblemKind without_event_kind = ProblemKind::schedule_row_without_event;
  static constexpr const char* noun = "schedule";
  static constexpr const char* creation = "schedule_created";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& rows) {
    return rows.scan_schedules();
  }
  static const std::string& id(const Row& r) { return r.name; }
  static const std::optional<Row>& slot(const StreamAudit& a) { return a.schedule; }
  static void put(storage::Backend& b, const Row& r) { b.put_schedule(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_schedule(s.name); }
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded);
};

// sessions: one row per session stream.
struct SessionsProjection : OneRowPerStream<SessionsProjection, SessionRow> {
  static constexpr const char* table = "sessions";
  static constexpr StreamKind stream = StreamKind::session;
  static constexpr const char* no_creation = "no session_opened event in the log";
  static constexpr ProblemKind missing_kind = ProblemKind::session_row_missing;
  static constexpr ProblemKind without_event_kind = ProblemKind::session_row_without_event;
  static constexpr const char* noun = "session";
  static constexpr const char* creation = "session_opened";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& rows) {
    return rows.scan_sessions();
  }
  static const std::string& id(const Row& r) { return r.session_id; }
  static const std::optional<Row>& slot(const StreamAudit& a) { return a.session; }
  static void put(storage::Backend& b, const Row& r) { b.put_session(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_session(s.session_id); }
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded);
};

}  // namespace cplane::verify_detail
