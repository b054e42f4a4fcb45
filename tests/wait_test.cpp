// Claims that wait for work: woken by commits that made some, not by every
// commit (SQLite: the lock file's notice; PostgreSQL: NOTIFY).
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include <cplane/cplane.hpp>

#include "commands/testing.hpp"
#include "storage/backend_wrapper.hpp"
#include "storage/open.hpp"
#include "tests/support.hpp"

using namespace cplane;
using cplane::test::TempDir;
using cplane::test::test_context;

namespace {

using Clock = std::chrono::steady_clock;

// Counts the waits of a claim: each one ends in another look (a claim
// through the writer).
class CountedWaits final : public storage::BackendWrapper {
 public:
  CountedWaits(std::unique_ptr<storage::Backend> inner, std::atomic<int>& waits)
      : BackendWrapper(std::move(inner)), waits_(waits) {}
  void wait_for_work(Clock::time_point deadline) override {
    BackendWrapper::wait_for_work(deadline);
    ++waits_;
  }

 private:
  std::atomic<int>& waits_;
};

}  // namespace

TEST_CASE("a waiting claim looks again for a commit that made work and not for every commit",
          "[commands][wait]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "w.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.enqueue("alpha", R"({"held":true})");
  const auto held = store.claim("holder");
  REQUIRE(held);
  std::atomic<int> waits{0};
  auto waiter = std::async(std::launch::async, [&] {
    auto s = testing::store_over(
        std::make_unique<CountedWaits>(storage::open_store(db), waits), {});
    return s.claim("waiter", ClaimOptions{.wait = Seconds{60}});
  });
  while (waits.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // Fifty commits that make no work (heartbeats): before, each one woke the
  // waiter and sent its claim through the writer.
  const auto start = Clock::now();
  const int before = waits.load();
  for (int i = 0; i < 50; ++i) {
    store.heartbeat(held->item_id, held->fence);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int looks = waits.load() - before;
  const auto elapsed = Clock::now() - start;
  // SQLite looks again at most every 100 ms when a commit came unannounced;
  // PostgreSQL only on NOTIFY. Either way far fewer than 50.
  const auto rechecks = static_cast<int>(elapsed / std::chrono::milliseconds(100));
  CHECK(looks <= rechecks + 2);
  CHECK(looks < 50);
  // A commit that made work wakes it: it takes the item.
  const auto enqueued = store.enqueue("alpha", R"({"late":true})");
  const auto claimed = waiter.get();
  REQUIRE(claimed);
  CHECK(claimed->item_id == enqueued);
  CHECK(Clock::now() - start < std::chrono::seconds(30));  // woken, not timed out
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a waiting claim finds work that came without a notice", "[commands][wait][sqlite]") {
  // A writer without the lock file (the flock off) writes no notice, as a
  // writer killed between its commit and its notice: the waiter's recheck
  // (PRAGMA data_version every 100 ms) finds the item all the same.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "w.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  auto waiter = std::async(std::launch::async, [&] {
    return ControlStore{db}.claim("waiter", ClaimOptions{.wait = Seconds{60}});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  ControlStore quiet{db, StoreOptions{.sqlite = {.writer_flock = false}}};
  const auto enqueued = quiet.enqueue("alpha", R"({"unannounced":true})");
  const auto claimed = waiter.get();
  REQUIRE(claimed);
  CHECK(claimed->item_id == enqueued);
  CHECK(Clock::now() - start < std::chrono::seconds(30));  // found, not timed out
}

TEST_CASE("a finish or a cancel that gives back a full key's slot wakes a claim waiting behind "
          "that key",
          "[commands][wait][flow]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "w.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.set_limit("k", ControlStore::LimitSpec{.concurrency = 1});
  const ControlStore::EnqueueOptions keyed{.concurrency_key = "k"};
  store.enqueue("alpha", R"({"n":1})", keyed);
  const auto second = store.enqueue("alpha", R"({"n":2})", keyed);
  const auto first = store.claim("w1");
  REQUIRE(first);
  CHECK_FALSE(store.claim("w2"));  // the key is full
  auto waiter = std::async(std::launch::async, [&] {
    return ControlStore{db}.claim("w2", ClaimOptions{.wait = Seconds{60}});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  SECTION("a finish") { store.finish(first->item_id, first->fence, Outcome::done); }
  SECTION("a cancel") { store.cancel(first->item_id, "not needed"); }
  const auto claimed = waiter.get();
  REQUIRE(claimed);
  CHECK(claimed->item_id == second);
  // Woken by the finish or the cancel: the first lease runs 900 s, so the
  // claim would otherwise have waited out its 60 s (it did on PostgreSQL).
  CHECK(Clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("a claim waiting on a database reached through a symbolic link in another folder "
          "is woken by work",
          "[commands][wait][sqlite]") {
  // The writers name the lock file beside the file the link leads to; the
  // waiter watched the link's name, saw nothing, and waited out its wait.
  TempDir dir;
  std::filesystem::create_directories(dir.file("real"));
  std::filesystem::create_directories(dir.file("link"));
  const auto db = dir.file("real/r.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  std::filesystem::create_symlink(db, dir.file("link/l.db"));
  auto waiter = std::async(std::launch::async, [&] {
    return ControlStore{dir.file("link/l.db")}.claim("w", ClaimOptions{.wait = Seconds{60}});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  const auto enqueued = store.enqueue("alpha", "{}");
  const auto claimed = waiter.get();
  REQUIRE(claimed);
  CHECK(claimed->item_id == enqueued);
  CHECK(Clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("a claim waiting beside a lapsed lease it may not take does not spin", "[commands][wait]") {
  // The lapse is past, so the next one to wait for was "now": the claim
  // looked again at once, a core busy for the whole wait.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "w.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    store.enqueue("alpha", "{}");
    REQUIRE(store.claim("holder", ClaimOptions{.lease = Seconds{0.2}}));
    store.pause_project("alpha", "held");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      ControlStore store{db};
      ::_exit(store.claim("w", ClaimOptions{.wait = Seconds{2}}) ? 1 : 0);
    } catch (...) {
      ::_exit(2);
    }
  }
  int status = 0;
  rusage usage{};
  REQUIRE(::wait4(pid, &status, 0, &usage) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // nothing taken: the project is paused
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  CHECK(cpu < 1.0);  // spinning took about 2 s of CPU in its 2 s
}

TEST_CASE("a claim waiting behind a rate-limited key takes the item at the key's next token",
          "[commands][wait][flow]") {
  // Nothing commits when a token comes: the waiter slept until its
  // deadline (or another process's commit) before it counted the token.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "w.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.set_limit("k", ControlStore::LimitSpec{.rate = "1/2s"});
  const ControlStore::EnqueueOptions keyed{.concurrency_key = "k"};
  store.enqueue("alpha", R"({"n":1})", keyed);
  const auto second = store.enqueue("alpha", R"({"n":2})", keyed);
  REQUIRE(store.claim("w1"));
  const auto start = Clock::now();
  CHECK_FALSE(store.claim("w2"));  // no token until about 2 s after the first claim
  const auto claimed = ControlStore{db}.claim("w2", ClaimOptions{.wait = Seconds{30}});
  const auto waited = Clock::now() - start;
  REQUIRE(claimed);
  CHECK(claimed->item_id == second);
  CHECK(waited > std::chrono::milliseconds(1500));  // it did wait for the token
  CHECK(waited < std::chrono::seconds(15));         // and not for its deadline
}
