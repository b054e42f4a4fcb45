// Flow control (issue 23) through the library, on every backend:
// concurrency keys as live fenced leases, rate limits, priority within a
// project, weighted round-robin across projects, the allocator's and the
// gate's view of keys, `explain`, and bad input that changes nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <cplane/cplane.hpp>
#include <fmt/format.h>

#include "tests/support.hpp"

using namespace cplane;
using cplane::test::sql;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;

namespace {

constexpr Micros T0 = 1'800'000'000'000'000;
constexpr Micros kSecond = 1'000'000;

std::string keyed(ControlStore& store, const std::string& project, const std::string& key,
                  Micros at, std::int32_t priority = 0) {
  return store.enqueue(project, "{}",
                       ControlStore::EnqueueOptions{.priority = priority,
                                                    .now = at,
                                                    .concurrency_key = key});
}

std::int64_t events_in(const std::string& db) {
  return std::stoll(sql_column(db, "SELECT count(*) FROM events").at(0));
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

std::vector<ControlStore::WhyKind> kinds(const ControlStore::Explanation& e) {
  std::vector<ControlStore::WhyKind> out;
  for (const auto& r : e.reasons) out.push_back(r.kind);
  return out;
}

// `count` threads, each on its own connection, claim and finish at once
// until `go_on` says stop (or, with `until_empty`, nothing is left); each
// thread's error, if any, in the result.
struct Claimers {
  std::atomic<int> claimed{0};
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  Claimers(const std::string& db, int count, std::function<bool()> go_on, bool until_empty)
      : errors(static_cast<std::size_t>(count)) {
    for (int w = 0; w < count; ++w) {
      threads.emplace_back([this, db, w, go_on, until_empty] {
        try {
          ControlStore mine{db};
          while (go_on()) {
            const auto c = mine.claim(fmt::format("w{}", w));
            if (!c && until_empty) break;
            if (!c) continue;
            mine.finish(c->item_id, c->fence, Outcome::done);
            ++claimed;
          }
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(w)] = e.what();
        }
      });
    }
  }
  void join() {
    for (auto& t : threads) t.join();
    for (const auto& e : errors) CHECK(e.empty());
  }
};

}  // namespace

TEST_CASE("flow: at most N items of a key run at once: a claim passes over a full key to the "
          "next item that may run",
          "[flow]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  CHECK(store.set_limit("repo", {.concurrency = 2, .now = T0}));
  CHECK_FALSE(store.set_limit("repo", {.concurrency = 2, .now = T0}));  // the limit already
  std::vector<std::string> repo;
  for (int i = 0; i < 5; ++i) repo.push_back(keyed(store, "alpha", "repo", T0 + 1 + i));
  const auto plain = store.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.now = T0 + 10});
  const auto a = store.claim("w1", {.now = T0 + 20});
  const auto b = store.claim("w2", {.now = T0 + 20});
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->item_id == repo[0]);
  CHECK(b->item_id == repo[1]);
  // The key is full: the next claim takes the plain item behind three of its items.
  const auto c = store.claim("w3", {.now = T0 + 21});
  REQUIRE(c);
  CHECK(c->item_id == plain);
  CHECK_FALSE(store.claim("w4", {.now = T0 + 22}));
  auto limits = store.limits(T0 + 22);
  REQUIRE(limits.size() == 1);
  CHECK(limits[0].live == 2);
  REQUIRE(limits[0].holders.size() == 2);
  // A finish frees the slot at once.
  store.finish(a->item_id, a->fence, Outcome::done, {.now = T0 + 30});
  const auto d = store.claim("w1", {.now = T0 + 31});
  REQUIRE(d);
  CHECK(d->item_id == repo[2]);
  CHECK_FALSE(store.claim("w5", {.now = T0 + 32}));
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("flow: a slot is a live lease: a crashed holder frees it when its lease lapses and a "
          "stale holder frees nothing twice",
          "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  store.set_limit("db", {.concurrency = 1, .now = T0});
  const auto x = keyed(store, "alpha", "db", T0 + 1);
  const auto y = keyed(store, "alpha", "db", T0 + 2);
  const auto first = store.claim("crashed", {.lease = Seconds{10}, .now = T0 + 10});
  REQUIRE(first);
  CHECK(first->item_id == x);
  CHECK_FALSE(store.claim("w", {.now = T0 + 5 * kSecond}));
  // Its lease lapsed: the slot is free. y (queued before x's lease ended)
  // is taken; x, lapsed, now waits behind the full key.
  const auto second = store.claim("w", {.lease = Seconds{10}, .now = T0 + 11 * kSecond});
  REQUIRE(second);
  CHECK(second->item_id == y);
  CHECK_FALSE(store.claim("w2", {.now = T0 + 11 * kSecond}));
  // The stalled holder of x wakes up: nobody reclaimed x, so its fence still
  // counts and its finish is taken; it frees no slot (x's was free already).
  store.finish(x, first->fence, Outcome::done, {.now = T0 + 12 * kSecond});
  CHECK(store.limits(T0 + 12 * kSecond).at(0).live == 1);
  // y's holder stalls past its lease: y is reclaimed under a higher fence,
  // and the stale holder's late reports are refused and free nothing.
  const auto again = store.claim("w2", {.lease = Seconds{10}, .now = T0 + 22 * kSecond});
  REQUIRE(again);
  CHECK(again->item_id == y);
  CHECK(again->fence == second->fence + 1);
  CHECK_THROWS_AS(store.finish(y, second->fence, Outcome::done, {.now = T0 + 23 * kSecond}),
                  FenceRejected);
  CHECK_THROWS_AS(store.release(y, second->fence, "late", {.now = T0 + 23 * kSecond}),
                  FenceRejected);
  CHECK(store.limits(T0 + 23 * kSecond).at(0).live == 1);
  const auto z = keyed(store, "alpha", "db", T0 + 24 * kSecond);
  CHECK_FALSE(store.claim("w3", {.now = T0 + 25 * kSecond}));  // y's slot is held
  store.finish(y, again->fence, Outcome::done, {.now = T0 + 26 * kSecond});
  const auto next = store.claim("w3", {.now = T0 + 27 * kSecond});
  REQUIRE(next);
  CHECK(next->item_id == z);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("flow: a key is global: items of two projects share its slots", "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  store.create_project("beta", "B", "open", T0);
  store.set_limit("api", {.concurrency = 1, .now = T0});
  keyed(store, "alpha", "api", T0 + 1);
  keyed(store, "beta", "api", T0 + 2);
  REQUIRE(store.claim("w1", {.now = T0 + 10}));
  CHECK_FALSE(store.claim("w2", {.now = T0 + 11}));
}

TEST_CASE("flow: lowering a limit never revokes a live lease: it holds from the next claim",
          "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  store.set_limit("k", {.concurrency = 3, .now = T0});
  std::vector<ClaimedItem> held;
  for (int i = 0; i < 5; ++i) keyed(store, "alpha", "k", T0 + 1 + i);
  for (int i = 0; i < 3; ++i) held.push_back(*store.claim("w", {.now = T0 + 10}));
  store.set_limit("k", {.concurrency = 1, .now = T0 + 20});
  // All three still heartbeat and finish.
  for (const auto& h : held) store.heartbeat(h.item_id, h.fence, {.now = T0 + 21});
  store.finish(held[0].item_id, held[0].fence, Outcome::done, {.now = T0 + 22});
  CHECK_FALSE(store.claim("w", {.now = T0 + 23}));  // 2 live, limit 1
  store.finish(held[1].item_id, held[1].fence, Outcome::done, {.now = T0 + 24});
  CHECK_FALSE(store.claim("w", {.now = T0 + 25}));  // 1 live, limit 1
  store.finish(held[2].item_id, held[2].fence, Outcome::done, {.now = T0 + 26});
  CHECK(store.claim("w", {.now = T0 + 27}));
  // Removed: no bound at all.
  CHECK(store.remove_limit("k", {.now = T0 + 28}));
  CHECK_FALSE(store.remove_limit("k", {.now = T0 + 28}));
  CHECK(store.claim("w", {.now = T0 + 29}));
  CHECK(store.limits(T0 + 30).empty());
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("flow: a rate limit spaces claims of a key: an item held back is available at the "
          "next token",
          "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  store.set_limit("api", {.rate = "2/s", .now = T0});  // one claim every 500 ms
  for (int i = 0; i < 4; ++i) keyed(store, "alpha", "api", T0 + 1 + i);
  const Micros t = T0 + 10 * kSecond;
  REQUIRE(store.claim("w", {.now = t}));
  CHECK_FALSE(store.claim("w", {.now = t + 100'000}));
  CHECK_FALSE(store.claim("w", {.now = t + 499'999}));
  REQUIRE(store.claim("w", {.now = t + 500'000}));
  CHECK(store.limits(t + 500'000).at(0).next_token == t + 1'000'000);
  // A burst of 3: three back to back, then spaced again.
  store.set_limit("api", {.rate = "2/s", .burst = 3, .now = t + 600'000});
  std::int64_t claimed = 0;
  for (int i = 0; i < 3; ++i) claimed += store.claim("w", {.now = t + 5 * kSecond}) ? 1 : 0;
  CHECK(claimed == 2);  // two items were left
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("flow: bad limits, weights and keys are refused and write nothing", "[flow]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  const auto before = events_in(db);
  CHECK(invalid([&] { store.set_limit("k", {.concurrency = 0}); }) ==
        InvalidArgument::Reason::invalid_input);
  CHECK(invalid([&] { store.set_limit("k", {.rate = "10/fortnight"}); }) ==
        InvalidArgument::Reason::invalid_input);
  CHECK(invalid([&] { store.set_limit("k", {.rate = "0/s"}); }) ==
        InvalidArgument::Reason::invalid_input);
  CHECK(invalid([&] { store.set_limit("k", {.rate = "ten/s"}); }) ==
        InvalidArgument::Reason::invalid_input);
  CHECK(invalid([&] { store.set_limit("k", {.concurrency = 1, .burst = 2}); }) ==
        InvalidArgument::Reason::conflict);
  CHECK(invalid([&] { store.set_limit(std::string(257, 'k'), {.concurrency = 1}); }) ==
        InvalidArgument::Reason::invalid_input);
  CHECK(invalid([&] { store.set_limit("a\x01" "b", {.concurrency = 1}); }) ==
        InvalidArgument::Reason::invalid_input);
  CHECK(invalid([&] { store.set_weight("alpha", 0); }) == InvalidArgument::Reason::invalid_input);
  CHECK(invalid([&] { store.set_weight("alpha", kMaxWeight + 1); }) ==
        InvalidArgument::Reason::invalid_input);
  CHECK(invalid([&] {
          store.enqueue("alpha", "{}",
                        ControlStore::EnqueueOptions{.concurrency_key = std::string(300, 'x')});
        }) == InvalidArgument::Reason::invalid_input);
  CHECK_THROWS_AS(store.remove_limit("never"), NotFound);
  CHECK_THROWS_AS(store.set_weight("nope", 2), NotFound);
  CHECK(events_in(db) == before);
  CHECK(store.limits().empty());
}

TEST_CASE("flow: priority orders claims within a project above age", "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  const auto low = store.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.now = T0 + 1});
  const auto high = store.enqueue("alpha", "{}",
                                  ControlStore::EnqueueOptions{.priority = 5, .now = T0 + 2});
  const auto mid = store.enqueue("alpha", "{}",
                                 ControlStore::EnqueueOptions{.priority = 1, .now = T0 + 3});
  CHECK(store.claim("w", {.now = T0 + 10})->item_id == high);
  CHECK(store.claim("w", {.now = T0 + 10})->item_id == mid);
  CHECK(store.claim("w", {.now = T0 + 10})->item_id == low);
}

TEST_CASE("flow: claims take projects in weighted round-robin: a deep project does not starve "
          "a shallow one",
          "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("deep", "A", "open", T0);
  store.create_project("shallow", "B", "open", T0);
  store.enqueue_batch("deep", std::vector<std::string>(60, "{}"), {}, T0 + 1);
  store.enqueue_batch("shallow", std::vector<std::string>(5, "{}"), {}, T0 + 2);
  SECTION("equal weights alternate") {
    std::vector<std::string> order;
    for (int i = 0; i < 10; ++i) {
      const auto c = store.claim("w", {.now = T0 + 10 + i});
      REQUIRE(c);
      order.push_back(c->project_id);
      store.finish(c->item_id, c->fence, Outcome::done, {.now = T0 + 10 + i});
    }
    CHECK(std::count(order.begin(), order.end(), "shallow") == 5);
    // The batch claim keeps the same share.
  }
  SECTION("weight 3 takes three claims to one") {
    store.set_weight("deep", 3, {.now = T0 + 3});
    std::map<std::string, int> taken;
    for (const auto& c : store.claim_batch("w", 8, {.now = T0 + 10})) ++taken[c.project_id];
    CHECK(taken["deep"] == 6);
    CHECK(taken["shallow"] == 2);
  }
  SECTION("fairness off: the oldest first, as before") {
    for (int i = 0; i < 10; ++i) {
      const auto c = store.claim("w", {.now = T0 + 10 + i, .fair = false});
      REQUIRE(c);
      CHECK(c->project_id == "deep");
    }
  }
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("flow: a batch claim respects the key's limit and rate", "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  store.set_limit("k", {.concurrency = 3, .now = T0});
  for (int i = 0; i < 10; ++i) keyed(store, "alpha", "k", T0 + 1 + i);
  const auto plain = store.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.now = T0 + 20});
  const auto got = store.claim_batch("w", 8, {.now = T0 + 30});
  REQUIRE(got.size() == 4);
  CHECK(std::count_if(got.begin(), got.end(),
                      [&](const ClaimedItem& c) { return c.item_id == plain; }) == 1);
  CHECK(store.limits(T0 + 30).at(0).live == 3);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("flow: explain names every reason an item waits, with what would change it",
          "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  store.set_limit("k", {.concurrency = 1, .now = T0});
  const auto held = keyed(store, "alpha", "k", T0 + 1);
  const auto waiting = keyed(store, "alpha", "k", T0 + 2);
  const auto c = store.claim("w", {.lease = Seconds{60}, .now = T0 + 10});
  REQUIRE(c);
  CHECK(c->item_id == held);
  auto why = store.explain(waiting, {}, T0 + 11);
  REQUIRE(kinds(why) == std::vector{ControlStore::WhyKind::key_full});
  CHECK_FALSE(why.claimable);
  CHECK(why.reasons[0].key == "k");
  CHECK(why.reasons[0].live == 1);
  CHECK(why.reasons[0].limit == 1);
  REQUIRE(why.reasons[0].holders.size() == 1);
  CHECK(why.reasons[0].holders[0].item_id == held);
  CHECK(why.reasons[0].holders[0].fence == c->fence);
  CHECK(why.reasons[0].holders[0].lease_expires_at == c->lease_expires_at);
  CHECK(kinds(store.explain(held, {}, T0 + 11)) == std::vector{ControlStore::WhyKind::running});
  store.pause_project("alpha", "maintenance", {.now = T0 + 12});
  CHECK(kinds(store.explain(waiting, {}, T0 + 13)) ==
        std::vector{ControlStore::WhyKind::project_paused, ControlStore::WhyKind::key_full});
  store.resume_project("alpha", {.now = T0 + 14});
  const auto later = store.enqueue("alpha", "{}",
                                   ControlStore::EnqueueOptions{.now = T0 + 15,
                                                                .delay = 3600 * kSecond});
  why = store.explain(later, {}, T0 + 16);
  REQUIRE(kinds(why) == std::vector{ControlStore::WhyKind::scheduled});
  CHECK(why.reasons[0].until == T0 + 15 + 3600 * kSecond);
  const auto first = store.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.now = T0 + 17});
  const auto second = store.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.now = T0 + 18});
  // Ahead of `second`: `waiting` (held back by its key, still ahead in
  // queue order) and `first`.
  why = store.explain(second, {}, T0 + 19);
  REQUIRE(kinds(why) == std::vector{ControlStore::WhyKind::behind});
  CHECK(why.reasons[0].ahead == 2);
  CHECK(why.reasons[0].weight == 1);
  CHECK(why.claimable);
  CHECK(store.explain(first, {}, T0 + 19).reasons.at(0).ahead == 1);
  CHECK(kinds(store.explain(first, std::string("stranger"), T0 + 19)) ==
        std::vector{ControlStore::WhyKind::out_of_scope, ControlStore::WhyKind::behind});
  store.finish(held, c->fence, Outcome::done, {.now = T0 + 20});
  CHECK(kinds(store.explain(held, {}, T0 + 21)) == std::vector{ControlStore::WhyKind::terminal});
  CHECK(store.explain(waiting, {}, T0 + 21).reasons.empty());
  CHECK_THROWS_AS(store.explain("no-such-item"), NotFound);

  store.set_limit("r", {.rate = "1/m", .now = T0 + 22});
  const auto r1 = keyed(store, "alpha", "r", T0 + 23);
  const auto r2 = keyed(store, "alpha", "r", T0 + 24);
  bool started = false;  // claims take the older items first, then r1 (a token)
  for (int i = 0; i < 6 && !started; ++i) {
    const auto got = store.claim("w", {.now = T0 + 30 * kSecond});
    REQUIRE(got);
    started = got->item_id == r1;
  }
  REQUIRE(started);
  why = store.explain(r2, {}, T0 + 31 * kSecond);
  const auto r = std::find_if(why.reasons.begin(), why.reasons.end(), [](const auto& x) {
    return x.kind == ControlStore::WhyKind::rate_limited;
  });
  REQUIRE(r != why.reasons.end());
  CHECK(r->until > T0 + 31 * kSecond);
}

TEST_CASE("flow: the allocator passes over a full key and lists it key_full", "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  store.set_limit("repo", {.concurrency = 1, .now = T0});
  const auto a = keyed(store, "alpha", "repo", T0 + 1);
  const auto b = keyed(store, "alpha", "repo", T0 + 2);
  const auto plain = store.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.now = T0 + 3});
  store.open_session("s1", {}, T0 + 4);
  store.open_session("s2", {}, T0 + 4);
  const auto first = store.allocate_next("s1", AllocateMode::apply, {"push"}, Seconds{60}, T0 + 5);
  CHECK(first.item_id == a);
  const auto second = store.allocate_next("s2", AllocateMode::apply, {"push"}, Seconds{60}, T0 + 6);
  CHECK(second.item_id == plain);
  REQUIRE_FALSE(second.skipped.empty());
  CHECK(std::any_of(second.skipped.begin(), second.skipped.end(), [&](const SkippedCandidate& s) {
    return s.item_id == b && s.reason == SkipReason::key_full;
  }));
  // Assigning the blocked item by id waits until the holder's lease ends.
  const auto direct = store.assign_and_lease("s2", b, {"push"}, Seconds{60}, T0 + 7);
  CHECK(direct.outcome == AssignOutcome::wait);
  CHECK(direct.until == first.lease_expires_at);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("flow: the gate denies key_held when a key of limit one has two live holders",
          "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  store.set_limit("repo", {.concurrency = 2, .now = T0});
  const auto a = keyed(store, "alpha", "repo", T0 + 1);
  const auto b = keyed(store, "alpha", "repo", T0 + 2);
  store.open_session("s1", {}, T0 + 3);
  store.open_session("s2", {}, T0 + 3);
  const auto x = store.assign_and_lease("s1", a, {"push"}, Seconds{60}, T0 + 4);
  const auto y = store.assign_and_lease("s2", b, {"push"}, Seconds{60}, T0 + 4);
  REQUIRE(x.is_assigned());
  REQUIRE(y.is_assigned());
  CHECK(store.require_valid_assignment("s1", a, x.fence, "push", {}, T0 + 5));
  store.set_limit("repo", {.concurrency = 1, .now = T0 + 6});
  const auto v = store.require_valid_assignment("s1", a, x.fence, "push", {}, T0 + 7);
  REQUIRE_FALSE(v);
  CHECK(v.reason() == GateReason::key_held);
  store.finish(b, y.fence, Outcome::done, {.now = T0 + 8});
  CHECK(store.require_valid_assignment("s1", a, x.fence, "push", {}, T0 + 9));
}

TEST_CASE("flow: a store of the schema before flow control migrates: keeping its rows",
          "[flow][migration]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "old.db");
  std::string held, queued;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    held = store.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.now = T0});
    queued = store.enqueue("alpha", "{}", ControlStore::EnqueueOptions{.priority = 3, .now = T0});
    REQUIRE(store.claim("w", {.now = T0 + 1})->item_id == queued);  // priority first
  }
  const bool postgres = test_context().backend_name() == "postgres";
  sql(db, postgres ? cplane::test::kPostgresBackTo2 : cplane::test::kBackToVersion7);
  {
    ControlStore store{db};  // opening to write migrates
    CHECK(store.item(queued).status == ItemStatus::claimed);
    CHECK(store.item(held).status == ItemStatus::ready);
    CHECK(store.item(held).concurrency_key.empty());
    CHECK(store.project("alpha").weight == 1);
    store.set_limit("k", {.concurrency = 1, .now = T0 + 2});
    const auto keyed_item = keyed(store, "alpha", "k", T0 + 3);
    CHECK(store.claim("w", {.now = T0 + 4})->item_id == held);
    CHECK(store.claim("w", {.now = T0 + 5})->item_id == keyed_item);
    CHECK(verify_ledger(store).empty());
  }
}

TEST_CASE("flow: a lapsed lease is not renewed once its key's slot was taken: the holder may "
          "still finish",
          "[flow]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "c.db")};
  store.create_project("alpha", "A", "open", T0);
  store.set_limit("k", {.concurrency = 1, .now = T0});
  const auto a = keyed(store, "alpha", "k", T0 + 1);
  const auto b = keyed(store, "alpha", "k", T0 + 2);
  const auto first = store.claim("w1", {.lease = Seconds{10}, .now = T0 + 10});
  REQUIRE(first);
  REQUIRE(first->item_id == a);
  // Its own lapsed lease, the slot still free: renewed, as ever.
  CHECK(store.heartbeat(a, first->fence, {.lease = Seconds{10}, .now = T0 + 11 * kSecond}) ==
        T0 + 21 * kSecond);
  // It lapses again and b takes the slot: the late heartbeat is refused.
  const auto second = store.claim("w2", {.lease = Seconds{100}, .now = T0 + 22 * kSecond});
  REQUIRE(second);
  CHECK(second->item_id == b);
  try {
    store.heartbeat(a, first->fence, {.lease = Seconds{100}, .now = T0 + 23 * kSecond});
    FAIL("the renewal was taken");
  } catch (const FenceRejected& e) {
    CHECK(e.reason() == FenceRejected::Reason::slot_taken);
  }
  CHECK(store.limits(T0 + 24 * kSecond).at(0).live == 1);
  store.finish(a, first->fence, Outcome::done, {.now = T0 + 25 * kSecond});  // it may end
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("flow: verify names edited limit rows and rebuild repairs them", "[flow]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    store.set_limit("api", {.rate = "2/s", .now = T0});
    keyed(store, "alpha", "api", T0 + 1);
    REQUIRE(store.claim("w", {.now = T0 + 2}));
  }
  const bool postgres = test_context().backend_name() == "postgres";
  sql(db, std::string("UPDATE limits SET tat = tat + 1; INSERT INTO limits VALUES ('ghost', 1, 0, "
                      "0, 0, 0, ") +
              (postgres ? "false" : "0") + ", 1, 1, 1)");
  ControlStore store{db};
  auto problems = verify_ledger(store);
  std::multiset<ProblemKind> found;
  for (const auto& p : problems) found.insert(p.kind);
  CHECK(found == std::multiset<ProblemKind>{ProblemKind::limit_row_disagrees,
                                            ProblemKind::limit_row_without_event});
  const auto report = rebuild(store);
  CHECK(report.changes_total == 2);
  CHECK(verify_ledger(store).empty());
  CHECK(store.limits(T0 + 3).size() == 1);
}

TEST_CASE("flow: pauses and resumes racing fair claims from other connections are never undone, "
          "and each project's pass is its last claim's",
          "[flow]") {
  // A fair claim writes its project's row back (the pass). On PostgreSQL,
  // where writers run side by side, it once wrote the row it had read
  // before a pause committed: the pause was undone in the row, and two
  // claims that read the same pass wrote it back out of seq order.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "race.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.create_project("beta", "B");
  store.enqueue_batch("alpha", std::vector<std::string>(3000, "{}"));
  store.enqueue_batch("beta", std::vector<std::string>(3000, "{}"));
  std::atomic<bool> stop{false};
  Claimers claimers(db, 6, [&] { return !stop.load(); }, false);
  ControlStore admin{db};
  for (int i = 0; i < 40; ++i) {
    CHECK(admin.pause_project("alpha", fmt::format("round {}", i)));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(admin.resume_project("alpha"));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(admin.pause_project("alpha", "the last"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  claimers.join();
  INFO(claimers.claimed.load() << " claimed");
  CHECK(claimers.claimed.load() > 100);
  CHECK(store.project("alpha").paused);
  CHECK(store.project("alpha").pause_reason == "the last");
  // The rows agree with the log: paused, and each pass the last claim's.
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("flow: many fair claimers over several projects never fail busy waiting their turn for "
          "the projects' rows",
          "[flow]") {
  // On PostgreSQL every fair claim of a scope locks the same project rows
  // until it commits. Judged as an item row's wait (50 ms), 32 claimers
  // over 4 projects failed busy dozens of times in 30 s (an adversarial
  // run); a project row's wait is allowed 1 s.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "many.db");
  ControlStore store{db};
  for (int p = 0; p < 4; ++p) {
    const auto id = fmt::format("p{}", p);
    store.create_project(id, id);
    store.set_weight(id, static_cast<std::uint32_t>(p + 1));
    store.enqueue_batch(id, std::vector<std::string>(2000, "{}"));
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  Claimers claimers(db, 24, [until] { return std::chrono::steady_clock::now() < until; }, true);
  claimers.join();
  INFO(claimers.claimed.load() << " claimed");
  CHECK(claimers.claimed.load() > 100);
  CHECK(verify_ledger(store).empty());
}
