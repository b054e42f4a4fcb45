// The knobs of the SQLite backend, the embedded default
// (StoreOptions::sqlite). Other backends ignore them.
#pragma once

namespace cplane {

struct SqliteOptions {
  // Serialise writers through an exclusive flock(2) on PATH-lock (a side
  // file) before BEGIN IMMEDIATE. Fair under contention: waiters queue in
  // the kernel instead of polling, so no worker starves. SQLite's busy
  // handler stays as a safety net for writers that do not take the side
  // lock (the sqlite shell), bounded by the same lock timeout.
  bool writer_flock = true;
  // Group commit (flat combining across processes): a write command is
  // queued in a shared area beside the database (PATH-combine), and
  // whichever process holds the combiner's lock runs every queued command
  // in one transaction, commits once and hands each its result. Off: each
  // command is a transaction of its own (for measurement).
  bool combine = true;
  // With group commit: how long, in milliseconds, a combiner goes on
  // serving the commands others queued after its own is answered (while
  // they keep coming). Its page cache stays good and the lock is not
  // handed over per batch; its own caller waits up to this long for its
  // answer. 0: hand over after every batch that answered its own.
  int sticky_ms = 10;
  // Write each WAL commit with one system call instead of two per page.
  bool coalesce_wal_writes = true;
  // The page cache of the connection, MiB (0: SQLite's default, 2 MiB).
  // Commands that read or write the whole database in one transaction
  // (rebuild, restore, recover; the CLI sets it for them) run faster with
  // more; a worker that claims and finishes needs none.
  int cache_mib = 0;
  // The page size, in bytes, of a store this process creates (a power of
  // two from 512 to 65536; 0: SQLite's default, 4096). A store that exists
  // keeps the size it was made with. A trade (docs/benchmarks.md, "Page
  // size"): every commit writes each page it changed to the WAL and
  // checksums it there, so 2048 drains about 1.06x (`normal`) and 1.09x
  // (`fenced`) faster than 4096, but verify and rebuild, which read every
  // event, run about 0.85x as fast; an event or row over about 2,000 bytes
  // spills into overflow pages at 2048.
  int page_size = 0;
};

}  // namespace cplane
