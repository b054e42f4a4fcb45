// The lease lifecycle: a holder extends its lease (heartbeat) or gives the
// item back (release), each refused exactly as a finish is, each an event
// that verify and rebuild understand.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "events/codec.hpp"
#include "tests/cli_checks.hpp"
#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::run_cli;
using cplane::test::sql;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;

constexpr Micros T0 = 1'700'000'000'000'000;
constexpr Micros kSecond = 1'000'000;

struct Claimed {
  std::string db, id;
  Fence fence = 0;
};

// Appends `event` with raw SQL, chained, as a writer with a bug would have.
void append_forged(const std::string& db, const Event& event) {
  const std::string body = encode(event);
  std::string hex;
  for (unsigned char ch : body) hex += fmt::format("{:02x}", ch);
  test::forged_sql(db, fmt::format("INSERT INTO events (item_id, project_id, type, at, body, "
                                   "stream_kind, stream_id) VALUES ('{0}', '{1}', '{2}', {3}, "
                                   "x'{4}', 'item', '{0}')",
                                   event.item_id, event.project_id, type_name(event.body),
                                   event.at, hex));
}

Claimed claimed_item(const TempDir& dir) {
  Claimed c{test_context().fresh_store(dir, "c.db"), {}, 0};
  ControlStore store{c.db};
  store.create_project("alpha", "A", "open", T0);
  store.grant("alpha", "alice", T0);
  c.id = store.enqueue("alpha", "{}", {}, T0);
  c.fence = store.claim("w1", {.lease = Seconds{10}, .now = T0})->fence;
  return c;
}

FenceRejected::Reason refusal(const std::function<void()>& command) {
  try {
    command();
  } catch (const FenceRejected& e) {
    return e.reason();
  }
  FAIL("not refused");
  return FenceRejected::Reason::unknown_item;
}

}  // namespace

TEST_CASE("a heartbeat extends the current claim's lease to now + the lease", "[lease]") {
  TempDir dir;
  const auto c = claimed_item(dir);
  ControlStore store{c.db};
  const Micros until = store.heartbeat(c.id, c.fence, {.lease = Seconds{60}, .now = T0 + 8 * kSecond});
  CHECK(until == T0 + 68 * kSecond);
  CHECK(store.item(c.id).lease_expires_at == until);
  // Past the old end the item is not reclaimable: the lease holds.
  CHECK_FALSE(store.claim("w2", {.now = T0 + 20 * kSecond}));
  // A lease that lapsed but that nobody reclaimed may still be extended.
  CHECK(store.heartbeat(c.id, c.fence, {.lease = Seconds{5}, .now = T0 + 100 * kSecond}) ==
        T0 + 105 * kSecond);
  const auto events = store.events(c.id);
  REQUIRE(events.size() == 4);
  CHECK(events[2].type() == "lease_extended");
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a release gives the item back, and the next claim takes a higher fence", "[lease]") {
  TempDir dir;
  const auto c = claimed_item(dir);
  ControlStore store{c.db};
  store.release(c.id, c.fence, "blocked on review", {.now = T0 + 2 * kSecond});
  CHECK(store.item(c.id).status == ItemStatus::ready);
  // The old holder is refused from then on.
  CHECK(refusal([&] { store.finish(c.id, c.fence, Outcome::done); }) ==
        FenceRejected::Reason::not_claimed);
  const auto next = store.claim("w2", {.now = T0 + 3 * kSecond});
  REQUIRE(next);
  CHECK(next->item_id == c.id);
  CHECK(next->fence == c.fence + 1);
  CHECK(refusal([&] { store.release(c.id, c.fence, ""); }) == FenceRejected::Reason::stale_fence);
  store.finish(c.id, next->fence, Outcome::done, "", T0 + 4 * kSecond);
  CHECK(verify_ledger(store).empty());
  // Rebuild folds the release too: nothing to change.
  CHECK(rebuild(store, {.dry_run = true}).changes.empty());
}

TEST_CASE("heartbeat and release refuse exactly as finish does, with the same reasons", "[lease]") {
  TempDir dir;
  const auto c = claimed_item(dir);
  ControlStore store{c.db};
  const auto ready = store.enqueue("alpha", "{}", {}, T0 + 1);
  using Reason = FenceRejected::Reason;
  for (const auto& [id, fence, reason] : std::vector<std::tuple<std::string, Fence, Reason>>{
           {c.id, c.fence + 1, Reason::stale_fence},
           {ready, 1, Reason::not_claimed},
           {"no-such-item", 1, Reason::unknown_item}}) {
    INFO(id << " fence " << fence);
    CHECK(refusal([&] { store.heartbeat(id, fence); }) == reason);
    CHECK(refusal([&] { store.release(id, fence, ""); }) == reason);
    CHECK(refusal([&] { store.finish(id, fence, Outcome::done); }) == reason);
  }
  store.finish(c.id, c.fence, Outcome::done);
  CHECK(refusal([&] { store.heartbeat(c.id, c.fence); }) == Reason::terminal);
  CHECK(refusal([&] { store.release(c.id, c.fence, ""); }) == Reason::terminal);
  // A scoped actor outside the project learns nothing.
  store.create_project("secret", "S");
  const auto theirs = store.enqueue("secret", "{}");
  const auto held = store.claim("w9", {.actor = std::nullopt});
  CHECK_THROWS_AS(store.heartbeat(theirs, 1, {.actor = "alice"}), ScopeDenied);
  CHECK_THROWS_AS(store.release(theirs, 1, "", {.actor = "alice"}), ScopeDenied);
  CHECK_THROWS_AS(store.heartbeat(c.id, c.fence, {.lease = Seconds{0}}), InvalidArgument);
  (void)held;
  CHECK(verify_ledger(store).empty());
}

// On PostgreSQL a command that reads an item to change it locks the item's
// head and draws a seq in the same statement, for its first event: a
// refusal leaves that seq unused, and an item read but not written (or
// written after another stream) must not lend its seq to another event.
TEST_CASE("refused reports between accepted ones leave every chain whole and verify clean",
          "[lease][verify]") {
  TempDir dir;
  const auto c = claimed_item(dir);
  ControlStore store{c.db};
  const auto other = store.enqueue("alpha", "{}", {}, T0 + 1);
  const auto second = store.claim("w2", {.lease = Seconds{10}, .now = T0 + 2});
  REQUIRE(second);
  REQUIRE(second->item_id == other);
  using Reason = FenceRejected::Reason;
  for (int round = 0; round < 3; ++round) {
    const Micros at = T0 + (3 + round) * kSecond;
    CHECK(refusal([&] { store.finish(c.id, c.fence + 1, Outcome::done, "", at); }) ==
          Reason::stale_fence);
    store.heartbeat(other, second->fence, {.lease = Seconds{10}, .now = at});
    CHECK(refusal([&] { store.release(other, second->fence + 1, ""); }) == Reason::stale_fence);
    store.heartbeat(c.id, c.fence, {.lease = Seconds{10}, .now = at});
  }
  store.finish(other, second->fence, Outcome::failed, "gave up", T0 + 7 * kSecond);
  store.finish(c.id, c.fence, Outcome::done, "", T0 + 8 * kSecond);
  for (const auto& id : {c.id, other}) {
    INFO(id);
    const auto events = store.events(id);
    REQUIRE(events.size() >= 5);
    for (std::size_t i = 1; i < events.size(); ++i) CHECK(events[i - 1].seq < events[i].seq);
    CHECK(store.item(id).last_seq == events.back().seq);
  }
  CHECK(verify_ledger(store).empty());
  CHECK(rebuild(store, {.dry_run = true}).changes.empty());
}

TEST_CASE("cplane heartbeat and release, with their exit codes", "[lease][cli]") {
  TempDir dir;
  const auto c = claimed_item(dir);
  auto hb = run_cli({"--db", c.db, "--json", "heartbeat", c.id, "--fence", "1", "--lease", "30",
                     "--now", std::to_string(T0 + kSecond)});
  REQUIRE_EXIT(hb, 0);
  CHECK(hb.out.find(fmt::format("\"lease_expires_at\":{}", T0 + 31 * kSecond)) != std::string::npos);
  CHECK_EXIT(run_cli({"--db", c.db, "heartbeat", c.id, "--fence", "2"}), 4);
  CHECK_EXIT(run_cli({"--db", c.db, "release", c.id, "--fence", "1", "--actor", "mallory"}), 5);
  CHECK_EXIT(run_cli({"--db", c.db, "release", c.id}), 2);
  auto rel = run_cli({"--db", c.db, "release", c.id, "--fence", "1", "--reason", "-blocked-"});
  CHECK_EXIT(rel, 0);
  auto events = run_cli({"--db", c.db, "--json", "events", c.id});
  CHECK(events.out.find("\"type\":\"released\"") != std::string::npos);
  CHECK(events.out.find("\"reason\":\"-blocked-\"") != std::string::npos);
  CHECK_EXIT(run_cli({"--db", c.db, "verify"}), 0);
}

TEST_CASE("verify names a release or a heartbeat under a stale fence, and a ready row no release "
          "explains",
          "[lease][verify]") {
  TempDir dir;
  const auto c = claimed_item(dir);
  SECTION("a release the log holds under a fence that was not current") {
    append_forged(c.db, Event{T0 + kSecond, "w0", "alpha", c.id, ItemReleased{c.fence + 3, ""}});
    ControlStore store{c.db};
    const auto problems = verify_ledger(store);
    REQUIRE_FALSE(problems.empty());
    CHECK(problems[0].kind == ProblemKind::stale_fence_accepted);
  }
  SECTION("a claimed row set back to ready with no release in the log") {
    sql(c.db, "UPDATE items SET status = 'ready' WHERE item_id = '" + c.id + "'");
    ControlStore store{c.db};
    const auto problems = verify_ledger(store);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].kind == ProblemKind::ready_after_claim);
  }
}

TEST_CASE("the sweep records each lapsed lease once, and a lapsed item is claimed as before",
          "[lease]") {
  TempDir dir;
  const auto c = claimed_item(dir);  // w1, fence 1, lease to T0 + 10 s
  ControlStore store{c.db};
  std::string live;
  {
    live = store.enqueue("alpha", "{}", {}, T0 + 1);
    REQUIRE(store.claim("w2", {.lease = Seconds{100}, .now = T0 + 2})->item_id == live);
  }
  CHECK(store.expire_leases(T0 + 5 * kSecond) == 0);   // nothing has lapsed yet
  CHECK(store.expire_leases(T0 + 11 * kSecond) == 1);  // w1's has; w2's has not
  CHECK(store.expire_leases(T0 + 12 * kSecond) == 0);  // recorded once
  const auto events = store.events(c.id);
  REQUIRE(events.back().type() == "lease_expired");
  const auto& expired = std::get<LeaseExpired>(events.back().event.body);
  CHECK(expired.owner == "w1");
  CHECK(expired.fence == c.fence);
  CHECK(expired.lease_expires_at == T0 + 10 * kSecond);
  CHECK(store.item(c.id).status == ItemStatus::claimed);
  CHECK(verify_ledger(store).empty());
  SECTION("the holder's report under its still-current fence is still accepted") {
    store.finish(c.id, c.fence, Outcome::done, "late but current", T0 + 13 * kSecond);
    CHECK(store.item(c.id).status == ItemStatus::done);
  }
  SECTION("a claim takes it on with the next fence, and a later lapse is recorded again") {
    const auto next = store.claim("w3", {.lease = Seconds{1}, .now = T0 + 13 * kSecond});
    REQUIRE(next);
    CHECK(next->item_id == c.id);
    CHECK(next->fence == c.fence + 1);
    CHECK(store.expire_leases(T0 + 20 * kSecond) == 1);
  }
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("verify names an expiry recorded before the lease ended", "[lease][verify]") {
  TempDir dir;
  const auto c = claimed_item(dir);
  append_forged(c.db, Event{T0 + kSecond, "", "alpha", c.id,
                            LeaseExpired{c.fence, "w1", T0 + 10 * kSecond}});
  ControlStore store{c.db};
  const auto problems = verify_ledger(store);
  REQUIRE_FALSE(problems.empty());
  CHECK(problems[0].kind == ProblemKind::expired_while_leased);
}

TEST_CASE("cplane expire prints how many leases it recorded", "[lease][cli]") {
  TempDir dir;
  const auto c = claimed_item(dir);
  auto r = run_cli({"--db", c.db, "--now", std::to_string(T0 + 11 * kSecond), "expire"});
  CHECK_EXIT(r, 0);
  CHECK(r.out == "1\n");
  r = run_cli({"--db", c.db, "--json", "--now", std::to_string(T0 + 12 * kSecond), "expire"});
  CHECK_EXIT(r, 0);
  CHECK(r.out == "{\"expired\":0}\n");
  r = run_cli({"--db", c.db, "--json", "events", c.id});
  CHECK(r.out.find("\"type\":\"lease_expired\"") != std::string::npos);
  CHECK_EXIT(run_cli({"--db", c.db, "verify"}), 0);
}
