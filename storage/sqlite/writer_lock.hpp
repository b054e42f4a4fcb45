// The writer's side lock: an exclusive flock(2) on PATH-lock, fair because
// waiters queue in the kernel. flock has no timeout, so a wait is bounded by
// a per-thread POSIX timer whose signal (a no-op handler installed without
// SA_RESTART) interrupts the wait with EINTR; the timer repeats after the
// deadline so that a signal landing just before flock() is entered cannot
// leave it blocked. If the application owns that signal or blocks it, the
// wait polls instead. A waiter that gives up names the holder (and says
// whether it is stopped) from the kernel's /proc/locks: holders write
// no pid, nor anything else. Its times are set after each commit that made
// work (announce_work): what waiting claims watch for.
#pragma once

#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>

namespace cplane::storage::sqlite {

using Clock = std::chrono::steady_clock;

// One process's handle on PATH-lock; without a lock file (default
// constructed: an in-memory database, or the flock turned off) every call
// is a no-op that succeeds. Not thread-safe: one per connection.
class WriterLock {
 public:
  WriterLock() = default;
  // `database` is the file the lock guards: a new lock file gets its mode
  // (so that whoever may write the database may take its lock) and, when
  // root creates it, its owner. A symbolic link or any other non-regular
  // file in the lock's place is refused, never written through: throws
  // StorageError(unavailable).
  WriterLock(const std::string& path, const std::string& database);
  WriterLock(WriterLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  WriterLock& operator=(WriterLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    std::swap(path_, o.path_);
    return *this;
  }
  ~WriterLock() {
    if (fd_ >= 0) ::close(fd_);
  }

  // Takes the lock by `deadline`, else throws StorageError(busy) naming the
  // holder. A no-op without a lock file.
  void lock(Clock::time_point deadline, std::chrono::milliseconds timeout);

  void unlock() noexcept {
    if (fd_ >= 0) ::flock(fd_, LOCK_UN);
  }

  // Takes the lock only if nobody holds it. True without a lock file.
  bool try_lock() noexcept { return fd_ < 0 || ::flock(fd_, LOCK_EX | LOCK_NB) == 0; }

  // Whether there is a lock file (the flock is on), and its name (beside
  // the file a symbolic link to the database leads to).
  bool active() const noexcept { return fd_ >= 0; }
  const std::string& path() const noexcept { return path_; }

  // Tells claims waiting for work that a commit made some (see
  // SqliteBackend::wait_for_work): the file's times set to now, which an
  // inotify watch on it sees (IN_ATTRIB). Not a write: the file stays
  // empty, and an empty file is what a lock file is (one with bytes in it
  // would pass for an SQLite database). Best effort: a failure only leaves
  // waiters to their recheck.
  void announce_work() const noexcept {
    if (fd_ >= 0 && ::futimens(fd_, nullptr) != 0) {
      // nothing to do: the waiters' recheck finds the work
    }
  }

  // "5 s" or "250 ms", as the messages of a wait that gave up say it.
  static std::string describe_timeout(std::chrono::milliseconds timeout);

 private:
  void wait(Clock::time_point deadline, std::chrono::milliseconds timeout);
  long holder_pid() const;
  [[noreturn]] void give_up(std::chrono::milliseconds timeout) const;
  [[noreturn]] void fail_errno(const char* what) const;

  int fd_ = -1;
  std::string path_;
};

}  // namespace cplane::storage::sqlite
