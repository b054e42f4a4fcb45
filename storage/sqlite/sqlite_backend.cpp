// The SQLite engine. The on-disk schema and its invariants are described in
// schema.cpp.
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

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sqlite3.h>

#include <fmt/format.h>

#include "events/clock.hpp"
#include "events/codec.hpp"
#include "storage/sqlite/coalescing_vfs.hpp"
#include "storage/sqlite/combine_area.hpp"
#include "storage/sqlite/row_codec.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/statement.hpp"
#include "storage/sqlite/wal_watch.hpp"
#include "storage/sqlite/writer_lock.hpp"
#include "storage/open.hpp"
#include "events/errors.hpp"
#include "events/json.hpp"
#include "storage/stored_text.hpp"

namespace cplane::storage {
namespace {

using namespace sqlite;

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
      const int version = identify_schema(db_, path_, read_only_, lock_timeout_);
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
        if (version < kSqliteSchemaVersion) migrate_schema(db_, path_, writer_lock_, lock_timeout_);
        if (options.sqlite.combine && !in_memory) {
          // Without the area every command runs alone, which is always
          // correct: group commit is speed, not semantics.
          std::string why;
          combine_ = CombineArea::open(side + "-combine", path, why);
        }
        exec(db_, "PRAGMA synchronous=FULL", "cannot set synchronous on " + path);
        if (query_text(db_, "PRAGMA journal_mode=WAL") != "wal" && !in_memory) {
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
        exec(db_, "PRAGMA journal_size_limit=4194304", "cannot set journal_size_limit on " + path);
        sqlite3_wal_hook(db_, &SqliteBackend::after_commit, this);
      }
      if (options.sqlite.cache_mib > 0) {
        exec(db_, fmt::format("PRAGMA cache_size=-{}", options.sqlite.cache_mib * 1024).c_str(),
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
      exec(db_, sync == Sync::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
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

  std::int64_t event_count() override { return query_int(db_, "SELECT count(*) FROM events"); }

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

  std::optional<ItemRow> one_item(Statement& s) {
    std::optional<ItemRow> out;
    if (s.step()) out = read_item(s);
    s.reset();
    return out;
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

  int schema_version() const noexcept override { return kSqliteSchemaVersion; }

  std::string database_id() override {
    Statement s(db_, "SELECT value FROM store_info WHERE key = 'database_id'");
    s.bind();
    return s.step() ? s.text(0) : std::string();
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

}  // namespace cplane::storage
