// The metrics gauges on SQLite (cplane metrics): counts and earliest times
// of the open items, each status read from its own partial index, so that
// a scrape costs the open items, however many terminal rows the table holds.
// Reads only, inside the caller's read transaction.
#include <map>

#include "storage/sqlite/engine.hpp"

namespace cplane::storage::sqlite {

namespace {

// Grouped by project over the covering partial indexes: no row is read.
constexpr const char* kReadyByProject =
    "SELECT project_id, count(*) FROM items WHERE status = 'ready' GROUP BY project_id";
constexpr const char* kScheduledByProject =
    "SELECT project_id, count(*), coalesce(sum(run_at <= ?1), 0), min(run_at) FROM items "
    "WHERE status = 'scheduled' GROUP BY project_id";
constexpr const char* kClaimedByProject =
    "SELECT project_id, count(*), coalesce(sum(lease_expires_at <= ?1), 0), "
    "min(lease_expires_at) FROM items WHERE status = 'claimed' GROUP BY project_id";
// One seek on items_listing (project, status, queued_seq).
constexpr const char* kOldestReady =
    "SELECT queued_at FROM items WHERE project_id = ?1 AND status = 'ready' "
    "ORDER BY queued_seq LIMIT 1";
constexpr const char* kClaimedItems = "SELECT item_id FROM items WHERE status = 'claimed'";

}  // namespace

std::vector<std::string> SqliteBackend::gauge_queries() {
  return {kReadyByProject, kScheduledByProject, kClaimedByProject, kOldestReady, kClaimedItems};
}

std::vector<Backend::ProjectGauges> SqliteBackend::project_gauges(Micros now) {
  check_usable();
  std::map<std::string, ProjectGauges> by_project;
  const auto of = [&](std::string id) -> ProjectGauges& {
    auto& g = by_project[id];
    g.project_id = std::move(id);
    return g;
  };
  {
    Statement s(db_, kReadyByProject);
    s.bind();
    while (s.step()) of(s.text(0)).ready = s.i64(1);
  }
  {
    Statement s(db_, kScheduledByProject);
    s.bind(now);
    while (s.step()) {
      auto& g = of(s.text(0));
      g.scheduled = s.i64(1);
      g.due = s.i64(2);
      g.earliest_run_at = s.i64(3);
    }
  }
  {
    Statement s(db_, kClaimedByProject);
    s.bind(now);
    while (s.step()) {
      auto& g = of(s.text(0));
      g.claimed = s.i64(1);
      g.lapsed = s.i64(2);
      g.earliest_lease_end = s.i64(3);
    }
  }
  std::vector<ProjectGauges> out;
  Statement oldest(db_, kOldestReady);
  for (auto& [id, g] : by_project) {
    if (g.ready > 0) {
      oldest.bind(id);
      if (oldest.step()) g.oldest_ready_at = oldest.i64(0);
      oldest.reset();
    }
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
