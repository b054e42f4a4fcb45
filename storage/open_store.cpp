// The factory: one URL or path names a store, whichever engine holds it.
// The only code that names every engine (each in its own target); an engine
// this build was configured without (CPLANE_WITH_POSTGRES=OFF) is refused
// here, by URL, before anything is opened.

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "events/errors.hpp"
#include "storage/open.hpp"
#include "storage/sqlite/sqlite_backend.hpp"
#if CPLANE_WITH_POSTGRES
#include "storage/postgres/postgres_backend.hpp"
#endif

namespace cplane::storage {

std::unique_ptr<Backend> open_store(const std::string& url, const OpenOptions& options) {
  if (is_postgres_url(url)) {
#if CPLANE_WITH_POSTGRES
    return open_postgres(url, options);
#else
    throw InvalidArgument(
        "this cplane was built without PostgreSQL support (CPLANE_WITH_POSTGRES=OFF): "
        "it opens SQLite stores only");
#endif
  }
  const std::string path = sqlite_path(url);
  // sqlite_path() strips the scheme: an empty path after "sqlite:" names no file.
  const bool has_sqlite_scheme =
      url.size() >= 7 && std::equal(url.begin(), url.begin() + 7, "sqlite:", [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == b;
      });
  if (path.empty() && has_sqlite_scheme) {
    throw InvalidArgument(fmt::format("{} names no file", quote_id(url)));
  }
  if (path.empty()) throw InvalidArgument("a store needs a path or URL");
  return open_sqlite(path, options);
}

}  // namespace cplane::storage
