// A group-commit area overwritten or cut short (truncate(1)) while real
// processes use it: noticed, never SIGBUS, nothing lost or made twice
// (docs/sqlite.md, "group commit").
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "storage/sqlite/combine_area.hpp"
#include "tests/support.hpp"

using namespace cplane;
using cplane::test::read_file;
using cplane::test::reap;
using cplane::test::TempDir;
using cplane::test::test_context;
using storage::CombineArea;

TEST_CASE("an area overwritten or cut short while processes run is noticed on the next "
          "wake-up: commands run alone at once, none waits out its lock timeout or dies",
          "[combine][sqlite]") {
  // The silences it prevents: a waiter blocked on a mutex a zeroed header
  // no longer describes slept for its whole lock timeout (30 s by default);
  // a file cut short killed its users with SIGBUS.
  // 0: the header zeroed; 1: the file cut to nothing; 2: cut after half
  // its slots, so that processes whose slots are left never fault (found
  // by an adversarial run: they waited out their lock timeout).
  const int how = GENERATE(0, 1, 2);
  const bool truncate = how != 0;
  INFO((how == 0 ? "header zeroed" : how == 1 ? "cut short" : "cut after half its slots"));
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  const auto lock_timeout = std::chrono::seconds(8);
  const auto run_for = std::chrono::milliseconds(2500);
  // Each child loops for run_for, then writes how many commands it had
  // acknowledged, how many ended unknown, its longest one in ms, and every
  // item it claimed.
  auto child = [&](int id, bool claims) {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    int code = 0;
    try {
      ControlStore store{db, {.lock_timeout = lock_timeout}};
      const auto end = std::chrono::steady_clock::now() + run_for;
      std::int64_t made = 0, unknown = 0;
      double longest = 0;
      std::vector<std::string> claimed;
      while (std::chrono::steady_clock::now() < end) {
        const auto t0 = std::chrono::steady_clock::now();
        try {
          if (claims) {
            if (auto c = store.claim(fmt::format("w{}", id), {.wait = Seconds{0.2}})) {
              claimed.push_back(c->item_id);
            }
          } else {
            store.enqueue("alpha", "{}");
          }
          ++made;
        } catch (const StorageError& e) {
          if (e.category() != StorageError::Category::commit_unknown) throw;
          ++unknown;  // only a file cut short under the command says so
        }
        longest = std::max(longest, std::chrono::duration<double, std::milli>(
                                        std::chrono::steady_clock::now() - t0)
                                        .count());
      }
      std::ofstream out(fmt::format("{}/child-{}", dir.path().string(), id));
      out << made << ' ' << unknown << ' ' << longest << '\n';
      for (const auto& c : claimed) out << c << '\n';
    } catch (const std::exception& e) {
      std::ofstream(fmt::format("{}/child-{}.error", dir.path().string(), id)) << e.what();
      code = 1;
    }
    ::_exit(code);
  };
  std::vector<pid_t> pids;
  for (int i = 0; i < 6; ++i) pids.push_back(child(i, i % 2 == 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  if (truncate) {
    const off_t keep = how == 1 ? 0
                                : static_cast<off_t>(4096 + CombineArea::kSlots / 2 *
                                                                CombineArea::kSlotBytes);
    REQUIRE(::truncate((db + "-combine").c_str(), keep) == 0);
  } else {
    const int fd = ::open((db + "-combine").c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    const std::string zeros(4096, '\0');
    REQUIRE(::pwrite(fd, zeros.data(), zeros.size(), 0) == 4096);
    ::close(fd);
  }
  std::int64_t enqueued = 0, unknown_enqueues = 0, unknown = 0;
  std::vector<std::string> claimed;
  for (int i = 0; i < 6; ++i) {
    int status = 0;
    REQUIRE(reap(pids[i], 60, &status));
    INFO(read_file(fmt::format("{}/child-{}.error", dir.path().string(), i)));
    REQUIRE(WIFEXITED(status));  // never SIGBUS
    REQUIRE(WEXITSTATUS(status) == 0);
    std::ifstream in(fmt::format("{}/child-{}", dir.path().string(), i));
    std::int64_t made = 0, lost = 0;
    double longest = 0;
    REQUIRE(in >> made >> lost >> longest);
    INFO("child " << i << " made " << made << " commands, the longest took " << longest << " ms");
    CHECK(longest < 3000);  // far below the 8 s lock timeout
    unknown += lost;
    if (i % 2 == 0) {
      enqueued += made;
      unknown_enqueues += lost;
    }
    for (std::string id; in >> id;) claimed.push_back(id);
  }
  if (!truncate) CHECK(unknown == 0);
  // Nothing lost, nothing made or claimed twice; an unknown enqueue made
  // its item or not.
  ControlStore check{db, {.read_only = true}};
  const auto counts = check.status_counts();
  CHECK(counts.ready + counts.claimed >= enqueued);
  CHECK(counts.ready + counts.claimed <= enqueued + unknown_enqueues);
  CHECK(counts.claimed >= static_cast<std::int64_t>(claimed.size()));
  std::sort(claimed.begin(), claimed.end());
  CHECK(std::adjacent_find(claimed.begin(), claimed.end()) == claimed.end());
  CHECK(verify_ledger(check).empty());
}
