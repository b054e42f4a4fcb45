// Opening and closing a connection of the SQLite engine (engine.hpp): the
// checks on the file before SQLite touches it, the schema check and
// migration (schema.cpp), the writer's lock and the group-commit area beside
// the file, the connection's pragmas, and its prepared statements.
#include "storage/sqlite/sqlite_backend.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "events/errors.hpp"
#include "storage/open.hpp"
#include "storage/sqlite/coalescing_vfs.hpp"
#include "storage/sqlite/engine.hpp"
#include "storage/sqlite/row_codec.hpp"
#include "storage/sqlite/schema.hpp"

namespace cplane::storage {
namespace sqlite {

namespace {

// Before SQLite starts (its first open or VFS registration in the
// process): no memory statistics, which cplane never reads. With them
// every allocation and free inside SQLite takes a global mutex, about 180
// lock and unlock pairs per command. A process that started SQLite before
// (a host program's own use) keeps its settings: sqlite3_config then
// refuses, and nothing else changes.
void configure_sqlite_once() {
  static const bool configured = [] {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  }();
  (void)configured;
}

}  // namespace

SqliteBackend::SqliteBackend(const std::string& path, const OpenOptions& options)
    : path_(path), lock_timeout_(options.lock_timeout), read_only_(options.read_only) {
  configure_sqlite_once();
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
  if (const int size = options.sqlite.page_size;
      size != 0 && (size < 512 || size > 65536 || (size & (size - 1)) != 0)) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("page size {} for {}: expected 0 (SQLite's default) or a "
                                   "power of two from 512 to 65536",
                                   size, path));
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
      // A new store's page size; a store that exists keeps its own.
      if (version == 0 && options.sqlite.page_size > 0) {
        exec(db_, fmt::format("PRAGMA page_size={}", options.sqlite.page_size).c_str(),
             "cannot set page_size on " + path);
      }
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

SqliteBackend::~SqliteBackend() {
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

void SqliteBackend::prepare() {
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
  stmts_.stream_started = p(
      "SELECT 1 FROM events WHERE stream_kind = ?1 AND stream_id = ?2 LIMIT 1");
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
      "INSERT OR REPLACE INTO projects ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
      kProjectColumns));
  stmts_.all_unpaused_ids =
      p("SELECT project_id FROM projects WHERE paused = 0 ORDER BY project_id");
  stmts_.actor_unpaused_ids = p(
      "SELECT a.project_id FROM project_actors a JOIN projects p ON p.project_id = a.project_id "
      "WHERE a.actor = ?1 AND p.paused = 0 ORDER BY a.project_id");
  stmts_.delete_project = p("DELETE FROM projects WHERE project_id = ?1");
  stmts_.find_limit = p(fmt::format("SELECT {} FROM limits WHERE key = ?1", kLimitColumns));
  {
    const ItemStatus statuses[] = {ItemStatus::ready, ItemStatus::scheduled, ItemStatus::claimed};
    for (int i = 0; i < 3; ++i) {
      const std::string where =
          fmt::format("status = '{}' AND project_id = ?1", to_string(statuses[i]));
      stmts_.key_first[i] = p(fmt::format("SELECT min(concurrency_key) FROM items WHERE {}", where));
      stmts_.key_next[i] = p(fmt::format("SELECT concurrency_key FROM items WHERE {} AND "
                                         "concurrency_key > ?2 ORDER BY concurrency_key LIMIT 1",
                                         where));
      stmts_.key_head[i] = p(fmt::format("SELECT {} FROM items WHERE {} AND concurrency_key = ?2 "
                                         "ORDER BY {} LIMIT 1",
                                         kItemColumns, where, key_group_order(statuses[i])));
    }
  }
  stmts_.put_limit = p(fmt::format(
      "INSERT OR REPLACE INTO limits ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
      kLimitColumns));
  stmts_.live_leases = p(
      "SELECT count(*) FROM items WHERE status = 'claimed' AND concurrency_key = ?1 AND "
      "concurrency_key <> '' AND lease_expires_at > ?2");
  stmts_.is_assigned = p("SELECT 1 FROM project_actors WHERE project_id = ?1 AND actor = ?2");
  stmts_.put_assignment = p(
      "INSERT OR REPLACE INTO project_actors (project_id, actor, assigned_at, last_seq) "
      "VALUES (?1, ?2, ?3, ?4)");
  stmts_.delete_assignment = p("DELETE FROM project_actors WHERE project_id = ?1 AND actor = ?2");
  stmts_.all_project_ids = p("SELECT project_id FROM projects ORDER BY project_id");
  stmts_.actor_project_ids = p(
      "SELECT project_id FROM project_actors WHERE actor = ?1 ORDER BY project_id");
}

int SqliteBackend::schema_version() const noexcept { return kSqliteSchemaVersion; }

std::string SqliteBackend::database_id() {
  Statement s(db_, "SELECT value FROM store_info WHERE key = 'database_id'");
  s.bind();
  return s.step() ? s.text(0) : std::string();
}

int SqliteBackend::synchronous_level() {
  Statement s(db_, "PRAGMA synchronous");
  s.bind();
  return s.step() ? static_cast<int>(s.i64(0)) : -1;
}

}  // namespace sqlite

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
  auto* engine = dynamic_cast<sqlite::SqliteBackend*>(&backend);
  return engine != nullptr ? engine->synchronous_level() : -1;
}

std::unique_ptr<Backend> open_sqlite(const std::string& path, const OpenOptions& options) {
  return std::make_unique<sqlite::SqliteBackend>(path, options);
}

}  // namespace cplane::storage
