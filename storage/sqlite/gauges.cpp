// The metrics gauges on SQLite (cplane metrics): counts and earliest times
// of the open items, project by project, each an index range that reads
// the open items only, however many terminal rows the table holds. Reads
// only, inside the caller's read transaction.
//
// SQLite 3.40 does not take a partial index as covering when the query
// names the column of its condition (status), so a count over items_ready
// would read every ready row. The counts therefore walk items_listing
// (project_id, status, queued_seq), which covers them: one range per open
// status. The partial indexes answer what needs their order: items_due the
// scheduled items whose time has come, items_lease the lapsed leases (both
// ranges that end at `now`, reading only those rows), each with its
// earliest time.
#include "storage/sqlite/engine.hpp"

namespace cplane::storage::sqlite {

namespace {

// items_listing keys status COLLATE NOCASE (schema.cpp says why): the
// statements name that collation to use it.
constexpr const char* kOpenCounts =
    "SELECT status COLLATE NOCASE, count(*) FROM items WHERE project_id = ?1 AND status COLLATE "
    "NOCASE IN ('ready', 'scheduled', 'claimed') GROUP BY status COLLATE NOCASE";
constexpr const char* kDue =
    "SELECT count(*), coalesce(min(run_at), 0) FROM items INDEXED BY items_due "
    "WHERE project_id = ?1 AND status = 'scheduled' AND run_at <= ?2";
constexpr const char* kLapsed =
    "SELECT count(*), coalesce(min(lease_expires_at), 0) FROM items INDEXED BY items_lease "
    "WHERE project_id = ?1 AND status = 'claimed' AND lease_expires_at <= ?2";
constexpr const char* kOldestReady =
    "SELECT queued_at FROM items INDEXED BY items_listing WHERE project_id = ?1 AND "
    "status = 'ready' COLLATE NOCASE ORDER BY queued_seq LIMIT 1";
constexpr const char* kClaimedItems =
    "SELECT item_id FROM items INDEXED BY items_listing_all WHERE status = 'claimed' COLLATE "
    "NOCASE";

}  // namespace

std::vector<std::string> SqliteBackend::gauge_queries() {
  return {kOpenCounts, kDue, kLapsed, kOldestReady, kClaimedItems};
}

std::vector<Backend::ProjectGauges> SqliteBackend::project_gauges(Micros now) {
  check_usable();
  Statement counts(db_, kOpenCounts);
  Statement due(db_, kDue);
  Statement lapsed(db_, kLapsed);
  Statement oldest(db_, kOldestReady);
  std::vector<ProjectGauges> out;
  for (auto& project : project_ids(nullptr)) {
    ProjectGauges g;
    counts.bind(project);
    while (counts.step()) {
      const auto status = parse_item_status(counts.text(0));
      if (status == ItemStatus::ready) g.ready = counts.i64(1);
      if (status == ItemStatus::scheduled) g.scheduled = counts.i64(1);
      if (status == ItemStatus::claimed) g.claimed = counts.i64(1);
    }
    if (g.ready + g.scheduled + g.claimed == 0) continue;
    if (g.scheduled > 0) {
      due.bind(project, now);
      if (due.step()) {
        g.due = due.i64(0);
        g.earliest_due = due.i64(1);
      }
      due.reset();
    }
    if (g.claimed > 0) {
      lapsed.bind(project, now);
      if (lapsed.step()) {
        g.lapsed = lapsed.i64(0);
        g.earliest_lapse = lapsed.i64(1);
      }
      lapsed.reset();
    }
    if (g.ready > 0) {
      oldest.bind(project);
      if (oldest.step()) g.oldest_ready_at = oldest.i64(0);
      oldest.reset();
    }
    g.project_id = std::move(project);
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<std::string> SqliteBackend::claimed_items() {
  check_usable();
  Statement s(db_, kClaimedItems);
  s.bind();
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

}  // namespace cplane::storage::sqlite
