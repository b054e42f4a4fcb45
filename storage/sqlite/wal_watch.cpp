#include "storage/sqlite/wal_watch.hpp"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

#include "events/errors.hpp"

namespace cplane::storage::sqlite {

WalWatch::WalWatch(const std::string& path, Mode mode) : mode_(mode) {
  const std::filesystem::path p = std::filesystem::absolute(path);
  name_ = p.filename().string();
  fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  // Notices: the lock file itself, so that no other write wakes the waiter.
  const std::string watched = mode == Mode::notices ? p.string() : p.parent_path().string();
  const std::uint32_t events =
      mode == Mode::notices ? IN_ATTRIB : (IN_MODIFY | IN_CREATE | IN_MOVED_TO);
  if (fd_ < 0 || ::inotify_add_watch(fd_, watched.c_str(), events) < 0) {
    const int e = errno;
    if (fd_ >= 0) ::close(fd_);
    throw StorageError(StorageError::Category::io,
                       fmt::format("cannot watch {} for new work: {}", watched, std::strerror(e)));
  }
}

WalWatch::~WalWatch() { ::close(fd_); }

bool WalWatch::wait(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (drain()) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30))) < 0 &&
        errno != EINTR) {
      throw StorageError(StorageError::Category::io,
                         fmt::format("poll failed: {}", std::strerror(errno)));
    }
  }
}

// Reads what is queued: true if any of it is what the watch is for (a
// notice's watch sees only its file: every event is one).
bool WalWatch::drain() {
  alignas(inotify_event) char buffer[4096];
  bool touched = false;
  for (;;) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n <= 0) return touched;
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buffer + at);
      if (mode_ == Mode::notices) {
        touched = touched || (e->mask & IN_ATTRIB) != 0;
      } else if (e->len > 0) {
        const std::string_view file(e->name);
        touched = touched || file == name_ || file == name_ + "-wal";
      }
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
}

}  // namespace cplane::storage::sqlite
