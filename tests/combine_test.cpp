// SQLite's group commit across real processes (commands/combine.cpp): the
// test process holds the combiner's lock while child processes queue their
// commands, then runs them as one batch, or a child combiner is SIGKILLed at
// a chosen step through a wrapping backend. Every answer is checked against
// the log: nothing lost, nothing run twice, nothing told "unknown".
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "commands/testing.hpp"
#include "commands/combine.hpp"
#include "storage/backend_wrapper.hpp"
#include "storage/sqlite/combine_area.hpp"
#include "storage/open.hpp"
#include "storage/sqlite/sqlite_backend.hpp"
#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::read_file;
using cplane::test::reap;
using cplane::test::TempDir;
using cplane::test::test_context;
using storage::CombineArea;
using storage::Sync;

CombineArea* area_of(ControlStore& store) { return testing::backend(store).combine_area(); }

int waiting(CombineArea& area) {
  int n = 0;
  for (std::uint32_t i = 0; i < CombineArea::kSlots; ++i) n += area.state(i) == CombineArea::kQueued;
  return n;
}

// Polls (a test's patience, not the engine's) until `n` requests are queued.
bool wait_queued(CombineArea& area, int n) {
  for (int i = 0; i < 10'000; ++i) {
    if (waiting(area) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const FenceRejected& e) {
    return fmt::format("FenceRejected {}", to_string(e.reason()));
  } catch (const ScopeDenied&) {
    return "ScopeDenied";
  } catch (const NotFound& e) {
    return fmt::format("NotFound {}", to_string(e.reason()));
  } catch (const InvalidArgument& e) {
    return "InvalidArgument";
  } catch (const StorageError& e) {
    return fmt::format("StorageError {}: {}", to_string(e.category()), e.what());
  } catch (const std::exception& e) {
    return fmt::format("error: {}", e.what());
  }
}

// A child process that opens its own store on `db`, runs `f` and writes
// what it answered (or the refusal it got) to `out`.
pid_t child(const std::string& db, const std::string& out,
            std::function<std::string(ControlStore&)> f, StoreOptions options = {}) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  std::string answer;
  try {
    ControlStore store{db, options};
    answer = f(store);
  } catch (...) {
    answer = describe(std::current_exception());
  }
  std::ofstream(out) << answer;
  ::_exit(0);
}

// The serving store's view: each write transaction's durability, and the
// synchronous level SQLite committed it at.
class Recorder : public storage::BackendWrapper {
 public:
  using BackendWrapper::BackendWrapper;
  std::vector<Sync> begins;
  std::vector<int> committed_at;  // PRAGMA synchronous: 1 NORMAL, 2 FULL
  void begin_write(Sync sync) override {
    begins.push_back(sync);
    BackendWrapper::begin_write(sync);
  }
  void commit() override {
    committed_at.push_back(storage::sqlite_synchronous(inner()));
    BackendWrapper::commit();
  }
};

struct Batch {
  std::vector<std::string> answers;
  std::vector<Sync> begins;
  std::vector<int> committed_at;
};

// Holds the combiner's lock while one child per command queues it, then
// runs them all in this process, as one combiner would.
Batch run_as_one_batch(const std::string& db, const TempDir& dir,
                       const std::vector<std::function<std::string(ControlStore&)>>& commands,
                       StoreOptions options = {}) {
  auto recorder = std::make_unique<Recorder>(storage::open_store(db));
  Recorder& seen = *recorder;
  ControlStore server = testing::store_over(std::move(recorder));
  CombineArea* area = area_of(server);
  REQUIRE(area != nullptr);
  REQUIRE(area->try_lock());
  std::vector<pid_t> pids;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    pids.push_back(child(db, dir.file(fmt::format("answer-{}", i)), commands[i], options));
    // One at a time: the batch runs them in this order.
    REQUIRE(wait_queued(*area, static_cast<int>(i + 1)));
  }
  CommandRunner::serve(testing::impl(server), *area, std::nullopt);  // unlocks
  Batch out;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    CHECK(reap(pids[i]));
    out.answers.push_back(read_file(dir.file(fmt::format("answer-{}", i))));
  }
  out.begins = seen.begins;
  out.committed_at = seen.committed_at;
  return out;
}

std::string claimed_text(const std::optional<ClaimedItem>& c) {
  if (!c) return "none";
  return fmt::format("{} {} {} {}", c->item_id, c->fence, c->lease_expires_at, c->payload);
}

}  // namespace

TEST_CASE("every command kind is run by another process's combiner and answered across "
          "processes, refusals included, in one transaction",
          "[combine][sqlite]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  std::vector<ClaimedItem> held;
  {
    ControlStore setup{db};
    setup.create_project("alpha", "A");
    for (int i = 0; i < 9; ++i) setup.enqueue("alpha", fmt::format(R"({{"n":{}}})", i));
    for (int i = 0; i < 6; ++i) held.push_back(*setup.claim("setup"));
  }
  const std::string big(20'000, 'x');  // a payload whose claim answer does not fit a slot
  {
    ControlStore setup{db};
    setup.enqueue("alpha", fmt::format(R"({{"big":"{}"}})", big));
  }
  const auto& [h0, h1, h2, h3, h4, h5] = std::tie(held[0], held[1], held[2], held[3], held[4], held[5]);
  const auto batch = run_as_one_batch(
      db, dir,
      {
          [&](ControlStore& s) {
            s.finish(h0.item_id, h0.fence, Outcome::done);
            return std::string("finished");
          },
          [&](ControlStore& s) { return claimed_text(s.claim("w-claim")); },
          [&](ControlStore& s) {
            // Refused: a stale fence. Nothing of it may be written, and the
            // commands after it must still run.
            s.finish(h1.item_id, h1.fence + 7, Outcome::done);
            return std::string("finished?!");
          },
          [&](ControlStore& s) {
            std::string out;
            for (const auto& c : s.claim_batch("w-batch", 2)) out += claimed_text(c) + ";";
            return out;
          },
          [&](ControlStore& s) {
            s.finish_batch({{h1.item_id, h1.fence, Outcome::failed, "x"},
                            {h2.item_id, h2.fence, Outcome::done, ""}});
            return std::string("batch finished");
          },
          [&](ControlStore& s) {
            return std::to_string(s.heartbeat(h3.item_id, h3.fence, {.lease = Seconds{60}}));
          },
          [&](ControlStore& s) {
            return claimed_text(s.finish_and_claim(h5.item_id, h5.fence, Outcome::done, "w-next"));
          },
          [&](ControlStore& s) {
            s.release(h4.item_id, h4.fence, "giving back");
            return std::string("released");
          },
          [&](ControlStore& s) { return s.enqueue("alpha", R"({"new":1})"); },
          [&](ControlStore& s) {
            return s.enqueue("alpha", R"({"new":2})", ControlStore::EnqueueOptions{.key = "k1"});
          },
          [&](ControlStore& s) {
            const auto ids = s.enqueue_batch("alpha", {R"({"new":3})", R"({"new":4})"});
            return ids.at(0) + " " + ids.at(1);
          },
          [&](ControlStore& s) {
            s.heartbeat("no-such-item", 1);
            return std::string("beat?!");
          },
          [&](ControlStore& s) { return s.enqueue("nowhere", "{}"); },
      });
  // One transaction for all of them, FULL because claims are in it.
  CHECK(batch.begins == std::vector<Sync>{Sync::full});
  CHECK(batch.committed_at == std::vector<int>{2});

  ControlStore store{db, {.read_only = true}};
  CHECK(batch.answers[0] == "finished");
  CHECK(store.item(h0.item_id).status == ItemStatus::done);
  // The claim got the oldest ready item, as its own row says.
  auto check_claim = [&](const std::string& text, const std::string& owner) {
    std::istringstream in(text);
    std::string id;
    Fence fence = 0;
    Micros lease_end = 0;
    in >> id >> fence >> lease_end;
    const Item row = store.item(id);
    CHECK(row.status == ItemStatus::claimed);
    CHECK(row.owner == owner);
    CHECK(row.fence == fence);
    CHECK(row.lease_expires_at == lease_end);
    return id;
  };
  const std::string first = check_claim(batch.answers[1], "w-claim");
  CHECK(batch.answers[2] == "FenceRejected stale_fence");
  const auto pair_end = batch.answers[3].find(';');
  REQUIRE(pair_end != std::string::npos);
  const std::string second = check_claim(batch.answers[3].substr(0, pair_end), "w-batch");
  const std::string third = check_claim(batch.answers[3].substr(pair_end + 1), "w-batch");
  CHECK(batch.answers[4] == "batch finished");
  CHECK(store.item(h1.item_id).status == ItemStatus::failed);
  CHECK(store.item(h2.item_id).status == ItemStatus::done);
  CHECK(batch.answers[5] == std::to_string(store.item(h3.item_id).lease_expires_at));
  // finish_and_claim: the next item is the big one, whose payload came back
  // whole although it does not fit the area.
  const std::string fourth = check_claim(batch.answers[6], "w-next");
  CHECK(store.item(h5.item_id).status == ItemStatus::done);
  CHECK(batch.answers[6].find(big) != std::string::npos);
  CHECK(batch.answers[7] == "released");
  CHECK(store.item(h4.item_id).status == ItemStatus::ready);
  CHECK(store.item(batch.answers[8]).payload == R"({"new":1})");
  CHECK(store.item(batch.answers[9]).payload == R"({"new":2})");
  CHECK(batch.answers[10].size() > 20);
  CHECK(batch.answers[11] == "FenceRejected unknown_item");
  CHECK(batch.answers[12] == "NotFound unknown_project");
  std::set<std::string> claimed{first, second, third, fourth};
  CHECK(claimed.size() == 4);  // four claims, four items

  // Every event of the batch names its request; the refusals wrote nothing.
  for (const auto& id : {first, batch.answers[8], h3.item_id}) {
    CHECK(store.events(id).back().event.request_id != 0);
  }
  CHECK(store.events(h1.item_id).size() == 3);  // queued, claimed, failed: not the refused done
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a batch commits with the strongest durability any member needs", "[combine][sqlite]") {
  struct Case {
    const char* name;
    Durability durability;
    bool with_claim;
    Sync expected;
    int synchronous;
  };
  const Case cases[] = {
      {"fenced, finishes only: NORMAL", Durability::fenced, false, Sync::normal, 1},
      {"fenced, a claim among finishes: FULL", Durability::fenced, true, Sync::full, 2},
      {"full, finishes only: FULL", Durability::full, false, Sync::full, 2},
      {"normal, a claim among finishes: NORMAL", Durability::normal, true, Sync::normal, 1},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      TempDir dir;
      const std::string db = test_context().fresh_store(dir, "c.db");
      std::vector<ClaimedItem> held;
      {
        ControlStore setup{db};
        setup.create_project("alpha", "A");
        for (int i = 0; i < 3; ++i) setup.enqueue("alpha", "{}");
        held.push_back(*setup.claim("setup"));
        held.push_back(*setup.claim("setup"));
      }
      std::vector<std::function<std::string(ControlStore&)>> commands;
      for (const auto& h : held) {
        commands.push_back([h](ControlStore& s) {
          s.finish(h.item_id, h.fence, Outcome::done);
          return std::string("ok");
        });
      }
      if (c.with_claim) {
        commands.push_back([](ControlStore& s) { return s.claim("w") ? "ok" : "none"; });
      }
      const auto batch = run_as_one_batch(db, dir, commands, {.durability = c.durability});
      CHECK(batch.begins == std::vector<Sync>{c.expected});
      CHECK(batch.committed_at == std::vector<int>{c.synchronous});
      for (const auto& a : batch.answers) CHECK(a == "ok");
    }
  }
}

namespace {

// A combiner that dies (SIGKILL) at a chosen step of its batch.
class DieAt : public storage::BackendWrapper {
 public:
  enum class Step { mid_batch, before_commit, after_commit };
  DieAt(std::unique_ptr<storage::Backend> inner, Step step)
      : BackendWrapper(std::move(inner)), step_(step) {}
  Seq append(const Event& event) override {
    if (step_ == Step::mid_batch && ++appends_ == 2) ::raise(SIGKILL);
    return BackendWrapper::append(event);
  }
  void commit() override {
    if (step_ == Step::before_commit) ::raise(SIGKILL);
    BackendWrapper::commit();
    if (step_ == Step::after_commit) ::raise(SIGKILL);
  }

 private:
  Step step_;
  int appends_ = 0;
};


// A combiner in a child process: it opens its store (`open`, in the child),
// takes the combiner's lock, and runs the queued batch when told to go.
// `before` runs first in the child (entering a namespace, say), and may
// fork: only the process it returns true in goes on.
class ChildCombiner {
 public:
  ChildCombiner(std::function<ControlStore()> open,
                std::function<bool()> before = [] { return true; }) {
    REQUIRE(::pipe(go_) == 0);
    REQUIRE(::pipe(ready_) == 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      if (!before()) ::_exit(0);
      ControlStore store = open();
      CombineArea* area = area_of(store);
      const char locked = area != nullptr && area->try_lock() ? 'L' : 'x';
      if (::write(ready_[1], &locked, 1) != 1 || locked != 'L') ::_exit(3);
      char go = 0;
      if (::read(go_[0], &go, 1) != 1) ::_exit(4);
      CommandRunner::serve(testing::impl(store), *area, std::nullopt);
      ::_exit(0);
    }
    char locked = 0;
    REQUIRE(::read(ready_[0], &locked, 1) == 1);
    REQUIRE(locked == 'L');
  }
  pid_t pid() const { return pid_; }
  void go() { REQUIRE(::write(go_[1], "g", 1) == 1); }

 private:
  int go_[2]{};
  int ready_[2]{};
  pid_t pid_ = 0;
};

}  // namespace

TEST_CASE("a combiner SIGKILLed at any step of its batch: every waiter gets its one answer, "
          "nothing runs twice",
          "[combine][sqlite][faults]") {
  const auto [name, step, committed] = GENERATE(
      std::tuple{"in the middle of the batch", DieAt::Step::mid_batch, false},
      std::tuple{"before its commit", DieAt::Step::before_commit, false},
      std::tuple{"after its commit, before handing out answers", DieAt::Step::after_commit, true});
  INFO(name);
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  ClaimedItem held;
  {
    ControlStore setup{db};
    setup.create_project("alpha", "A");
    for (int i = 0; i < 4; ++i) setup.enqueue("alpha", "{}");
    held = *setup.claim("setup");
  }
  ChildCombiner combiner([&] { return testing::store_over(std::make_unique<DieAt>(storage::open_store(db), step)); });
  ControlStore observer{db};
  CombineArea* area = area_of(observer);
  REQUIRE(area != nullptr);
  const std::vector<std::function<std::string(ControlStore&)>> commands = {
      [](ControlStore& s) { return claimed_text(s.claim("w1")); },
      [&](ControlStore& s) {
        s.finish(held.item_id, held.fence, Outcome::done);
        return std::string("finished");
      },
      [](ControlStore& s) { return claimed_text(s.claim("w2")); },
      [](ControlStore& s) { return s.enqueue("alpha", R"({"late":1})"); },
  };
  std::vector<pid_t> pids;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    pids.push_back(child(db, dir.file(fmt::format("answer-{}", i)), commands[i]));
    REQUIRE(wait_queued(*area, static_cast<int>(i + 1)));
  }
  const auto died_at = std::chrono::steady_clock::now();
  combiner.go();
  int status = 0;
  REQUIRE(reap(combiner.pid(), 30, &status));
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  std::vector<std::string> answers;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    CHECK(reap(pids[i]));
    answers.push_back(read_file(dir.file(fmt::format("answer-{}", i))));
  }
  // The waiters learnt of the death from the kernel, not from a timeout.
  CHECK(std::chrono::steady_clock::now() - died_at < std::chrono::seconds(5));

  INFO(answers[0] << " | " << answers[1] << " | " << answers[2] << " | " << answers[3]);
  CHECK(answers[1] == "finished");
  ControlStore store{db, {.read_only = true}};
  std::set<std::string> claimed;
  for (const auto& [text, owner] : {std::pair{answers[0], "w1"}, std::pair{answers[2], "w2"}}) {
    std::istringstream in(text);
    std::string id;
    Fence fence = 0;
    in >> id >> fence;
    REQUIRE(!id.empty());
    const Item row = store.item(id);
    CHECK(row.owner == owner);
    CHECK(row.fence == fence);
    CHECK(fence == 1);  // claimed once: a second run would have fenced it 2
    CHECK(store.events(id).size() == 2);
    claimed.insert(id);
  }
  CHECK(claimed.size() == 2);
  CHECK(store.item(held.item_id).status == ItemStatus::done);
  CHECK(store.events(held.item_id).size() == 3);  // queued, claimed, done: once
  CHECK(store.item(answers[3]).payload == R"({"late":1})");
  CHECK(store.status_counts().ready + store.status_counts().claimed +
            store.status_counts().done == 5);  // one enqueue, not two
  CHECK(verify_ledger(store).empty());
  (void)committed;
}

namespace {

// A process that takes the combiner's lock and is SIGKILLed holding it.
pid_t die_holding_the_lock(const std::string& db) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ControlStore store{db};
    if (area_of(store) == nullptr || !area_of(store)->try_lock()) ::_exit(3);
    ::raise(SIGKILL);
  }
  int status = 0;
  REQUIRE(reap(pid, 30, &status));
  REQUIRE(WIFSIGNALED(status));
  return pid;
}

}  // namespace

TEST_CASE("a shared area left over from a crash or another build is recognised and reset, or "
          "left alone while others use it",
          "[combine][sqlite]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  const std::string path = db + "-combine";
  { ControlStore{db}.create_project("alpha", "A"); }

  SECTION("garbage of the wrong size, nobody using it: rewritten") {
    std::ofstream(path, std::ios::trunc) << "not an area";
    ControlStore store{db};
    CHECK(area_of(store) != nullptr);
    store.enqueue("alpha", "{}");
    CHECK(store.claim("w"));
  }
  SECTION("a lock held by a process that died, nobody else there: rewritten") {
    die_holding_the_lock(db);
    ControlStore store{db};
    CHECK(area_of(store) != nullptr);
    store.enqueue("alpha", "{}");
    CHECK(store.claim("w"));
  }
  SECTION("a lock held by a process that died while others hold the area: taken over") {
    ControlStore survivor{db};
    REQUIRE(area_of(survivor) != nullptr);
    const pid_t pid = die_holding_the_lock(db);
    CHECK(area_of(survivor)->combiner() == pid);  // what the dead holder left
    survivor.enqueue("alpha", "{}");
    CHECK(survivor.claim("w"));
    CHECK(area_of(survivor)->combiner() == 0);
  }
  SECTION("a header from another boot while another process holds it: not used, still correct") {
    ControlStore holder{db};
    REQUIRE(area_of(holder) != nullptr);
    {
      const int fd = ::open(path.c_str(), O_WRONLY);
      REQUIRE(fd >= 0);
      REQUIRE(::pwrite(fd, "another-boot", 12, 24) == 12);  // the boot id
      ::close(fd);
    }
    ControlStore second{db};
    CHECK(area_of(second) == nullptr);  // runs each command alone
    second.enqueue("alpha", "{}");
    CHECK(second.claim("w"));
  }
  ControlStore check{db, {.read_only = true}};
  CHECK(verify_ledger(check).empty());
}

TEST_CASE("project, session, forge, gate, incident and sweep commands are answered across "
          "processes too, each deciding on what the ones before it left",
          "[combine][sqlite]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  std::string pr, held, entering, assigning, closing;
  Fence fence = 0;
  {
    ControlStore setup{db};
    setup.create_project("alpha", "A");
    pr = setup.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.kind = WorkKind::pr,
                                                                  .ref = "o/r#1",
                                                                  .head = "h1",
                                                                  .author = "s9"});
    held = setup.enqueue("alpha", "{}");
    entering = setup.enqueue("alpha", "{}");
    assigning = setup.enqueue("alpha", "{}");
    closing = setup.enqueue("alpha", "{}");
    setup.open_session("s1");
    fence = setup.assign_and_lease("s1", held, {"push"}).fence;
  }
  const Micros later = 4'000'000'000'000'000;  // long after every lease
  const IncidentKey key{"sentry", "fp-1", "org", "", ""};
  const auto batch = run_as_one_batch(
      db, dir,
      {
          [](ControlStore& s) {
            s.create_project("beta", "B");
            return std::string("created");
          },
          [](ControlStore& s) {
            s.grant("beta", "bob");
            return std::string("granted");
          },
          [](ControlStore& s) {
            s.open_session("s2");
            return std::string("opened");
          },
          [](ControlStore& s) {
            std::string out;
            for (const auto& [item, end] : s.session_heartbeat("s1", Seconds{60})) out += item + ";";
            return out;
          },
          [&](ControlStore& s) {
            return std::string(s.record_mutation("s1", held, fence, "push") ? "allowed" : "denied");
          },
          [&](ControlStore& s) {
            const auto verdict = s.record_mutation("s1", held, fence, "delete");
            return verdict ? std::string("allowed") : std::string(to_string(verdict.reason()));
          },
          [&](ControlStore& s) { return std::to_string(s.observe_head(pr, "h2")); },
          [&](ControlStore& s) { return std::to_string(s.observe_review(pr, ReviewState::approved)); },
          [&](ControlStore& s) { return std::to_string(s.enter_terminal_path(entering, "ship it")); },
          [&](ControlStore& s) { return std::to_string(s.leave_terminal_path(closing)); },
          // s2 was opened two commands ago, in this same transaction.
          [&](ControlStore& s) {
            const auto a = s.assign_and_lease("s2", assigning, {"comment"});
            return fmt::format("{} {}", to_string(a.outcome), a.fence);
          },
          [&](ControlStore& s) { return std::to_string(s.link_incident(key, pr)); },
          [&](ControlStore& s) { return std::to_string(s.observe_close(closing, CloseReason::merged)); },
          [&](ControlStore& s) { return std::to_string(s.expire_leases(later)); },
          [](ControlStore& s) {
            std::string out;
            for (const auto& item : s.close_session("s1")) out += item + ";";
            return out;
          },
          [](ControlStore& s) {
            s.open_session("s1");  // closed just before: ids are not reused
            return std::string("reopened?!");
          },
      });
  CHECK(batch.begins == std::vector<Sync>{Sync::full});
  const std::vector<std::string> expected = {
      "created", "granted", "opened", held + ";", "allowed", "action_not_allowed", "1", "1", "1",
      "0", "assigned 1", "1", "1", "2", held + ";", "InvalidArgument"};
  CHECK(batch.answers == expected);

  ControlStore store{db, {.read_only = true}};
  CHECK(store.visible_projects("bob") == std::vector<std::string>{"beta"});
  CHECK(store.item(pr).head == "h2");
  CHECK(store.item(pr).review == ReviewState::approved);
  CHECK(store.terminal_path().size() == 1);
  CHECK(store.item(assigning).session == "s2");
  CHECK(store.incident(key).target == pr);
  CHECK(store.item(closing).status == ItemStatus::closed);
  CHECK(store.item(held).status == ItemStatus::ready);  // released by the close
  for (const auto& info : store.sessions()) {
    if (info.row.session_id == "s1") CHECK(!info.row.is_open());
  }
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a combiner SIGKILLed after its commit while the standby is dead or stopped: the "
          "waiters still get their answers, not 'unknown'",
          "[combine][sqlite][faults]") {
  const bool stop_instead = GENERATE(false, true);
  INFO((stop_instead ? "the standby is stopped" : "the standby is dead"));
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  ChildCombiner combiner([&] {
    return testing::store_over(std::make_unique<DieAt>(storage::open_store(db), DieAt::Step::after_commit));
  });
  ControlStore observer{db, {.lock_timeout = std::chrono::milliseconds(2000)}};
  CombineArea* area = area_of(observer);
  REQUIRE(area != nullptr);
  // The standby: the first waiter blocks on the lock itself.
  const pid_t standby = child(db, dir.file("standby"), [](ControlStore& s) {
    return s.enqueue("alpha", R"({"standby":1})");
  });
  for (int i = 0; i < 5000 && area->standby() != standby; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(area->standby() == standby);
  ::kill(standby, stop_instead ? SIGSTOP : SIGKILL);
  const pid_t waiter = child(
      db, dir.file("waiter"), [](ControlStore& s) { return s.enqueue("alpha", R"({"waiter":1})"); },
      {.lock_timeout = std::chrono::milliseconds(2000)});
  REQUIRE(wait_queued(*area, 2));  // the standby's (dead or stopped), and the waiter's
  const auto start = std::chrono::steady_clock::now();
  combiner.go();
  int status = 0;
  REQUIRE(reap(combiner.pid(), 30, &status));
  CHECK(WIFSIGNALED(status));
  REQUIRE(reap(waiter, 30));
  const std::string answer = read_file(dir.file("waiter"));
  INFO(answer);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500));
  ControlStore store{db, {.read_only = true}};
  CHECK(store.item(answer).payload == R"({"waiter":1})");
  if (stop_instead) {
    ::kill(standby, SIGCONT);
    REQUIRE(reap(standby, 30));
    CHECK(store.item(read_file(dir.file("standby"))).payload == R"({"standby":1})");
  } else {
    reap(standby, 30);
  }
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("requests queued from another PID namespace are run, not taken for a dead process's",
          "[combine][sqlite]") {
  if (::geteuid() != 0) {
    WARN("needs root (a new PID namespace): not run");
    return;
  }
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  // The combiner runs as pid 1 of a namespace of its own: the pids of the
  // processes whose requests it runs mean nothing there.
  ChildCombiner combiner([&] { return ControlStore{db}; },
                         [] {
                           if (::unshare(CLONE_NEWPID) != 0) ::_exit(5);
                           const pid_t inner = ::fork();
                           if (inner == 0) return true;
                           int status = 0;
                           ::waitpid(inner, &status, 0);
                           ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 6);
                         });
  ControlStore observer{db};
  CombineArea* area = area_of(observer);
  REQUIRE(area != nullptr);
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    pids.push_back(child(db, dir.file(fmt::format("answer-{}", i)), [i](ControlStore& s) {
      return s.enqueue("alpha", fmt::format(R"({{"n":{}}})", i));
    }));
    REQUIRE(wait_queued(*area, i + 1));
  }
  combiner.go();
  int status = 0;
  REQUIRE(reap(combiner.pid(), 30, &status));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  ControlStore store{db, {.read_only = true}};
  for (int i = 0; i < 3; ++i) {
    REQUIRE(reap(pids[i], 30));
    const std::string answer = read_file(dir.file(fmt::format("answer-{}", i)));
    INFO(answer);
    CHECK(store.item(answer).payload == fmt::format(R"({{"n":{}}})", i));
    // Run by the combiner in the other namespace, in its batch.
    CHECK(store.events(answer).back().event.request_id != 0);
  }
  CHECK(store.status_counts().ready == 3);
}

TEST_CASE("a command whose answer outgrows a slot runs alone instead: a session holding hundreds "
          "of items heartbeats and closes",
          "[combine][sqlite]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db, {.durability = Durability::normal}};
  store.create_project("alpha", "A");
  const auto ids = store.enqueue_batch("alpha", std::vector<std::string>(600, "{}"));
  store.open_session("s1");
  std::size_t held = 0;
  for (const auto& id : ids) held += store.assign_and_lease("s1", id, {"push"}).is_assigned();
  REQUIRE(held == 600);
  CHECK(store.session_heartbeat("s1", Seconds{60}).size() == 600);
  CHECK(store.close_session("s1").size() == 600);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("request ids differ between forked processes", "[combine][sqlite]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  ControlStore parent{db};
  parent.create_project("alpha", "A");
  parent.enqueue("alpha", "{}");  // the parent draws ids before it forks
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    pids.push_back(child(db, dir.file(fmt::format("id-{}", i)),
                         [](ControlStore& s) { return s.enqueue("alpha", "{}"); }));
  }
  std::set<std::uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(reap(pids[i]));
    ids.insert(parent.events(read_file(dir.file(fmt::format("id-{}", i)))).back().event.request_id);
  }
  CHECK(ids.size() == 3);
  CHECK(!ids.contains(0));
}

TEST_CASE("while a stopped process holds the combiner's lock, a waiter gives up after its lock "
          "timeout as busy, and its command is never run",
          "[combine][sqlite]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  ChildCombiner holder([&] { return ControlStore{db}; });  // takes the lock, never serves
  ::kill(holder.pid(), SIGSTOP);
  ControlStore store{db, {.lock_timeout = std::chrono::milliseconds(300)}};
  const auto start = std::chrono::steady_clock::now();
  try {
    store.enqueue("alpha", "{}");
    FAIL("the enqueue went through a held lock");
  } catch (const StorageError& e) {
    CHECK(e.category() == StorageError::Category::busy);
    CHECK(std::string(e.what()).find("nothing was done") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  // Withdrawn from the queue: when the holder resumes and serves, there is
  // nothing of it to run.
  CombineArea* area = area_of(store);
  REQUIRE(area != nullptr);
  CHECK(waiting(*area) == 0);
  ::kill(holder.pid(), SIGCONT);
  holder.go();
  int status = 0;
  REQUIRE(reap(holder.pid(), 30, &status));
  CHECK(WIFEXITED(status));
  CHECK(store.status_counts().ready == 0);
  store.enqueue("alpha", "{}");  // the lock is free again
  CHECK(store.status_counts().ready == 1);
}

TEST_CASE("a command undone after it wrote (its answer outgrew its slot) undoes only itself, "
          "and the batch's other commands stand",
          "[combine][sqlite]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  ClaimedItem held;
  {
    ControlStore setup{db, {.durability = Durability::normal}};
    setup.create_project("alpha", "A");
    setup.enqueue("alpha", "{}");
    setup.enqueue("alpha", "{}");
    held = *setup.claim("setup");
    const auto ids = setup.enqueue_batch("alpha", std::vector<std::string>(500, "{}"));
    setup.open_session("s1");
    for (const auto& id : ids) REQUIRE(setup.assign_and_lease("s1", id, {"push"}).is_assigned());
  }
  const auto batch = run_as_one_batch(
      db, dir,
      {
          [&](ControlStore& s) {
            s.finish(held.item_id, held.fence, Outcome::done);
            return std::string("finished");
          },
          // 500 leases extended: an answer too large for a slot, found
          // after its events were written; it runs alone in its process.
          [](ControlStore& s) { return std::to_string(s.session_heartbeat("s1", Seconds{60}).size()); },
          [](ControlStore& s) { return claimed_text(s.claim("w")); },
      });
  REQUIRE(batch.answers.size() == 3);
  // The batch ran without savepoints first, was undone whole, and ran
  // again with them.
  CHECK(batch.begins.size() == 2);
  CHECK(batch.committed_at.size() == 1);
  CHECK(batch.answers[0] == "finished");
  CHECK(batch.answers[1] == "500");
  CHECK(batch.answers[2].rfind("none", 0) != 0);
  ControlStore store{db, {.read_only = true}};
  CHECK(store.item(held.item_id).status == ItemStatus::done);
  CHECK(store.events(held.item_id).size() == 3);  // queued, claimed, done: once
  // One lease_extended per item: the undone attempt left none behind.
  for (const auto& info : store.sessions()) {
    if (info.row.session_id != "s1") continue;
    CHECK(info.items.size() == 500);
    for (const auto& id : info.items) CHECK(store.events(id).size() == 3);  // queued, assigned, extended
  }
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a store used in a forked child is refused there alone: it never combines, so it "
          "cannot refuse other processes' commands",
          "[combine][sqlite]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  ControlStore parent{db};
  parent.create_project("alpha", "A");
  CombineArea* area = area_of(parent);
  REQUIRE(area != nullptr);
  REQUIRE(area->try_lock());
  // The child calls the store it inherited (a mistake: one store per process).
  const pid_t forked = ::fork();
  if (forked == 0) {
    std::string answer;
    try {
      answer = parent.enqueue("alpha", "{}");
    } catch (...) {
      answer = describe(std::current_exception());
    }
    std::ofstream(dir.file("forked")) << answer;
    ::_exit(0);
  }
  REQUIRE(reap(forked));
  CHECK(read_file(dir.file("forked")).find("StorageError unavailable") == 0);
  // Another process, with its own store: its command is run by the holder.
  const pid_t other = child(db, dir.file("other"),
                            [](ControlStore& s) { return s.enqueue("alpha", R"({"other":1})"); });
  REQUIRE(wait_queued(*area, 1));
  CommandRunner::serve(testing::impl(parent), *area, std::nullopt);
  REQUIRE(reap(other));
  const std::string id = read_file(dir.file("other"));
  INFO(id);
  CHECK(parent.item(id).payload == R"({"other":1})");
  CHECK(parent.status_counts().ready == 1);
}
