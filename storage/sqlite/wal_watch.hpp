// Waiting for work on an SQLite store: every commit writes PATH-wal, so an
// inotify watch on the database's folder, filtered to the database's own
// files, wakes a waiter on each commit of any process, without polling.
#pragma once

#include <chrono>
#include <string>

namespace cplane::storage::sqlite {

// An inotify watch on the folder of a database, woken by writes to the
// database or its WAL (a commit of any process). Not thread-safe.
class WalWatch {
 public:
  // Throws StorageError(io) when the folder cannot be watched.
  explicit WalWatch(const std::string& path);
  WalWatch(const WalWatch&) = delete;
  WalWatch& operator=(const WalWatch&) = delete;
  ~WalWatch();

  // Returns once a write to the database's files was seen since the last
  // call (or since the watch was armed), or at `deadline`.
  void wait(std::chrono::steady_clock::time_point deadline);

 private:
  bool drain();

  int fd_ = -1;
  std::string name_;
};

}  // namespace cplane::storage::sqlite
