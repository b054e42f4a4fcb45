// Retention on every engine (docs/retention.md): the same archive, audit and
// restore on SQLite and on PostgreSQL (run as "postgres: ..." against the
// fixture's server). The SQLite-only cases (faults, schema 11, recover) are
// in archive_test.cpp.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>

#include <cplane/cplane.hpp>

#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::run_cli;
using cplane::test::sql;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;
namespace fs = std::filesystem;

constexpr Micros T0 = 1'700'000'000'000'000;
constexpr Micros kCut = T0 + 1'000'000;
constexpr Micros kNow = T0 + 10'000'000;

std::string one(const std::string& db, const std::string& query) {
  return sql_column(db, query).at(0);
}

}  // namespace

TEST_CASE("archive on every engine: anchors, a clean verify, keys that still deduplicate, and "
          "the whole history back from the export and the segment",
          "[archive][conformance]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "a.db");
  std::string keyed_id;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    ControlStore::EnqueueOptions keyed;
    keyed.key = "k1";
    keyed.now = T0 + 5;
    keyed_id = store.enqueue("alpha", R"({"n": 0})", keyed);
    for (int i = 1; i < 4; ++i) store.enqueue("alpha", fmt::format(R"({{"n": {}}})", i), {}, T0 + 10 + i);
    for (int i = 0; i < 3; ++i) {
      auto c = store.claim("w", {.now = T0 + 100 + i, .fair = false});
      REQUIRE(c);
      store.finish(c->item_id, c->fence, Outcome::done, "", T0 + 200 + i);
    }
  }
  const auto events_before = one(db, "SELECT count(*) FROM events");
  const std::string seg = dir.file("a.seg");
  {
    ControlStore store{db};
    const auto report = archive(store, {.before = kCut, .file = seg, .now = kNow});
    CHECK(report.streams == 3);
    CHECK(verify_ledger(store).empty());
    // The archived item's key answers that item, and appends nothing.
    const auto events = one(db, "SELECT count(*) FROM events");
    ControlStore::EnqueueOptions keyed;
    keyed.key = "k1";
    keyed.now = kNow;
    CHECK(store.enqueue("alpha", "{}", keyed) == keyed_id);
    CHECK(one(db, "SELECT count(*) FROM events") == events);
    CHECK(verify_segment(store, seg).problems.empty());
  }
  CHECK(one(db, "SELECT count(*) FROM anchors") == "3");
  CHECK(one(db, "SELECT count(*) FROM items") == "1");
  const auto stats = run_cli({"--db", db, "stats"});
  CHECK(stats.out.find("archived: 3 stream(s)") != std::string::npos);

  const std::string live = dir.file("live.export");
  REQUIRE(run_cli({"--db", db, "export", live}).exit_code == 0);
  const auto whole = run_cli({"audit", live, seg});
  INFO(whole.out << whole.err);
  CHECK(whole.exit_code == 0);
  // Restored into a fresh store of the engine under test, with the segment:
  // the full history, no anchors, verify clean.
  const std::string full = test_context().fresh_store(dir, "full.db");
  const auto restored = run_cli({"--db", full, "restore", live, seg});
  INFO(restored.out << restored.err);
  CHECK(restored.exit_code == 0);
  CHECK(one(full, "SELECT count(*) FROM anchors") == "0");
  // The archive's own event (segment_archived) came after.
  CHECK(one(full, "SELECT count(*) FROM events") ==
        std::to_string(std::stoll(events_before) + 1));
  CHECK(run_cli({"--db", full, "verify"}).exit_code == 0);

  // An anchor edited behind cplane's back (its fence lowered): named.
  sql(db, "UPDATE anchors SET fence = 0 WHERE idem_key = 'k1'");
  ControlStore store{db};
  const auto problems = verify_ledger(store);
  REQUIRE_FALSE(problems.empty());
  CHECK(problems.front().kind == ProblemKind::digest_disagrees);
}

TEST_CASE("archive on every engine: a closed session and a removed schedule go too, their "
          "names stay taken, and the live items that name them still verify",
          "[archive][conformance]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "ss.db");
  constexpr Micros kLater = T0 + 100'000'000;  // after the schedule's first occurrence (T0+40 s)
  std::string released;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    const auto done = store.enqueue("alpha", R"({"n": 1})", {}, T0 + 1);
    released = store.enqueue("alpha", R"({"n": 2})", {}, T0 + 2);
    store.open_session("s1", std::nullopt, T0 + 3);
    const auto a = store.assign_and_lease("s1", done, {"push"}, Seconds(60), T0 + 4);
    store.finish(done, a.fence, Outcome::done, "", T0 + 5);
    store.assign_and_lease("s1", released, {"push"}, Seconds(60), T0 + 6);
    store.close_session("s1", T0 + 7);  // releases `released`: it stays live, naming s1
    store.open_session("s2", std::nullopt, T0 + 8);  // open: stays
    store.add_schedule("nightly", {.project_id = "alpha", .cron = "* * * * *", .now = T0});
    REQUIRE(store.tick(T0 + 50'000'000) == 1);  // its item stays live
    REQUIRE(store.remove_schedule("nightly", T0 + 60'000'000));
    store.add_schedule("hourly", {.project_id = "alpha", .cron = "@hourly", .now = T0});
  }
  const std::string seg = dir.file("ss.seg");
  {
    ControlStore store{db};
    // --project archives no session: a session is no project's.
    const auto dry = archive(store, {.before = kLater, .project = "alpha", .dry_run = true,
                                     .now = kLater});
    CHECK(dry.sessions == 0);
    CHECK(dry.schedules == 1);
    const auto report = archive(store, {.before = kLater, .file = seg, .now = kLater});
    CHECK(report.items == 1);
    CHECK(report.sessions == 1);
    CHECK(report.schedules == 1);
    CHECK(report.streams == 3);
    const auto problems = verify_ledger(store);
    for (const auto& p : problems) UNSCOPED_INFO(p.detail);
    CHECK(problems.empty());
    CHECK(verify_segment(store, seg).problems.empty());
    // The names stay taken: nothing appended.
    const auto events = one(db, "SELECT count(*) FROM events");
    CHECK_THROWS_AS(store.open_session("s1", std::nullopt, kLater), InvalidArgument);
    CHECK_THROWS_AS(store.add_schedule("nightly", {.project_id = "alpha", .cron = "@daily",
                                                   .now = kLater}),
                    InvalidArgument);
    // A heartbeat is refused as for a closed session, not a never-opened one.
    try {
      store.session_heartbeat("s1", std::nullopt, kLater);
      FAIL("an archived session took a heartbeat");
    } catch (const NotFound& e) {
      CHECK(e.reason() == NotFound::Reason::session_closed);
      CHECK(std::string(e.what()).find("archived") != std::string::npos);
    }
    CHECK(one(db, "SELECT count(*) FROM events") == events);
    // The item s1 held and gave back is still claimable.
    const auto c = store.claim("w", {.now = kLater, .fair = false});
    REQUIRE(c);
    CHECK(verify_ledger(store).empty());
  }
  CHECK(one(db, "SELECT count(*) FROM sessions") == "1");   // s2
  CHECK(one(db, "SELECT count(*) FROM schedules") == "1");  // hourly
  CHECK(one(db, "SELECT count(*) FROM anchors WHERE stream_kind = 'session'") == "1");
  CHECK(one(db, "SELECT count(*) FROM anchors WHERE stream_kind = 'schedule'") == "1");
  // The segment on its own passes its checks: it cannot show the items the
  // schedule made nor the projects, and does not call them missing.
  const auto alone = run_cli({"audit", seg});
  INFO(alone.out << alone.err);
  CHECK(alone.exit_code == 0);

  // The whole history back: the session and the schedule as they ended.
  const std::string live = dir.file("ss.export");
  REQUIRE(run_cli({"--db", db, "export", live}).exit_code == 0);
  CHECK(run_cli({"audit", live, seg}).exit_code == 0);
  const std::string full = test_context().fresh_store(dir, "ss-full.db");
  const auto restored = run_cli({"--db", full, "restore", live, seg});
  INFO(restored.out << restored.err);
  REQUIRE(restored.exit_code == 0);
  CHECK(one(full, "SELECT count(*) FROM anchors") == "0");
  CHECK(one(full, "SELECT count(*) FROM sessions WHERE session_id = 's1'") == "1");
  CHECK(one(full, "SELECT count(*) FROM schedules WHERE name = 'nightly'") == "1");
  CHECK(run_cli({"--db", full, "verify"}).exit_code == 0);

  // A row put back for the archived session: named, and rebuild removes it
  // (the anchor proves the session ended).
  sql(db, "INSERT INTO sessions (session_id, actor, opened_at, last_seen_at, closed_at, "
          "last_seq) VALUES ('s1', NULL, 1, 1, NULL, 1)");
  CHECK(run_cli({"--db", db, "verify"}).exit_code == 6);
  CHECK(run_cli({"--db", db, "rebuild"}).exit_code == 0);
  CHECK(one(db, "SELECT count(*) FROM sessions WHERE session_id = 's1'") == "0");
  CHECK(run_cli({"--db", db, "verify"}).exit_code == 0);
  // The session's anchor edited (when it ended): the digest names it.
  sql(db, "UPDATE anchors SET ended_at = ended_at + 1 WHERE stream_kind = 'session'");
  ControlStore store{db};
  const auto problems = verify_ledger(store);
  REQUIRE_FALSE(problems.empty());
  CHECK(problems.front().kind == ProblemKind::digest_disagrees);
}

TEST_CASE("archive on every engine keeps the flow state verify folds: a project's fair-share "
          "pass and a rate limit's clock survive it, and rebuild changes nothing",
          "[archive][conformance][flow]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "flow.db");
  std::string last_of_alpha;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    store.create_project("beta", "B", "open", T0);
    REQUIRE(store.set_limit("k", {.concurrency = 2, .rate = "5/minute", .burst = 2, .now = T0}));
    ControlStore::EnqueueOptions keyed;
    keyed.concurrency_key = "k";
    for (int i = 0; i < 2; ++i) {
      store.enqueue("alpha", "{}", {}, T0 + 1);
      store.enqueue("beta", "{}", {}, T0 + 1);
    }
    keyed.now = T0 + 1;
    store.enqueue("alpha", "{}", keyed);
    store.enqueue("alpha", "{}", keyed);
    // Fair-share claims across both projects (each records its project's
    // pass), then the keyed ones (each advances k's rate clock).
    for (int i = 0; i < 6; ++i) {
      const auto c = store.claim("w", {.now = T0 + 2 + i});
      REQUIRE(c);
      store.finish(c->item_id, c->fence, Outcome::done, "", T0 + 100 + i);
    }
    REQUIRE(verify_ledger(store).empty());
  }
  ControlStore store{db};
  const auto report = archive(store, {.before = kCut + 1'000'000, .file = dir.file("flow.seg"),
                                      .now = kNow});
  // The item whose claim holds each project's pass stays live.
  CHECK(report.kept_live == 2);
  CHECK(report.items == 4);
  // k's clock, as its claims (archived ones among them) left it, is an
  // event of k's stream: the live log's replay is exact from there.
  CHECK(report.clocks_carried == 1);
  CHECK(one(db, "SELECT count(*) FROM events WHERE type = 'limit_clock_carried' AND "
                "stream_id = 'k'") == "1");
  const auto problems = verify_ledger(store);
  for (const auto& p : problems) UNSCOPED_INFO(p.detail);
  CHECK(problems.empty());
  const auto rebuilt = rebuild(store, {.dry_run = true});
  for (const auto& c : rebuilt.changes) UNSCOPED_INFO(c.table << " " << c.key);
  CHECK(rebuilt.changes_total == 0);
  // A keyed claim after the archive: the live log's clock is later again.
  ControlStore::EnqueueOptions keyed;
  keyed.concurrency_key = "k";
  keyed.now = T0 + 100'000'000;  // after the rate's next token
  store.enqueue("alpha", "{}", keyed);
  REQUIRE(store.claim("w", {.now = T0 + 100'000'000}));
  CHECK(verify_ledger(store).empty());
  // A rate limit's clock set back behind it (a burst the limit never
  // allowed), or far beyond what any claim could have set (a key blocked
  // for good), is still named.
  const auto tat = one(db, "SELECT tat FROM limits");
  sql(db, "UPDATE limits SET tat = 1");
  CHECK_FALSE(verify_ledger(store).empty());
  sql(db, "UPDATE limits SET tat = 99999999999999999");
  CHECK_FALSE(verify_ledger(store).empty());
  // Exactly: one microsecond later than the log (within what an archived
  // claim could have set, which the live log alone could not rule out).
  sql(db, "UPDATE limits SET tat = " + tat + " + 1");
  {
    const auto named = verify_ledger(store);
    REQUIRE(named.size() == 1);
    CHECK(named.front().kind == ProblemKind::limit_row_disagrees);
  }
  // An archive of such a store refuses (it would carry the edited clock
  // into the log) and writes nothing.
  {
    store.enqueue("beta", "{}", {}, T0 + 100'000'001);
    const auto c = store.claim("w", {.now = T0 + 100'000'002});
    REQUIRE(c);
    store.finish(c->item_id, c->fence, Outcome::done, "", T0 + 100'000'003);
    const auto events = one(db, "SELECT count(*) FROM events");
    try {
      archive(store, {.before = T0 + 200'000'000, .file = dir.file("edited.seg"),
                      .now = T0 + 300'000'000});
      FAIL("an archive carried an edited clock");
    } catch (const StorageError& e) {
      CHECK(std::string(e.what()).find("limit") != std::string::npos);
    }
    CHECK(one(db, "SELECT count(*) FROM events") == events);
    CHECK_FALSE(fs::exists(dir.file("edited.seg")));
  }
  sql(db, "UPDATE limits SET tat = " + tat);
  REQUIRE(verify_ledger(store).empty());
  // The whole history (the live export and the segment) audits clean, and
  // restores to a store verify finds clean: the carried clock is the one
  // every claim, the archived ones included, makes.
  const std::string live = dir.file("flow.export");
  REQUIRE(run_cli({"--db", db, "export", live}).exit_code == 0);
  const auto whole = run_cli({"audit", live, dir.file("flow.seg")});
  INFO(whole.out << whole.err);
  CHECK(whole.exit_code == 0);
  const std::string full = test_context().fresh_store(dir, "flow-full.db");
  const auto restored = run_cli({"--db", full, "restore", live, dir.file("flow.seg")});
  INFO(restored.out << restored.err);
  CHECK(restored.exit_code == 0);
  CHECK(run_cli({"--db", full, "verify"}).exit_code == 0);
  // A project's pass raised behind cplane's back does not lead the next
  // archive to take away the claim that proves the true one (the holder
  // is chosen from the log).
  const auto pass = one(db, "SELECT fair_pass FROM projects WHERE project_id = 'beta'");
  sql(db, "UPDATE projects SET fair_pass = fair_pass + 5000000 WHERE project_id = 'beta'");
  const auto second = archive(store, {.before = T0 + 200'000'000, .file = dir.file("flow2.seg"),
                                      .now = T0 + 300'000'000});
  CHECK(second.clocks_carried == 1);
  CHECK(second.items >= 1);
  const auto named = verify_ledger(store);
  REQUIRE(named.size() == 1);
  CHECK(named.front().detail.find("recorded " + pass) != std::string::npos);
}

TEST_CASE("archive on every engine carries the clock the log folds to: a limit row deleted or "
          "edited to no rate is refused, and a store whose archives carried nothing still "
          "names a raised clock",
          "[archive][conformance][flow]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "clock.db");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  // An archive with no limit at all: nothing to carry.
  {
    const auto c = (store.enqueue("alpha", "{}", {}, T0 + 1), store.claim("w", {.now = T0 + 2}));
    REQUIRE(c);
    store.finish(c->item_id, c->fence, Outcome::done, "", T0 + 3);
  }
  CHECK(archive(store, {.before = kCut, .file = dir.file("a.seg"), .now = kNow}).clocks_carried ==
        0);
  // Then a limit, and a claim of its key (the clock one hour on).
  REQUIRE(store.set_limit("kr", {.rate = "1/h", .burst = 10, .now = kNow}));
  ControlStore::EnqueueOptions keyed;
  keyed.concurrency_key = "kr";
  keyed.now = kNow + 1;
  store.enqueue("alpha", "{}", keyed);
  const auto c = store.claim("w", {.now = kNow + 2});
  REQUIRE(c);
  store.finish(c->item_id, c->fence, Outcome::done, "", kNow + 3);
  REQUIRE(verify_ledger(store).empty());
  // Raised by hand within what an archived claim could have set: no claim
  // of kr was ever archived, so nothing explains it.
  const auto tat = one(db, "SELECT tat FROM limits");
  sql(db, "UPDATE limits SET tat = tat + 30000000000");
  {
    const auto named = verify_ledger(store);
    REQUIRE(named.size() == 1);
    CHECK(named.front().kind == ProblemKind::limit_row_disagrees);
  }
  sql(db, "UPDATE limits SET tat = " + tat);
  REQUIRE(verify_ledger(store).empty());
  // The limit's row deleted, or edited to no rate: the log still knows the
  // limit, so the archive refuses instead of carrying nothing (which would
  // let rebuild set the clock back).
  const auto events = one(db, "SELECT count(*) FROM events");
  for (const std::string edit : {"DELETE FROM limits", "UPDATE limits SET rate_count = 0",
                                 "UPDATE limits SET removed = NOT removed"}) {
    INFO(edit);
    sql(db, "CREATE TABLE kept AS SELECT * FROM limits");
    sql(db, edit);
    CHECK_THROWS_AS(archive(store, {.before = kNow + 10, .file = dir.file("b.seg"),
                                    .dry_run = true, .now = kNow + 20}),
                    StorageError);
    CHECK_THROWS_AS(archive(store, {.before = kNow + 10, .file = dir.file("b.seg"),
                                    .now = kNow + 20}),
                    StorageError);
    CHECK(one(db, "SELECT count(*) FROM events") == events);
    CHECK_FALSE(fs::exists(dir.file("b.seg")));
    sql(db, "DELETE FROM limits");
    sql(db, "INSERT INTO limits SELECT * FROM kept");
    sql(db, "DROP TABLE kept");
  }
  REQUIRE(verify_ledger(store).empty());
  const auto report = archive(store, {.before = kNow + 10, .file = dir.file("b.seg"),
                                      .now = kNow + 20});
  CHECK(report.clocks_carried == 1);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("archive on every engine is an event: segment_archived on the segment's stream, whose "
          "fold is the segments row (edited, deleted or added: named, and rebuild puts it back)",
          "[archive][conformance]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "event.db");
  std::string segment_id;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    for (int i = 0; i < 2; ++i) {
      store.enqueue("alpha", "{}", {}, T0 + 1);
      const auto c = store.claim("w", {.now = T0 + 2});
      REQUIRE(c);
      store.finish(c->item_id, c->fence, Outcome::done, "", T0 + 3);
    }
    const auto report = archive(store, {.before = kCut, .file = dir.file("e.seg"), .now = kNow});
    segment_id = report.segment_id;
    CHECK(report.items == 2);
  }
  CHECK(one(db, "SELECT count(*) FROM events WHERE type = 'segment_archived' AND stream_kind = "
                "'segment' AND stream_id = '" + segment_id + "'") == "1");
  CHECK(run_cli({"--db", db, "verify"}).exit_code == 0);
  const auto history = run_cli({"--db", db, "tail", "--json"});
  CHECK(history.out.find("segment_archived") != std::string::npos);
  const std::string file = one(db, "SELECT file FROM segments");
  for (const std::string edit : {"UPDATE segments SET file = '/elsewhere'",
                                 "UPDATE segments SET bytes = bytes + 1",
                                 "UPDATE segments SET archived_at = 1", "DELETE FROM segments"}) {
    INFO(edit);
    sql(db, edit);
    {
      ControlStore store{db};
      const auto named = verify_ledger(store);
      REQUIRE(named.size() == 1);
      CHECK(named.front().kind == ProblemKind::segment_disagrees);
    }
    CHECK(run_cli({"--db", db, "rebuild"}).exit_code == 0);
    CHECK(run_cli({"--db", db, "verify"}).exit_code == 0);
    CHECK(one(db, "SELECT file FROM segments") == file);
  }
  // A record no event and no anchor explains: named; rebuild removes it.
  sql(db, "INSERT INTO segments (segment_id, digest, file, before, project_id, streams, events, "
          "bytes, archived_at) SELECT 'forged', digest, file, before, project_id, 0, 0, bytes, "
          "archived_at FROM segments");
  CHECK(run_cli({"--db", db, "verify"}).exit_code == 6);
  CHECK(run_cli({"--db", db, "rebuild"}).exit_code == 0);
  CHECK(one(db, "SELECT count(*) FROM segments") == "1");
  CHECK(run_cli({"--db", db, "verify"}).exit_code == 0);
  // The whole history restored: the streams are live again, and the record
  // stays, explained by its event.
  const std::string live = dir.file("e.export");
  REQUIRE(run_cli({"--db", db, "export", live}).exit_code == 0);
  const std::string full = test_context().fresh_store(dir, "event-full.db");
  const auto restored = run_cli({"--db", full, "restore", live, dir.file("e.seg")});
  INFO(restored.out << restored.err);
  REQUIRE(restored.exit_code == 0);
  CHECK(one(full, "SELECT count(*) FROM anchors") == "0");
  CHECK(one(full, "SELECT file FROM segments") == file);
  // Nothing of it is archived now: stats lists no segment.
  CHECK(run_cli({"--db", full, "stats"}).out.find("archived:") == std::string::npos);
  CHECK(run_cli({"--db", db, "stats"}).out.find("archived: 2 stream(s)") != std::string::npos);
  const auto verified = run_cli({"--db", full, "verify"});
  INFO(verified.out << verified.err);
  CHECK(verified.exit_code == 0);
  // Without the segment: the anchors stay, the record is the event's.
  const std::string kept = test_context().fresh_store(dir, "event-kept.db");
  REQUIRE(run_cli({"--db", kept, "restore", live}).exit_code == 0);
  CHECK(one(kept, "SELECT bytes FROM segments") == one(db, "SELECT bytes FROM segments"));
  CHECK(run_cli({"--db", kept, "verify"}).exit_code == 0);
}

TEST_CASE("archive on every engine refuses a session or schedule row edited outside cplane, "
          "naming the field, and a close or remove retried after the archive changes nothing",
          "[archive][conformance]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "edit.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    store.add_schedule("nightly", {.project_id = "alpha", .cron = "@daily", .now = T0});
    REQUIRE(store.remove_schedule("nightly", T0 + 1));
    store.open_session("s1", std::nullopt, T0 + 2);
    store.close_session("s1", T0 + 3);
  }
  sql(db, "UPDATE schedules SET payload = '{\"evil\": 1}'");
  const auto before = one(db, "SELECT count(*) FROM events");
  {
    ControlStore store{db};
    try {
      archive(store, {.before = kCut, .file = dir.file("e.seg"), .now = kNow});
      FAIL("an edited row was archived");
    } catch (const StorageError& e) {
      CHECK(std::string(e.what()).find("payload") != std::string::npos);
    }
  }
  CHECK(one(db, "SELECT count(*) FROM anchors") == "0");
  CHECK(one(db, "SELECT count(*) FROM events") == before);
  CHECK_FALSE(fs::exists(dir.file("e.seg")));
  sql(db, "UPDATE schedules SET payload = '{}'");
  ControlStore store{db};
  REQUIRE(verify_ledger(store).empty());
  REQUIRE(archive(store, {.before = kCut, .file = dir.file("e.seg"), .now = kNow}).streams == 2);
  const auto events = one(db, "SELECT count(*) FROM events");
  CHECK(store.close_session("s1", kNow).empty());
  CHECK_FALSE(store.remove_schedule("nightly", kNow));
  CHECK_THROWS_AS(store.pause_schedule("nightly", kNow), InvalidArgument);
  CHECK(one(db, "SELECT count(*) FROM events") == events);
}

TEST_CASE("archive refuses bad input on every engine and changes nothing", "[archive][conformance]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "b.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    store.enqueue("alpha", "{}", {}, T0 + 1);
  }
  const auto events = one(db, "SELECT count(*) FROM events");
  const std::string cut = std::to_string(kCut);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--db", db, "archive", "--before", cut, "--to", dir.file("none.seg")},  // nothing ended
           {"--db", db, "archive", "--before", "2999-01-01", "--to", dir.file("f.seg")},
           {"--db", db, "archive", "--before", cut, "--to", dir.file("no/such/dir.seg")}}) {
    const auto r = run_cli(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
  }
  CHECK(one(db, "SELECT count(*) FROM events") == events);
  CHECK(one(db, "SELECT count(*) FROM anchors") == "0");
  CHECK_FALSE(fs::exists(dir.file("none.seg")));
}

TEST_CASE("verify holds the segments table against the anchors on every engine: a record "
          "deleted, edited or added outside cplane is named",
          "[archive][conformance]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "s.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    for (int i = 0; i < 3; ++i) store.enqueue("alpha", "{}", {}, T0 + 10 + i);
    for (int i = 0; i < 3; ++i) {
      auto c = store.claim("w", {.now = T0 + 100 + i, .fair = false});
      REQUIRE(c);
      store.finish(c->item_id, c->fence, Outcome::done, "", T0 + 200 + i);
    }
    REQUIRE(archive(store, {.before = kCut, .project = "alpha", .file = dir.file("s.seg"),
                            .now = kNow})
                .streams == 3);
    REQUIRE(verify_ledger(store).empty());
  }
  const auto [what, edit] = GENERATE(table<const char*, const char*>({
      {"record deleted", "DELETE FROM segments"},
      {"a stream more", "UPDATE segments SET streams = streams + 1"},
      {"an event fewer", "UPDATE segments SET events = events - 1"},
      {"another digest", "UPDATE segments SET digest = (SELECT hash FROM anchors LIMIT 1)"},
      {"another project", "UPDATE segments SET project_id = 'beta'"},
      {"a record added",
       "INSERT INTO segments SELECT 'ff' || segment_id, digest, file, before, project_id, "
       "streams, events, bytes, archived_at FROM segments"},
  }));
  INFO(what);
  sql(db, edit);
  ControlStore store{db};
  // Named against its event (segment_archived) and against its anchors:
  // one problem or two, each of the segment.
  const auto problems = verify_ledger(store);
  REQUIRE_FALSE(problems.empty());
  CHECK(problems.size() <= 2);
  for (const auto& p : problems) {
    CHECK(p.kind == ProblemKind::segment_disagrees);
    CHECK(p.detail.find("segment") != std::string::npos);
  }
  CHECK(run_cli({"--db", db, "verify"}).exit_code != 0);
}

TEST_CASE("archive --redact-payloads on every engine: the segment holds digests, its chain and "
          "anchors check, and a restore keeps its streams anchored",
          "[archive][redact][conformance]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "r.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    for (int i = 0; i < 3; ++i) {
      store.enqueue("alpha", fmt::format(R"({{"email": "person{}@example.org"}})", i), {}, T0 + 10 + i);
    }
    for (int i = 0; i < 2; ++i) {
      auto c = store.claim("w", {.now = T0 + 100 + i, .fair = false});
      REQUIRE(c);
      store.finish(c->item_id, c->fence, Outcome::done, "", T0 + 200 + i);
    }
  }
  const std::string seg = dir.file("r.seg");
  {
    ControlStore store{db};
    const auto report =
        archive(store, {.before = kCut, .file = seg, .now = kNow, .redact_payloads = true});
    CHECK(report.streams == 2);
    CHECK(report.redacted == 2);
    CHECK(verify_ledger(store).empty());
    CHECK(verify_segment(store, seg).problems.empty());
    // stats says the segment is redacted (its segment_archived does).
    const auto segments = archived_segments(store);
    REQUIRE(segments.size() == 1);
    CHECK(segments.front().redacted == 2);
  }
  {
    const auto stats = run_cli({"--db", db, "--json", "stats"});
    CHECK(stats.out.find("\"redacted\":2") != std::string::npos);
    CHECK(run_cli({"--db", db, "stats"}).out.find("2 payload(s) redacted") != std::string::npos);
  }
  CHECK(cplane::test::read_file(seg).find("example.org") == std::string::npos);
  const auto audit = run_cli({"--json", "audit", seg, "--against", db});
  INFO(audit.out << audit.err);
  CHECK(audit.exit_code == 0);
  CHECK(audit.out.find("\"redacted_payloads\":2") != std::string::npos);
  const std::string live = dir.file("live.export");
  REQUIRE(run_cli({"--db", db, "export", live}).exit_code == 0);
  CHECK(run_cli({"audit", live, seg}).exit_code == 0);
  const std::string full = test_context().fresh_store(dir, "full.db");
  const auto restored = run_cli({"--db", full, "restore", live, seg});
  INFO(restored.out << restored.err);
  CHECK(restored.exit_code == 0);
  CHECK(one(full, "SELECT count(*) FROM anchors") == "2");
  CHECK(run_cli({"--db", full, "verify"}).exit_code == 0);
}

TEST_CASE("archive --forget-keys on every engine: each archived item's key is released by an "
          "event in the segment, a new item takes it, and the whole history still holds",
          "[archive][conformance]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "fk.db");
  constexpr Micros kCutFk = T0 + 100'000'000;  // after the schedule's occurrence and the finishes
  constexpr Micros kNowFk = T0 + 200'000'000;
  std::string first_k1;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    ControlStore::EnqueueOptions keyed;
    keyed.key = "k1";
    keyed.now = T0 + 1;
    first_k1 = store.enqueue("alpha", R"({"n": 1})", keyed);
    keyed.key = "k2";
    keyed.now = T0 + 2;
    store.enqueue("alpha", R"({"n": 2})", keyed);
    store.enqueue("alpha", R"({"n": 3})", {}, T0 + 3);
    store.add_schedule("nightly", {.project_id = "alpha", .cron = "* * * * *", .now = T0});
    REQUIRE(store.tick(T0 + 50'000'000) == 1);  // keyed schedule:nightly@...
    for (int i = 0; i < 4; ++i) {
      auto c = store.claim("w", {.now = T0 + 60'000'000 + i, .fair = false});
      REQUIRE(c);
      store.finish(c->item_id, c->fence, Outcome::done, "", T0 + 70'000'000 + i);
    }
  }
  const auto events_before = one(db, "SELECT count(*) FROM events");
  const std::string seg = dir.file("fk.seg");
  std::int64_t dry_events = 0;
  {
    ControlStore store{db};
    // A dry run counts the keys it would release and appends nothing.
    const auto dry = archive(store, {.before = kCutFk, .dry_run = true, .now = kNowFk,
                                     .forget_keys = true});
    CHECK(dry.keys_released == 2);
    CHECK(one(db, "SELECT count(*) FROM events") == events_before);
    dry_events = dry.events;
  }
  // The CLI's contract: --forget-keys, and keys_released in --json.
  const auto cli = run_cli({"--db", db, "--now", std::to_string(kNowFk), "--json", "archive",
                            "--before", std::to_string(kCutFk), "--to", seg, "--forget-keys"});
  INFO(cli.out << cli.err);
  REQUIRE(cli.exit_code == 0);
  CHECK(cli.out.find("\"keys_released\":2") != std::string::npos);
  CHECK(cli.out.find("\"items\":4") != std::string::npos);
  // The dry run counted the releases it would append.
  CHECK(cli.out.find(fmt::format("\"events\":{},", dry_events)) != std::string::npos);
  // Two key_released events went into the segment with their items: the
  // live log holds only the archive's own.
  CHECK(one(db, "SELECT count(*) FROM anchors") == "4");
  CHECK(one(db, "SELECT count(*) FROM anchors WHERE idem_key IS NOT NULL") == "1");
  CHECK(one(db, "SELECT idem_key FROM anchors WHERE idem_key IS NOT NULL").rfind("schedule:", 0) ==
        0);
  std::string second_k1;
  {
    ControlStore store{db};
    const auto problems = verify_ledger(store);
    for (const auto& p : problems) UNSCOPED_INFO(p.detail);
    CHECK(problems.empty());
    CHECK(verify_segment(store, seg).problems.empty());
    // The released key makes a new item, which then deduplicates as any.
    ControlStore::EnqueueOptions keyed;
    keyed.key = "k1";
    keyed.now = kNowFk + 1;
    second_k1 = store.enqueue("alpha", R"({"n": 4})", keyed);
    CHECK(second_k1 != first_k1);
    CHECK(store.enqueue("alpha", "{}", keyed) == second_k1);
    // The schedule's key was kept: its catch-up still finds the archived
    // occurrence rather than making it again.
    CHECK(verify_ledger(store).empty());
  }
  const auto audit_seg = run_cli({"audit", seg});
  INFO(audit_seg.out << audit_seg.err);
  CHECK(audit_seg.exit_code == 0);
  // The whole history, two items under k1 one after the other: audited as
  // one, restored whole, verify clean, the key on the second only.
  const std::string live = dir.file("fk.export");
  REQUIRE(run_cli({"--db", db, "export", live}).exit_code == 0);
  const auto whole = run_cli({"audit", live, seg});
  INFO(whole.out << whole.err);
  CHECK(whole.exit_code == 0);
  const std::string full = test_context().fresh_store(dir, "fk-full.db");
  const auto restored = run_cli({"--db", full, "restore", live, seg});
  INFO(restored.out << restored.err);
  REQUIRE(restored.exit_code == 0);
  CHECK(run_cli({"--db", full, "verify"}).exit_code == 0);
  CHECK(one(full, "SELECT count(*) FROM events WHERE type = 'key_released'") == "2");
  CHECK(one(full, "SELECT item_id FROM items WHERE idem_key = 'k1'") == second_k1);
  CHECK(one(full, fmt::format("SELECT count(*) FROM items WHERE item_id = '{}' AND idem_key IS "
                              "NULL",
                              first_k1)) == "1");
}
