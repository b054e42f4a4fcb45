// A thin SQLite VFS over the default one that writes each WAL commit with
// one pwrite instead of two per page (frame header, then page).
#pragma once

namespace cplane::storage {

// The name to pass to sqlite3_open_v2 (registered on first call; the
// default VFS is not changed).
const char* coalescing_vfs_name();

// The errno of the last write on this thread that failed for want of room
// (ENOSPC, EDQUOT, EFBIG), captured when it failed (SQLite reads errno
// later, after other calls may have changed it); 0 if none. Reading it
// clears it. The shim reports such a write as SQLITE_IOERR_WRITE, never the
// non-sticky SQLITE_FULL, so this is how the backend still tells "full".
int take_no_room_errno();

}  // namespace cplane::storage
