// Reading an older control plane's incident_links table (migrate-incidents).
#pragma once

#include <string>
#include <vector>

#include "projections/rows.hpp"

namespace cplane::storage {

// Every row of the legacy table at `path`, opened read-only (never written,
// never migrated), in rowid order. NULL is told apart from '' by each
// column's type. StorageError: unavailable (cannot be opened), corruption
// (not SQLite, no such table, a column missing, an event_count that is not
// an integer, a key or target that is NULL).
std::vector<LegacyIncidentRow> read_legacy_incident_links(const std::string& path);

}  // namespace cplane::storage
