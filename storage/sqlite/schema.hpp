// The SQLite engine's schema: telling a cplane database from any other
// file, creating it, and migrating an older one. The tables themselves, and
// their invariants, are described where they are written: schema.cpp.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <string>

#include "storage/sqlite/writer_lock.hpp"

namespace cplane::storage::sqlite {

// Reads the schema version of `db` (the database at `path`) in a read
// transaction, and refuses what this build must not touch. Returns the
// version; 0 for an empty file, which the caller may create. Throws
// StorageError: corruption (not a cplane database, or a version no cplane
// wrote), incompatible (newer than kSqliteSchemaVersion, or older when
// `read_only`: a read never migrates), unavailable (empty and `read_only`),
// busy (another connection holds the file exclusively for longer than
// `lock_timeout`, which the message names).
int identify_schema(sqlite3* db, const std::string& path, bool read_only,
                    std::chrono::milliseconds lock_timeout);

// Creates the schema in an empty database, or migrates an older one to
// kSqliteSchemaVersion one version at a time, in one transaction under
// `writer_lock` (taken and released here, within `lock_timeout`). The
// version is read again inside, since another process may have done it
// meanwhile. Throws StorageError; on failure nothing was changed.
void migrate_schema(sqlite3* db, const std::string& path, WriterLock& writer_lock,
                    std::chrono::milliseconds lock_timeout);

}  // namespace cplane::storage::sqlite
