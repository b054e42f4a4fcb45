// A thin SQLite VFS over the default one that writes each WAL commit with
// one pwrite instead of two per page (frame header, then page).
#pragma once

namespace cplane::storage {

// The name to pass to sqlite3_open_v2 (registered on first call; the
// default VFS is not changed).
const char* coalescing_vfs_name();

}  // namespace cplane::storage
