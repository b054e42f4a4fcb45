// Deferred checkpoints (SqliteBackend::defer_checkpoints, commands/combine.cpp):
// under `normal`, a combiner copies the WAL into the database only after it
// has let go of the combiner's lock, beside the next combiner's batches.
// Real processes keep the queue full while this process watches the WAL's
// size: it must stay within its bound (a deferred checkpoint that never
// ran, or a WAL that never restarted, grows it without end), and every
// enqueue a child was told of must be in the store, also when children are
// SIGKILLed at random moments, during a checkpoint or not.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "tests/support.hpp"

using namespace cplane;
using cplane::test::sql_column;
using cplane::test::reap;
using cplane::test::TempDir;
using cplane::test::test_context;

namespace {

// A child that enqueues without pause until `until`, appending each id it
// was given to `out`, one line each, flushed before the next enqueue.
pid_t enqueuer(const std::string& db, const std::string& out,
               std::chrono::steady_clock::time_point until,
               std::chrono::milliseconds lock_timeout = std::chrono::milliseconds{30'000}) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  int code = 0;
  try {
    ControlStore store{db, {.durability = Durability::normal, .lock_timeout = lock_timeout}};
    std::ofstream ids(out, std::ios::app);
    while (std::chrono::steady_clock::now() < until) {
      try {
        ids << store.enqueue("alpha", "{}") << std::endl;
      } catch (const StorageError& e) {
        // busy: nothing was done; commit_unknown: maybe (not acknowledged)
        if (e.category() != StorageError::Category::busy &&
            e.category() != StorageError::Category::commit_unknown) {
          throw;
        }
      }
    }
  } catch (const std::exception& e) {
    std::ofstream(out + ".error") << e.what();
    code = 1;
  }
  ::_exit(code);
}

std::int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : 0;
}

// Waits for every enqueuer (each must exit 0) and reads back the ids they
// were given.
std::set<std::string> reap_enqueuers(const std::vector<pid_t>& pids,
                                     const std::vector<std::string>& outs) {
  for (std::size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    REQUIRE(reap(pids[i], 60, &status));
    INFO(cplane::test::read_file(outs[i] + ".error"));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::set<std::string> acknowledged;
  for (const auto& out : outs) {
    std::ifstream in(out);
    for (std::string id; std::getline(in, id);) {
      if (!id.empty()) acknowledged.insert(id);
    }
  }
  return acknowledged;
}

// Every acknowledged item is in the store, which verifies and passes
// integrity_check: how many items are ready.
std::int64_t check_store(const std::string& db, const std::set<std::string>& acknowledged) {
  ControlStore store{db};
  for (const auto& id : acknowledged) {
    INFO(id);
    REQUIRE_NOTHROW(store.item(id));
  }
  const auto ready = store.status_counts().ready;
  CHECK(ready >= static_cast<std::int64_t>(acknowledged.size()));
  CHECK(verify_ledger(store).empty());
  CHECK(test_context().column(db, "PRAGMA integrity_check") == std::vector<std::string>{"ok"});
  return ready;
}

}  // namespace

TEST_CASE("under normal durability a combiner checkpoints after it lets go: the WAL stays "
          "bounded under a full queue, and no acknowledged enqueue is lost, also when "
          "processes are SIGKILLed at random moments",
          "[combine][sqlite]") {
  const bool kill = GENERATE(false, true);
  INFO((kill ? "with SIGKILLs" : "without kills"));
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  constexpr int kChildren = 4;
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int i = 0; i < kChildren; ++i) {
    outs.push_back(dir.file(fmt::format("ids-{}", i)));
    pids.push_back(enqueuer(db, outs.back(), until));
  }
  // Watches the WAL; with kills, replaces a child SIGKILLed at a random
  // moment every 100-300 ms (its file goes on: what it was told before it
  // died must be there).
  std::mt19937 random(std::random_device{}());
  std::int64_t largest_wal = 0;
  int killed = 0;
  auto next_kill = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  while (std::chrono::steady_clock::now() < until) {
    largest_wal = std::max(largest_wal, file_size(db + "-wal"));
    if (kill && std::chrono::steady_clock::now() >= next_kill) {
      const std::size_t victim = random() % pids.size();
      ::kill(pids[victim], SIGKILL);
      REQUIRE(reap(pids[victim], 30));
      ++killed;
      pids[victim] = enqueuer(db, outs[victim], until);
      next_kill = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(100 + static_cast<int>(random() % 200));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::set<std::string> acknowledged = reap_enqueuers(pids, outs);
  INFO("acknowledged " << acknowledged.size() << ", killed " << killed << ", largest WAL "
                       << largest_wal << " bytes");
  REQUIRE(acknowledged.size() > 1000);  // the queue was kept busy
  if (kill) CHECK(killed >= 5);

  const auto ready = check_store(db, acknowledged);
  // A killed child's last enqueue may have committed unacknowledged.
  CHECK(ready <= static_cast<std::int64_t>(acknowledged.size()) + killed);
  // At 4,000 frames (kDeferredCheckpointFrames) the writer waits for a
  // deferred checkpoint still running, copies the rest under the lock, and
  // the next write restarts the WAL (measured: 4,059 frames). Three times
  // that bound, in frames of a page and a 24-byte header: with the
  // checkpoints put off and never run the WAL passed 1 GB, and without the
  // wait 80 MB (an adversarial run).
  const long frame = std::stol(sql_column(db, "PRAGMA page_size").at(0)) + 24;
  CHECK(largest_wal <= 3 * 4000 * frame + 32);
}

// SQLite's checkpoint lock is a byte of PATH-shm (offset 120 + 1, as its
// unix VFS places it): a process holding it is a checkpoint that runs and
// does not end, as one stopped by SIGSTOP would be.
TEST_CASE("a checkpoint that does not end holds writers at the WAL's bound instead of letting "
          "the WAL grow, and they go on once it ends",
          "[combine][sqlite]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  // The holder takes the lock once writers are at work: SQLite's first
  // connection rebuilds the WAL index under that lock too, which is not
  // what this test is about.
  int go_pipe[2];
  int ready_pipe[2];
  REQUIRE(::pipe(go_pipe) == 0);
  REQUIRE(::pipe(ready_pipe) == 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    char go = 0;
    if (::read(go_pipe[0], &go, 1) != 1) ::_exit(1);
    const int fd = ::open((db + "-shm").c_str(), O_RDWR);
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = 121;
    lock.l_len = 1;
    const char ok = fd >= 0 && ::fcntl(fd, F_SETLKW, &lock) == 0 ? 'y' : 'n';
    if (::write(ready_pipe[1], &ok, 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(5000);
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int i = 0; i < 3; ++i) {
    outs.push_back(dir.file(fmt::format("ids-{}", i)));
    pids.push_back(enqueuer(db, outs.back(), until, std::chrono::milliseconds{1000}));
  }
  while (file_size(db + "-wal") < (1 << 20) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(::write(go_pipe[1], "g", 1) == 1);
  char ok = 'n';
  REQUIRE(::read(ready_pipe[0], &ok, 1) == 1);
  REQUIRE(ok == 'y');
  const auto release = std::chrono::steady_clock::now() + std::chrono::milliseconds(2000);
  std::int64_t largest_held = 0;
  std::int64_t largest_after = 0;
  std::int64_t ready_at_release = 0;
  bool released = false;
  while (std::chrono::steady_clock::now() < until) {
    const auto wal = file_size(db + "-wal");
    (released ? largest_after : largest_held) = std::max(released ? largest_after : largest_held, wal);
    if (!released && std::chrono::steady_clock::now() >= release) {
      ready_at_release = ControlStore{db}.status_counts().ready;
      ::kill(holder, SIGKILL);
      REQUIRE(reap(holder, 30));
      released = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::set<std::string> acknowledged = reap_enqueuers(pids, outs);
  INFO("acknowledged " << acknowledged.size() << ", largest WAL while held " << largest_held
                       << ", after " << largest_after << "; items when let go "
                       << ready_at_release);
  // Writers reached the bound and waited there: 4,000 frames and a batch
  // (not waiting, they wrote about 40,000 frames a second past it).
  const long frame = std::stol(sql_column(db, "PRAGMA page_size").at(0)) + 24;
  CHECK(largest_held >= 4000 * frame);
  CHECK(largest_held <= 6000 * frame + 32);
  // Once the lock was let go they went on.
  CHECK(check_store(db, acknowledged) > ready_at_release + 500);
}
