// Opening a store by URL or path: one factory for every backend.
//
//   "control.db", "/var/lib/cplane/control.db"   a file path: SQLite
//   "sqlite:control.db", "sqlite:///abs/path.db" SQLite, explicitly
//   "postgresql://...", "postgres://..."         PostgreSQL
//                                                (storage/postgres/)
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <cplane/sqlite_options.hpp>

#include "storage/backend.hpp"

namespace cplane::storage {

// What every backend understands when a store is opened.
struct OpenOptions {
  // How long a write waits for the write lock before StorageError(busy).
  // Zero: do not wait.
  std::chrono::milliseconds lock_timeout{30'000};
  // Create the database (and its schema) if it is missing or empty.
  bool create = true;
  // Read only: never lock, create, migrate or write; begin_write throws
  // InvalidArgument (read_only).
  bool read_only = false;
  SqliteOptions sqlite;  // used only when the URL names SQLite
};

// Opens the store `url` names (see above). Throws InvalidArgument for a URL
// it cannot read (or a PostgreSQL URL in a build without PostgreSQL),
// StorageError for a store it cannot open. Defined by the factory target
// (cplane::storage_open), which links every engine built; the rest of this
// header is the contract's (cplane::storage).
std::unique_ptr<Backend> open_store(const std::string& url, const OpenOptions& options = {});

// True when `url` names a PostgreSQL server (postgresql:// or postgres://),
// whether or not this build has the PostgreSQL backend.
bool is_postgres_url(const std::string& url);

// The SQLite file a URL or path names, or "" if it names another backend.
std::string sqlite_path(const std::string& url);

// The files kept beside an SQLite database PATH while and after it is used:
// SQLite's WAL, wal-index and rollback journal, cplane's writer lock and
// group-commit area. Each belongs to that one database.
inline constexpr const char* kSideFileSuffixes[] = {"-wal", "-shm", "-journal", "-lock",
                                                    "-combine"};

// Why a command that writes a file the user names (an export, a restored
// or recovered database) must not write at `target`, or nullopt if it may:
//   * it is the store `source` (a path or URL) or one of its side files,
//     compared by device and inode, so that a link or another name for
//     them is caught too, or it is named as one of them;
//   * it is an SQLite database, an SQLite WAL or a group-commit area, by
//     its first bytes, whoever's it is;
//   * its name is a side file's name of a database that exists beside it.
// A missing target, an earlier export, a pipe or a device are allowed.
std::optional<std::string> protected_target(const std::string& target, const std::string& source);

// Why a database that is about to be created at `path` (no file there, or
// an empty one) must not be: a side file of another database is already
// there (a non-empty PATH-wal, whose frames SQLite would apply to the new
// file or reset; a PATH-combine that other processes hold open), or `path`
// is itself a side file of a database beside it. nullopt if it may.
std::optional<std::string> foreign_side_files(const std::string& path);

}  // namespace cplane::storage
