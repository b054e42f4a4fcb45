// The SQLite backend: the embedded default. See sqlite_backend.cpp for the
// on-disk schema and its invariants.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "storage/backend.hpp"

namespace cplane::storage {

struct SqliteOptions {
  // How long a write command waits for the write lock (the side lock, then
  // SQLite's own) before StorageError(busy). Zero: do not wait at all.
  std::chrono::milliseconds lock_timeout{30'000};
  // Serialise writers through an exclusive flock(2) on PATH-lock (a side
  // file) before BEGIN IMMEDIATE. Fair under contention: waiters queue in
  // the kernel instead of polling, so no worker starves. SQLite's busy
  // handler stays as a safety net for writers that do not take the side
  // lock (the sqlite3 shell), bounded by the same lock_timeout.
  bool writer_flock = true;
  // Create the file (and the schema) if it does not exist or is empty. Off
  // for rebuild, so that a mistyped path is an error rather than a new store.
  bool create = true;
  // Open for reading only: no write lock is ever taken, nothing is created,
  // migrated or written (not even the PATH-lock file); the schema is checked
  // in a read transaction. begin_write() then throws InvalidArgument. Works
  // where the database is readable but its folder is not writable.
  bool read_only = false;
  // Write each WAL commit with one system call (storage/coalescing_vfs.cpp).
  bool coalesce_wal_writes = true;
};

// Opens the database at `path` (a file path; SQLite URIs such as "file:x.db"
// are refused with InvalidArgument), checks that it is a cplane database of
// a version this build understands, and, unless read_only, creates the
// schema (only when `create`) or migrates it to the current version, in WAL
// mode. Throws StorageError: unavailable when the file is missing (and not
// to be created), empty (and not to be created) or cannot be opened;
// corruption when it is not a cplane database or is newer than this build.
std::unique_ptr<Backend> open_sqlite(const std::string& path, const SqliteOptions& options = {});

// The SQL a claim runs, per project in scope, to find its candidate: the
// oldest ready item, the earliest lapsed lease. Exposed so that a test can
// check with EXPLAIN QUERY PLAN that each is an index seek.
std::vector<std::string> claim_queries();

// The `synchronous` level (0 OFF, 1 NORMAL, 2 FULL) the connection of a
// SQLite backend has now; -1 for any other backend. For tests.
int sqlite_synchronous(Backend& backend);

// The schema version this build writes (PRAGMA user_version).
// Version 2: items_lease also orders by queued_seq (ties in lease expiry are
// reclaimed in queue order). Version 1 databases are migrated on a write
// open and read as they are.
inline constexpr int kSqliteSchemaVersion = 2;

}  // namespace cplane::storage
