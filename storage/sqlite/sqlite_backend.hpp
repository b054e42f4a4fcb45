// The SQLite backend: the embedded default. See schema.cpp for the on-disk
// schema and its invariants, engine.hpp for the engine and its files.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "storage/backend.hpp"
#include "storage/open.hpp"

namespace cplane::storage {

// Opens the database at `path` (a file path; SQLite URIs such as "file:x.db"
// are refused with InvalidArgument), checks that it is a cplane database of
// a version this build understands, and, unless read_only, creates the
// schema (only when `create`) or migrates it to the current version, in WAL
// mode. A read-only store takes no lock and writes nothing (not even the
// PATH-lock file); it works where the folder is not writable. Throws
// StorageError: unavailable when the file is missing (and not to be
// created), empty (and not to be created) or cannot be opened; corruption
// when it is not a cplane database; incompatible when a newer cplane wrote it.
std::unique_ptr<Backend> open_sqlite(const std::string& path, const OpenOptions& options = {});

// The SQL a claim runs, per project in scope, to find its candidate: the
// oldest ready item, the earliest lapsed lease. Exposed so that a test can
// check with EXPLAIN QUERY PLAN that each is an index seek.
std::vector<std::string> claim_queries();
// The allocator's walk of one project (scan_allocatable), for the same test.
std::string allocation_query();

// PRAGMA integrity_check on the SQLite file `path`, through a read-only
// connection of its own: empty when it answers "ok", else each line it
// answers (or why it could not run).
std::vector<std::string> sqlite_integrity_check(const std::string& path);

// The `synchronous` level (0 OFF, 1 NORMAL, 2 FULL) the connection of a
// SQLite backend has now; -1 for any other backend. For tests.
int sqlite_synchronous(Backend& backend);

// The schema version this build writes (PRAGMA user_version).
// Version 2: items_lease also orders by queued_seq (ties in lease expiry are
// reclaimed in queue order). Version 3: events name their stream
// (stream_kind, stream_id). Older databases are migrated on a write open;
// a read-only open of an older database is refused as incompatible (its
// events are not filed by stream yet): open it once to write.
// Version 11: retention's anchors and segments (docs/retention.md).
inline constexpr int kSqliteSchemaVersion = 11;

}  // namespace cplane::storage
