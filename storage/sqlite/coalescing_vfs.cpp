// The WAL write-coalescing VFS
// ===========================
//
// SQLite appends a commit to the WAL as frames, each written with two
// pwrite(2) calls: a 24-byte frame header, then the page. A cplane claim
// touches about five pages, so a commit costs some ten system calls inside
// the writer's critical section, and on a virtual machine a system call
// costs microseconds. This shim buffers the contiguous writes of a
// transaction to its WAL file and hands them to the kernel in one call
// (in chunks under the unix VFS's 128 KiB limit per write):
//
//   * inside the xWrite of the page that follows a commit frame's header
//     (a 24-byte write whose bytes 4-7, "database size after commit", are
//     non-zero): the error, if any, goes to the write SQLite is waiting on,
//     before the commit can be published in the wal-index. From then until
//     the connection releases the WAL write lock, every write to that WAL
//     passes straight through (checksum rewrites, sync padding), so each
//     reports its own error;
//   * before anything else touches the file: xRead, xSync, xTruncate,
//     xFileSize, xClose, a non-contiguous write, or 256 KiB buffered;
//   * before the connection's database file takes or releases a lock or
//     publishes the wal-index (xLock, xUnlock, xShmLock, xShmBarrier): a
//     safety net. A failed flush there cannot stop publication from a void
//     barrier, so the process aborts rather than publish a torn commit; an
//     unlock is always passed on, its error returned after.
//
// Each WAL file is tied to its own connection's database file through
// sqlite3_database_file_object(), so flushes never cross connections or
// threads. A failed flush drops the buffer and poisons the WAL: writes and
// syncs fail (SQLITE_IOERR_WRITE, which makes SQLite roll the whole
// transaction back) until the write lock is released; nothing unflushed is
// ever published. Invariant: when SQLite publishes a commit, every byte of
// it has been handed to the kernel, exactly as without the shim. The
// database file and all other files pass straight through.

#include "storage/sqlite/coalescing_vfs.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

namespace cplane::storage {
namespace {

constexpr std::size_t kChunk = 64 << 10;  // the unix VFS masks a write's length to 17 bits
constexpr std::size_t kFlushAt = 4 * kChunk;
constexpr int kFrameHeader = 24;

sqlite3_vfs* g_real = nullptr;
sqlite3_vfs g_vfs;
sqlite3_io_methods g_methods;

struct ShimFile {
  sqlite3_file base;  // base.pMethods == &g_methods
  bool is_wal = false;
  // WAL files:
  std::string* buffer = nullptr;  // pending bytes
  sqlite3_int64 buffer_at = 0;    // file offset of buffer[0]
  bool commit_page_next = false;  // the last write was a commit frame's header
  bool committing = false;        // the commit frame is out: write through
  bool poisoned = false;          // a flush failed: refuse writes until unlock
  ShimFile* db = nullptr;         // the connection's database file
  // Database files:
  ShimFile* wal = nullptr;        // the connection's WAL file, while open

  sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
  const sqlite3_io_methods* m() { return real()->pMethods; }
};

ShimFile* shim(sqlite3_file* file) { return reinterpret_cast<ShimFile*>(file); }

thread_local int t_no_room_errno = 0;

// Any write to any file: a failure for want of room is remembered.
int write_real(ShimFile* f, const void* data, int amount, sqlite3_int64 offset) {
  const int rc = f->m()->xWrite(f->real(), data, amount, offset);
  if (rc != SQLITE_OK) {
    const int e = errno;
    if ((rc & 0xff) == SQLITE_FULL || e == ENOSPC || e == EDQUOT || e == EFBIG) {
      t_no_room_errno = (e == ENOSPC || e == EDQUOT || e == EFBIG) ? e : ENOSPC;
    }
  }
  return rc;
}

int write_through(ShimFile* f, const char* data, std::size_t n, sqlite3_int64 offset) {
  int rc = SQLITE_OK;
  for (std::size_t at = 0; at < n && rc == SQLITE_OK; at += kChunk) {
    const std::size_t k = std::min(kChunk, n - at);
    rc = write_real(f, data + at, static_cast<int>(k), offset + static_cast<sqlite3_int64>(at));
  }
  return rc;
}

// Hands the buffer to the kernel. On failure the bytes are dropped and the
// WAL is poisoned; the error is always an SQLITE_IOERR (never the
// non-sticky SQLITE_FULL), so that SQLite rolls the transaction back.
int flush(ShimFile* f) {
  if (f == nullptr || f->buffer == nullptr || f->buffer->empty()) return SQLITE_OK;
  const int rc = write_through(f, f->buffer->data(), f->buffer->size(), f->buffer_at);
  f->buffer->clear();
  if (rc == SQLITE_OK) return rc;
  // Poisoned until its connection releases the write lock; a WAL not tied
  // to a connection (never seen in practice) is not poisoned, as nothing
  // would lift it.
  if (f->db != nullptr) f->poisoned = true;
  return (rc & 0xff) == SQLITE_IOERR ? rc : SQLITE_IOERR_WRITE;
}

// The WAL's write transaction is over: buffer again, forgive a failure.
void end_of_write(ShimFile* wal) {
  if (wal == nullptr) return;
  wal->committing = false;
  wal->commit_page_next = false;
  wal->poisoned = false;
}

// ---- methods ----------------------------------------------------------------

int x_close(sqlite3_file* file) {
  ShimFile* f = shim(file);
  int rc = SQLITE_OK;
  if (f->is_wal) {
    rc = flush(f);
    if (f->db != nullptr) f->db->wal = nullptr;
    delete f->buffer;
    f->buffer = nullptr;
  } else {
    rc = flush(f->wal);
    if (f->wal != nullptr) f->wal->db = nullptr;
  }
  const int close_rc = f->m()->xClose(f->real());
  return rc != SQLITE_OK ? rc : close_rc;
}

int x_read(sqlite3_file* file, void* out, int amount, sqlite3_int64 offset) {
  ShimFile* f = shim(file);
  if (f->is_wal) {
    if (int rc = flush(f); rc != SQLITE_OK) return rc;
  }
  return f->m()->xRead(f->real(), out, amount, offset);
}

int x_write(sqlite3_file* file, const void* data, int amount, sqlite3_int64 offset) {
  ShimFile* f = shim(file);
  if (!f->is_wal) return write_real(f, data, amount, offset);
  if (f->poisoned) return SQLITE_IOERR_WRITE;
  const auto* bytes = static_cast<const char*>(data);
  if (f->committing) return write_through(f, bytes, static_cast<std::size_t>(amount), offset);
  if (!f->buffer->empty() &&
      offset != f->buffer_at + static_cast<sqlite3_int64>(f->buffer->size())) {
    if (int rc = flush(f); rc != SQLITE_OK) return rc;
  }
  if (f->buffer->empty()) f->buffer_at = offset;
  try {
    f->buffer->append(bytes, static_cast<std::size_t>(amount));
  } catch (const std::bad_alloc&) {
    const int rc = flush(f);
    if (rc != SQLITE_OK) return rc;
    return write_through(f, bytes, static_cast<std::size_t>(amount), offset);
  }
  const bool page_of_commit = f->commit_page_next && amount != kFrameHeader;
  f->commit_page_next = false;
  if (amount == kFrameHeader) {
    const auto* b = reinterpret_cast<const unsigned char*>(bytes);
    f->commit_page_next = (b[4] | b[5] | b[6] | b[7]) != 0;
  }
  if (page_of_commit) {
    f->committing = true;
    return flush(f);
  }
  if (f->buffer->size() >= kFlushAt) return flush(f);
  return SQLITE_OK;
}

int x_truncate(sqlite3_file* file, sqlite3_int64 size) {
  ShimFile* f = shim(file);
  if (f->is_wal) {
    if (int rc = flush(f); rc != SQLITE_OK) return rc;
  }
  return f->m()->xTruncate(f->real(), size);
}

int x_sync(sqlite3_file* file, int flags) {
  ShimFile* f = shim(file);
  if (f->is_wal && f->poisoned) return SQLITE_IOERR_WRITE;
  if (int rc = flush(f->is_wal ? f : f->wal); rc != SQLITE_OK) return rc;
  return f->m()->xSync(f->real(), flags);
}

int x_file_size(sqlite3_file* file, sqlite3_int64* size) {
  ShimFile* f = shim(file);
  if (f->is_wal) {
    if (int rc = flush(f); rc != SQLITE_OK) return rc;
  }
  return f->m()->xFileSize(f->real(), size);
}

int x_lock(sqlite3_file* file, int level) {
  ShimFile* f = shim(file);
  if (int rc = flush(f->wal); rc != SQLITE_OK) return rc;
  return f->m()->xLock(f->real(), level);
}

int x_unlock(sqlite3_file* file, int level) {
  ShimFile* f = shim(file);
  const int rc = flush(f->wal);
  const int unlock_rc = f->m()->xUnlock(f->real(), level);  // always release
  return rc != SQLITE_OK ? rc : unlock_rc;
}

int x_check_reserved_lock(sqlite3_file* file, int* out) {
  return shim(file)->m()->xCheckReservedLock(shim(file)->real(), out);
}

int x_file_control(sqlite3_file* file, int op, void* arg) {
  return shim(file)->m()->xFileControl(shim(file)->real(), op, arg);
}

int x_sector_size(sqlite3_file* file) {
  return shim(file)->m()->xSectorSize(shim(file)->real());
}

int x_device_characteristics(sqlite3_file* file) {
  return shim(file)->m()->xDeviceCharacteristics(shim(file)->real());
}

bool has_shm(ShimFile* f) { return f->m()->iVersion >= 2 && f->m()->xShmMap != nullptr; }

int x_shm_map(sqlite3_file* file, int page, int size, int extend, void volatile** out) {
  ShimFile* f = shim(file);
  if (!has_shm(f)) return SQLITE_IOERR_SHMMAP;
  return f->m()->xShmMap(f->real(), page, size, extend, out);
}

int x_shm_lock(sqlite3_file* file, int offset, int n, int flags) {
  ShimFile* f = shim(file);
  if (!has_shm(f)) return SQLITE_IOERR_SHMLOCK;
  const int rc = flush(f->wal);
  if ((flags & SQLITE_SHM_UNLOCK) != 0) {
    const int unlock_rc = f->m()->xShmLock(f->real(), offset, n, flags);  // always release
    if (offset == 0 /* WAL_WRITE_LOCK */) end_of_write(f->wal);
    return rc != SQLITE_OK ? rc : unlock_rc;
  }
  if (rc != SQLITE_OK) return rc;
  return f->m()->xShmLock(f->real(), offset, n, flags);
}

void x_shm_barrier(sqlite3_file* file) {
  ShimFile* f = shim(file);
  // Publication follows this barrier and cannot be stopped from here: a
  // commit whose bytes did not reach the kernel must not become visible.
  if (flush(f->wal) != SQLITE_OK) std::abort();
  if (has_shm(f)) f->m()->xShmBarrier(f->real());
}

int x_shm_unmap(sqlite3_file* file, int delete_flag) {
  ShimFile* f = shim(file);
  if (!has_shm(f)) return SQLITE_OK;
  return f->m()->xShmUnmap(f->real(), delete_flag);
}

int x_fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** out) {
  ShimFile* f = shim(file);
  if (f->m()->iVersion < 3 || f->m()->xFetch == nullptr) {
    *out = nullptr;
    return SQLITE_OK;
  }
  return f->m()->xFetch(f->real(), offset, amount, out);
}

int x_unfetch(sqlite3_file* file, sqlite3_int64 offset, void* page) {
  ShimFile* f = shim(file);
  if (f->m()->iVersion < 3 || f->m()->xUnfetch == nullptr) return SQLITE_OK;
  return f->m()->xUnfetch(f->real(), offset, page);
}

int x_open(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  ShimFile* f = new (file) ShimFile();
  f->is_wal = (flags & SQLITE_OPEN_WAL) != 0;
  if (f->is_wal) {
    f->buffer = new (std::nothrow) std::string();
    if (f->buffer == nullptr) return SQLITE_NOMEM;
  }
  const int rc = g_real->xOpen(g_real, name, f->real(), flags, out_flags);
  if (rc != SQLITE_OK || f->real()->pMethods == nullptr) {
    delete f->buffer;
    f->buffer = nullptr;
    return rc;
  }
  if (f->is_wal && name != nullptr) {
    // The main database file of the same connection (SQLite >= 3.32).
    ShimFile* db = shim(sqlite3_database_file_object(name));
    if (db != nullptr && db->base.pMethods == &g_methods) {
      db->wal = f;
      f->db = db;
    }
  }
  f->base.pMethods = &g_methods;
  return rc;
}

void install() {
  g_real = sqlite3_vfs_find(nullptr);
  std::memcpy(&g_vfs, g_real, sizeof(g_vfs));
  g_vfs.szOsFile = static_cast<int>(sizeof(ShimFile)) + g_real->szOsFile;
  g_vfs.zName = "cplane-coalescing";
  g_vfs.pNext = nullptr;
  g_vfs.xOpen = x_open;

  g_methods = sqlite3_io_methods{};
  g_methods.iVersion = 3;
  g_methods.xClose = x_close;
  g_methods.xRead = x_read;
  g_methods.xWrite = x_write;
  g_methods.xTruncate = x_truncate;
  g_methods.xSync = x_sync;
  g_methods.xFileSize = x_file_size;
  g_methods.xLock = x_lock;
  g_methods.xUnlock = x_unlock;
  g_methods.xCheckReservedLock = x_check_reserved_lock;
  g_methods.xFileControl = x_file_control;
  g_methods.xSectorSize = x_sector_size;
  g_methods.xDeviceCharacteristics = x_device_characteristics;
  g_methods.xShmMap = x_shm_map;
  g_methods.xShmLock = x_shm_lock;
  g_methods.xShmBarrier = x_shm_barrier;
  g_methods.xShmUnmap = x_shm_unmap;
  g_methods.xFetch = x_fetch;
  g_methods.xUnfetch = x_unfetch;
  sqlite3_vfs_register(&g_vfs, 0);
}

}  // namespace

int take_no_room_errno() {
  const int e = t_no_room_errno;
  t_no_room_errno = 0;
  return e;
}

const char* coalescing_vfs_name() {
  static std::once_flag once;
  std::call_once(once, install);
  return "cplane-coalescing";
}

}  // namespace cplane::storage
