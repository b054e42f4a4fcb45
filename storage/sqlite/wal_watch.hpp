// Waiting on an SQLite store without polling, by inotify. Every commit
// writes PATH-wal, so a watch on the database's folder, filtered to the
// database's own files, wakes on each commit of any process (commits). A
// commit that made work also sets PATH-lock's times after it committed
// (WriterLock::announce_work), so a watch on that one file wakes only for
// those (notices): what claims waiting for work use.
#pragma once

#include <chrono>
#include <string>

namespace cplane::storage::sqlite {

// An inotify watch for one database's commits, or for its notices of work.
// Not thread-safe.
class WalWatch {
 public:
  enum class Mode { commits, notices };

  // commits: `path` is the database; notices: its lock file. Throws
  // StorageError(io) when the folder or the lock file cannot be watched.
  explicit WalWatch(const std::string& path, Mode mode = Mode::commits);
  WalWatch(const WalWatch&) = delete;
  WalWatch& operator=(const WalWatch&) = delete;
  ~WalWatch();

  // True once what the watch is for was seen since the last call (or since
  // the watch was armed); false at `deadline`.
  bool wait(std::chrono::steady_clock::time_point deadline);

 private:
  bool drain();

  int fd_ = -1;
  Mode mode_;
  std::string name_;
};

}  // namespace cplane::storage::sqlite
