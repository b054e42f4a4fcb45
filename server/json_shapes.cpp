// The /api shapes: the CLI's --json, field for field (see json_shapes.hpp).
#include "server/json_shapes.hpp"

#include <fmt/format.h>

#include "json/json_writer.hpp"

namespace cplane::server {

std::string json_array(const std::vector<std::string>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += values[i];
  }
  return out + "]";
}

std::string session_json(const SessionInfo& info) {
  const SessionRow& row = info.row;
  return JsonObject()
      .str("session", row.session_id)
      .str_or_null("actor", row.actor)
      .num("opened_at", row.opened_at)
      .num("last_seen_at", row.last_seen_at)
      .num_or_null("closed_at", row.closed_at)
      .raw("items", json_strings(info.items))
      .done();
}

std::string project_json(const ProjectRow& p) {
  return JsonObject()
      .str("project_id", p.project_id)
      .str("title", p.title)
      .str("status", p.status)
      .num("created_at", p.created_at)
      .num("max_attempts", p.max_attempts)
      .str("backoff", p.backoff.empty() ? "none" : p.backoff)
      .boolean("paused", p.paused)
      .str_or_null("pause_reason", p.pause_reason)
      .num("weight", p.weight)
      .done();
}

std::string counts_json(const ControlStore::StatusCounts& c) {
  return JsonObject()
      .num("ready", c.ready)
      .num("claimed", c.claimed)
      .num("done", c.done)
      .num("failed", c.failed)
      .num("closed", c.closed)
      .num("scheduled", c.scheduled)
      .num("cancelled", c.cancelled)
      .done();
}

std::string problem_json(const LedgerProblem& p) {
  return JsonObject()
      .str("kind", to_string(p.kind))
      .str_or_null("item_id", p.item_id)
      .str_or_null("project_id", p.project_id)
      .str("detail", p.detail)
      .done();
}

std::string activity_json(const ActivityMinute& m) {
  return JsonObject()
      .num("start", m.start)
      .num("enqueued", m.enqueued)
      .num("claimed", m.claimed)
      .num("done", m.done)
      .num("failed", m.failed)
      .num("max_wait", m.max_wait)
      .done();
}

}  // namespace cplane::server
