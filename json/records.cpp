#include "json/records.hpp"

#include <variant>

#include <fmt/format.h>

#include "json/json_writer.hpp"

namespace cplane {

namespace {
template <class... F>
struct Overloads : F... {
  using F::operator()...;
};
template <class... F>
Overloads(F...) -> Overloads<F...>;
}  // namespace

std::string item_json(const Item& row) {
  return JsonObject()
      .str("item_id", row.item_id)
      .str("project_id", row.project_id)
      .str("status", to_string(row.status))
      .str_or_null("owner", row.owner)
      .num("fence", static_cast<std::int64_t>(row.fence))
      .num("attempts", row.attempts)
      .num_or_null("lease_expires_at", row.lease_expires_at)
      .raw("payload", json_raw_or_string(row.payload))
      .str_or_null("detail", row.detail)
      .num("queued_at", row.queued_at)
      .num("updated_at", row.updated_at)
      .num("last_seq", row.last_seq)
      .str("kind", to_string(row.kind))
      .str_or_null("ref", row.ref)
      .str_or_null("head", row.head)
      .str("review", to_string(row.review))
      .str_or_null("author", row.author)
      .str_or_null("session", row.session)
      .str_or_null("expected_head", row.expected_head)
      .raw("actions", json_strings(row.actions))
      .str_or_null("close_reason", row.close_reason)
      .num("priority", row.priority)
      .num_or_null("terminal_since", row.terminal_since)
      .str_or_null("terminal_reason", row.terminal_reason)
      .num_or_null("run_at", row.run_at)
      .num("max_attempts", row.max_attempts)
      .str_or_null("backoff", row.backoff)
      .num("attempt_limit", row.attempt_limit)
      .str_or_null("concurrency_key", row.concurrency_key)
      .str_or_null("key", row.key)
      .num("queued_seq", row.queued_seq)
      .done();
}

std::string event_json(const StoredEvent& stored) {
  const Event& e = stored.event;
  const StreamRef stream = stream_of(e);
  JsonObject o;
  o.num("seq", stored.seq)
      .str("type", type_name(e.body))
      .str("actor", e.actor)
      .num("fence", static_cast<std::int64_t>(fence_of(e.body).value_or(0)))
      .num("at", e.at)
      .str("item_id", e.item_id)
      .str("project_id", e.project_id);
  // The group-commit request that made it: 16 hex digits (64 bits do not
  // fit a JSON number exactly), or null.
  o.str_or_null("request_id", e.request_id != 0 ? fmt::format("{:016x}", e.request_id) : "");
  o.str("stream_kind", to_string(stream.kind)).str("stream_id", stream.id);
  // Every field of every kind, by its registration (events/event.hpp).
  for (const auto& field : fields_of(e.body)) {
    std::visit(Overloads{
                   [&](std::monostate) { o.raw(field.name, "null"); },
                   [&](const std::string& v) { o.str(field.name, v); },
                   [&](std::int64_t v) { o.num(field.name, v); },
                   [&](const EventField::Json& v) { o.raw(field.name, json_raw_or_string(v.text)); },
                   [&](const std::vector<std::string>& v) { o.raw(field.name, json_strings(v)); },
               },
               field.value);
  }
  return o.done();
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

}  // namespace cplane
