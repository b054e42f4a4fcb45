// Flow control through the CLI, on every backend: the flags, exit statuses
// and JSON fields docs/cli.md and docs/flow.md promise for limit set|remove,
// limits, enqueue --concurrency-key, project set --weight and why.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/cli_checks.hpp"
#include "tests/support.hpp"

using cplane::test::CliResult;
using cplane::test::run_cli;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;

namespace {

constexpr long long T0 = 1'800'000'000'000'000;

using cplane::test::cli_at;

CliResult cli(const std::string& db, std::vector<std::string> args, long long now) {
  return cli_at(db, std::move(args), now);
}
std::string line(const std::string& out) { return cplane::test::first_line(out); }
bool has(const std::string& text, const std::string& part) {
  return cplane::test::has_text(text, part);
}
std::string events(const std::string& db) { return cplane::test::event_count_of(db); }

}  // namespace

TEST_CASE("cplane: limits on concurrency keys and why: as the CLI contract says",
          "[cli][flow]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  REQUIRE_EXIT(cli(db, {"project", "create", "p", "P"}, T0), 0);
  const auto set = cli(db, {"limit", "set", "repo", "--concurrency", "1", "--json"}, T0);
  REQUIRE_EXIT(set, 0);
  CHECK(has(set.out, R"("key":"repo")"));
  CHECK(has(set.out, R"("concurrency":1)"));
  CHECK(has(set.out, R"("changed":true)"));
  const auto a = line(cli(db, {"enqueue", "p", "{}", "--concurrency-key", "repo"}, T0 + 1).out);
  const auto b = line(cli(db, {"enqueue", "p", "{}", "--concurrency-key", "repo"}, T0 + 2).out);
  CHECK(has(cli(db, {"item", b, "--json"}, T0 + 3).out, R"("concurrency_key":"repo")"));
  const auto claimed = cli(db, {"claim", "--owner", "w1", "--lease", "60", "--json"}, T0 + 10);
  REQUIRE_EXIT(claimed, 0);
  CHECK(has(claimed.out, "\"item_id\":\"" + a + "\""));
  CHECK_EXIT(cli(db, {"claim", "--owner", "w2"}, T0 + 11), 3);  // the key is full
  const auto limits = cli(db, {"limits", "--json"}, T0 + 12);
  REQUIRE_EXIT(limits, 0);
  CHECK(has(limits.out, R"("live":1)"));
  CHECK(has(limits.out, "\"holders\":[{\"item_id\":\"" + a + "\""));
  const auto why = cli(db, {"why", b, "--json"}, T0 + 12);
  REQUIRE_EXIT(why, 0);
  CHECK(has(why.out, R"("claimable":false)"));
  CHECK(has(why.out, R"("reason":"key_full")"));
  CHECK(has(why.out, R"("key":"repo")"));
  CHECK(has(why.out, R"("limit":1)"));
  const auto text = cli(db, {"why", b}, T0 + 12);
  REQUIRE_EXIT(text, 0);
  CHECK(has(text.out, "key_full: "));
  CHECK_EXIT(cli(db, {"why", "no-such-item"}, T0 + 12), 7);

  // Bad input: exit 2, nothing written.
  const auto before = events(db);
  CHECK_EXIT(cli(db, {"limit", "set", "repo", "--concurrency", "0"}, T0 + 13), 2);
  CHECK_EXIT(cli(db, {"limit", "set", "repo", "--concurrency", "-1"}, T0 + 13), 2);
  CHECK_EXIT(cli(db, {"limit", "set", "api", "--rate", "10/fortnight"}, T0 + 13), 2);
  CHECK_EXIT(cli(db, {"limit", "set", "api", "--burst", "3"}, T0 + 13), 2);
  CHECK_EXIT(cli(db, {"limit", "set", "api"}, T0 + 13), 2);
  CHECK_EXIT(cli(db, {"limit", "set", std::string(257, 'k'), "--concurrency", "1"}, T0 + 13), 2);
  CHECK_EXIT(cli(db, {"limit", "set", "a\tb", "--concurrency", "1"}, T0 + 13), 2);
  CHECK_EXIT(cli(db, {"enqueue", "p", "{}", "--concurrency-key", std::string(300, 'x')}, T0 + 13),
             2);
  CHECK_EXIT(cli(db, {"project", "set", "p", "--weight", "0"}, T0 + 13), 2);
  CHECK_EXIT(cli(db, {"limit", "remove", "never-limited"}, T0 + 13), 7);
  CHECK(events(db) == before);

  // A rate, then the limit removed: the second item runs.
  REQUIRE_EXIT(cli(db, {"limit", "set", "api", "--rate", "10/s", "--burst", "2"}, T0 + 14), 0);
  const auto removed = cli(db, {"limit", "remove", "repo", "--json"}, T0 + 15);
  REQUIRE_EXIT(removed, 0);
  CHECK(has(removed.out, R"("changed":true)"));
  const auto next = cli(db, {"claim", "--owner", "w2", "--json"}, T0 + 16);
  REQUIRE_EXIT(next, 0);
  CHECK(has(next.out, "\"item_id\":\"" + b + "\""));
  CHECK_EXIT(cli(db, {"verify"}, T0 + 17), 0);
}

TEST_CASE("cplane: project set --weight shares claims: as the CLI contract says",
          "[cli][flow]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  REQUIRE_EXIT(cli(db, {"project", "create", "big", "B"}, T0), 0);
  REQUIRE_EXIT(cli(db, {"project", "create", "small", "S"}, T0), 0);
  const auto w = cli(db, {"project", "set", "big", "--weight", "2", "--json"}, T0);
  REQUIRE_EXIT(w, 0);
  CHECK(has(w.out, R"("weight":2)"));
  CHECK(has(cli(db, {"project", "show", "big", "--json"}, T0).out, R"("weight":2)"));
  for (int i = 0; i < 6; ++i) cli(db, {"enqueue", "big", "{}"}, T0 + 1 + i);
  for (int i = 0; i < 3; ++i) cli(db, {"enqueue", "small", "{}"}, T0 + 10 + i);
  const auto batch = cli(db, {"claim", "--owner", "w", "--max", "6", "--json"}, T0 + 20);
  REQUIRE_EXIT(batch, 0);
  std::size_t small = 0;
  for (std::size_t at = 0; (at = batch.out.find(R"("project_id":"small")", at)) != std::string::npos;
       ++at) {
    ++small;
  }
  CHECK(small == 2);  // weight 2 to 1: four of big's, two of small's
  CHECK_EXIT(cli(db, {"verify"}, T0 + 21), 0);
}
