// The sticky combiner (SqliteOptions::sticky_ms): once its own command is
// answered, a combiner goes on serving what others queue, but only for its
// sticky time. Real processes keep the queue full; the bound is what is
// checked, with a margin far above the machine's noise.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "tests/support.hpp"

using namespace cplane;
using cplane::test::read_file;
using cplane::test::reap;
using cplane::test::TempDir;
using cplane::test::test_context;

namespace {

// Children that enqueue without pause until `until`, each then writing how
// many it made to DIR/made-N.
std::vector<pid_t> keep_queue_full(const std::string& db, const std::string& dir, int children,
                                   std::chrono::steady_clock::time_point until, int sticky_ms) {
  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) {
    const pid_t pid = ::fork();
    if (pid != 0) {
      pids.push_back(pid);
      continue;
    }
    int code = 0;
    try {
      ControlStore store{db, {.sqlite = {.sticky_ms = sticky_ms}}};
      std::int64_t made = 0;
      while (std::chrono::steady_clock::now() < until) {
        store.enqueue("alpha", "{}");
        ++made;
      }
      std::ofstream(fmt::format("{}/made-{}", dir, i)) << made << '\n';
    } catch (const std::exception& e) {
      std::ofstream(fmt::format("{}/error-{}", dir, i)) << e.what();
      code = 1;
    }
    ::_exit(code);
  }
  return pids;
}

}  // namespace

TEST_CASE("a sticky combiner serves others for its sticky time at most: its own caller is "
          "answered while the queue is still full, and nothing is lost or made twice",
          "[combine][sqlite]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  // Long enough that a combiner which never let go would show: the others
  // queue for 3 s, and each of this process's commands must return in well
  // under that.
  const int sticky_ms = GENERATE(0, 200);
  INFO("sticky_ms " << sticky_ms);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  const auto pids = keep_queue_full(db, dir.path().string(), 4, until, sticky_ms);
  ControlStore store{db, {.sqlite = {.sticky_ms = sticky_ms}}};
  std::int64_t mine = 0;
  double longest_ms = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others are queuing
  while (std::chrono::steady_clock::now() + std::chrono::milliseconds(500) < until) {
    const auto t0 = std::chrono::steady_clock::now();
    store.enqueue("alpha", "{}");
    ++mine;
    longest_ms = std::max(
        longest_ms,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::int64_t made = mine;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    REQUIRE(reap(pids[i], 60, &status));
    INFO(read_file(fmt::format("{}/error-{}", dir.path().string(), i)));
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    std::ifstream in(fmt::format("{}/made-{}", dir.path().string(), i));
    std::int64_t n = 0;
    REQUIRE(in >> n);
    CHECK(n > 0);  // nobody starved
    made += n;
  }
  INFO("this process made " << mine << ", its longest command took " << longest_ms << " ms");
  CHECK(mine > 5);
  // The sticky time plus a batch or two, with a wide margin for a loaded
  // machine; a combiner that served until the queue ran dry would take the
  // others' whole 3 s.
  CHECK(longest_ms < sticky_ms + 1500);
  // Every acknowledged enqueue made exactly one item.
  CHECK(store.status_counts().ready == made);
  CHECK(verify_ledger(store).empty());
}
