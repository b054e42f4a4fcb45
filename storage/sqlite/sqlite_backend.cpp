// The SQLite schema (version 6)
// =============================
//
// The log and its chain:
//
//   events          the log. One row per event, never updated or deleted.
//     seq           INTEGER PRIMARY KEY: global order, from 1, rising; a
//                   reader must not assume it has no gaps (the contract in
//                   storage/backend.hpp).
//     item_id       the item for item events, NULL for the others.
//     project_id    the project the event belongs to.
//     type          the body's union member (EventTraits' stored name:
//                   "queued", "claimed", "project_created", ...), for
//                   operators.
//     at            microseconds since the epoch, as in the body.
//     body          the Cap'n Proto encoded event (events/events.capnp): the
//                   canonical copy. Every other column is an index of it;
//                   `verify` checks that they agree.
//     stream_kind   the stream the event belongs to: "item", "project",
//     stream_id     "session" or "incident", and its id (the item, project
//                   or session id; incident_stream_id for an incident).
//                   Scans and replays go by stream: events_by_stream
//                   (stream_kind, stream_id, seq). (Added by version 3;
//                   version-2 rows are filed by their item_id column.)
//     stream_rev    the event's revision in its stream, from 1, and its
//     hash          chain hash (events/chain.hpp). (Added by version 4,
//                   which chains the existing log once.)
//
//   stream_heads    one row per stream (stream_kind, stream_id): its last
//                   revision, last seq and hash. WITHOUT ROWID.
//   log_digest      the log's digest: the event count, the last seq and the
//                   XOR of every head's hash. One shard (0) here; a server
//                   backend may keep several.
//   store_info      key/value facts about the database: 'database_id' (a
//                   random id, stamped at creation, that exports name their
//                   source by); 'seqs' = 'sparse' once a restore from a log
//                   with gaps (a PostgreSQL export) made gaps normal here.
//
// The projected rows, each the fold of its stream's events (projections/),
// each with `last_seq`, the seq of the last event applied:
//
//   items           one row per item. WITHOUT ROWID, keyed by item_id. Two
//                   partial indexes make a claim two index seeks per project
//                   in scope, whatever the depth of the queue:
//       items_ready  (project_id, queued_seq)       WHERE status = 'ready'
//       items_lease  (project_id, lease_expires_at, queued_seq)
//                                                   WHERE status = 'claimed'
//                   (leases that lapse together are reclaimed in queue order)
//                   They are per project only: a global copy of each would
//                   cost every claim two more page writes, to spare a loop
//                   over the (few) projects.
//
//                   Since version 5 a row also holds what the forge knows
//                   (kind, ref, head, review, author, close_reason, and the
//                   closed status), the assignment (session, actions joined
//                   by commas, expected_head, head_moved: 1 once the head
//                   moved after it was pinned), the priority and the
//                   terminal path (terminal_since, terminal_reason).
//                   items_by_session (session, item_id), partial on claimed
//                   rows with a session, finds a session's leases;
//                   items_alloc (project_id, on the terminal path first,
//                   priority, queued_seq), partial on ready and claimed rows,
//                   is the allocator's ranking. Since version 6, idem_key
//                   (enqueue --key), unique per project: items_by_key.
//
//   projects        one row per project_created event.
//   project_actors  one row per (project, actor) assignment;
//                   project_actors_by_actor finds an actor's projects.
//   sessions        one row per session stream (since version 5).
//   terminal_locks  one row per open item on the terminal path (since
//                   version 5), the projection of its item's stream.
//   incident_links  one row per incident stream (since version 5), keyed by
//                   (provider, fingerprint, org, repo, environment), absent
//                   parts ''; incident_id is the stream id, and
//                   incident_links_by_target finds the links to an item.
//
// Invariants: every change to a projected row is made in the same
// transaction as the event(s) that explain it; a row equals the fold of its
// stream, and each stream's head matches its last event. PRAGMA
// user_version holds the schema version and application_id the magic
// 0x63706c6e ("cpln"), so a foreign SQLite file is refused rather than
// silently written to. An older database is migrated, one version at a
// time (kMigrations), by the first writer; a reader refuses it.
//
// Concurrency: WAL mode, so readers and the writer never block each other.
// Every write command is BEGIN IMMEDIATE: the write lock is held before the
// first read. Writers are first serialised through an exclusive flock(2) on
// a side file (PATH-lock; /proc/locks names its holder): waiting in the
// kernel is fair, where SQLite's busy handler sleeps and lets the current
// holder re-take the lock, starving others under contention. Both waits are
// bounded by one lock timeout. A store opened read-only checks the schema in
// a read transaction and never touches PATH-lock: reads never wait for, and
// never hold off, a writer (even one stopped while holding the lock).
//
// Durability: each transaction states the `synchronous` level its commit
// needs (FULL or NORMAL); the connection switches only when it changes. In
// WAL mode a FULL commit also makes every earlier NORMAL commit durable.

#include "storage/sqlite/sqlite_backend.hpp"

#include "events/chain.hpp"

#include <sodium.h>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/inotify.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <sqlite3.h>

#include <fmt/format.h>

#include "events/clock.hpp"
#include "events/codec.hpp"
#include "storage/sqlite/coalescing_vfs.hpp"
#include "storage/sqlite/combine_area.hpp"
#include "storage/sqlite/statement.hpp"
#include "storage/open.hpp"
#include "events/errors.hpp"
#include "events/json.hpp"
#include "storage/stored_text.hpp"

namespace cplane::storage {
namespace {

constexpr int kApplicationId = 0x63706c6e;

// The hash chain's tables (events/chain.hpp): each stream's head, and the
// log's digest. On SQLite the digest has one shard (0); a server backend may
// keep several, whose XOR is the log's.
const char* const kChainTables = R"sql(
CREATE TABLE stream_heads (
  stream_kind TEXT NOT NULL,
  stream_id   TEXT NOT NULL,
  revision    INTEGER NOT NULL,
  last_seq    INTEGER NOT NULL,
  hash        BLOB NOT NULL,
  PRIMARY KEY (stream_kind, stream_id)
) WITHOUT ROWID;
CREATE TABLE log_digest (
  shard    INTEGER PRIMARY KEY,
  events   INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  digest   BLOB NOT NULL
);
CREATE TABLE store_info (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
)sql";

// The current schema, created whole in a new database.
const char* const kSchemaTables = R"sql(
CREATE TABLE events (
  seq         INTEGER PRIMARY KEY,
  item_id     TEXT,
  project_id  TEXT NOT NULL,
  type        TEXT NOT NULL,
  at          INTEGER NOT NULL,
  body        BLOB NOT NULL,
  stream_kind TEXT NOT NULL DEFAULT '',
  stream_id   TEXT NOT NULL DEFAULT '',
  stream_rev  INTEGER NOT NULL DEFAULT 0,
  hash        BLOB
);
CREATE INDEX events_by_stream ON events(stream_kind, stream_id, seq);
)sql";
// Items and sessions as of version 5 (forge fields, the assignment, the
// closed status; sessions), created whole by a new database and by the
// migration from 4, which copies the version-4 rows in.
const char* const kItemsTableV5 = R"sql(
CREATE TABLE items (
  item_id          TEXT PRIMARY KEY,
  project_id       TEXT NOT NULL,
  payload          TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('ready', 'claimed', 'done', 'failed', 'closed')),
  owner            TEXT,
  fence            INTEGER NOT NULL,
  attempts         INTEGER NOT NULL,
  lease_expires_at INTEGER,
  detail           TEXT,
  queued_seq       INTEGER NOT NULL,
  queued_at        INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  last_seq         INTEGER NOT NULL,
  kind             TEXT NOT NULL DEFAULT 'task',
  ref              TEXT,
  head             TEXT,
  review           TEXT NOT NULL DEFAULT 'none',
  author           TEXT,
  session          TEXT,
  actions          TEXT,
  expected_head    TEXT,
  close_reason     TEXT,
  head_moved       INTEGER NOT NULL DEFAULT 0,
  priority         INTEGER NOT NULL DEFAULT 0,
  terminal_since   INTEGER,
  terminal_reason  TEXT
) WITHOUT ROWID;
CREATE INDEX items_ready ON items(project_id, queued_seq) WHERE status = 'ready';
CREATE INDEX items_lease ON items(project_id, lease_expires_at, queued_seq)
  WHERE status = 'claimed';
CREATE INDEX items_by_session ON items(session, item_id)
  WHERE status = 'claimed' AND session IS NOT NULL;
CREATE INDEX items_alloc ON items(project_id, (terminal_since IS NOT NULL) DESC, priority DESC,
                                  queued_seq)
  WHERE status IN ('ready', 'claimed');
)sql";
// The terminal path and incident links, as of version 5 (unchanged since).
const char* const kSideTables = R"sql(
CREATE TABLE terminal_locks (
  item_id TEXT PRIMARY KEY,
  since   INTEGER NOT NULL,
  reason  TEXT NOT NULL,
  item    TEXT GENERATED ALWAYS AS (item_id) VIRTUAL
) WITHOUT ROWID;
CREATE TABLE incident_links (
  provider    TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  org         TEXT NOT NULL DEFAULT '',
  repo        TEXT NOT NULL DEFAULT '',
  environment TEXT NOT NULL DEFAULT '',
  target      TEXT NOT NULL,
  status      TEXT,
  event_count INTEGER,
  permalink   TEXT,
  first_seen  TEXT,
  last_seen   TEXT,
  linked_prs  TEXT,
  incident_id TEXT NOT NULL UNIQUE,
  linked_at   INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  last_seq    INTEGER NOT NULL,
  PRIMARY KEY (provider, fingerprint, org, repo, environment)
) WITHOUT ROWID;
CREATE INDEX incident_links_by_target ON incident_links(target, incident_id);
)sql";
const char* const kSessionsTable = R"sql(
CREATE TABLE sessions (
  session_id   TEXT PRIMARY KEY,
  actor        TEXT,
  opened_at    INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  closed_at    INTEGER,
  last_seq     INTEGER NOT NULL
) WITHOUT ROWID;
)sql";
const std::string kMigration5 = std::string(R"sql(
ALTER TABLE items RENAME TO items_v4;
DROP INDEX items_ready;
DROP INDEX items_lease;
)sql") + kItemsTableV5 + kSideTables + R"sql(
INSERT INTO items (item_id, project_id, payload, status, owner, fence, attempts,
                   lease_expires_at, detail, queued_seq, queued_at, updated_at, last_seq)
  SELECT item_id, project_id, payload, status, owner, fence, attempts, lease_expires_at, detail,
         queued_seq, queued_at, updated_at, last_seq FROM items_v4;
DROP TABLE items_v4;
)sql" + kSessionsTable;

// Version 6: enqueue's idempotency key, unique per project.
const char* const kMigration6 = R"sql(
ALTER TABLE items ADD COLUMN idem_key TEXT;
CREATE UNIQUE INDEX items_by_key ON items(project_id, idem_key) WHERE idem_key IS NOT NULL;
)sql";

// Version 7: the job lifecycle. items gains the scheduled and cancelled
// statuses (the table is copied: SQLite cannot change a CHECK), the retry
// policy (max_attempts, backoff, attempt_limit) and run_at; projects gain
// their retry policy and pause. Indexes, each with the query it serves:
//   items_ready    a claim's ready candidate: (project, queue order)
//   items_lease    a claim's lapsed candidate and the sweep: (project, lease end)
//   items_due      a claim's scheduled candidate: (project, run_at), so that
//                  10^6 items scheduled for later cost one seek, not a scan
//   items_by_session  a session's leases
//   items_alloc    the allocator's ranking (open items)
//   items_by_key   enqueue --key, unique per project
//   items_failed, items_cancelled   bulk retry (and the dead end's listing):
//                  (project, item id), partial, so that they cost nothing for
//                  the open items
const char* const kItemsTable = R"sql(
CREATE TABLE items (
  item_id          TEXT PRIMARY KEY,
  project_id       TEXT NOT NULL,
  payload          TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('ready', 'claimed', 'done', 'failed', 'closed', 'scheduled', 'cancelled')),
  owner            TEXT,
  fence            INTEGER NOT NULL,
  attempts         INTEGER NOT NULL,
  lease_expires_at INTEGER,
  detail           TEXT,
  queued_seq       INTEGER NOT NULL,
  queued_at        INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  last_seq         INTEGER NOT NULL,
  kind             TEXT NOT NULL DEFAULT 'task',
  ref              TEXT,
  head             TEXT,
  review           TEXT NOT NULL DEFAULT 'none',
  author           TEXT,
  session          TEXT,
  actions          TEXT,
  expected_head    TEXT,
  close_reason     TEXT,
  head_moved       INTEGER NOT NULL DEFAULT 0,
  priority         INTEGER NOT NULL DEFAULT 0,
  terminal_since   INTEGER,
  terminal_reason  TEXT,
  idem_key         TEXT,
  max_attempts     INTEGER NOT NULL DEFAULT 0,
  backoff          TEXT,
  attempt_limit    INTEGER NOT NULL DEFAULT 0,
  run_at           INTEGER,
  ended_fence      INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX items_ready ON items(project_id, queued_seq) WHERE status = 'ready';
CREATE INDEX items_lease ON items(project_id, lease_expires_at, queued_seq)
  WHERE status = 'claimed';
CREATE INDEX items_due ON items(project_id, run_at, queued_seq) WHERE status = 'scheduled';
CREATE INDEX items_by_session ON items(session, item_id)
  WHERE status = 'claimed' AND session IS NOT NULL;
CREATE INDEX items_alloc ON items(project_id, (terminal_since IS NOT NULL) DESC, priority DESC,
                                  queued_seq)
  WHERE status IN ('ready', 'claimed', 'scheduled');
CREATE UNIQUE INDEX items_by_key ON items(project_id, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX items_failed ON items(project_id, item_id) WHERE status = 'failed';
CREATE INDEX items_cancelled ON items(project_id, item_id) WHERE status = 'cancelled';
)sql";
const char* const kSchedulesTable = R"sql(
CREATE TABLE schedules (
  name            TEXT PRIMARY KEY,
  project_id      TEXT NOT NULL,
  cron            TEXT NOT NULL,
  zone            TEXT NOT NULL,
  payload         TEXT NOT NULL,
  overlap_skip    INTEGER NOT NULL,
  catch_up        INTEGER NOT NULL,
  next_at         INTEGER NOT NULL,
  paused          INTEGER NOT NULL,
  removed         INTEGER NOT NULL,
  last_item       TEXT,
  last_occurrence INTEGER NOT NULL,
  fired           INTEGER NOT NULL,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  last_seq        INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX schedules_due ON schedules(next_at) WHERE paused = 0 AND removed = 0;
)sql";
const char* const kProjectLifecycle = R"sql(
ALTER TABLE projects ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE projects ADD COLUMN backoff TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE projects ADD COLUMN pause_reason TEXT NOT NULL DEFAULT '';
)sql";
const std::string kMigration7 = std::string(R"sql(
ALTER TABLE items RENAME TO items_v6;
DROP INDEX items_ready;
DROP INDEX items_lease;
DROP INDEX items_by_session;
DROP INDEX items_alloc;
DROP INDEX items_by_key;
)sql") + kItemsTable + R"sql(
INSERT INTO items (item_id, project_id, payload, status, owner, fence, attempts,
                   lease_expires_at, detail, queued_seq, queued_at, updated_at, last_seq, kind,
                   ref, head, review, author, session, actions, expected_head, close_reason,
                   head_moved, priority, terminal_since, terminal_reason, idem_key)
  SELECT item_id, project_id, payload, status, owner, fence, attempts, lease_expires_at, detail,
         queued_seq, queued_at, updated_at, last_seq, kind, ref, head, review, author, session,
         actions, expected_head, close_reason, head_moved, priority, terminal_since,
         terminal_reason, idem_key FROM items_v6;
DROP TABLE items_v6;
)sql" + kProjectLifecycle + kSchedulesTable;

const std::string kSchemaRest = R"sql(
CREATE TABLE projects (
  project_id TEXT PRIMARY KEY,
  title      TEXT NOT NULL,
  status     TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  last_seq   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE project_actors (
  project_id  TEXT NOT NULL,
  actor       TEXT NOT NULL,
  assigned_at INTEGER NOT NULL,
  last_seq    INTEGER NOT NULL,
  PRIMARY KEY (project_id, actor)
) WITHOUT ROWID;
CREATE INDEX project_actors_by_actor ON project_actors(actor, project_id);

)sql" + std::string(kItemsTable) + kSideTables + kSessionsTable + kProjectLifecycle +
    kSchedulesTable;
const std::string kSchema =
    std::string(kSchemaTables) + kChainTables +
    "INSERT INTO log_digest (shard, events, last_seq, digest) VALUES (0, 0, 0, zeroblob(32));\n" +
    kSchemaRest;
const std::string kMigration4 = std::string(R"sql(
ALTER TABLE events ADD COLUMN stream_rev INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN hash BLOB;
)sql") + kChainTables;

// Migrations, one per version: kMigrations[v] takes a database from
// version v to v + 1, inside the migrating transaction.
//   1 -> 2  lapsed leases that end at the same moment go in queue order
//           (version 1 ordered them by item id).
//   2 -> 3  every event names its stream: stream_kind and stream_id, filled
//           from the item_id column (NULL: a project event).
//   3 -> 4  the hash chain: stream_rev and hash on every event, the
//           stream_heads and log_digest tables; chain_existing_log() then
//           computes the chain once over the log as it stands.
//   4 -> 5  forge work items and sessions: items gains kind, ref, head,
//           review, author, session, actions, expected_head, close_reason
//           and the closed status (the table is copied, as SQLite cannot
//           change a CHECK); the sessions table.
//   5 -> 6  items.idem_key (enqueue --key) and its unique index.
//   6 -> 7  the job lifecycle (kMigration7): statuses scheduled and
//           cancelled, retry policies, run_at, pause; items_due,
//           items_failed and items_cancelled.
const char* const kMigrations[] = {
    nullptr,
    nullptr,
    R"sql(
DROP INDEX items_lease;
CREATE INDEX items_lease ON items(project_id, lease_expires_at, queued_seq)
  WHERE status = 'claimed';
)sql",
    R"sql(
ALTER TABLE events ADD COLUMN stream_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN stream_id TEXT NOT NULL DEFAULT '';
UPDATE events SET stream_kind = CASE WHEN item_id IS NULL THEN 'project' ELSE 'item' END,
                  stream_id = coalesce(item_id, project_id);
DROP INDEX events_by_item;
CREATE INDEX events_by_stream ON events(stream_kind, stream_id, seq);
)sql",
    kMigration4.c_str(),
    kMigration5.c_str(),
    kMigration6,
    kMigration7.c_str(),
};

const char* const kItemColumns =
    "item_id, project_id, payload, status, owner, fence, attempts, lease_expires_at, detail, "
    "queued_seq, queued_at, updated_at, last_seq, kind, ref, head, review, author, session, "
    "actions, expected_head, close_reason, head_moved, priority, terminal_since, terminal_reason, "
    "idem_key, max_attempts, backoff, attempt_limit, run_at, ended_fence";
const char* const kItemValues =
    "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, "
    "?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32";
const char* const kIncidentColumns =
    "provider, fingerprint, org, repo, environment, target, status, event_count, permalink, "
    "first_seen, last_seen, linked_prs, incident_id, linked_at, updated_at, last_seq";
// What the allocator ranks and judges by: no payload, so that a walk past
// many candidates reads little.
const char* const kAllocationColumns =
    "item_id, project_id, status, session, lease_expires_at, review, author, terminal_since, "
    "priority, queued_seq, run_at, attempts, attempt_limit";
const char* const kProjectColumns =
    "project_id, title, status, created_at, last_seq, max_attempts, backoff, paused, pause_reason";
const char* const kSessionColumns =
    "session_id, actor, opened_at, last_seen_at, closed_at, last_seq";
const char* const kScheduleColumns =
    "name, project_id, cron, zone, payload, overlap_skip, catch_up, next_at, paused, removed, "
    "last_item, last_occurrence, fired, created_at, updated_at, last_seq";

// ENOSPC, EDQUOT and EFBIG (a file size limit, with SIGXFSZ ignored) all
// mean "no room": SQLite rolls the transaction back, so nothing was written.
// Returns that errno, or 0 for any other failure.
int no_room_errno(sqlite3* db, int rc) {
  const int primary = rc & 0xff;
  if (primary != SQLITE_FULL && primary != SQLITE_IOERR) return 0;
  if (const int shim = take_no_room_errno(); shim != 0) return shim;
  const int e = db != nullptr ? sqlite3_system_errno(db) : 0;
  if (e == ENOSPC || e == EDQUOT || e == EFBIG) return e;
  return primary == SQLITE_FULL ? ENOSPC : 0;
}

[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what) {
  const int primary = rc & 0xff;
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const std::string text = fmt::format("{}: {}", what, message);
  if (const int e = no_room_errno(db, rc); e != 0) {
    throw StorageError(
        StorageError::Category::full,
        fmt::format("{}: {} ({}); the transaction was rolled back and nothing was written: "
                    "free space (or raise the limit) and retry",
                    what,
                    e == EFBIG    ? "the file size limit was reached"
                    : e == EDQUOT ? "the disk quota is exhausted"
                                  : "the disk is full",
                    std::strerror(e)));
  }
  switch (primary) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL:  // a lock SQLite retried for a while and did not get
      throw StorageError(StorageError::Category::busy, text);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      throw StorageError(StorageError::Category::unavailable, text);
    case SQLITE_CORRUPT:
      throw StorageError(StorageError::Category::corruption,
                         text + " (pages of the file are damaged: salvage every readable event "
                                "into a new file with `cplane recover --db DAMAGED --to NEW`)");
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
      throw StorageError(StorageError::Category::corruption, text);
    default:
      throw StorageError(StorageError::Category::io, text);
  }
}

using sqlite::Blob;
using sqlite::NullIfEmpty;
using sqlite::NullIfZero;
using sqlite::OptionalInt;
using sqlite::OptionalText;
using sqlite::Statement;

// Reads an item row; a status, kind or review that is none of theirs goes
// to `invalid_*` (the row is then reported by verify, repaired by rebuild).
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
}

// An item row a command decides on: one with an invalid status, kind or
// review is refused.
ItemRow read_item(const Statement& s) {
  ScannedItem scanned;
  fill_item(s, scanned);
  return decidable(std::move(scanned));
}

const char* const kEventColumns =
    "seq, stream_kind, stream_id, item_id, project_id, type, at, body, stream_rev, hash";

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

class StatementCursor final : public Cursor<RawEvent> {
 public:
  StatementCursor(sqlite3* db, const std::string& sql) : stmt_(db, sql.c_str()) { stmt_.bind(); }
  template <class... A>
  void bind(const A&... args) {
    stmt_.bind(args...);
  }
  bool next(RawEvent& row) override {
    if (!stmt_.step()) return false;
    fill_event(stmt_, row);
    return true;
  }

 private:
  Statement stmt_;
};

class HeadCursor final : public Cursor<StreamHead> {
 public:
  HeadCursor(sqlite3* db, const char* sql) : stmt_(db, sql) { stmt_.bind(); }
  template <class... A>
  void bind(const A&... args) {
    stmt_.bind(args...);
  }
  bool next(StreamHead& h) override {
    if (!stmt_.step()) return false;
    stmt_.text_into(0, h.stream_kind);
    stmt_.text_into(1, h.stream_id);
    h.revision = stmt_.i64(2);
    h.last_seq = stmt_.i64(3);
    stmt_.blob_into(4, h.hash);
    return true;
  }

 private:
  Statement stmt_;
};

class ItemStatementCursor final : public Cursor<ScannedItem> {
 public:
  ItemStatementCursor(sqlite3* db, const std::string& sql) : stmt_(db, sql.c_str()) { stmt_.bind(); }
  bool next(ScannedItem& item) override {
    if (!stmt_.step()) return false;
    fill_item(stmt_, item);
    return true;
  }

 private:
  Statement stmt_;
};

// An incident row; metadata that is NULL is absent (nullopt), told apart
// from an empty text by the column's type.
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

// A cursor over any statement's rows, read by `fill`.
template <class Row>
class RowCursor final : public Cursor<Row> {
 public:
  using Fill = void (*)(const Statement&, Row&);
  RowCursor(sqlite3* db, const std::string& sql, Fill fill) : stmt_(db, sql.c_str()), fill_(fill) {}
  template <class... A>
  void bind(const A&... args) {
    stmt_.bind(args...);
  }
  bool next(Row& row) override {
    if (!stmt_.step()) return false;
    fill_(stmt_, row);
    return true;
  }

 private:
  Statement stmt_;
  Fill fill_;
};

// A walk of the allocation statement (kAllocationColumns), reset when done.
class AllocationCursor final : public Cursor<ItemRow> {
 public:
  explicit AllocationCursor(Statement& s) : stmt_(s) {}
  ~AllocationCursor() override { stmt_.reset(); }
  bool next(ItemRow& row) override {
    if (!stmt_.step()) return false;
    row = ItemRow{};
    stmt_.text_into(0, row.item_id);
    stmt_.text_into(1, row.project_id);
    row.status = parse_item_status(stmt_.text(2)).value_or(ItemStatus::ready);
    stmt_.text_into(3, row.session);
    row.lease_expires_at = stmt_.i64(4);
    row.review = parse_review_text(stmt_.text(5)).value_or(ReviewState::none);
    stmt_.text_into(6, row.author);
    // The walk's order is SQL's, on the raw columns: a value the engine
    // never writes would rank the row otherwise than the planner does.
    const std::int64_t priority = stmt_.i64(8);
    if (stmt_.type(8) != SQLITE_INTEGER || priority < std::numeric_limits<std::int32_t>::min() ||
        priority > std::numeric_limits<std::int32_t>::max() ||
        (stmt_.type(7) != SQLITE_NULL &&
         (stmt_.type(7) != SQLITE_INTEGER || stmt_.i64(7) == 0))) {
      const std::string id = row.item_id;
      stmt_.reset();
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("item {} has a priority or terminal_since stored as cplane "
                                     "never writes it (edited behind cplane's back?): run cplane "
                                     "verify, then cplane rebuild",
                                     quote_id(id)));
    }
    row.terminal_since = stmt_.i64(7);
    row.priority = static_cast<std::int32_t>(priority);
    row.queued_seq = stmt_.i64(9);
    row.run_at = stmt_.i64(10);
    row.attempts = static_cast<std::uint32_t>(stmt_.i64(11));
    row.attempt_limit = static_cast<std::uint32_t>(stmt_.i64(12));
    return true;
  }

 private:
  Statement& stmt_;
};

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

class SessionCursor final : public Cursor<SessionRow> {
 public:
  SessionCursor(sqlite3* db, const std::string& sql) : stmt_(db, sql.c_str()) { stmt_.bind(); }
  bool next(SessionRow& row) override {
    if (!stmt_.step()) return false;
    row = read_session(stmt_);
    return true;
  }

 private:
  Statement stmt_;
};

// The writer's side lock: an exclusive flock(2) on PATH-lock, fair because
// waiters queue in the kernel. flock has no timeout, so a wait is bounded by
// a per-thread POSIX timer whose signal (a no-op handler installed without
// SA_RESTART) interrupts the wait with EINTR; the timer repeats after the
// deadline so that a signal landing just before flock() is entered cannot
// leave it blocked. If the application owns that signal or blocks it, the
// wait polls instead. A waiter that gives up names the holder (and says
// whether it is stopped) from the kernel's /proc/locks: holders write
// nothing.
using Clock = std::chrono::steady_clock;

void interrupt_lock_wait(int) {}

// The signal used to interrupt a lock wait, or 0 to poll.
int lock_wait_signal() {
  static const int signo = [] {
    const int s = SIGRTMIN + 5;
    if (s > SIGRTMAX) return 0;
    struct sigaction old {};
    if (::sigaction(s, nullptr, &old) != 0) return 0;
    if (old.sa_handler == interrupt_lock_wait) return s;
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) return 0;  // not ours
    struct sigaction sa {};
    sa.sa_handler = interrupt_lock_wait;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: flock returns EINTR
    return ::sigaction(s, &sa, nullptr) == 0 ? s : 0;
  }();
  if (signo == 0) return 0;
  sigset_t blocked;
  if (::pthread_sigmask(SIG_BLOCK, nullptr, &blocked) != 0 || sigismember(&blocked, signo)) return 0;
  return signo;
}

// What a process is doing, from /proc/PID/stat: 'T' stopped, 't' traced.
char process_state(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return '?';
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}

class WriterLock {
 public:
  WriterLock() = default;
  // `database` is the file the lock guards: a new lock file gets its mode
  // (so that whoever may write the database may take its lock) and, when
  // root creates it, its owner. A symbolic link or any other non-regular
  // file in the lock's place is refused, never written through.
  WriterLock(const std::string& path, const std::string& database) : path_(path) {
    struct stat db {};
    const mode_t mode = ::stat(database.c_str(), &db) == 0 ? (db.st_mode & 0666) : 0644;
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    const bool created = fd_ >= 0;
    if (!created && errno == EEXIST) fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd_ < 0) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("cannot open lock file {}: {}", path,
                                     errno == ELOOP ? "it is a symbolic link" : std::strerror(errno)));
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      fd_ = -1;
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("lock file {} is not a regular file", path));
    }
    if (created) {
      // Just made: the database's mode, past the umask, and, when root made
      // it beside someone else's database, their ownership. Failures leave
      // a lock that still works for its maker.
      if (::geteuid() == 0 && db.st_uid != 0) {
        [[maybe_unused]] int ignored = ::fchown(fd_, db.st_uid, db.st_gid);
      }
      [[maybe_unused]] int ignored = ::fchmod(fd_, mode);
    }
  }
  WriterLock(WriterLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  WriterLock& operator=(WriterLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    std::swap(path_, o.path_);
    return *this;
  }
  ~WriterLock() {
    if (fd_ >= 0) ::close(fd_);
  }

  // Takes the lock by `deadline`, else throws StorageError(busy) naming the
  // holder. A no-op without a lock file.
  void lock(Clock::time_point deadline, std::chrono::milliseconds timeout) {
    if (fd_ < 0) return;
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) fail_errno("cannot lock");
      wait(deadline, timeout);
    }
  }

  void unlock() noexcept {
    if (fd_ >= 0) ::flock(fd_, LOCK_UN);
  }

  // Takes the lock only if nobody holds it. True without a lock file.
  bool try_lock() noexcept { return fd_ < 0 || ::flock(fd_, LOCK_EX | LOCK_NB) == 0; }

 private:
  void wait(Clock::time_point deadline, std::chrono::milliseconds timeout) {
    const int signo = lock_wait_signal();
    timer_t timer{};
    bool have_timer = false;
    if (signo != 0 && Clock::now() < deadline) {
      struct sigevent event {};
      event.sigev_notify = SIGEV_THREAD_ID;
      event.sigev_signo = signo;
      event._sigev_un._tid = ::gettid();
      if (::timer_create(CLOCK_MONOTONIC, &event, &timer) == 0) {
        have_timer = true;
        const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now());
        const auto first = std::max<std::int64_t>(left.count(), 1);
        struct itimerspec spec {};
        spec.it_value = {static_cast<time_t>(first / 1'000'000'000), static_cast<long>(first % 1'000'000'000)};
        spec.it_interval = {0, 10'000'000};  // then every 10 ms, in case one was missed
        if (::timer_settime(timer, 0, &spec, nullptr) != 0) {
          ::timer_delete(timer);
          have_timer = false;
        }
      }
    }
    struct DeleteTimer {
      timer_t timer;
      bool active;
      ~DeleteTimer() {
        if (active) ::timer_delete(timer);
      }
    } cleanup{timer, have_timer};
    auto pause = std::chrono::microseconds{200};
    for (;;) {
      if (have_timer) {
        if (::flock(fd_, LOCK_EX) == 0) return;
      } else if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        return;
      }
      if (errno != EINTR && errno != EWOULDBLOCK) fail_errno("cannot lock");
      if (Clock::now() >= deadline) give_up(timeout);
      if (!have_timer) {
        std::this_thread::sleep_for(std::min(pause, std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now())));
        pause = std::min(pause * 2, std::chrono::microseconds{10'000});
      }
    }
  }

  // The pid holding the flock on this file, from /proc/locks (the kernel's
  // own list, so holders need not write anything on the hot path), or 0.
  long holder_pid() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return 0;
    const std::string id = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev),
                                       static_cast<unsigned long>(st.st_ino));
    std::ifstream locks("/proc/locks");
    std::string line;
    while (std::getline(locks, line)) {
      // "1: FLOCK  ADVISORY  WRITE 15201 fe:00:10952894 0 EOF"
      std::istringstream fields(line);
      std::string number, kind, mode, access, device;
      long pid = 0;
      if (!(fields >> number >> kind >> mode >> access >> pid >> device)) continue;
      if (kind == "FLOCK" && device == id) return pid;  // "->" lines are waiters
    }
    return 0;
  }

  [[noreturn]] void give_up(std::chrono::milliseconds timeout) const {
    const long pid = holder_pid();
    std::string holder = "another process";
    std::string hint = "it may be stopped (SIGSTOP, a debugger) or running a long command";
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0) {
      holder = fmt::format("pid {}", pid);
      const char state = process_state(static_cast<pid_t>(pid));
      if (state == 'T' || state == 't') {
        hint = fmt::format("pid {} is stopped (SIGSTOP or a debugger): resume it (kill -CONT {}) "
                           "or end it", pid, pid);
      }
    }
    throw StorageError(StorageError::Category::busy,
                       fmt::format("gave up after {} waiting for the write lock ({} is held by "
                                   "{}): {}; retry, or raise --lock-timeout",
                                   describe_timeout(timeout), path_, holder, hint));
  }

  [[noreturn]] void fail_errno(const char* what) const {
    throw StorageError(StorageError::Category::io,
                       fmt::format("{} {}: {}", what, path_, std::strerror(errno)));
  }

  int fd_ = -1;
  std::string path_;

 public:
  static std::string describe_timeout(std::chrono::milliseconds timeout) {
    return timeout.count() % 1000 == 0 ? fmt::format("{} s", timeout.count() / 1000)
                                       : fmt::format("{} ms", timeout.count());
  }
};

// An inotify watch on the folder of a database, woken by writes to the
// database or its WAL (a commit of any process).
class WalWatch {
 public:
  explicit WalWatch(const std::string& path) {
    const std::filesystem::path p = std::filesystem::absolute(path);
    name_ = p.filename().string();
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ < 0 || ::inotify_add_watch(fd_, p.parent_path().c_str(),
                                       IN_MODIFY | IN_CREATE | IN_MOVED_TO) < 0) {
      const int e = errno;
      if (fd_ >= 0) ::close(fd_);
      throw StorageError(StorageError::Category::io,
                         fmt::format("cannot watch {} for new work: {}", path, std::strerror(e)));
    }
  }
  WalWatch(const WalWatch&) = delete;
  WalWatch& operator=(const WalWatch&) = delete;
  ~WalWatch() { ::close(fd_); }

  void wait(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      if (drain()) return;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30))) < 0 &&
          errno != EINTR) {
        throw StorageError(StorageError::Category::io,
                           fmt::format("poll failed: {}", std::strerror(errno)));
      }
    }
  }

 private:
  // Reads what is queued: true if any of it touched the database's files.
  bool drain() {
    alignas(inotify_event) char buffer[4096];
    bool touched = false;
    for (;;) {
      const ssize_t n = ::read(fd_, buffer, sizeof buffer);
      if (n <= 0) return touched;
      for (ssize_t at = 0; at < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buffer + at);
        if (e->len > 0) {
          const std::string_view file(e->name);
          touched = touched || file == name_ || file == name_ + "-wal";
        }
        at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      }
    }
  }

  int fd_ = -1;
  std::string name_;
};

class SqliteBackend final : public Backend {
 public:
  SqliteBackend(const std::string& path, const OpenOptions& options)
      : path_(path), lock_timeout_(options.lock_timeout), read_only_(options.read_only) {
    if (path.starts_with("file:")) {
      throw InvalidArgument(fmt::format(
          "{} is an SQLite URI; cplane takes a file path (write ./{} for a file of that name)",
          quote_id(path), path));
    }
    const bool in_memory = path.empty() || path == ":memory:";
    const bool create = options.create && !read_only_;
    struct stat st {};
    const bool exists = !in_memory && ::stat(path.c_str(), &st) == 0;
    if (!in_memory && !exists && !create) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("no database at {}: {} (this command never creates one)",
                                     path, std::strerror(errno)));
    }
    if (exists && S_ISDIR(st.st_mode)) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("{} is a folder, not a database file", path));
    }
    if (exists && !S_ISREG(st.st_mode)) {
      // /dev/null, a FIFO, a device: SQLite would leave PATH-journal and
      // PATH-lock beside it (in /dev) and keep nothing.
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("{} is not a regular file", path));
    }
    if (exists && st.st_size == 0 && !create) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("{} is an empty file, not a cplane database (this command "
                                     "never creates one)",
                                     path));
    }
    // A new database never adopts a side file it did not make: a WAL left
    // by a database that was moved away (while a process still had it open)
    // would be applied to the new file or reset, losing that database's
    // acknowledged commits.
    if (create && !in_memory && (!exists || st.st_size == 0)) {
      if (auto why = foreign_side_files(path)) {
        throw StorageError(StorageError::Category::unavailable,
                           fmt::format("refusing to create a database at {}: {}", path, *why));
      }
    }
    // A reader needs PATH-wal and PATH-shm, or a folder it may create them
    // in. Writers keep both in place when they close (PERSIST_WAL, below),
    // so a reader in a folder it may not write finds them and reads the
    // WAL through a read-only wal-index, consistently with running writers.
    int flags = SQLITE_OPEN_NOMUTEX;
    if (read_only_) {
      flags |= SQLITE_OPEN_READONLY;
    } else {
      flags |= SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    }
    int rc = sqlite3_open_v2(path.c_str(), &db_, flags,
                             options.sqlite.coalesce_wal_writes ? coalescing_vfs_name() : nullptr);
    if (rc != SQLITE_OK) {
      std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      db_ = nullptr;
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("cannot open database {}: {}", path, message));
    }
    try {
      sqlite3_extended_result_codes(db_, 1);
      set_busy_timeout(lock_timeout_);
      // No checkpoint when a connection closes: it needs the database's
      // exclusive lock, so a process stopped there would hold off every
      // reader and writer. Checkpoints run inside commits (wal_autocheckpoint),
      // under the writer's lock and its timeout.
      sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
      // Identify the file in a read transaction before anything is written
      // or created beside it: a foreign or newer database is refused with
      // its journal mode untouched and no PATH-lock left behind.
      const int version = identify();
      if (!read_only_) {
        // Beside the file a symbolic link leads to, as SQLite keeps its WAL:
        // two names of one database share one lock and one area.
        std::error_code ec;
        std::string side = path;
        if (!in_memory && std::filesystem::is_symlink(path, ec)) {
          const auto target = std::filesystem::canonical(path, ec);
          if (!ec && !target.empty()) side = target.string();
        }
        if (options.sqlite.writer_flock && !in_memory) writer_lock_ = WriterLock(side + "-lock", path);
        if (version < kSqliteSchemaVersion) migrate();
        if (options.sqlite.combine && !in_memory) {
          // Without the area every command runs alone, which is always
          // correct: group commit is speed, not semantics.
          std::string why;
          combine_ = CombineArea::open(side + "-combine", path, why);
        }
        exec("PRAGMA synchronous=FULL", "cannot set synchronous on " + path);
        if (pragma_text("PRAGMA journal_mode=WAL") != "wal" && !in_memory) {
          throw StorageError(StorageError::Category::unavailable,
                             fmt::format("cannot switch database {} to WAL mode", path));
        }
        // PATH-wal and PATH-shm stay when the last connection closes: a
        // reader that may not create them (a read-only folder) still finds
        // them, and no connection rebuilds the wal-index on open (a process
        // stopped doing that would hold off everyone). The WAL is cut back
        // to 4 MiB whenever it restarts.
        int persist = 1;
        sqlite3_file_control(db_, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
        exec("PRAGMA journal_size_limit=4194304", "cannot set journal_size_limit on " + path);
        sqlite3_wal_hook(db_, &SqliteBackend::after_commit, this);
      }
      if (options.sqlite.cache_mib > 0) {
        exec(fmt::format("PRAGMA cache_size=-{}", options.sqlite.cache_mib * 1024).c_str(),
             "cannot set cache_size on " + path);
      }
      prepare();
    } catch (...) {
      stmts_ = {};
      sqlite3_close(db_);
      db_ = nullptr;
      throw;
    }
  }

  ~SqliteBackend() override {
    stmts_ = {};
    // A writer leaves the WAL empty behind it when no other writer is at
    // work: the next process to open the file then has nothing to rebuild
    // its wal-index from (the first connection to open a file always
    // rebuilds it), and the WAL never grows from process to process. Never
    // waits: with the lock taken or a reader in an old snapshot, it is left
    // for a later writer.
    if (wrote_ && sqlite3_get_autocommit(db_) && writer_lock_.try_lock()) {
      truncate_wal();
      writer_lock_.unlock();
    }
    sqlite3_close(db_);
  }

  // A checkpoint that copies the whole WAL into the database and cuts the
  // WAL to zero bytes, if no reader still needs it; otherwise what it can.
  void truncate_wal() noexcept {
    sqlite3_busy_timeout(db_, 0);
    sqlite3_wal_checkpoint_v2(db_, "main", SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
    set_busy_timeout(lock_timeout_);
  }

  // After every commit (SQLite's wal hook, in place of its autocheckpoint):
  // once the WAL holds kCheckpointFrames frames, a PASSIVE checkpoint, as
  // SQLite's own would, still under the writer's side lock and never
  // waiting for a reader. The next write then restarts the WAL from its
  // start, cut back to journal_size_limit. (A TRUNCATE here cost 20-28% of
  // a 16-worker drain: the file is cut and grown again every 1,000 frames.)
  static int after_commit(void* self, sqlite3* db, const char*, int frames) {
    if (frames >= kCheckpointFrames) {
      auto* backend = static_cast<SqliteBackend*>(self);
      sqlite3_busy_timeout(db, 0);
      sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      backend->set_busy_timeout(backend->lock_timeout_);
    }
    return SQLITE_OK;
  }
  static constexpr int kCheckpointFrames = 1000;  // SQLite's own autocheckpoint default

  void begin_write(Sync sync) override {
    check_usable();
    if (read_only_) {
      throw InvalidArgument(InvalidArgument::Reason::read_only,
                            fmt::format("{} was opened for reading: it cannot write", path_));
    }
    if (sync != sync_) {
      // Not a prepared statement: PRAGMA synchronous takes effect when it is
      // compiled, not when it is stepped.
      exec(sync == Sync::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
           "cannot set synchronous");
      sync_ = sync;
    }
    const auto start = Clock::now();
    const auto deadline = start + lock_timeout_;
    writer_lock_.lock(deadline, lock_timeout_);
    take_no_room_errno();  // forget a failure of an earlier transaction
    try {
      begin_immediate(start, deadline);
    } catch (...) {
      writer_lock_.unlock();
      throw;
    }
    in_write_ = true;
  }

  void begin_read() override {
    check_usable();
    stmts_.begin_deferred.run();
  }

  void commit() override {
    try {
      flush_digest();
      stmts_.commit.run();
    } catch (const StorageError& e) {
      rollback();
      // No room to write the commit: SQLite rolled it back, nothing was
      // written. Only a failure after the commit was handed to the disk
      // (an fsync error, an I/O error) leaves its outcome unknown.
      if (e.category() == StorageError::Category::busy ||
          e.category() == StorageError::Category::full) {
        throw;
      }
      throw StorageError(StorageError::Category::commit_unknown,
                         std::string("commit outcome unknown: ") + e.what());
    }
    wrote_ = true;
    request_id_ = 0;
    release_writer();
  }

  void rollback() noexcept override {
    digest_.reset();
    request_id_ = 0;
    if (!sqlite3_get_autocommit(db_) &&
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr) != SQLITE_OK &&
        !sqlite3_get_autocommit(db_)) {
      broken_ = true;  // still inside a transaction we cannot end: refuse further use
    }
    release_writer();
  }

  // None in a forked child: the store belongs to its parent, and a child
  // that combined would answer other processes' commands with its refusal.
  CombineArea* combine_area() override {
    return ::getpid() == pid_ && !broken_ ? combine_.get() : nullptr;
  }

  void savepoint() override {
    stmts_.savepoint.run();
    saved_digest_ = digest_;
  }
  void release_savepoint() override { stmts_.release_savepoint.run(); }
  bool rollback_to_savepoint() noexcept override {
    digest_ = saved_digest_;
    if (sqlite3_get_autocommit(db_)) return false;  // SQLite ended the transaction itself
    return sqlite3_exec(db_, "ROLLBACK TO combined; RELEASE combined", nullptr, nullptr, nullptr) ==
               SQLITE_OK &&
           !sqlite3_get_autocommit(db_);
  }
  void tag_requests(std::uint64_t request_id) override { request_id_ = request_id; }
  std::uint64_t rows_written() noexcept override {
    return static_cast<std::uint64_t>(sqlite3_total_changes64(db_));
  }
  bool in_write_transaction() noexcept override { return in_write_ && !sqlite3_get_autocommit(db_); }

  std::unique_ptr<Cursor<RawEvent>> scan_after(Seq after) override {
    auto cursor = std::make_unique<StatementCursor>(
        db_, fmt::format("SELECT {} FROM events WHERE seq > ?1 ORDER BY seq", kEventColumns));
    cursor->bind(after);
    return cursor;
  }

  Seq append(const Event& untagged) override {
    Event tagged;
    if (request_id_ != 0 && untagged.request_id != request_id_) {
      tagged = untagged;
      tagged.request_id = request_id_;
    }
    const Event& event = request_id_ != 0 ? tagged : untagged;
    const std::string body = encode(event);
    const StreamRef stream = stream_of(event);
    const std::string_view kind = to_string(stream.kind);
    LogDigestState& digest = writing_digest();
    Hash prev = kNoHash;
    std::int64_t revision = 0;
    auto& head = stmts_.find_head.bind(kind, stream.id);
    if (head.step()) {
      revision = head.i64(0);
      head.blob_into(1, scratch_);
      if (!hash_from_bytes(scratch_, prev)) {
        head.reset();
        throw StorageError(StorageError::Category::corruption,
                           fmt::format("the head of stream {} {} holds no hash (edited outside "
                                       "cplane): run cplane verify",
                                       kind, quote_id(stream.id)));
      }
    }
    head.reset();
    const Seq seq = digest.last_seq + 1;
    ++revision;
    const Hash hash = chain_hash(prev, seq, revision, kind, stream.id, body);
    stmts_.append
        .bind(seq, NullIfEmpty{event.item_id}, event.project_id, type_name(event.body), event.at,
              Blob{body}, kind, stream.id, revision, Blob{as_bytes(hash)})
        .run();
    // An existing head is updated in place (INSERT OR REPLACE would delete
    // and reinsert it); a new stream's is inserted.
    if (revision > 1) {
      stmts_.update_head.bind(kind, stream.id, revision, seq, Blob{as_bytes(hash)}).run();
    }
    if (revision == 1 || sqlite3_changes(db_) == 0) {
      stmts_.put_head.bind(kind, stream.id, revision, seq, Blob{as_bytes(hash)}).run();
    }
    xor_into(digest.digest, prev);
    xor_into(digest.digest, hash);
    ++digest.events;
    digest.last_seq = seq;
    return seq;
  }

  void import_event(const RawEvent& e) override {
    stmts_.append
        .bind(e.seq, NullIfEmpty{e.item_id}, e.project_id, e.type, e.at, Blob{e.body},
              e.stream_kind, e.stream_id, e.revision, Blob{e.hash})
        .run();
  }

  void put_head(const StreamHead& h) override {
    stmts_.put_head.bind(h.stream_kind, h.stream_id, h.revision, h.last_seq, Blob{h.hash}).run();
  }

  void put_log_digest(const LogDigest& d) override {
    digest_.reset();
    Statement(db_, "INSERT OR REPLACE INTO log_digest (shard, events, last_seq, digest) "
                   "VALUES (0, ?1, ?2, ?3)")
        .bind(d.events, d.last_seq, Blob{d.digest})
        .run();
  }

  std::unique_ptr<Cursor<StreamHead>> scan_heads(StreamKind kind) override {
    auto cursor = std::make_unique<HeadCursor>(
        db_, "SELECT stream_kind, stream_id, revision, last_seq, hash FROM stream_heads "
             "WHERE stream_kind = ?1 ORDER BY stream_id");
    cursor->bind(to_string(kind));
    return cursor;
  }

  std::vector<StreamHead> unfiled_heads() override {
    // Range seeks around the known kinds on the primary key (NOT IN would
    // read every head).
    HeadCursor cursor(db_, around_known_kinds(
                               "SELECT stream_kind, stream_id, revision, last_seq, hash FROM "
                               "stream_heads")
                               .c_str());
    bind_known_kinds(cursor);
    std::vector<StreamHead> out;
    StreamHead h;
    while (cursor.next(h)) out.push_back(h);
    return out;
  }

  // `select` once per gap around the known kinds' names, in sorted order:
  // "... WHERE stream_kind < ?1 UNION ALL ... > ?1 AND < ?2 ... > ?N".
  static std::string around_known_kinds(const std::string& select) {
    const std::size_t n = std::size(kStreamKinds);
    std::string sql = select + " WHERE stream_kind < ?1";
    for (std::size_t i = 1; i < n; ++i) {
      sql += fmt::format(" UNION ALL {} WHERE stream_kind > ?{} AND stream_kind < ?{}", select, i,
                         i + 1);
    }
    return sql + fmt::format(" UNION ALL {} WHERE stream_kind > ?{}", select, n);
  }
  template <class C>
  static void bind_known_kinds(C& cursor) {
    std::array<std::string_view, std::size(kStreamKinds)> names;
    for (std::size_t i = 0; i < names.size(); ++i) names[i] = to_string(kStreamKinds[i]);
    std::sort(names.begin(), names.end());
    std::apply([&](const auto&... name) { cursor.bind(name...); }, names);
  }

  std::optional<LogDigest> log_digest() override {
    Statement s(db_, "SELECT events, last_seq, digest FROM log_digest WHERE shard = 0");
    s.bind();
    if (!s.step()) return std::nullopt;
    LogDigest d{s.i64(0), s.i64(1), {}};
    s.blob_into(2, d.digest);
    return d;
  }

  std::vector<RawEvent> stream_events(const StreamRef& stream) override {
    std::vector<RawEvent> out;
    auto& s = stmts_.stream_events.bind(to_string(stream.kind), stream.id);
    while (s.step()) out.push_back(read_event(s));
    s.reset();
    return out;
  }

  std::unique_ptr<Cursor<RawEvent>> scan_stream(StreamKind kind) override {
    auto cursor = std::make_unique<StatementCursor>(
        db_, fmt::format("SELECT {} FROM events WHERE stream_kind = ?1 ORDER BY stream_id, seq",
                         kEventColumns));
    cursor->bind(to_string(kind));
    return cursor;
  }

  std::unique_ptr<Cursor<RawEvent>> scan_unfiled() override {
    // Range seeks on events_by_stream around the known kinds (a NOT IN, or
    // an ORDER BY seq, would read the whole log). Integers sort before text
    // and blobs after it, so tampered types are found too.
    auto cursor = std::make_unique<StatementCursor>(
        db_, around_known_kinds(fmt::format("SELECT {} FROM events", kEventColumns)));
    bind_known_kinds(*cursor);
    return cursor;
  }

  std::int64_t event_count() override { return pragma("SELECT count(*) FROM events"); }

  Micros now() override { return now_micros(); }

  std::optional<ItemRow> find_item(std::string_view item_id) override {
    return one_item(stmts_.find_item.bind(item_id));
  }

  void insert_item(const ItemRow& r) override {
    try {
      bind_item(stmts_.insert_item, r).run();
    } catch (const StorageError& e) {
      if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_PRIMARYKEY) {
        throw StorageError(StorageError::Category::io,
                           fmt::format("item id {} is already taken", r.item_id));
      }
      throw;
    }
  }

  void put_item(const ItemRow& r) override { bind_item(stmts_.put_item, r).run(); }

  std::optional<ItemRow> find_item_by_key(const std::string& project_id,
                                          std::string_view key) override {
    return one_item(stmts_.find_item_by_key.bind(project_id, key));
  }

  std::optional<Micros> next_lapse(const std::string& project_id) override {
    Statement s(db_, "SELECT min(t) FROM (SELECT min(lease_expires_at) AS t FROM items WHERE "
                     "status = 'claimed' AND project_id = ?1 UNION ALL SELECT min(run_at) FROM "
                     "items WHERE status = 'scheduled' AND project_id = ?1)");
    s.bind(project_id);
    if (!s.step() || s.type(0) == SQLITE_NULL) return std::nullopt;
    return s.i64(0);
  }

  // Waiting for work: every commit writes PATH-wal, so an inotify watch on
  // the folder, filtered to the database's own files, wakes a waiter on
  // each commit of any process (no polling; a wake-up that finds nothing
  // waits again). Nothing to announce.
  void announce_work() override {}

  void wait_for_work(std::chrono::steady_clock::time_point deadline) override {
    check_usable();
    if (!work_watch_) {
      work_watch_.emplace(path_);
      return;  // the caller looks once more: work may have come before the watch
    }
    work_watch_->wait(deadline);
  }

  static Statement& bind_item(Statement& s, const ItemRow& r) {
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
                  r.ended_fence);
  }

  void delete_item(std::string_view item_id) override { stmts_.delete_item.bind(item_id).run(); }

  std::optional<ItemRow> oldest_ready(const std::string& project_id) override {
    return one_item(stmts_.oldest_ready.bind(project_id));
  }

  std::vector<ItemRow> lapsed_items(Micros now, const std::string& project_id) override {
    std::vector<ItemRow> out;
    Statement s(db_, fmt::format("SELECT {} FROM items WHERE status = 'claimed' AND project_id = "
                                 "?1 AND lease_expires_at <= ?2 ORDER BY lease_expires_at, "
                                 "queued_seq",
                                 kItemColumns)
                         .c_str());
    s.bind(project_id, now);
    while (s.step()) out.push_back(read_item(s));
    return out;
  }

  std::optional<ItemRow> earliest_lapsed(Micros now, const std::string& project_id) override {
    return one_item(stmts_.earliest_lapsed.bind(project_id, now));
  }

  std::optional<ItemRow> earliest_due(Micros now, const std::string& project_id) override {
    return one_item(stmts_.earliest_due.bind(project_id, now));
  }

  std::vector<std::string> claimable_project_ids(const std::string* actor) override {
    auto& s = actor == nullptr ? stmts_.all_unpaused_ids.bind()
                               : stmts_.actor_unpaused_ids.bind(*actor);
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    s.reset();
    return out;
  }

  std::vector<ItemRow> items_in_status(const std::string& project_id, ItemStatus status,
                                       std::size_t limit) override {
    Statement s(db_, fmt::format("SELECT {} FROM items WHERE project_id = ?1 AND status = '{}' "
                                 "ORDER BY {} LIMIT ?2",
                                 kItemColumns, to_string(status), status_order(status))
                         .c_str());
    s.bind(project_id, static_cast<std::int64_t>(limit));
    std::vector<ItemRow> out;
    while (s.step()) out.push_back(read_item(s));
    return out;
  }

  std::unique_ptr<Cursor<ScannedItem>> scan_items() override {
    return std::make_unique<ItemStatementCursor>(
        db_, fmt::format("SELECT {} FROM items ORDER BY item_id", kItemColumns));
  }

  std::optional<SessionRow> find_session(std::string_view session_id) override {
    auto& s = stmts_.find_session.bind(session_id);
    std::optional<SessionRow> out;
    if (s.step()) out = read_session(s);
    s.reset();
    return out;
  }

  void put_session(const SessionRow& r) override {
    stmts_.put_session
        .bind(r.session_id, NullIfEmpty{r.actor}, r.opened_at, r.last_seen_at,
              NullIfZero{r.closed_at}, r.last_seq)
        .run();
  }

  void delete_session(std::string_view session_id) override {
    stmts_.delete_session.bind(session_id).run();
  }

  std::vector<ItemRow> session_items(std::string_view session_id) override {
    auto& s = stmts_.session_items.bind(session_id);
    std::vector<ItemRow> out;
    while (s.step()) out.push_back(read_item(s));
    s.reset();
    return out;
  }

  std::unique_ptr<Cursor<ItemRow>> scan_allocatable(const std::string& project_id) override {
    // The statement is prepared once per connection; one walk at a time.
    return std::make_unique<AllocationCursor>(stmts_.allocation.bind(project_id));
  }

  void put_terminal_lock(const TerminalLockRow& r) override {
    stmts_.put_terminal_lock.bind(r.item_id, r.since, r.reason).run();
  }
  void delete_terminal_lock(std::string_view item_id) override {
    stmts_.delete_terminal_lock.bind(item_id).run();
  }
  std::unique_ptr<Cursor<TerminalLockRow>> scan_terminal_locks() override {
    auto cursor = std::make_unique<RowCursor<TerminalLockRow>>(
        db_, "SELECT item_id, since, reason FROM terminal_locks ORDER BY item_id",
        [](const Statement& s, TerminalLockRow& row) {
          row = TerminalLockRow{s.text(0), s.i64(1), s.text(2)};
        });
    cursor->bind();
    return cursor;
  }

  std::optional<IncidentLinkRow> find_incident(std::string_view incident_id) override {
    auto& s = stmts_.find_incident.bind(incident_id);
    std::optional<IncidentLinkRow> out;
    if (s.step()) out = read_incident(s);
    s.reset();
    return out;
  }
  void put_incident(const IncidentLinkRow& r) override {
    auto opt_text = [](const std::optional<std::string>& v) {
      return v ? OptionalText{*v, true} : OptionalText{{}, false};
    };
    stmts_.put_incident
        .bind(r.provider, r.fingerprint, r.org, r.repo, r.environment, r.target,
              opt_text(r.status),
              r.event_count ? OptionalInt{*r.event_count, true} : OptionalInt{0, false},
              opt_text(r.permalink), opt_text(r.first_seen), opt_text(r.last_seen),
              opt_text(r.linked_prs), r.incident_id, r.linked_at, r.updated_at, r.last_seq)
        .run();
  }
  void delete_incident(std::string_view incident_id) override {
    stmts_.delete_incident.bind(incident_id).run();
  }
  std::unique_ptr<Cursor<IncidentLinkRow>> scan_incidents() override {
    auto cursor = std::make_unique<RowCursor<IncidentLinkRow>>(
        db_, fmt::format("SELECT {} FROM incident_links ORDER BY incident_id", kIncidentColumns),
        [](const Statement& s, IncidentLinkRow& row) { row = read_incident(s); });
    cursor->bind();
    return cursor;
  }
  std::vector<IncidentLinkRow> incidents_for(std::string_view target) override {
    Statement s(db_, fmt::format("SELECT {} FROM incident_links WHERE target = ?1 ORDER BY "
                                 "incident_id",
                                 kIncidentColumns)
                         .c_str());
    s.bind(target);
    std::vector<IncidentLinkRow> out;
    while (s.step()) out.push_back(read_incident(s));
    return out;
  }

  std::unique_ptr<Cursor<SessionRow>> scan_sessions() override {
    return std::make_unique<SessionCursor>(
        db_, fmt::format("SELECT {} FROM sessions ORDER BY session_id", kSessionColumns));
  }

  std::optional<ScheduleRow> find_schedule(std::string_view name) override {
    Statement s(db_, fmt::format("SELECT {} FROM schedules WHERE name = ?1", kScheduleColumns).c_str());
    s.bind(name);
    if (!s.step()) return std::nullopt;
    ScheduleRow row;
    fill_schedule(s, row);
    return row;
  }
  void put_schedule(const ScheduleRow& r) override {
    Statement s(db_, fmt::format("INSERT OR REPLACE INTO schedules ({}) VALUES (?1, ?2, ?3, ?4, "
                                 "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                                 kScheduleColumns)
                         .c_str());
    s.bind(r.name, r.project_id, r.cron, r.zone, r.payload,
           static_cast<std::int64_t>(r.overlap_skip ? 1 : 0), r.catch_up, r.next_at,
           static_cast<std::int64_t>(r.paused ? 1 : 0), static_cast<std::int64_t>(r.removed ? 1 : 0),
           NullIfEmpty{r.last_item}, r.last_occurrence, r.fired, r.created_at, r.updated_at,
           r.last_seq)
        .run();
  }
  void delete_schedule(std::string_view name) override {
    Statement s(db_, "DELETE FROM schedules WHERE name = ?1");
    s.bind(name).run();
  }
  std::unique_ptr<Cursor<ScheduleRow>> scan_schedules() override {
    auto c = std::make_unique<RowCursor<ScheduleRow>>(
        db_, fmt::format("SELECT {} FROM schedules ORDER BY name", kScheduleColumns),
        &fill_schedule);
    c->bind();
    return c;
  }
  std::vector<ScheduleRow> due_schedules(Micros now, std::size_t limit) override {
    auto& s = stmts_.due_schedules.bind(now, static_cast<std::int64_t>(limit));
    std::vector<ScheduleRow> out;
    while (s.step()) {
      ScheduleRow row;
      fill_schedule(s, row);
      out.push_back(std::move(row));
    }
    s.reset();
    return out;
  }

  std::optional<ProjectRow> find_project(std::string_view project_id) override {
    auto& s = stmts_.find_project.bind(project_id);
    std::optional<ProjectRow> out;
    if (s.step()) out = read_project(s);
    s.reset();
    return out;
  }

  void put_project(const ProjectRow& r) override {
    stmts_.put_project
        .bind(r.project_id, r.title, r.status, r.created_at, r.last_seq,
              static_cast<std::int64_t>(r.max_attempts), r.backoff,
              static_cast<std::int64_t>(r.paused ? 1 : 0), r.pause_reason)
        .run();
  }

  void delete_project(std::string_view project_id) override {
    stmts_.delete_project.bind(project_id).run();
  }

  bool is_assigned(std::string_view project_id, std::string_view actor) override {
    auto& s = stmts_.is_assigned.bind(project_id, actor);
    const bool found = s.step();
    s.reset();
    return found;
  }

  void put_assignment(const ProjectActorRow& r) override {
    stmts_.put_assignment.bind(r.project_id, r.actor, r.assigned_at, r.last_seq).run();
  }

  void delete_assignment(std::string_view project_id, std::string_view actor) override {
    stmts_.delete_assignment.bind(project_id, actor).run();
  }

  std::vector<std::string> project_ids(const std::string* actor) override {
    auto& s = actor == nullptr ? stmts_.all_project_ids.bind()
                               : stmts_.actor_project_ids.bind(*actor);
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    s.reset();
    return out;
  }

  std::vector<ProjectRow> all_projects() override {
    Statement s(db_,
                fmt::format("SELECT {} FROM projects ORDER BY project_id", kProjectColumns).c_str());
    s.bind();
    std::vector<ProjectRow> out;
    while (s.step()) out.push_back(read_project(s));
    return out;
  }

  std::vector<ProjectActorRow> all_assignments() override {
    Statement s(db_,
                "SELECT project_id, actor, assigned_at, last_seq FROM project_actors "
                "ORDER BY project_id, actor");
    s.bind();
    std::vector<ProjectActorRow> out;
    while (s.step()) out.push_back(ProjectActorRow{s.text(0), s.text(1), s.i64(2), s.i64(3)});
    return out;
  }

  std::array<std::int64_t, kItemStatuses + 1> status_counts(const std::string* project_id) override {
    Statement s(db_, project_id == nullptr
                         ? "SELECT status, count(*) FROM items GROUP BY status"
                         : "SELECT status, count(*) FROM items WHERE project_id = ?1 GROUP BY status");
    if (project_id == nullptr) {
      s.bind();
    } else {
      s.bind(*project_id);
    }
    std::array<std::int64_t, kItemStatuses + 1> out{};
    while (s.step()) {
      if (auto status = parse_item_status(s.text(0))) {
        out[static_cast<int>(*status)] = s.i64(1);
      } else {
        out[kItemStatuses] += s.i64(1);
      }
    }
    return out;
  }

  int synchronous_level() {
    Statement s(db_, "PRAGMA synchronous");
    s.bind();
    return s.step() ? static_cast<int>(s.i64(0)) : -1;
  }

  // Dense, unless the log was restored from a backend whose seqs have gaps.
  bool seqs_dense() override {
    Statement q(db_, "SELECT 1 FROM store_info WHERE key = 'seqs' AND value = 'sparse'");
    q.bind();
    return !q.step();
  }
  void put_seqs_sparse() override {
    Statement(db_, "INSERT OR REPLACE INTO store_info (key, value) VALUES ('seqs', 'sparse')")
        .bind()
        .run();
  }

  Seq last_seq() override {
    auto& newest = stmts_.last_seq.bind();
    const Seq seq = newest.step() ? newest.i64(0) : 0;
    newest.reset();
    return seq;
  }

 private:
  struct Statements {
    Statement begin_immediate, begin_deferred, commit, savepoint, release_savepoint, last_seq;
    Statement append, stream_events, find_head, put_head, update_head, put_digest, load_digest;
    Statement find_item, find_item_by_key, insert_item, put_item, delete_item;
    Statement find_session, put_session, delete_session, session_items;
    Statement put_terminal_lock, delete_terminal_lock, allocation;
    Statement find_incident, put_incident, delete_incident;
    Statement oldest_ready, earliest_lapsed, earliest_due, all_unpaused_ids, actor_unpaused_ids;
    Statement due_schedules;
    Statement find_project, put_project, delete_project;
    Statement is_assigned, put_assignment, delete_assignment;
    Statement all_project_ids, actor_project_ids;
  };

  static ProjectRow read_project(const Statement& s) {
    return ProjectRow{s.text(0), s.text(1), s.text(2), s.i64(3), s.i64(4),
                      static_cast<std::uint32_t>(s.i64(5)), s.text(6), s.i64(7) != 0, s.text(8)};
  }

  std::optional<ItemRow> one_item(Statement& s) {
    std::optional<ItemRow> out;
    if (s.step()) out = read_item(s);
    s.reset();
    return out;
  }

  void exec(const char* sql, const std::string& what) {
    char* error = nullptr;
    int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &error);
    sqlite3_free(error);
    if (rc != SQLITE_OK) fail(db_, rc, what);
  }

  std::string pragma_text(const char* sql) {
    Statement s(db_, sql);
    s.bind();
    return s.step() ? s.text(0) : std::string();
  }

  std::int64_t pragma(const char* sql) {
    Statement s(db_, sql);
    s.bind();
    return s.step() ? s.i64(0) : 0;
  }

  // A connection must not be used by a process it was not opened in (after
  // fork, parent and child would share one flock and one SQLite handle), nor
  // after a ROLLBACK that failed.
  void check_usable() {
    if (::getpid() != pid_) {
      throw StorageError(StorageError::Category::unavailable,
                         "this store was opened in another process (before fork): open a new one");
    }
    if (broken_) {
      throw StorageError(StorageError::Category::io,
                         "this store's connection could not roll back a transaction: reopen it");
    }
  }

  // The log's digest as this write transaction leaves it: read at its first
  // append, written back once before its commit.
  struct LogDigestState {
    std::int64_t events = 0;
    Seq last_seq = 0;
    Hash digest{};
  };
  LogDigestState& writing_digest() {
    if (digest_) return *digest_;
    std::optional<LogDigest> stored;
    Seq newest_event = 0;
    auto& load = stmts_.load_digest.bind();
    if (load.step()) {
      stored = LogDigest{load.i64(0), load.i64(1), {}};
      load.blob_into(2, stored->digest);
      newest_event = load.i64(3);
    }
    load.reset();
    Hash hash{};
    if (!stored || !hash_from_bytes(stored->digest, hash)) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("{}: the log's digest (table log_digest) is missing or "
                                     "damaged: the log was edited outside cplane. Nothing was "
                                     "written; run cplane verify",
                                     path_));
    }
    // A seq is never handed out twice, not even one whose event was cut off
    // (the digest remembers it), nor one a foreign insert took.
    const Seq newest = std::max(stored->last_seq, newest_event);
    digest_ = LogDigestState{stored->events, newest, hash};
    return *digest_;
  }
  void flush_digest() {
    if (!digest_) return;
    stmts_.put_digest.bind(digest_->events, digest_->last_seq, Blob{as_bytes(digest_->digest)}).run();
    digest_.reset();
  }

  void release_writer() noexcept {
    if (in_write_) {
      in_write_ = false;
      writer_lock_.unlock();
    }
  }

  void set_busy_timeout(std::chrono::milliseconds timeout) {
    sqlite3_busy_timeout(db_, static_cast<int>(std::max<std::int64_t>(timeout.count(), 0)));
  }

  // BEGIN IMMEDIATE: SQLite's own write lock, waited for by its busy handler
  // for what is left of the lock timeout (only writers that bypass PATH-lock,
  // such as the sqlite3 shell, make it wait).
  void begin_immediate(Clock::time_point start, Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const bool shortened = Clock::now() - start > std::chrono::milliseconds{1};
    if (shortened) set_busy_timeout(left);
    try {
      stmts_.begin_immediate.run();
    } catch (const StorageError& e) {
      if (shortened) set_busy_timeout(lock_timeout_);
      if (e.category() != StorageError::Category::busy) throw;
      throw StorageError(
          StorageError::Category::busy,
          fmt::format("gave up after {} waiting for the write lock of {}: another connection "
                      "that does not take {}-lock (the sqlite3 shell, another program) holds a "
                      "write transaction, and may be stopped; retry, or raise --lock-timeout",
                      WriterLock::describe_timeout(lock_timeout_), path_, path_));
    }
    if (shortened) set_busy_timeout(lock_timeout_);
  }

  // Reads the schema version in a read transaction and refuses what this
  // build must not touch. Returns the version (0: an empty file, to create).
  int identify() {
    exec("BEGIN DEFERRED", "cannot read database " + path_);
    struct End {
      sqlite3* db;
      ~End() { sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr); }
    } end{db_};
    std::int64_t version = 0, application = 0;
    bool has_tables = false;
    try {
      version = pragma("PRAGMA user_version");
      application = pragma("PRAGMA application_id");
      has_tables = pragma("SELECT count(*) FROM sqlite_master") != 0;
    } catch (const StorageError& e) {
      if (e.category() == StorageError::Category::busy) {
        throw StorageError(
            StorageError::Category::busy,
            fmt::format("gave up after {} waiting to open {}: another connection holds it "
                        "exclusively (recovering its WAL index, or an old cplane checkpointing "
                        "as it closes), and may be stopped; retry, or raise --lock-timeout",
                        WriterLock::describe_timeout(lock_timeout_), path_));
      }
      throw StorageError(e.category(), fmt::format("cannot read database {}: {}", path_, e.what()));
    }
    if (version == 0 && !has_tables && application != 0 && application != kApplicationId) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("{} is an empty SQLite database of another application "
                                     "(application id {}), not a cplane one",
                                     path_, application));
    }
    if (version == 0 && !has_tables) {
      if (read_only_) {
        throw StorageError(StorageError::Category::unavailable,
                           fmt::format("{} is an empty database, not a cplane one (this command "
                                       "never creates one)",
                                       path_));
      }
      return 0;
    }
    if (application != kApplicationId) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("{} is an SQLite database but not a cplane one", path_));
    }
    if (version < 1) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("database {} has schema version {}, which no cplane wrote",
                                     path_, version));
    }
    if (version > kSqliteSchemaVersion) {
      throw StorageError(StorageError::Category::incompatible,
                         fmt::format("database {} has schema version {}, newer than this "
                                     "cplane understands ({}): upgrade cplane, do not restore",
                                     path_, version, kSqliteSchemaVersion));
    }
    if (read_only_ && version < kSqliteSchemaVersion) {
      throw StorageError(StorageError::Category::incompatible,
                         fmt::format("database {} has schema version {}, older than this cplane "
                                     "reads ({}), and a read never migrates: run `cplane "
                                     "migrate` (or any write) once to upgrade it",
                                     path_, version, kSqliteSchemaVersion));
    }
    return static_cast<int>(version);
  }

  // Creates or migrates the schema under the write lock; the version is read
  // again inside, since another process may have done it meanwhile.
  void migrate() {
    const auto start = Clock::now();
    const auto deadline = start + lock_timeout_;
    writer_lock_.lock(deadline, lock_timeout_);
    struct Unlock {
      WriterLock& l;
      ~Unlock() { l.unlock(); }
    } unlock{writer_lock_};
    exec("BEGIN IMMEDIATE", "cannot open database " + path_);
    try {
      const auto version = pragma("PRAGMA user_version");
      if (version == 0) {
        if (pragma("SELECT count(*) FROM sqlite_master") != 0) {
          throw StorageError(StorageError::Category::corruption,
                             fmt::format("{} is an SQLite database but not a cplane one", path_));
        }
        exec(kSchema.c_str(), "cannot create schema");
        stamp_database_id();
        exec(fmt::format("PRAGMA application_id={}", kApplicationId).c_str(),
             "cannot stamp application id");
      } else {
        for (auto v = version; v < kSqliteSchemaVersion; ++v) {
          exec(kMigrations[v + 1], fmt::format("cannot migrate the schema from version {} to {}",
                                               v, v + 1));
          if (v + 1 == 4) {
            chain_existing_log();
            stamp_database_id();
          }
        }
      }
      exec(fmt::format("PRAGMA user_version={}", kSqliteSchemaVersion).c_str(),
           "cannot stamp schema version");
      exec("COMMIT", "cannot commit schema");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  // A random id that names this database (and not its copies' paths) in
  // exports, so that an audit can say which log it read.
  void stamp_database_id() {
    unsigned char bytes[16];
    if (sodium_init() < 0) throw InternalError("libsodium failed to initialise");
    randombytes_buf(bytes, sizeof bytes);
    std::string id;
    for (unsigned char b : bytes) id += fmt::format("{:02x}", b);
    Statement(db_, "INSERT INTO store_info (key, value) VALUES ('database_id', ?1)").bind(id).run();
  }

  int schema_version() const noexcept override { return kSqliteSchemaVersion; }

  std::string database_id() override {
    Statement s(db_, "SELECT value FROM store_info WHERE key = 'database_id'");
    s.bind();
    return s.step() ? s.text(0) : std::string();
  }

  // Migration to version 4: the chain computed once over the log as it
  // stands, stream by stream. Whatever was edited before this cannot be
  // seen: the chain vouches only for what comes after.
  void chain_existing_log() {
    Statement scan(db_, "SELECT seq, stream_kind, stream_id, body FROM events "
                        "ORDER BY stream_kind, stream_id, seq");
    Statement update(db_, "UPDATE events SET stream_rev = ?1, hash = ?2 WHERE seq = ?3");
    Statement head(db_, "INSERT INTO stream_heads (stream_kind, stream_id, revision, last_seq, "
                        "hash) VALUES (?1, ?2, ?3, ?4, ?5)");
    scan.bind();
    std::string kind, id, body, prev_kind, prev_id;
    Hash prev = kNoHash, digest{};
    std::int64_t revision = 0, events = 0;
    Seq last = 0, newest = 0;
    auto close_stream = [&] {
      if (revision == 0) return;
      head.bind(prev_kind, prev_id, revision, last, Blob{as_bytes(prev)}).run();
      xor_into(digest, prev);
    };
    while (scan.step()) {
      const Seq seq = scan.i64(0);
      scan.text_into(1, kind);
      scan.text_into(2, id);
      scan.blob_into(3, body);
      if (revision == 0 || kind != prev_kind || id != prev_id) {
        close_stream();
        prev_kind = kind;
        prev_id = id;
        prev = kNoHash;
        revision = 0;
      }
      ++revision;
      prev = chain_hash(prev, seq, revision, kind, id, body);
      last = seq;
      newest = std::max(newest, seq);
      ++events;
      update.bind(revision, Blob{as_bytes(prev)}, seq).run();
    }
    close_stream();
    Statement(db_, "INSERT INTO log_digest (shard, events, last_seq, digest) VALUES (0, ?1, ?2, ?3)")
        .bind(events, newest, Blob{as_bytes(digest)})
        .run();
  }

  void prepare() {
    auto p = [&](const std::string& sql) { return Statement(db_, sql.c_str()); };
    stmts_.begin_immediate = p("BEGIN IMMEDIATE");
    stmts_.begin_deferred = p("BEGIN DEFERRED");
    stmts_.commit = p("COMMIT");
    stmts_.savepoint = p("SAVEPOINT combined");
    stmts_.release_savepoint = p("RELEASE combined");
    stmts_.last_seq = p("SELECT coalesce(max(seq), 0) FROM events");
    stmts_.append = p(
        "INSERT INTO events (seq, item_id, project_id, type, at, body, stream_kind, stream_id, "
        "stream_rev, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    stmts_.find_head = p(
        "SELECT revision, hash FROM stream_heads WHERE stream_kind = ?1 AND stream_id = ?2");
    stmts_.put_head = p(
        "INSERT OR REPLACE INTO stream_heads (stream_kind, stream_id, revision, last_seq, hash) "
        "VALUES (?1, ?2, ?3, ?4, ?5)");
    stmts_.update_head = p(
        "UPDATE stream_heads SET revision = ?3, last_seq = ?4, hash = ?5 "
        "WHERE stream_kind = ?1 AND stream_id = ?2");
    stmts_.load_digest = p(
        "SELECT events, last_seq, digest, (SELECT coalesce(max(seq), 0) FROM events) "
        "FROM log_digest WHERE shard = 0");
    stmts_.put_digest = p(
        "UPDATE log_digest SET events = ?1, last_seq = ?2, digest = ?3 WHERE shard = 0");
    stmts_.stream_events = p(fmt::format(
        "SELECT {} FROM events WHERE stream_kind = ?1 AND stream_id = ?2 ORDER BY seq",
        kEventColumns));
    stmts_.find_item = p(fmt::format("SELECT {} FROM items WHERE item_id = ?1", kItemColumns));
    stmts_.find_item_by_key = p(fmt::format(
        "SELECT {} FROM items WHERE project_id = ?1 AND idem_key = ?2", kItemColumns));
    stmts_.insert_item =
        p(fmt::format("INSERT INTO items ({}) VALUES ({})", kItemColumns, kItemValues));
    stmts_.put_item =
        p(fmt::format("INSERT OR REPLACE INTO items ({}) VALUES ({})", kItemColumns, kItemValues));
    stmts_.find_session =
        p(fmt::format("SELECT {} FROM sessions WHERE session_id = ?1", kSessionColumns));
    stmts_.put_session = p(fmt::format(
        "INSERT OR REPLACE INTO sessions ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)", kSessionColumns));
    stmts_.delete_session = p("DELETE FROM sessions WHERE session_id = ?1");
    stmts_.put_terminal_lock =
        p("INSERT OR REPLACE INTO terminal_locks (item_id, since, reason) VALUES (?1, ?2, ?3)");
    stmts_.delete_terminal_lock = p("DELETE FROM terminal_locks WHERE item_id = ?1");
    stmts_.allocation = p(allocation_query());
    stmts_.find_incident =
        p(fmt::format("SELECT {} FROM incident_links WHERE incident_id = ?1", kIncidentColumns));
    stmts_.put_incident = p(fmt::format(
        "INSERT OR REPLACE INTO incident_links ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
        "?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        kIncidentColumns));
    stmts_.delete_incident = p("DELETE FROM incident_links WHERE incident_id = ?1");
    stmts_.session_items = p(fmt::format(
        "SELECT {} FROM items WHERE session = ?1 AND status = 'claimed' ORDER BY item_id",
        kItemColumns));
    stmts_.delete_item = p("DELETE FROM items WHERE item_id = ?1");
    const auto claim = claim_queries();
    stmts_.oldest_ready = p(claim[0]);
    stmts_.earliest_lapsed = p(claim[1]);
    stmts_.earliest_due = p(claim[2]);
    stmts_.due_schedules = p(fmt::format("SELECT {} FROM schedules WHERE paused = 0 AND removed "
                                         "= 0 AND next_at <= ?1 ORDER BY next_at LIMIT ?2",
                                         kScheduleColumns));
    stmts_.find_project =
        p(fmt::format("SELECT {} FROM projects WHERE project_id = ?1", kProjectColumns));
    stmts_.put_project = p(fmt::format(
        "INSERT OR REPLACE INTO projects ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        kProjectColumns));
    stmts_.all_unpaused_ids =
        p("SELECT project_id FROM projects WHERE paused = 0 ORDER BY project_id");
    stmts_.actor_unpaused_ids = p(
        "SELECT a.project_id FROM project_actors a JOIN projects p ON p.project_id = a.project_id "
        "WHERE a.actor = ?1 AND p.paused = 0 ORDER BY a.project_id");
    stmts_.delete_project = p("DELETE FROM projects WHERE project_id = ?1");
    stmts_.is_assigned = p("SELECT 1 FROM project_actors WHERE project_id = ?1 AND actor = ?2");
    stmts_.put_assignment = p(
        "INSERT OR REPLACE INTO project_actors (project_id, actor, assigned_at, last_seq) "
        "VALUES (?1, ?2, ?3, ?4)");
    stmts_.delete_assignment = p("DELETE FROM project_actors WHERE project_id = ?1 AND actor = ?2");
    stmts_.all_project_ids = p("SELECT project_id FROM projects ORDER BY project_id");
    stmts_.actor_project_ids = p(
        "SELECT project_id FROM project_actors WHERE actor = ?1 ORDER BY project_id");
  }

  std::string path_;
  std::chrono::milliseconds lock_timeout_;
  bool read_only_ = false;
  sqlite3* db_ = nullptr;
  WriterLock writer_lock_;
  Statements stmts_;
  Sync sync_ = Sync::full;
  bool in_write_ = false;
  bool broken_ = false;
  bool wrote_ = false;  // committed a write: leave the WAL empty on close
  std::optional<LogDigestState> digest_;  // inside a write transaction that appended
  std::optional<LogDigestState> saved_digest_;  // as it was at the savepoint
  std::uint64_t request_id_ = 0;  // tag_requests
  std::unique_ptr<CombineArea> combine_;
  std::string scratch_;
  pid_t pid_ = ::getpid();
  std::optional<WalWatch> work_watch_;  // armed by the first wait_for_work
};

}  // namespace

std::vector<std::string> claim_queries() {
  return {
      fmt::format("SELECT {} FROM items WHERE status = 'ready' AND project_id = ?1 "
                  "ORDER BY queued_seq LIMIT 1",
                  kItemColumns),
      fmt::format("SELECT {} FROM items WHERE status = 'claimed' AND project_id = ?1 "
                  "AND lease_expires_at <= ?2 ORDER BY lease_expires_at, queued_seq LIMIT 1",
                  kItemColumns),
      fmt::format("SELECT {} FROM items WHERE status = 'scheduled' AND project_id = ?1 "
                  "AND run_at <= ?2 ORDER BY run_at, queued_seq LIMIT 1",
                  kItemColumns),
  };
}

std::string allocation_query() {
  return fmt::format("SELECT {} FROM items WHERE project_id = ?1 AND status IN ('ready', "
                     "'claimed', 'scheduled') ORDER BY (terminal_since IS NOT NULL) DESC, priority DESC, "
                     "queued_seq",
                     kAllocationColumns);
}

std::vector<std::string> sqlite_integrity_check(const std::string& path) {
  std::vector<std::string> lines;
  sqlite3* db = nullptr;
  sqlite3_stmt* statement = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, 10'000);
    rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &statement, nullptr);
  }
  while (rc == SQLITE_OK || rc == SQLITE_ROW) {
    rc = sqlite3_step(statement);
    if (rc == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(statement, 0);
      lines.emplace_back(text != nullptr ? reinterpret_cast<const char*>(text) : "");
    }
  }
  if (rc != SQLITE_DONE) {
    lines.push_back(fmt::format("could not run on {}: {}", path,
                                db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  if (lines.size() == 1 && lines[0] == "ok") lines.clear();
  return lines;
}

int sqlite_synchronous(Backend& backend) {
  auto* sqlite = dynamic_cast<SqliteBackend*>(&backend);
  return sqlite != nullptr ? sqlite->synchronous_level() : -1;
}

std::unique_ptr<Backend> open_sqlite(const std::string& path, const OpenOptions& options) {
  return std::make_unique<SqliteBackend>(path, options);
}

namespace sqlite {

void throw_sqlite_error(sqlite3* db, int rc, const std::string& what) { fail(db, rc, what); }

}  // namespace sqlite

}  // namespace cplane::storage
