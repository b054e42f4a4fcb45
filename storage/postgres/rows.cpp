// How the engine reads its rows from a result and writes an item row as
// parameters (rows.hpp).
#include "storage/postgres/rows.hpp"

#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "events/errors.hpp"
#include "events/json.hpp"
#include "storage/stored_text.hpp"

namespace cplane::storage::postgres {

void fill_item(const Result& r, int i, ScannedItem& scanned) {
  ItemRow& row = scanned.row;
  row = ItemRow{};
  row.item_id = r.text(i, 0);
  row.project_id = r.text(i, 1);
  row.payload = r.text(i, 2);
  scanned.invalid_status = read_stored(r.text(i, 3), parse_item_status, row.status);
  row.owner = r.text(i, 4);
  row.fence = static_cast<Fence>(r.i64(i, 5));
  row.attempts = static_cast<std::uint32_t>(r.i64(i, 6));
  row.lease_expires_at = r.i64(i, 7);
  row.detail = r.text(i, 8);
  row.queued_seq = r.i64(i, 9);
  row.queued_at = r.i64(i, 10);
  row.updated_at = r.i64(i, 11);
  row.last_seq = r.i64(i, 12);
  scanned.invalid_kind = read_stored(r.text(i, 13), parse_work_kind_text, row.kind);
  row.ref = r.text(i, 14);
  row.head = r.text(i, 15);
  scanned.invalid_review = read_stored(r.text(i, 16), parse_review_text, row.review);
  row.author = r.text(i, 17);
  row.session = r.text(i, 18);
  row.actions = split_list(r.text(i, 19));
  row.expected_head = r.text(i, 20);
  row.close_reason = r.text(i, 21);
  row.head_moved = r.i64(i, 22) != 0;
  row.priority = static_cast<std::int32_t>(r.i64(i, 23));
  row.terminal_since = r.i64(i, 24);
  scanned.invalid_routing.clear();
  if (!r.null(i, 24) && row.terminal_since == 0) scanned.invalid_routing = "terminal_since '0'";
  row.terminal_reason = r.text(i, 25);
  row.key = r.text(i, 26);
  row.max_attempts = static_cast<std::uint32_t>(r.i64(i, 27));
  row.backoff = r.text(i, 28);
  row.attempt_limit = static_cast<std::uint32_t>(r.i64(i, 29));
  row.run_at = r.i64(i, 30);
  row.ended_fence = static_cast<Fence>(r.i64(i, 31));
  row.concurrency_key = r.text(i, 32);
}

ItemRow read_item(const Result& r, int i) {
  ScannedItem scanned;
  fill_item(r, i, scanned);
  return decidable(std::move(scanned));
}

void fill_event(const Result& r, int i, RawEvent& e) {
  e.bad_column.clear();
  e.seq = r.i64(i, 0);
  e.stream_kind = r.text(i, 1);
  e.stream_id = r.text(i, 2);
  e.item_id = r.text(i, 3);
  e.project_id = r.text(i, 4);
  e.type = r.text(i, 5);
  e.at = r.i64(i, 6);
  e.body = r.bytes(i, 7);
  e.revision = r.i64(i, 8);
  e.hash = r.bytes(i, 9);
}

void fill_head(const Result& r, int i, StreamHead& h) {
  h.stream_kind = r.text(i, 0);
  h.stream_id = r.text(i, 1);
  h.revision = r.i64(i, 2);
  h.last_seq = r.i64(i, 3);
  h.hash = r.bytes(i, 4);
}

IncidentLinkRow read_incident(const Result& r, int i) {
  IncidentLinkRow row;
  row.provider = r.text(i, 0);
  row.fingerprint = r.text(i, 1);
  row.org = r.text(i, 2);
  row.repo = r.text(i, 3);
  row.environment = r.text(i, 4);
  row.target = r.text(i, 5);
  auto opt = [&](int col) -> std::optional<std::string> {
    if (r.null(i, col)) return std::nullopt;
    return r.text(i, col);
  };
  row.status = opt(6);
  if (!r.null(i, 7)) row.event_count = r.i64(i, 7);
  row.permalink = opt(8);
  row.first_seen = opt(9);
  row.last_seen = opt(10);
  row.linked_prs = opt(11);
  row.incident_id = r.text(i, 12);
  row.linked_at = r.i64(i, 13);
  row.updated_at = r.i64(i, 14);
  row.last_seq = r.i64(i, 15);
  return row;
}

SessionRow read_session(const Result& r, int i) {
  return SessionRow{r.text(i, 0), r.text(i, 1), r.i64(i, 2), r.i64(i, 3), r.i64(i, 4), r.i64(i, 5)};
}

ScheduleRow read_schedule(const Result& r, int i) {
  ScheduleRow row;
  row.name = r.text(i, 0);
  row.project_id = r.text(i, 1);
  row.cron = r.text(i, 2);
  row.zone = r.text(i, 3);
  row.payload = r.text(i, 4);
  row.overlap_skip = r.text(i, 5) == "t";
  row.catch_up = r.i64(i, 6);
  row.next_at = r.i64(i, 7);
  row.paused = r.text(i, 8) == "t";
  row.removed = r.text(i, 9) == "t";
  row.last_item = r.text(i, 10);
  row.last_occurrence = r.i64(i, 11);
  row.fired = r.i64(i, 12);
  row.created_at = r.i64(i, 13);
  row.updated_at = r.i64(i, 14);
  row.last_seq = r.i64(i, 15);
  return row;
}

ProjectRow read_project(const Result& r, int i) {
  return ProjectRow{r.text(i, 0),
                    r.text(i, 1),
                    r.text(i, 2),
                    r.i64(i, 3),
                    r.i64(i, 4),
                    static_cast<std::uint32_t>(r.i64(i, 5)),
                    r.text(i, 6),
                    r.text(i, 7) == "t",
                    r.text(i, 8),
                    static_cast<std::uint32_t>(r.i64(i, 9)),
                    r.i64(i, 10)};
}

LimitRow read_limit(const Result& r, int i) {
  LimitRow row;
  row.key = r.text(i, 0);
  row.concurrency = static_cast<std::uint32_t>(r.i64(i, 1));
  row.rate_count = static_cast<std::uint32_t>(r.i64(i, 2));
  row.rate_period = r.i64(i, 3);
  row.burst = static_cast<std::uint32_t>(r.i64(i, 4));
  row.tat = r.i64(i, 5);
  row.removed = r.text(i, 6) == "t";
  row.created_at = r.i64(i, 7);
  row.updated_at = r.i64(i, 8);
  row.last_seq = r.i64(i, 9);
  return row;
}

void fill_allocatable(const Result& r, int i, ItemRow& row) {
  row = ItemRow{};
  row.item_id = r.text(i, 0);
  row.project_id = r.text(i, 1);
  row.status = parse_item_status(r.text(i, 2)).value_or(ItemStatus::ready);
  row.session = r.text(i, 3);
  row.lease_expires_at = r.i64(i, 4);
  row.review = parse_review_text(r.text(i, 5)).value_or(ReviewState::none);
  row.author = r.text(i, 6);
  if (!r.null(i, 7) && r.i64(i, 7) == 0) {
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("item {} has a terminal_since stored as cplane never "
                                   "writes it (edited behind cplane's back?): run "
                                   "cplane verify, then cplane rebuild",
                                   quote_id(row.item_id)));
  }
  row.terminal_since = r.i64(i, 7);
  row.priority = static_cast<std::int32_t>(r.i64(i, 8));
  row.queued_seq = r.i64(i, 9);
  row.run_at = r.i64(i, 10);
  row.attempts = static_cast<std::uint32_t>(r.i64(i, 11));
  row.attempt_limit = static_cast<std::uint32_t>(r.i64(i, 12));
  row.concurrency_key = r.text(i, 13);
}

Params item_params(const ItemRow& r) {
  Params p;
  p.text(r.item_id)
      .text(r.project_id)
      .text(r.payload)
      .text(to_string(r.status))
      .text_or_null(r.owner)
      .i64(static_cast<std::int64_t>(r.fence))
      .i64(r.attempts)
      .i64_or_null(r.lease_expires_at)
      .text_or_null(r.detail)
      .i64(r.queued_seq)
      .i64(r.queued_at)
      .i64(r.updated_at)
      .i64(r.last_seq)
      .text(to_string(r.kind))
      .text_or_null(r.ref)
      .text_or_null(r.head)
      .text(to_string(r.review))
      .text_or_null(r.author)
      .text_or_null(r.session)
      .text_or_null(join_list(r.actions))
      .text_or_null(r.expected_head)
      .text_or_null(r.close_reason)
      .i64(r.head_moved ? 1 : 0)
      .i64(r.priority)
      .i64_or_null(r.terminal_since)
      .text_or_null(r.terminal_reason)
      .text_or_null(r.key)
      .i64(r.max_attempts)
      .text_or_null(r.backoff)
      .i64(r.attempt_limit)
      .i64_or_null(r.run_at)
      .i64(static_cast<std::int64_t>(r.ended_fence))
      .text(r.concurrency_key);
  return p;
}

void fill_terminal_lock(const Result& r, int i, TerminalLockRow& row) {
  row = TerminalLockRow{r.text(i, 0), r.i64(i, 1), r.text(i, 2)};
}

}  // namespace cplane::storage::postgres
