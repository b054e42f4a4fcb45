// SQLite's group commit wakes a batch's callers by doorbell: one futex
// word per 32 slots, each caller sleeping with its slot's bit
// (storage/sqlite/combine_area.cpp). A caller the combiner's ring misses
// still wakes by its watchdog, 50 ms later, so a wrong bit or word would
// only cost time; with the watchdog made long, a missed ring is a wait of
// seconds, which this test sees.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "storage/sqlite/combine_area.hpp"
#include "tests/support.hpp"

namespace {

using cplane::storage::CombineArea;
using cplane::test::reap;
using cplane::test::TempDir;
using Clock = std::chrono::steady_clock;

// Whether thread `tid` of this process is asleep (state S in its stat).
bool asleep(pid_t tid) {
  std::ifstream in(fmt::format("/proc/self/task/{}/stat", tid));
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'S';
}

// Whatever a failed REQUIRE leaves: the child killed and reaped, the
// threads joined (a joinable thread's destructor would abort the binary),
// the watchdog back to its 50 ms.
struct Cleanup {
  pid_t child = -1;
  std::list<std::thread> threads;
  std::function<void()> release;  // lets blocked threads go on
  template <class F>
  std::thread& spawn(F&& f) {
    return threads.emplace_back(std::forward<F>(f));
  }
  ~Cleanup() {
    if (child > 0) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
    if (release) release();
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
    CombineArea::set_watchdog_for_tests(std::chrono::milliseconds(50));
  }
};

// The area beside `db`, the watchdog made 60 s (Cleanup puts it back).
std::unique_ptr<CombineArea> long_watchdog_area(const std::string& db) {
  CombineArea::set_watchdog_for_tests(std::chrono::seconds(60));
  std::string why;
  return CombineArea::open(db + "-combine", db, why);
}

// A scratch folder, the area beside its database with the watchdog made
// 60 s, and what to undo (declared last: it runs first, area still mapped).
struct Fixture {
  TempDir dir;
  std::string db = dir.file("d.db");
  std::unique_ptr<CombineArea> area = long_watchdog_area(db);
  Cleanup cleanup;
};

}  // namespace

TEST_CASE("a combiner's publish wakes the callers of every group of slots by its ring and not by "
          "the watchdog",
          "[combine][sqlite]") {
  Fixture f;
  REQUIRE(f.area);

  int locked[2], go[2];
  REQUIRE(::pipe(locked) == 0);
  REQUIRE(::pipe(go) == 0);
  const pid_t combiner = ::fork();
  REQUIRE(combiner >= 0);
  if (combiner == 0) {
    // The combiner: its own mapping; it holds the lock, then answers every
    // slot in one batch (each answer is its request) and lets go.
    ::close(locked[0]);
    ::close(go[1]);
    std::string w;
    auto mine = CombineArea::open(f.db + "-combine", f.db, w);
    if (!mine || !mine->try_lock()) ::_exit(10);
    if (::write(locked[1], "L", 1) != 1) ::_exit(11);
    char c = 0;
    if (::read(go[0], &c, 1) != 1) ::_exit(12);
    const auto batch = mine->collect(CombineArea::kSlots);
    if (batch.size() != CombineArea::kSlots) ::_exit(13);
    mine->open_batch(0);
    std::vector<std::uint32_t> slots;
    for (const auto& t : batch) {
      if (!mine->stage(t.slot, t.request)) ::_exit(14);
      slots.push_back(t.slot);
    }
    mine->publish(slots);
    mine->unlock();
    ::_exit(0);
  }
  f.cleanup.child = combiner;
  ::close(locked[1]);
  ::close(go[0]);
  char c = 0;
  REQUIRE(::read(locked[0], &c, 1) == 1);

  // Every slot queued, so that the batch spans every doorbell.
  std::vector<std::uint64_t> id_of(CombineArea::kSlots, 0);
  for (std::uint32_t n = 0; n < CombineArea::kSlots; ++n) {
    const std::uint64_t id = 1000 + n;
    const auto slot = f.area->post(fmt::format("request {}", id), id);
    REQUIRE(slot);
    id_of[*slot] = id;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  // The first waiter of this process becomes the standby, blocked on the
  // lock itself (woken when the combiner lets go, not by a ring): one that
  // is not measured.
  const std::uint32_t standby_slot = 1;
  CombineArea::Turn standby_turn = CombineArea::Turn::timeout;
  std::thread& standby = f.cleanup.spawn([&] {
    standby_turn = f.area->wait(standby_slot, deadline);
    // The lock is this thread's (a robust mutex): let go of it here.
    if (standby_turn == CombineArea::Turn::combine) f.area->unlock();
  });
  // A failed REQUIRE below: the combiner killed, the lock free, the
  // deadline ends every wait.
  for (int i = 0; i < 10'000 && f.area->standby() != ::getpid(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(f.area->standby() == ::getpid());

  // Four measured callers in each group of 32 slots.
  std::vector<std::uint32_t> measured;
  for (std::uint32_t group = 0; group * 32 < CombineArea::kSlots; ++group) {
    for (std::uint32_t k : {0u, 9u, 18u, 31u}) measured.push_back(group * 32 + k);
  }
  std::vector<CombineArea::Turn> turns(measured.size(), CombineArea::Turn::timeout);
  std::vector<Clock::time_point> woke(measured.size());
  std::vector<std::atomic<pid_t>> tids(measured.size());
  std::vector<std::thread*> waiters;
  for (std::size_t k = 0; k < measured.size(); ++k) {
    waiters.push_back(&f.cleanup.spawn([&, k] {
      tids[k] = ::gettid();
      turns[k] = f.area->wait(measured[k], deadline);
      woke[k] = Clock::now();
    }));
  }
  // Every measured caller asleep before the batch is published, so that
  // each one has to be woken.
  auto all_asleep = [&] {
    for (auto& t : tids) {
      if (t.load() == 0 || !asleep(t.load())) return false;
    }
    return true;
  };
  for (int i = 0; i < 10'000 && !all_asleep(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(all_asleep());
  const auto published = Clock::now();
  REQUIRE(::write(go[1], "g", 1) == 1);
  for (auto* t : waiters) t->join();
  standby.join();
  int status = 0;
  f.cleanup.child = -1;
  REQUIRE(reap(combiner, 30, &status));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  for (std::size_t k = 0; k < measured.size(); ++k) {
    INFO("slot " << measured[k]);
    CHECK(turns[k] == CombineArea::Turn::done);
    // Woken by the ring: well before the 60 s watchdog, or the 20 s
    // deadline a missed ring would sleep to.
    CHECK(woke[k] - published < std::chrono::seconds(5));
  }
  // The standby took the lock as the combiner let go: the answer is there.
  CHECK(standby_turn == CombineArea::Turn::combine);
  for (std::uint32_t i = 0; i < CombineArea::kSlots; ++i) {
    INFO("slot " << i);
    REQUIRE(f.area->state(i) == CombineArea::kDone);
    CHECK(f.area->take_result(i, id_of[i]) == fmt::format("request {}", id_of[i]));
  }
}

TEST_CASE("a combiner that lets go rings the oldest waiter when the standby died blocked on the "
          "lock",
          "[combine][sqlite]") {
  // unlock(): with no live standby to take the lock by itself, the oldest
  // queued request's owner is rung (its bit on its doorbell) and becomes
  // the combiner. A wrong bit, or none, left it to its watchdog.
  Fixture f;
  REQUIRE(f.area);
  REQUIRE(f.area->try_lock());
  const auto oldest = f.area->post("oldest", 7);  // queued before the standby's
  REQUIRE(oldest);
  const pid_t standby = ::fork();
  REQUIRE(standby >= 0);
  if (standby == 0) {
    std::string w;
    auto mine = CombineArea::open(f.db + "-combine", f.db, w);
    if (!mine) ::_exit(10);
    const auto slot = mine->post("standby", 8);
    if (!slot) ::_exit(11);
    mine->wait(*slot, Clock::now() + std::chrono::seconds(60));
    ::_exit(12);
  }
  f.cleanup.child = standby;
  for (int i = 0; i < 10'000 && f.area->standby() != standby; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(f.area->standby() == standby);
  ::kill(standby, SIGKILL);  // dies blocked on the lock
  f.cleanup.child = -1;
  REQUIRE(reap(standby, 30));

  std::atomic<pid_t> tid{0};
  CombineArea::Turn turn = CombineArea::Turn::timeout;
  Clock::time_point woke;
  std::thread& waiter = f.cleanup.spawn([&] {
    tid = ::gettid();
    turn = f.area->wait(*oldest, Clock::now() + std::chrono::seconds(20));
    woke = Clock::now();
    if (turn == CombineArea::Turn::combine) f.area->unlock();
  });
  f.cleanup.release = [&] { f.area->unlock(); };  // a failed REQUIRE: the lock let go
  for (int i = 0; i < 10'000 && !(tid.load() != 0 && asleep(tid.load())); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(asleep(tid.load()));
  f.cleanup.release = nullptr;
  const auto let_go = Clock::now();
  f.area->unlock();
  waiter.join();
  CHECK(turn == CombineArea::Turn::combine);
  CHECK(woke - let_go < std::chrono::seconds(5));  // rung, not the 20 s deadline
}
