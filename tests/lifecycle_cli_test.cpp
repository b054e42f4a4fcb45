// The job lifecycle through the CLI, on every backend: the flags, exit
// statuses and JSON fields docs/cli.md promises for project set|pause|
// resume|show, enqueue --max-attempts/--backoff/--run-at/--delay, finish
// --no-retry, retry, reschedule and cancel.
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

TEST_CASE("cplane: retries with backoff: the dead end and redrive: as the CLI contract says",
          "[cli][lifecycle]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  REQUIRE_EXIT(cli(db, {"project", "create", "p", "P", "--max-attempts", "2", "--backoff",
                        "fixed:10s"},
                   T0),
               0);
  const auto show = cli(db, {"project", "show", "p", "--json"}, T0);
  REQUIRE_EXIT(show, 0);
  CHECK(has(show.out, R"("max_attempts":2)"));
  CHECK(has(show.out, R"("backoff":"fixed:10s")"));
  CHECK(has(show.out, R"("paused":false)"));
  const auto id = line(cli(db, {"enqueue", "p", "{}"}, T0).out);
  REQUIRE_EXIT(cli(db, {"claim", "--owner", "w1"}, T0 + 1), 0);
  REQUIRE_EXIT(cli(db, {"finish", id, "--fence", "1", "--status", "failed", "--detail", "x"},
                   T0 + 2),
               0);
  const auto item = cli(db, {"item", id, "--json"}, T0 + 3);
  CHECK(has(item.out, R"("status":"scheduled")"));
  CHECK(has(item.out, "\"run_at\":" + std::to_string(T0 + 2 + 10'000'000)));
  // Not claimable before its retry_at (exit 3), then under fence 2.
  CHECK_EXIT(cli(db, {"claim", "--owner", "w2"}, T0 + 3), 3);
  // The failed attempt's late report: exit 4, stale_fence.
  const auto late = cli(db, {"finish", id, "--fence", "1", "--status", "done", "--json"}, T0 + 4);
  CHECK_EXIT(late, 4);
  CHECK(has(late.err, R"("reason":"stale_fence")"));
  const auto second = cli(db, {"claim", "--owner", "w2", "--json"}, T0 + 2 + 10'000'000);
  REQUIRE_EXIT(second, 0);
  CHECK(has(second.out, R"("fence":2)"));
  CHECK(has(second.out, R"("attempts":2)"));
  REQUIRE_EXIT(cli(db, {"finish", id, "--fence", "2", "--status", "failed"}, T0 + 20'000'000), 0);
  CHECK(has(cli(db, {"item", id, "--json"}, T0).out, R"("status":"failed")"));
  // The dead end: counted, listed, redriven in bulk.
  CHECK(has(cli(db, {"stats", "--json"}, T0).out, R"("failed":1)"));
  const auto before = events(db);
  const auto dry = cli(db, {"retry", "--project", "p", "--status", "failed", "--dry-run",
                            "--json"},
                       T0 + 21'000'000);
  REQUIRE_EXIT(dry, 0);
  CHECK(has(dry.out, R"("count":1)"));
  CHECK(has(dry.out, R"("dry_run":true)"));
  CHECK(has(dry.out, id));
  CHECK(events(db) == before);
  const auto redrive = cli(db, {"retry", id, "--attempts", "1", "--actor", "alice", "--json"},
                           T0 + 22'000'000);
  REQUIRE_EXIT(redrive, 0);
  CHECK(has(redrive.out, R"("status":"ready")"));
  const auto log = cli(db, {"events", id, "--json"}, T0);
  CHECK(has(log.out, R"("type":"attempt_failed")"));
  CHECK(has(log.out, R"("type":"retried","actor":"alice")"));
  const auto third = cli(db, {"claim", "--owner", "w3", "--json"}, T0 + 23'000'000);
  REQUIRE_EXIT(third, 0);
  CHECK(has(third.out, R"("fence":3)"));
  REQUIRE_EXIT(cli(db, {"finish", id, "--fence", "3", "--status", "done"}, T0 + 24'000'000), 0);
  // A done item cannot be retried: exit 2, nothing written.
  const auto done_events = events(db);
  const auto refused = cli(db, {"retry", id}, T0 + 25'000'000);
  CHECK_EXIT(refused, 2);
  CHECK(has(refused.err, "only a failed or cancelled item can be retried"));
  CHECK(events(db) == done_events);
  CHECK_EXIT(cli(db, {"verify"}, T0), 0);
}

TEST_CASE("cplane: finish --no-retry: cancel and its refusals: reschedule: pause and resume",
          "[cli][lifecycle]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  REQUIRE_EXIT(cli(db, {"project", "create", "p", "P", "--max-attempts", "5"}, T0), 0);
  const auto a = line(cli(db, {"enqueue", "p", "{}"}, T0).out);
  REQUIRE_EXIT(cli(db, {"claim", "--owner", "w"}, T0 + 1), 0);
  REQUIRE_EXIT(cli(db, {"finish", a, "--fence", "1", "--status", "failed", "--no-retry"}, T0 + 2),
               0);
  CHECK(has(cli(db, {"item", a, "--json"}, T0).out, R"("status":"failed")"));
  CHECK_EXIT(cli(db, {"finish", a, "--fence", "1", "--status", "done", "--no-retry"}, T0), 2);

  // cancel a claimed item: the holder is refused with reason cancelled.
  const auto b = line(cli(db, {"enqueue", "p", "{}"}, T0 + 3).out);
  REQUIRE_EXIT(cli(db, {"claim", "--owner", "w"}, T0 + 4), 0);
  const auto cancel = cli(db, {"cancel", b, "--reason", "not wanted", "--actor", "ops", "--json"},
                          T0 + 5);
  REQUIRE_EXIT(cancel, 0);
  CHECK(has(cancel.out, R"("status":"cancelled")"));
  for (const auto& report :
       {std::vector<std::string>{"finish", b, "--fence", "1", "--status", "done", "--json"},
        std::vector<std::string>{"heartbeat", b, "--fence", "1", "--json"},
        std::vector<std::string>{"release", b, "--fence", "1", "--json"}}) {
    const auto r = cli(db, report, T0 + 6);
    CHECK_EXIT(r, 4);
    CHECK(has(r.err, R"("reason":"cancelled")"));
  }
  const auto again = cli(db, {"cancel", b}, T0 + 7);
  CHECK_EXIT(again, 2);
  CHECK(has(again.err, "already cancelled"));
  CHECK_EXIT(cli(db, {"cancel", "no-such-item"}, T0 + 7), 7);
  CHECK_EXIT(cli(db, {"cancel", b, "--project", "p"}, T0 + 7), 2);

  // Delays and reschedule.
  CHECK_EXIT(cli(db, {"enqueue", "p", "{}", "--delay", "10x"}, T0), 2);
  CHECK_EXIT(cli(db, {"enqueue", "p", "{}", "--run-at", "4611686018427387904"}, T0), 2);
  CHECK_EXIT(cli(db, {"enqueue", "p", "{}", "--run-at", "5", "--delay", "1s"}, T0), 2);
  const auto d = line(cli(db, {"enqueue", "p", "{}", "--delay", "10m"}, T0 + 8).out);
  const auto shown = cli(db, {"item", d, "--json"}, T0 + 9);
  CHECK(has(shown.out, R"("status":"scheduled")"));
  CHECK(has(shown.out, "\"run_at\":" + std::to_string(T0 + 8 + 600'000'000)));
  CHECK_EXIT(cli(db, {"claim", "--owner", "w"}, T0 + 10), 3);
  const auto moved = cli(db, {"reschedule", d, "--run-at", std::to_string(T0 + 11), "--json"},
                         T0 + 10);
  REQUIRE_EXIT(moved, 0);
  CHECK(has(moved.out, R"("status":"scheduled")"));
  REQUIRE_EXIT(cli(db, {"claim", "--owner", "w"}, T0 + 12), 0);
  const auto claimed = cli(db, {"reschedule", d, "--delay", "1h"}, T0 + 13);
  CHECK_EXIT(claimed, 2);
  CHECK(has(claimed.err, "only a ready or scheduled item can be rescheduled"));

  // Pause: claims pass over the project; resume lets them take it again.
  REQUIRE_EXIT(cli(db, {"enqueue", "p", "{}"}, T0 + 14), 0);
  REQUIRE_EXIT(cli(db, {"project", "pause", "p", "--reason", "freeze"}, T0 + 15), 0);
  CHECK(has(cli(db, {"project", "show", "p"}, T0).out, "paused: yes (freeze)"));
  CHECK_EXIT(cli(db, {"claim", "--owner", "w"}, T0 + 16), 3);
  REQUIRE_EXIT(cli(db, {"enqueue", "p", "{}"}, T0 + 17), 0);  // enqueue still queues
  REQUIRE_EXIT(cli(db, {"project", "resume", "p"}, T0 + 18), 0);
  REQUIRE_EXIT(cli(db, {"claim", "--owner", "w"}, T0 + 19), 0);
  CHECK_EXIT(cli(db, {"project", "pause", "nope"}, T0), 7);

  // Bulk cancel of what is left, then the counts.
  const auto bulk = cli(db, {"cancel", "--project", "p", "--status", "ready,claimed", "--json"},
                        T0 + 20);
  REQUIRE_EXIT(bulk, 0);
  CHECK(has(bulk.out, R"("count":3)"));
  CHECK(has(bulk.out, R"("operation":"op-)"));
  const auto stats = cli(db, {"stats", "--json"}, T0);
  CHECK(has(stats.out, R"("cancelled":4)"));
  CHECK(has(stats.out, R"("scheduled":0)"));
  CHECK_EXIT(cli(db, {"cancel", "--project", "p", "--status", "done"}, T0 + 21), 2);
  CHECK_EXIT(cli(db, {"cancel", "--project", "p", "--status", "bogus"}, T0 + 21), 2);
  CHECK_EXIT(cli(db, {"verify"}, T0), 0);
}

TEST_CASE("cplane: bad lifecycle input exits 2 and writes nothing", "[cli][lifecycle]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  REQUIRE_EXIT(cli(db, {"project", "create", "p", "P"}, T0), 0);
  const auto before = events(db);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"project", "create", "q", "Q", "--max-attempts", "0"},
           {"project", "create", "q", "Q", "--max-attempts", "-1"},
           {"project", "create", "q", "Q", "--backoff", "fixed:1s"},
           {"project", "create", "q", "Q", "--max-attempts", "2", "--backoff", "sometimes"},
           {"project", "set", "p"},
           {"project", "set", "p", "--backoff", "fixed:1s"},
           {"project", "set", "p", "--max-attempts", "2", "--backoff", "exponential:1m:1s"},
           {"enqueue", "p", "{}", "--max-attempts", "0"},
           {"enqueue", "p", "{}", "--backoff", "fixed:1s"},
           {"enqueue", "p", "{}", "--delay", "0s"},
           {"retry"},
           {"reschedule", "x"},
           {"retry", "x", "--attempts", "0"},
       }) {
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    INFO(shown);
    CHECK_EXIT(cli(db, args, T0 + 1), 2);
  }
  CHECK(events(db) == before);
  REQUIRE_EXIT(cli(db, {"project", "set", "p", "--max-attempts", "4", "--backoff",
                        "exponential:1s", "--json"},
                   T0 + 2),
               0);
  CHECK(has(cli(db, {"project", "show", "p", "--json"}, T0).out, R"("max_attempts":4)"));
}

TEST_CASE("cplane: schedule add|list|pause|resume|remove and tick: as the CLI contract says",
          "[cli][lifecycle][schedule]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  REQUIRE_EXIT(cli(db, {"project", "create", "p", "P"}, T0), 0);
  const auto before = events(db);
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"schedule", "add", "s", "--project", "p", "--cron", "61 * * * *"},
           {"schedule", "add", "s", "--project", "p", "--cron", "@hourly", "--tz", "Mars/Olympus"},
           {"schedule", "add", "s", "--project", "p", "--cron", "@hourly", "--overlap", "maybe"},
           {"schedule", "add", "s", "--project", "p", "--cron", "@hourly", "--catch-up", "0"},
           {"schedule", "add", "s", "--project", "p", "--cron", "@hourly", "--payload", "{x"},
           {"schedule", "add", "s", "--cron", "@hourly"},
           {"schedule", "add", "s", "--project", "p"},
       }) {
    std::string shown;
    for (const auto& a : bad) shown += a + " ";
    INFO(shown);
    CHECK_EXIT(cli(db, bad, T0), 2);
  }
  CHECK_EXIT(cli(db, {"schedule", "add", "s", "--project", "nope", "--cron", "@hourly"}, T0), 7);
  CHECK(events(db) == before);
  const auto added = cli(db, {"schedule", "add", "nightly", "--project", "p", "--cron",
                              "0 3 * * *", "--tz", "Europe/Berlin", "--payload",
                              R"({"job":"backup"})", "--overlap", "skip", "--catch-up", "all",
                              "--json"},
                         T0);
  REQUIRE_EXIT(added, 0);
  // T0 is 2027-01-15 08:00 UTC; 03:00 in Berlin (CET) is 02:00 UTC the next day.
  CHECK(has(added.out, "\"next_at\":" + std::to_string(T0 + 18LL * 3600 * 1'000'000)));
  CHECK(has(added.out, R"("overlap":"skip")"));
  CHECK(has(added.out, R"("catch_up":"all")"));
  CHECK(has(added.out, R"("state":"active")"));
  CHECK_EXIT(cli(db, {"schedule", "add", "nightly", "--project", "p", "--cron", "@daily"}, T0), 2);
  const auto fired = cli(db, {"tick", "--json"}, T0 + 19LL * 3600 * 1'000'000);
  REQUIRE_EXIT(fired, 0);
  CHECK(has(fired.out, R"("queued":1)"));
  const auto claimed = cli(db, {"claim", "--owner", "w", "--json"}, T0 + 19LL * 3600 * 1'000'000);
  REQUIRE_EXIT(claimed, 0);
  CHECK(has(claimed.out, R"("payload":{"job":"backup"})"));
  const auto listed = cli(db, {"schedule", "list", "--json"}, T0);
  CHECK(has(listed.out, R"("fired":1)"));
  REQUIRE_EXIT(cli(db, {"schedule", "pause", "nightly"}, T0 + 1), 0);
  CHECK(has(cli(db, {"schedule", "list"}, T0).out, "paused"));
  REQUIRE_EXIT(cli(db, {"schedule", "resume", "nightly"}, T0 + 2), 0);
  REQUIRE_EXIT(cli(db, {"schedule", "remove", "nightly", "--json"}, T0 + 3), 0);
  CHECK_EXIT(cli(db, {"schedule", "resume", "nightly"}, T0 + 4), 2);
  CHECK_EXIT(cli(db, {"schedule", "pause", "nope"}, T0 + 4), 7);
  CHECK_EXIT(cli(db, {"verify"}, T0), 0);
}
