// Opening a store by URL or path: one factory for every backend.
//
//   "control.db", "/var/lib/cplane/control.db"   a file path: SQLite
//   "sqlite:control.db", "sqlite:///abs/path.db" SQLite, explicitly
//   "postgresql://...", "postgres://..."         PostgreSQL (not built yet:
//                                                StorageError unavailable)
#pragma once

#include <chrono>
#include <memory>
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
  // InvalidArgument.
  bool read_only = false;
  SqliteOptions sqlite;  // used only when the URL names SQLite
};

// Opens the store `url` names (see above). Throws InvalidArgument for a URL
// it cannot read, StorageError for a store it cannot open.
std::unique_ptr<Backend> open_store(const std::string& url, const OpenOptions& options = {});

// The SQLite file a URL or path names, or "" if it names another backend.
std::string sqlite_path(const std::string& url);

}  // namespace cplane::storage
