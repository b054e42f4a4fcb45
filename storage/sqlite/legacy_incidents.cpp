#include "storage/sqlite/legacy_incidents.hpp"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "events/errors.hpp"

namespace cplane::storage {

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw StorageError(StorageError::Category::corruption,
                     fmt::format("{} is not a legacy incident database: {}", path, what));
}

}  // namespace

std::vector<LegacyIncidentRow> read_legacy_incident_links(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode) || st.st_size == 0) bad(path, "not a regular, non-empty file");
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> db(raw, sqlite3_close);
  if (rc != SQLITE_OK) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("cannot open {}: {}", path,
                                   raw != nullptr ? sqlite3_errmsg(raw) : "out of memory"));
  }
  sqlite3_stmt* raw_stmt = nullptr;
  if (sqlite3_prepare_v2(db.get(),
                         "SELECT rowid, provider, fingerprint, org, repo, environment, target, "
                         "status, event_count, permalink, first_seen, last_seen, linked_prs "
                         "FROM incident_links ORDER BY rowid",
                         -1, &raw_stmt, nullptr) != SQLITE_OK) {
    bad(path, sqlite3_errmsg(db.get()));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw_stmt, sqlite3_finalize);
  auto* s = stmt.get();
  auto text = [&](int col) -> std::optional<std::string> {
    if (sqlite3_column_type(s, col) == SQLITE_NULL) return std::nullopt;
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
    return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s, col)));
  };
  std::vector<LegacyIncidentRow> out;
  for (;;) {
    const int step = sqlite3_step(s);
    if (step == SQLITE_DONE) break;
    if (step != SQLITE_ROW) bad(path, sqlite3_errmsg(db.get()));
    LegacyIncidentRow r;
    r.rowid = sqlite3_column_int64(s, 0);
    auto required = [&](int col, const char* name) {
      auto v = text(col);
      if (!v) bad(path, fmt::format("row {} has no {} (NULL)", r.rowid, name));
      return std::move(*v);
    };
    r.provider = required(1, "provider");
    r.fingerprint = required(2, "fingerprint");
    r.org = text(3);
    r.repo = text(4);
    r.environment = text(5);
    r.target = required(6, "target");
    r.status = text(7);
    switch (sqlite3_column_type(s, 8)) {
      case SQLITE_NULL: break;
      case SQLITE_INTEGER: r.event_count = sqlite3_column_int64(s, 8); break;
      default: bad(path, fmt::format("row {} has an event_count that is not an integer", r.rowid));
    }
    r.permalink = text(9);
    r.first_seen = text(10);
    r.last_seen = text(11);
    r.linked_prs = text(12);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace cplane::storage
