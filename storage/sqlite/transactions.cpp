// The SQLite engine's transactions (engine.hpp): BEGIN IMMEDIATE behind the
// writer's side lock, commit and its outcome, rollback, the savepoints of a
// combined batch, the busy timeout, checkpoints after commits, and waiting
// for another process's commit.
#include "storage/sqlite/engine.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "events/clock.hpp"
#include "events/errors.hpp"
#include "storage/sqlite/coalescing_vfs.hpp"

namespace cplane::storage::sqlite {

namespace {

// How soon a waiting claim looks again after a commit that announced no
// work (wait_for_work).
constexpr std::chrono::milliseconds kUnannouncedRecheck{100};

}  // namespace

void SqliteBackend::begin_write(Sync sync) {
  check_usable();
  if (read_only_) {
    throw InvalidArgument(InvalidArgument::Reason::read_only,
                          fmt::format("{} was opened for reading: it cannot write", path_));
  }
  if (sync != sync_) {
    // Not a prepared statement: PRAGMA synchronous takes effect when it is
    // compiled, not when it is stepped.
    exec(db_, sync == Sync::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
         "cannot set synchronous");
    sync_ = sync;
  }
  const auto start = Clock::now();
  const auto deadline = start + lock_timeout_;
  writer_lock_.lock(deadline, lock_timeout_);
  take_no_room_errno();  // forget a failure of an earlier transaction
  try {
    begin_immediate(start, deadline);
  } catch (...) {
    writer_lock_.unlock();
    throw;
  }
  in_write_ = true;
}

// BEGIN IMMEDIATE: SQLite's own write lock, waited for by its busy handler
// for what is left of the lock timeout (only writers that bypass PATH-lock,
// such as the sqlite3 shell, make it wait).
void SqliteBackend::begin_immediate(Clock::time_point start, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  const bool shortened = Clock::now() - start > std::chrono::milliseconds{1};
  if (shortened) set_busy_timeout(left);
  try {
    stmts_.begin_immediate.run();
  } catch (const StorageError& e) {
    if (shortened) set_busy_timeout(lock_timeout_);
    if (e.category() != StorageError::Category::busy) throw;
    throw StorageError(
        StorageError::Category::busy,
        fmt::format("gave up after {} waiting for the write lock of {}: another connection "
                    "that does not take {}-lock (the sqlite3 shell, another program) holds a "
                    "write transaction, and may be stopped; retry, or raise --lock-timeout",
                    WriterLock::describe_timeout(lock_timeout_), path_, path_));
  }
  if (shortened) set_busy_timeout(lock_timeout_);
}

void SqliteBackend::begin_read() {
  check_usable();
  stmts_.begin_deferred.run();
}

void SqliteBackend::commit() {
  try {
    flush_digest();
    stmts_.commit.run();
  } catch (const StorageError& e) {
    rollback();
    // No room to write the commit: SQLite rolled it back, nothing was
    // written. Only a failure after the commit was handed to the disk
    // (an fsync error, an I/O error) leaves its outcome unknown.
    if (e.category() == StorageError::Category::busy ||
        e.category() == StorageError::Category::full) {
      throw;
    }
    throw StorageError(StorageError::Category::commit_unknown,
                       std::string("commit outcome unknown: ") + e.what());
  }
  wrote_ = true;
  request_id_ = 0;
  release_writer();
  if (announce_) writer_lock_.announce_work();  // after the commit: a waiter's claim sees it
  announce_ = false;
}

void SqliteBackend::rollback() noexcept {
  digest_.reset();
  request_id_ = 0;
  announce_ = false;
  if (!sqlite3_get_autocommit(db_) &&
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr) != SQLITE_OK &&
      !sqlite3_get_autocommit(db_)) {
    broken_ = true;  // still inside a transaction we cannot end: refuse further use
  }
  release_writer();
}

void SqliteBackend::release_writer() noexcept {
  if (in_write_) {
    in_write_ = false;
    writer_lock_.unlock();
  }
}

// A connection must not be used by a process it was not opened in (after
// fork, parent and child would share one flock and one SQLite handle), nor
// after a ROLLBACK that failed.
void SqliteBackend::check_usable() {
  // getpid(), not the cached pid: a child made by _Fork() or a raw fork
  // system call runs no atfork handler (found by an adversarial run).
  if (::getpid() != pid_) {
    throw StorageError(StorageError::Category::unavailable,
                       "this store was opened in another process (before fork): open a new one");
  }
  if (broken_) {
    throw StorageError(StorageError::Category::io,
                       "this store's connection could not roll back a transaction: reopen it");
  }
}

void SqliteBackend::savepoint() {
  stmts_.savepoint.run();
  saved_digest_ = digest_;
}

void SqliteBackend::release_savepoint() { stmts_.release_savepoint.run(); }

bool SqliteBackend::rollback_to_savepoint() noexcept {
  digest_ = saved_digest_;
  if (sqlite3_get_autocommit(db_)) return false;  // SQLite ended the transaction itself
  return sqlite3_exec(db_, "ROLLBACK TO combined; RELEASE combined", nullptr, nullptr, nullptr) ==
             SQLITE_OK &&
         !sqlite3_get_autocommit(db_);
}

void SqliteBackend::tag_requests(std::uint64_t request_id) { request_id_ = request_id; }

std::uint64_t SqliteBackend::rows_written() noexcept {
  return static_cast<std::uint64_t>(sqlite3_total_changes64(db_));
}

bool SqliteBackend::in_write_transaction() noexcept {
  return in_write_ && !sqlite3_get_autocommit(db_);
}

// None in a forked child: the store belongs to its parent, and a child
// that combined would answer other processes' commands with its refusal.
CombineArea* SqliteBackend::combine_area() {
  return ::getpid() == pid_ && !broken_ ? combine_.get() : nullptr;
}

void SqliteBackend::set_busy_timeout(std::chrono::milliseconds timeout) {
  sqlite3_busy_timeout(db_, static_cast<int>(std::max<std::int64_t>(timeout.count(), 0)));
}

// After every commit (SQLite's wal hook, in place of its autocheckpoint):
// once kCheckpointFrames frames of the WAL are not in the database yet, a
// PASSIVE checkpoint, as SQLite's own would, never waiting for a reader.
// Under the writer's side lock, unless a combiner defers it
// (defer_checkpoints) until it has let go of the combiner's lock. Once the
// WAL is fully copied, the next write restarts it from its start, cut back
// to journal_size_limit. (A TRUNCATE here cost 20-28% of a 16-worker
// drain: the file is cut and grown again every 1,000 frames.)
int SqliteBackend::after_commit(void* self, sqlite3*, const char*, int frames) {
  auto* backend = static_cast<SqliteBackend*>(self);
  if (frames < backend->backfilled_) backend->backfilled_ = 0;  // the WAL restarted
  const bool due = frames - backend->backfilled_ >= kCheckpointFrames;
  const bool deferred = backend->defer_checkpoints_ && backend->sync_ == Sync::normal;
  if (frames >= kDeferredCheckpointFrames) {
    backend->checkpoint_waiting();
  } else if (due && !deferred) {
    backend->checkpoint(SQLITE_CHECKPOINT_PASSIVE);
  } else if (due) {
    backend->checkpoint_due_ = true;
  }
  return SQLITE_OK;
}

int SqliteBackend::checkpoint(int mode) noexcept {
  sqlite3_busy_timeout(db_, 0);
  int log = 0;
  int copied = 0;
  const int rc = sqlite3_wal_checkpoint_v2(db_, "main", mode, &log, &copied);
  if (rc == SQLITE_OK) backfilled_ = copied;
  set_busy_timeout(lock_timeout_);
  return rc;
}

// Under the writer's side lock, once the WAL holds kDeferredCheckpointFrames:
// a checkpoint that another process runs beside the writers (deferred)
// holds SQLite's checkpoint lock, and a second checkpoint never waits for
// it (SQLITE_BUSY at once, even with a busy handler). Not waiting, the WAL
// grew for as long as that one ran: to 80 MB behind one descheduled for
// 227 ms, and until the disk was full behind one stopped (found by an
// adversarial run). So every writer waits here, for up to the lock
// timeout, as it would wait for a stopped combiner; once the other ends,
// this checkpoint copies what is left, and the next write restarts the
// WAL. If the other outlasts the lock timeout (stopped), the writer goes
// on: the WAL then grows by a batch per lock timeout until it ends.
void SqliteBackend::checkpoint_waiting() noexcept {
  const auto deadline = Clock::now() + lock_timeout_;
  while (checkpoint(SQLITE_CHECKPOINT_PASSIVE) == SQLITE_BUSY && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

// A combiner's checkpoints wait until it lets go of the combiner's lock
// (commands/combine.cpp): copying 1,000 frames into the database took 30%
// of a 16-worker drain while every other writer waited. Run after the lock
// is let go, the copy goes on beside the next combiner's batches (SQLite
// lets one checkpoint run beside its writers), and only the caller whose
// command this process ran waits for it.
void SqliteBackend::defer_checkpoints(bool on) { defer_checkpoints_ = on; }

void SqliteBackend::checkpoint_if_due() noexcept {
  if (!checkpoint_due_ || in_write_ || ::getpid() != pid_ || broken_) return;
  checkpoint_due_ = false;
  checkpoint(SQLITE_CHECKPOINT_PASSIVE);
}

// A checkpoint that copies the whole WAL into the database and cuts the
// WAL to zero bytes, if no reader still needs it; otherwise what it can.
void SqliteBackend::truncate_wal() noexcept { checkpoint(SQLITE_CHECKPOINT_TRUNCATE); }

Micros SqliteBackend::now() { return now_micros(); }

// Waiting for work. A commit that made work (an enqueue, a release, a
// resume: whatever calls announce_work, as for PostgreSQL's NOTIFY) sets
// PATH-lock's times once it has committed; a waiter watches that
// file alone (inotify), and looks again at once. Work can also come
// unannounced (a writer killed between its commit and the notice, one that
// runs without the lock file, a key's slot freed by a lapse), and a new
// lease changes when the next one lapses: so a waiter also asks SQLite every
// kUnannouncedRecheck whether anyone committed since it last looked (PRAGMA
// data_version, no transaction), and looks again if so. Before, every
// commit of any process woke every waiter and sent its claim through the
// writer: 16 idle waiters halved a 16-worker drain of another project
// (docs/benchmarks.md, "Waiting claims"). Without a lock file of our own
// (the flock off), nothing tells which commits made work: every commit is
// looked at, as before; without inotify (a user's instances used up) the
// recheck alone finds work. The recheck runs in every mode: a watch that
// sees nothing (a database reached through a symbolic link whose folder
// is not the file's) costs 100 ms, not the whole wait.
void SqliteBackend::announce_work() { announce_ = true; }

std::int64_t SqliteBackend::data_version() {
  Statement s(db_, "PRAGMA data_version");
  return s.step() ? s.i64(0) : 0;
}

void SqliteBackend::wait_for_work(std::chrono::steady_clock::time_point deadline) {
  using std::chrono::steady_clock;
  check_usable();
  if (!waiting_) {
    // The lock file the writers name (beside the file a symbolic link
    // leads to); else every commit; else, without inotify (its limits
    // reached), the recheck alone.
    waiting_ = true;
    notices_ = false;
    try {
      if (writer_lock_.active()) {
        try {
          work_watch_.emplace(writer_lock_.path(), WalWatch::Mode::notices);
          notices_ = true;
        } catch (const StorageError&) {
          // The lock file gone from under us (removed by hand): every commit.
        }
      }
      if (!notices_) work_watch_.emplace(path_, WalWatch::Mode::commits);
    } catch (const StorageError&) {
      work_watch_.reset();
    }
    data_version_ = data_version();
    return;  // the caller looks once more: work may have come before the watch
  }
  for (;;) {
    const auto recheck = std::min(deadline, steady_clock::now() + kUnannouncedRecheck);
    const bool seen = work_watch_ ? work_watch_->wait(recheck)
                                  : (std::this_thread::sleep_until(recheck), false);
    if (seen || steady_clock::now() >= deadline) break;
    if (data_version() != data_version_) break;
  }
  data_version_ = data_version();
}

}  // namespace cplane::storage::sqlite
