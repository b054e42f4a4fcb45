// GET /api/... and /metrics: each one store read (one snapshot), its JSON
// the CLI's --json (server/json_shapes.hpp).
#include <charconv>

#include <fmt/format.h>

#include <cplane/verify.hpp>

#include "json/json_writer.hpp"
#include "server/json_shapes.hpp"
#include "server/router.hpp"

namespace cplane::server {

namespace {

Response json(std::string body) { return {200, "application/json", std::move(body) + "\n", {}}; }

}  // namespace

Response api_overview(Console& console, const Request&) {
  ControlStore& store = console.store();
  std::vector<std::string> projects;
  for (const auto& id : store.visible_projects()) {
    projects.push_back(JsonObject()
                           .str("project_id", id)
                           .raw("counts", counts_json(store.status_counts(id)))
                           .done());
  }
  std::vector<std::string> minutes;
  for (const auto& m : console.activity()) {
    minutes.push_back(activity_json(m));
  }
  return json(JsonObject()
                  .raw("counts", counts_json(store.status_counts()))
                  .raw("projects", json_array(projects))
                  .raw("activity", json_array(minutes))
                  .done());
}

Response api_items(Console& console, const Request& request) {
  const auto page = console.store().list_items(item_query(request));
  std::vector<std::string> items;
  for (const auto& row : page.items) items.push_back(item_json(row));
  return json(JsonObject()
                  .raw("items", json_array(items))
                  .str_or_null("next", page.next.value_or(""))
                  .done());
}

Response api_item(Console& console, const std::string& item_id) {
  return json(item_json(console.store().item(item_id)));
}

Response api_item_events(Console& console, const std::string& item_id) {
  std::vector<std::string> events;
  for (const auto& e : console.store().events(item_id)) events.push_back(event_json(e));
  return json(json_array(events));
}

Response api_sessions(Console& console) {
  std::vector<std::string> sessions;
  for (const auto& s : console.store().sessions(console.now())) sessions.push_back(session_json(s));
  return json(json_array(sessions));
}

Response api_projects(Console& console) {
  ControlStore& store = console.store();
  std::vector<std::string> projects;
  for (const auto& id : store.visible_projects()) projects.push_back(project_json(store.project(id)));
  return json(json_array(projects));
}

Response api_verify(Console& console) {
  std::vector<std::string> problems;
  for (const auto& p : verify_ledger(console.store())) problems.push_back(problem_json(p));
  return json(json_array(problems));
}

Response api_log(Console& console, const Request& request) {
  ControlStore::LogQuery q;
  q.max = 100;
  const auto number = [&](const char* name, std::int64_t low, std::int64_t high) {
    const auto text = request.param(name);
    if (!text) return std::optional<std::int64_t>{};
    std::int64_t value = 0;
    const char* end = text->data() + text->size();
    auto [p, ec] = std::from_chars(text->data(), end, value);
    if (text->empty() || ec != std::errc() || p != end || value < low || value > high) {
      refuse(400, "invalid_argument", "invalid_input",
             fmt::format("{}: {:?} is not a whole number from {} to {}", name, *text, low, high));
    }
    return std::optional<std::int64_t>{value};
  };
  if (auto after = number("after", 0, std::numeric_limits<std::int64_t>::max())) q.after = *after;
  if (auto max = number("max", 1, 1000)) q.max = static_cast<std::size_t>(*max);
  if (auto types = request.param("type"); types && !types->empty()) {
    std::size_t at = 0;
    while (at <= types->size()) {
      const std::size_t comma = std::min(types->find(',', at), types->size());
      q.types.push_back(types->substr(at, comma - at));
      at = comma + 1;
    }
  }
  if (auto stream = request.param("stream"); stream && !stream->empty()) {
    const std::size_t colon = stream->find(':');
    const auto kind = parse_stream_kind(stream->substr(0, colon));
    if (colon == std::string::npos || !kind || colon + 1 == stream->size()) {
      refuse(400, "invalid_argument", "invalid_input",
             fmt::format("stream: {:?} is not KIND:ID (item, project, session, incident, "
                         "schedule, limit)",
                         *stream));
    }
    q.stream = StreamRef{*kind, stream->substr(colon + 1)};
  }
  const auto page = console.store().read_log(q);
  std::vector<std::string> events;
  for (const auto& e : page.events) events.push_back(event_json(e));
  return json(JsonObject().raw("events", json_array(events)).num("next", page.next).done());
}

Response metrics_text(Console& console) {
  return {200, std::string(kPrometheusContentType), console.metrics().scrape(console.now()), {}};
}

}  // namespace cplane::server
