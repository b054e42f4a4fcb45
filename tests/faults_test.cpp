// Storage faults injected by wrapping the backend (tests/fault_backend.hpp):
// an append, a commit, a rollback or a begin that fails. Whatever fails,
// nothing is half-written, nothing is written twice, and the error's
// category says what the caller may do.
#include <catch2/catch.hpp>

#include <cplane/cplane.hpp>

#include "commands/testing.hpp"
#include "storage/sqlite/sqlite_backend.hpp"
#include "tests/fault_backend.hpp"
#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::FaultBackend;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;
using Category = StorageError::Category;
using Call = FaultBackend::Call;

long long rows(const std::string& db, const std::string& table) {
  return std::stoll(sql_column(db, "SELECT count(*) FROM " + table).at(0));
}

// A store on `db` whose backend fails `call` the `nth` time (from 0). Each
// command is its own transaction (group commit off) unless `combine`.
ControlStore faulty(const std::string& db, Call call, int nth, Category category,
                    FaultBackend** handle = nullptr, bool combine = false) {
  auto backend = std::make_unique<FaultBackend>(
      storage::open_store(db, {.sqlite = {.combine = combine}}), call, nth, category);
  if (handle != nullptr) *handle = backend.get();
  return testing::store_over(std::move(backend));
}

Category category_of(const std::function<void()>& command) {
  try {
    command();
  } catch (const StorageError& e) {
    return e.category();
  }
  FAIL("no StorageError");
  return Category::io;
}

}  // namespace

TEST_CASE("an append that fails midway through a batch leaves nothing of the batch", "[faults]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  const auto events = rows(db, "events");
  auto store = faulty(db, Call::append, 2, Category::io);
  CHECK(category_of([&] {
          store.enqueue_batch("alpha", std::vector<std::string>(5, "{}"));
        }) == Category::io);
  CHECK(rows(db, "items") == 0);
  CHECK(rows(db, "events") == events);
  // The store goes on: the next command is whole.
  store.enqueue_batch("alpha", std::vector<std::string>(3, "{}"));
  CHECK(rows(db, "items") == 3);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a commit whose outcome is unknown says so, and a retry does not blindly repeat it",
          "[faults]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  {
    ControlStore setup{db};
    setup.create_project("alpha", "A");
    setup.enqueue("alpha", "{}");
    setup.enqueue("alpha", "{}");
  }
  auto store = faulty(db, Call::commit, 0, Category::commit_unknown);
  CHECK(category_of([&] { store.claim("w1"); }) == Category::commit_unknown);
  // Here it did happen: the caller must look before it acts again.
  ControlStore observer{db, {.read_only = true}};
  CHECK(observer.status_counts().claimed == 1);
  // A second claim takes the other item, never the same one again.
  const auto next = store.claim("w1");
  REQUIRE(next);
  CHECK(next->fence == 1);
  CHECK(observer.status_counts().claimed == 2);
  CHECK(verify_ledger(observer).empty());
}

TEST_CASE("under group commit, a commit whose outcome is unknown is settled from the log: the "
          "claim is handed out once",
          "[faults][combine]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  {
    ControlStore setup{db};
    setup.create_project("alpha", "A");
    setup.enqueue("alpha", "{}");
    setup.enqueue("alpha", "{}");
  }
  auto store = faulty(db, Call::commit, 0, Category::commit_unknown, nullptr, true);
  // The commit happened; the combiner finds its request id in the log and
  // hands out the answer it staged, instead of "unknown".
  const auto claimed = store.claim("w1");
  REQUIRE(claimed);
  CHECK(claimed->fence == 1);
  ControlStore observer{db, {.read_only = true}};
  CHECK(observer.status_counts().claimed == 1);
  CHECK(observer.events(claimed->item_id).size() == 2);  // queued, claimed: once
  CHECK(observer.events(claimed->item_id).back().event.request_id != 0);
  CHECK(verify_ledger(observer).empty());
}

TEST_CASE("a commit refused for want of room wrote nothing", "[faults]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  auto store = faulty(db, Call::commit, 0, Category::full);
  CHECK(category_of([&] { store.enqueue("alpha", "{}"); }) == Category::full);
  CHECK(rows(db, "items") == 0);
  CHECK_NOTHROW(store.enqueue("alpha", "{}"));
  CHECK(rows(db, "items") == 1);
}

TEST_CASE("a rollback that fails leaves the store refusing every later call, with nothing of the "
          "refused command written",
          "[faults]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  std::string first, second;
  Fence fence = 0;
  {
    ControlStore setup{db};
    setup.create_project("alpha", "A");
    first = setup.enqueue("alpha", "{}");
    second = setup.enqueue("alpha", "{}");
    fence = setup.claim("w")->fence;
    setup.claim("w");
  }
  {
    FaultBackend* fault = nullptr;
    auto store = faulty(db, Call::rollback, 0, Category::io, &fault);
    // The first report is appended, the second refused: the transaction is
    // rolled back, and here the rollback fails.
    CHECK_THROWS_AS(store.finish_batch({{first, fence, Outcome::done, ""},
                                        {second, fence + 5, Outcome::done, ""}}),
                    FenceRejected);
    CHECK(fault->faults() == 1);
    // Still inside that transaction: every later call fails, none commits it.
    CHECK_THROWS_AS(store.finish(first, fence, Outcome::done), StorageError);
    CHECK_THROWS_AS(store.enqueue("alpha", "{}"), StorageError);
    ControlStore observer{db, {.read_only = true}};
    CHECK(observer.item(first).status == ItemStatus::claimed);
    CHECK(observer.status_counts().ready == 0);
  }
  // Closing the connection ended its transaction: nothing of it remains.
  ControlStore store{db};
  CHECK(store.item(first).status == ItemStatus::claimed);
  CHECK(verify_ledger(store).empty());
  CHECK_NOTHROW(store.finish(first, fence, Outcome::done));
}

TEST_CASE("a write that cannot begin (busy, unavailable) changes nothing and leaves the store usable",
          "[faults]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  for (auto category : {Category::busy, Category::unavailable}) {
    auto store = faulty(db, Call::begin_write, 0, category);
    CHECK(category_of([&] { store.enqueue("alpha", "{}"); }) == category);
    CHECK(rows(db, "items") == 0);
    CHECK_NOTHROW(store.status_counts());
  }
  CHECK(test::tables_but_retention(db) ==
        std::vector<std::string>{"events", "incident_links", "items", "limits", "log_digest", "project_actors", "projects", "schedules", "sessions", "store_info", "stream_heads", "terminal_locks"});
}
