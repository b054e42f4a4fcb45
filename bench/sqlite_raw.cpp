// The tables mirror cplane's item rows and event log:
//
//   items   one row per item (WITHOUT ROWID); a claim sets status 'claimed',
//           owner, lease, fence + 1, attempts + 1; a finish sets 'done'
//           under the fence. items_ready is the queue: a claim is one seek.
//   events  one row per transition (claimed, done): a 100-byte body and a
//           32-byte hash, as cplane writes an encoded event and its link in
//           the hash chain.
//
// Writers take an exclusive flock on PATH-lock before BEGIN IMMEDIATE, as
// cplane's do (a fair queue in the kernel), and let it go after COMMIT.
#include "bench/sqlite_raw.hpp"

#include "bench/fleet_run.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace cplane::bench {
namespace {

const char* const kSchema = R"sql(
PRAGMA journal_mode = WAL;
CREATE TABLE items (
  item_id TEXT PRIMARY KEY, project_id TEXT NOT NULL, payload TEXT NOT NULL,
  status TEXT NOT NULL, owner TEXT, fence INTEGER NOT NULL, attempts INTEGER NOT NULL,
  lease_expires_at INTEGER, queued_seq INTEGER NOT NULL, updated_at INTEGER NOT NULL,
  last_seq INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX items_ready ON items (project_id, queued_seq) WHERE status = 'ready';
CREATE TABLE events (
  seq INTEGER PRIMARY KEY, item_id TEXT, project_id TEXT NOT NULL, type TEXT NOT NULL,
  at INTEGER NOT NULL, body BLOB NOT NULL, stream_kind TEXT NOT NULL, stream_id TEXT NOT NULL,
  stream_rev INTEGER NOT NULL, hash BLOB
);
CREATE INDEX events_by_stream ON events (stream_kind, stream_id, seq);
)sql";

std::int64_t wall_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class Db {
 public:
  explicit Db(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                        nullptr) != SQLITE_OK) {
      throw std::runtime_error("cannot open " + path + ": " + sqlite3_errmsg(db_));
    }
    sqlite3_busy_timeout(db_, 60'000);
  }
  ~Db() {
    for (auto* s : stmts_) sqlite3_finalize(s);
    sqlite3_close(db_);
  }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  void exec(const char* sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
      std::string message = error != nullptr ? error : "?";
      sqlite3_free(error);
      throw std::runtime_error(fmt::format("{}: {}", message, sql));
    }
  }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
      throw std::runtime_error(fmt::format("{}: {}", sqlite3_errmsg(db_), sql));
    }
    stmts_.push_back(s);
    return s;
  }
  // Steps `s` once: true when a row came back.
  bool step(sqlite3_stmt* s) {
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db_));
    return false;
  }
  std::int64_t scalar(const char* sql) {
    sqlite3_stmt* s = prepare(sql);
    step(s);
    const std::int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return v;
  }

 private:
  sqlite3* db_ = nullptr;
  std::vector<sqlite3_stmt*> stmts_;
};

// The writers' queue: an exclusive flock on PATH-lock around each write.
class WriterLock {
 public:
  explicit WriterLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT, 0644)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + path);
  }
  ~WriterLock() { ::close(fd_); }
  void lock() {
    while (::flock(fd_, LOCK_EX) != 0) {
    }
  }
  void unlock() { ::flock(fd_, LOCK_UN); }

 private:
  int fd_;
};

fleet::WorkerRecord drain(const std::string& path, const std::string& owner, bool full_claims,
                          bool full_finishes) {
  Db db{path};
  int sync = -1;  // as cplane does: the pragma only when the level changes
  auto durability = [&](bool full) {
    if (sync == (full ? 2 : 1)) return;
    db.exec(full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    sync = full ? 2 : 1;
  };
  WriterLock writer{path + "-lock"};
  sqlite3_stmt* begin = db.prepare("BEGIN IMMEDIATE");
  sqlite3_stmt* commit = db.prepare("COMMIT");
  sqlite3_stmt* pick = db.prepare(
      "SELECT item_id, fence FROM items WHERE status = 'ready' AND project_id = 'bench' "
      "ORDER BY queued_seq LIMIT 1");
  sqlite3_stmt* claim = db.prepare(
      "UPDATE items SET status = 'claimed', owner = ?2, fence = fence + 1, attempts = attempts "
      "+ 1, lease_expires_at = ?3, updated_at = ?4, last_seq = (SELECT coalesce(max(seq), 0) + "
      "1 FROM events) WHERE item_id = ?1");
  sqlite3_stmt* finish = db.prepare(
      "UPDATE items SET status = 'done', updated_at = ?3, last_seq = (SELECT coalesce(max(seq), "
      "0) + 1 FROM events) WHERE item_id = ?1 AND fence = ?2 AND status = 'claimed'");
  sqlite3_stmt* event = db.prepare(
      "INSERT INTO events (item_id, project_id, type, at, body, stream_kind, stream_id, "
      "stream_rev, hash) VALUES (?1, 'bench', ?2, ?3, ?4, 'item', ?1, ?5, ?6)");
  const std::string body(100, 'b'), hash(32, 'h');
  auto run = [&](sqlite3_stmt* s) {
    db.step(s);
    sqlite3_reset(s);
  };
  auto add_event = [&](const std::string& item, const char* type, std::int64_t at,
                       std::int64_t rev) {
    sqlite3_bind_text(event, 1, item.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(event, 2, type, -1, SQLITE_STATIC);
    sqlite3_bind_int64(event, 3, at);
    sqlite3_bind_blob(event, 4, body.data(), static_cast<int>(body.size()), SQLITE_STATIC);
    sqlite3_bind_int64(event, 5, rev);
    sqlite3_bind_blob(event, 6, hash.data(), static_cast<int>(hash.size()), SQLITE_STATIC);
    run(event);
  };
  fleet::WorkerRecord r;
  for (;;) {
    const double t0 = fleet::seconds_now();
    durability(full_claims);
    writer.lock();
    run(begin);
    std::string item;
    std::int64_t fence = 0;
    if (db.step(pick)) {
      item = reinterpret_cast<const char*>(sqlite3_column_text(pick, 0));
      fence = sqlite3_column_int64(pick, 1) + 1;
    }
    sqlite3_reset(pick);
    const std::int64_t at = wall_micros();
    if (fence > 0) {
      sqlite3_bind_text(claim, 1, item.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(claim, 2, owner.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(claim, 3, at + 900'000'000);
      sqlite3_bind_int64(claim, 4, at);
      run(claim);
      add_event(item, "claimed", at, 2 * fence);
    }
    run(commit);
    writer.unlock();
    const double t1 = fleet::seconds_now();
    r.claim_latency.push_back(t1 - t0);
    r.longest_wait = std::max(r.longest_wait, t1 - t0);
    if (fence == 0) break;
    ++r.claims;

    durability(full_finishes);
    writer.lock();
    run(begin);
    const std::int64_t done_at = wall_micros();
    sqlite3_bind_text(finish, 1, item.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(finish, 2, fence);
    sqlite3_bind_int64(finish, 3, done_at);
    run(finish);
    const bool finished = sqlite3_changes(sqlite3_db_handle(finish)) == 1;
    if (finished) add_event(item, "done", done_at, 2 * fence + 1);
    run(commit);
    writer.unlock();
    r.longest_wait = std::max(r.longest_wait, fleet::seconds_now() - t1);
    if (finished) {
      ++r.finishes;
    } else {
      ++r.refused;
    }
  }
  return r;
}

}  // namespace

SqliteRawDrain drain_sqlite_raw(const std::string& path, int workers, std::int64_t items,
                                bool full_claims, bool full_finishes,
                                const std::string& record_prefix) {
  {
    Db db{path};
    db.exec(kSchema);
    db.exec("BEGIN");
    sqlite3_stmt* put = db.prepare(
        "INSERT INTO items (item_id, project_id, payload, status, fence, attempts, "
        "lease_expires_at, queued_seq, updated_at, last_seq) VALUES (?1, 'bench', "
        "'{\"task\":\"benchmark item\"}', 'ready', 0, 0, 0, ?2, ?3, 0)");
    const std::int64_t now = wall_micros();
    for (std::int64_t i = 1; i <= items; ++i) {
      const std::string id = fmt::format("item-{:031}", i);
      sqlite3_bind_text(put, 1, id.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(put, 2, i);
      sqlite3_bind_int64(put, 3, now);
      db.step(put);
      sqlite3_reset(put);
    }
    db.exec("COMMIT");
  }
  FleetRun run = run_fleet(workers, record_prefix, [&](int w) {
    return std::function<fleet::WorkerRecord()>([&path, w, full_claims, full_finishes] {
      return drain(path, fmt::format("worker-{}", w), full_claims, full_finishes);
    });
  });
  SqliteRawDrain result;
  result.seconds = run.seconds;
  result.workers = std::move(run.records);
  const std::int64_t claims = run.claims, refused = run.refused;
  result.items = run.finishes;
  Db db{path};
  const std::int64_t done = db.scalar("SELECT count(*) FROM items WHERE status = 'done' AND fence = 1");
  const std::int64_t events = db.scalar("SELECT count(*) FROM events");
  if (claims != items || result.items != items || refused != 0 || done != items ||
      events != 2 * items) {
    throw std::runtime_error(fmt::format(
        "raw: of {} items, {} claims, {} finishes, {} refused; {} done once, {} events", items,
        claims, result.items, refused, done, events));
  }
  return result;
}

}  // namespace cplane::bench
