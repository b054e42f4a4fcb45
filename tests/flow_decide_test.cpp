// Flow control's pure rules and decisions, without a database: rates as
// people write them, the GCRA, a key's block, the round-robin's passes.
#include <catch2/catch.hpp>

#include <map>

#include <cplane/cplane.hpp>

#include "commands/decide.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"
#include "verify/flow_check.hpp"

using namespace cplane;

namespace {
constexpr Micros kSecond = 1'000'000;
}

TEST_CASE("flow rules: a rate parses as N per unit or per duration and nothing else",
          "[flow][decide]") {
  CHECK(parse_rate("10/s") == Rate{10, kSecond});
  CHECK(parse_rate("100/m") == Rate{100, 60 * kSecond});
  CHECK(parse_rate("5/30s") == Rate{5, 30 * kSecond});
  CHECK(parse_rate("1/hour") == Rate{1, 3600 * kSecond});
  CHECK(parse_rate("7/d") == Rate{7, 86400 * kSecond});
  for (const char* bad : {"10/fortnight", "10", "/s", "0/s", "-1/s", "1.5/s", "10/", "10/0s",
                          "2000000/s", "ten/s", "10/s/s", " 10/s"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_rate(bad), InvalidArgument);
  }
}

TEST_CASE("flow rules: the GCRA spaces claims and allows a burst back to back",
          "[flow][decide]") {
  LimitRow l{.key = "k", .rate_count = 4, .rate_period = kSecond, .burst = 1};
  CHECK(gcra_interval(l) == 250'000);
  const Micros t = 100 * kSecond;
  CHECK_FALSE(key_block(&l, 0, t));
  l.tat = gcra_advance(l, t);
  CHECK(l.tat == t + 250'000);
  auto b = key_block(&l, 0, t + 1);
  REQUIRE(b);
  CHECK(b->kind == KeyBlock::Kind::rate_limited);
  CHECK(b->until == t + 250'000);
  CHECK_FALSE(key_block(&l, 0, t + 250'000));
  // Burst 3: three at once, the fourth waits an interval.
  LimitRow burst{.key = "k", .rate_count = 4, .rate_period = kSecond, .burst = 3};
  int started = 0;
  for (int i = 0; i < 4; ++i) {
    if (key_block(&burst, 0, t)) break;
    burst.tat = gcra_advance(burst, t);
    ++started;
  }
  CHECK(started == 3);
  // Idle for a long time does not bank more than the burst.
  LimitRow idle{.key = "k", .rate_count = 4, .rate_period = kSecond, .burst = 2, .tat = t};
  started = 0;
  for (int i = 0; i < 5; ++i) {
    if (key_block(&idle, 0, t + 3600 * kSecond)) break;
    idle.tat = gcra_advance(idle, t + 3600 * kSecond);
    ++started;
  }
  CHECK(started == 2);
}

TEST_CASE("flow rules: a key is full at its concurrency and a removed limit bounds nothing",
          "[flow][decide]") {
  LimitRow l{.key = "k", .concurrency = 2};
  CHECK_FALSE(key_block(&l, 1, 0));
  const auto b = key_block(&l, 2, 0);
  REQUIRE(b);
  CHECK(b->kind == KeyBlock::Kind::key_full);
  CHECK_FALSE(key_block(nullptr, 100, 0));
  l.removed = true;
  CHECK_FALSE(key_block(&l, 100, 0));
}

TEST_CASE("flow rules: passes give each project its weighted share and a returning project no "
          "burst",
          "[flow][decide]") {
  struct P {
    std::int64_t pass = 0;
    std::uint32_t weight = 1;
  };
  std::map<std::string, P> projects{{"a", {0, 3}}, {"b", {0, 1}}};
  std::map<std::string, int> taken;
  for (int i = 0; i < 400; ++i) {
    // The lowest pass, ties to "a" (as claim_before would rank older work).
    const std::string pick = projects["a"].pass <= projects["b"].pass ? "a" : "b";
    const std::string other = pick == "a" ? "b" : "a";
    projects[pick].pass = fair_pass_after(projects[pick].pass, projects[pick].weight,
                                          projects[other].pass);
    ++taken[pick];
  }
  CHECK(taken["a"] == 300);
  CHECK(taken["b"] == 100);
  // "c" comes back with pass 0 while "a" is far ahead: one stride behind at most.
  const std::int64_t ahead = projects["a"].pass;
  CHECK(fair_pass_after(0, 1, ahead) == ahead);
  CHECK(fair_pass_after(0, 2, ahead) == ahead - kFairStride / 2);
}

TEST_CASE("flow decide: set and remove a limit and a weight", "[flow][decide]") {
  const LimitSet set{"k", 2, 0, 0, 0};
  const auto e = decide_set_limit(std::nullopt, set, "ops", 5);
  REQUIRE(e);
  CHECK(std::get<LimitSet>(e->body) == set);
  CHECK(e->project_id.empty());
  const LimitRow row = apply(LimitRow{}, StoredEvent{1, *e});
  CHECK(row.key == "k");
  CHECK(row.concurrency == 2);
  CHECK_FALSE(decide_set_limit(row, set, "ops", 6));  // the limit already
  CHECK_THROWS_AS(decide_set_limit(std::nullopt, LimitSet{"k", 0, 0, 0, 0}, "ops", 5),
                  InvalidArgument);
  CHECK_THROWS_AS(decide_set_limit(std::nullopt, LimitSet{"k", 1, 0, 0, 2}, "ops", 5),
                  InvalidArgument);
  CHECK_THROWS_AS(decide_remove_limit(std::nullopt, "k", "ops", 5), NotFound);
  const auto removed = decide_remove_limit(row, "k", "ops", 7);
  REQUIRE(removed);
  const LimitRow gone = apply(row, StoredEvent{2, *removed});
  CHECK(gone.removed);
  CHECK_FALSE(decide_remove_limit(gone, "k", "ops", 8));
  // Claims of the key move the rate's state on; claims of another key do not.
  LimitRow rated = apply(LimitRow{}, StoredEvent{3, Event{0, "", "", "", LimitSet{"r", 0, 2, kSecond, 1}}});
  const Event claim{10 * kSecond, "w", "p", "i", ItemClaimed{"w", 1, 20 * kSecond, 1, "r", 0}};
  const Event other{10 * kSecond, "w", "p", "j", ItemClaimed{"w", 1, 20 * kSecond, 1, "s", 0}};
  CHECK(apply(rated, StoredEvent{4, other}).tat == 0);
  rated = apply(rated, StoredEvent{4, claim});
  CHECK(rated.tat == 10 * kSecond + kSecond / 2);
  CHECK(rated.last_seq == 3);  // the claim is not the limit's own event

  ProjectRow project{.project_id = "p"};
  CHECK_FALSE(decide_set_weight(project, 1, "ops", 1));
  CHECK_THROWS_AS(decide_set_weight(project, 0, "ops", 1), InvalidArgument);
  const auto w = decide_set_weight(project, 4, "ops", 1);
  REQUIRE(w);
  CHECK(apply(project, StoredEvent{9, *w}).weight == 4);
}

namespace {

// The flow replay fed as verify's stream audit feeds it: each event with
// its item's row after it, seqs in order.
struct FlowFeed {
  cplane::verify_detail::FlowLog log;
  std::map<std::string, ItemRow> rows;
  Seq seq = 0;
  void operator()(const Event& e) {
    const StoredEvent stored{++seq, e};
    if (!e.item_id.empty()) rows[e.item_id] = apply(rows[e.item_id], stored);
    log.observe(stored, e.item_id.empty() ? ItemRow{} : rows[e.item_id]);
  }
};

}  // namespace

TEST_CASE("flow verify: a renewal of a lapsed lease while the key is full is concurrency_exceeded",
          "[flow][decide]") {
  FlowFeed feed;
  const auto& log = feed.log;
  auto ev = [](Micros at, const std::string& item, EventBody body) {
    return Event{at, "w", "p", item, std::move(body)};
  };
  feed(Event{0, "", "", "", LimitSet{"k", 1, 0, 0, 0}});
  ItemQueued q;
  q.payload = "{}";
  q.concurrency_key = "k";
  feed(ev(1, "a", q));
  feed(ev(2, "b", q));
  feed(ev(10, "a", ItemClaimed{"w1", 1, 10 * kSecond, 1, "k", 0}));
  feed(ev(11 * kSecond, "b", ItemClaimed{"w2", 1, 100 * kSecond, 1, "k", 0}));
  CHECK(log.fold(true).problems.empty());
  feed(ev(12 * kSecond, "a", LeaseExtended{1, 112 * kSecond}));
  const auto problems = log.fold(true).problems;
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == ProblemKind::concurrency_exceeded);
  CHECK(problems[0].item_id == "a");
}

TEST_CASE("flow verify: a carried clock is at least the one the claims before it make, and in a "
          "whole history exactly that one",
          "[flow][decide][archive]") {
  // One claim a second on a key limited to 1 a second: the clock after the
  // claim at 10 s is 11 s.
  auto log_with_carry = [](Micros carried) {
    FlowFeed feed;
    feed(Event{0, "", "", "", LimitSet{"k", 0, 1, kSecond, 1}});
    ItemQueued q;
    q.payload = "{}";
    q.concurrency_key = "k";
    feed(Event{1, "w", "p", "a", q});
    feed(Event{10 * kSecond, "w", "p", "a", ItemClaimed{"w1", 1, 40 * kSecond, 1, "k", 0}});
    feed(Event{20 * kSecond, "", "", "", LimitClockCarried{"k", carried, "seg"}});
    return feed.log;
  };
  const Micros truth = 11 * kSecond;
  // The claims' own clock: clean, whole or not; the row takes it.
  CHECK(log_with_carry(truth).fold(true).problems.empty());
  CHECK(log_with_carry(truth).fold(false).problems.empty());
  CHECK(log_with_carry(truth).fold(false).carried.contains("k"));
  // Later: archived claims may explain it in a live store, never in a
  // whole history (where every claim is replayed).
  CHECK(log_with_carry(truth + 5 * kSecond).fold(false).problems.empty());
  CHECK(log_with_carry(truth + 5 * kSecond).fold(false).limits.at("k").tat == truth + 5 * kSecond);
  const auto whole = log_with_carry(truth + 5 * kSecond).fold(true).problems;
  REQUIRE(whole.size() == 1);
  CHECK(whole[0].kind == ProblemKind::limit_clock_disagrees);
  // Earlier: no archive can explain a clock behind the claims it keeps.
  const auto behind = log_with_carry(truth - 1).fold(false).problems;
  REQUIRE(behind.size() == 1);
  CHECK(behind[0].kind == ProblemKind::limit_clock_disagrees);
}
