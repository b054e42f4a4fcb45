// The PostgreSQL engine's projected tables besides items: terminal locks,
// incident links, sessions, cron schedules, projects and their actors.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "storage/postgres/internal.hpp"
#include "storage/postgres/rows.hpp"

namespace cplane::storage::postgres {

void PostgresBackend::put_terminal_lock(const TerminalLockRow& r) {
  run("INSERT INTO terminal_locks (item_id, since, reason) VALUES ($1, $2, $3) "
      "ON CONFLICT (item_id) DO UPDATE SET since = EXCLUDED.since, reason = EXCLUDED.reason",
      Params().text(r.item_id).i64(r.since).text(r.reason));
}

void PostgresBackend::delete_terminal_lock(std::string_view item_id) {
  run("DELETE FROM terminal_locks WHERE item_id = $1", Params().text(item_id));
}

std::unique_ptr<Cursor<TerminalLockRow>> PostgresBackend::scan_terminal_locks() {
  return cursor<TerminalLockRow>(
      "SELECT item_id, since, reason FROM terminal_locks ORDER BY item_id", Params(),
      fill_terminal_lock);
}

std::optional<IncidentLinkRow> PostgresBackend::find_incident(std::string_view incident_id) {
  Result r = locking([&] {
    return run(fmt::format("SELECT {} FROM incident_links WHERE incident_id = $1{}",
                           kIncidentColumns, lock()),
               Params().text(incident_id));
  });
  if (r.rows() == 0) return std::nullopt;
  return read_incident(r, 0);
}

void PostgresBackend::put_incident(const IncidentLinkRow& r) {
  run(fmt::format(
          "INSERT INTO incident_links ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
          "$12, $13, $14, $15, $16) ON CONFLICT (incident_id) DO UPDATE SET "
          "provider = EXCLUDED.provider, fingerprint = EXCLUDED.fingerprint, org = EXCLUDED.org, "
          "repo = EXCLUDED.repo, environment = EXCLUDED.environment, target = EXCLUDED.target, "
          "status = EXCLUDED.status, event_count = EXCLUDED.event_count, "
          "permalink = EXCLUDED.permalink, first_seen = EXCLUDED.first_seen, "
          "last_seen = EXCLUDED.last_seen, linked_prs = EXCLUDED.linked_prs, "
          "linked_at = EXCLUDED.linked_at, updated_at = EXCLUDED.updated_at, "
          "last_seq = EXCLUDED.last_seq",
          kIncidentColumns),
      Params()
          .text(r.provider)
          .text(r.fingerprint)
          .text(r.org)
          .text(r.repo)
          .text(r.environment)
          .text(r.target)
          .opt(r.status)
          .opt(r.event_count)
          .opt(r.permalink)
          .opt(r.first_seen)
          .opt(r.last_seen)
          .opt(r.linked_prs)
          .text(r.incident_id)
          .i64(r.linked_at)
          .i64(r.updated_at)
          .i64(r.last_seq));
}

void PostgresBackend::delete_incident(std::string_view incident_id) {
  run("DELETE FROM incident_links WHERE incident_id = $1", Params().text(incident_id));
}

std::unique_ptr<Cursor<IncidentLinkRow>> PostgresBackend::scan_incidents() {
  return cursor<IncidentLinkRow>(
      fmt::format("SELECT {} FROM incident_links ORDER BY incident_id", kIncidentColumns),
      Params(), [](const Result& r, int i, IncidentLinkRow& row) { row = read_incident(r, i); });
}

std::vector<IncidentLinkRow> PostgresBackend::incidents_for(std::string_view target) {
  Result r = run(fmt::format("SELECT {} FROM incident_links WHERE target = $1 ORDER BY "
                             "incident_id",
                             kIncidentColumns),
                 Params().text(target));
  std::vector<IncidentLinkRow> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_incident(r, i));
  return out;
}

std::optional<SessionRow> PostgresBackend::find_session(std::string_view session_id) {
  Result r = locking([&] {
    return run(fmt::format("SELECT {} FROM sessions WHERE session_id = $1{}", kSessionColumns,
                           lock()),
               Params().text(session_id));
  });
  if (r.rows() == 0) return std::nullopt;
  return read_session(r, 0);
}

void PostgresBackend::put_session(const SessionRow& r) {
  run(fmt::format("INSERT INTO sessions ({}) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT "
                  "(session_id) DO UPDATE SET actor = EXCLUDED.actor, opened_at = "
                  "EXCLUDED.opened_at, last_seen_at = EXCLUDED.last_seen_at, closed_at = "
                  "EXCLUDED.closed_at, last_seq = EXCLUDED.last_seq",
                  kSessionColumns),
      Params()
          .text(r.session_id)
          .text_or_null(r.actor)
          .i64(r.opened_at)
          .i64(r.last_seen_at)
          .i64_or_null(r.closed_at)
          .i64(r.last_seq));
}

void PostgresBackend::delete_session(std::string_view session_id) {
  run("DELETE FROM sessions WHERE session_id = $1", Params().text(session_id));
}

std::vector<ItemRow> PostgresBackend::session_items(std::string_view session_id) {
  Result r = locking([&] {
    return run(fmt::format("SELECT {} FROM items WHERE session = $1 AND status = 'claimed' "
                           "ORDER BY item_id{}",
                           kItemColumns, lock()),
               Params().text(session_id));
  });
  std::vector<ItemRow> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_item(r, i));
  return out;
}

std::unique_ptr<Cursor<SessionRow>> PostgresBackend::scan_sessions() {
  return cursor<SessionRow>(
      fmt::format("SELECT {} FROM sessions ORDER BY session_id", kSessionColumns), Params(),
      [](const Result& r, int i, SessionRow& row) { row = read_session(r, i); });
}

std::optional<ScheduleRow> PostgresBackend::find_schedule(std::string_view name) {
  Result r = run(fmt::format("SELECT {} FROM schedules WHERE name = $1{}", kScheduleColumns,
                             lock()),
                 Params().text(name));
  if (r.rows() == 0) return std::nullopt;
  return read_schedule(r, 0);
}

void PostgresBackend::put_schedule(const ScheduleRow& s) {
  earliest_schedule_.reset();
  run(fmt::format("INSERT INTO schedules ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
                  "$11, $12, $13, $14, $15, $16) ON CONFLICT (name) DO UPDATE SET project_id = "
                  "EXCLUDED.project_id, cron = EXCLUDED.cron, zone = EXCLUDED.zone, payload = "
                  "EXCLUDED.payload, overlap_skip = EXCLUDED.overlap_skip, catch_up = "
                  "EXCLUDED.catch_up, next_at = EXCLUDED.next_at, paused = EXCLUDED.paused, "
                  "removed = EXCLUDED.removed, last_item = EXCLUDED.last_item, "
                  "last_occurrence = EXCLUDED.last_occurrence, fired = EXCLUDED.fired, "
                  "created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, "
                  "last_seq = EXCLUDED.last_seq",
                  kScheduleColumns),
      Params()
          .text(s.name)
          .text(s.project_id)
          .text(s.cron)
          .text(s.zone)
          .text(s.payload)
          .text(s.overlap_skip ? "true" : "false")
          .i64(s.catch_up)
          .i64(s.next_at)
          .text(s.paused ? "true" : "false")
          .text(s.removed ? "true" : "false")
          .text_or_null(s.last_item)
          .i64(s.last_occurrence)
          .i64(s.fired)
          .i64(s.created_at)
          .i64(s.updated_at)
          .i64(s.last_seq));
}

void PostgresBackend::delete_schedule(std::string_view name) {
  earliest_schedule_.reset();
  run("DELETE FROM schedules WHERE name = $1", Params().text(name));
}

std::unique_ptr<Cursor<ScheduleRow>> PostgresBackend::scan_schedules() {
  return cursor<ScheduleRow>(
      fmt::format("SELECT {} FROM schedules ORDER BY name", kScheduleColumns), Params(),
      [](const Result& r, int i, ScheduleRow& row) { row = read_schedule(r, i); });
}

std::vector<ScheduleRow> PostgresBackend::due_schedules(Micros now, std::size_t limit) {
  // None was due when this transaction began, and it wrote none since.
  if (earliest_schedule_ && (!earliest_schedule_->next_at || *earliest_schedule_->next_at > now)) {
    return {};
  }
  Result r = run(fmt::format("SELECT {} FROM schedules WHERE NOT paused AND NOT removed AND "
                             "next_at <= $1 ORDER BY next_at LIMIT $2{}",
                             kScheduleColumns, claim_lock()),
                 Params().i64(now).i64(static_cast<std::int64_t>(limit)));
  std::vector<ScheduleRow> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_schedule(r, i));
  return out;
}

std::optional<ProjectRow> PostgresBackend::find_project(std::string_view project_id) {
  Result r = run(fmt::format("SELECT {} FROM projects WHERE project_id = $1", kProjectColumns),
                 Params().text(project_id));
  if (r.rows() == 0) return std::nullopt;
  return read_project(r, 0);
}

std::optional<ProjectRow> PostgresBackend::lock_project(std::string_view project_id) {
  Result r = locking(
      [&] {
        return run(fmt::format("SELECT {} FROM projects WHERE project_id = $1{}", kProjectColumns,
                               lock()),
                   Params().text(project_id));
      },
      kStaleClockForProject);
  if (r.rows() == 0) return std::nullopt;
  return read_project(r, 0);
}

void PostgresBackend::put_project(const ProjectRow& r) {
  run(fmt::format("INSERT INTO projects ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
                  "$11) ON CONFLICT (project_id) DO UPDATE SET title = EXCLUDED.title, status = "
                  "EXCLUDED.status, created_at = EXCLUDED.created_at, last_seq = "
                  "EXCLUDED.last_seq, max_attempts = EXCLUDED.max_attempts, backoff = "
                  "EXCLUDED.backoff, paused = EXCLUDED.paused, pause_reason = "
                  "EXCLUDED.pause_reason, weight = EXCLUDED.weight, fair_pass = "
                  "EXCLUDED.fair_pass",
                  kProjectColumns),
      Params()
          .text(r.project_id)
          .text(r.title)
          .text(r.status)
          .i64(r.created_at)
          .i64(r.last_seq)
          .i64(r.max_attempts)
          .text(r.backoff)
          .text(r.paused ? "true" : "false")
          .text(r.pause_reason)
          .i64(r.weight)
          .i64(r.fair_pass));
}

void PostgresBackend::delete_project(std::string_view project_id) {
  run("DELETE FROM projects WHERE project_id = $1", Params().text(project_id));
}

bool PostgresBackend::is_assigned(std::string_view project_id, std::string_view actor) {
  return run("SELECT 1 FROM project_actors WHERE project_id = $1 AND actor = $2",
             Params().text(project_id).text(actor))
             .rows() > 0;
}

void PostgresBackend::put_assignment(const ProjectActorRow& r) {
  run("INSERT INTO project_actors (project_id, actor, assigned_at, last_seq) VALUES "
      "($1, $2, $3, $4) ON CONFLICT (project_id, actor) DO UPDATE SET assigned_at = "
      "EXCLUDED.assigned_at, last_seq = EXCLUDED.last_seq",
      Params().text(r.project_id).text(r.actor).i64(r.assigned_at).i64(r.last_seq));
}

void PostgresBackend::delete_assignment(std::string_view project_id, std::string_view actor) {
  run("DELETE FROM project_actors WHERE project_id = $1 AND actor = $2",
      Params().text(project_id).text(actor));
}

std::vector<std::string> PostgresBackend::project_ids(const std::string* actor) {
  Result r = actor == nullptr
                 ? run("SELECT project_id FROM projects ORDER BY project_id")
                 : run("SELECT project_id FROM project_actors WHERE actor = $1 ORDER BY project_id",
                       Params().text(*actor));
  std::vector<std::string> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
  return out;
}

std::vector<ProjectRow> PostgresBackend::all_projects() {
  Result r = run(fmt::format("SELECT {} FROM projects ORDER BY project_id", kProjectColumns));
  std::vector<ProjectRow> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_project(r, i));
  return out;
}

std::vector<ProjectActorRow> PostgresBackend::all_assignments() {
  Result r = run("SELECT project_id, actor, assigned_at, last_seq FROM project_actors "
                 "ORDER BY project_id, actor");
  std::vector<ProjectActorRow> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back(ProjectActorRow{r.text(i, 0), r.text(i, 1), r.i64(i, 2), r.i64(i, 3)});
  }
  return out;
}

std::array<std::int64_t, kItemStatuses + 1> PostgresBackend::status_counts(
    const std::string* project_id) {
  Result r = project_id == nullptr
                 ? run("SELECT status, count(*) FROM items GROUP BY status")
                 : run("SELECT status, count(*) FROM items WHERE project_id = $1 GROUP BY status",
                       Params().text(*project_id));
  std::array<std::int64_t, kItemStatuses + 1> out{};
  for (int i = 0; i < r.rows(); ++i) {
    if (auto status = parse_item_status(r.text(i, 0))) {
      out[static_cast<int>(*status)] = r.i64(i, 1);
    } else {
      out[kItemStatuses] += r.i64(i, 1);
    }
  }
  return out;
}

}  // namespace cplane::storage::postgres
