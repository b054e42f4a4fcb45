// What SQLite's result codes mean to cplane: the one mapping from a failed
// call to a StorageError category (statement.hpp's throw_sqlite_error).
#include "storage/sqlite/statement.hpp"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "events/errors.hpp"
#include "storage/sqlite/coalescing_vfs.hpp"

namespace cplane::storage::sqlite {
namespace {

// ENOSPC, EDQUOT and EFBIG (a file size limit, with SIGXFSZ ignored) all
// mean "no room": SQLite rolls the transaction back, so nothing was written.
// Returns that errno, or 0 for any other failure.
int no_room_errno(sqlite3* db, int rc) {
  const int primary = rc & 0xff;
  if (primary != SQLITE_FULL && primary != SQLITE_IOERR) return 0;
  if (const int shim = take_no_room_errno(); shim != 0) return shim;
  const int e = db != nullptr ? sqlite3_system_errno(db) : 0;
  if (e == ENOSPC || e == EDQUOT || e == EFBIG) return e;
  return primary == SQLITE_FULL ? ENOSPC : 0;
}

}  // namespace

void throw_sqlite_error(sqlite3* db, int rc, const std::string& what) {
  const int primary = rc & 0xff;
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const std::string text = fmt::format("{}: {}", what, message);
  if (const int e = no_room_errno(db, rc); e != 0) {
    throw StorageError(
        StorageError::Category::full,
        fmt::format("{}: {} ({}); the transaction was rolled back and nothing was written: "
                    "free space (or raise the limit) and retry",
                    what,
                    e == EFBIG    ? "the file size limit was reached"
                    : e == EDQUOT ? "the disk quota is exhausted"
                                  : "the disk is full",
                    std::strerror(e)));
  }
  switch (primary) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL:  // a lock SQLite retried for a while and did not get
      throw StorageError(StorageError::Category::busy, text);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      throw StorageError(StorageError::Category::unavailable, text);
    case SQLITE_CORRUPT:
      throw StorageError(StorageError::Category::corruption,
                         text + " (pages of the file are damaged: salvage every readable event "
                                "into a new file with `cplane recover --db DAMAGED --to NEW`)");
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
      throw StorageError(StorageError::Category::corruption, text);
    default:
      throw StorageError(StorageError::Category::io, text);
  }
}

}  // namespace cplane::storage::sqlite
