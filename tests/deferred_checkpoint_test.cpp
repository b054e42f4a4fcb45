// Deferred checkpoints (SqliteBackend::defer_checkpoints, commands/combine.cpp):
// under `normal`, a combiner copies the WAL into the database only after it
// has let go of the combiner's lock, beside the next combiner's batches.
// Real processes keep the queue full while this process watches the WAL's
// size: it must stay within its bound (a deferred checkpoint that never
// ran, or a WAL that never restarted, grows it without end), and every
// enqueue a child was told of must be in the store, also when children are
// SIGKILLed at random moments, during a checkpoint or not.
#include <catch2/catch.hpp>
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
using cplane::test::reap;
using cplane::test::TempDir;
using cplane::test::test_context;

namespace {

// A child that enqueues without pause until `until`, appending each id it
// was given to `out`, one line each, flushed before the next enqueue.
pid_t enqueuer(const std::string& db, const std::string& out,
               std::chrono::steady_clock::time_point until) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  int code = 0;
  try {
    ControlStore store{db, {.durability = Durability::normal}};
    std::ofstream ids(out, std::ios::app);
    while (std::chrono::steady_clock::now() < until) {
      ids << store.enqueue("alpha", "{}") << std::endl;
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
  INFO("acknowledged " << acknowledged.size() << ", killed " << killed << ", largest WAL "
                       << largest_wal << " bytes");
  REQUIRE(acknowledged.size() > 1000);  // the queue was kept busy
  if (kill) CHECK(killed >= 5);

  ControlStore store{db};
  for (const auto& id : acknowledged) {
    INFO(id);
    REQUIRE_NOTHROW(store.item(id));
  }
  // A killed child's last enqueue may have committed unacknowledged.
  const auto ready = store.status_counts().ready;
  CHECK(ready >= static_cast<std::int64_t>(acknowledged.size()));
  CHECK(ready <= static_cast<std::int64_t>(acknowledged.size()) + killed);
  CHECK(verify_ledger(store).empty());
  // Past 4,000 frames (kDeferredCheckpointFrames) the checkpoint runs under
  // the lock and the next write restarts the WAL; it grows past that only
  // while another process's checkpoint still runs (measured: 4,845 frames).
  // Three times that bound, with 4,096-byte pages and 24-byte frame
  // headers; with the checkpoints put off and never run it passed 1 GB.
  CHECK(largest_wal <= 3 * 4000 * (4096 + 24) + 32);
  CHECK(test_context().column(db, "PRAGMA integrity_check") == std::vector<std::string>{"ok"});
}
