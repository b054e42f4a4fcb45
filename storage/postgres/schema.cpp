// The PostgreSQL schema (schema.hpp) and how a store is identified, created
// and migrated when it is opened.

#include "storage/postgres/schema.hpp"

#include <libpq-fe.h>

#include <charconv>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "storage/postgres/internal.hpp"
#include "storage/postgres/postgres_backend.hpp"

namespace cplane::storage::postgres {

// The retention tables (version 5, with kMigration5), created with a new
// store's schema too.
const char* const kRetentionTables = R"sql(
CREATE TABLE anchors (
  stream_kind    text COLLATE "C" NOT NULL,
  stream_id      text COLLATE "C" NOT NULL,
  revision       bigint NOT NULL,
  last_seq       bigint NOT NULL,
  hash           bytea NOT NULL,
  events         bigint NOT NULL,
  seqs           bytea NOT NULL,
  project_id     text COLLATE "C" NOT NULL,
  state          text NOT NULL,
  fence          bigint NOT NULL,
  idem_key       text COLLATE "C",
  ended_at       bigint NOT NULL,
  segment_id     text COLLATE "C" NOT NULL,
  segment_digest bytea NOT NULL,
  PRIMARY KEY (stream_kind, stream_id)
);
CREATE UNIQUE INDEX anchors_by_key ON anchors (project_id, idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE segments (
  segment_id  text COLLATE "C" PRIMARY KEY,
  digest      bytea NOT NULL,
  file        text NOT NULL,
  before      bigint NOT NULL,
  project_id  text COLLATE "C" NOT NULL,
  streams     bigint NOT NULL,
  events      bigint NOT NULL,
  bytes       bigint NOT NULL,
  archived_at bigint NOT NULL
);
)sql";

const char* const kSchema = R"sql(
CREATE TABLE store_info (
  key   text COLLATE "C" PRIMARY KEY,
  value text NOT NULL
);
CREATE SEQUENCE events_seq;
CREATE TABLE events (
  seq         bigint PRIMARY KEY DEFAULT nextval('events_seq'),
  item_id     text COLLATE "C",
  project_id  text COLLATE "C" NOT NULL,
  type        text NOT NULL,
  at          bigint NOT NULL,
  body        bytea NOT NULL,
  stream_kind text COLLATE "C" NOT NULL DEFAULT '',
  stream_id   text COLLATE "C" NOT NULL DEFAULT '',
  stream_rev  bigint NOT NULL DEFAULT 0,
  hash        bytea
);
CREATE INDEX events_by_stream ON events (stream_kind, stream_id, seq);
CREATE TABLE stream_heads (
  stream_kind text COLLATE "C" NOT NULL,
  stream_id   text COLLATE "C" NOT NULL,
  revision    bigint NOT NULL,
  last_seq    bigint NOT NULL,
  hash        bytea NOT NULL,
  PRIMARY KEY (stream_kind, stream_id)
);
CREATE TABLE log_digest (
  shard    integer PRIMARY KEY,
  events   bigint NOT NULL,
  last_seq bigint NOT NULL,
  d0 bigint NOT NULL, d1 bigint NOT NULL, d2 bigint NOT NULL, d3 bigint NOT NULL
);
INSERT INTO log_digest SELECT shard, 0, 0, 0, 0, 0, 0 FROM generate_series(0, 63) AS shard;
CREATE TABLE projects (
  project_id text COLLATE "C" PRIMARY KEY,
  title      text NOT NULL,
  status     text NOT NULL,
  created_at bigint NOT NULL,
  last_seq   bigint NOT NULL,
  max_attempts bigint NOT NULL DEFAULT 0,
  backoff      text NOT NULL DEFAULT '',
  paused       boolean NOT NULL DEFAULT false,
  pause_reason text NOT NULL DEFAULT '',
  weight       bigint NOT NULL DEFAULT 1,
  fair_pass    bigint NOT NULL DEFAULT 0
);
CREATE TABLE project_actors (
  project_id  text COLLATE "C" NOT NULL,
  actor       text COLLATE "C" NOT NULL,
  assigned_at bigint NOT NULL,
  last_seq    bigint NOT NULL,
  PRIMARY KEY (project_id, actor)
);
CREATE INDEX project_actors_by_actor ON project_actors (actor, project_id);
CREATE TABLE items (
  item_id          text COLLATE "C" PRIMARY KEY,
  project_id       text COLLATE "C" NOT NULL,
  payload          text NOT NULL,
  status           text NOT NULL CONSTRAINT items_status_check
                   CHECK (status IN ('ready', 'claimed', 'done', 'failed', 'closed', 'scheduled',
                                     'cancelled')),
  owner            text,
  fence            bigint NOT NULL,
  attempts         bigint NOT NULL,
  lease_expires_at bigint,
  detail           text,
  queued_seq       bigint NOT NULL,
  queued_at        bigint NOT NULL,
  updated_at       bigint NOT NULL,
  last_seq         bigint NOT NULL,
  kind             text NOT NULL DEFAULT 'task',
  ref              text,
  head             text,
  review           text NOT NULL DEFAULT 'none',
  author           text,
  session          text COLLATE "C",
  actions          text,
  expected_head    text,
  close_reason     text,
  head_moved       bigint NOT NULL DEFAULT 0,
  priority         integer NOT NULL DEFAULT 0,
  terminal_since   bigint,
  terminal_reason  text,
  idem_key         text COLLATE "C",
  max_attempts     bigint NOT NULL DEFAULT 0,
  backoff          text,
  attempt_limit    bigint NOT NULL DEFAULT 0,
  run_at           bigint,
  ended_fence      bigint NOT NULL DEFAULT 0,
  concurrency_key  text COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX items_ready ON items (project_id, priority DESC, queued_seq) WHERE status = 'ready';
CREATE INDEX items_lease ON items (project_id, lease_expires_at, queued_seq)
  WHERE status = 'claimed';
CREATE INDEX items_by_session ON items (session, item_id)
  WHERE status = 'claimed' AND session IS NOT NULL;
CREATE INDEX items_alloc ON items (project_id, (terminal_since IS NOT NULL) DESC, priority DESC,
                                   queued_seq)
  WHERE status IN ('ready', 'claimed', 'scheduled');
CREATE UNIQUE INDEX items_by_key ON items (project_id, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX items_due ON items (project_id, run_at, queued_seq) WHERE status = 'scheduled';
CREATE INDEX items_failed ON items (project_id, item_id) WHERE status = 'failed';
CREATE INDEX items_cancelled ON items (project_id, item_id) WHERE status = 'cancelled';
CREATE INDEX items_ready_key ON items (project_id, concurrency_key, priority DESC, queued_seq)
  WHERE status = 'ready';
CREATE INDEX items_due_key ON items (project_id, concurrency_key, run_at, queued_seq)
  WHERE status = 'scheduled';
CREATE INDEX items_lease_key ON items (project_id, concurrency_key, lease_expires_at, queued_seq)
  WHERE status = 'claimed';
CREATE INDEX items_live_key ON items (concurrency_key, lease_expires_at)
  WHERE status = 'claimed' AND concurrency_key <> '';
CREATE INDEX items_listing ON items (project_id, status, queued_seq);
CREATE INDEX items_listing_all ON items (status, queued_seq);
CREATE TABLE sessions (
  session_id   text COLLATE "C" PRIMARY KEY,
  actor        text,
  opened_at    bigint NOT NULL,
  last_seen_at bigint NOT NULL,
  closed_at    bigint,
  last_seq     bigint NOT NULL
);
CREATE TABLE terminal_locks (
  item_id text COLLATE "C" PRIMARY KEY,
  since   bigint NOT NULL,
  reason  text NOT NULL,
  item    text COLLATE "C" GENERATED ALWAYS AS (item_id) STORED
);
CREATE TABLE incident_links (
  provider    text COLLATE "C" NOT NULL,
  fingerprint text COLLATE "C" NOT NULL,
  org         text COLLATE "C" NOT NULL DEFAULT '',
  repo        text COLLATE "C" NOT NULL DEFAULT '',
  environment text COLLATE "C" NOT NULL DEFAULT '',
  target      text COLLATE "C" NOT NULL,
  status      text,
  event_count bigint,
  permalink   text,
  first_seen  text,
  last_seen   text,
  linked_prs  text,
  incident_id text COLLATE "C" NOT NULL UNIQUE,
  linked_at   bigint NOT NULL,
  updated_at  bigint NOT NULL,
  last_seq    bigint NOT NULL,
  PRIMARY KEY (provider, fingerprint, org, repo, environment)
);
CREATE INDEX incident_links_by_target ON incident_links (target, incident_id);
CREATE TABLE schedules (
  name            text COLLATE "C" PRIMARY KEY,
  project_id      text COLLATE "C" NOT NULL,
  cron            text NOT NULL,
  zone            text NOT NULL,
  payload         text NOT NULL,
  overlap_skip    boolean NOT NULL,
  catch_up        bigint NOT NULL,
  next_at         bigint NOT NULL,
  paused          boolean NOT NULL,
  removed         boolean NOT NULL,
  last_item       text COLLATE "C",
  last_occurrence bigint NOT NULL,
  fired           bigint NOT NULL,
  created_at      bigint NOT NULL,
  updated_at      bigint NOT NULL,
  last_seq        bigint NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused AND NOT removed;
CREATE TABLE limits (
  key          text COLLATE "C" PRIMARY KEY,
  concurrency  bigint NOT NULL,
  rate_count   bigint NOT NULL,
  rate_period  bigint NOT NULL,
  burst        bigint NOT NULL,
  tat          bigint NOT NULL,
  removed      boolean NOT NULL,
  created_at   bigint NOT NULL,
  updated_at   bigint NOT NULL,
  last_seq     bigint NOT NULL
);
)sql";

const char* const kMigration2 = R"sql(
ALTER TABLE projects ADD COLUMN max_attempts bigint NOT NULL DEFAULT 0,
  ADD COLUMN backoff text NOT NULL DEFAULT '', ADD COLUMN paused boolean NOT NULL DEFAULT false,
  ADD COLUMN pause_reason text NOT NULL DEFAULT '';
ALTER TABLE items DROP CONSTRAINT items_status_check,
  ADD CONSTRAINT items_status_check CHECK (status IN ('ready', 'claimed', 'done', 'failed',
                                                      'closed', 'scheduled', 'cancelled')),
  ADD COLUMN max_attempts bigint NOT NULL DEFAULT 0, ADD COLUMN backoff text,
  ADD COLUMN attempt_limit bigint NOT NULL DEFAULT 0, ADD COLUMN run_at bigint,
  ADD COLUMN ended_fence bigint NOT NULL DEFAULT 0;
DROP INDEX items_alloc;
CREATE INDEX items_alloc ON items (project_id, (terminal_since IS NOT NULL) DESC, priority DESC,
                                   queued_seq)
  WHERE status IN ('ready', 'claimed', 'scheduled');
CREATE INDEX items_due ON items (project_id, run_at, queued_seq) WHERE status = 'scheduled';
CREATE INDEX items_failed ON items (project_id, item_id) WHERE status = 'failed';
CREATE INDEX items_cancelled ON items (project_id, item_id) WHERE status = 'cancelled';
CREATE TABLE schedules (
  name            text COLLATE "C" PRIMARY KEY,
  project_id      text COLLATE "C" NOT NULL,
  cron            text NOT NULL,
  zone            text NOT NULL,
  payload         text NOT NULL,
  overlap_skip    boolean NOT NULL,
  catch_up        bigint NOT NULL,
  next_at         bigint NOT NULL,
  paused          boolean NOT NULL,
  removed         boolean NOT NULL,
  last_item       text COLLATE "C",
  last_occurrence bigint NOT NULL,
  fired           bigint NOT NULL,
  created_at      bigint NOT NULL,
  updated_at      bigint NOT NULL,
  last_seq        bigint NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused AND NOT removed;
UPDATE store_info SET value = '2' WHERE key = 'schema_version';
)sql";

// Version 3: flow control (issue 23). The claim's ready index ranks by
// priority; the key groups' indexes; the limits table.
const char* const kMigration3 = R"sql(
ALTER TABLE projects ADD COLUMN weight bigint NOT NULL DEFAULT 1,
  ADD COLUMN fair_pass bigint NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN concurrency_key text COLLATE "C" NOT NULL DEFAULT '';
DROP INDEX items_ready;
CREATE INDEX items_ready ON items (project_id, priority DESC, queued_seq) WHERE status = 'ready';
CREATE INDEX items_ready_key ON items (project_id, concurrency_key, priority DESC, queued_seq)
  WHERE status = 'ready';
CREATE INDEX items_due_key ON items (project_id, concurrency_key, run_at, queued_seq)
  WHERE status = 'scheduled';
CREATE INDEX items_lease_key ON items (project_id, concurrency_key, lease_expires_at, queued_seq)
  WHERE status = 'claimed';
CREATE INDEX items_live_key ON items (concurrency_key, lease_expires_at)
  WHERE status = 'claimed' AND concurrency_key <> '';
CREATE TABLE limits (
  key          text COLLATE "C" PRIMARY KEY,
  concurrency  bigint NOT NULL,
  rate_count   bigint NOT NULL,
  rate_period  bigint NOT NULL,
  burst        bigint NOT NULL,
  tat          bigint NOT NULL,
  removed      boolean NOT NULL,
  created_at   bigint NOT NULL,
  updated_at   bigint NOT NULL,
  last_seq     bigint NOT NULL
);
UPDATE store_info SET value = '3' WHERE key = 'schema_version';
)sql";

// Version 4: the operator's view (issue 24): the listing indexes (see the
// SQLite schema's version 9 for the queries they serve).
const char* const kMigration4 = R"sql(
CREATE INDEX items_listing ON items (project_id, status, queued_seq);
CREATE INDEX items_listing_all ON items (status, queued_seq);
UPDATE store_info SET value = '4' WHERE key = 'schema_version';
)sql";

// Version 5: retention (issue 26, docs/retention.md, archive.cpp): the
// anchors of archived streams and the record of their segments, as in the
// SQLite schema's version 11.
const char* const kMigration5 = R"sql(
UPDATE store_info SET value = '5' WHERE key = 'schema_version';
)sql";

void PostgresBackend::identify_or_create() {
  Result schema = simple("SELECT current_schema()", "cannot read the current schema");
  if (schema.null(0, 0)) {
    throw StorageError(Category::unavailable,
                       fmt::format("{}: the connection's search_path names no schema that "
                                   "exists: create it, or name one in the URL "
                                   "(?options=-csearch_path%3DNAME)",
                                   redacted_url(url_)));
  }
  schema_ = schema.text(0, 0);
  int version = read_version();
  if (version == 0 && !options_.read_only && options_.create) {
    // One creator at a time: the others wait here, then find the tables.
    simple("BEGIN", "cannot create the schema");
    try {
      run("SELECT pg_advisory_xact_lock(hashtext('cplane:' || current_schema()))");
      version = read_version();
      if (version == 0) {
        simple(kSchema, "cannot create the schema");
        simple(kRetentionTables, "cannot create the schema");
        run("INSERT INTO store_info (key, value) VALUES ('schema_version', $1), "
            "('database_id', md5(random()::text || clock_timestamp()::text))",
            Params().i64(kPostgresSchemaVersion));
      }
      simple("COMMIT", "cannot commit the schema");
    } catch (...) {
      PQclear(PQexec(conn_, "ROLLBACK"));
      throw;
    }
    version = kPostgresSchemaVersion;
  }
  if (version == 0) {
    throw StorageError(Category::unavailable,
                       fmt::format("no cplane store in schema {} at {} (this command never "
                                   "creates one)",
                                   quote_id(schema_), redacted_url(url_)));
  }
  if (version < kPostgresSchemaVersion && !options_.read_only) migrate(version);
  if (version > kPostgresSchemaVersion) {
    throw StorageError(Category::incompatible,
                       fmt::format("the store in schema {} has schema version {}, newer than "
                                   "this cplane understands ({}): upgrade cplane",
                                   quote_id(schema_), version, kPostgresSchemaVersion));
  }
}

void PostgresBackend::migrate(int& version) {
  simple("BEGIN", "cannot migrate the schema");
  try {
    run("SELECT pg_advisory_xact_lock(hashtext('cplane:' || current_schema()))");
    version = read_version();
    if (version == 1) simple(kMigration2, "cannot migrate the schema from version 1 to 2");
    if (version <= 2) simple(kMigration3, "cannot migrate the schema from version 2 to 3");
    if (version <= 3) simple(kMigration4, "cannot migrate the schema from version 3 to 4");
    if (version <= 4) {
      simple(kRetentionTables, "cannot migrate the schema from version 4 to 5");
      simple(kMigration5, "cannot migrate the schema from version 4 to 5");
    }
    simple("COMMIT", "cannot commit the schema's migration");
  } catch (...) {
    PQclear(PQexec(conn_, "ROLLBACK"));
    throw;
  }
  version = read_version();
}

int PostgresBackend::read_version() {
  // Any of the names cplane creates, already there without store_info,
  // belongs to something else.
  Result r = run("SELECT n FROM unnest(ARRAY['store_info', 'events', 'events_seq', "
                 "'stream_heads', 'log_digest', 'projects', 'project_actors', 'items', "
                 "'sessions', 'terminal_locks', 'incident_links', 'anchors', 'segments']) AS n WHERE "
                 "to_regclass(quote_ident(current_schema()) || '.' || n) IS NOT NULL");
  std::vector<std::string> taken;
  bool info = false;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.text(i, 0) == "store_info") {
      info = true;
    } else {
      taken.push_back(r.text(i, 0));
    }
  }
  if (!info) {
    if (!taken.empty()) {
      std::string names;
      for (const auto& t : taken) names += (names.empty() ? "" : ", ") + t;
      throw StorageError(Category::corruption,
                         fmt::format("schema {} at {} holds {} but no cplane store: not "
                                     "cplane's; point cplane at another schema",
                                     quote_id(schema_), redacted_url(url_), names));
    }
    return 0;
  }
  Result v = run("SELECT value FROM store_info WHERE key = 'schema_version'");
  if (v.rows() == 0) {
    throw StorageError(Category::corruption,
                       fmt::format("schema {} at {} holds a store_info table without a schema "
                                   "version: not a cplane store",
                                   quote_id(schema_), redacted_url(url_)));
  }
  int version = 0;
  const std::string text = v.text(0, 0);
  std::from_chars(text.data(), text.data() + text.size(), version);
  return version;
}

}  // namespace cplane::storage::postgres
