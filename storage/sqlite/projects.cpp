// The SQLite engine's other projected rows (engine.hpp): projects and their
// actors, sessions, schedules, the terminal path's locks and incident links.
#include "storage/sqlite/engine.hpp"

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "storage/sqlite/row_codec.hpp"

namespace cplane::storage::sqlite {
namespace {

// A cursor over any statement's rows, read by `fill`.
template <class Row>
class RowCursor final : public Cursor<Row> {
 public:
  using Fill = void (*)(const Statement&, Row&);
  RowCursor(sqlite3* db, const std::string& sql, Fill fill) : stmt_(db, sql.c_str()), fill_(fill) {}
  template <class... A>
  void bind(const A&... args) {
    stmt_.bind(args...);
  }
  bool next(Row& row) override {
    if (!stmt_.step()) return false;
    fill_(stmt_, row);
    return true;
  }

 private:
  Statement stmt_;
  Fill fill_;
};

class SessionCursor final : public Cursor<SessionRow> {
 public:
  SessionCursor(sqlite3* db, const std::string& sql) : stmt_(db, sql.c_str()) { stmt_.bind(); }
  bool next(SessionRow& row) override {
    if (!stmt_.step()) return false;
    row = read_session(stmt_);
    return true;
  }

 private:
  Statement stmt_;
};

}  // namespace

std::vector<std::string> SqliteBackend::claimable_project_ids(const std::string* actor) {
  auto& s = actor == nullptr ? stmts_.all_unpaused_ids.bind()
                             : stmts_.actor_unpaused_ids.bind(*actor);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  s.reset();
  return out;
}

std::optional<ProjectRow> SqliteBackend::find_project(std::string_view project_id) {
  auto& s = stmts_.find_project.bind(project_id);
  std::optional<ProjectRow> out;
  if (s.step()) out = read_project(s);
  s.reset();
  return out;
}

void SqliteBackend::put_project(const ProjectRow& r) {
  stmts_.put_project
      .bind(r.project_id, r.title, r.status, r.created_at, r.last_seq,
            static_cast<std::int64_t>(r.max_attempts), r.backoff,
            static_cast<std::int64_t>(r.paused ? 1 : 0), r.pause_reason,
            static_cast<std::int64_t>(r.weight), r.fair_pass)
      .run();
}

void SqliteBackend::delete_project(std::string_view project_id) {
  stmts_.delete_project.bind(project_id).run();
}

std::vector<std::string> SqliteBackend::project_ids(const std::string* actor) {
  auto& s = actor == nullptr ? stmts_.all_project_ids.bind()
                             : stmts_.actor_project_ids.bind(*actor);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  s.reset();
  return out;
}

std::vector<ProjectRow> SqliteBackend::all_projects() {
  Statement s(db_,
              fmt::format("SELECT {} FROM projects ORDER BY project_id", kProjectColumns).c_str());
  s.bind();
  std::vector<ProjectRow> out;
  while (s.step()) out.push_back(read_project(s));
  return out;
}

bool SqliteBackend::is_assigned(std::string_view project_id, std::string_view actor) {
  auto& s = stmts_.is_assigned.bind(project_id, actor);
  const bool found = s.step();
  s.reset();
  return found;
}

void SqliteBackend::put_assignment(const ProjectActorRow& r) {
  stmts_.put_assignment.bind(r.project_id, r.actor, r.assigned_at, r.last_seq).run();
}

void SqliteBackend::delete_assignment(std::string_view project_id, std::string_view actor) {
  stmts_.delete_assignment.bind(project_id, actor).run();
}

std::vector<ProjectActorRow> SqliteBackend::all_assignments() {
  Statement s(db_,
              "SELECT project_id, actor, assigned_at, last_seq FROM project_actors "
              "ORDER BY project_id, actor");
  s.bind();
  std::vector<ProjectActorRow> out;
  while (s.step()) out.push_back(ProjectActorRow{s.text(0), s.text(1), s.i64(2), s.i64(3)});
  return out;
}

std::optional<SessionRow> SqliteBackend::find_session(std::string_view session_id) {
  auto& s = stmts_.find_session.bind(session_id);
  std::optional<SessionRow> out;
  if (s.step()) out = read_session(s);
  s.reset();
  return out;
}

void SqliteBackend::put_session(const SessionRow& r) {
  stmts_.put_session
      .bind(r.session_id, NullIfEmpty{r.actor}, r.opened_at, r.last_seen_at,
            NullIfZero{r.closed_at}, r.last_seq)
      .run();
}

void SqliteBackend::delete_session(std::string_view session_id) {
  stmts_.delete_session.bind(session_id).run();
}

std::unique_ptr<Cursor<SessionRow>> SqliteBackend::scan_sessions() {
  return std::make_unique<SessionCursor>(
      db_, fmt::format("SELECT {} FROM sessions ORDER BY session_id", kSessionColumns));
}

std::optional<ScheduleRow> SqliteBackend::find_schedule(std::string_view name) {
  Statement s(db_, fmt::format("SELECT {} FROM schedules WHERE name = ?1", kScheduleColumns).c_str());
  s.bind(name);
  if (!s.step()) return std::nullopt;
  ScheduleRow row;
  fill_schedule(s, row);
  return row;
}

void SqliteBackend::put_schedule(const ScheduleRow& r) {
  Statement s(db_, fmt::format("INSERT OR REPLACE INTO schedules ({}) VALUES (?1, ?2, ?3, ?4, "
                               "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                               kScheduleColumns)
                       .c_str());
  s.bind(r.name, r.project_id, r.cron, r.zone, r.payload,
         static_cast<std::int64_t>(r.overlap_skip ? 1 : 0), r.catch_up, r.next_at,
         static_cast<std::int64_t>(r.paused ? 1 : 0), static_cast<std::int64_t>(r.removed ? 1 : 0),
         NullIfEmpty{r.last_item}, r.last_occurrence, r.fired, r.created_at, r.updated_at,
         r.last_seq)
      .run();
}

void SqliteBackend::delete_schedule(std::string_view name) {
  Statement s(db_, "DELETE FROM schedules WHERE name = ?1");
  s.bind(name).run();
}

std::unique_ptr<Cursor<ScheduleRow>> SqliteBackend::scan_schedules() {
  auto c = std::make_unique<RowCursor<ScheduleRow>>(
      db_, fmt::format("SELECT {} FROM schedules ORDER BY name", kScheduleColumns),
      &fill_schedule);
  c->bind();
  return c;
}

// The limits table's scan (limits.cpp has the rest of flow control).
std::unique_ptr<Cursor<LimitRow>> SqliteBackend::scan_limits() {
  auto c = std::make_unique<RowCursor<LimitRow>>(
      db_, fmt::format("SELECT {} FROM limits ORDER BY key", kLimitColumns),
      [](const Statement& s, LimitRow& row) { row = read_limit(s); });
  c->bind();
  return c;
}

std::vector<ScheduleRow> SqliteBackend::due_schedules(Micros now, std::size_t limit) {
  auto& s = stmts_.due_schedules.bind(now, static_cast<std::int64_t>(limit));
  std::vector<ScheduleRow> out;
  while (s.step()) {
    ScheduleRow row;
    fill_schedule(s, row);
    out.push_back(std::move(row));
  }
  s.reset();
  return out;
}

void SqliteBackend::put_terminal_lock(const TerminalLockRow& r) {
  stmts_.put_terminal_lock.bind(r.item_id, r.since, r.reason).run();
}

void SqliteBackend::delete_terminal_lock(std::string_view item_id) {
  stmts_.delete_terminal_lock.bind(item_id).run();
}

std::unique_ptr<Cursor<TerminalLockRow>> SqliteBackend::scan_terminal_locks() {
  auto cursor = std::make_unique<RowCursor<TerminalLockRow>>(
      db_, "SELECT item_id, since, reason FROM terminal_locks ORDER BY item_id",
      [](const Statement& s, TerminalLockRow& row) {
        row = TerminalLockRow{s.text(0), s.i64(1), s.text(2)};
      });
  cursor->bind();
  return cursor;
}

std::optional<IncidentLinkRow> SqliteBackend::find_incident(std::string_view incident_id) {
  auto& s = stmts_.find_incident.bind(incident_id);
  std::optional<IncidentLinkRow> out;
  if (s.step()) out = read_incident(s);
  s.reset();
  return out;
}

void SqliteBackend::put_incident(const IncidentLinkRow& r) {
  auto opt_text = [](const std::optional<std::string>& v) {
    return v ? OptionalText{*v, true} : OptionalText{{}, false};
  };
  stmts_.put_incident
      .bind(r.provider, r.fingerprint, r.org, r.repo, r.environment, r.target,
            opt_text(r.status),
            r.event_count ? OptionalInt{*r.event_count, true} : OptionalInt{0, false},
            opt_text(r.permalink), opt_text(r.first_seen), opt_text(r.last_seen),
            opt_text(r.linked_prs), r.incident_id, r.linked_at, r.updated_at, r.last_seq)
      .run();
}

void SqliteBackend::delete_incident(std::string_view incident_id) {
  stmts_.delete_incident.bind(incident_id).run();
}

std::unique_ptr<Cursor<IncidentLinkRow>> SqliteBackend::scan_incidents() {
  auto cursor = std::make_unique<RowCursor<IncidentLinkRow>>(
      db_, fmt::format("SELECT {} FROM incident_links ORDER BY incident_id", kIncidentColumns),
      [](const Statement& s, IncidentLinkRow& row) { row = read_incident(s); });
  cursor->bind();
  return cursor;
}

std::vector<IncidentLinkRow> SqliteBackend::incidents_for(std::string_view target) {
  Statement s(db_, fmt::format("SELECT {} FROM incident_links WHERE target = ?1 ORDER BY "
                               "incident_id",
                               kIncidentColumns)
                       .c_str());
  s.bind(target);
  std::vector<IncidentLinkRow> out;
  while (s.step()) out.push_back(read_incident(s));
  return out;
}

}  // namespace cplane::storage::sqlite
