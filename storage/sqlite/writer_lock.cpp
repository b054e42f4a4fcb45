// The writer's side lock (writer_lock.hpp): flock(2) on PATH-lock, waits
// bounded by a per-thread timer's signal, and the holder named from
// /proc/locks when a wait gives up.
#include "storage/sqlite/writer_lock.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "events/errors.hpp"

namespace cplane::storage::sqlite {
namespace {

void interrupt_lock_wait(int) {}

// The signal used to interrupt a lock wait, or 0 to poll.
int lock_wait_signal() {
  static const int signo = [] {
    const int s = SIGRTMIN + 5;
    if (s > SIGRTMAX) return 0;
    struct sigaction old {};
    if (::sigaction(s, nullptr, &old) != 0) return 0;
    if (old.sa_handler == interrupt_lock_wait) return s;
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) return 0;  // not ours
    struct sigaction sa {};
    sa.sa_handler = interrupt_lock_wait;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: flock returns EINTR
    return ::sigaction(s, &sa, nullptr) == 0 ? s : 0;
  }();
  if (signo == 0) return 0;
  sigset_t blocked;
  if (::pthread_sigmask(SIG_BLOCK, nullptr, &blocked) != 0 || sigismember(&blocked, signo)) return 0;
  return signo;
}

// What a process is doing, from /proc/PID/stat: 'T' stopped, 't' traced.
char process_state(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return '?';
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}

}  // namespace

WriterLock::WriterLock(const std::string& path, const std::string& database) : path_(path) {
  struct stat db {};
  const mode_t mode = ::stat(database.c_str(), &db) == 0 ? (db.st_mode & 0666) : 0644;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  const bool created = fd_ >= 0;
  if (!created && errno == EEXIST) fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd_ < 0) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("cannot open lock file {}: {}", path,
                                   errno == ELOOP ? "it is a symbolic link" : std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("lock file {} is not a regular file", path));
  }
  if (created) {
    // Just made: the database's mode, past the umask, and, when root made
    // it beside someone else's database, their ownership. Failures leave
    // a lock that still works for its maker.
    if (::geteuid() == 0 && db.st_uid != 0) {
      [[maybe_unused]] int ignored = ::fchown(fd_, db.st_uid, db.st_gid);
    }
    [[maybe_unused]] int ignored = ::fchmod(fd_, mode);
  }
}

void WriterLock::lock(Clock::time_point deadline, std::chrono::milliseconds timeout) {
  if (fd_ < 0) return;
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) fail_errno("cannot lock");
    wait(deadline, timeout);
  }
}

void WriterLock::wait(Clock::time_point deadline, std::chrono::milliseconds timeout) {
  const int signo = lock_wait_signal();
  timer_t timer{};
  bool have_timer = false;
  if (signo != 0 && Clock::now() < deadline) {
    struct sigevent event {};
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = signo;
    event._sigev_un._tid = ::gettid();
    if (::timer_create(CLOCK_MONOTONIC, &event, &timer) == 0) {
      have_timer = true;
      const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now());
      const auto first = std::max<std::int64_t>(left.count(), 1);
      struct itimerspec spec {};
      spec.it_value = {static_cast<time_t>(first / 1'000'000'000), static_cast<long>(first % 1'000'000'000)};
      spec.it_interval = {0, 10'000'000};  // then every 10 ms, in case one was missed
      if (::timer_settime(timer, 0, &spec, nullptr) != 0) {
        ::timer_delete(timer);
        have_timer = false;
      }
    }
  }
  struct DeleteTimer {
    timer_t timer;
    bool active;
    ~DeleteTimer() {
      if (active) ::timer_delete(timer);
    }
  } cleanup{timer, have_timer};
  auto pause = std::chrono::microseconds{200};
  for (;;) {
    if (have_timer) {
      if (::flock(fd_, LOCK_EX) == 0) return;
    } else if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
      return;
    }
    if (errno != EINTR && errno != EWOULDBLOCK) fail_errno("cannot lock");
    if (Clock::now() >= deadline) give_up(timeout);
    if (!have_timer) {
      std::this_thread::sleep_for(std::min(pause, std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now())));
      pause = std::min(pause * 2, std::chrono::microseconds{10'000});
    }
  }
}

// The pid holding the flock on this file, from /proc/locks (the kernel's
// own list, so holders need not write anything on the hot path), or 0.
long WriterLock::holder_pid() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return 0;
  const std::string id = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev),
                                     static_cast<unsigned long>(st.st_ino));
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 15201 fe:00:10952894 0 EOF"
    std::istringstream fields(line);
    std::string number, kind, mode, access, device;
    long pid = 0;
    if (!(fields >> number >> kind >> mode >> access >> pid >> device)) continue;
    if (kind == "FLOCK" && device == id) return pid;  // "->" lines are waiters
  }
  return 0;
}

void WriterLock::give_up(std::chrono::milliseconds timeout) const {
  const long pid = holder_pid();
  std::string holder = "another process";
  std::string hint = "it may be stopped (SIGSTOP, a debugger) or running a long command";
  if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0) {
    holder = fmt::format("pid {}", pid);
    const char state = process_state(static_cast<pid_t>(pid));
    if (state == 'T' || state == 't') {
      hint = fmt::format("pid {} is stopped (SIGSTOP or a debugger): resume it (kill -CONT {}) "
                         "or end it", pid, pid);
    }
  }
  throw StorageError(StorageError::Category::busy,
                     fmt::format("gave up after {} waiting for the write lock ({} is held by "
                                 "{}): {}; retry, or raise --lock-timeout",
                                 describe_timeout(timeout), path_, holder, hint));
}

void WriterLock::fail_errno(const char* what) const {
  throw StorageError(StorageError::Category::io,
                     fmt::format("{} {}: {}", what, path_, std::strerror(errno)));
}

std::string WriterLock::describe_timeout(std::chrono::milliseconds timeout) {
  return timeout.count() % 1000 == 0 ? fmt::format("{} s", timeout.count() / 1000)
                                     : fmt::format("{} ms", timeout.count());
}

}  // namespace cplane::storage::sqlite
