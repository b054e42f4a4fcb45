// The PostgreSQL schema (version 1)
// =================================
//
// The same tables as SQLite's (storage/sqlite/sqlite_backend.cpp), created in the
// connection's current schema (the first of its search_path: `public`
// unless the URL says otherwise, e.g. ?options=-csearch_path%3Dfleet):
//
//   events, stream_heads, log_digest, store_info    the log and its chain
//   items, projects, project_actors, sessions,
//   terminal_locks, incident_links                  the projected rows
//   events_seq                                      the sequence seqs come from
//
// Every id column is `COLLATE "C"`, so that scans order ids bytewise, as
// the contract wants and verify's merge joins need.
//
// How it meets the contract without a global write lock:
//
// * begin_write is READ COMMITTED, and every read a command decides on
//   locks what it read: find_item, find_session, find_incident take the
//   row FOR UPDATE; a claim's candidates are taken FOR UPDATE SKIP LOCKED,
//   so claimers never queue behind one another. What a command read cannot
//   change before it commits.
// * append locks the stream's head (FOR UPDATE) before it draws the next
//   seq from events_seq, so that within a stream seqs rise in commit order
//   and the chain has no forks. A new stream's head is inserted only if no
//   other transaction created it meanwhile; else the command is retried
//   (Conflict), as are serialization failures and deadlocks.
// * The log's digest is kept in shards (log_digest.shard: the server
//   kDigestShards rows), each updated by XOR at commit, so commits do not
//   serialise on one row: a commit takes a shard no other transaction
//   holds (SKIP LOCKED, starting from its server process id), since the
//   lock is held through the commit's WAL flush. The digest is their XOR.
// * seqs come from a sequence: they have gaps (a rolled-back transaction
//   takes one), so seqs_dense() is false and verify does not read a gap as
//   a deletion; the chain and the heads still show one.
// * The clock is the server's: begin_write and begin_read read
//   clock_timestamp() in the same round trip as BEGIN.
// * begin_read is REPEATABLE READ, READ ONLY: one snapshot, never waiting
//   for a writer. Scans read through server-side cursors, a page at a time.
//
// Errors: a lost connection is `unavailable` (the next transaction
// reconnects), a connection lost during COMMIT is `commit_unknown`; a lock
// wait longer than the lock timeout is `busy`; a full disk `full`; damaged
// data (XX001, XX002) `corruption`; the server's internal error (XX000, the
// rest of class XX) InternalError. One function maps them:
// throw_for_sqlstate (postgres_backend.hpp).

#include "storage/postgres/postgres_backend.hpp"

#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "events/chain.hpp"
#include "events/codec.hpp"
#include "events/errors.hpp"
#include "events/json.hpp"
#include "storage/stored_text.hpp"

namespace cplane::storage {
namespace {

constexpr int kDigestShards = 64;
constexpr int kFetchRows = 1000;

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
  pause_reason text NOT NULL DEFAULT ''
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
  ended_fence      bigint NOT NULL DEFAULT 0
);
CREATE INDEX items_ready ON items (project_id, queued_seq) WHERE status = 'ready';
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
)sql";

// Version 2: the job lifecycle (the statuses scheduled and cancelled, retry
// policies, run_at, pause), as the schema above creates it whole.
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

const char* const kItemColumns =
    "item_id, project_id, payload, status, owner, fence, attempts, lease_expires_at, detail, "
    "queued_seq, queued_at, updated_at, last_seq, kind, ref, head, review, author, session, "
    "actions, expected_head, close_reason, head_moved, priority, terminal_since, "
    "terminal_reason, idem_key, max_attempts, backoff, attempt_limit, run_at, ended_fence";
const char* const kItemValues =
    "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, "
    "$21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32";
const char* const kItemUpdate =
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
    "ended_fence = EXCLUDED.ended_fence";
const char* const kIncidentColumns =
    "provider, fingerprint, org, repo, environment, target, status, event_count, permalink, "
    "first_seen, last_seen, linked_prs, incident_id, linked_at, updated_at, last_seq";
const char* const kAllocationColumns =
    "item_id, project_id, status, session, lease_expires_at, review, author, terminal_since, "
    "priority, queued_seq, run_at, attempts, attempt_limit";
const char* const kProjectColumns =
    "project_id, title, status, created_at, last_seq, max_attempts, backoff, paused, pause_reason";
const char* const kScheduleColumns =
    "name, project_id, cron, zone, payload, overlap_skip, catch_up, next_at, paused, removed, "
    "last_item, last_occurrence, fired, created_at, updated_at, last_seq";
const char* const kSessionColumns =
    "session_id, actor, opened_at, last_seen_at, closed_at, last_seq";
const char* const kEventColumns =
    "seq, stream_kind, stream_id, item_id, project_id, type, at, body, stream_rev, hash";

using Category = StorageError::Category;

// ---- parameters ------------------------------------------------------------

// The parameters of one statement, in text format except bytea (binary).
class Params {
 public:
  Params& text(std::string_view v) {
    values_.emplace_back(v);
    nulls_.push_back(false);
    binary_.push_back(0);
    return *this;
  }
  Params& null() {
    values_.emplace_back();
    nulls_.push_back(true);
    binary_.push_back(0);
    return *this;
  }
  Params& i64(std::int64_t v) { return text(std::to_string(v)); }
  Params& bytes(std::string_view v) {
    text(v);
    binary_.back() = 1;
    return *this;
  }
  Params& text_or_null(std::string_view v) { return v.empty() ? null() : text(v); }
  Params& i64_or_null(std::int64_t v) { return v == 0 ? null() : i64(v); }
  Params& opt(const std::optional<std::string>& v) { return v ? text(*v) : null(); }
  Params& opt(const std::optional<std::int64_t>& v) { return v ? i64(*v) : null(); }

  int size() const { return static_cast<int>(values_.size()); }
  void finish() {
    pointers_.clear();
    lengths_.clear();
    for (std::size_t i = 0; i < values_.size(); ++i) {
      pointers_.push_back(nulls_[i] ? nullptr : values_[i].data());
      lengths_.push_back(static_cast<int>(values_[i].size()));
    }
  }
  const char* const* pointers() const { return pointers_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return binary_.data(); }

 private:
  std::vector<std::string> values_;
  std::vector<bool> nulls_;
  std::vector<int> binary_;
  std::vector<const char*> pointers_;
  std::vector<int> lengths_;
};

// ---- results ---------------------------------------------------------------

class Result {
 public:
  Result() = default;
  explicit Result(PGresult* r) : r_(r) {}
  Result(Result&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Result& operator=(Result&& o) noexcept {
    std::swap(r_, o.r_);
    return *this;
  }
  ~Result() { PQclear(r_); }
  int rows() const { return PQntuples(r_); }
  bool null(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }
  std::string text(int row, int col) const {
    return std::string(PQgetvalue(r_, row, col), static_cast<std::size_t>(PQgetlength(r_, row, col)));
  }
  std::int64_t i64(int row, int col) const {
    if (null(row, col)) return 0;
    const char* p = PQgetvalue(r_, row, col);
    std::int64_t v = 0;
    std::from_chars(p, p + PQgetlength(r_, row, col), v);
    return v;
  }
  // A bytea column in text format: "\x" and hex digits.
  std::string bytes(int row, int col) const {
    if (null(row, col)) return {};
    const char* p = PQgetvalue(r_, row, col);
    const int n = PQgetlength(r_, row, col);
    std::string out;
    if (n < 2 || p[0] != '\\' || p[1] != 'x') return std::string(p, static_cast<std::size_t>(n));
    out.reserve(static_cast<std::size_t>(n - 2) / 2);
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return c - 'A' + 10;
    };
    for (int i = 2; i + 1 < n; i += 2) out.push_back(static_cast<char>(nibble(p[i]) << 4 | nibble(p[i + 1])));
    return out;
  }
  PGresult* get() const { return r_; }

 private:
  PGresult* r_ = nullptr;
};

std::string sqlstate(const PGresult* r) {
  const char* s = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  return s != nullptr ? s : "";
}

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
  return ProjectRow{r.text(i, 0), r.text(i, 1), r.text(i, 2),
                    r.i64(i, 3),  r.i64(i, 4),  static_cast<std::uint32_t>(r.i64(i, 5)),
                    r.text(i, 6), r.text(i, 7) == "t", r.text(i, 8)};
}

// The 32 bytes of a hash as four big-endian 64-bit integers (log_digest's
// d0..d3, which the server XORs with `#`), and back.
std::array<std::int64_t, 4> hash_words(const Hash& h) {
  std::array<std::int64_t, 4> out{};
  for (int w = 0; w < 4; ++w) {
    std::uint64_t v = 0;
    for (int b = 0; b < 8; ++b) v = v << 8 | h[static_cast<std::size_t>(w * 8 + b)];
    out[static_cast<std::size_t>(w)] = static_cast<std::int64_t>(v);
  }
  return out;
}
std::string words_hash(const std::array<std::int64_t, 4>& words) {
  std::string out(32, '\0');
  for (int w = 0; w < 4; ++w) {
    auto v = static_cast<std::uint64_t>(words[static_cast<std::size_t>(w)]);
    for (int b = 7; b >= 0; --b) {
      out[static_cast<std::size_t>(w * 8 + b)] = static_cast<char>(v & 0xff);
      v >>= 8;
    }
  }
  return out;
}

class PostgresBackend;

// A scan through a server-side cursor, kFetchRows at a time.
template <class Row>
class PgCursor final : public Cursor<Row> {
 public:
  using Fill = void (*)(const Result&, int, Row&);
  PgCursor(PostgresBackend& backend, std::string name, Fill fill)
      : backend_(backend), name_(std::move(name)), fill_(fill) {}
  ~PgCursor() override;
  bool next(Row& row) override;

 private:
  PostgresBackend& backend_;
  std::string name_;
  Fill fill_;
  Result page_;
  int at_ = 0;
  bool done_ = false;
  bool fetched_ = false;
  int page_size_ = 0;
};

class PostgresBackend final : public Backend {
 public:
  PostgresBackend(const std::string& url, const OpenOptions& options)
      : url_(url), options_(options) {
    connect();
    identify_or_create();
  }

  ~PostgresBackend() override { PQfinish(conn_); }

  // ---- the connection ------------------------------------------------------

  void connect() {
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = PQconnectdb(url_.c_str());
    prepared_.clear();
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string message = PQerrorMessage(conn_);
      while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
      throw StorageError(Category::unavailable,
                         fmt::format("cannot connect to PostgreSQL at {}: {}", redacted_url(url_),
                                     redacted_message(message, url_)));
    }
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    // What cplane reads and promises does not bend to the role's, the
    // database's or the environment's settings: bytea in hex, UTF-8 text,
    // every commit flushed.
    PQsetClientEncoding(conn_, "UTF8");
    std::string setup = fmt::format(
        "SET lock_timeout = {}; SET idle_in_transaction_session_timeout = 0; "
        "SET client_min_messages = warning; SET bytea_output = hex; "
        "SET client_encoding = 'UTF8'; SET synchronous_commit = on; "
        "SET default_transaction_isolation = 'read committed'",
        std::max<std::int64_t>(options_.lock_timeout.count(), 1));
    if (options_.read_only) setup += "; SET default_transaction_read_only = on";
    simple(setup.c_str(), "cannot set up the connection");
    shard_ = PQbackendPID(conn_) % kDigestShards;
    listening_ = false;
  }

  // The connection broke (the server restarted, the network went away):
  // reconnect before the next transaction; unavailable if it cannot.
  void ensure_connected() {
    if (::getpid() != pid_) {
      throw StorageError(Category::unavailable,
                         "this store was opened in another process (before fork): open a new one");
    }
    if (PQstatus(conn_) == CONNECTION_OK) return;
    connect();
  }

  [[noreturn]] void fail(const PGresult* r, const std::string& what) {
    const std::string state = sqlstate(r);
    last_error_state_ = state;
    std::string message = r != nullptr ? PQresultErrorMessage(r) : "";
    if (message.empty()) message = PQerrorMessage(conn_);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    const std::string text = fmt::format("{}: {}", what, message);
    // A connection that is gone says so even where the SQLSTATE does not.
    throw_for_sqlstate(PQstatus(conn_) != CONNECTION_OK ? "08006" : state, text, url_);
  }

  // A statement without parameters (and possibly several of them).
  Result simple(const char* sql, const char* what) {
    Result r(PQexec(conn_, sql));
    const auto status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail(r.get(), what);
    return r;
  }

  // The name of `sql` prepared on this connection (at its first use).
  const std::string& prepared(const std::string& sql) {
    auto it = prepared_.find(sql);
    if (it == prepared_.end()) {
      std::string name = fmt::format("s{}", prepared_.size());
      Result p(PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr));
      if (PQresultStatus(p.get()) != PGRES_COMMAND_OK) fail(p.get(), "cannot prepare a statement");
      it = prepared_.emplace(sql, std::move(name)).first;
    }
    return it->second;
  }

  // A prepared statement, run now (after the writes deferred before it).
  Result run(const std::string& sql, Params params = {}) {
    flush_deferred();
    const std::string& name = prepared(sql);
    params.finish();
    Result r(PQexecPrepared(conn_, name.c_str(), params.size(), params.pointers(),
                            params.lengths(), params.formats(), 0));
    const auto status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail(r.get(), "statement failed");
    return r;
  }

  // ---- deferred writes ---------------------------------------------------------
  //
  // Writes whose result the command does not read (an event and its head, an
  // item row) are not sent at once: they go to the server in one pipeline
  // (libpq's pipeline mode) with the next statement that reads, or with the
  // log digest's update and COMMIT, so that a claim or a finish costs four
  // round trips, not six. Their errors surface there: a head taken
  // meanwhile, an idempotency key taken meanwhile (Conflict: the command
  // runs again), an item id taken (io).

  struct Deferred {
    std::string name;  // the prepared statement
    Params params;
  };

  void defer(const std::string& sql, Params params) {
    deferred_.push_back(Deferred{prepared(sql), std::move(params)});
  }

  // Sends what was deferred, then `tail` (statements without parameters,
  // such as the digest's update and COMMIT), in one pipeline; reads every
  // result. Returns the tail's last result; throws for the first failure.
  Result pipeline(const std::vector<std::string>& tail) {
    std::vector<Deferred> sending;
    sending.swap(deferred_);
    if (PQenterPipelineMode(conn_) == 0) fail(nullptr, "cannot enter pipeline mode");
    struct Leave {
      PGconn* conn;
      ~Leave() { PQexitPipelineMode(conn); }
    } leave{conn_};
    bool sent = true;
    for (auto& d : sending) {
      d.params.finish();  // pointers into its values, which have moved since
      sent = sent && PQsendQueryPrepared(conn_, d.name.c_str(), d.params.size(), d.params.pointers(),
                                         d.params.lengths(), d.params.formats(), 0) == 1;
    }
    for (const auto& sql : tail) {
      sent = sent && PQsendQueryParams(conn_, sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
    }
    sent = sent && PQpipelineSync(conn_) == 1;
    Result first_error, last;
    const std::size_t queries = sending.size() + tail.size();
    for (std::size_t q = 0; sent && q < queries; ++q) {
      PGresult* raw = PQgetResult(conn_);
      if (raw == nullptr) {
        sent = false;
        break;
      }
      Result r(raw);
      const auto status = PQresultStatus(r.get());
      if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
          status != PGRES_PIPELINE_ABORTED && first_error.get() == nullptr) {
        first_error = std::move(r);
      } else if (q + 1 == queries) {
        last = std::move(r);
      }
      while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);  // the NULL after each
    }
    // The sync point.
    while (sent) {
      PGresult* raw = PQgetResult(conn_);
      if (raw == nullptr) break;
      const bool sync = PQresultStatus(raw) == PGRES_PIPELINE_SYNC;
      PQclear(raw);
      if (sync) break;
    }
    if (!sent) {
      throw StorageError(Category::unavailable,
                         fmt::format("the connection to PostgreSQL was lost: {}",
                                     trimmed(PQerrorMessage(conn_))));
    }
    if (first_error.get() != nullptr) {
      const std::string state = sqlstate(first_error.get());
      last_error_state_ = state;
      const char* constraint = PQresultErrorField(first_error.get(), PG_DIAG_CONSTRAINT_NAME);
      if (state == "22012") {
        throw Conflict("a stream was appended to by another transaction meanwhile");
      }
      if (state == "23505" && constraint != nullptr && std::string(constraint) == "items_by_key") {
        throw Conflict("an idempotency key was taken meanwhile");
      }
      if (state == "23505") {
        throw StorageError(Category::io, "an item id is already taken");
      }
      fail(first_error.get(), "a write failed");
    }
    return last;
  }

  void flush_deferred() {
    if (!deferred_.empty()) pipeline({});
  }

  // A server-side cursor over `sql` (inside the current transaction).
  template <class Row>
  std::unique_ptr<Cursor<Row>> cursor(const std::string& sql, Params params,
                                      typename PgCursor<Row>::Fill fill) {
    if (PQtransactionStatus(conn_) != PQTRANS_INTRANS) {
      throw InternalError("a scan of a PostgreSQL store must run inside a transaction");
    }
    flush_deferred();
    std::string name = fmt::format("c{}", ++cursors_);
    params.finish();
    const std::string declare = fmt::format("DECLARE {} NO SCROLL CURSOR FOR {}", name, sql);
    Result r(PQexecParams(conn_, declare.c_str(), params.size(), nullptr, params.pointers(),
                          params.lengths(), params.formats(), 0));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) fail(r.get(), "cannot open a scan");
    return std::make_unique<PgCursor<Row>>(*this, std::move(name), fill);
  }
  Result fetch(const std::string& name, int rows) {
    flush_deferred();
    Result r(PQexec(conn_, fmt::format("FETCH {} FROM {}", rows, name).c_str()));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) fail(r.get(), "scan failed");
    return r;
  }
  void close_cursor(const std::string& name) noexcept {
    if (PQstatus(conn_) != CONNECTION_OK || PQtransactionStatus(conn_) != PQTRANS_INTRANS) return;
    PQclear(PQexec(conn_, fmt::format("CLOSE {}", name).c_str()));
  }

  // ---- opening ---------------------------------------------------------------

  void identify_or_create() {
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

  // Takes an older store to this build's version, one step at a time, under
  // the creators' lock (a second process finds it done and does nothing).
  void migrate(int& version) {
    simple("BEGIN", "cannot migrate the schema");
    try {
      run("SELECT pg_advisory_xact_lock(hashtext('cplane:' || current_schema()))");
      version = read_version();
      if (version == 1) simple(kMigration2, "cannot migrate the schema from version 1 to 2");
      simple("COMMIT", "cannot commit the schema's migration");
    } catch (...) {
      PQclear(PQexec(conn_, "ROLLBACK"));
      throw;
    }
    version = read_version();
  }

  // 0 when the schema holds no cplane store (and nothing else of the names
  // cplane uses); throws corruption when it holds a foreign table of them.
  int read_version() {
    // Any of the names cplane creates, already there without store_info,
    // belongs to something else.
    Result r = run("SELECT n FROM unnest(ARRAY['store_info', 'events', 'events_seq', "
                   "'stream_heads', 'log_digest', 'projects', 'project_actors', 'items', "
                   "'sessions', 'terminal_locks', 'incident_links']) AS n WHERE "
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

  // ---- transactions ----------------------------------------------------------

  void begin_write(Sync sync) override {
    if (options_.read_only) {
      throw InvalidArgument(InvalidArgument::Reason::read_only,
                            fmt::format("{} was opened for reading: it cannot write",
                                        redacted_url(url_)));
    }
    ensure_connected();
    // Every commit waits for its WAL flush (synchronous_commit = on, the
    // server's default), whatever `sync` asks: an asynchronous commit is
    // lost by a crash of the server, not only by a power loss (it found
    // acknowledged finishes gone after a SIGKILL of the postmaster), which
    // is weaker than Sync::normal promises.
    (void)sync;
    begin("BEGIN ISOLATION LEVEL READ COMMITTED; "
          "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
    writing_ = true;
  }

  void begin_read() override {
    ensure_connected();
    begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
          "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
    writing_ = false;
  }

  void begin(const char* sql) {
    const auto start = std::chrono::steady_clock::now();
    Result r(PQexec(conn_, sql));
    begin_round_trip_ = std::chrono::steady_clock::now() - start;
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
      const bool lost = PQstatus(conn_) != CONNECTION_OK;
      if (lost) {
        // A connection that broke while idle (the server restarted): one
        // reconnect, then the transaction once more.
        connect();
        r = Result(PQexec(conn_, sql));
      }
      if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
        PQclear(PQexec(conn_, "ROLLBACK"));
        fail(r.get(), "cannot begin a transaction");
      }
    }
    tx_now_ = r.i64(0, 0);
    delta_.reset();
    deferred_.clear();
    announce_ = false;
  }

  void commit() override {
    std::vector<std::string> tail;
    if (delta_) {
      // The shard must be there (created with the schema): a digest row
      // deleted behind cplane's back stops every writer that would use it,
      // as on SQLite (sqrt(-1) when the UPDATE finds no row). When every
      // shard is held, the commit waits for its own (never "missing").
      const auto w = hash_words(delta_->digest);
      tail.push_back(fmt::format(
          "WITH u AS (UPDATE log_digest SET events = events + {1}, "
          "last_seq = greatest(last_seq, {2}), d0 = d0 # {3}, d1 = d1 # {4}, d2 = d2 # {5}, "
          "d3 = d3 # {6} WHERE shard = coalesce((SELECT shard FROM log_digest ORDER BY "
          "(shard + 64 - {0}) % 64 LIMIT 1 FOR UPDATE SKIP LOCKED), {0}) RETURNING 1) "
          "SELECT sqrt((SELECT count(*) FROM u) - 1)",
          shard_, delta_->events, delta_->last_seq, w[0], w[1], w[2], w[3]));
      delta_.reset();
    }
    if (announce_) tail.emplace_back("SELECT pg_notify('cplane_work', current_schema())");
    announce_ = false;
    tail.emplace_back("COMMIT");
    Result r;
    try {
      r = pipeline(tail);
    } catch (const Conflict&) {
      PQclear(PQexec(conn_, "ROLLBACK"));
      throw;
    } catch (const InternalError&) {  // the server's own bug (class XX)
      PQclear(PQexec(conn_, "ROLLBACK"));
      throw;
    } catch (const StorageError& e) {
      if (PQstatus(conn_) != CONNECTION_OK || e.category() == Category::unavailable) {
        throw StorageError(Category::commit_unknown,
                           fmt::format("commit outcome unknown: the connection to PostgreSQL was "
                                       "lost during COMMIT ({}); do not retry blindly: read the "
                                       "item's events to see whether it happened",
                                       e.what()));
      }
      const bool no_digest = last_error_state_ == "2201F";
      PQclear(PQexec(conn_, "ROLLBACK"));
      if (no_digest) {
        throw StorageError(Category::corruption,
                           "the log's digest (table log_digest) is missing: the log was "
                           "edited outside cplane. Nothing was written; run cplane verify");
      }
      throw;
    }
    if (r.get() == nullptr || std::strcmp(PQcmdStatus(r.get()), "COMMIT") != 0) {
      throw StorageError(Category::io, "the transaction failed and was rolled back");
    }
  }

  static std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  void rollback() noexcept override {
    delta_.reset();
    deferred_.clear();
    announce_ = false;
    writing_ = false;
    if (PQstatus(conn_) != CONNECTION_OK) return;
    if (PQtransactionStatus(conn_) == PQTRANS_IDLE) return;
    PQclear(PQexec(conn_, "ROLLBACK"));
  }

  Micros now() override {
    if (PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) == PQTRANS_INTRANS) {
      return tx_now_;
    }
    ensure_connected();
    Result r = simple("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
                      "cannot read the server's clock");
    return r.i64(0, 0);
  }

  // ---- the log ---------------------------------------------------------------

  struct Delta {
    std::int64_t events = 0;
    Seq last_seq = 0;
    Hash digest{};
  };

  // A stream's head as locked for an append: the seq drawn after the lock,
  // the previous hash and revision.
  struct LockedHead {
    Seq seq = 0;
    Hash prev = kNoHash;
    std::int64_t revision = 0;
  };
  LockedHead locked_head(const Result& r, int row, std::string_view kind, std::string_view id) {
    LockedHead h{r.i64(row, 0), kNoHash, 0};
    if (!r.null(row, 1)) {
      h.revision = r.i64(row, 1);
      if (!hash_from_bytes(r.bytes(row, 2), h.prev)) {
        throw StorageError(Category::corruption,
                           fmt::format("the head of stream {} {} holds no hash (edited outside "
                                       "cplane): run cplane verify",
                                       kind, quote_id(id)));
      }
    }
    return h;
  }

  Seq append(const Event& event) override {
    const StreamRef stream = stream_of(event);
    const std::string_view kind = to_string(stream.kind);
    // The head is locked before the seq is drawn: within a stream, seqs
    // rise in the order the appends commit.
    Result head = run(
        "SELECT nextval('events_seq'), h.revision, h.hash FROM (SELECT 1) x LEFT JOIN LATERAL "
        "(SELECT revision, hash FROM stream_heads WHERE stream_kind = $1 AND stream_id = $2 "
        "FOR UPDATE) h ON true",
        Params().text(kind).text(stream.id));
    return chain(event, locked_head(head, 0, kind, stream.id));
  }

  // Several events of distinct streams: every head locked and every seq
  // drawn in one round trip.
  std::vector<Seq> append_batch(const std::vector<Event>& events) override {
    std::vector<std::string> kinds, ids;
    for (const auto& e : events) {
      const StreamRef stream = stream_of(e);
      kinds.emplace_back(to_string(stream.kind));
      ids.push_back(stream.id);
    }
    std::vector<std::pair<std::string, std::string>> distinct;
    for (std::size_t i = 0; i < kinds.size(); ++i) distinct.emplace_back(kinds[i], ids[i]);
    std::sort(distinct.begin(), distinct.end());
    if (events.size() < 2 ||
        std::adjacent_find(distinct.begin(), distinct.end()) != distinct.end()) {
      return Backend::append_batch(events);  // one stream twice: one at a time
    }
    Result heads = run(
        "SELECT nextval('events_seq'), h.revision, h.hash FROM unnest($1::text[], $2::text[]) "
        "WITH ORDINALITY AS s(kind, id, n) LEFT JOIN LATERAL (SELECT revision, hash FROM "
        "stream_heads WHERE stream_kind = s.kind AND stream_id = s.id FOR UPDATE) h ON true "
        "ORDER BY s.n",
        Params().text(array_literal(kinds)).text(array_literal(ids)));
    if (heads.rows() != static_cast<int>(events.size())) {
      throw InternalError("a batch append locked another number of heads than it has events");
    }
    std::vector<Seq> out;
    for (std::size_t i = 0; i < events.size(); ++i) {
      out.push_back(chain(events[i], locked_head(heads, static_cast<int>(i), kinds[i], ids[i])));
    }
    return out;
  }

  // A text[] literal: {"a","b"}, with " and \ escaped.
  static std::string array_literal(const std::vector<std::string>& values) {
    std::string out = "{";
    for (const auto& v : values) {
      if (out.size() > 1) out += ',';
      out += '"';
      for (char c : v) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      out += '"';
    }
    return out + "}";
  }

  // Chains `event` to its locked head and defers its insert (with the new
  // head) to the commit's pipeline.
  Seq chain(const Event& event, const LockedHead& head) {
    const std::string body = encode(event);
    const StreamRef stream = stream_of(event);
    const std::string_view kind = to_string(stream.kind);
    const Seq seq = head.seq;
    const std::int64_t revision = head.revision + 1;
    const Hash hash = chain_hash(head.prev, seq, revision, kind, stream.id, body);
    // The event and its stream's new head in one statement, deferred. A
    // head that another transaction created since we looked (no row to lock
    // then) is not overwritten: 1 / 0, and the command runs again.
    defer(
        "WITH e AS (INSERT INTO events (seq, item_id, project_id, type, at, body, stream_kind, "
        "stream_id, stream_rev, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)), "
        "h AS (INSERT INTO stream_heads AS s (stream_kind, stream_id, revision, last_seq, hash) "
        "VALUES ($7, $8, $9, $1, $10) ON CONFLICT (stream_kind, stream_id) DO UPDATE SET "
        "revision = EXCLUDED.revision, last_seq = EXCLUDED.last_seq, hash = EXCLUDED.hash "
        "WHERE s.revision = EXCLUDED.revision - 1 RETURNING 1) "
        "SELECT 1 / (SELECT count(*)::integer FROM h)",
        Params()
            .i64(seq)
            .text_or_null(event.item_id)
            .text(event.project_id)
            .text(type_name(event.body))
            .i64(event.at)
            .bytes(body)
            .text(kind)
            .text(stream.id)
            .i64(revision)
            .bytes(as_bytes(hash)));
    if (!delta_) delta_ = Delta{};
    xor_into(delta_->digest, head.prev);
    xor_into(delta_->digest, hash);
    ++delta_->events;
    delta_->last_seq = std::max(delta_->last_seq, seq);
    return seq;
  }

  // Several items, each locked, in id order (so that two batches cannot
  // deadlock on each other), in one round trip.
  std::vector<std::optional<ItemRow>> find_items(const std::vector<std::string>& item_ids) override {
    Result r = locking([&] {
      return run(fmt::format("SELECT {} FROM items WHERE item_id = ANY($1::text[]) ORDER BY "
                             "item_id{}",
                             kItemColumns, lock()),
                 Params().text(array_literal(item_ids)));
    });
    std::vector<std::optional<ItemRow>> out(item_ids.size());
    for (int i = 0; i < r.rows(); ++i) {
      ItemRow row = read_item(r, i);
      for (std::size_t k = 0; k < item_ids.size(); ++k) {
        if (item_ids[k] == row.item_id) out[k] = row;
      }
    }
    return out;
  }

  void import_event(const RawEvent& e) override {
    run("INSERT INTO events (seq, item_id, project_id, type, at, body, stream_kind, stream_id, "
        "stream_rev, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        Params()
            .i64(e.seq)
            .text_or_null(e.item_id)
            .text(e.project_id)
            .text(e.type)
            .i64(e.at)
            .bytes(e.body)
            .text(e.stream_kind)
            .text(e.stream_id)
            .i64(e.revision)
            .bytes(e.hash));
    // Seqs handed out later must pass every imported one.
    run("SELECT setval('events_seq', greatest($1, (SELECT last_value FROM events_seq)))",
        Params().i64(e.seq));
  }

  void put_head(const StreamHead& h) override {
    run("INSERT INTO stream_heads (stream_kind, stream_id, revision, last_seq, hash) VALUES "
        "($1, $2, $3, $4, $5) ON CONFLICT (stream_kind, stream_id) DO UPDATE SET "
        "revision = EXCLUDED.revision, last_seq = EXCLUDED.last_seq, hash = EXCLUDED.hash",
        Params().text(h.stream_kind).text(h.stream_id).i64(h.revision).i64(h.last_seq).bytes(h.hash));
  }

  void put_log_digest(const LogDigest& d) override {
    delta_.reset();
    Hash hash{};
    hash_from_bytes(d.digest, hash);
    const auto w = hash_words(hash);
    run("DELETE FROM log_digest");
    run("INSERT INTO log_digest (shard, events, last_seq, d0, d1, d2, d3) SELECT shard, 0, 0, 0, "
        "0, 0, 0 FROM generate_series(1, 63) AS shard");
    run("INSERT INTO log_digest (shard, events, last_seq, d0, d1, d2, d3) VALUES "
        "(0, $1, $2, $3, $4, $5, $6)",
        Params().i64(d.events).i64(d.last_seq).i64(w[0]).i64(w[1]).i64(w[2]).i64(w[3]));
    run("SELECT setval('events_seq', greatest($1, (SELECT last_value FROM events_seq)))",
        Params().i64(std::max<Seq>(d.last_seq, 1)));
  }

  std::unique_ptr<Cursor<StreamHead>> scan_heads(StreamKind kind) override {
    return cursor<StreamHead>(
        "SELECT stream_kind, stream_id, revision, last_seq, hash FROM stream_heads "
        "WHERE stream_kind = $1 ORDER BY stream_id",
        Params().text(to_string(kind)), fill_head);
  }

  static std::string known_kinds_list() {
    std::string list;
    for (auto kind : kStreamKinds) {
      if (!list.empty()) list += ", ";
      list += fmt::format("'{}'", to_string(kind));
    }
    return list;
  }

  std::vector<StreamHead> unfiled_heads() override {
    Result r = run(fmt::format("SELECT stream_kind, stream_id, revision, last_seq, hash FROM "
                               "stream_heads WHERE stream_kind NOT IN ({}) ORDER BY stream_kind, "
                               "stream_id",
                               known_kinds_list()));
    std::vector<StreamHead> out(static_cast<std::size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) fill_head(r, i, out[static_cast<std::size_t>(i)]);
    return out;
  }

  std::optional<LogDigest> log_digest() override {
    Result r = run(
        "SELECT count(*), coalesce(sum(events), 0), coalesce(max(last_seq), 0), "
        "coalesce(bit_xor(d0), 0), coalesce(bit_xor(d1), 0), coalesce(bit_xor(d2), 0), "
        "coalesce(bit_xor(d3), 0) FROM log_digest");
    if (r.i64(0, 0) == 0) return std::nullopt;
    return LogDigest{r.i64(0, 1), r.i64(0, 2),
                     words_hash({r.i64(0, 3), r.i64(0, 4), r.i64(0, 5), r.i64(0, 6)})};
  }

  int schema_version() const noexcept override { return kPostgresSchemaVersion; }

  std::string database_id() override {
    Result r = run("SELECT value FROM store_info WHERE key = 'database_id'");
    return r.rows() > 0 ? r.text(0, 0) : std::string();
  }

  std::vector<RawEvent> stream_events(const StreamRef& stream) override {
    Result r = run(fmt::format("SELECT {} FROM events WHERE stream_kind = $1 AND stream_id = $2 "
                               "ORDER BY seq",
                               kEventColumns),
                   Params().text(to_string(stream.kind)).text(stream.id));
    std::vector<RawEvent> out(static_cast<std::size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) fill_event(r, i, out[static_cast<std::size_t>(i)]);
    return out;
  }

  std::unique_ptr<Cursor<RawEvent>> scan_stream(StreamKind kind) override {
    return cursor<RawEvent>(
        fmt::format("SELECT {} FROM events WHERE stream_kind = $1 ORDER BY stream_id, seq",
                    kEventColumns),
        Params().text(to_string(kind)), fill_event);
  }

  std::unique_ptr<Cursor<RawEvent>> scan_unfiled() override {
    return cursor<RawEvent>(fmt::format("SELECT {} FROM events WHERE stream_kind NOT IN ({})",
                                        kEventColumns, known_kinds_list()),
                            Params(), fill_event);
  }

  std::int64_t event_count() override { return run("SELECT count(*) FROM events").i64(0, 0); }

  // ---- items -------------------------------------------------------------------

  // A row a write transaction reads is locked until it commits.
  const char* lock() const { return writing_ ? " FOR UPDATE" : ""; }

  std::optional<ItemRow> one_item(const Result& r) {
    if (r.rows() == 0) return std::nullopt;
    return read_item(r, 0);
  }

  std::optional<ItemRow> find_item(std::string_view item_id) override {
    return one_item(locking([&] {
      return run(fmt::format("SELECT {} FROM items WHERE item_id = $1{}", kItemColumns, lock()),
                 Params().text(item_id));
    }));
  }

  // A locking read in a write transaction. The command read the clock when
  // the transaction began; if the read waited for another transaction's
  // row lock, that time is stale (a lease may have lapsed meanwhile), so
  // the command decides again, at the current time (Conflict). On SQLite
  // the clock is read after the write lock is taken; here a decision's
  // clock is at most kStaleClock older than its locks.
  // The network's round trip is not a wait: the read's time is judged
  // against the BEGIN's, which carried the clock over the same link.
  template <class Read>
  Result locking(Read&& read) {
    if (!writing_) return read();
    const auto start = std::chrono::steady_clock::now();
    Result r = read();
    if (std::chrono::steady_clock::now() - start > begin_round_trip_ + kStaleClock) {
      throw Conflict("waited for a row lock: deciding again at the current time");
    }
    return r;
  }
  static constexpr std::chrono::milliseconds kStaleClock{50};

  std::optional<ItemRow> find_item_by_key(const std::string& project_id,
                                          std::string_view key) override {
    return one_item(run(fmt::format("SELECT {} FROM items WHERE project_id = $1 AND idem_key = $2{}",
                                    kItemColumns, lock()),
                        Params().text(project_id).text(key)));
  }

  static Params item_params(const ItemRow& r) {
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
        .i64(static_cast<std::int64_t>(r.ended_fence));
    return p;
  }

  // Deferred: an id taken is io, a key taken meanwhile (another enqueue
  // with it committed) a Conflict, and the command runs again and finds it.
  void insert_item(const ItemRow& r) override {
    defer(fmt::format("INSERT INTO items ({}) VALUES ({})", kItemColumns, kItemValues),
          item_params(r));
  }

  // Deferred, as an upsert (rebuild may put a row that does not exist).
  void put_item(const ItemRow& r) override {
    defer(fmt::format("INSERT INTO items ({}) VALUES ({}) ON CONFLICT (item_id) DO UPDATE SET {}",
                      kItemColumns, kItemValues, kItemUpdate),
          item_params(r));
  }

  void delete_item(std::string_view item_id) override {
    run("DELETE FROM items WHERE item_id = $1", Params().text(item_id));
  }

  // A claim's candidates: locked, skipping rows another claim holds.
  const char* claim_lock() const { return writing_ ? " FOR UPDATE SKIP LOCKED" : ""; }

  std::optional<ItemRow> oldest_ready(const std::string& project_id) override {
    return one_item(run(fmt::format("SELECT {} FROM items WHERE status = 'ready' AND project_id = "
                                    "$1 ORDER BY queued_seq LIMIT 1{}",
                                    kItemColumns, claim_lock()),
                        Params().text(project_id)));
  }

  std::optional<ItemRow> earliest_lapsed(Micros now, const std::string& project_id) override {
    return one_item(run(fmt::format("SELECT {} FROM items WHERE status = 'claimed' AND project_id "
                                    "= $1 AND lease_expires_at <= $2 ORDER BY lease_expires_at, "
                                    "queued_seq LIMIT 1{}",
                                    kItemColumns, claim_lock()),
                        Params().text(project_id).i64(now)));
  }

  std::optional<ItemRow> earliest_due(Micros now, const std::string& project_id) override {
    return one_item(run(fmt::format("SELECT {} FROM items WHERE status = 'scheduled' AND "
                                    "project_id = $1 AND run_at <= $2 ORDER BY run_at, "
                                    "queued_seq LIMIT 1{}",
                                    kItemColumns, claim_lock()),
                        Params().text(project_id).i64(now)));
  }

  std::vector<std::string> claimable_project_ids(const std::string* actor) override {
    Result r = actor == nullptr
                   ? run("SELECT project_id FROM projects WHERE NOT paused ORDER BY project_id")
                   : run("SELECT a.project_id FROM project_actors a JOIN projects p ON "
                         "p.project_id = a.project_id WHERE a.actor = $1 AND NOT p.paused "
                         "ORDER BY a.project_id",
                         Params().text(*actor));
    std::vector<std::string> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
    return out;
  }

  std::vector<ItemRow> items_in_status(const std::string& project_id, ItemStatus status,
                                       std::size_t limit) override {
    Result r = run(fmt::format("SELECT {} FROM items WHERE project_id = $1 AND status = '{}' "
                               "ORDER BY {} LIMIT $2{}",
                               kItemColumns, to_string(status), status_order(status), lock()),
                   Params().text(project_id).i64(static_cast<std::int64_t>(limit)));
    std::vector<ItemRow> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_item(r, i));
    return out;
  }

  // Every list of every project in scope, in one statement; each candidate
  // locked, skipping rows another claim holds.
  std::vector<CandidateList> claim_candidates(Micros now, const std::string* actor,
                                              std::size_t limit) override {
    if (!writing_) return Backend::claim_candidates(now, actor, limit);
    static const std::string kSql = [] {
      const std::string ready = fmt::format(
          "SELECT {} FROM items WHERE status = 'ready' AND project_id = p.project_id ORDER BY "
          "queued_seq LIMIT $3 FOR UPDATE SKIP LOCKED",
          kItemColumns);
      const std::string lapsed = fmt::format(
          "SELECT {} FROM items WHERE status = 'claimed' AND project_id = p.project_id AND "
          "lease_expires_at <= $1 ORDER BY lease_expires_at, queued_seq LIMIT $3 FOR UPDATE "
          "SKIP LOCKED",
          kItemColumns);
      const std::string due = fmt::format(
          "SELECT {} FROM items WHERE status = 'scheduled' AND project_id = p.project_id AND "
          "run_at <= $1 ORDER BY run_at, queued_seq LIMIT $3 FOR UPDATE SKIP LOCKED",
          kItemColumns);
      return fmt::format(
          "WITH p AS (SELECT project_id FROM projects WHERE $2::text IS NULL AND NOT paused "
          "UNION ALL SELECT a.project_id FROM project_actors a JOIN projects j ON j.project_id = "
          "a.project_id WHERE a.actor = $2::text AND NOT j.paused) "
          "SELECT r.*, 'r' || p.project_id FROM p CROSS JOIN LATERAL ({}) r UNION ALL "
          "SELECT l.*, 'l' || p.project_id FROM p CROSS JOIN LATERAL ({}) l UNION ALL "
          "SELECT d.*, 'd' || p.project_id FROM p CROSS JOIN LATERAL ({}) d",
          ready, lapsed, due);
    }();
    Params params;
    params.i64(now);
    if (actor != nullptr) {
      params.text(*actor);
    } else {
      params.null();
    }
    params.i64(static_cast<std::int64_t>(limit));
    Result r = run(kSql, std::move(params));
    std::vector<CandidateList> out;
    std::string list;
    for (int i = 0; i < r.rows(); ++i) {
      std::string key = r.text(i, 32);
      if (out.empty() || key != list) {
        out.emplace_back();
        list = std::move(key);
      }
      out.back().rows.push_back(read_item(r, i));
    }
    for (auto& l : out) l.more = l.rows.size() >= limit;
    return out;
  }

  std::vector<ItemRow> lapsed_items(Micros now, const std::string& project_id) override {
    Result r = run(fmt::format("SELECT {} FROM items WHERE status = 'claimed' AND project_id = $1 "
                               "AND lease_expires_at <= $2 ORDER BY lease_expires_at, queued_seq{}",
                               kItemColumns, claim_lock()),
                   Params().text(project_id).i64(now));
    std::vector<ItemRow> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_item(r, i));
    return out;
  }

  std::optional<Micros> next_lapse(const std::string& project_id) override {
    Result r = run("SELECT least((SELECT min(lease_expires_at) FROM items WHERE status = "
                   "'claimed' AND project_id = $1), (SELECT min(run_at) FROM items WHERE status "
                   "= 'scheduled' AND project_id = $1))",
                   Params().text(project_id));
    if (r.null(0, 0)) return std::nullopt;
    return r.i64(0, 0);
  }

  std::unique_ptr<Cursor<ScannedItem>> scan_items() override {
    return cursor<ScannedItem>(fmt::format("SELECT {} FROM items ORDER BY item_id", kItemColumns),
                               Params(), fill_item);
  }

  std::unique_ptr<Cursor<ItemRow>> scan_allocatable(const std::string& project_id) override {
    return cursor<ItemRow>(
        fmt::format("SELECT {} FROM items WHERE project_id = $1 AND status IN ('ready', "
                    "'claimed', 'scheduled') ORDER BY (terminal_since IS NOT NULL) DESC, priority DESC, "
                    "queued_seq",
                    kAllocationColumns),
        Params().text(project_id), [](const Result& r, int i, ItemRow& row) {
          row = ItemRow{};
          row.item_id = r.text(i, 0);
          row.project_id = r.text(i, 1);
          row.status = parse_item_status(r.text(i, 2)).value_or(ItemStatus::ready);
          row.session = r.text(i, 3);
          row.lease_expires_at = r.i64(i, 4);
          row.review = parse_review_text(r.text(i, 5)).value_or(ReviewState::none);
          row.author = r.text(i, 6);
          if (!r.null(i, 7) && r.i64(i, 7) == 0) {
            throw StorageError(Category::corruption,
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
        });
  }

  // ---- the terminal path, incidents, sessions --------------------------------

  void put_terminal_lock(const TerminalLockRow& r) override {
    run("INSERT INTO terminal_locks (item_id, since, reason) VALUES ($1, $2, $3) "
        "ON CONFLICT (item_id) DO UPDATE SET since = EXCLUDED.since, reason = EXCLUDED.reason",
        Params().text(r.item_id).i64(r.since).text(r.reason));
  }
  void delete_terminal_lock(std::string_view item_id) override {
    run("DELETE FROM terminal_locks WHERE item_id = $1", Params().text(item_id));
  }
  std::unique_ptr<Cursor<TerminalLockRow>> scan_terminal_locks() override {
    return cursor<TerminalLockRow>(
        "SELECT item_id, since, reason FROM terminal_locks ORDER BY item_id", Params(),
        [](const Result& r, int i, TerminalLockRow& row) {
          row = TerminalLockRow{r.text(i, 0), r.i64(i, 1), r.text(i, 2)};
        });
  }

  std::optional<IncidentLinkRow> find_incident(std::string_view incident_id) override {
    Result r = locking([&] {
      return run(fmt::format("SELECT {} FROM incident_links WHERE incident_id = $1{}",
                             kIncidentColumns, lock()),
                 Params().text(incident_id));
    });
    if (r.rows() == 0) return std::nullopt;
    return read_incident(r, 0);
  }
  void put_incident(const IncidentLinkRow& r) override {
    run(fmt::format(
            "INSERT INTO incident_links ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
            "$12, $13, $14, $15, $16) ON CONFLICT (incident_id) DO UPDATE SET "
            "provider = EXCLUDED.provider, fingerprint = EXCLUDED.fingerprint, org = EXCLUDED.org, "
            "repo = EXCLUDED.repo, environment = EXCLUDED.environment, target = EXCLUDED.target, "
            "status = EXCLUDED.status, event_count = EXCLUDED.event_count, "
            "permalink = EXCLUDED.permalink, first_seen = EXCLUDED.first_seen, "
            "last_seen = EXCLUDED.last_seen, linked_prs = EXCLUDED.linked_prs, "
            "linked_at = EXCLUDED.linked_at, updated_at = EXCLUDED.updated_at, "
            "last_seq = EXCLUDED.last_seq",
            kIncidentColumns),
        Params()
            .text(r.provider)
            .text(r.fingerprint)
            .text(r.org)
            .text(r.repo)
            .text(r.environment)
            .text(r.target)
            .opt(r.status)
            .opt(r.event_count)
            .opt(r.permalink)
            .opt(r.first_seen)
            .opt(r.last_seen)
            .opt(r.linked_prs)
            .text(r.incident_id)
            .i64(r.linked_at)
            .i64(r.updated_at)
            .i64(r.last_seq));
  }
  void delete_incident(std::string_view incident_id) override {
    run("DELETE FROM incident_links WHERE incident_id = $1", Params().text(incident_id));
  }
  std::unique_ptr<Cursor<IncidentLinkRow>> scan_incidents() override {
    return cursor<IncidentLinkRow>(
        fmt::format("SELECT {} FROM incident_links ORDER BY incident_id", kIncidentColumns),
        Params(), [](const Result& r, int i, IncidentLinkRow& row) { row = read_incident(r, i); });
  }
  std::vector<IncidentLinkRow> incidents_for(std::string_view target) override {
    Result r = run(fmt::format("SELECT {} FROM incident_links WHERE target = $1 ORDER BY "
                               "incident_id",
                               kIncidentColumns),
                   Params().text(target));
    std::vector<IncidentLinkRow> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_incident(r, i));
    return out;
  }

  std::optional<SessionRow> find_session(std::string_view session_id) override {
    Result r = locking([&] {
      return run(fmt::format("SELECT {} FROM sessions WHERE session_id = $1{}", kSessionColumns,
                             lock()),
                 Params().text(session_id));
    });
    if (r.rows() == 0) return std::nullopt;
    return read_session(r, 0);
  }
  void put_session(const SessionRow& r) override {
    run(fmt::format("INSERT INTO sessions ({}) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT "
                    "(session_id) DO UPDATE SET actor = EXCLUDED.actor, opened_at = "
                    "EXCLUDED.opened_at, last_seen_at = EXCLUDED.last_seen_at, closed_at = "
                    "EXCLUDED.closed_at, last_seq = EXCLUDED.last_seq",
                    kSessionColumns),
        Params()
            .text(r.session_id)
            .text_or_null(r.actor)
            .i64(r.opened_at)
            .i64(r.last_seen_at)
            .i64_or_null(r.closed_at)
            .i64(r.last_seq));
  }
  void delete_session(std::string_view session_id) override {
    run("DELETE FROM sessions WHERE session_id = $1", Params().text(session_id));
  }
  std::vector<ItemRow> session_items(std::string_view session_id) override {
    Result r = locking([&] {
      return run(fmt::format("SELECT {} FROM items WHERE session = $1 AND status = 'claimed' "
                             "ORDER BY item_id{}",
                             kItemColumns, lock()),
                 Params().text(session_id));
    });
    std::vector<ItemRow> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_item(r, i));
    return out;
  }
  std::unique_ptr<Cursor<SessionRow>> scan_sessions() override {
    return cursor<SessionRow>(
        fmt::format("SELECT {} FROM sessions ORDER BY session_id", kSessionColumns), Params(),
        [](const Result& r, int i, SessionRow& row) { row = read_session(r, i); });
  }

  // ---- cron schedules ------------------------------------------------------------

  std::optional<ScheduleRow> find_schedule(std::string_view name) override {
    Result r = run(fmt::format("SELECT {} FROM schedules WHERE name = $1{}", kScheduleColumns,
                               lock()),
                   Params().text(name));
    if (r.rows() == 0) return std::nullopt;
    return read_schedule(r, 0);
  }
  void put_schedule(const ScheduleRow& s) override {
    run(fmt::format("INSERT INTO schedules ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
                    "$11, $12, $13, $14, $15, $16) ON CONFLICT (name) DO UPDATE SET project_id = "
                    "EXCLUDED.project_id, cron = EXCLUDED.cron, zone = EXCLUDED.zone, payload = "
                    "EXCLUDED.payload, overlap_skip = EXCLUDED.overlap_skip, catch_up = "
                    "EXCLUDED.catch_up, next_at = EXCLUDED.next_at, paused = EXCLUDED.paused, "
                    "removed = EXCLUDED.removed, last_item = EXCLUDED.last_item, "
                    "last_occurrence = EXCLUDED.last_occurrence, fired = EXCLUDED.fired, "
                    "created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, "
                    "last_seq = EXCLUDED.last_seq",
                    kScheduleColumns),
        Params()
            .text(s.name)
            .text(s.project_id)
            .text(s.cron)
            .text(s.zone)
            .text(s.payload)
            .text(s.overlap_skip ? "true" : "false")
            .i64(s.catch_up)
            .i64(s.next_at)
            .text(s.paused ? "true" : "false")
            .text(s.removed ? "true" : "false")
            .text_or_null(s.last_item)
            .i64(s.last_occurrence)
            .i64(s.fired)
            .i64(s.created_at)
            .i64(s.updated_at)
            .i64(s.last_seq));
  }
  void delete_schedule(std::string_view name) override {
    run("DELETE FROM schedules WHERE name = $1", Params().text(name));
  }
  std::unique_ptr<Cursor<ScheduleRow>> scan_schedules() override {
    return cursor<ScheduleRow>(
        fmt::format("SELECT {} FROM schedules ORDER BY name", kScheduleColumns), Params(),
        [](const Result& r, int i, ScheduleRow& row) { row = read_schedule(r, i); });
  }
  std::vector<ScheduleRow> due_schedules(Micros now, std::size_t limit) override {
    Result r = run(fmt::format("SELECT {} FROM schedules WHERE NOT paused AND NOT removed AND "
                               "next_at <= $1 ORDER BY next_at LIMIT $2{}",
                               kScheduleColumns, claim_lock()),
                   Params().i64(now).i64(static_cast<std::int64_t>(limit)));
    std::vector<ScheduleRow> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_schedule(r, i));
    return out;
  }

  // ---- projects and scope ----------------------------------------------------

  std::optional<ProjectRow> find_project(std::string_view project_id) override {
    Result r = run(fmt::format("SELECT {} FROM projects WHERE project_id = $1", kProjectColumns),
                   Params().text(project_id));
    if (r.rows() == 0) return std::nullopt;
    return read_project(r, 0);
  }
  void put_project(const ProjectRow& r) override {
    run(fmt::format("INSERT INTO projects ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON "
                    "CONFLICT (project_id) DO UPDATE SET title = EXCLUDED.title, status = "
                    "EXCLUDED.status, created_at = EXCLUDED.created_at, last_seq = "
                    "EXCLUDED.last_seq, max_attempts = EXCLUDED.max_attempts, backoff = "
                    "EXCLUDED.backoff, paused = EXCLUDED.paused, pause_reason = "
                    "EXCLUDED.pause_reason",
                    kProjectColumns),
        Params()
            .text(r.project_id)
            .text(r.title)
            .text(r.status)
            .i64(r.created_at)
            .i64(r.last_seq)
            .i64(r.max_attempts)
            .text(r.backoff)
            .text(r.paused ? "true" : "false")
            .text(r.pause_reason));
  }
  void delete_project(std::string_view project_id) override {
    run("DELETE FROM projects WHERE project_id = $1", Params().text(project_id));
  }
  bool is_assigned(std::string_view project_id, std::string_view actor) override {
    return run("SELECT 1 FROM project_actors WHERE project_id = $1 AND actor = $2",
               Params().text(project_id).text(actor))
               .rows() > 0;
  }
  void put_assignment(const ProjectActorRow& r) override {
    run("INSERT INTO project_actors (project_id, actor, assigned_at, last_seq) VALUES "
        "($1, $2, $3, $4) ON CONFLICT (project_id, actor) DO UPDATE SET assigned_at = "
        "EXCLUDED.assigned_at, last_seq = EXCLUDED.last_seq",
        Params().text(r.project_id).text(r.actor).i64(r.assigned_at).i64(r.last_seq));
  }
  void delete_assignment(std::string_view project_id, std::string_view actor) override {
    run("DELETE FROM project_actors WHERE project_id = $1 AND actor = $2",
        Params().text(project_id).text(actor));
  }
  std::vector<std::string> project_ids(const std::string* actor) override {
    Result r = actor == nullptr
                   ? run("SELECT project_id FROM projects ORDER BY project_id")
                   : run("SELECT project_id FROM project_actors WHERE actor = $1 ORDER BY project_id",
                         Params().text(*actor));
    std::vector<std::string> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
    return out;
  }
  std::vector<ProjectRow> all_projects() override {
    Result r = run(fmt::format("SELECT {} FROM projects ORDER BY project_id", kProjectColumns));
    std::vector<ProjectRow> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_project(r, i));
    return out;
  }
  std::vector<ProjectActorRow> all_assignments() override {
    Result r = run("SELECT project_id, actor, assigned_at, last_seq FROM project_actors "
                   "ORDER BY project_id, actor");
    std::vector<ProjectActorRow> out;
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back(ProjectActorRow{r.text(i, 0), r.text(i, 1), r.i64(i, 2), r.i64(i, 3)});
    }
    return out;
  }

  Seq last_seq() override { return run("SELECT coalesce(max(seq), 0) FROM events").i64(0, 0); }

  std::array<std::int64_t, kItemStatuses + 1> status_counts(const std::string* project_id) override {
    Result r = project_id == nullptr
                   ? run("SELECT status, count(*) FROM items GROUP BY status")
                   : run("SELECT status, count(*) FROM items WHERE project_id = $1 GROUP BY status",
                         Params().text(*project_id));
    std::array<std::int64_t, kItemStatuses + 1> out{};
    for (int i = 0; i < r.rows(); ++i) {
      if (auto status = parse_item_status(r.text(i, 0))) {
        out[static_cast<int>(*status)] = r.i64(i, 1);
      } else {
        out[kItemStatuses] += r.i64(i, 1);
      }
    }
    return out;
  }

  // ---- waiting for work --------------------------------------------------------

  // Once per transaction, sent with its COMMIT (a NOTIFY is delivered when
  // the transaction commits, and never if it rolls back).
  void announce_work() override { announce_ = true; }

  void wait_for_work(std::chrono::steady_clock::time_point deadline) override {
    ensure_connected();
    if (!listening_) {
      simple("LISTEN cplane_work", "cannot listen for work");
      listening_ = true;
      return;  // the caller looks once more: work may have come before LISTEN
    }
    for (;;) {
      if (PQconsumeInput(conn_) == 0) {
        throw StorageError(Category::unavailable,
                           fmt::format("lost the connection to PostgreSQL while waiting for work: {}",
                                       trimmed(PQerrorMessage(conn_))));
      }
      bool woken = false;
      while (PGnotify* n = PQnotifies(conn_)) {
        woken = woken || schema_ == n->extra;
        PQfreemem(n);
      }
      if (woken) return;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      pollfd p{PQsocket(conn_), POLLIN, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)));
      if (rc < 0 && errno != EINTR) {
        throw StorageError(Category::io, fmt::format("poll failed: {}", std::strerror(errno)));
      }
    }
  }

  std::string last_error_state_;

 private:
  std::string url_;
  OpenOptions options_;
  PGconn* conn_ = nullptr;
  std::string schema_;
  std::unordered_map<std::string, std::string> prepared_;
  int shard_ = 0;
  std::uint64_t cursors_ = 0;
  bool writing_ = false;
  bool listening_ = false;
  Micros tx_now_ = 0;
  std::optional<Delta> delta_;
  std::vector<Deferred> deferred_;
  bool announce_ = false;  // work became claimable: NOTIFY with the commit
  std::chrono::steady_clock::duration begin_round_trip_{};
  pid_t pid_ = ::getpid();
};

template <class Row>
PgCursor<Row>::~PgCursor() {
  backend_.close_cursor(name_);
}

template <class Row>
bool PgCursor<Row>::next(Row& row) {
  if (!fetched_ || at_ >= page_size_) {
    if (done_) return false;
    page_ = backend_.fetch(name_, kFetchRows);
    fetched_ = true;
    page_size_ = page_.rows();
    at_ = 0;
    if (page_size_ < kFetchRows) done_ = true;
    if (page_size_ == 0) return false;
  }
  fill_(page_, at_++, row);
  return true;
}

}  // namespace

void throw_for_sqlstate(std::string_view state, const std::string& text, const std::string& url) {
  if (state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03") {
    throw StorageError(Category::unavailable,
                       text + " (the connection to PostgreSQL was lost; the transaction did "
                              "not commit: retry, cplane reconnects)");
  }
  if (state == "40001" || state == "40P01") throw Conflict(text);
  if (state == "55P03" || state == "57014") {
    throw StorageError(Category::busy,
                       text + " (a row this command needs stayed locked past the lock timeout: "
                              "retry, or raise --lock-timeout)");
  }
  if (state == "53100") {
    throw StorageError(Category::full,
                       text + " (the server's disk is full; nothing of the transaction was "
                              "written: free space and retry)");
  }
  // Class XX: damaged data is corruption; anything else in it is the
  // server's own bug (XX000 internal_error), never the caller's input.
  if (state == "XX001" || state == "XX002") throw StorageError(Category::corruption, text);
  if (state.starts_with("XX")) {
    throw InternalError(text + fmt::format(" (PostgreSQL reported an internal error, SQLSTATE {})",
                                           state));
  }
  if (state == "25006") {
    throw InvalidArgument(InvalidArgument::Reason::read_only,
                          fmt::format("{} was opened for reading: it cannot write",
                                      redacted_url(url)));
  }
  throw StorageError(Category::io, text);
}

std::unique_ptr<Backend> open_postgres(const std::string& url, const OpenOptions& options) {
  return std::make_unique<PostgresBackend>(url, options);
}

}  // namespace cplane::storage
