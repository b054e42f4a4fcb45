// Sessions, forge work items, atomic assign + lease and the mutation gate:
// each rule (R1-R4 of the issue) has a test here that fails without it.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <cplane/cplane.hpp>

#include "commands/testing.hpp"
#include "events/codec.hpp"
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
const std::vector<std::string> kPushComment = {"push", "comment"};

// A store with one project, two sessions and a pr at head "aaa".
struct Forge {
  std::string db;
  std::string pr;
  explicit Forge(const TempDir& dir) : db(test_context().fresh_store(dir, "f.db")) {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    store.create_project("beta", "B", "open", T0);
    store.grant("alpha", "alice", T0);
    store.open_session("s1", {}, T0);
    store.open_session("s2", {}, T0);
    pr = store.enqueue("alpha", "{}",
                       {.kind = WorkKind::pr, .ref = "o/r#1", .head = "aaa", .author = "s9",
                        .now = T0});
  }
};

std::vector<std::string> types(ControlStore& store, const std::string& item) {
  std::vector<std::string> out;
  for (const auto& e : store.events(item)) out.emplace_back(e.type());
  return out;
}



template <class F>
NotFound::Reason not_found(F&& f) {
  try {
    f();
  } catch (const NotFound& e) {
    return e.reason();
  }
  FAIL("no NotFound");
  return NotFound::Reason::unknown_item;
}

}  // namespace

TEST_CASE("a session opens once, is seen, closes, and its id is never reused", "[session]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const auto before = sql_column(f.db, "SELECT count(*) FROM events");
  store.open_session("s1", {}, T0 + kSecond);  // open already, as asked: nothing recorded
  CHECK(sql_column(f.db, "SELECT count(*) FROM events") == before);
  CHECK_THROWS_AS(store.open_session("s1", std::string("alice"), T0), InvalidArgument);
  CHECK(not_found([&] { store.session_heartbeat("ghost", {}, T0); }) ==
        NotFound::Reason::unknown_session);
  CHECK(not_found([&] { store.close_session("ghost", T0); }) == NotFound::Reason::unknown_session);
  store.session_heartbeat("s1", {}, T0 + 2 * kSecond);
  store.close_session("s1", T0 + 3 * kSecond);
  store.close_session("s1", T0 + 4 * kSecond);  // closed already: nothing recorded
  CHECK(not_found([&] { store.session_heartbeat("s1", {}, T0 + 5 * kSecond); }) ==
        NotFound::Reason::session_closed);
  CHECK(not_found([&] { store.assign_and_lease("s1", f.pr, {"push"}, {}, T0 + 5 * kSecond); }) ==
        NotFound::Reason::session_closed);
  CHECK_THROWS_AS(store.open_session("s1", {}, T0 + 6 * kSecond), InvalidArgument);
  const auto all = store.sessions(T0 + 6 * kSecond);
  REQUIRE(all.size() == 2);
  CHECK(all[0].row.session_id == "s1");
  CHECK(all[0].row.opened_at == T0);
  CHECK(all[0].row.last_seen_at == T0 + 3 * kSecond);
  CHECK(all[0].row.closed_at == T0 + 3 * kSecond);
  CHECK(all[1].row.is_open());
  CHECK(sql_column(f.db, "SELECT type FROM events WHERE stream_kind = 'session' AND stream_id = "
                         "'s1' ORDER BY seq") ==
        std::vector<std::string>{"session_opened", "session_heartbeat", "session_closed"});
  CHECK(verify_file(f.db).empty());
}

TEST_CASE("a session heartbeat extends each live lease it holds and leaves a lapsed one lapsed",
          "[session][lease]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const auto task = store.enqueue("alpha", "{}", {}, T0);
  REQUIRE(store.assign_and_lease("s1", f.pr, kPushComment, Seconds{100}, T0));
  REQUIRE(store.assign_and_lease("s1", task, {"push"}, Seconds{5}, T0));
  const auto extended = store.session_heartbeat("s1", Seconds{60}, T0 + 10 * kSecond);
  REQUIRE(extended.size() == 1);  // the task's lease lapsed at T0 + 5 s
  CHECK(extended[0] == std::pair{f.pr, T0 + 70 * kSecond});
  CHECK(store.item(f.pr).lease_expires_at == T0 + 70 * kSecond);
  CHECK(store.item(task).lease_expires_at == T0 + 5 * kSecond);
  CHECK(types(store, f.pr) == std::vector<std::string>{"queued", "assigned", "lease_extended"});
  CHECK(types(store, task) == std::vector<std::string>{"queued", "assigned"});
  // The lapsed one can be taken by another session, under a higher fence.
  const auto taken = store.assign_and_lease("s2", task, {"push"}, {}, T0 + 11 * kSecond);
  CHECK(taken.fence == 2);
  CHECK(store.sessions(T0 + 11 * kSecond)[0].items == std::vector<std::string>{f.pr});
  CHECK(verify_file(f.db).empty());
}

TEST_CASE("closing a session releases what it holds, and the next holder's fence is higher",
          "[session][lease]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const auto a = store.assign_and_lease("s1", f.pr, kPushComment, {}, T0);
  REQUIRE(a.fence == 1);
  CHECK(store.close_session("s1", T0 + kSecond) == std::vector<std::string>{f.pr});
  const Item row = store.item(f.pr);
  CHECK(row.status == ItemStatus::ready);
  CHECK(row.session.empty());
  CHECK(types(store, f.pr).back() == "released");
  // The closed session's fence is dead at the gate.
  CHECK(store.require_valid_assignment("s1", f.pr, 1, "push", {}, T0 + 2 * kSecond).reason() ==
        GateReason::no_live_lease);
  CHECK(store.assign_and_lease("s2", f.pr, {"push"}, {}, T0 + 2 * kSecond).fence == 2);
  CHECK(verify_file(f.db).empty());
}

TEST_CASE("R2: while one session holds a live lease every other one is told to wait",
          "[assign][R2]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const auto first = store.assign_and_lease("s1", f.pr, kPushComment, Seconds{30}, T0);
  REQUIRE(first.outcome == AssignOutcome::assigned);
  CHECK(first.fence == 1);
  CHECK(first.expected_head == "aaa");
  CHECK(first.actions == std::vector<std::string>{"comment", "push"});
  const auto events_before = sql_column(f.db, "SELECT count(*) FROM events");
  const auto second = store.assign_and_lease("s2", f.pr, {"push"}, {}, T0 + 29 * kSecond);
  CHECK(second.outcome == AssignOutcome::wait);
  CHECK(second.until == T0 + 30 * kSecond);
  CHECK(second.fence == 0);
  CHECK(sql_column(f.db, "SELECT count(*) FROM events") == events_before);  // a wait writes nothing
  // Exactly at the lapse the item is free again.
  const auto after = store.assign_and_lease("s2", f.pr, {"push"}, {}, T0 + 30 * kSecond);
  CHECK(after.outcome == AssignOutcome::assigned);
  CHECK(after.fence == 2);
  CHECK(store.require_valid_assignment("s1", f.pr, 1, "push", {}, T0 + 31 * kSecond).reason() ==
        GateReason::no_live_lease);
  CHECK(store.assign_and_lease("s1", f.pr, {"push"}, {}, T0 + 31 * kSecond).outcome ==
        AssignOutcome::wait);
  CHECK(verify_file(f.db).empty());
}

TEST_CASE("the holder asking again keeps its fence and renews its lease: a lost reply is safe",
          "[assign]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const auto first = store.assign_and_lease("s1", f.pr, kPushComment, Seconds{30}, T0);
  const auto again = store.assign_and_lease("s1", f.pr, kPushComment, Seconds{30}, T0 + 10 * kSecond);
  CHECK(again.outcome == AssignOutcome::assigned);
  CHECK(again.fence == first.fence);
  CHECK(again.lease_expires_at == T0 + 40 * kSecond);
  CHECK(again.expected_head == "aaa");
  CHECK(types(store, f.pr) == std::vector<std::string>{"queued", "assigned", "lease_extended"});
  CHECK(store.require_valid_assignment("s1", f.pr, first.fence, "push", {}, T0 + 35 * kSecond));
}

TEST_CASE("R3: a terminal, invisible or missing item is no_safe_work, and never a wait",
          "[assign][R3]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  store.open_session("scoped", std::string("alice"), T0);  // sees alpha only
  const auto hidden = store.enqueue("beta", "{}", {}, T0);
  // Held by another session: an unscoped session would wait; the scoped one
  // must learn nothing, not even that it is held.
  REQUIRE(store.assign_and_lease("s1", hidden, {"push"}, {}, T0));
  CHECK(store.assign_and_lease("s2", hidden, {"push"}, {}, T0).outcome == AssignOutcome::wait);
  const auto invisible = store.assign_and_lease("scoped", hidden, {"push"}, {}, T0);
  const auto missing = store.assign_and_lease("scoped", "no-such-item", {"push"}, {}, T0);
  CHECK(invisible.outcome == AssignOutcome::no_safe_work);
  CHECK(missing.outcome == AssignOutcome::no_safe_work);
  CHECK(invisible.until == 0);
  CHECK(invisible.fence == missing.fence);
  // Terminal in each way.
  const auto done = store.enqueue("alpha", "{}", {}, T0);
  const auto failed = store.enqueue("alpha", "{}", {}, T0);
  const auto merged = store.enqueue("alpha", "{}", {.kind = WorkKind::pr, .head = "h", .now = T0});
  const auto closed = store.enqueue("alpha", "{}", {.kind = WorkKind::issue, .now = T0});
  store.finish(done, store.assign_and_lease("s1", done, {"push"}, {}, T0).fence, Outcome::done);
  store.finish(failed, store.assign_and_lease("s1", failed, {"push"}, {}, T0).fence,
               Outcome::failed);
  store.observe_close(merged, CloseReason::merged, T0);
  store.observe_close(closed, CloseReason::closed, T0);
  for (const auto& id : {done, failed, merged, closed}) {
    INFO(id);
    CHECK(store.assign_and_lease("scoped", id, {"push"}, {}, T0 + kSecond).outcome ==
          AssignOutcome::no_safe_work);
    CHECK(store.assign_and_lease("s2", id, {"push"}, {}, T0 + kSecond).outcome ==
          AssignOutcome::no_safe_work);
  }
  // A plain claim does not take them either.
  std::set<std::string> claimed;
  while (auto c = store.claim("w", {.now = T0 + 2 * kSecond})) claimed.insert(c->item_id);
  CHECK(claimed == std::set<std::string>{f.pr});
  CHECK(verify_file(f.db).empty());
}

TEST_CASE("claim and assign share one fence counter per item", "[assign][fence]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const auto c1 = store.claim("worker", {.now = T0});
  REQUIRE(c1);
  REQUIRE(c1->item_id == f.pr);
  CHECK(c1->fence == 1);
  // Held by a plain worker: a session waits.
  CHECK(store.assign_and_lease("s1", f.pr, {"push"}, {}, T0).outcome == AssignOutcome::wait);
  store.release(f.pr, 1, "back", {.now = T0 + kSecond});
  const auto a = store.assign_and_lease("s1", f.pr, {"push"}, {}, T0 + kSecond);
  CHECK(a.fence == 2);
  store.release(f.pr, 2, "", {.now = T0 + 2 * kSecond});
  const auto c3 = store.claim("worker", {.now = T0 + 2 * kSecond});
  REQUIRE(c3);
  CHECK(c3->fence == 3);
  CHECK(store.item(f.pr).session.empty());  // a worker's claim is no session's assignment
  CHECK(store.require_valid_assignment("s1", f.pr, 2, "push", {}, T0 + 3 * kSecond).reason() ==
        GateReason::no_live_lease);
  // Fenced reports work on an assignment as on a claim.
  store.release(f.pr, 3, "", {.now = T0 + 3 * kSecond});
  const auto b = store.assign_and_lease("s2", f.pr, {"push"}, {}, T0 + 3 * kSecond);
  CHECK_THROWS_AS(store.heartbeat(f.pr, 3, {.now = T0 + 4 * kSecond}), FenceRejected);
  CHECK(store.heartbeat(f.pr, b.fence, {.lease = Seconds{5}, .now = T0 + 4 * kSecond}) ==
        T0 + 9 * kSecond);
  store.finish(f.pr, b.fence, Outcome::done, {.now = T0 + 5 * kSecond});
  CHECK(verify_file(f.db).empty());
}

TEST_CASE("the gate denies with exactly one reason, checked in order, and fails closed",
          "[gate][R4]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const Fence fence = store.assign_and_lease("s1", f.pr, kPushComment, Seconds{60}, T0).fence;
  const Micros now = T0 + kSecond;
  auto reason = [&](const std::string& session, const std::string& item, Fence fe,
                    const std::string& action, std::optional<std::string> head,
                    Micros at) -> std::string {
    const auto v = store.require_valid_assignment(session, item, fe, action, head, at);
    if (v) return "allowed";
    CHECK_FALSE(v.message().empty());
    return to_string(v.reason());
  };
  CHECK(reason("s1", f.pr, fence, "push", {}, now) == "allowed");
  CHECK(reason("s1", f.pr, fence, "push", std::string("aaa"), now) == "allowed");
  // Fails closed: what cannot be established is no_live_lease, even when
  // every later check would fail too.
  CHECK(reason("ghost", f.pr, 99, "merge", std::string("zzz"), now) == "no_live_lease");
  CHECK(reason("s1", "no-such-item", fence, "push", {}, now) == "no_live_lease");
  CHECK(reason("", f.pr, fence, "push", {}, now) == "no_live_lease");
  CHECK(reason("s1\x1b", f.pr, fence, "push", {}, now) == "no_live_lease");
  CHECK(reason("s2", f.pr, fence, "push", {}, now) == "no_live_lease");
  CHECK(reason("s1", f.pr, fence, "push", {}, T0 + 60 * kSecond) == "no_live_lease");  // lapsed
  CHECK(reason("s1", f.pr, fence + 1, "merge", std::string("zzz"), now) == "stale_fence");
  CHECK(reason("s1", f.pr, fence - 1, "push", {}, now) == "stale_fence");
  CHECK(reason("s1", f.pr, fence, "merge", std::string("zzz"), now) == "action_not_allowed");
  CHECK(reason("s1", f.pr, fence, "push", std::string("zzz"), now) == "head_drift");
  // The head moves on the forge: the pinned one no longer holds.
  store.observe_head(f.pr, "bbb", now);
  CHECK(reason("s1", f.pr, fence, "push", {}, now) == "head_drift");
  CHECK(reason("s1", f.pr, fence, "push", std::string("bbb"), now) == "head_drift");
  CHECK(reason("s1", f.pr, fence, "merge", {}, now) == "action_not_allowed");
  // Closed on the forge: the holder is told work_terminal (after its fence).
  store.observe_close(f.pr, CloseReason::merged, now);
  CHECK(reason("s1", f.pr, fence, "push", {}, now) == "work_terminal");
  CHECK(reason("s1", f.pr, fence + 1, "push", {}, now) == "stale_fence");
  CHECK(reason("s2", f.pr, fence, "push", {}, now) == "no_live_lease");
  // require() throws for callers that want an exception.
  try {
    require(store.require_valid_assignment("s1", f.pr, fence, "push", {}, now));
    FAIL("allowed");
  } catch (const MutationDenied& e) {
    CHECK(e.reason() == GateReason::work_terminal);
  }
}

TEST_CASE("a head that moved away and back is still drift: the pin is broken until reassigned",
          "[gate][R4]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const Fence fence = store.assign_and_lease("s1", f.pr, kPushComment, {}, T0).fence;
  store.observe_head(f.pr, "bbb", T0 + 1);
  store.observe_head(f.pr, "aaa", T0 + 2);
  CHECK(store.item(f.pr).head == "aaa");
  CHECK(store.require_valid_assignment("s1", f.pr, fence, "push", std::string("aaa"), T0 + 3)
            .reason() == GateReason::head_drift);
  CHECK(store.record_mutation("s1", f.pr, fence, "push", {}, T0 + 3).reason() ==
        GateReason::head_drift);
  // A renewal keeps the broken pin; a new assignment pins the head afresh.
  store.assign_and_lease("s1", f.pr, kPushComment, {}, T0 + 4);
  CHECK(store.require_valid_assignment("s1", f.pr, fence, "push", {}, T0 + 5).reason() ==
        GateReason::head_drift);
  store.release(f.pr, fence, "re-pin", {.now = T0 + 6});
  const auto again = store.assign_and_lease("s1", f.pr, kPushComment, {}, T0 + 7);
  CHECK(again.fence == fence + 1);
  CHECK(store.record_mutation("s1", f.pr, again.fence, "push", std::string("aaa"), T0 + 8));
  CHECK(verify_file(f.db).empty());
}

TEST_CASE("a mutation that waited for the write lock past its lease is denied: the gate judges "
          "when it decides",
          "[gate][lock]") {
  // Found by the assign-race probe: the clock was read before the wait for
  // the lock, so a holder whose lease lapsed meanwhile was allowed, while
  // another session could take the item the moment the lock came free.
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const auto a = store.assign_and_lease("s1", f.pr, {"push"}, Seconds{0.3});
  REQUIRE(a);
  ControlStore holder{f.db};
  auto& backend = testing::backend(holder);
  backend.begin_write(storage::Sync::normal);  // a writer holding the lock
  backend.find_item(f.pr);  // (on PostgreSQL, the item's row lock)
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    backend.rollback();
  });
  const auto verdict = store.record_mutation("s1", f.pr, a.fence, "push");
  release.join();
  CHECK(verdict.reason() == GateReason::no_live_lease);
  CHECK(types(store, f.pr) == std::vector<std::string>{"queued", "assigned"});
}

TEST_CASE("the gate tells a scoped session nothing about items outside its scope (R3)",
          "[gate][R3]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  store.open_session("scoped", std::string("alice"), T0);  // sees alpha only
  const auto hidden = store.enqueue("beta", "{}", {}, T0);
  REQUIRE(store.assign_and_lease("s1", hidden, {"push"}, {}, T0));
  const auto held = store.require_valid_assignment("scoped", hidden, 1, "push", {}, T0 + 1);
  const auto missing = store.require_valid_assignment("scoped", "01a00000-0000-7000-8000-"
                                                      "000000000000", 1, "push", {}, T0 + 1);
  CHECK(held.reason() == missing.reason());
  auto without_id = [](std::string message, const std::string& id) {
    return message.replace(message.find(id), id.size(), "ID");
  };
  CHECK(without_id(held.message(), hidden) ==
        without_id(missing.message(), "01a00000-0000-7000-8000-000000000000"));
}

TEST_CASE("a holder's own heartbeat renews a lapsed lease nobody took, and a session heartbeat "
          "does not",
          "[session][lease]") {
  // The fence, not the clock, decides a fenced report (as for finish): the
  // holder of the current fence may renew a lease that lapsed while nobody
  // took the item. A session heartbeat extends only live leases.
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const Fence fence = store.assign_and_lease("s1", f.pr, {"push"}, Seconds{10}, T0).fence;
  CHECK(store.session_heartbeat("s1", Seconds{60}, T0 + 20 * kSecond).empty());
  CHECK(store.require_valid_assignment("s1", f.pr, fence, "push", {}, T0 + 20 * kSecond)
            .reason() == GateReason::no_live_lease);
  CHECK(store.expire_leases(T0 + 21 * kSecond) == 1);
  CHECK(store.heartbeat(f.pr, fence, {.lease = Seconds{60}, .now = T0 + 22 * kSecond}) ==
        T0 + 82 * kSecond);
  CHECK(store.require_valid_assignment("s1", f.pr, fence, "push", {}, T0 + 23 * kSecond));
  CHECK(verify_file(f.db).empty());
}

TEST_CASE("work finished by its holder is work_terminal to it at the gate", "[gate][R3]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const Fence fence = store.assign_and_lease("s1", f.pr, kPushComment, {}, T0).fence;
  store.finish(f.pr, fence, Outcome::done, {.now = T0 + kSecond});
  CHECK(store.require_valid_assignment("s1", f.pr, fence, "push", {}, T0 + 2 * kSecond)
            .reason() == GateReason::work_terminal);
}

TEST_CASE("record_mutation records what the gate allows, and nothing when it denies",
          "[gate]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const Fence fence = store.assign_and_lease("s1", f.pr, kPushComment, {}, T0).fence;
  CHECK(store.record_mutation("s1", f.pr, fence, "push", std::string("aaa"), T0 + kSecond));
  CHECK(store.record_mutation("s1", f.pr, fence, "comment", {}, T0 + kSecond));
  const auto count = sql_column(f.db, "SELECT count(*) FROM events");
  CHECK(store.record_mutation("s1", f.pr, fence, "merge", {}, T0 + kSecond).reason() ==
        GateReason::action_not_allowed);
  CHECK(store.record_mutation("s2", f.pr, fence, "push", {}, T0 + kSecond).reason() ==
        GateReason::no_live_lease);
  CHECK(store.record_mutation("s1", f.pr, fence + 1, "push", {}, T0 + kSecond).reason() ==
        GateReason::stale_fence);
  CHECK(sql_column(f.db, "SELECT count(*) FROM events") == count);
  const auto events = store.events(f.pr);
  REQUIRE(events.size() == 4);
  const auto* m = std::get_if<MutationRecorded>(&events[2].event.body);
  REQUIRE(m != nullptr);
  CHECK(*m == MutationRecorded{"s1", fence, "push", "aaa"});
  CHECK(verify_file(f.db).empty());
}

TEST_CASE("the forge's observations: head and review on a pr only, close terminal for everyone",
          "[forge][R1]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const auto task = store.enqueue("alpha", "{}", {}, T0);
  CHECK(store.item(task).kind == WorkKind::task);
  CHECK_THROWS_AS(store.observe_head(task, "x", T0), InvalidArgument);
  CHECK_THROWS_AS(store.observe_review(task, ReviewState::approved, T0), InvalidArgument);
  CHECK(not_found([&] { store.observe_close("no-such-item", CloseReason::merged, T0); }) ==
        NotFound::Reason::unknown_item);
  CHECK_FALSE(store.observe_head(f.pr, "aaa", T0));  // unchanged: nothing recorded
  CHECK(store.observe_review(f.pr, ReviewState::changes_requested, T0 + 1));
  CHECK_FALSE(store.observe_review(f.pr, ReviewState::changes_requested, T0 + 2));
  const Fence fence = store.assign_and_lease("s1", f.pr, {"push"}, {}, T0 + 3).fence;
  CHECK(store.observe_close(f.pr, CloseReason::closed, T0 + 4));
  CHECK_FALSE(store.observe_close(f.pr, CloseReason::merged, T0 + 5));
  CHECK_FALSE(store.observe_head(f.pr, "ccc", T0 + 6));  // terminal: nothing recorded
  const Item row = store.item(f.pr);
  CHECK(row.status == ItemStatus::closed);
  CHECK(row.close_reason == "closed");
  CHECK(row.review == ReviewState::changes_requested);
  CHECK(row.session == "s1");  // who held it stays on record
  CHECK(row.fence == fence);
  CHECK(row.ref == "o/r#1");
  CHECK(row.author == "s9");
  // Terminal for everyone: the holder's fence is refused, nobody claims it.
  try {
    store.finish(f.pr, fence, Outcome::done, {.now = T0 + 7});
    FAIL("accepted");
  } catch (const FenceRejected& e) {
    CHECK(e.reason() == FenceRejected::Reason::terminal);
  }
  store.finish(task, store.claim("w", {.now = T0 + 8})->fence, Outcome::done);
  CHECK_FALSE(store.claim("w", {.now = T0 + 9}).has_value());
  CHECK(store.status_counts().closed == 1);
  CHECK(verify_file(f.db).empty());
}

TEST_CASE("enqueue refuses an unknown kind, and a head or author on an item that is not a pr",
          "[forge]") {
  TempDir dir;
  Forge f(dir);
  ControlStore store{f.db};
  const auto count = sql_column(f.db, "SELECT count(*) FROM events");
  CHECK_THROWS_AS(parse_work_kind("incident"), InvalidArgument);  // R1: never a work item
  CHECK_THROWS_AS(store.enqueue("alpha", "{}", {.kind = WorkKind::issue, .head = "x"}),
                  InvalidArgument);
  CHECK_THROWS_AS(store.enqueue("alpha", "{}", {.kind = WorkKind::task, .author = "x"}),
                  InvalidArgument);
  CHECK_THROWS_AS(store.enqueue("alpha", "{}", {.kind = static_cast<WorkKind>(7)}),
                  InvalidArgument);
  CHECK_THROWS_AS(store.enqueue("alpha", "{}", {.kind = WorkKind::pr, .head = "a\nb"}),
                  InvalidArgument);
  CHECK_THROWS_AS(store.assign_and_lease("s1", f.pr, {}, {}, T0), InvalidArgument);
  CHECK_THROWS_AS(store.assign_and_lease("s1", f.pr, {"a,b"}, {}, T0), InvalidArgument);
  CHECK_THROWS_AS(store.assign_and_lease("s1", f.pr, {"push"}, Seconds{0}, T0), InvalidArgument);
  CHECK(sql_column(f.db, "SELECT count(*) FROM events") == count);
}

TEST_CASE("verify names sessions and forge fields edited behind the engine's back, and rebuild "
          "repairs them",
          "[session][verify]") {
  struct Case {
    const char* name;
    const char* tamper;
    const char* kind;
  };
  const Case cases[] = {
      {"session moved", "UPDATE items SET session = 's2' WHERE session = 's1'", "assignment_disagrees"},
      {"actions widened", "UPDATE items SET actions = 'comment,merge,push' WHERE session = 's1'",
       "assignment_disagrees"},
      {"pinned head moved", "UPDATE items SET expected_head = 'bbb' WHERE session = 's1'",
       "assignment_disagrees"},
      {"an empty action added", "UPDATE items SET actions = 'comment,push,' WHERE session = 's1'",
       "assignment_disagrees"},
      {"a drift forgotten", "UPDATE items SET head_moved = 1 WHERE session = 's1'",
       "assignment_disagrees"},
      {"head edited", "UPDATE items SET head = 'bbb' WHERE kind = 'pr'", "forge_disagrees"},
      {"kind edited", "UPDATE items SET kind = 'issue' WHERE kind = 'pr'", "forge_disagrees"},
      {"kind made up", "UPDATE items SET kind = 'incident' WHERE kind = 'pr'", "forge_disagrees"},
      {"review edited", "UPDATE items SET review = 'approved' WHERE kind = 'pr'", "forge_disagrees"},
      {"session row deleted", "DELETE FROM sessions WHERE session_id = 's2'", "session_row_missing"},
      {"session reopened", "UPDATE sessions SET closed_at = NULL WHERE session_id = 's2'",
       "session_row_disagrees"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      TempDir dir;
      Forge f(dir);
      {
        ControlStore store{f.db};
        store.assign_and_lease("s1", f.pr, kPushComment, {}, T0);
        store.close_session("s2", T0 + 1);
      }
      REQUIRE(verify_file(f.db).empty());
      sql(f.db, c.tamper);
      CHECK(problem_kinds(verify_file(f.db)).contains(c.kind));
      ControlStore store{f.db};
      rebuild(store);
      CHECK(verify_ledger(store).empty());
    }
  }
  SECTION("a session row with no history is named, and kept by rebuild") {
    TempDir dir;
    Forge f(dir);
    sql(f.db, "INSERT INTO sessions VALUES ('made-up', NULL, 1, 1, NULL, 1)");
    CHECK(problem_kinds(verify_file(f.db)) == std::set<std::string>{"session_row_without_event"});
    ControlStore store{f.db};
    const auto report = rebuild(store);
    CHECK(report.kept_total == 1);
  }
}

TEST_CASE("a mutation recorded outside the gate, or an assignment over a live lease, is named",
          "[gate][verify]") {
  TempDir dir;
  Forge f(dir);
  {
    ControlStore store{f.db};
    store.open_session("scoped", std::string("alice"), T0);
    store.assign_and_lease("s1", f.pr, kPushComment, Seconds{60}, T0);
  }
  // Appended with raw SQL and the chain recomputed: what a writer with a
  // bug leaves, which only verify's own checks can catch.
  auto forge_event = [&](const Event& event) {
    const std::string body = encode(event);
    std::string hex;
    for (unsigned char ch : body) hex += fmt::format("{:02x}", ch);
    const StreamRef stream = stream_of(event);
    test::forged_sql(f.db, fmt::format("INSERT INTO events (item_id, project_id, type, at, body, "
                                       "stream_kind, stream_id) VALUES ({0}, '{1}', '{2}', "
                                       "{3}, x'{4}', '{5}', '{6}')",
                                       event.item_id.empty() ? "NULL" : "'" + event.item_id + "'",
                                       event.project_id, type_name(event.body), event.at, hex,
                                       to_string(stream.kind), stream.id));
  };
  auto forged_problems = [&] { return problem_kinds(verify_file(f.db)); };
  SECTION("an assignment to a session never opened") {
    forge_event({T0 + 61 * kSecond, "ghost", "alpha", f.pr,
                 ItemAssigned{"ghost", 2, T0 + 100 * kSecond, 2, {"push"}, "aaa"}});
    CHECK(forged_problems().contains("assignment_not_allowed"));
  }
  SECTION("an assignment to a closed session") {
    forge_event({T0 + 61 * kSecond, "", "", "", SessionClosed{"s2"}});
    forge_event({T0 + 62 * kSecond, "s2", "alpha", f.pr,
                 ItemAssigned{"s2", 2, T0 + 100 * kSecond, 2, {"push"}, "aaa"}});
    CHECK(forged_problems().contains("assignment_not_allowed"));
  }
  SECTION("an assignment that pins another head than the item's (R4)") {
    forge_event({T0 + 61 * kSecond, "s2", "alpha", f.pr,
                 ItemAssigned{"s2", 2, T0 + 100 * kSecond, 2, {"push"}, "zzz"}});
    CHECK(forged_problems().contains("assignment_not_allowed"));
  }
  SECTION("an assignment with its actions unsorted") {
    forge_event({T0 + 61 * kSecond, "s2", "alpha", f.pr,
                 ItemAssigned{"s2", 2, T0 + 100 * kSecond, 2, {"push", "comment"}, "aaa"}});
    CHECK(forged_problems().contains("assignment_not_allowed"));
  }
  SECTION("an assignment to a session whose actor may not see the project (R3)") {
    const auto hidden = ControlStore{f.db}.enqueue("beta", "{}", {}, T0);
    forge_event({T0 + 1, "alice", "beta", hidden,
                 ItemAssigned{"scoped", 1, T0 + 100 * kSecond, 1, {"push"}, ""}});
    CHECK(forged_problems().contains("assignment_not_allowed"));
  }
  SECTION("a head or a review on an item that is not a pr") {
    const auto task = ControlStore{f.db}.enqueue("alpha", "{}", {}, T0);
    forge_event({T0 + 1, "", "alpha", task, HeadMoved{"x"}});
    CHECK(forged_problems().contains("forge_fact_invalid"));
  }
  SECTION("a session closed while it still holds an item, then mutating") {
    forge_event({T0 + 1, "", "", "", SessionClosed{"s1"}});
    CHECK(forged_problems().contains("session_closed_while_holding"));
    forge_event({T0 + 2, "s1", "alpha", f.pr, MutationRecorded{"s1", 1, "push", ""}});
    CHECK(forged_problems().contains("mutation_without_assignment"));
  }
  SECTION("a mutation by a session that holds nothing") {
    forge_event({T0 + 1, "s2", "alpha", f.pr, MutationRecorded{"s2", 1, "push", ""}});
    CHECK(problem_kinds(verify_file(f.db)).contains("mutation_without_assignment"));
  }
  SECTION("a mutation of an action not allowed") {
    forge_event({T0 + 1, "s1", "alpha", f.pr, MutationRecorded{"s1", 1, "merge", ""}});
    CHECK(problem_kinds(verify_file(f.db)).contains("mutation_without_assignment"));
  }
  SECTION("a second session assigned while the first's lease is live") {
    forge_event({T0 + 1, "s2", "alpha", f.pr,
                 ItemAssigned{"s2", 2, T0 + 100 * kSecond, 2, {"push"}, "aaa"}});
    CHECK(problem_kinds(verify_file(f.db)).contains("claim_while_leased"));
  }
  // rebuild never writes rows from such a log.
  ControlStore store{f.db};
  CHECK_THROWS_AS(rebuild(store), RebuildRefused);
}

TEST_CASE("a version-4 database migrates to sessions and forge items, keeping its rows",
          "[session][migration][sqlite]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "old.db");
  std::string held;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    store.enqueue("alpha", "{}", {}, T0);
    held = store.enqueue("alpha", "{\"x\":1}", {}, T0);
    store.claim("w", {.now = T0});
    store.claim("w", {.now = T0});
  }
  sql(db, std::string(test::kBackToVersion4) + "PRAGMA wal_checkpoint(TRUNCATE);");
  REQUIRE(sql_column(db, "PRAGMA user_version") == std::vector<std::string>{"4"});
  {
    ControlStore store{db};  // a writer migrates
    CHECK(store.item(held).status == ItemStatus::claimed);
    CHECK(store.item(held).kind == WorkKind::task);
    store.open_session("s1", {}, T0);
    const auto pr = store.enqueue("alpha", "{}", {.kind = WorkKind::pr, .head = "h", .now = T0});
    CHECK(store.assign_and_lease("s1", pr, {"push"}, {}, T0).fence == 1);
  }
  CHECK(sql_column(db, "PRAGMA user_version") ==
        std::vector<std::string>{std::to_string(storage::kSqliteSchemaVersion)});
  CHECK(verify_file(db).empty());
}

TEST_CASE("export, audit and restore carry sessions, forge items, the terminal path and incidents", "[session][export]") {
  TempDir dir;
  Forge f(dir);
  {
    ControlStore store{f.db};
    const Fence fence = store.assign_and_lease("s1", f.pr, kPushComment, {}, T0).fence;
    store.record_mutation("s1", f.pr, fence, "push", {}, T0 + 1);
    store.observe_head(f.pr, "bbb", T0 + 2);
    store.close_session("s2", T0 + 3);
    store.enter_terminal_path(f.pr, "approved", T0 + 3);
    store.link_incident({"sentry", "fp", "acme"}, f.pr, {.status = "open", .event_count = 2},
                        T0 + 3);
  }
  const auto file = dir.file("log.cplane");
  const auto fresh = dir.file("fresh.db");
  REQUIRE_EXIT(run_cli({"export", file, "--db", f.db}), 0);
  CHECK_EXIT(run_cli({"audit", file}), 0);
  CHECK_EXIT(run_cli({"audit", file, "--against", f.db}), 0);
  REQUIRE_EXIT(run_cli({"restore", file, "--db", fresh}), 0);
  CHECK(verify_file(fresh).empty());
  ControlStore a{f.db};
  ControlStore b{fresh};
  CHECK(a.item(f.pr) == b.item(f.pr));
  CHECK(a.terminal_path() == b.terminal_path());
  CHECK(a.incidents() == b.incidents());
  CHECK(b.incidents().size() == 1);
  const auto sa = a.sessions(T0 + 4);
  const auto sb = b.sessions(T0 + 4);
  REQUIRE(sa.size() == sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    CHECK(sa[i].row == sb[i].row);
    CHECK(sa[i].items == sb[i].items);
  }
}

// R2 with real processes: sessions in separate processes ask for the same
// items over and over; the ledger must never show two live assignments on
// one item, and every assignment a session was told of must be in it.
TEST_CASE("sessions in separate processes never both hold an item (R2)", "[assign][R2][processes]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "race.db");
  std::vector<std::string> items;
  constexpr int kSessions = 4;
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    for (int i = 0; i < 2; ++i) {
      items.push_back(store.enqueue("alpha", "{}", {.kind = WorkKind::pr, .head = "h0"}));
    }
    for (int s = 0; s < kSessions; ++s) store.open_session(fmt::format("s{}", s));
  }
  std::vector<pid_t> pids;
  for (int s = 0; s < kSessions; ++s) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int code = 0;
      try {
        ControlStore store{db, {.durability = Durability::normal}};
        std::ofstream log(dir.file(fmt::format("s{}.log", s)));
        const std::string session = fmt::format("s{}", s);
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
        int waits = 0;
        for (int round = 0; std::chrono::steady_clock::now() < until; ++round) {
          const auto& item = items[round % items.size()];
          const auto a = store.assign_and_lease(session, item, {"push"}, Seconds{0.02});
          if (a.outcome == AssignOutcome::wait) ++waits;
          if (!a) continue;
          log << item << ' ' << a.fence << '\n';
          // A mutation under it, then (sometimes) the item given back: the
          // lease is short, so either may come too late, and is refused.
          store.record_mutation(session, item, a.fence, "push");
          if (round % 3 == 0) {
            try {
              store.release(item, a.fence, "done for now");
            } catch (const FenceRejected&) {
            }
          }
        }
        log << "waits " << waits << '\n';
      } catch (const std::exception& e) {
        std::ofstream(dir.file(fmt::format("s{}.err", s))) << e.what();
        code = 1;
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  for (std::size_t s = 0; s < pids.size(); ++s) {
    int status = 0;
    ::waitpid(pids[s], &status, 0);
    std::ifstream err(dir.file(fmt::format("s{}.err", s)));
    std::stringstream why;
    why << err.rdbuf();
    INFO("session s" << s << ": " << why.str());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  // What each session was told.
  std::map<std::pair<std::string, Fence>, std::string> told;  // (item, fence) -> session
  int waits = 0;
  for (int s = 0; s < kSessions; ++s) {
    std::ifstream log(dir.file(fmt::format("s{}.log", s)));
    std::string item;
    while (log >> item) {
      if (item == "waits") {
        int n = 0;
        log >> n;
        waits += n;
        continue;
      }
      Fence fence = 0;
      log >> fence;
      const auto [at, fresh] = told.emplace(std::pair{item, fence}, fmt::format("s{}", s));
      // The same (item, fence) twice is only a renewal by its own holder.
      if (!fresh) CHECK(at->second == fmt::format("s{}", s));
    }
  }
  CHECK(waits > 0);  // they did contend
  ControlStore store{db};
  std::size_t assigned = 0;
  for (const auto& item : items) {
    // Walk the ledger: at every assignment, the previous holder's lease
    // had lapsed or been given back.
    std::string holder;
    Micros lease_end = 0;
    Fence fence = 0;
    for (const auto& e : store.events(item)) {
      if (const auto* a = std::get_if<ItemAssigned>(&e.event.body)) {
        const bool free = holder.empty() || lease_end <= e.event.at;
        CHECK(free);
        CHECK(a->fence == fence + 1);
        CHECK(told.contains({item, a->fence}));
        CHECK(told[{item, a->fence}] == a->session);
        holder = a->session;
        lease_end = a->lease_expires_at;
        fence = a->fence;
        ++assigned;
      } else if (const auto* x = std::get_if<LeaseExtended>(&e.event.body)) {
        lease_end = x->lease_expires_at;
      } else if (std::holds_alternative<ItemReleased>(e.event.body)) {
        holder.clear();
      }
    }
  }
  // Every assignment a session was told of is in the ledger, and no other.
  std::set<std::pair<std::string, Fence>> distinct;
  for (const auto& [key, session] : told) distinct.insert(key);
  CHECK(assigned == distinct.size());
  CHECK(assigned > 0);
  CHECK(verify_ledger(store).empty());
}

// The loop of docs/sessions.md (examples/agent_loop.cpp, which ctest also runs),
// here against every backend's store.
TEST_CASE("the agent loop of docs/sessions.md runs as written", "[session][docs]") {
  TempDir dir;
  Forge f(dir);
  const std::string pr = f.pr;
  int pushes = 0;
  cplane::ControlStore store{f.db};
  store.open_session("agent-1");
  const cplane::Assignment a =
      store.assign_and_lease("agent-1", pr, {"push", "comment"}, cplane::Seconds{300});
  REQUIRE(a.outcome != cplane::AssignOutcome::wait);
  REQUIRE(a);
  store.session_heartbeat("agent-1", cplane::Seconds{300});
  const auto verdict = store.record_mutation("agent-1", pr, a.fence, "push", a.expected_head);
  if (verdict) ++pushes;
  store.finish(pr, a.fence, cplane::Outcome::done);
  store.close_session("agent-1");
  CHECK(pushes == 1);
  CHECK(types(store, pr) == std::vector<std::string>{"queued", "assigned", "lease_extended",
                                                     "mutation_recorded", "done"});
}

// ---- the CLI contract ---------------------------------------------------------

TEST_CASE("cplane session, assign, gate and observe keep their exit codes and JSON",
          "[cli][session]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--db", db});
    return run_cli(args);
  };
  REQUIRE_EXIT(cli({"project", "create", "forge", "Forge"}), 0);
  REQUIRE_EXIT(cli({"session", "open", "agent-1"}), 0);
  REQUIRE_EXIT(cli({"session", "open", "agent-2", "--actor", "bob"}), 0);
  CHECK_EXIT(cli({"enqueue", "forge", "{}", "--kind", "incident"}), 2);
  CHECK_EXIT(cli({"enqueue", "forge", "{}", "--kind", "issue", "--head", "abc"}), 2);
  const auto pr = cli({"enqueue", "forge", "{}", "--kind", "pr", "--ref", "o/r#7", "--head",
                       "abc", "--author", "agent-9"});
  REQUIRE_EXIT(pr, 0);
  const std::string id = pr.out.substr(0, pr.out.find('\n'));

  const auto assigned = cli({"assign", "agent-1", id, "--actions", "push,comment", "--json"});
  CHECK_EXIT(assigned, 0);
  CHECK_THAT(assigned.out, Catch::Contains(R"("outcome":"assigned")") &&
                               Catch::Contains(R"("fence":1)") &&
                               Catch::Contains(R"("expected_head":"abc")") &&
                               Catch::Contains(R"("actions":["comment","push"])") &&
                               Catch::Contains(R"("lease_expires_at":)") &&
                               Catch::Contains(R"("until":null)") &&
                               Catch::Contains(R"("item_id":")" + id));
  // agent-2 is scoped to bob, who cannot see forge: no_safe_work, not wait.
  CHECK_EXIT(cli({"assign", "agent-2", id, "--actions", "push"}), 3);
  REQUIRE_EXIT(cli({"session", "open", "agent-3"}), 0);
  const auto wait = cli({"assign", "agent-3", id, "--actions", "push", "--json"});
  CHECK_EXIT(wait, 9);
  CHECK_THAT(wait.out, Catch::Contains(R"("outcome":"wait")") && Catch::Contains(R"("until":)"));
  CHECK_EXIT(cli({"assign", "ghost", id, "--actions", "push"}), 7);
  CHECK_EXIT(cli({"assign", "agent-1", id}), 2);  // --actions is required
  CHECK_EXIT(cli({"assign", "agent-1", "no-such-item", "--actions", "push"}), 3);

  const auto allowed = cli({"gate", "agent-1", id, "--fence", "1", "--action", "push", "--head",
                            "abc", "--record", "--json"});
  CHECK_EXIT(allowed, 0);
  CHECK(allowed.out == "{\"verdict\":\"allowed\",\"reason\":null}\n");
  const auto plain = cli({"gate", "agent-1", id, "--fence", "1", "--action", "merge"});
  CHECK_EXIT(plain, 8);
  CHECK(plain.out == "action_not_allowed\n");
  const auto ghost = cli({"gate", "ghost", "nothing", "--fence", "1", "--action", "push", "--json"});
  CHECK_EXIT(ghost, 8);
  CHECK(ghost.out == "{\"verdict\":\"denied\",\"reason\":\"no_live_lease\"}\n");
  CHECK_EXIT(cli({"gate", "agent-1", id, "--action", "push"}), 2);  // --fence is required

  CHECK_EXIT(cli({"observe", "head", id, "def"}), 0);
  CHECK(cli({"gate", "agent-1", id, "--fence", "1", "--action", "push"}).out == "head_drift\n");
  CHECK_EXIT(cli({"observe", "review", id, "approved"}), 0);
  CHECK_EXIT(cli({"observe", "review", id, "maybe"}), 2);
  CHECK_EXIT(cli({"observe", "close", id, "abandoned"}), 2);
  CHECK_EXIT(cli({"observe", "close", "no-such-item", "merged"}), 7);

  const auto heartbeat = cli({"session", "heartbeat", "agent-1", "--lease", "60", "--json"});
  CHECK_EXIT(heartbeat, 0);
  CHECK_THAT(heartbeat.out, Catch::Contains(id));
  CHECK_EXIT(cli({"session", "heartbeat", "ghost"}), 7);

  const auto sessions = cli({"sessions", "--json"});
  CHECK_EXIT(sessions, 0);
  CHECK_THAT(sessions.out, Catch::StartsWith(R"([{"session":"agent-1","actor":null,"opened_at":)") &&
                               Catch::Contains(R"("closed_at":null,"items":[")" + id + "\"]}") &&
                               Catch::Contains(R"("session":"agent-2","actor":"bob")") &&
                               Catch::Contains(R"("last_seen_at":)"));

  const auto item = cli({"item", id, "--json"});
  CHECK_THAT(item.out, Catch::Contains(R"("kind":"pr","ref":"o/r#7","head":"def","review":"approved","author":"agent-9","session":"agent-1","expected_head":"abc","actions":["comment","push"],"close_reason":null)"));

  CHECK_EXIT(cli({"observe", "close", id, "merged"}), 0);
  CHECK(cli({"gate", "agent-1", id, "--fence", "1", "--action", "push"}).out == "work_terminal\n");
  CHECK_THAT(cli({"item", id, "--json"}).out,
             Catch::Contains(R"("status":"closed")") &&
                 Catch::Contains(R"("close_reason":"merged")"));
  const auto closed = cli({"session", "close", "agent-1", "--json"});
  CHECK_EXIT(closed, 0);
  CHECK_THAT(closed.out, Catch::Contains(R"("released":[])"));
  CHECK_EXIT(cli({"session", "heartbeat", "agent-1"}), 7);
  CHECK_EXIT(cli({"verify"}), 0);
}
