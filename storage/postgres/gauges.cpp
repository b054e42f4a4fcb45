// The metrics gauges on PostgreSQL (cplane metrics): counts and earliest
// times of the open items, each status read from its own partial index
// (items_ready, items_due, items_lease), and the oldest ready item of each
// project by one seek on items_listing. Reads only, inside the caller's
// read transaction (one snapshot).
#include <map>

#include "storage/postgres/internal.hpp"

namespace cplane::storage::postgres {

std::vector<Backend::ProjectGauges> PostgresBackend::project_gauges(Micros now) {
  std::map<std::string, ProjectGauges> by_project;
  const auto of = [&](std::string id) -> ProjectGauges& {
    auto& g = by_project[id];
    g.project_id = std::move(id);
    return g;
  };
  Result ready = run(
      "SELECT r.project_id, count(*), (SELECT o.queued_at FROM items o WHERE o.project_id = "
      "r.project_id AND o.status = 'ready' ORDER BY o.queued_seq LIMIT 1) FROM items r "
      "WHERE r.status = 'ready' GROUP BY r.project_id");
  for (int i = 0; i < ready.rows(); ++i) {
    auto& g = of(ready.text(i, 0));
    g.ready = ready.i64(i, 1);
    g.oldest_ready_at = ready.i64(i, 2);
  }
  Result scheduled = run(
      "SELECT project_id, count(*), count(*) FILTER (WHERE run_at <= $1), "
      "min(run_at) FILTER (WHERE run_at <= $1) FROM items "
      "WHERE status = 'scheduled' GROUP BY project_id",
      Params().i64(now));
  for (int i = 0; i < scheduled.rows(); ++i) {
    auto& g = of(scheduled.text(i, 0));
    g.scheduled = scheduled.i64(i, 1);
    g.due = scheduled.i64(i, 2);
    g.earliest_due = scheduled.i64(i, 3);
  }
  Result claimed = run(
      "SELECT project_id, count(*), count(*) FILTER (WHERE lease_expires_at <= $1), "
      "min(lease_expires_at) FILTER (WHERE lease_expires_at <= $1) FROM items "
      "WHERE status = 'claimed' GROUP BY project_id",
      Params().i64(now));
  for (int i = 0; i < claimed.rows(); ++i) {
    auto& g = of(claimed.text(i, 0));
    g.claimed = claimed.i64(i, 1);
    g.lapsed = claimed.i64(i, 2);
    g.earliest_lapse = claimed.i64(i, 3);
  }
  std::vector<ProjectGauges> out;
  for (auto& entry : by_project) out.push_back(std::move(entry.second));
  return out;
}

std::vector<std::string> PostgresBackend::claimed_items() {
  Result r = run("SELECT item_id FROM items WHERE status = 'claimed'");
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
  return out;
}

}  // namespace cplane::storage::postgres
