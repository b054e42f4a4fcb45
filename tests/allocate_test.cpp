// The allocator, the terminal path and incident links: every routing rule,
// skip reason and outcome; the preview and the applied choice agreeing; the
// upsert's canonical key; the legacy import's collapse and fail-closed paths.
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include <sys/wait.h>
#include <unistd.h>

#include <cplane/cplane.hpp>

#include "storage/sqlite/sqlite_backend.hpp"
#include "tests/cli_checks.hpp"
#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::problem_kinds;
using cplane::test::run_cli;
using cplane::test::sql;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::verify_file;
using cplane::test::test_context;

constexpr Micros T0 = 1'700'000'000'000'000;
constexpr Micros kSecond = 1'000'000;



std::string events_count(const std::string& db) {
  return sql_column(db, "SELECT count(*) FROM events").at(0);
}

struct Queue {
  std::string db;
  explicit Queue(const TempDir& dir) : db(test_context().fresh_store(dir, "q.db")) {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    store.create_project("beta", "B", "open", T0);
    store.grant("alpha", "alice", T0);
    store.open_session("s1", {}, T0);
    store.open_session("s2", {}, T0);
  }
};

std::string enqueue(ControlStore& store, const char* project, ControlStore::EnqueueOptions o) {
  if (!o.now) o.now = T0;
  return store.enqueue(project, "{}", o);
}

}  // namespace

TEST_CASE("the allocator routes the terminal path first, then priority, then age",
          "[allocate]") {
  TempDir dir;
  Queue q(dir);
  ControlStore store{q.db};
  const auto old_low = enqueue(store, "alpha", {});
  const auto high = enqueue(store, "beta", {.priority = 5});
  const auto young_low = enqueue(store, "alpha", {});
  const auto higher = enqueue(store, "alpha", {.priority = 9});
  const auto on_path = enqueue(store, "beta", {.priority = -3});
  store.enter_terminal_path(on_path, "approved", T0 + 1);
  std::vector<std::string> order;
  for (int i = 0; i < 5; ++i) {
    const auto a = store.allocate_next("s1", AllocateMode::apply, {"push"}, {}, T0 + 2 + i);
    REQUIRE(a.outcome == AllocateOutcome::assigned);
    CHECK(a.fence == 1);
    CHECK(a.skipped.empty());  // its own are not candidates, not skips
    order.push_back(a.item_id);
  }
  CHECK(order == std::vector<std::string>{on_path, higher, high, old_low, young_low});
  CHECK(store.allocate_next("s1", AllocateMode::apply, {}, {}, T0 + 10).outcome == AllocateOutcome::no_safe_work);
  CHECK(verify_file(q.db).empty());
}

TEST_CASE("a changes_requested item goes back to its author only, and others skip it",
          "[allocate][routing]") {
  TempDir dir;
  Queue q(dir);
  ControlStore store{q.db};
  const auto pr = enqueue(store, "alpha", {.kind = WorkKind::pr, .head = "h", .author = "s2",
                                           .priority = 9});
  const auto task = enqueue(store, "alpha", {});
  store.observe_review(pr, ReviewState::changes_requested, T0 + 1);
  const auto other = store.allocate_next("s1", AllocateMode::apply, {}, {}, T0 + 2);
  CHECK(other.item_id == task);
  REQUIRE(other.skipped.size() == 1);
  CHECK(other.skipped[0] == SkippedCandidate{pr, SkipReason::routed_to_author});
  // Nothing else for s1: routing alone never makes it wait.
  const auto none = store.allocate_next("s1", AllocateMode::preview, {}, {}, T0 + 3);
  CHECK(none.outcome == AllocateOutcome::no_safe_work);
  CHECK(none.until == 0);
  const auto author = store.allocate_next("s2", AllocateMode::apply, {"push"}, {}, T0 + 4);
  CHECK(author.item_id == pr);
  CHECK(author.expected_head == "h");
  // Approved again: routed like any other item.
  const auto pr2 = enqueue(store, "alpha", {.kind = WorkKind::pr, .head = "h", .author = "s2"});
  store.observe_review(pr2, ReviewState::changes_requested, T0 + 5);
  store.observe_review(pr2, ReviewState::approved, T0 + 6);
  CHECK(store.allocate_next("s1", AllocateMode::apply, {}, {}, T0 + 7).item_id == pr2);
}

TEST_CASE("foreign leases are skipped, and with nothing else the answer is wait until the "
          "earliest lapses",
          "[allocate][wait]") {
  TempDir dir;
  Queue q(dir);
  ControlStore store{q.db};
  const auto a = enqueue(store, "alpha", {});
  const auto b = enqueue(store, "alpha", {});
  REQUIRE(store.assign_and_lease("s2", a, {"push"}, Seconds{50}, T0).is_assigned());
  const auto claimed = store.claim("worker", {.lease = Seconds{30}, .now = T0});  // a plain claim
  REQUIRE(claimed);
  REQUIRE(claimed->item_id == b);
  const auto events = events_count(q.db);
  const auto w = store.allocate_next("s1", AllocateMode::apply, {}, {}, T0 + kSecond);
  CHECK(w.outcome == AllocateOutcome::wait);
  CHECK(w.until == T0 + 30 * kSecond);
  CHECK(w.skipped == std::vector<SkippedCandidate>{{a, SkipReason::foreign_lease},
                                                   {b, SkipReason::foreign_lease}});
  CHECK(w.skipped_total == 2);
  CHECK(events_count(q.db) == events);  // a wait writes nothing
  // Once the plain claim's lease lapsed, its item is taken over, fence 2.
  const auto taken = store.allocate_next("s1", AllocateMode::apply, {}, {}, T0 + 30 * kSecond);
  CHECK(taken.outcome == AllocateOutcome::assigned);
  CHECK(taken.item_id == b);
  CHECK(taken.fence == 2);
  CHECK(verify_file(q.db).empty());
}

TEST_CASE("an item a scoped session may not see is never listed and never makes it wait",
          "[allocate][R3]") {
  TempDir dir;
  Queue q(dir);
  ControlStore store{q.db};
  store.open_session("scoped", std::string("alice"), T0);  // alpha only
  const auto hidden = enqueue(store, "beta", {.priority = 9});
  store.enter_terminal_path(hidden, "", T0);
  REQUIRE(store.assign_and_lease("s2", hidden, {"push"}, {}, T0));
  const auto none = store.allocate_next("scoped", AllocateMode::preview, {}, {}, T0 + 1);
  CHECK(none.outcome == AllocateOutcome::no_safe_work);
  CHECK(none.skipped.empty());
  const auto mine = enqueue(store, "alpha", {});
  const auto got = store.allocate_next("scoped", AllocateMode::apply, {}, {}, T0 + 2);
  CHECK(got.item_id == mine);
  CHECK(got.skipped.empty());
}

TEST_CASE("a preview writes nothing and names what apply then takes", "[allocate][preview]") {
  TempDir dir;
  Queue q(dir);
  ControlStore store{q.db};
  const auto held = enqueue(store, "alpha", {.priority = 9});
  const auto routed = enqueue(store, "alpha", {.kind = WorkKind::pr, .head = "x", .author = "s9",
                                               .priority = 8});
  store.observe_review(routed, ReviewState::changes_requested, T0);
  const auto next = enqueue(store, "alpha", {.priority = 1});
  enqueue(store, "alpha", {});
  REQUIRE(store.assign_and_lease("s2", held, {"push"}, {}, T0));
  for (int round = 0; round < 2; ++round) {
    const Micros at = T0 + 10 + round;
    const auto events = events_count(q.db);
    const auto preview = store.allocate_next("s1", AllocateMode::preview, {"push"}, Seconds{60}, at);
    CHECK(events_count(q.db) == events);
    REQUIRE(preview.outcome == AllocateOutcome::preview);
    const auto applied = store.allocate_next("s1", AllocateMode::apply, {"push"}, Seconds{60}, at);
    REQUIRE(applied.outcome == AllocateOutcome::assigned);
    CHECK(applied.item_id == preview.item_id);
    CHECK(applied.fence == preview.fence);
    CHECK(applied.lease_expires_at == preview.lease_expires_at);
    CHECK(applied.skipped == preview.skipped);
    if (round == 0) {
      CHECK(applied.item_id == next);
      CHECK(applied.skipped == std::vector<SkippedCandidate>{
                                   {held, SkipReason::foreign_lease},
                                   {routed, SkipReason::routed_to_author}});
    }
  }
}

TEST_CASE("the skipped list is bounded and the total counts every skip", "[allocate]") {
  TempDir dir;
  Queue q(dir);
  ControlStore store{q.db};
  const std::size_t n = kMaxSkippedListed + 20;
  const auto ids = store.enqueue_batch("alpha", std::vector<std::string>(n, "{}"), {}, T0);
  for (const auto& id : ids) REQUIRE(store.assign_and_lease("s2", id, {"push"}, {}, T0));
  const auto last = enqueue(store, "alpha", {});
  const auto a = store.allocate_next("s1", AllocateMode::preview, {}, {}, T0 + 1);
  CHECK(a.item_id == last);
  CHECK(a.skipped.size() == kMaxSkippedListed);
  CHECK(a.skipped_total == static_cast<std::int64_t>(n));
}

TEST_CASE("the allocator's walk is an index scan in order, with no sort", "[allocate][plan][sqlite]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    for (int i = 0; i < 200; ++i) store.enqueue("alpha", "{}", {.priority = i % 3});
  }
  sql(db, "ANALYZE");
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(handle, ("EXPLAIN QUERY PLAN " + storage::allocation_query()).c_str(),
                             -1, &stmt, nullptr) == SQLITE_OK);
  std::string plan;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    plan += reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3));
    plan += " | ";
  }
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  CAPTURE(plan);
  CHECK(plan.find("USING INDEX items_alloc") != std::string::npos);
  CHECK(plan.find("TEMP B-TREE") == std::string::npos);
}

TEST_CASE("a routing value edited behind the engine's back stops the allocator, never misroutes",
          "[allocate][tamper][sqlite]") {
  for (const char* tamper : {"UPDATE items SET priority = 4294967297 WHERE priority = 1",
                             "UPDATE items SET priority = 'abc' WHERE priority = 1",
                             "UPDATE items SET terminal_since = 0 WHERE priority = 1"}) {
    DYNAMIC_SECTION(tamper) {
      TempDir dir;
      Queue q(dir);
      {
        ControlStore store{q.db};
        enqueue(store, "alpha", {.priority = 1});
        enqueue(store, "alpha", {.priority = 20});
        enqueue(store, "beta", {.priority = 10});
      }
      sql(q.db, tamper);
      ControlStore store{q.db};
      const auto events = events_count(q.db);
      try {
        store.allocate_next("s1", AllocateMode::apply, {}, {}, T0 + 1);
        FAIL("allocated over a tampered row");
      } catch (const StorageError& e) {
        CHECK(e.category() == StorageError::Category::corruption);
      }
      CHECK(events_count(q.db) == events);
      rebuild(store);
      CHECK(store.allocate_next("s1", AllocateMode::preview, {}, {}, T0 + 2).outcome == AllocateOutcome::preview);
    }
  }
}

TEST_CASE("the terminal path: added, listed, removed, dropped when the item ends",
          "[terminal]") {
  TempDir dir;
  Queue q(dir);
  ControlStore store{q.db};
  const auto a = enqueue(store, "alpha", {});
  const auto b = enqueue(store, "alpha", {.kind = WorkKind::pr, .head = "h"});
  CHECK(store.enter_terminal_path(a, "approved", T0 + 1));
  CHECK_FALSE(store.enter_terminal_path(a, "again", T0 + 2));  // on it already
  CHECK(store.enter_terminal_path(b, "", T0 + 3));
  auto path = store.terminal_path();
  REQUIRE(path.size() == 2);
  CHECK(store.item(a).terminal_since == T0 + 1);
  CHECK(store.item(a).terminal_reason == "approved");
  CHECK(store.leave_terminal_path(a, T0 + 4));
  CHECK_FALSE(store.leave_terminal_path(a, T0 + 5));
  CHECK(store.terminal_path() == std::vector<TerminalLockRow>{{b, T0 + 3, ""}});
  store.observe_close(b, CloseReason::merged, T0 + 6);  // dropped when it closes
  CHECK(store.terminal_path().empty());
  CHECK_THROWS_AS(store.enter_terminal_path(b, "", T0 + 7), InvalidArgument);
  CHECK_THROWS_AS(store.enter_terminal_path("no-such-item", "", T0 + 7), NotFound);
  store.enter_terminal_path(a, "", T0 + 8);
  const auto f = store.allocate_next("s1", AllocateMode::apply, {}, {}, T0 + 9);
  store.finish(a, f.fence, Outcome::done, {.now = T0 + 10});  // ... and when it finishes
  CHECK(store.terminal_path().empty());
  CHECK(verify_file(q.db).empty());
}

TEST_CASE("verify names terminal_locks and incident_links edited behind the engine's back",
          "[terminal][incident][verify][sqlite]") {
  struct Case {
    const char* name;
    const char* tamper;
    const char* kind;
  };
  const Case cases[] = {
      {"lock deleted", "DELETE FROM terminal_locks", "terminal_lock_missing"},
      {"lock made up", "INSERT INTO terminal_locks SELECT item_id, 1, 'x' FROM items "
                       "WHERE terminal_since IS NULL LIMIT 1", "terminal_lock_without_event"},
      {"lock reason edited", "UPDATE terminal_locks SET reason = 'forged'", "terminal_lock_disagrees"},
      {"priority edited", "UPDATE items SET priority = 99", "routing_disagrees"},
      {"put on the path by a 0", "UPDATE items SET terminal_since = 0 WHERE terminal_since IS NULL",
       "routing_disagrees"},
      {"priority past 32 bits", "UPDATE items SET priority = 4294967296", "routing_disagrees"},
      {"priority as text", "UPDATE items SET priority = 'abc'", "routing_disagrees"},
      {"link target edited", "UPDATE incident_links SET target = 'elsewhere'",
       "incident_link_disagrees"},
      {"link metadata nulled", "UPDATE incident_links SET event_count = NULL",
       "incident_link_disagrees"},
      {"link deleted", "DELETE FROM incident_links", "incident_link_missing"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      TempDir dir;
      Queue q(dir);
      {
        ControlStore store{q.db};
        const auto a = enqueue(store, "alpha", {.priority = 2});
        enqueue(store, "alpha", {});
        store.enter_terminal_path(a, "approved", T0 + 1);
        store.link_incident({"sentry", "abc"}, a, {.event_count = 3}, T0 + 2);
      }
      REQUIRE(verify_file(q.db).empty());
      sql(q.db, c.tamper);
      CHECK(problem_kinds(verify_file(q.db)).contains(c.kind));
      ControlStore store{q.db};
      rebuild(store);
      CHECK(verify_ledger(store).empty());
    }
  }
}

TEST_CASE("two minimal upserts of one incident make one row, and an upsert keeps what it "
          "does not give",
          "[incident]") {
  TempDir dir;
  Queue q(dir);
  ControlStore store{q.db};
  CHECK(store.link_incident({"sentry", "fp1"}, "acme/api#7", {}, T0));
  CHECK_FALSE(store.link_incident({"sentry", "fp1"}, "acme/api#7", {}, T0 + 1));
  CHECK(sql_column(q.db, "SELECT count(*) FROM incident_links").at(0) == "1");
  CHECK(sql_column(q.db, "SELECT org || '|' || repo || '|' || environment FROM incident_links")
            .at(0) == "||");
  CHECK(sql_column(q.db, "SELECT count(*) FROM incident_links WHERE org IS NULL OR repo IS NULL "
                         "OR environment IS NULL")
            .at(0) == "0");
  CHECK(store.link_incident({"sentry", "fp1"}, "acme/api#7",
                            {.status = "unresolved", .event_count = 4,
                             .linked_prs = std::vector<std::string>{"acme/api#9"}},
                            T0 + 2));
  CHECK(store.link_incident({"sentry", "fp1"}, "acme/api#8", {.event_count = 5}, T0 + 3));
  const auto row = store.incident({"sentry", "fp1"});
  CHECK(row.target == "acme/api#8");
  CHECK(row.status == std::optional<std::string>("unresolved"));  // kept
  CHECK(row.event_count == std::optional<std::int64_t>(5));
  CHECK(row.linked_prs == std::optional<std::string>("acme/api#9"));
  CHECK(row.permalink == std::nullopt);
  CHECK(row.linked_at == T0);
  CHECK(row.updated_at == T0 + 3);
  // A scope makes another incident; the database refuses a NULL scope.
  CHECK(store.link_incident({"sentry", "fp1", "acme"}, "acme/api#7", {}, T0 + 4));
  CHECK(store.incidents().size() == 2);
  CHECK(store.incidents(std::string("acme/api#8")).size() == 1);
  CHECK_THROWS(sql(q.db, "INSERT INTO incident_links (provider, fingerprint, org, repo, "
                         "environment, target, incident_id, linked_at, updated_at, last_seq) "
                         "VALUES ('x', 'y', NULL, '', '', 't', 'x/y///', 1, 1, 1)"));
  CHECK_THROWS_AS(store.incident({"sentry", "nope"}), NotFound);
  CHECK_THROWS_AS(store.link_incident({"", "fp"}, "t"), InvalidArgument);
  CHECK_THROWS_AS(store.link_incident({"sentry", "fp"}, "t", {.event_count = -1}),
                  InvalidArgument);
  // Incidents are never work: nothing to allocate or claim.
  CHECK(store.allocate_next("s1", AllocateMode::preview, {}, {}, T0 + 5).outcome == AllocateOutcome::no_safe_work);
  CHECK_FALSE(store.claim("w", {.now = T0 + 5}));
  CHECK(verify_file(q.db).empty());
}

namespace {

// A legacy control plane's database, with its nullable scope columns.
std::string legacy_db(const TempDir& dir, const std::string& rows) {
  const auto path = dir.file("legacy.db");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  const std::string statements =
      "CREATE TABLE incident_links (provider TEXT NOT NULL, fingerprint TEXT NOT NULL, org TEXT, "
      "repo TEXT, environment TEXT, target TEXT NOT NULL, status TEXT, event_count INTEGER, "
      "permalink TEXT, first_seen TEXT, last_seen TEXT, linked_prs TEXT);" +
      rows;
  char* error = nullptr;
  const int rc = sqlite3_exec(db, statements.c_str(), nullptr, nullptr, &error);
  INFO((error != nullptr ? error : ""));
  sqlite3_free(error);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
  return path;
}

const char* const kInsert =
    "INSERT INTO incident_links (provider, fingerprint, org, repo, environment, target, status, "
    "event_count, permalink, first_seen, last_seen, linked_prs) VALUES ";

}  // namespace

TEST_CASE("migrate-incidents collapses NULL-versus-empty scopes whose links agree",
          "[incident][migrate]") {
  TempDir dir;
  const auto legacy = legacy_db(
      dir, std::string(kInsert) +
               "('sentry', 'a', NULL, 'api', NULL, 'acme/api#1', 'open', 3, 'http://x', "
               "'2026-01-01', '2026-01-02', 'acme/api#5'),"
               "('sentry', 'a', '', 'api', '', 'acme/api#1', 'open', 3, 'http://x', "
               "'2026-01-01', '2026-01-02', 'acme/api#5'),"
               "('sentry', 'b', NULL, NULL, NULL, 'acme/api#2', NULL, NULL, NULL, NULL, NULL, "
               "NULL),"
               "('glitchtip', 'b', 'acme', NULL, 'prod', 'acme/web#3', '', 0, '', '', '', '');");
  const auto db = dir.file("target.db");
  const auto dry = run_cli({"migrate-incidents", "--from", legacy, "--dry-run", "--json", "--db", db});
  CHECK_EXIT(dry, 0);
  CHECK_THAT(dry.out, Catch::Contains(R"("rows":4,"links":3,"imported":3,"unchanged":0,"collapsed":1,"conflicts":[])"));
  CHECK_FALSE(std::filesystem::exists(db));  // a dry run creates nothing
  const auto real = run_cli({"migrate-incidents", "--from", legacy, "--json", "--db", db});
  CHECK_EXIT(real, 0);
  CHECK_THAT(real.out, Catch::Contains(R"("imported":3)"));
  ControlStore store{db};
  const auto a = store.incident({"sentry", "a", "", "api", ""});
  CHECK(a.status == std::optional<std::string>("open"));
  CHECK(a.event_count == std::optional<std::int64_t>(3));
  // Empty metadata stays empty, NULL stays absent.
  const auto g = store.incident({"glitchtip", "b", "acme", "", "prod"});
  CHECK(g.status == std::optional<std::string>(""));
  CHECK(g.event_count == std::optional<std::int64_t>(0));
  CHECK(store.incident({"sentry", "b"}).status == std::nullopt);
  CHECK(verify_ledger(store).empty());
  // Run again: nothing new.
  const auto again = run_cli({"migrate-incidents", "--from", legacy, "--json", "--db", db});
  CHECK_EXIT(again, 0);
  CHECK_THAT(again.out, Catch::Contains(R"("imported":0,"unchanged":3)"));
}

TEST_CASE("migrate-incidents fails closed on any conflict, naming every group, and leaves the "
          "target unchanged",
          "[incident][migrate][sqlite]") {
  TempDir dir;
  const auto legacy = legacy_db(
      dir, std::string(kInsert) +
               "('sentry', 'a', NULL, NULL, NULL, 'acme/api#1', 'open', 3, NULL, NULL, NULL, "
               "NULL),"
               "('sentry', 'a', '', NULL, '', 'acme/api#2', 'open', 4, NULL, NULL, NULL, NULL),"
               "('sentry', 'c', NULL, NULL, NULL, 'acme/api#3', NULL, NULL, NULL, NULL, NULL, "
               "NULL),"
               "('sentry', 'c', '', '', '', 'acme/api#3', '', NULL, NULL, NULL, NULL, NULL),"
               "('sentry', 'ok', NULL, NULL, NULL, 'acme/api#4', NULL, NULL, NULL, NULL, NULL, "
               "NULL);");
  SECTION("into a database that does not exist yet") {
    const auto db = dir.file("new.db");
    const auto r = run_cli({"migrate-incidents", "--from", legacy, "--db", db});
    CHECK_EXIT(r, 6);
    CHECK_THAT(r.out, Catch::Contains("conflict: sentry a") &&
                          Catch::Contains("target: 'acme/api#1' | 'acme/api#2'") &&
                          Catch::Contains("event_count: 3 | 4") &&
                          Catch::Contains("conflict: sentry c") &&
                          Catch::Contains("status: NULL | ''"));
    CHECK_FALSE(std::filesystem::exists(db));
  }
  SECTION("into a database that has links") {
    const auto db = dir.file("old.db");
    {
      ControlStore store{db};
      store.link_incident({"sentry", "ok"}, "acme/api#99", {}, T0);
    }
    const auto before = sql_column(db, "SELECT count(*) FROM events");
    const auto r = run_cli({"migrate-incidents", "--from", legacy, "--db", db, "--json"});
    CHECK_EXIT(r, 6);
    CHECK_THAT(r.out, Catch::Contains(R"("fingerprint":"ok")") &&
                          Catch::Contains(R"("target":["store: 'acme/api#99'","'acme/api#4'"])"));
    CHECK(sql_column(db, "SELECT count(*) FROM events") == before);
    CHECK(sql_column(db, "SELECT count(*) FROM incident_links").at(0) == "1");
  }
  SECTION("values that differ only past 80 bytes, or only in how they would be shown") {
    const std::string long_url = "https://acme.sentry.io/organizations/acme/issues/"
                                 "4505123456789012/?project=4505&query=is%3Aunresolved";
    REQUIRE(long_url.size() > 80);
    const auto subtle = dir.file("subtle.db");
    std::filesystem::rename(legacy, test_context().fresh_store(dir, "first.db"));
    legacy_db(dir, std::string(kInsert) + "('sentry', 'p', NULL, NULL, NULL, 't', NULL, NULL, '" +
                       long_url + "111', NULL, NULL, NULL), ('sentry', 'p', '', '', '', 't', NULL, "
                       "NULL, '" + long_url + "999', NULL, NULL, NULL), ('sentry', 'q', NULL, "
                       "NULL, NULL, 't', NULL, NULL, CAST(x'ff' AS TEXT), NULL, NULL, NULL), "
                       "('sentry', 'q', '', '', '', 't', NULL, NULL, '\\xff', NULL, NULL, NULL);");
    std::filesystem::rename(dir.file("legacy.db"), subtle);
    const auto db = test_context().fresh_store(dir, "t.db");
    const auto r = run_cli({"migrate-incidents", "--from", subtle, "--db", db});
    CHECK_EXIT(r, 6);
    CHECK_THAT(r.out, Catch::Contains("111'") && Catch::Contains("999'") &&
                          Catch::Contains("conflict: sentry q"));
    CHECK_FALSE(std::filesystem::exists(db));
  }
  SECTION("linked pull requests no link could hold are refused") {
    std::filesystem::rename(legacy, test_context().fresh_store(dir, "first.db"));
    legacy_db(dir, std::string(kInsert) + "('sentry', 'n', NULL, NULL, NULL, 't', NULL, NULL, "
                                          "NULL, NULL, NULL, 'o/r#2,,o/r#3');");
    const auto db = test_context().fresh_store(dir, "t.db");
    const auto r = run_cli({"migrate-incidents", "--from", dir.file("legacy.db"), "--db", db});
    CHECK_EXIT(r, 2);
    CHECK_FALSE(std::filesystem::exists(db));
  }
  SECTION("a legacy row no link could hold is refused, naming it") {
    const auto bad = dir.file("bad.db");
    std::filesystem::rename(legacy, test_context().fresh_store(dir, "first.db"));
    legacy_db(dir, std::string(kInsert) + "('sentry', 'n', NULL, NULL, NULL, 't', NULL, -4, NULL, "
                                          "NULL, NULL, NULL);");
    std::filesystem::rename(dir.file("legacy.db"), bad);
    const auto db = test_context().fresh_store(dir, "t.db");
    const auto r = run_cli({"migrate-incidents", "--from", bad, "--db", db});
    CHECK_EXIT(r, 2);
    CHECK_THAT(r.err, Catch::Contains("legacy row 1"));
    CHECK_FALSE(std::filesystem::exists(db));
  }
  SECTION("a file that is not a legacy database") {
    const auto db = test_context().fresh_store(dir, "t.db");
    std::ofstream(dir.file("junk.db")) << "not sqlite";
    CHECK_EXIT(run_cli({"migrate-incidents", "--from", dir.file("junk.db"), "--db", db}), 1);
    CHECK_EXIT(run_cli({"migrate-incidents", "--from", dir.file("none.db"), "--db", db}), 1);
    CHECK_EXIT(run_cli({"migrate-incidents", "--db", db}), 2);
    CHECK_FALSE(std::filesystem::exists(db));
  }
}

TEST_CASE("cplane allocate, terminal and incident keep their exit codes and JSON",
          "[cli][allocate]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--db", db});
    return run_cli(args);
  };
  REQUIRE_EXIT(cli({"project", "create", "p", "P"}), 0);
  REQUIRE_EXIT(cli({"session", "open", "s1"}), 0);
  REQUIRE_EXIT(cli({"session", "open", "s2"}), 0);
  CHECK_EXIT(cli({"allocate", "s1"}), 3);
  CHECK_EXIT(cli({"allocate", "ghost"}), 7);
  CHECK_EXIT(cli({"enqueue", "p", "{}", "--priority", "x"}), 2);
  const auto low = cli({"enqueue", "p", "{}"});
  const auto high = cli({"enqueue", "p", "{}", "--priority", "7"});
  const std::string low_id = low.out.substr(0, low.out.find('\n'));
  const std::string high_id = high.out.substr(0, high.out.find('\n'));
  const auto preview = cli({"allocate", "s1", "--json"});
  CHECK_EXIT(preview, 0);
  CHECK_THAT(preview.out, Catch::StartsWith(R"({"outcome":"preview","item_id":")" + high_id +
                                            R"(","fence":1,"lease_expires_at":)") &&
                              Catch::Contains(R"("until":null,"skipped":[])"));
  const auto applied = cli({"allocate", "s1", "--apply", "--actions", "push", "--json"});
  CHECK_EXIT(applied, 0);
  CHECK_THAT(applied.out, Catch::StartsWith(R"({"outcome":"assigned","item_id":")" + high_id));
  CHECK_EXIT(cli({"gate", "s1", high_id, "--fence", "1", "--action", "push"}), 0);
  REQUIRE_EXIT(cli({"allocate", "s2", "--apply"}), 0);  // takes low
  const auto wait = cli({"allocate", "s1", "--json"});
  CHECK_EXIT(wait, 9);
  CHECK_THAT(wait.out, Catch::Contains(R"("outcome":"wait","item_id":null)") &&
                           Catch::Contains(R"("skipped":[{"item_id":")" + low_id +
                                           R"(","reason":"foreign_lease"}])"));
  CHECK_THAT(cli({"terminal", "add", low_id, "--reason", "approved", "--json"}).out,
             Catch::Contains(R"("changed":true)"));
  CHECK_THAT(cli({"terminal", "list", "--json"}).out,
             Catch::Contains(R"([{"item_id":")" + low_id + R"(","since":)") &&
                 Catch::Contains(R"("reason":"approved"}])"));
  CHECK_EXIT(cli({"terminal", "add", "no-such-item"}), 7);
  CHECK_EXIT(cli({"terminal", "remove", low_id}), 0);
  const auto link = cli({"incident", "link", "--provider", "sentry", "--fingerprint", "f",
                         "--target", "acme/api#1", "--event-count", "2", "--pr", "acme/api#3",
                         "--json"});
  CHECK_EXIT(link, 0);
  CHECK_THAT(link.out, Catch::Contains(R"("org":"","repo":"","environment":"","target":"acme/api#1")") &&
                           Catch::Contains(R"("event_count":2)") &&
                           Catch::Contains(R"("linked_prs":["acme/api#3"])") &&
                           Catch::Contains(R"("changed":true)"));
  CHECK_EXIT(cli({"incident", "link", "--provider", "sentry", "--target", "x"}), 2);
  CHECK_EXIT(cli({"incident", "show", "--provider", "sentry", "--fingerprint", "f"}), 0);
  CHECK_EXIT(cli({"incident", "show", "--provider", "sentry", "--fingerprint", "nope"}), 7);
  CHECK_THAT(cli({"incident", "list", "--target", "acme/api#1", "--json"}).out,
             Catch::StartsWith(R"([{"provider":"sentry")"));
  CHECK_EXIT(cli({"verify"}), 0);
}

// The console's actions (docs/console.md): an operator releasing a
// worker's claim, or taking an item off the terminal path, is named in the
// event, where the holder (or nobody) was before; the fence still decides.
TEST_CASE("an operator's release and leaving of the terminal path name the operator", "[allocate]") {
  TempDir dir;
  Queue q(dir);
  ControlStore store{q.db};
  const auto a = enqueue(store, "alpha", {});
  const auto c = store.claim("worker-1", {.now = T0 + 1});
  REQUIRE(c);
  ControlStore::ReleaseOptions by_alice;
  by_alice.now = T0 + 2;
  by_alice.by = "alice";
  CHECK_THROWS_AS(store.release(a, c->fence + 1, "", by_alice), FenceRejected);
  store.release(a, c->fence, "stuck", by_alice);
  CHECK(store.events(a).back().event.actor == "alice");
  CHECK(store.item(a).status == ItemStatus::ready);
  // Without `by`, the holder releases in its own name, as before.
  const auto again = store.claim("worker-2", {.now = T0 + 3});
  store.release(a, again->fence, "", {.now = T0 + 4});
  CHECK(store.events(a).back().event.actor == "worker-2");
  store.enter_terminal_path(a, "approved", T0 + 5);
  CHECK(store.leave_terminal_path(a, ControlStore::LifecycleOptions{.actor = "alice", .now = T0 + 6}));
  CHECK(store.events(a).back().type() == "terminal_path_left");
  CHECK(store.events(a).back().event.actor == "alice");
  CHECK_FALSE(store.leave_terminal_path(a, ControlStore::LifecycleOptions{.actor = "alice", .now = T0 + 7}));
  CHECK_THROWS_AS(store.leave_terminal_path(a, ControlStore::LifecycleOptions{.actor = "bad\nname"}),
                  InvalidArgument);
  CHECK(verify_ledger(store).empty());
}

// On PostgreSQL the allocator's walk reads an earlier snapshot than the
// lock on its choice sees (READ COMMITTED): a choice another session took
// meanwhile is a race lost and the command runs again, never an internal
// error. Real processes, one session each, racing over one queue.
TEST_CASE("sessions allocating at once in separate processes each get distinct items, "
          "and none sees an error",
          "[allocate][race]") {
  constexpr int kSessions = 4;
  constexpr int kItems = 120;
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "race.db");
  std::vector<std::string> ids;
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    ids = store.enqueue_batch("alpha", std::vector<std::string>(kItems, "{}"));
    for (int s = 0; s < kSessions; ++s) store.open_session(fmt::format("s{}", s));
  }
  std::vector<pid_t> pids;
  for (int s = 0; s < kSessions; ++s) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 0;
      try {
        ControlStore store{db};
        const std::string session = fmt::format("s{}", s);
        for (int rounds = 0; rounds < 100 * kItems; ++rounds) {
          const auto a = store.allocate_next(session, AllocateMode::apply, {}, Seconds{60});
          if (a.outcome == AllocateOutcome::no_safe_work) break;
          if (a.outcome != AllocateOutcome::assigned) continue;  // wait: others hold the rest
          store.finish(a.item_id, a.fence, Outcome::done);
        }
      } catch (const std::exception& e) {
        std::cerr << "session s" << s << ": " << e.what() << '\n';
        code = 1;
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  for (const pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  ControlStore store{db};
  CHECK(store.status_counts("alpha").done == kItems);
  std::int64_t assigned = 0;
  for (const auto& id : ids) {
    const auto events = store.events(id);
    assigned += std::count_if(events.begin(), events.end(), [](const StoredEvent& e) {
      return std::holds_alternative<ItemAssigned>(e.event.body);
    });
  }
  CHECK(assigned == kItems);  // each item given to exactly one session, once
  CHECK(verify_ledger(store).empty());
}
