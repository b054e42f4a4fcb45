// The factory: one URL or path names a store, whichever backend holds it.

#include "storage/open.hpp"

#include <cctype>

#include <fmt/format.h>

#include "events/errors.hpp"
#include "storage/postgres/postgres_backend.hpp"
#include "storage/sqlite_backend.hpp"

namespace cplane::storage {
namespace {

bool has_scheme(const std::string& url, std::string_view scheme) {
  if (url.size() < scheme.size()) return false;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(url[i])) != scheme[i]) return false;
  }
  return true;
}

}  // namespace

std::string sqlite_path(const std::string& url) {
  if (is_postgres_url(url)) return "";
  if (has_scheme(url, "sqlite://")) return url.substr(9);  // sqlite:///abs/x.db -> /abs/x.db
  if (has_scheme(url, "sqlite:")) return url.substr(7);    // sqlite:x.db -> x.db
  return url;
}

std::unique_ptr<Backend> open_store(const std::string& url, const OpenOptions& options) {
  if (is_postgres_url(url)) return open_postgres(url, options);
  const std::string path = sqlite_path(url);
  if (path.empty() && has_scheme(url, "sqlite:")) {
    throw InvalidArgument(fmt::format("{} names no file", quote_id(url)));
  }
  if (path.empty()) throw InvalidArgument("a store needs a path or URL");
  return open_sqlite(path, options);
}

}  // namespace cplane::storage

namespace cplane::storage {

void Backend::savepoint() { throw InternalError("this backend has no group commit: no savepoints"); }
void Backend::release_savepoint() {
  throw InternalError("this backend has no group commit: no savepoints");
}
std::unique_ptr<Cursor<RawEvent>> Backend::scan_after(Seq) {
  throw InternalError("this backend cannot scan the log by seq");
}

}  // namespace cplane::storage
