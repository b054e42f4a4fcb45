// The row codecs of the SQLite engine: each table's column list, in the
// order its reader expects, and the functions that read a row from a
// statement (or bind one to it). A reader takes a statement that selected
// exactly its table's column list (kItemColumns for fill_item, ...).
#pragma once

#include "storage/backend.hpp"
#include "storage/sqlite/statement.hpp"

namespace cplane::storage::sqlite {

inline constexpr const char* kItemColumns =
    "item_id, project_id, payload, status, owner, fence, attempts, lease_expires_at, detail, "
    "queued_seq, queued_at, updated_at, last_seq, kind, ref, head, review, author, session, "
    "actions, expected_head, close_reason, head_moved, priority, terminal_since, terminal_reason, "
    "idem_key, max_attempts, backoff, attempt_limit, run_at, ended_fence, concurrency_key";
inline constexpr const char* kItemValues =
    "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, "
    "?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33";
inline constexpr const char* kIncidentColumns =
    "provider, fingerprint, org, repo, environment, target, status, event_count, permalink, "
    "first_seen, last_seen, linked_prs, incident_id, linked_at, updated_at, last_seq";
// What the allocator ranks and judges by: no payload, so that a walk past
// many candidates reads little.
inline constexpr const char* kAllocationColumns =
    "item_id, project_id, status, session, lease_expires_at, review, author, terminal_since, "
    "priority, queued_seq, run_at, attempts, attempt_limit, concurrency_key";
inline constexpr const char* kProjectColumns =
    "project_id, title, status, created_at, last_seq, max_attempts, backoff, paused, pause_reason, "
    "weight, fair_pass";
inline constexpr const char* kLimitColumns =
    "key, concurrency, rate_count, rate_period, burst, tat, removed, created_at, updated_at, "
    "last_seq";
inline constexpr const char* kSessionColumns =
    "session_id, actor, opened_at, last_seen_at, closed_at, last_seq";
inline constexpr const char* kScheduleColumns =
    "name, project_id, cron, zone, payload, overlap_skip, catch_up, next_at, paused, removed, "
    "last_item, last_occurrence, fired, created_at, updated_at, last_seq";
inline constexpr const char* kEventColumns =
    "seq, stream_kind, stream_id, item_id, project_id, type, at, body, stream_rev, hash";

// Reads an item row; a status, kind or review that is none of theirs goes
// to `invalid_*` (the row is then reported by verify, repaired by rebuild).
void fill_item(const Statement& s, ScannedItem& scanned);
// An item row a command decides on: one with an invalid status, kind or
// review is refused.
ItemRow read_item(const Statement& s);
// Binds `r` as the parameters ?1..?33 of kItemValues, in kItemColumns' order.
Statement& bind_item(Statement& s, const ItemRow& r);

// Reads an event; a column stored with another type than cplane writes is
// named in `bad_column`.
void fill_event(const Statement& s, RawEvent& e);
RawEvent read_event(const Statement& s);

// An incident row; metadata that is NULL is absent (nullopt), told apart
// from an empty text by the column's type.
IncidentLinkRow read_incident(const Statement& s);
SessionRow read_session(const Statement& s);
void fill_schedule(const Statement& s, ScheduleRow& row);
ProjectRow read_project(const Statement& s);
LimitRow read_limit(const Statement& s);

}  // namespace cplane::storage::sqlite
