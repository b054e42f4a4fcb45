// The PostgreSQL backend: the engine for fleets on several hosts. See
// postgres_backend.cpp for its schema and how it meets the contract of
// storage/backend.hpp. Only this target links libpq.
#pragma once

#include <memory>
#include <string>

#include "storage/backend.hpp"
#include "storage/open.hpp"

namespace cplane::storage {

// True when `url` names a PostgreSQL server (postgresql:// or postgres://).
bool is_postgres_url(const std::string& url);

// Connects to the server `url` names and, unless read_only, creates the
// schema in the connection's current schema (the first of its search_path)
// when it holds no cplane tables yet and `create` is set. Throws
// StorageError: unavailable when the server cannot be reached (or holds no
// store and may not create one), corruption when the schema holds tables
// that are not cplane's, incompatible when a newer cplane wrote it.
std::unique_ptr<Backend> open_postgres(const std::string& url, const OpenOptions& options = {});

// The schema version this build writes (store_info 'schema_version').
inline constexpr int kPostgresSchemaVersion = 1;

}  // namespace cplane::storage
