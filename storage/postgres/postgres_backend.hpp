// The PostgreSQL backend: the engine for fleets on several hosts. See
// schema.hpp for its schema and internal.hpp for how it meets the contract
// of storage/backend.hpp. Only this target links libpq.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "storage/backend.hpp"
#include "storage/open.hpp"

namespace cplane::storage {

// Connects to the server `url` names and, unless read_only, creates the
// schema in the connection's current schema (the first of its search_path)
// when it holds no cplane tables yet and `create` is set. Throws
// StorageError: unavailable when the server cannot be reached (or holds no
// store and may not create one), corruption when the schema holds tables
// that are not cplane's, incompatible when a newer cplane wrote it.
std::unique_ptr<Backend> open_postgres(const std::string& url, const OpenOptions& options = {});

// The one SQLSTATE mapping: throws what a failed statement's SQLSTATE
// (`state`, "" if none) means to cplane, with `text` as its message and
// `url` (redacted) naming the store. StorageError unavailable for a lost
// connection (class 08, 57P01-57P03), Conflict (busy: run the command again)
// for a serialization failure or deadlock, busy for a lock or statement
// timeout, full for a full disk, corruption for damaged data (XX001,
// XX002), InternalError for the rest of class XX (XX000 internal_error: a
// bug, never the caller's input), InvalidArgument read_only for a write in
// a read-only transaction (25006), io for anything else.
[[noreturn]] void throw_for_sqlstate(std::string_view state, const std::string& text,
                                     const std::string& url);

// The schema version this build writes (store_info 'schema_version').
inline constexpr int kPostgresSchemaVersion = 5;

}  // namespace cplane::storage
