// The contract of the ground laid for what comes next: every event names
// its stream, refusals carry a reason a program can branch on (and the CLI
// prints them as JSON), scope for finish is the store's, grant is the name.
#include <catch2/catch.hpp>

#include <cplane/cplane.hpp>

#include "tests/cli_checks.hpp"
#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::CliResult;
using cplane::test::run_cli;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;

CliResult cli(const std::string& db, std::vector<std::string> args) {
  args.insert(args.begin(), {"--db", db});
  return run_cli(args);
}

// The one JSON error object a --json command writes to stderr.
std::string json_error(const std::string& kind, const std::string& reason) {
  return "{\"error\":{\"kind\":\"" + kind + "\",\"reason\":\"" + reason + "\",";
}

}  // namespace

TEST_CASE("every event names its stream, in its columns and its body", "[contract][streams]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  std::string id;
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    store.grant("alpha", "bob");
    id = store.enqueue("alpha", "{}");
    store.claim("w");
    for (const auto& e : store.events(id)) CHECK(stream_of(e.event) == StreamRef{StreamKind::item, id});
  }
  CHECK(sql_column(db, "SELECT stream_kind || ':' || stream_id FROM events ORDER BY seq") ==
        std::vector<std::string>{"project:alpha", "project:alpha", "item:" + id, "item:" + id});
  CHECK(test::tables_but_retention(db) ==
        std::vector<std::string>{"events", "incident_links", "items", "limits", "log_digest", "project_actors", "projects", "schedules", "sessions", "store_info", "stream_heads", "terminal_locks"});
}

TEST_CASE("with --json, each refusal is one JSON object on stderr with its kind and reason",
          "[contract][cli]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  REQUIRE_EXIT(cli(db, {"project", "create", "alpha", "A"}), 0);
  REQUIRE_EXIT(cli(db, {"project", "create", "secret", "S"}), 0);
  REQUIRE_EXIT(cli(db, {"project", "grant", "alpha", "alice"}), 0);
  const std::string id = [&] {
    auto r = cli(db, {"enqueue", "alpha", "{}"});
    REQUIRE_EXIT(r, 0);
    return r.out.substr(0, r.out.find('\n'));
  }();
  REQUIRE_EXIT(cli(db, {"claim", "--owner", "w"}), 0);
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string kind, reason;
  };
  const std::vector<Case> cases = {
      {{"finish", id, "--fence", "7", "--status", "done"}, 4, "fence_rejected", "stale_fence"},
      {{"finish", "no-such", "--fence", "1", "--status", "done"}, 4, "fence_rejected",
       "unknown_item"},
      {{"item", "no-such"}, 7, "not_found", "unknown_item"},
      {{"enqueue", "ghost", "{}"}, 7, "not_found", "unknown_project"},
      {{"enqueue", "secret", "{}", "--actor", "alice"}, 5, "scope_denied", "out_of_scope"},
      {{"enqueue", "alpha", "{bad"}, 2, "invalid_argument", "invalid_input"},
      {{"claim"}, 2, "usage", "usage"},
      {{"claim", "--owner", "w"}, 3, "nothing_to_claim", "empty"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back("--json");
    INFO("cplane " << args[0] << " " << (args.size() > 1 ? args[1] : ""));
    auto r = cli(db, args);
    CHECK_EXIT(r, c.exit_code);
    CHECK(r.err.rfind(json_error(c.kind, c.reason), 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    if (c.exit_code != 3) CHECK(r.out.empty());
  }
  auto missing = run_cli({"--json", "--db", dir.file("missing.db"), "verify"});
  CHECK_EXIT(missing, 1);
  CHECK(missing.err.rfind(json_error("storage_error", "unavailable"), 0) == 0);
  // Without --json, the same refusal is one sentence.
  auto plain = cli(db, {"finish", id, "--fence", "7", "--status", "done"});
  CHECK(plain.err.rfind("cplane: fence rejected: ", 0) == 0);
}

TEST_CASE("finish takes the actor and enforces scope in its own transaction", "[contract]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A");
  store.create_project("secret", "S");
  store.grant("alpha", "alice");
  const auto mine = store.enqueue("alpha", "{}", {}, 1'000);
  const auto theirs = store.enqueue("secret", "{}", {}, 2'000);
  const auto c1 = store.claim("w", {.now = 3'000});
  const auto c2 = store.claim("w", {.now = 3'000});
  REQUIRE(c1);
  REQUIRE(c2);
  CHECK_THROWS_AS(store.finish(theirs, 1, Outcome::done, {.actor = "alice"}), ScopeDenied);
  CHECK_THROWS_AS(store.finish("no-such", 1, Outcome::done, {.actor = "alice"}), ScopeDenied);
  CHECK_THROWS_AS(store.finish_batch({{mine, 1, Outcome::done, ""}, {theirs, 1, Outcome::done, ""}},
                                     std::string("alice")),
                  ScopeDenied);
  CHECK(store.item(mine).status == ItemStatus::claimed);
  CHECK_NOTHROW(store.finish(mine, 1, Outcome::done, {.detail = "ok", .actor = "alice"}));
  CHECK(store.item(mine).detail == "ok");
  CHECK(store.item(theirs).status == ItemStatus::claimed);
}

TEST_CASE("grant is the name, and project assign still works for one release", "[contract][cli]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  REQUIRE_EXIT(cli(db, {"project", "create", "alpha", "A"}), 0);
  REQUIRE_EXIT(cli(db, {"project", "create", "beta", "B"}), 0);
  CHECK_EXIT(cli(db, {"project", "grant", "alpha", "alice"}), 0);
  CHECK_EXIT(cli(db, {"project", "assign", "beta", "alice"}), 0);
  auto r = cli(db, {"projects", "--actor", "alice"});
  CHECK(r.out == "alpha\nbeta\n");
  // The stored event keeps its readable old name.
  CHECK(sql_column(db, "SELECT DISTINCT type FROM events WHERE stream_kind = 'project' AND "
                       "type != 'project_created'") == std::vector<std::string>{"actor_assigned"});
}

TEST_CASE("stores open by path or URL through one factory", "[contract][sqlite]") {
  TempDir dir;
  const std::string path = test_context().fresh_store(dir, "c.db");
  { ControlStore{"sqlite:" + path}.create_project("alpha", "A"); }
  CHECK(ControlStore{path}.visible_projects() == std::vector<std::string>{"alpha"});
  CHECK_THROWS_AS(ControlStore{"sqlite:"}, InvalidArgument);
  { ControlStore{"SQLITE:" + path}; }  // the scheme in any case
#if CPLANE_WITH_POSTGRES
  try {
    ControlStore pg{"postgresql://localhost/cplane"};
    FAIL("opened a PostgreSQL URL with no server there");
  } catch (const StorageError& e) {
    CHECK(e.category() == StorageError::Category::unavailable);
  }
#else
  // A build without PostgreSQL says so by name.
  try {
    ControlStore pg{"postgresql://localhost/cplane"};
    FAIL("opened a PostgreSQL URL without PostgreSQL support");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()).find("CPLANE_WITH_POSTGRES=OFF") != std::string::npos);
  }
#endif
}

TEST_CASE("a fence check is a verdict value, and require() turns a denial into FenceRejected",
          "[contract]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A");
  const auto id = store.enqueue("alpha", "{}");
  CHECK(store.check_fence(id, 1).reason() == FenceRejected::Reason::not_claimed);
  const auto c = store.claim("w");
  REQUIRE(c);
  CHECK(store.check_fence(id, c->fence).is_allowed());
  const auto stale = store.check_fence(id, c->fence + 1);
  REQUIRE_FALSE(stale);
  CHECK(stale.reason() == FenceRejected::Reason::stale_fence);
  CHECK(stale.message().find("not the current fence") != std::string::npos);
  CHECK(store.check_fence("no-such", 1).reason() == FenceRejected::Reason::unknown_item);
  try {
    require(stale);
    FAIL("require() let a denial through");
  } catch (const FenceRejected& e) {
    CHECK(e.reason() == FenceRejected::Reason::stale_fence);
  }
  CHECK_NOTHROW(require(store.check_fence(id, c->fence)));
  CHECK_THROWS_AS(store.check_fence(id, c->fence).reason(), InvalidArgument);
  CHECK(store.events(id).size() == 2);  // checks write nothing
}

TEST_CASE("a store that holds another program's tables of cplane's names is refused, untouched",
          "[contract]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  test_context().exec(db, "CREATE TABLE log_digest (x integer); INSERT INTO log_digest VALUES (7)");
  try {
    ControlStore store{db};
    FAIL("opened a store that holds a foreign log_digest");
  } catch (const StorageError& e) {
    CHECK(e.category() == StorageError::Category::corruption);
  }
  CHECK(test_context().tables(db) == std::vector<std::string>{"log_digest"});
  CHECK(test_context().column(db, "SELECT x FROM log_digest") == std::vector<std::string>{"7"});
}
