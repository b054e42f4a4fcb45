// The job lifecycle (issue 22) through the library, on every backend: retry
// policies and their backoff, the dead end, lapsed leases as attempts,
// redrive, delays and the claim order, reschedule, cancel, pause, bulk
// actions, and what verify names when rows or events are edited.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <cplane/cplane.hpp>

#include "commands/decide.hpp"
#include "storage/sqlite/sqlite_backend.hpp"
#include "tests/support.hpp"

using namespace cplane;
using cplane::test::problem_kinds;
using cplane::test::sql;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;
using cplane::test::verify_file;

namespace {

constexpr Micros T0 = 1'800'000'000'000'000;
constexpr Micros kSecond = 1'000'000;

std::vector<std::string> types(const std::vector<StoredEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.emplace_back(e.type());
  return out;
}

template <class F>
FenceRejected::Reason refusal(F&& f) {
  try {
    f();
  } catch (const FenceRejected& e) {
    return e.reason();
  }
  FAIL("the report was accepted");
  return FenceRejected::Reason::unknown_item;
}

template <class F>
InvalidArgument::Reason invalid(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.reason();
  }
  FAIL("the call was accepted");
  return InvalidArgument::Reason::misuse;
}

std::string fmt_owner(int p) { return "proc-" + std::to_string(p); }

std::string one_item(ControlStore& store, const ControlStore::EnqueueOptions& options = {}) {
  auto o = options;
  if (!o.now) o.now = T0;
  return store.enqueue("alpha", "{}", o);
}

}  // namespace

TEST_CASE("with no retry policy a failed finish is terminal and lapsed leases are reclaimed "
          "without limit",
          "[lifecycle]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  const auto id = one_item(store);
  Micros at = T0 + 1;
  for (Fence f = 1; f <= 6; ++f) {  // six lapses in a row: still handed out
    const auto c = store.claim("w", {.lease = Seconds{1}, .now = at});
    REQUIRE(c);
    CHECK(c->item_id == id);
    CHECK(c->fence == f);
    at += 2 * kSecond;
  }
  CHECK(store.expire_leases(at) == 1);  // a lease_expired, not a failure
  CHECK(store.item(id).status == ItemStatus::claimed);
  const auto c = store.claim("w", {.now = at});
  REQUIRE(c);
  store.finish(id, c->fence, Outcome::failed, {.detail = "boom", .now = at + 1});
  CHECK(store.item(id).status == ItemStatus::failed);
  CHECK(store.item(id).attempt_limit == 0);
  CHECK_FALSE(store.claim("w", {.now = at + 2}));
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a failed attempt with attempts left waits its backoff: then runs again under a "
          "higher fence: the last one is the dead end",
          "[lifecycle]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A",
                       ControlStore::ProjectOptions{.max_attempts = 3,
                                                    .backoff = "exponential:10s:1m",
                                                    .now = T0});
  const auto id = one_item(store);
  CHECK(store.item(id).max_attempts == 3);
  CHECK(store.item(id).backoff == "exponential:10s:1m");
  const Backoff backoff = parse_backoff("exponential:10s:1m");
  Micros at = T0 + 1;
  for (std::uint32_t attempt = 1; attempt <= 3; ++attempt) {
    const auto c = store.claim("w", {.now = at});
    REQUIRE(c);
    CHECK(c->item_id == id);
    CHECK(c->fence == attempt);
    CHECK(c->attempts == attempt);
    store.finish(id, c->fence, Outcome::failed, {.detail = "flaky", .now = at + 1});
    const Item row = store.item(id);
    if (attempt < 3) {
      CHECK(row.status == ItemStatus::scheduled);
      // The same item and attempt always wait the same: the jitter is theirs.
      const Micros wait = backoff_wait(backoff, id, attempt);
      CHECK(row.run_at == at + 1 + wait);
      const Micros base = std::min<Micros>(10 * kSecond << (attempt - 1), 60 * kSecond);
      CHECK(wait >= base * 9 / 10);
      CHECK(wait <= base * 11 / 10);
      // Not before its retry_at, not a microsecond.
      CHECK_FALSE(store.claim("w", {.now = row.run_at - 1}));
      // The late report of the attempt that failed: its fence is stale.
      CHECK(refusal([&] { store.finish(id, c->fence, Outcome::done, {.now = at + 2}); }) ==
            FenceRejected::Reason::stale_fence);
      at = row.run_at;
    } else {
      CHECK(row.status == ItemStatus::failed);
      CHECK(row.detail == "flaky");
    }
  }
  CHECK(types(store.events(id)) ==
        std::vector<std::string>{"queued", "claimed", "attempt_failed", "claimed",
                                 "attempt_failed", "claimed", "failed"});
  CHECK_FALSE(store.claim("w", {.now = at + 10 * kSecond}));
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("an item's own policy overrides its project's: and --no-retry ends it at once",
          "[lifecycle]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", ControlStore::ProjectOptions{.max_attempts = 5, .now = T0});
  const auto own = one_item(store, {.max_attempts = 2, .backoff = "fixed:1s"});
  const auto inherited = one_item(store);
  CHECK(store.item(own).max_attempts == 2);
  CHECK(store.item(own).backoff == "fixed:1s");
  CHECK(store.item(inherited).max_attempts == 5);
  const auto c = store.claim("w", {.now = T0 + 1});
  REQUIRE(c);
  store.finish(c->item_id, c->fence, Outcome::failed, {.now = T0 + 2, .no_retry = true});
  CHECK(store.item(c->item_id).status == ItemStatus::failed);
  // A policy set later applies to items queued later; an item keeps its own.
  CHECK(store.set_retry_policy("alpha", 1, "none", T0 + 3));
  CHECK_FALSE(store.set_retry_policy("alpha", 1, "none", T0 + 4));  // unchanged: nothing recorded
  CHECK(store.project("alpha").max_attempts == 1);
  CHECK(store.item(inherited).max_attempts == 5);
  CHECK(one_item(store, {.now = T0 + 5}) != "");
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("under a policy a lapsed lease is an attempt: the exhausted item is failed by the "
          "next claim or the sweep: never handed out again",
          "[lifecycle]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", ControlStore::ProjectOptions{.max_attempts = 2, .now = T0});
  const auto poison = one_item(store);
  REQUIRE(store.claim("w1", {.lease = Seconds{1}, .now = T0 + 1})->item_id == poison);
  const auto again = store.claim("w2", {.lease = Seconds{1}, .now = T0 + 6 * kSecond});
  REQUIRE(again);
  CHECK(again->item_id == poison);
  CHECK(again->attempts == 2);
  // Lapsed again at T0 + 7 s, before `other` was queued: the item available
  // earliest, with no attempts left. The next claim fails it on the way and
  // takes `other`.
  const auto other = one_item(store, {.now = T0 + 8 * kSecond});
  const auto next = store.claim("w3", {.now = T0 + 10 * kSecond});
  REQUIRE(next);
  CHECK(next->item_id == other);
  const Item row = store.item(poison);
  CHECK(row.status == ItemStatus::failed);
  CHECK(row.detail == "lease lapsed, attempts exhausted");
  CHECK(row.attempts == 2);
  // The holder of the last attempt is refused: the item is terminal.
  CHECK(refusal([&] { store.finish(poison, again->fence, Outcome::done); }) ==
        FenceRejected::Reason::terminal);

  SECTION("the sweep records the same failure") {
    const auto swept = one_item(store, {.now = T0 + 11 * kSecond});
    store.finish(other, next->fence, Outcome::done, {.now = T0 + 11 * kSecond});
    store.set_retry_policy("alpha", 1, "none", T0 + 11 * kSecond);
    REQUIRE(store.claim("w4", {.lease = Seconds{1}, .now = T0 + 12 * kSecond})->item_id == swept);
    CHECK(store.item(swept).attempt_limit == 2);  // queued under the old policy
    REQUIRE(store.claim("w5", {.lease = Seconds{1}, .now = T0 + 14 * kSecond})->item_id == swept);
    CHECK(store.expire_leases(T0 + 16 * kSecond) == 1);
    CHECK(store.item(swept).status == ItemStatus::failed);
    CHECK(store.item(swept).detail == "lease lapsed, attempts exhausted");
  }
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("retry redrives a failed or cancelled item to the back of the queue with more "
          "attempts: a done item is refused",
          "[lifecycle]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", ControlStore::ProjectOptions{.max_attempts = 1, .now = T0});
  const auto id = one_item(store);
  const auto c = store.claim("w", {.now = T0 + 1});
  store.finish(id, c->fence, Outcome::failed, {.now = T0 + 2});
  REQUIRE(store.item(id).status == ItemStatus::failed);
  const auto later = one_item(store, {.now = T0 + 3});
  store.retry(id, 2, {.actor = "alice", .now = T0 + 4});
  const Item row = store.item(id);
  CHECK(row.status == ItemStatus::ready);
  CHECK(row.attempt_limit == 3);  // one attempt made, two more
  const auto events = store.events(id);
  CHECK(events.back().type() == "retried");
  CHECK(events.back().event.actor == "alice");
  // The failed attempt's late report is refused as stale.
  CHECK(refusal([&] { store.finish(id, c->fence, Outcome::done); }) ==
        FenceRejected::Reason::stale_fence);
  // At the back of the queue: `later` was queued before the redrive.
  CHECK(store.claim("w", {.now = T0 + 5})->item_id == later);
  const auto again = store.claim("w", {.now = T0 + 5});
  REQUIRE(again);
  CHECK(again->item_id == id);
  CHECK(again->fence == c->fence + 1);
  store.finish(id, again->fence, Outcome::done, {.now = T0 + 6});
  CHECK(invalid([&] { store.retry(id); }) == InvalidArgument::Reason::conflict);
  CHECK(invalid([&] { store.retry(later); }) == InvalidArgument::Reason::conflict);  // claimed
  CHECK_THROWS_AS(store.retry("no-such-item"), NotFound);
  CHECK_THROWS_AS(store.retry(id, 0), InvalidArgument);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a delayed item is scheduled until its run_at: and a claim takes the item available "
          "earliest",
          "[lifecycle]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  const auto later = one_item(store, {.now = T0, .delay = 60 * kSecond});
  const auto soon = one_item(store, {.now = T0, .run_at = T0 + 10 * kSecond});
  const auto past = one_item(store, {.now = T0, .run_at = T0 - 1});  // no delay at all
  CHECK(store.item(later).status == ItemStatus::scheduled);
  CHECK(store.item(later).run_at == T0 + 60 * kSecond);
  CHECK(store.item(past).status == ItemStatus::ready);
  CHECK(store.claim("w", {.now = T0 + 1})->item_id == past);
  CHECK_FALSE(store.claim("w", {.now = T0 + 10 * kSecond - 1}));
  // Due at T0 + 10 s, it ranks before an item queued after that.
  const auto ready = one_item(store, {.now = T0 + 20 * kSecond});
  CHECK(store.claim("w", {.now = T0 + 30 * kSecond})->item_id == soon);
  CHECK(store.claim("w", {.now = T0 + 30 * kSecond})->item_id == ready);
  CHECK_FALSE(store.claim("w", {.now = T0 + 30 * kSecond}));
  // reschedule: a scheduled item earlier, a ready one later; never a claimed one.
  store.reschedule(later, T0 + 40 * kSecond, {.now = T0 + 31 * kSecond});
  CHECK(store.item(later).run_at == T0 + 40 * kSecond);
  const auto moved = one_item(store, {.now = T0 + 32 * kSecond});
  store.reschedule_in(moved, 100 * kSecond, {.now = T0 + 33 * kSecond});
  CHECK(store.item(moved).status == ItemStatus::scheduled);
  CHECK(store.item(moved).run_at == T0 + 133 * kSecond);
  const auto c = store.claim("w", {.now = T0 + 41 * kSecond});
  REQUIRE(c);
  CHECK(c->item_id == later);
  CHECK(invalid([&] { store.reschedule(later, T0 + 50 * kSecond); }) ==
        InvalidArgument::Reason::conflict);
  // A time already past makes it ready at once.
  store.reschedule(moved, T0, {.now = T0 + 42 * kSecond});
  CHECK(store.item(moved).status == ItemStatus::ready);
  CHECK_THROWS_AS(store.reschedule(moved, kMaxNow + 1), InvalidArgument);
  CHECK_THROWS_AS(one_item(store, {.run_at = T0, .delay = kSecond}), InvalidArgument);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("cancel ends a ready: scheduled or claimed item: its holder is refused with reason "
          "cancelled and the gate says work_terminal",
          "[lifecycle]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  const auto ready = one_item(store);
  const auto scheduled = one_item(store, {.delay = 60 * kSecond});
  const auto claimed = store.enqueue("alpha", "{}", {.kind = WorkKind::pr, .head = "h1", .now = T0});
  store.open_session("s1", {}, T0);
  const auto a = store.assign_and_lease("s1", claimed, {"push"}, {}, T0 + 1);
  REQUIRE(a.is_assigned());
  store.cancel(ready, "not wanted", {.actor = "alice", .now = T0 + 2});
  store.cancel(scheduled, "", {.now = T0 + 2});
  store.cancel(claimed, "superseded", {.actor = "alice", .now = T0 + 3});
  for (const auto& id : {ready, scheduled, claimed}) {
    CHECK(store.item(id).status == ItemStatus::cancelled);
  }
  const auto events = store.events(claimed);
  CHECK(events.back().type() == "cancelled");
  CHECK(fence_of(events.back().event.body) == std::optional<Fence>(a.fence));
  CHECK_FALSE(fence_of(store.events(ready).back().event.body));
  using Reason = FenceRejected::Reason;
  CHECK(refusal([&] { store.finish(claimed, a.fence, Outcome::done); }) == Reason::cancelled);
  CHECK(refusal([&] { store.heartbeat(claimed, a.fence); }) == Reason::cancelled);
  CHECK(refusal([&] { store.release(claimed, a.fence); }) == Reason::cancelled);
  CHECK(store.require_valid_assignment("s1", claimed, a.fence, "push", {}, T0 + 4).reason() ==
        GateReason::work_terminal);
  CHECK(invalid([&] { store.cancel(ready); }) == InvalidArgument::Reason::conflict);
  CHECK_THROWS_AS(store.cancel("no-such-item"), NotFound);
  CHECK_FALSE(store.claim("w", {.now = T0 + 100 * kSecond}));
  // A cancelled item can be redriven.
  store.retry(ready, {}, {.now = T0 + 5});
  CHECK(store.item(ready).status == ItemStatus::ready);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a paused project's items are passed over by claim: assign and allocate: its claimed "
          "work finishes and enqueue still queues",
          "[lifecycle]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  store.create_project("beta", "B", "open", T0);
  const auto held = one_item(store);
  const auto c = store.claim("w", {.now = T0 + 1});
  REQUIRE(c);
  const auto waiting = one_item(store, {.now = T0 + 2});
  const auto pr = store.enqueue("alpha", "{}", {.kind = WorkKind::pr, .head = "h", .now = T0 + 2});
  const auto elsewhere = store.enqueue("beta", "{}", {}, T0 + 3);
  CHECK(store.pause_project("alpha", "deploy freeze", {.actor = "ops", .now = T0 + 4}));
  CHECK_FALSE(store.pause_project("alpha", "again", {.now = T0 + 5}));  // already paused
  CHECK(store.project("alpha").paused);
  CHECK(store.project("alpha").pause_reason == "deploy freeze");
  // Another project's items run on; alpha's wait.
  CHECK(store.claim("w", {.now = T0 + 6})->item_id == elsewhere);
  CHECK_FALSE(store.claim("w", {.now = T0 + 6}));
  store.open_session("s1", {}, T0);
  CHECK(store.assign_and_lease("s1", pr, {"push"}, {}, T0 + 6).outcome ==
        AssignOutcome::no_safe_work);
  // (beta's one item is w's: the allocator waits for it, and lists alpha's
  // first candidate as paused.)
  const auto plan = store.allocate_next("s1", AllocateMode::preview, {}, {}, T0 + 6);
  CHECK(plan.outcome == AllocateOutcome::wait);
  CHECK(std::count_if(plan.skipped.begin(), plan.skipped.end(), [&](const auto& s) {
          return s.reason == SkipReason::project_paused && s.item_id == held;
        }) == 1);
  CHECK(std::none_of(plan.skipped.begin(), plan.skipped.end(), [&](const auto& s) {
          return s.item_id == waiting || s.item_id == pr;
        }));
  // Work already claimed heartbeats and finishes; enqueue queues.
  store.heartbeat(held, c->fence, {.now = T0 + 7});
  store.finish(held, c->fence, Outcome::done, {.now = T0 + 8});
  const auto queued = one_item(store, {.now = T0 + 9});
  CHECK(store.item(queued).status == ItemStatus::ready);
  CHECK(store.resume_project("alpha", {.now = T0 + 10}));
  CHECK_FALSE(store.resume_project("alpha", {.now = T0 + 11}));
  CHECK(store.claim("w", {.now = T0 + 12})->item_id == waiting);
  const auto events = store.events(held);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("bulk cancel and retry go in bounded transactions under one operation id: a dry run "
          "writes nothing",
          "[lifecycle]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  store.create_project("beta", "B", "open", T0);
  const std::size_t n = ControlStore::kBulkBatch * 2 + 7;
  std::vector<std::string> payloads(n, "{}");
  const auto ids = store.enqueue_batch("alpha", payloads, {}, T0);
  const auto other = store.enqueue("beta", "{}", {}, T0);
  const auto held = store.claim("w", {.now = T0 + 1});
  REQUIRE(held);
  const auto before = sql_column(db, "SELECT count(*) FROM events");
  const auto dry = store.cancel_matching("alpha", {.dry_run = true, .now = T0 + 2});
  CHECK(dry.count == static_cast<std::int64_t>(n));
  CHECK(dry.operation.empty());
  CHECK(dry.first_ids.size() == ControlStore::kBulkListed);
  CHECK(sql_column(db, "SELECT count(*) FROM events") == before);

  const auto done = store.cancel_matching(
      "alpha", {.statuses = {ItemStatus::ready}, .reason = "bulk", .actor = "ops", .now = T0 + 3});
  CHECK(done.count == static_cast<std::int64_t>(n - 1));  // the claimed one was not asked for
  // The dry run listed what the real one changed first (queue order).
  CHECK(done.first_ids == dry.first_ids);
  CHECK_FALSE(done.operation.empty());
  std::set<std::string> operations;
  for (const auto& id : ids) {
    const Item row = store.item(id);
    if (id == held->item_id) {
      CHECK(row.status == ItemStatus::claimed);
      continue;
    }
    CHECK(row.status == ItemStatus::cancelled);
    const auto last = store.events(id).back();
    REQUIRE(std::holds_alternative<ItemCancelled>(last.event.body));
    operations.insert(std::get<ItemCancelled>(last.event.body).operation);
  }
  CHECK(operations == std::set<std::string>{done.operation});
  CHECK(store.item(other).status == ItemStatus::ready);  // another project: untouched

  const auto again = store.retry_matching("alpha", {.statuses = {ItemStatus::cancelled},
                                                    .attempts = 2, .now = T0 + 4});
  CHECK(again.count == static_cast<std::int64_t>(n - 1));
  CHECK(store.status_counts(std::string("alpha")).ready == static_cast<std::int64_t>(n - 1));
  // Statuses that do not fit the action are refused, naming them.
  CHECK_THROWS_AS(store.cancel_matching("alpha", {.statuses = {ItemStatus::done}}),
                  InvalidArgument);
  CHECK_THROWS_AS(store.retry_matching("alpha", {.statuses = {ItemStatus::ready}}),
                  InvalidArgument);
  CHECK_THROWS_AS(store.cancel_matching("gamma", {}), NotFound);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("bad lifecycle input is refused and changes nothing", "[lifecycle]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  const auto before = sql_column(db, "SELECT count(*) FROM events");
  CHECK_THROWS_AS(store.create_project("beta", "B", ControlStore::ProjectOptions{
                                                        .max_attempts = 2, .backoff = "exp:1s"}),
                  InvalidArgument);
  CHECK_THROWS_AS(store.set_retry_policy("alpha", 2, "fixed:0s"), InvalidArgument);
  CHECK_THROWS_AS(store.set_retry_policy("alpha", 2, "exponential:1m:1s"), InvalidArgument);
  CHECK_THROWS_AS(store.set_retry_policy("alpha", 0, "fixed:1s"), InvalidArgument);
  CHECK_THROWS_AS(store.set_retry_policy("nope", 2, "none"), NotFound);
  CHECK_THROWS_AS(one_item(store, {.backoff = "fixed:-1s"}), InvalidArgument);
  CHECK_THROWS_AS(one_item(store, {.run_at = kMaxNow + 1}), InvalidArgument);
  CHECK_THROWS_AS(one_item(store, {.delay = 0}), InvalidArgument);
  CHECK_THROWS_AS(store.pause_project("nope"), NotFound);
  CHECK(sql_column(db, "SELECT count(*) FROM events") == before);
  CHECK(store.visible_projects() == std::vector<std::string>{"alpha"});
}

TEST_CASE("verify names a lifecycle row edited behind the engine's back", "[lifecycle][verify]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  std::string id;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", ControlStore::ProjectOptions{.max_attempts = 3, .now = T0});
    id = one_item(store);
    const auto c = store.claim("w", {.now = T0 + 1});
    store.finish(id, c->fence, Outcome::failed, {.now = T0 + 2});
    REQUIRE(store.item(id).status == ItemStatus::scheduled);
  }
  std::string kind;
  SECTION("run_at moved earlier") {
    sql(db, "UPDATE items SET run_at = 1 WHERE item_id = '" + id + "'");
    kind = "schedule_disagrees";
  }
  SECTION("the attempt limit raised") {
    sql(db, "UPDATE items SET attempt_limit = 99 WHERE item_id = '" + id + "'");
    kind = "schedule_disagrees";
  }
  SECTION("made ready again") {
    sql(db, "UPDATE items SET status = 'ready' WHERE item_id = '" + id + "'");
    kind = "status_disagrees";
  }
  SECTION("the project's pause undone") {
    sql(db, "UPDATE projects SET max_attempts = 0 WHERE project_id = 'alpha'");
    kind = "project_row_disagrees";
  }
  CHECK(problem_kinds(verify_file(db)).contains(kind));
}

TEST_CASE("a version-6 database migrates to the lifecycle schema: keeping its rows",
          "[lifecycle][migration][sqlite]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "old.db");
  std::string held, waiting;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    held = store.enqueue("alpha", "{}", {}, T0);
    waiting = store.enqueue("alpha", "{\"x\":1}", {}, T0 + 1);
    REQUIRE(store.claim("w", {.now = T0 + 2})->item_id == held);
  }
  sql(db, std::string(test::kBackToVersion6) + "PRAGMA wal_checkpoint(TRUNCATE);");
  REQUIRE(sql_column(db, "PRAGMA user_version") == std::vector<std::string>{"6"});
  {
    ControlStore store{db};  // a writer migrates
    CHECK(store.item(held).status == ItemStatus::claimed);
    CHECK(store.item(waiting).status == ItemStatus::ready);
    CHECK(store.item(waiting).attempt_limit == 0);
    const auto later = store.enqueue("alpha", "{}", {.now = T0 + 3, .delay = kSecond});
    CHECK(store.item(later).status == ItemStatus::scheduled);
    store.pause_project("alpha", "", {.now = T0 + 4});
    CHECK(store.project("alpha").paused);
  }
  CHECK(sql_column(db, "PRAGMA user_version") ==
        std::vector<std::string>{std::to_string(storage::kSqliteSchemaVersion)});
  CHECK(verify_file(db).empty());
}

// ---- cron schedules ---------------------------------------------------------------

TEST_CASE("a schedule fires one item per occurrence from a claim or a tick: with no daemon",
          "[lifecycle][schedule]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);  // T0 is a whole minute (08:00 UTC)
  store.add_schedule("every5", {.project_id = "alpha", .cron = "*/5 * * * *",
                                .payload = R"({"job":"sync"})", .now = T0});
  const Micros minute = 60 * kSecond;
  CHECK(store.schedules().at(0).next_at == T0 + 5 * minute);
  CHECK_FALSE(store.claim("w", {.now = T0 + 5 * minute - 1}));
  // The claim at the occurrence fires it and takes its item, in one transaction.
  const auto c = store.claim("w", {.now = T0 + 5 * minute});
  REQUIRE(c);
  CHECK(c->payload == R"({"job":"sync"})");
  const Item row = store.item(c->item_id);
  CHECK(row.key == schedule_item_key("every5", T0 + 5 * minute));
  CHECK(store.events(c->item_id).front().event.actor == "schedule:every5");
  // Three occurrences missed: catch-up none fires only the latest.
  CHECK(store.tick(T0 + 21 * minute) == 1);
  const ScheduleRow s = store.schedules().at(0);
  CHECK(s.fired == 2);
  CHECK(s.last_occurrence == T0 + 20 * minute);
  CHECK(s.next_at == T0 + 25 * minute);
  CHECK(store.tick(T0 + 21 * minute) == 0);  // nothing due twice
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("catch-up all or N fires the missed occurrences: overlap skip passes over while the "
          "last item is open",
          "[lifecycle][schedule]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  const Micros hour = 3600 * kSecond;
  store.add_schedule("all", {.project_id = "alpha", .cron = "@hourly",
                             .catch_up = ControlStore::kCatchUpAll, .now = T0});
  store.add_schedule("two", {.project_id = "alpha", .cron = "@hourly", .catch_up = 2, .now = T0});
  store.add_schedule("solo", {.project_id = "alpha", .cron = "@hourly",
                              .overlap = ControlStore::Overlap::skip, .now = T0});
  // Five hours of downtime.
  CHECK(store.tick(T0 + 5 * hour) == 5 + 2 + 1);
  std::map<std::string, ScheduleRow> rows;
  for (auto& r : store.schedules()) rows[r.name] = r;
  CHECK(rows["all"].fired == 5);
  CHECK(rows["two"].fired == 2);
  CHECK(rows["solo"].fired == 1);
  // solo's item is still ready: the next occurrence is skipped, not fired.
  CHECK(store.tick(T0 + 6 * hour) == 2);  // all and two fire; solo skips
  for (auto& r : store.schedules()) rows[r.name] = r;
  CHECK(rows["solo"].fired == 1);
  CHECK(rows["solo"].last_occurrence == T0 + 6 * hour);
  std::int64_t skipped = 0;
  for (const auto& e : store.events(rows["solo"].last_item)) (void)e;
  (void)skipped;
  CHECK(store.status_counts().ready == 5 + 1 + 2 + 1 + 1);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("schedules refuse what cannot fire: pause and resume from the next occurrence: and "
          "never reuse a name",
          "[lifecycle][schedule]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  const auto before = sql_column(db, "SELECT count(*) FROM events");
  for (const char* bad : {"61 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8",
                          "*/0 * * * *", "5-1 * * * *", "* * * *", "@reboot", "0 0 30 2 *"}) {
    INFO(bad);
    CHECK_THROWS_AS(store.add_schedule("s", {.project_id = "alpha", .cron = bad, .now = T0}),
                    InvalidArgument);
  }
  CHECK_THROWS_AS(store.add_schedule("s", {.project_id = "alpha", .cron = "@daily",
                                           .zone = "Mars/Olympus", .now = T0}),
                  InvalidArgument);
  CHECK_THROWS_AS(store.add_schedule("s", {.project_id = "alpha", .cron = "@daily",
                                           .zone = "../../etc/passwd", .now = T0}),
                  InvalidArgument);
  CHECK_THROWS_AS(store.add_schedule("s", {.project_id = "nope", .cron = "@daily", .now = T0}),
                  NotFound);
  CHECK_THROWS_AS(store.add_schedule("s", {.project_id = "alpha", .cron = "@daily",
                                           .payload = "{not json", .now = T0}),
                  InvalidArgument);
  CHECK(sql_column(db, "SELECT count(*) FROM events") == before);

  const Micros hour = 3600 * kSecond;
  store.add_schedule("s", {.project_id = "alpha", .cron = "@hourly", .now = T0});
  CHECK(invalid([&] { store.add_schedule("s", {.project_id = "alpha", .cron = "@daily"}); }) ==
        InvalidArgument::Reason::already_exists);
  CHECK(store.pause_schedule("s", T0 + 1));
  CHECK_FALSE(store.pause_schedule("s", T0 + 2));
  CHECK(store.tick(T0 + 3 * hour) == 0);  // paused: nothing fires
  CHECK(store.resume_schedule("s", T0 + 3 * hour + 1));
  CHECK(store.schedules().at(0).next_at == T0 + 4 * hour);  // the hours paused are not fired
  CHECK(store.remove_schedule("s", T0 + 3 * hour + 2));
  CHECK_FALSE(store.remove_schedule("s", T0 + 3 * hour + 3));
  CHECK(store.tick(T0 + 10 * hour) == 0);
  CHECK(invalid([&] { store.add_schedule("s", {.project_id = "alpha", .cron = "@daily"}); }) ==
        InvalidArgument::Reason::already_exists);
  CHECK_THROWS_AS(store.resume_schedule("s"), InvalidArgument);
  CHECK_THROWS_AS(store.pause_schedule("nope"), NotFound);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a time zone's daylight-saving change fires a 02:30 job once: at the jump",
          "[lifecycle][schedule]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  // 2026-03-08 in America/New_York: 02:00 EST jumps to 03:00 EDT (07:00 UTC).
  constexpr Micros kMar7 = 1'772'866'800'000'000;  // 2026-03-07 07:00 UTC, 02:00 EST
  store.create_project("alpha", "A", "open", kMar7);
  store.add_schedule("nightly", {.project_id = "alpha", .cron = "30 2 * * *",
                                 .zone = "America/New_York", .now = kMar7});
  CHECK(store.schedules().at(0).next_at == kMar7 + 1800 * kSecond);  // 02:30 EST, 07:30 UTC
  CHECK(store.tick(kMar7 + 1800 * kSecond) == 1);
  // The next day 02:30 does not exist: it fires at 03:00 EDT, 07:00 UTC.
  CHECK(store.schedules().at(0).next_at == kMar7 + 86400 * kSecond);
}

TEST_CASE("processes racing to fire one schedule make exactly one item per occurrence",
          "[lifecycle][schedule][processes]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  const Micros minute = 60 * kSecond;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    store.add_schedule("m", {.project_id = "alpha", .cron = "* * * * *",
                             .catch_up = ControlStore::kCatchUpAll, .now = T0});
  }
  // 8 processes tick and claim at the same clock, minute after minute.
  constexpr int kProcesses = 8;
  constexpr int kMinutes = 40;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 0;
      try {
        ControlStore store{db};
        for (int m = 1; m <= kMinutes; ++m) {
          if ((m + p) % 2 == 0) {
            store.tick(T0 + m * minute);
          } else if (auto c = store.claim(fmt_owner(p), {.lease = Seconds{86400},
                                                           .now = T0 + m * minute})) {
            // (The processes' clocks run apart: a lease shorter than the
            // walk would lapse for one that is ahead, and be reclaimed.)
            store.finish(c->item_id, c->fence, Outcome::done, {.now = T0 + m * minute});
          }
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "process %d: %s\n", p, e.what());
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  ControlStore store{db};
  const ScheduleRow s = store.schedules().at(0);
  CHECK(s.fired == kMinutes);
  CHECK(s.next_at == T0 + (kMinutes + 1) * minute);
  const auto counts = store.status_counts();
  CHECK(counts.ready + counts.done + counts.claimed == kMinutes);
  CHECK(sql_column(db, "SELECT count(DISTINCT idem_key) FROM items") ==
        std::vector<std::string>{std::to_string(kMinutes)});
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a schedule's key prefix is reserved: its catch-up is bounded: and a schedule that no "
          "longer parses never fails a claim",
          "[lifecycle][schedule]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  CHECK_THROWS_AS(one_item(store, {.key = "schedule:s@1"}), InvalidArgument);
  CHECK_THROWS_AS(store.add_schedule("s", {.project_id = "alpha", .cron = "@hourly",
                                           .catch_up = ControlStore::kMaxCatchUp + 1, .now = T0}),
                  InvalidArgument);
  for (const char* zone : {"localtime", "posixrules"}) {
    CHECK_THROWS_AS(store.add_schedule("s", {.project_id = "alpha", .cron = "@hourly",
                                             .zone = zone, .now = T0}),
                    InvalidArgument);
  }
  store.add_schedule("s", {.project_id = "alpha", .cron = "* * * * *", .zone = "",
                           .catch_up = ControlStore::kCatchUpAll, .now = T0});
  CHECK(store.schedules().at(0).zone == "UTC");
  // A week down with catch-up all: a claim fires a bounded batch on its way,
  // a tick the rest, in bounded transactions; one item per minute in all.
  const Micros week = 7 * 24 * 3600 * kSecond;
  REQUIRE(store.claim("w", {.now = T0 + week}));
  CHECK(store.schedules().at(0).fired < 100);
  store.tick(T0 + week);
  CHECK(store.schedules().at(0).fired == 7 * 24 * 60);
  // An edited zone (verify names it) fires nothing, and claims go on.
  sql(db, "UPDATE schedules SET zone = 'Mars/Olympus'");
  one_item(store, {.now = T0 + week + 1});
  CHECK(store.claim("w", {.now = T0 + week + 2 * 60 * kSecond}));
  CHECK(problem_kinds(verify_file(db)).contains("schedule_row_disagrees"));
}

TEST_CASE("a PostgreSQL store of schema 1 migrates to the lifecycle schema: keeping its rows",
          "[lifecycle][migration]") {
  if (test_context().backend_name() != "postgres") return;  // SQLite's: the version-6 case
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "old");
  std::string held;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    held = store.enqueue("alpha", "{}", {}, T0);
    REQUIRE(store.claim("w", {.now = T0 + 1})->item_id == held);
  }
  // What schema 1 was: no lifecycle columns, no schedules, the old CHECK.
  sql(db, std::string(cplane::test::kPostgresBackTo2) +
      "DROP TABLE schedules; DROP INDEX items_due; DROP INDEX items_failed; "
      "DROP INDEX items_cancelled; DROP INDEX items_alloc; "
      "CREATE INDEX items_alloc ON items (project_id, (terminal_since IS NOT NULL) DESC, "
      "priority DESC, queued_seq) WHERE status IN ('ready', 'claimed'); "
      "ALTER TABLE items DROP CONSTRAINT items_status_check, ADD CONSTRAINT items_status_check "
      "CHECK (status IN ('ready', 'claimed', 'done', 'failed', 'closed')), "
      "DROP COLUMN max_attempts, DROP COLUMN backoff, DROP COLUMN attempt_limit, "
      "DROP COLUMN run_at, DROP COLUMN ended_fence; "
      "ALTER TABLE projects DROP COLUMN max_attempts, DROP COLUMN backoff, DROP COLUMN paused, "
      "DROP COLUMN pause_reason; "
      "UPDATE store_info SET value = '1' WHERE key = 'schema_version'");
  {
    ControlStore store{db};  // opening to write migrates
    CHECK(store.schema_version() == 5);  // kPostgresSchemaVersion
    CHECK(store.item(held).status == ItemStatus::claimed);
    const auto later = store.enqueue("alpha", "{}", {.now = T0 + 2, .delay = kSecond});
    CHECK(store.item(later).status == ItemStatus::scheduled);
    store.add_schedule("h", {.project_id = "alpha", .cron = "@hourly", .now = T0 + 3});
    CHECK(verify_ledger(store).empty());
  }
}

TEST_CASE("a release gives its attempt back: under a policy a released item is never handed out "
          "past its attempts: and only failed or lapsed attempts count",
          "[lifecycle]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A", ControlStore::ProjectOptions{.max_attempts = 2, .now = T0});
  const auto id = one_item(store);
  // Three claims given back: none of them spends an attempt.
  for (Fence f = 1; f <= 3; ++f) {
    const auto c = store.claim("w", {.now = T0 + static_cast<Micros>(f)});
    REQUIRE(c);
    CHECK(c->fence == f);
    store.release(id, f, "not now", {.now = T0 + static_cast<Micros>(f)});
  }
  CHECK(store.item(id).attempt_limit == 2 + 3);
  // Then two real attempts, both failed: the second is the dead end.
  auto c = store.claim("w", {.now = T0 + 10});
  store.finish(id, c->fence, Outcome::failed, {.now = T0 + 11});
  CHECK(store.item(id).status == ItemStatus::scheduled);
  c = store.claim("w", {.now = T0 + 12});
  REQUIRE(c);
  store.finish(id, c->fence, Outcome::failed, {.now = T0 + 13});
  CHECK(store.item(id).status == ItemStatus::failed);
  CHECK(verify_ledger(store).empty());
  // A row whose limit was lowered behind the engine's back is named.
  sql(db, "UPDATE items SET attempt_limit = 1 WHERE item_id = '" + id + "'");
  CHECK(problem_kinds(verify_file(db)).contains("schedule_disagrees"));
}
