// The SQLite schema (version 11)
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

#include "storage/sqlite/schema.hpp"

#include <sodium.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "events/chain.hpp"
#include "events/errors.hpp"
#include "storage/sqlite/sqlite_backend.hpp"
#include "storage/sqlite/statement.hpp"

namespace cplane::storage::sqlite {
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
//   items_ready    a claim's ready candidate: (project, queue order; by
//                  priority first from version 8)
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
  status           TEXT NOT NULL CHECK (status IN ('ready', 'claimed') OR status IN ('done', 'failed') OR status IN ('closed', 'scheduled') OR status = 'cancelled'),
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

// Version 8: flow control (issue 23). items gains its concurrency key; a
// claim's ready candidate ranks by priority; projects gain their weight and
// fair-share pass; the limits table. Indexes, each with the query it serves:
//   items_ready      a claim's ready candidate: (project, priority, queue order)
//   items_ready_key, items_due_key, items_lease_key
//                    the first item of each key group of a project (a claim
//                    past a full key): one seek per group, never a walk
//   items_live_key   a key's live leases, counted inside the claim
//                    (partial: items without a key cost nothing)
// Version 9: the operator's view (issue 24). Indexes, each with the query
// it serves:
//   items_listing      items --project P [--status S]: one seek per status
//   items_listing_all  items [--status S] over every project
// both in queue order (queued_seq), from a cursor, either direction. Their
// status is keyed COLLATE NOCASE so that only the listing's own
// `status = ? COLLATE NOCASE` can use them: with no statistics, SQLite's
// planner would otherwise take them for a claim's `status = 'ready' AND
// project_id = ?` (two equalities) over items_ready, and sort. Statuses
// are lowercase words, so the listing loses nothing.
extern const char* const kMigration9;
extern const char* const kMigration10;
extern const char* const kMigration11;

const char* const kMigration8 = R"sql(
ALTER TABLE items ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT '';
DROP INDEX items_ready;
CREATE INDEX items_ready ON items(project_id, priority DESC, queued_seq) WHERE status = 'ready';
CREATE INDEX items_ready_key ON items(project_id, concurrency_key, priority DESC, queued_seq)
  WHERE status = 'ready';
CREATE INDEX items_due_key ON items(project_id, concurrency_key, run_at, queued_seq)
  WHERE status = 'scheduled';
CREATE INDEX items_lease_key ON items(project_id, concurrency_key, lease_expires_at, queued_seq)
  WHERE status = 'claimed';
CREATE INDEX items_live_key ON items(concurrency_key, lease_expires_at)
  WHERE status = 'claimed' AND concurrency_key <> '';
ALTER TABLE projects ADD COLUMN weight INTEGER NOT NULL DEFAULT 1;
ALTER TABLE projects ADD COLUMN fair_pass INTEGER NOT NULL DEFAULT 0;
CREATE TABLE limits (
  key          TEXT PRIMARY KEY,
  concurrency  INTEGER NOT NULL,
  rate_count   INTEGER NOT NULL,
  rate_period  INTEGER NOT NULL,
  burst        INTEGER NOT NULL,
  tat          INTEGER NOT NULL,
  removed      INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL,
  last_seq     INTEGER NOT NULL
) WITHOUT ROWID;
)sql";

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
    kSchedulesTable + kMigration8 + kMigration9 + kMigration10 + kMigration11;
const std::string kSchema =
    std::string(kSchemaTables) + kChainTables +
    "INSERT INTO log_digest (shard, events, last_seq, digest) VALUES (0, 0, 0, zeroblob(32));\n" +
    kSchemaRest;
const char* const kMigration9 = R"sql(
CREATE INDEX items_listing ON items(project_id, status COLLATE NOCASE, queued_seq);
CREATE INDEX items_listing_all ON items(status COLLATE NOCASE, queued_seq);
)sql";
// SQLite builds a temporary b-tree to test `x IN (...)` against three or
// more constants, each time a statement runs: the items' CHECK and the
// allocator index's predicate did so on every insert and update of a row
// (8 temporary b-trees per item drained, 10-15% of a drain's
// instructions). Lists of at most two are tested by comparisons. The
// CHECK is rewritten in place (rewrite_items_check), the index rebuilt.
const char* const kMigration10 = R"sql(
DROP INDEX items_alloc;
CREATE INDEX items_alloc ON items(project_id, (terminal_since IS NOT NULL) DESC, priority DESC,
                                  queued_seq)
  WHERE status IN ('ready', 'claimed') OR status = 'scheduled';
)sql";
// Version 11: retention (docs/retention.md, storage/sqlite/archive.cpp).
//   anchors    one row per archived stream, in place of its events and
//              head: where its chain ended (revision, last_seq, hash), how
//              many events it held and their seqs (`seqs`, 8 bytes
//              big-endian each, ascending), what it ended as (project_id,
//              state, fence: the highest it ever had, idem_key, ended_at)
//              and the segment file holding its events (segment_id,
//              segment_digest: BLAKE2b-256 of the file's bytes). Its
//              anchor_hash (storage/log_source.hpp) stands in the log's
//              digest where the head's hash stood, so an anchor edited or
//              deleted outside cplane disagrees with the digest.
//              anchors_by_key: an archived item's idempotency key keeps
//              deduplicating (enqueue --key answers the archived item).
//   segments   one row per segment file written: its id, digest, the path
//              it was written to, the cut-off (before) and project, and
//              what it holds. Written in the transaction that stores its
//              anchors.
const char* const kMigration11 = R"sql(
CREATE TABLE anchors (
  stream_kind    TEXT NOT NULL,
  stream_id      TEXT NOT NULL,
  revision       INTEGER NOT NULL,
  last_seq       INTEGER NOT NULL,
  hash           BLOB NOT NULL,
  events         INTEGER NOT NULL,
  seqs           BLOB NOT NULL,
  project_id     TEXT NOT NULL,
  state          TEXT NOT NULL,
  fence          INTEGER NOT NULL,
  idem_key       TEXT,
  ended_at       INTEGER NOT NULL,
  segment_id     TEXT NOT NULL,
  segment_digest BLOB NOT NULL,
  PRIMARY KEY (stream_kind, stream_id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX anchors_by_key ON anchors(project_id, idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE segments (
  segment_id  TEXT PRIMARY KEY,
  digest      BLOB NOT NULL,
  file        TEXT NOT NULL,
  before      INTEGER NOT NULL,
  project_id  TEXT NOT NULL,
  streams     INTEGER NOT NULL,
  events      INTEGER NOT NULL,
  bytes       INTEGER NOT NULL,
  archived_at INTEGER NOT NULL
) WITHOUT ROWID;
)sql";
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
//   7 -> 8  flow control (kMigration8): concurrency keys, limits, weights,
//           the ready index by priority.
//   8 -> 9  the operator's view (kMigration9): the listing indexes.
//   9 -> 10 no IN list of three or more constants in what every write of an
//           item evaluates (kMigration10, rewrite_items_check).
//   10 -> 11 retention: the anchors and segments tables (kMigration11).
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
    kMigration8,
    kMigration9,
    kMigration10,
    kMigration11,
};

// A random id that names this database (and not its copies' paths) in
// exports, so that an audit can say which log it read.
void stamp_database_id(sqlite3* db) {
  unsigned char bytes[16];
  if (sodium_init() < 0) throw InternalError("libsodium failed to initialise");
  randombytes_buf(bytes, sizeof bytes);
  std::string id;
  for (unsigned char b : bytes) id += fmt::format("{:02x}", b);
  Statement(db, "INSERT INTO store_info (key, value) VALUES ('database_id', ?1)").bind(id).run();
}

// Migration to version 4: the chain computed once over the log as it
// stands, stream by stream. Whatever was edited before this cannot be
// seen: the chain vouches only for what comes after.
void chain_existing_log(sqlite3* db) {
  Statement scan(db, "SELECT seq, stream_kind, stream_id, body FROM events "
                     "ORDER BY stream_kind, stream_id, seq");
  Statement update(db, "UPDATE events SET stream_rev = ?1, hash = ?2 WHERE seq = ?3");
  Statement head(db, "INSERT INTO stream_heads (stream_kind, stream_id, revision, last_seq, "
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
  Statement(db, "INSERT INTO log_digest (shard, events, last_seq, digest) VALUES (0, ?1, ?2, ?3)")
      .bind(events, newest, Blob{as_bytes(digest)})
      .run();
}

// Migration to version 10: the items' CHECK, as SQLite's documented way
// to change a constraint without copying the table (ALTER TABLE, "making
// other kinds of table schema changes"): the same set of statuses, so no
// row can break it and the file's format is unchanged; the schema's
// version moves on, so every connection reads it again. A table whose
// CHECK is not the old one (created at version 7 or later from the new
// text) is left as it is.
void rewrite_items_check(sqlite3* db) {
  static constexpr std::string_view kOld =
      "CHECK (status IN ('ready', 'claimed', 'done', 'failed', 'closed', 'scheduled', "
      "'cancelled'))";
  static constexpr std::string_view kNew =
      "CHECK (status IN ('ready', 'claimed') OR status IN ('done', 'failed') OR status IN "
      "('closed', 'scheduled') OR status = 'cancelled')";
  std::string sql = query_text(db, "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'items'");
  const auto at = sql.find(kOld);
  if (at == std::string::npos) return;
  sql.replace(at, kOld.size(), kNew);
  const auto version = query_int(db, "PRAGMA schema_version");
  exec(db, "PRAGMA writable_schema = ON", "cannot rewrite the items table's CHECK");
  try {
    Statement(db, "UPDATE sqlite_schema SET sql = ?1 WHERE type = 'table' AND name = 'items'")
        .bind(sql)
        .run();
    exec(db, fmt::format("PRAGMA schema_version = {}", version + 1).c_str(),
         "cannot rewrite the items table's CHECK");
  } catch (...) {
    sqlite3_exec(db, "PRAGMA writable_schema = OFF", nullptr, nullptr, nullptr);
    throw;
  }
  exec(db, "PRAGMA writable_schema = OFF", "cannot rewrite the items table's CHECK");
}

}  // namespace

int identify_schema(sqlite3* db, const std::string& path, bool read_only,
                    std::chrono::milliseconds lock_timeout) {
  exec(db, "BEGIN DEFERRED", "cannot read database " + path);
  struct End {
    sqlite3* db;
    ~End() { sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr); }
  } end{db};
  std::int64_t version = 0, application = 0;
  bool has_tables = false;
  try {
    version = query_int(db, "PRAGMA user_version");
    application = query_int(db, "PRAGMA application_id");
    has_tables = query_int(db, "SELECT count(*) FROM sqlite_master") != 0;
  } catch (const StorageError& e) {
    if (e.category() == StorageError::Category::busy) {
      throw StorageError(
          StorageError::Category::busy,
          fmt::format("gave up after {} waiting to open {}: another connection holds it "
                      "exclusively (recovering its WAL index, or an old cplane checkpointing "
                      "as it closes), and may be stopped; retry, or raise --lock-timeout",
                      WriterLock::describe_timeout(lock_timeout), path));
    }
    throw StorageError(e.category(), fmt::format("cannot read database {}: {}", path, e.what()));
  }
  if (version == 0 && !has_tables && application != 0 && application != kApplicationId) {
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("{} is an empty SQLite database of another application "
                                   "(application id {}), not a cplane one",
                                   path, application));
  }
  if (version == 0 && !has_tables) {
    if (read_only) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("{} is an empty database, not a cplane one (this command "
                                     "never creates one)",
                                     path));
    }
    return 0;
  }
  if (application != kApplicationId) {
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("{} is an SQLite database but not a cplane one", path));
  }
  if (version < 1) {
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("database {} has schema version {}, which no cplane wrote",
                                   path, version));
  }
  if (version > kSqliteSchemaVersion) {
    throw StorageError(StorageError::Category::incompatible,
                       fmt::format("database {} has schema version {}, newer than this "
                                   "cplane understands ({}): upgrade cplane, do not restore",
                                   path, version, kSqliteSchemaVersion));
  }
  if (read_only && version < kSqliteSchemaVersion) {
    throw StorageError(StorageError::Category::incompatible,
                       fmt::format("database {} has schema version {}, older than this cplane "
                                   "reads ({}), and a read never migrates: run `cplane "
                                   "migrate` (or any write) once to upgrade it",
                                   path, version, kSqliteSchemaVersion));
  }
  return static_cast<int>(version);
}

void migrate_schema(sqlite3* db, const std::string& path, WriterLock& writer_lock,
                    std::chrono::milliseconds lock_timeout) {
  const auto start = Clock::now();
  const auto deadline = start + lock_timeout;
  writer_lock.lock(deadline, lock_timeout);
  struct Unlock {
    WriterLock& l;
    ~Unlock() { l.unlock(); }
  } unlock{writer_lock};
  exec(db, "BEGIN IMMEDIATE", "cannot open database " + path);
  try {
    const auto version = query_int(db, "PRAGMA user_version");
    if (version == 0) {
      if (query_int(db, "SELECT count(*) FROM sqlite_master") != 0) {
        throw StorageError(StorageError::Category::corruption,
                           fmt::format("{} is an SQLite database but not a cplane one", path));
      }
      exec(db, kSchema.c_str(), "cannot create schema");
      stamp_database_id(db);
      exec(db, fmt::format("PRAGMA application_id={}", kApplicationId).c_str(),
           "cannot stamp application id");
    } else {
      for (auto v = version; v < kSqliteSchemaVersion; ++v) {
        exec(db, kMigrations[v + 1],
             fmt::format("cannot migrate the schema from version {} to {}", v, v + 1));
        if (v + 1 == 4) {
          chain_existing_log(db);
          stamp_database_id(db);
        }
        if (v + 1 == 10) rewrite_items_check(db);
      }
    }
    exec(db, fmt::format("PRAGMA user_version={}", kSqliteSchemaVersion).c_str(),
         "cannot stamp schema version");
    exec(db, "COMMIT", "cannot commit schema");
  } catch (...) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

}  // namespace cplane::storage::sqlite
