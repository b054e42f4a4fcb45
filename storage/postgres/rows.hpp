// cplane's rows as the engine reads them from a result, and an item row as
// a statement's parameters. Each reader takes the columns of its list
// below, in that order; a statement that reads a row selects its list.
// Internal to storage/postgres/.
#pragma once

#include "storage/backend.hpp"
#include "storage/postgres/statement.hpp"

namespace cplane::storage::postgres {

// The columns of the row tables, in the order the readers take them;
// kItemValues are kItemColumns' placeholders, kItemUpdate their upsert.
inline constexpr const char* kItemColumns =
    "item_id, project_id, payload, status, owner, fence, attempts, lease_expires_at, detail, "
    "queued_seq, queued_at, updated_at, last_seq, kind, ref, head, review, author, session, "
    "actions, expected_head, close_reason, head_moved, priority, terminal_since, "
    "terminal_reason, idem_key, max_attempts, backoff, attempt_limit, run_at, ended_fence, "
    "concurrency_key";
inline constexpr int kItemColumnCount = 33;
inline constexpr const char* kItemValues =
    "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, "
    "$21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33";
inline constexpr const char* kItemUpdate =
    "project_id = EXCLUDED.project_id, payload = EXCLUDED.payload, status = EXCLUDED.status, "
    "owner = EXCLUDED.owner, fence = EXCLUDED.fence, attempts = EXCLUDED.attempts, "
    "lease_expires_at = EXCLUDED.lease_expires_at, detail = EXCLUDED.detail, "
    "queued_seq = EXCLUDED.queued_seq, queued_at = EXCLUDED.queued_at, "
    "updated_at = EXCLUDED.updated_at, last_seq = EXCLUDED.last_seq, kind = EXCLUDED.kind, "
    "ref = EXCLUDED.ref, head = EXCLUDED.head, review = EXCLUDED.review, "
    "author = EXCLUDED.author, session = EXCLUDED.session, actions = EXCLUDED.actions, "
    "expected_head = EXCLUDED.expected_head, close_reason = EXCLUDED.close_reason, "
    "head_moved = EXCLUDED.head_moved, priority = EXCLUDED.priority, "
    "terminal_since = EXCLUDED.terminal_since, terminal_reason = EXCLUDED.terminal_reason, "
    "idem_key = EXCLUDED.idem_key, max_attempts = EXCLUDED.max_attempts, "
    "backoff = EXCLUDED.backoff, attempt_limit = EXCLUDED.attempt_limit, run_at = EXCLUDED.run_at, "
    "ended_fence = EXCLUDED.ended_fence, concurrency_key = EXCLUDED.concurrency_key";
// kItemColumns but the id, each set to its placeholder: a row's UPDATE.
inline constexpr const char* kItemSet =
    "project_id = $2, payload = $3, status = $4, owner = $5, fence = $6, attempts = $7, "
    "lease_expires_at = $8, detail = $9, queued_seq = $10, queued_at = $11, updated_at = $12, "
    "last_seq = $13, kind = $14, ref = $15, head = $16, review = $17, author = $18, "
    "session = $19, actions = $20, expected_head = $21, close_reason = $22, head_moved = $23, "
    "priority = $24, terminal_since = $25, terminal_reason = $26, idem_key = $27, "
    "max_attempts = $28, backoff = $29, attempt_limit = $30, run_at = $31, ended_fence = $32, "
    "concurrency_key = $33";
inline constexpr const char* kIncidentColumns =
    "provider, fingerprint, org, repo, environment, target, status, event_count, permalink, "
    "first_seen, last_seen, linked_prs, incident_id, linked_at, updated_at, last_seq";
inline constexpr const char* kAllocationColumns =
    "item_id, project_id, status, session, lease_expires_at, review, author, terminal_since, "
    "priority, queued_seq, run_at, attempts, attempt_limit, concurrency_key";
inline constexpr const char* kProjectColumns =
    "project_id, title, status, created_at, last_seq, max_attempts, backoff, paused, pause_reason, "
    "weight, fair_pass";
inline constexpr const char* kLimitColumns =
    "key, concurrency, rate_count, rate_period, burst, tat, removed, created_at, updated_at, "
    "last_seq";
inline constexpr const char* kScheduleColumns =
    "name, project_id, cron, zone, payload, overlap_skip, catch_up, next_at, paused, removed, "
    "last_item, last_occurrence, fired, created_at, updated_at, last_seq";
inline constexpr const char* kSessionColumns =
    "session_id, actor, opened_at, last_seen_at, closed_at, last_seq";
inline constexpr const char* kEventColumns =
    "seq, stream_kind, stream_id, item_id, project_id, type, at, body, stream_rev, hash";

// An item row as it is stored, with what does not parse noted in
// `scanned` (for verify); read_item is the same row for a command to decide
// on (StorageError corruption if a field does not parse).
void fill_item(const Result& r, int i, ScannedItem& scanned);
ItemRow read_item(const Result& r, int i);
// kAllocationColumns: the fields an allocation reads (StorageError
// corruption for a terminal_since cplane never writes).
void fill_allocatable(const Result& r, int i, ItemRow& row);
// kItemColumns' parameters ($1..$33) for `r`.
Params item_params(const ItemRow& r);

void fill_event(const Result& r, int i, RawEvent& e);
// stream_kind, stream_id, revision, last_seq, hash.
void fill_head(const Result& r, int i, StreamHead& h);
IncidentLinkRow read_incident(const Result& r, int i);
SessionRow read_session(const Result& r, int i);
ScheduleRow read_schedule(const Result& r, int i);
ProjectRow read_project(const Result& r, int i);
LimitRow read_limit(const Result& r, int i);
// item_id, since, reason.
void fill_terminal_lock(const Result& r, int i, TerminalLockRow& row);

}  // namespace cplane::storage::postgres
