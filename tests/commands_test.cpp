// The store's commands against a real SQLite file.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <thread>

#include <sqlite3.h>

#include <cplane/cplane.hpp>

#include "storage/sqlite/sqlite_backend.hpp"
#include "commands/testing.hpp"
#include "commands/command.hpp"
#include "storage/backend_wrapper.hpp"
#include "storage/postgres/postgres_backend.hpp"
#include "tests/support.hpp"

using namespace cplane;
using cplane::test::sql;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;

namespace {

constexpr Micros kT0 = 1'800'000'000'000'000;
constexpr Micros kSecond = 1'000'000;

std::size_t count(const std::string& db, const std::string& table) {
  return std::stoul(sql_column(db, "SELECT count(*) FROM " + table).at(0));
}

std::vector<std::string> types(const std::vector<StoredEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.emplace_back(e.type());
  return out;
}

// EXPLAIN QUERY PLAN's detail column, rows joined by " | ". Parameters are
// left unbound (NULL), which does not change the plan.
std::string query_plan(const std::string& db, const std::string& query) {
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(handle, ("EXPLAIN QUERY PLAN " + query).c_str(), -1, &stmt,
                             nullptr) == SQLITE_OK);
  std::string plan;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    if (!plan.empty()) plan += " | ";
    plan += reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return plan;
}

}  // namespace

TEST_CASE("the library round trip: enqueue, claim, finish, verify", "[commands]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "control.db"), {.lease = std::chrono::seconds{900}}};
  store.create_project("alpha", "Project Alpha", "open");
  auto id = store.enqueue("alpha", R"({"task": "summarise the report"})");
  auto claim = store.claim("worker-1");
  REQUIRE(claim.has_value());
  CHECK(claim->item_id == id);
  CHECK(claim->project_id == "alpha");
  CHECK(claim->payload == R"({"task": "summarise the report"})");
  CHECK(claim->fence == 1);
  CHECK(claim->attempts == 1);
  store.finish(claim->item_id, claim->fence, Outcome::done);
  CHECK(types(store.events(id)) == std::vector<std::string>{"queued", "claimed", "done"});
  CHECK(verify_ledger(store).empty());
  CHECK(store.item(id).status == ItemStatus::done);
  CHECK_FALSE(store.claim("worker-1").has_value());
}

TEST_CASE("claims hand out items oldest first, each to one worker", "[commands][claim]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A");
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(store.enqueue("alpha", "{}", {}, kT0 + i));
  for (int i = 0; i < 5; ++i) {
    auto c = store.claim("w" + std::to_string(i), {.now = kT0 + 10});
    REQUIRE(c);
    CHECK(c->item_id == ids[i]);
  }
  CHECK_FALSE(store.claim("w9", {.now = kT0 + 10}).has_value());
}

TEST_CASE("a lapsed lease is reclaimed with a higher fence and the old fence is refused",
          "[commands][fence]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A");
  auto id = store.enqueue("alpha", "{}", {}, kT0);
  auto first = store.claim("w1", {.lease = Seconds{10}, .now = kT0});
  REQUIRE(first);
  CHECK(first->lease_expires_at == kT0 + 10 * kSecond);
  // Still leased: nobody else gets it.
  CHECK_FALSE(store.claim("w2", {.now = kT0 + 9 * kSecond}).has_value());
  auto second = store.claim("w2", {.now = kT0 + 10 * kSecond});
  REQUIRE(second);
  CHECK(second->item_id == id);
  CHECK(second->fence == 2);
  CHECK(second->attempts == 2);
  CHECK_THROWS_AS(store.finish(id, first->fence, Outcome::done), FenceRejected);
  store.finish(id, second->fence, Outcome::failed, "gave up");
  const Item row = store.item(id);
  CHECK(row.status == ItemStatus::failed);
  CHECK(row.owner == "w2");
  CHECK(row.detail == "gave up");
  CHECK(types(store.events(id)) ==
        std::vector<std::string>{"queued", "claimed", "claimed", "failed"});
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a claim takes the item available earliest: a lapsed lease ranks by when it lapsed",
          "[commands][claim]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A");
  auto old_id = store.enqueue("alpha", "{}", {}, kT0);
  auto new_id = store.enqueue("alpha", "{}", {}, kT0 + 1);
  REQUIRE(store.claim("w1", {.lease = Seconds{1}, .now = kT0 + 2})->item_id == old_id);
  // old_id lapsed at kT0 + 1 s + 2 us; new_id has waited since kT0 + 1 us.
  auto next = store.claim("w2", {.now = kT0 + 5 * kSecond});
  REQUIRE(next);
  CHECK(next->item_id == new_id);
  CHECK(store.claim("w3", {.now = kT0 + 5 * kSecond})->item_id == old_id);
  // A lapse before an item was queued ranks first, as the lapsed item became
  // available first.
  auto held = store.enqueue("alpha", "{}", {}, kT0 + 6 * kSecond);
  REQUIRE(store.claim("w4", {.lease = Seconds{1}, .now = kT0 + 6 * kSecond + 1})->item_id == held);
  auto later = store.enqueue("alpha", "{}", {}, kT0 + 8 * kSecond);
  CHECK(store.claim("w5", {.now = kT0 + 9 * kSecond})->item_id == held);
  CHECK(store.claim("w6", {.now = kT0 + 9 * kSecond})->item_id == later);
}

TEST_CASE("finish refuses every fence that is not current and changes nothing",
          "[commands][fence]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  auto id = store.enqueue("alpha", "{}");
  // Right after enqueue the item is not claimed, even with fence 0.
  CHECK_THROWS_AS(store.finish(id, 0, Outcome::done), FenceRejected);
  auto c = store.claim("w1");
  REQUIRE(c);
  CHECK_THROWS_AS(store.finish(id, c->fence + 1, Outcome::done), FenceRejected);
  CHECK_THROWS_AS(store.finish(id, 0, Outcome::done), FenceRejected);
  CHECK_THROWS_AS(store.finish("no-such-item", 1, Outcome::done), FenceRejected);
  const auto events_before = count(db, "events");
  store.finish(id, c->fence, Outcome::done);
  CHECK(count(db, "events") == events_before + 1);
  CHECK_THROWS_AS(store.finish(id, c->fence, Outcome::done), FenceRejected);
  CHECK_THROWS_AS(store.finish(id, c->fence, Outcome::failed), FenceRejected);
  CHECK(count(db, "events") == events_before + 1);
  CHECK(store.item(id).status == ItemStatus::done);
}

TEST_CASE("a lease must be a positive, finite number of seconds", "[commands][claim]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.enqueue("alpha", "{}");
  const auto events_before = count(db, "events");
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity(), 1e300}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(store.claim("w1", {.lease = Seconds{bad}}), InvalidArgument);
  }
  CHECK(count(db, "events") == events_before);
  CHECK_THROWS_AS(ControlStore(db, {.lease = Seconds{0}}), InvalidArgument);
  CHECK_THROWS_AS(store.claim("", {}), InvalidArgument);  // one claim, default options
  CHECK(store.claim("w1", {.lease = Seconds{0.5}}).has_value());
}

TEST_CASE("a malformed payload is refused and nothing is written", "[commands]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  for (const char* bad : {"", "   ", "{", "{\"a\":}", "nope", "{} {}", "[1,2", "\"unterminated"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(store.enqueue("alpha", bad), InvalidArgument);
  }
  CHECK(count(db, "items") == 0);
  CHECK(count(db, "events") == 1);  // project_created only
  for (const char* good : {"{}", "[]", "42", "\"text\"", "null", R"({"a":[1,{"b":null}]})"}) {
    CHECK_NOTHROW(store.enqueue("alpha", good));
  }
}

// "\ud800" was stored, and item --json then printed JSON that strict parsers (jq) refuse.
TEST_CASE("a payload with a lone surrogate escape is refused, a surrogate pair is not",
          "[commands]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  for (const char* lone : {R"("\ud800")", R"("\uDBFF")", R"("\udc00")", R"("\uDFFF x")",
                           R"("\ud800x")", R"("\ud800\u0041")", R"("\ud800\ud800")",
                           R"("\ude00\ud83d")", R"("\ud800\n")", R"({"\ud800": 1})",
                           R"(["ok", "\ud83d\ude00\udc00"])", R"("\ud800)"}) {
    CAPTURE(lone);
    CHECK_THROWS_AS(require_payload(lone), InvalidArgument);
    CHECK_THROWS_AS(store.enqueue("alpha", lone), InvalidArgument);
  }
  CHECK(count(db, "items") == 0);
  for (const char* pair : {R"("\ud83d\ude00")", R"("\uD83D\uDE00")", R"("\ud800\udc00")",
                           R"("\udbff\udfff")", R"({"\ud83d\ude00": "\ud7ff\ue000"})"}) {
    CAPTURE(pair);
    CHECK_NOTHROW(require_payload(pair));
    CHECK_NOTHROW(store.enqueue("alpha", pair));
  }
  CHECK(count(db, "items") == 5);
}

TEST_CASE("enqueue into an unknown project is NotFound for the control plane",
          "[commands][scope]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  CHECK_THROWS_AS(store.enqueue("ghost", "{}"), NotFound);
  CHECK_THROWS_AS(store.grant("ghost", "bob"), NotFound);
}

TEST_CASE("a scoped actor gets the same denial for a missing project and another's",
          "[commands][scope]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.create_project("secret", "S");
  store.grant("alpha", "bob");
  std::string missing, foreign;
  try {
    store.enqueue("ghost", "{}", "bob");
  } catch (const ScopeDenied& e) {
    missing = e.what();
  }
  try {
    store.enqueue("secret", "{}", "bob");
  } catch (const ScopeDenied& e) {
    foreign = e.what();
  }
  CHECK_FALSE(missing.empty());
  CHECK(missing == foreign);
  CHECK(missing.find("ghost") == std::string::npos);
  CHECK(missing.find("secret") == std::string::npos);
  CHECK(count(db, "items") == 0);
  CHECK_NOTHROW(store.enqueue("alpha", "{}", "bob"));
}

TEST_CASE("a scoped actor sees and claims only its projects", "[commands][scope]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A");
  store.create_project("beta", "B");
  store.create_project("gamma", "G");
  store.grant("beta", "bob");
  store.grant("alpha", "bob");
  store.grant("alpha", "bob");  // idempotent
  CHECK(store.visible_projects() == std::vector<std::string>{"alpha", "beta", "gamma"});
  CHECK(store.visible_projects("bob") == std::vector<std::string>{"alpha", "beta"});
  CHECK(store.visible_projects("nobody").empty());

  auto gamma_item = store.enqueue("gamma", "{}", {}, kT0);
  auto beta_item = store.enqueue("beta", "{}", {}, kT0 + 1);
  auto alpha_item = store.enqueue("alpha", "{}", {}, kT0 + 2);
  CHECK_FALSE(store.claim("w1", {.actor = std::string("nobody")}).has_value());
  CHECK(store.claim("w1", {.actor = std::string("bob")})->item_id == beta_item);
  CHECK(store.claim("w1", {.actor = std::string("bob")})->item_id == alpha_item);
  CHECK_FALSE(store.claim("w1", {.actor = std::string("bob")}).has_value());
  CHECK(store.claim("w1")->item_id == gamma_item);
}

TEST_CASE("reads by a scoped actor are denied outside its scope, never answered empty",
          "[commands][scope]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.create_project("secret", "S");
  store.grant("alpha", "bob");
  auto mine = store.enqueue("alpha", "{}");
  auto theirs = store.enqueue("secret", "{}");
  CHECK(store.item(mine, "bob").item_id == mine);
  CHECK(store.events(mine, "bob").size() == 1);
  CHECK_THROWS_AS(store.item(theirs, "bob"), ScopeDenied);
  CHECK_THROWS_AS(store.events(theirs, "bob"), ScopeDenied);
  CHECK_THROWS_AS(store.item("no-such-item", "bob"), ScopeDenied);
  CHECK_THROWS_AS(store.events("no-such-item", "bob"), ScopeDenied);
  CHECK_THROWS_AS(store.item("no-such-item"), NotFound);
  CHECK_THROWS_AS(store.events("no-such-item"), NotFound);

  // Events whose item row is gone: denied to the actor, still readable by the
  // control plane.
  sql(db, "DELETE FROM items WHERE item_id = '" + mine + "'");
  CHECK_THROWS_AS(store.events(mine, "bob"), ScopeDenied);
  CHECK(types(store.events(mine)) == std::vector<std::string>{"queued"});
}

TEST_CASE("events record who acted, when, and under which fence", "[commands]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A");
  store.grant("alpha", "bob");
  auto id = store.enqueue("alpha", R"({"x":1})", "bob", kT0);
  auto c = store.claim("w1", {.lease = Seconds{30}, .now = kT0 + 5});
  store.finish(id, c->fence, Outcome::done, "all good", kT0 + 9);
  auto events = store.events(id);
  REQUIRE(events.size() == 3);
  CHECK(events[0].seq < events[1].seq);
  CHECK(events[1].seq < events[2].seq);
  CHECK(events[0].event.actor == "bob");
  CHECK(events[0].event.at == kT0);
  CHECK(std::get<ItemQueued>(events[0].event.body).payload == R"({"x":1})");
  CHECK(std::get<ItemClaimed>(events[1].event.body) ==
        ItemClaimed{"w1", 1, kT0 + 5 + 30 * kSecond, 1});
  CHECK(events[2].event.at == kT0 + 9);
  CHECK(std::get<ItemFinished>(events[2].event.body) ==
        ItemFinished{Outcome::done, 1, "all good"});
}

TEST_CASE("a duplicate project is refused", "[commands]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A");
  CHECK_THROWS_AS(store.create_project("alpha", "again"), InvalidArgument);
  CHECK_THROWS_AS(store.create_project("", "empty"), InvalidArgument);
  CHECK(store.visible_projects() == std::vector<std::string>{"alpha"});
}

TEST_CASE("the claim queries are index seeks with no scan of items and no sort",
          "[commands][claim][plan][sqlite]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    for (int i = 0; i < 200; ++i) store.enqueue("alpha", "{}");
  }
  sql(db, "ANALYZE");
  for (const auto& query : storage::claim_queries()) {
    CAPTURE(query);
    const std::string plan = query_plan(db, query);
    CAPTURE(plan);
    CHECK(plan.find("USING INDEX") != std::string::npos);
    CHECK(plan.find("SCAN") == std::string::npos);
    CHECK(plan.find("TEMP B-TREE") == std::string::npos);
  }
}

namespace {

// Wraps a backend and records the durability each write transaction asked
// for, in order: faults and observations come from wrapping a layer.
class RecordingBackend final : public storage::BackendWrapper {
 public:
  explicit RecordingBackend(std::unique_ptr<storage::Backend> inner,
                            std::vector<storage::Sync>& log)
      : BackendWrapper(std::move(inner)), log_(log) {}
  void begin_write(storage::Sync sync) override {
    log_.push_back(sync);
    BackendWrapper::begin_write(sync);
  }

 private:
  std::vector<storage::Sync>& log_;
};

std::vector<storage::Sync> syncs_for(Durability durability, const std::string& db) {
  std::vector<storage::Sync> log;
  ControlStore store = testing::store_over(
      std::make_unique<RecordingBackend>(storage::open_sqlite(db), log), {.durability = durability});
  store.create_project("alpha", "A");
  auto id = store.enqueue("alpha", "{}");
  auto c = store.claim("w1");
  store.finish(id, c->fence, Outcome::done);
  return log;
}

}  // namespace

TEST_CASE("a claim is durable before the worker learns its fence", "[commands][durability][sqlite]") {
  using storage::Sync;
  TempDir dir;
  // create_project, enqueue, claim, finish
  CHECK(syncs_for(Durability::fenced, test_context().fresh_store(dir, "a.db")) ==
        std::vector<Sync>{Sync::full, Sync::full, Sync::full, Sync::normal});
  CHECK(syncs_for(Durability::full, test_context().fresh_store(dir, "b.db")) ==
        std::vector<Sync>{Sync::full, Sync::full, Sync::full, Sync::full});
  CHECK(syncs_for(Durability::normal, test_context().fresh_store(dir, "c.db")) ==
        std::vector<Sync>{Sync::normal, Sync::normal, Sync::normal, Sync::normal});
  CHECK(StoreOptions{}.durability == Durability::fenced);
  CHECK(parse_durability("normal") == Durability::normal);
  CHECK_THROWS_AS(parse_durability("sometimes"), InvalidArgument);
}

TEST_CASE("worker processes sharing one file never claim an item twice", "[commands][claim]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  constexpr int kItems = 300;
  constexpr int kWorkers = 4;
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    for (int i = 0; i < kItems; ++i) store.enqueue("alpha", "{}");
  }
  std::vector<pid_t> pids;
  for (int w = 0; w < kWorkers; ++w) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 0;
      try {
        ControlStore store{db, {.durability = Durability::normal}};
        while (auto c = store.claim("worker-" + std::to_string(w))) {
          store.finish(c->item_id, c->fence, Outcome::done);
        }
      } catch (...) {
        code = 1;
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  CHECK(sql_column(db, "SELECT count(*) FROM events WHERE type = 'claimed'").at(0) ==
        std::to_string(kItems));
  CHECK(sql_column(db, "SELECT count(DISTINCT item_id) FROM events WHERE type = 'done'").at(0) ==
        std::to_string(kItems));
  CHECK(sql_column(db, "SELECT count(*) FROM items WHERE status <> 'done'").at(0) == "0");
  ControlStore store{db};
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a batch claim takes the oldest items in one transaction", "[commands][batch][sqlite]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  std::vector<storage::Sync> syncs;
  ControlStore store = testing::store_over(std::make_unique<RecordingBackend>(storage::open_sqlite(db), syncs));
  store.create_project("alpha", "A");
  auto ids = store.enqueue_batch("alpha", {"{}", "[1]", "2", "\"3\"", "null"}, {}, kT0);
  REQUIRE(ids.size() == 5);
  syncs.clear();
  auto batch = store.claim_batch("w1", 3, {.now = kT0 + 1});
  CHECK(syncs.size() == 1);
  REQUIRE(batch.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(batch[i].item_id == ids[i]);
    CHECK(batch[i].fence == 1);
  }
  CHECK(batch[1].payload == "[1]");
  CHECK(store.claim("w2", 10, {.now = kT0 + 1}).size() == 2);  // claim(owner, max_items)
  CHECK(store.claim_batch("w3", 10, {.now = kT0 + 1}).empty());
  CHECK_THROWS_AS(store.claim_batch("w3", 0), InvalidArgument);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a batch enqueue with one bad payload writes nothing", "[commands][batch]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  CHECK_THROWS_AS(store.enqueue_batch("alpha", {"{}", "{oops", "{}"}), InvalidArgument);
  CHECK_THROWS_AS(store.enqueue_batch("ghost", {"{}"}), NotFound);
  CHECK(count(db, "items") == 0);
}

TEST_CASE("a batch finish is all or nothing", "[commands][batch][fence]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.enqueue_batch("alpha", {"{}", "{}", "{}"});
  auto batch = store.claim_batch("w1", 3);
  REQUIRE(batch.size() == 3);
  const auto events_before = count(db, "events");
  std::vector<ControlStore::Report> reports;
  for (const auto& c : batch) reports.push_back({c.item_id, c.fence, Outcome::done, ""});
  reports[1].fence = 7;  // stale
  CHECK_THROWS_AS(store.finish_batch(reports), FenceRejected);
  CHECK(count(db, "events") == events_before);
  CHECK(store.item(batch[0].item_id).status == ItemStatus::claimed);
  reports[1].fence = batch[1].fence;
  reports[2].outcome = Outcome::failed;
  store.finish_batch(reports);
  CHECK(store.item(batch[1].item_id).status == ItemStatus::done);
  CHECK(store.item(batch[2].item_id).status == ItemStatus::failed);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("finish_and_claim reports and takes the next item in one transaction",
          "[commands][batch][sqlite]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  std::vector<storage::Sync> syncs;
  ControlStore store = testing::store_over(std::make_unique<RecordingBackend>(storage::open_sqlite(db), syncs));
  store.create_project("alpha", "A");
  auto ids = store.enqueue_batch("alpha", {"{}", "{}"}, {}, kT0);
  auto first = store.claim("w1", {.now = kT0});
  REQUIRE(first);
  syncs.clear();
  auto second = store.finish_and_claim(first->item_id, first->fence, Outcome::done, "w1");
  CHECK(syncs == std::vector<storage::Sync>{storage::Sync::full});  // it hands out a fence
  REQUIRE(second);
  CHECK(second->item_id == ids[1]);
  CHECK(store.item(ids[0]).status == ItemStatus::done);
  // A refused finish claims nothing.
  CHECK_THROWS_AS(store.finish_and_claim(ids[0], 1, Outcome::done, "w1"), FenceRejected);
  CHECK(store.item(ids[1]).fence == 1);
  CHECK_FALSE(store.finish_and_claim(second->item_id, second->fence, Outcome::done, "w1"));
  CHECK(store.item(ids[1]).status == ItemStatus::done);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("status counts tell how many items are in each state", "[commands]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A");
  store.create_project("beta", "B");
  store.enqueue_batch("alpha", {"{}", "{}", "{}", "{}"});
  store.enqueue("beta", "{}");
  // Oldest first across projects (not the round-robin): three of alpha's.
  auto a = store.claim("w1", {.fair = false});
  auto b = store.claim("w1", {.fair = false});
  store.claim("w1", {.fair = false});
  store.finish(a->item_id, a->fence, Outcome::done);
  store.finish(b->item_id, b->fence, Outcome::failed);
  auto alpha = store.status_counts("alpha");
  CHECK(alpha.ready == 1);
  CHECK(alpha.claimed == 1);
  CHECK(alpha.done == 1);
  CHECK(alpha.failed == 1);
  auto all = store.status_counts();
  CHECK(all.ready == 2);
  CHECK(store.status_counts("ghost").ready == 0);
}

TEST_CASE("an explicit clock must not be negative nor overflow a lease", "[commands]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  CHECK_THROWS_AS(store.enqueue("alpha", "{}", {}, -5), InvalidArgument);
  store.enqueue("alpha", "{}", {}, kT0);
  CHECK_THROWS_AS(store.claim("w1", {.now = std::numeric_limits<Micros>::max()}), InvalidArgument);
  CHECK_THROWS_AS(store.claim("w1", {.now = -1}), InvalidArgument);
  CHECK(count(db, "events") == 2);
  CHECK(store.claim("w1", {.now = kT0}).has_value());
  // The epoch itself is refused: 0 means "none" in rows (a session's
  // closed_at, a terminal path's since), so a command at 0 would be lost.
  CHECK_THROWS_AS(store.enqueue("alpha", "{}", {}, 0), InvalidArgument);
  CHECK_THROWS_AS(store.close_session("s", 0), InvalidArgument);
  store.enqueue("alpha", "{}", {}, 1);
  auto early = store.claim("w2", {.lease = Seconds{1}, .now = 1});
  REQUIRE(early);
  CHECK(early->lease_expires_at == 1'000'001);
}

TEST_CASE("a payload over 1 MiB is refused before anything is written", "[commands]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  const std::string big = "\"" + std::string((1 << 20) + 1, 'x') + "\"";
  CHECK_THROWS_AS(store.enqueue("alpha", big), InvalidArgument);
  CHECK(count(db, "items") == 0);
  // Just under the limit is stored and reads back.
  const std::string fits = "\"" + std::string((1 << 20) - 2, 'y') + "\"";
  auto id = store.enqueue("alpha", fits);
  CHECK(std::get<ItemQueued>(store.events(id).at(0).event.body).payload == fits);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a scoped finish_and_claim cannot report another project's item", "[commands][scope]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.create_project("secret", "S");
  store.grant("alpha", "bob");
  auto theirs = store.enqueue("secret", "{}");
  auto c = store.claim("w-secret");
  REQUIRE(c);
  REQUIRE(c->item_id == theirs);
  const auto events_before = count(db, "events");
  CHECK_THROWS_AS(store.finish_and_claim(theirs, c->fence, Outcome::done, "bob",
                                         {.actor = std::string("bob")}),
                  ScopeDenied);
  CHECK_THROWS_AS(store.finish_and_claim("no-such-item", 1, Outcome::done, "bob",
                                         {.actor = std::string("bob")}),
                  ScopeDenied);
  CHECK(count(db, "events") == events_before);
  CHECK(store.item(theirs).status == ItemStatus::claimed);
}

TEST_CASE("a store opened before fork refuses to work in the child", "[commands]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A");
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 2;
    try {
      store.enqueue("alpha", "{}");
      code = 1;  // it worked: wrong
    } catch (const StorageError& e) {
      code = e.category() == StorageError::Category::unavailable ? 0 : 3;
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The parent's store is untouched and still works.
  CHECK_NOTHROW(store.enqueue("alpha", "{}"));
}

TEST_CASE("an enqueue with a key already used in the project returns the first item and appends "
          "nothing",
          "[commands][key]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.create_project("beta", "B");
  const auto first = store.enqueue("alpha", R"({"n":1})", ControlStore::EnqueueOptions{.key = "job-42"});
  const auto events_before = sql_column(db, "SELECT count(*) FROM events");
  CHECK(store.enqueue("alpha", R"({"n":2})", ControlStore::EnqueueOptions{.key = "job-42"}) == first);  // payload not compared
  CHECK(sql_column(db, "SELECT count(*) FROM events") == events_before);
  // Another project, or no key: a new item.
  const auto other = store.enqueue("beta", R"({"n":1})", ControlStore::EnqueueOptions{.key = "job-42"});
  CHECK(other != first);
  CHECK(store.enqueue("alpha", R"({"n":1})") != first);
  CHECK(store.item(first).payload == R"({"n":1})");
  CHECK_THROWS_AS(store.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.key = std::string(300, 'k')}), InvalidArgument);
  CHECK(verify_ledger(store).empty());
  // The key is part of the row verify checks against the log.
  sql(db, "UPDATE items SET idem_key = 'job-43' WHERE item_id = '" + first + "'");
  auto problems = verify_ledger(store);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == ProblemKind::key_disagrees);
}

TEST_CASE("racing processes that enqueue with one key make one item", "[commands][key]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  std::vector<pid_t> children;
  for (int w = 0; w < 6; ++w) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        ControlStore store{db};
        for (int i = 0; i < 20; ++i) store.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.key = "k" + std::to_string(i)});
      } catch (...) {
        code = 1;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  CHECK(sql_column(db, "SELECT count(*) FROM items") == std::vector<std::string>{"20"});
  CHECK(sql_column(db, "SELECT count(*) FROM events WHERE type = 'queued'") ==
        std::vector<std::string>{"20"});
  ControlStore store{db};
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("claim with a wait wakes for an item enqueued by another process, and for a lapsed lease",
          "[commands][wait]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  // Nothing comes: nullopt once the wait is over.
  CHECK_FALSE(store.claim("w1", ClaimOptions{.wait = Seconds{0.2}}));
  // An item enqueued by another process while the claim waits is taken.
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    try {
      ControlStore{db}.enqueue("alpha", R"({"late":true})");
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto claimed = store.claim("w1", ClaimOptions{.wait = Seconds{30}});
  const auto waited = std::chrono::steady_clock::now() - start;
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(claimed);
  CHECK(claimed->payload == R"({"late":true})");
  CHECK(waited < std::chrono::seconds(20));  // woken, not timed out
  // A lease that lapses while another claim waits: taken with a higher fence.
  const auto reclaimed = store.claim("w2", ClaimOptions{.wait = Seconds{30}});
  CHECK_FALSE(reclaimed);  // nothing else there, and w1's lease runs 900 s
  store.release(claimed->item_id, claimed->fence, "again");
  const auto held = store.claim("w1", ClaimOptions{.lease = Seconds{0.3}});
  REQUIRE(held);
  const auto next = store.claim("w2", ClaimOptions{.wait = Seconds{30}});
  REQUIRE(next);
  CHECK(next->item_id == held->item_id);
  CHECK(next->fence > held->fence);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a writer stopped while it holds an item is waited for only up to the lock timeout, "
          "then busy, and nothing is written",
          "[commands][lock]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db, {.lock_timeout = std::chrono::milliseconds(300)}};
  store.create_project("alpha", "A");
  store.enqueue("alpha", "{}");
  const auto claimed = store.claim("w");
  REQUIRE(claimed);
  const auto events = sql_column(db, "SELECT count(*) FROM events");
  // A writer in the middle of a transaction that read the item (on SQLite
  // it holds the write lock; on PostgreSQL the item's row lock).
  ControlStore holder{db};
  auto& backend = testing::backend(holder);
  backend.begin_write(storage::Sync::normal);
  backend.find_item(claimed->item_id);
  try {
    store.finish(claimed->item_id, claimed->fence, Outcome::done);
    FAIL("finished under another writer's lock");
  } catch (const StorageError& e) {
    CHECK(e.category() == StorageError::Category::busy);
  }
  backend.rollback();
  CHECK(sql_column(db, "SELECT count(*) FROM events") == events);
  store.finish(claimed->item_id, claimed->fence, Outcome::done);  // once it lets go
  CHECK(verify_ledger(store).empty());
}

namespace {

// The reason an InvalidArgument from `f` carries; fails the test if `f`
// throws nothing, or something else.
template <class F>
std::optional<InvalidArgument::Reason> invalid_reason(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.reason();
  }
  return std::nullopt;
}

}  // namespace

// A program branches on reason(), not on the sentence: each refusal names
// which of the five cases it is.
TEST_CASE("an invalid argument says why: invalid input, already exists, conflict, read only, "
          "misuse",
          "[commands][errors]") {
  using Reason = InvalidArgument::Reason;
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  const auto id = store.enqueue("alpha", "{}");
  store.open_session("s1");
  store.close_session("s1");
  const auto claimed = store.claim("w");
  REQUIRE(claimed);

  CHECK(invalid_reason([&] { store.enqueue("alpha", "{bad"); }) == Reason::invalid_input);
  CHECK(invalid_reason([&] { store.enqueue_batch("alpha", {"{}", "{bad"}); }) ==
        Reason::invalid_input);
  CHECK(invalid_reason([&] { store.create_project("alpha", "again"); }) == Reason::already_exists);
  CHECK(invalid_reason([&] { store.open_session("s1"); }) == Reason::already_exists);
  CHECK(invalid_reason([&] {
          store.finish_batch({{id, claimed->fence, Outcome::done, ""},
                              {id, claimed->fence, Outcome::done, ""}});
        }) == Reason::conflict);
  CHECK(invalid_reason([&] { store.observe_review(id, ReviewState::approved); }) ==
        Reason::conflict);
  CHECK(invalid_reason([&] { (void)FenceVerdict::allowed().reason(); }) == Reason::misuse);
  {
    StoreOptions read;
    read.read_only = true;
    ControlStore reader{db, read};
    CHECK(invalid_reason([&] { reader.create_project("beta", "B"); }) == Reason::read_only);
  }
  ControlStore moved_to = std::move(store);
  CHECK(invalid_reason([&] { store.create_project("gamma", "G"); }) == Reason::misuse);
  // The backend's own numbering (migrate prints it).
  CHECK(moved_to.schema_version() == (test_context().backend_name() == "postgres"
                                          ? storage::kPostgresSchemaVersion
                                          : storage::kSqliteSchemaVersion));
  CHECK(verify_ledger(moved_to).empty());
}

// Group commit hands a refusal from the process that ran the command to
// the one that asked for it: the reason goes with it.
TEST_CASE("an invalid argument keeps its reason as a value across processes", "[commands][errors]") {
  for (const auto reason :
       {InvalidArgument::Reason::invalid_input, InvalidArgument::Reason::already_exists,
        InvalidArgument::Reason::conflict, InvalidArgument::Reason::read_only,
        InvalidArgument::Reason::misuse}) {
    INFO(to_string(reason));
    detail::ErrorValue value;
    try {
      throw InvalidArgument(reason, "refused");
    } catch (...) {
      value = detail::capture_error();
    }
    const auto decoded = detail::decode_answer(detail::encode_answer({std::monostate{}, value}));
    REQUIRE(decoded.error);
    try {
      detail::throw_error(*decoded.error);
    } catch (const InvalidArgument& e) {
      CHECK(e.reason() == reason);
      CHECK(std::string(e.what()) == "refused");
    }
  }
}

// Each (SQLSTATE, what cplane raises): the server's internal error is its
// bug (or ours), never the caller's input and never damaged data.
#if CPLANE_WITH_POSTGRES  // the PostgreSQL engine is not built without it
TEST_CASE("a PostgreSQL SQLSTATE maps to the error that tells the caller what to do",
          "[commands][errors]") {
  enum class Raised { unavailable, conflict, busy, full, corruption, internal, read_only, io };
  const auto raised = [](const std::string& state) {
    try {
      storage::throw_for_sqlstate(state, "failed", "postgresql://u:secret@h/db");
    } catch (const storage::Conflict&) {
      return Raised::conflict;
    } catch (const StorageError& e) {
      switch (e.category()) {
        case StorageError::Category::unavailable: return Raised::unavailable;
        case StorageError::Category::busy: return Raised::busy;
        case StorageError::Category::full: return Raised::full;
        case StorageError::Category::corruption: return Raised::corruption;
        default: return Raised::io;
      }
    } catch (const InternalError&) {
      return Raised::internal;
    } catch (const InvalidArgument& e) {
      CHECK(e.reason() == InvalidArgument::Reason::read_only);
      CHECK(std::string(e.what()).find("secret") == std::string::npos);
      return Raised::read_only;
    }
    FAIL("nothing thrown");
    return Raised::io;
  };
  const std::vector<std::pair<std::string, Raised>> cases = {
      {"08006", Raised::unavailable}, {"57P01", Raised::unavailable},
      {"40001", Raised::conflict},    {"40P01", Raised::conflict},
      {"55P03", Raised::busy},        {"57014", Raised::busy},
      {"53100", Raised::full},        {"XX000", Raised::internal},
      {"XX999", Raised::internal},    {"XX001", Raised::corruption},
      {"XX002", Raised::corruption},  {"25006", Raised::read_only},
      {"42P01", Raised::io},          {"", Raised::io},
  };
  for (const auto& [state, expected] : cases) {
    INFO("SQLSTATE " << state);
    CHECK(raised(state) == expected);
  }
}
#endif  // CPLANE_WITH_POSTGRES
