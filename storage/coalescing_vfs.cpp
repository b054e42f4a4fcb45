// The WAL write-coalescing VFS
// ===========================
//
// SQLite appends a commit to the WAL as frames, each written with two
// pwrite(2) calls: a 24-byte frame header, then the page. A cplane claim
// touches about five pages, so a commit costs some ten system calls, and on
// a virtual machine a system call costs microseconds. This shim keeps the
// writes to a WAL file in a buffer while they are contiguous and issues them
// as one write when:
//
//   * the page that follows a commit frame's header has been buffered (the
//     frame header's bytes 4-7, "database size after commit", are non-zero):
//     the flush happens inside that xWrite, so an I/O error is reported by
//     the write SQLite is waiting on, before the commit is published in the
//     wal-index;
//   * anything else touches the file: xRead, xSync, xTruncate, xFileSize,
//     xClose, a non-contiguous write, or the buffer reaching 256 KiB;
//   * the database file of the same thread takes or releases a lock or
//     publishes the wal-index (xLock, xUnlock, xShmLock, xShmBarrier,
//     xShmUnmap, xClose): a safety net that finds the buffer empty in
//     practice.
//
// Invariant: when SQLite publishes a commit (writes the wal-index header),
// every byte of it has been handed to the kernel, exactly as without the
// shim; a process that dies before that leaves an uncommitted tail, which
// SQLite ignores as it always does. The database file and all other files
// pass straight through.

#include "storage/coalescing_vfs.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

namespace cplane::storage {
namespace {

// The unix VFS writes at most 0x1ffff bytes per call (it masks the length):
// flush in chunks well under that.
constexpr std::size_t kChunk = 64 << 10;
constexpr std::size_t kFlushAt = 4 * kChunk;
constexpr int kFrameHeader = 24;

sqlite3_vfs* g_real = nullptr;
sqlite3_vfs g_vfs;
sqlite3_io_methods g_methods;

struct ShimFile {
  sqlite3_file base;  // base.pMethods == &g_methods
  bool wal = false;
  std::string* buffer = nullptr;     // pending bytes (WAL files only)
  sqlite3_int64 buffer_at = 0;       // file offset of buffer[0]
  bool commit_page_next = false;     // the last write was a commit frame's header
  ShimFile* next_dirty = nullptr;
  bool listed = false;

  sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};

// WAL files with buffered bytes, per thread (a connection runs one statement
// on one thread at a time).
thread_local ShimFile* t_dirty = nullptr;

int flush(ShimFile* f) {
  if (f->buffer == nullptr || f->buffer->empty()) return SQLITE_OK;
  sqlite3_file* real = f->real();
  int rc = SQLITE_OK;
  for (std::size_t at = 0; at < f->buffer->size() && rc == SQLITE_OK; at += kChunk) {
    const std::size_t n = std::min(kChunk, f->buffer->size() - at);
    rc = real->pMethods->xWrite(real, f->buffer->data() + at, static_cast<int>(n),
                                f->buffer_at + static_cast<sqlite3_int64>(at));
  }
  f->buffer->clear();
  return rc;
}

void unlist(ShimFile* f) {
  if (!f->listed) return;
  for (ShimFile** p = &t_dirty; *p != nullptr; p = &(*p)->next_dirty) {
    if (*p == f) {
      *p = f->next_dirty;
      break;
    }
  }
  f->listed = false;
  f->next_dirty = nullptr;
}

int flush_and_unlist(ShimFile* f) {
  const int rc = flush(f);
  unlist(f);
  return rc;
}

int flush_all() {
  int rc = SQLITE_OK;
  while (t_dirty != nullptr) {
    ShimFile* f = t_dirty;
    const int r = flush_and_unlist(f);
    if (rc == SQLITE_OK) rc = r;
  }
  return rc;
}

ShimFile* shim(sqlite3_file* file) { return reinterpret_cast<ShimFile*>(file); }

int x_close(sqlite3_file* file) {
  ShimFile* f = shim(file);
  int rc = f->wal ? flush_and_unlist(f) : flush_all();
  delete f->buffer;
  f->buffer = nullptr;
  const int close_rc = f->real()->pMethods->xClose(f->real());
  return rc != SQLITE_OK ? rc : close_rc;
}

int x_read(sqlite3_file* file, void* out, int amount, sqlite3_int64 offset) {
  ShimFile* f = shim(file);
  if (f->wal) {
    if (int rc = flush_and_unlist(f); rc != SQLITE_OK) return rc;
  }
  return f->real()->pMethods->xRead(f->real(), out, amount, offset);
}

int x_write(sqlite3_file* file, const void* data, int amount, sqlite3_int64 offset) {
  ShimFile* f = shim(file);
  if (!f->wal) return f->real()->pMethods->xWrite(f->real(), data, amount, offset);
  if (!f->buffer->empty() &&
      offset != f->buffer_at + static_cast<sqlite3_int64>(f->buffer->size())) {
    if (int rc = flush(f); rc != SQLITE_OK) return rc;
  }
  if (f->buffer->empty()) f->buffer_at = offset;
  f->buffer->append(static_cast<const char*>(data), static_cast<std::size_t>(amount));
  if (!f->listed) {
    f->next_dirty = t_dirty;
    t_dirty = f;
    f->listed = true;
  }
  const bool page_of_commit = f->commit_page_next && amount != kFrameHeader;
  f->commit_page_next = false;
  if (amount == kFrameHeader) {
    const auto* b = static_cast<const unsigned char*>(data);
    f->commit_page_next = (b[4] | b[5] | b[6] | b[7]) != 0;
  }
  if (page_of_commit || f->buffer->size() >= kFlushAt) return flush_and_unlist(f);
  return SQLITE_OK;
}

int x_truncate(sqlite3_file* file, sqlite3_int64 size) {
  ShimFile* f = shim(file);
  if (f->wal) {
    if (int rc = flush_and_unlist(f); rc != SQLITE_OK) return rc;
  }
  return f->real()->pMethods->xTruncate(f->real(), size);
}

int x_sync(sqlite3_file* file, int flags) {
  ShimFile* f = shim(file);
  const int rc = f->wal ? flush_and_unlist(f) : flush_all();
  if (rc != SQLITE_OK) return rc;
  return f->real()->pMethods->xSync(f->real(), flags);
}

int x_file_size(sqlite3_file* file, sqlite3_int64* size) {
  ShimFile* f = shim(file);
  if (f->wal) {
    if (int rc = flush_and_unlist(f); rc != SQLITE_OK) return rc;
  }
  return f->real()->pMethods->xFileSize(f->real(), size);
}

int x_lock(sqlite3_file* file, int level) {
  if (int rc = flush_all(); rc != SQLITE_OK) return rc;
  return shim(file)->real()->pMethods->xLock(shim(file)->real(), level);
}

int x_unlock(sqlite3_file* file, int level) {
  if (int rc = flush_all(); rc != SQLITE_OK) return rc;
  return shim(file)->real()->pMethods->xUnlock(shim(file)->real(), level);
}

int x_check_reserved_lock(sqlite3_file* file, int* out) {
  return shim(file)->real()->pMethods->xCheckReservedLock(shim(file)->real(), out);
}

int x_file_control(sqlite3_file* file, int op, void* arg) {
  return shim(file)->real()->pMethods->xFileControl(shim(file)->real(), op, arg);
}

int x_sector_size(sqlite3_file* file) {
  return shim(file)->real()->pMethods->xSectorSize(shim(file)->real());
}

int x_device_characteristics(sqlite3_file* file) {
  return shim(file)->real()->pMethods->xDeviceCharacteristics(shim(file)->real());
}

int x_shm_map(sqlite3_file* file, int page, int size, int extend, void volatile** out) {
  return shim(file)->real()->pMethods->xShmMap(shim(file)->real(), page, size, extend, out);
}

int x_shm_lock(sqlite3_file* file, int offset, int n, int flags) {
  if (int rc = flush_all(); rc != SQLITE_OK) return rc;
  return shim(file)->real()->pMethods->xShmLock(shim(file)->real(), offset, n, flags);
}

void x_shm_barrier(sqlite3_file* file) {
  flush_all();  // normally empty: commits flush inside their last write
  shim(file)->real()->pMethods->xShmBarrier(shim(file)->real());
}

int x_shm_unmap(sqlite3_file* file, int delete_flag) {
  flush_all();
  return shim(file)->real()->pMethods->xShmUnmap(shim(file)->real(), delete_flag);
}

int x_fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** out) {
  return shim(file)->real()->pMethods->xFetch(shim(file)->real(), offset, amount, out);
}

int x_unfetch(sqlite3_file* file, sqlite3_int64 offset, void* page) {
  return shim(file)->real()->pMethods->xUnfetch(shim(file)->real(), offset, page);
}

int x_open(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  ShimFile* f = shim(file);
  f->base.pMethods = nullptr;
  f->wal = (flags & SQLITE_OPEN_WAL) != 0;
  f->buffer = nullptr;
  f->buffer_at = 0;
  f->commit_page_next = false;
  f->next_dirty = nullptr;
  f->listed = false;
  const int rc = g_real->xOpen(g_real, name, f->real(), flags, out_flags);
  if (rc != SQLITE_OK) return rc;
  if (f->real()->pMethods == nullptr) return rc;
  if (f->wal) f->buffer = new std::string();
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

const char* coalescing_vfs_name() {
  static std::once_flag once;
  std::call_once(once, install);
  return "cplane-coalescing";
}

}  // namespace cplane::storage
