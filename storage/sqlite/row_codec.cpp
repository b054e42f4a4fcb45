#include "storage/sqlite/row_codec.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "events/json.hpp"
#include "storage/stored_text.hpp"

namespace cplane::storage::sqlite {

void fill_item(const Statement& s, ScannedItem& scanned) {
  ItemRow& row = scanned.row;
  s.text_into(0, row.item_id);
  s.text_into(1, row.project_id);
  s.text_into(2, row.payload);
  scanned.invalid_status = read_stored(s.text(3), parse_item_status, row.status);
  s.text_into(4, row.owner);
  row.fence = static_cast<Fence>(s.i64(5));
  row.attempts = static_cast<std::uint32_t>(s.i64(6));
  row.lease_expires_at = s.i64(7);
  s.text_into(8, row.detail);
  row.queued_seq = s.i64(9);
  row.queued_at = s.i64(10);
  row.updated_at = s.i64(11);
  row.last_seq = s.i64(12);
  scanned.invalid_kind = read_stored(s.text(13), parse_work_kind_text, row.kind);
  s.text_into(14, row.ref);
  s.text_into(15, row.head);
  scanned.invalid_review = read_stored(s.text(16), parse_review_text, row.review);
  s.text_into(17, row.author);
  s.text_into(18, row.session);
  std::string actions;
  s.text_into(19, actions);
  row.actions = split_list(actions);  // "a,b," reads back as three: verify names it
  s.text_into(20, row.expected_head);
  s.text_into(21, row.close_reason);
  row.head_moved = s.i64(22) != 0;
  scanned.invalid_routing.clear();
  const std::int64_t priority = s.i64(23);
  if (s.type(23) != SQLITE_INTEGER || priority < std::numeric_limits<std::int32_t>::min() ||
      priority > std::numeric_limits<std::int32_t>::max()) {
    scanned.invalid_routing = fmt::format("priority '{}'", s.text(23));
  }
  row.priority = static_cast<std::int32_t>(priority);
  const int since_type = s.type(24);
  row.terminal_since = s.i64(24);
  if (since_type != SQLITE_NULL && (since_type != SQLITE_INTEGER || row.terminal_since == 0) &&
      scanned.invalid_routing.empty()) {
    scanned.invalid_routing = fmt::format("terminal_since '{}'", s.text(24));
  }
  s.text_into(25, row.terminal_reason);
  s.text_into(26, row.key);
  row.max_attempts = static_cast<std::uint32_t>(s.i64(27));
  s.text_into(28, row.backoff);
  row.attempt_limit = static_cast<std::uint32_t>(s.i64(29));
  row.run_at = s.i64(30);
  row.ended_fence = static_cast<Fence>(s.i64(31));
  s.text_into(32, row.concurrency_key);
}

ItemRow read_item(const Statement& s) {
  ScannedItem scanned;
  fill_item(s, scanned);
  return decidable(std::move(scanned));
}

void fill_event(const Statement& s, RawEvent& e) {
  // A column stored with another type than cplane writes (only an edit does
  // that) reads back converted, and could pass for the body's value: name
  // it. (Checked before any read: a read converts the value in place.)
  e.bad_column.clear();
  static constexpr struct {
    int col;
    const char* name;
    int type;
    bool nullable;
  } kTypes[] = {{0, "seq", SQLITE_INTEGER, false},        {1, "stream_kind", SQLITE_TEXT, false},
                {2, "stream_id", SQLITE_TEXT, false},     {3, "item_id", SQLITE_TEXT, true},
                {4, "project_id", SQLITE_TEXT, false},    {5, "type", SQLITE_TEXT, false},
                {6, "at", SQLITE_INTEGER, false},         {7, "body", SQLITE_BLOB, false},
                {8, "stream_rev", SQLITE_INTEGER, false}, {9, "hash", SQLITE_BLOB, true}};
  static constexpr const char* kNames[] = {"", "INTEGER", "REAL", "TEXT", "BLOB", "NULL"};
  for (const auto& t : kTypes) {
    const int stored = s.type(t.col);
    if (stored == t.type || (t.nullable && stored == SQLITE_NULL)) continue;
    e.bad_column = fmt::format("column {} is stored as {}, not {}", t.name, kNames[stored],
                               kNames[t.type]);
    break;
  }
  e.seq = s.i64(0);
  s.text_into(1, e.stream_kind);
  s.text_into(2, e.stream_id);
  s.text_into(3, e.item_id);
  s.text_into(4, e.project_id);
  s.text_into(5, e.type);
  e.at = s.i64(6);
  s.blob_into(7, e.body);
  e.revision = s.i64(8);
  s.blob_into(9, e.hash);
}

RawEvent read_event(const Statement& s) {
  RawEvent e;
  fill_event(s, e);
  return e;
}

IncidentLinkRow read_incident(const Statement& s) {
  IncidentLinkRow r;
  r.provider = s.text(0);
  r.fingerprint = s.text(1);
  r.org = s.text(2);
  r.repo = s.text(3);
  r.environment = s.text(4);
  r.target = s.text(5);
  auto opt = [&](int col) -> std::optional<std::string> {
    if (s.type(col) == SQLITE_NULL) return std::nullopt;
    return s.text(col);
  };
  r.status = opt(6);
  if (s.type(7) != SQLITE_NULL) r.event_count = s.i64(7);
  r.permalink = opt(8);
  r.first_seen = opt(9);
  r.last_seen = opt(10);
  r.linked_prs = opt(11);
  r.incident_id = s.text(12);
  r.linked_at = s.i64(13);
  r.updated_at = s.i64(14);
  r.last_seq = s.i64(15);
  return r;
}

SessionRow read_session(const Statement& s) {
  return SessionRow{s.text(0), s.text(1), s.i64(2), s.i64(3), s.i64(4), s.i64(5)};
}

void fill_schedule(const Statement& s, ScheduleRow& row) {
  row = ScheduleRow{};
  s.text_into(0, row.name);
  s.text_into(1, row.project_id);
  s.text_into(2, row.cron);
  s.text_into(3, row.zone);
  s.text_into(4, row.payload);
  row.overlap_skip = s.i64(5) != 0;
  row.catch_up = s.i64(6);
  row.next_at = s.i64(7);
  row.paused = s.i64(8) != 0;
  row.removed = s.i64(9) != 0;
  s.text_into(10, row.last_item);
  row.last_occurrence = s.i64(11);
  row.fired = s.i64(12);
  row.created_at = s.i64(13);
  row.updated_at = s.i64(14);
  row.last_seq = s.i64(15);
}

ProjectRow read_project(const Statement& s) {
  return ProjectRow{s.text(0),
                    s.text(1),
                    s.text(2),
                    s.i64(3),
                    s.i64(4),
                    static_cast<std::uint32_t>(s.i64(5)),
                    s.text(6),
                    s.i64(7) != 0,
                    s.text(8),
                    static_cast<std::uint32_t>(s.i64(9)),
                    s.i64(10)};
}

LimitRow read_limit(const Statement& s) {
  LimitRow row;
  row.key = s.text(0);
  row.concurrency = static_cast<std::uint32_t>(s.i64(1));
  row.rate_count = static_cast<std::uint32_t>(s.i64(2));
  row.rate_period = s.i64(3);
  row.burst = static_cast<std::uint32_t>(s.i64(4));
  row.tat = s.i64(5);
  row.removed = s.i64(6) != 0;
  row.created_at = s.i64(7);
  row.updated_at = s.i64(8);
  row.last_seq = s.i64(9);
  return row;
}

Statement& bind_item(Statement& s, const ItemRow& r) {
  const std::string actions = join_list(r.actions);
  return s.bind(r.item_id, r.project_id, r.payload, to_string(r.status), NullIfEmpty{r.owner},
                r.fence, r.attempts, NullIfZero{r.lease_expires_at}, NullIfEmpty{r.detail},
                r.queued_seq, r.queued_at, r.updated_at, r.last_seq, to_string(r.kind),
                NullIfEmpty{r.ref}, NullIfEmpty{r.head}, to_string(r.review),
                NullIfEmpty{r.author}, NullIfEmpty{r.session}, NullIfEmpty{actions},
                NullIfEmpty{r.expected_head}, NullIfEmpty{r.close_reason},
                static_cast<std::int64_t>(r.head_moved ? 1 : 0),
                static_cast<std::int64_t>(r.priority), NullIfZero{r.terminal_since},
                NullIfEmpty{r.terminal_reason}, NullIfEmpty{r.key},
                static_cast<std::int64_t>(r.max_attempts), NullIfEmpty{r.backoff},
                static_cast<std::int64_t>(r.attempt_limit), NullIfZero{r.run_at},
                r.ended_fence, r.concurrency_key);
}


}  // namespace cplane::storage::sqlite
