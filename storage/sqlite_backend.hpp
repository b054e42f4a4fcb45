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
  // How long a command waits for the write lock before StorageError(busy).
  std::chrono::milliseconds busy_timeout{30'000};
  // Serialise writers through an exclusive flock(2) on PATH-lock (a side
  // file) before BEGIN IMMEDIATE. Fair under contention: waiters queue in
  // the kernel instead of polling, so no worker starves. busy_timeout stays
  // as a safety net for writers that do not take the side lock (sqlite3).
  bool writer_flock = true;
  // Create the file (and the schema) if it does not exist. Off for audits, so
  // that a mistyped path is an error rather than an empty, clean store.
  bool create = true;
  // Write each WAL commit with one system call (storage/coalescing_vfs.cpp).
  bool coalesce_wal_writes = true;
};

// Opens (creating if missing) the database at `path`, in WAL mode, and
// migrates its schema to the current version. Throws StorageError:
// unavailable when the file cannot be opened, corruption when it is not a
// cplane database (or is newer than this build understands).
std::unique_ptr<Backend> open_sqlite(const std::string& path, const SqliteOptions& options = {});

// The SQL a claim runs, per project in scope, to find its candidate: the
// oldest ready item, the earliest lapsed lease. Exposed so that a test can
// check with EXPLAIN QUERY PLAN that each is an index seek.
std::vector<std::string> claim_queries();

// The `synchronous` level (0 OFF, 1 NORMAL, 2 FULL) the connection of a
// SQLite backend has now; -1 for any other backend. For tests.
int sqlite_synchronous(Backend& backend);

// The schema version this build writes (PRAGMA user_version).
inline constexpr int kSqliteSchemaVersion = 1;

}  // namespace cplane::storage
