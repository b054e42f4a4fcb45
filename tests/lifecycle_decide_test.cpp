// The lifecycle's pure decisions, without a database: durations, backoff
// SPECs and their waits, the fence rules a cancel and a failed attempt
// leave, and what each decision appends or refuses.
#include <catch2/catch.hpp>

#include <set>

#include "commands/decide.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"

using namespace cplane;

namespace {

constexpr Micros T0 = 1'800'000'000'000'000;
constexpr Micros kSecond = 1'000'000;

ItemRow claimed_row(std::uint32_t attempts, std::uint32_t limit) {
  ItemRow row;
  row.item_id = "i1";
  row.project_id = "alpha";
  row.status = ItemStatus::claimed;
  row.owner = "w";
  row.fence = attempts;
  row.attempts = attempts;
  row.attempt_limit = limit;
  row.max_attempts = limit;
  row.backoff = "fixed:30s";
  row.lease_expires_at = T0 + 100;
  return row;
}

}  // namespace

TEST_CASE("durations and backoff SPECs parse as documented: and nothing else does",
          "[lifecycle][decide]") {
  CHECK(parse_duration("500ms") == 500'000);
  CHECK(parse_duration("30s") == 30 * kSecond);
  CHECK(parse_duration("10m") == 600 * kSecond);
  CHECK(parse_duration("2h") == 7200 * kSecond);
  CHECK(parse_duration("1d") == 86400 * kSecond);
  for (const char* bad : {"", "s", "10", "0s", "-1s", "1.5s", "10 s", "1w", "3000000000000d",
                          "1s ", "+1s"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_duration(bad), InvalidArgument);
  }
  CHECK(parse_backoff("").kind == Backoff::none);
  CHECK(parse_backoff("none").kind == Backoff::none);
  const Backoff fixed = parse_backoff("fixed:30s");
  CHECK(fixed.kind == Backoff::fixed);
  CHECK(fixed.base == 30 * kSecond);
  const Backoff exp = parse_backoff("exponential:1s");
  CHECK(exp.kind == Backoff::exponential);
  CHECK(exp.base == kSecond);
  CHECK(exp.cap == 3600 * kSecond);  // CAP 1h when left out
  CHECK(parse_backoff("exponential:500ms:2m").cap == 120 * kSecond);
  for (const char* bad : {"fixed", "fixed:", "fixed:1s:2s", "exponential", "exponential:1m:1s",
                          "exp:1s", "linear:1s", "none:1s", "fixed:0s", "Fixed:1s"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_backoff(bad), InvalidArgument);
  }
}

TEST_CASE("exponential backoff doubles up to its cap with a jitter of at most 10%: the same "
          "for the same item and attempt",
          "[lifecycle][decide]") {
  const Backoff b = parse_backoff("exponential:1s:1m");
  std::set<Micros> distinct;
  for (std::uint32_t attempt = 1; attempt <= 12; ++attempt) {
    const Micros base = std::min<Micros>(kSecond << (attempt - 1), 60 * kSecond);
    for (const char* id : {"a", "b", "c", "0193-long-item-id"}) {
      const Micros w = backoff_wait(b, id, attempt);
      INFO(id << " attempt " << attempt << " waits " << w);
      CHECK(w >= base - base / 10);
      CHECK(w <= base + base / 10);
      CHECK(w == backoff_wait(b, id, attempt));
      distinct.insert(w);
    }
  }
  CHECK(distinct.size() > 20);  // the jitter spreads a fleet's retries apart
  // Huge attempt counts stay at the cap, never overflow.
  CHECK(backoff_wait(b, "a", 4'000'000'000U) <= 66 * kSecond);
  CHECK(backoff_wait(parse_backoff("fixed:2s"), "a", 7) == 2 * kSecond);
  CHECK(backoff_wait(parse_backoff("none"), "a", 7) == 0);
}

TEST_CASE("a failed finish under a policy is attempt_failed while attempts remain: then the "
          "dead end: no_retry and no policy end it at once",
          "[lifecycle][decide]") {
  const ItemRow first = claimed_row(1, 3);
  const Event e = decide_finish(first, "i1", 1, Outcome::failed, "x", "", T0 + 5);
  REQUIRE(std::holds_alternative<AttemptFailed>(e.body));
  CHECK(std::get<AttemptFailed>(e.body).retry_at == T0 + 5 + 30 * kSecond);
  const ItemRow after = apply(first, StoredEvent{9, e});
  CHECK(after.status == ItemStatus::scheduled);
  CHECK(after.run_at == T0 + 5 + 30 * kSecond);
  CHECK(fence_refusal(&after, 1) == FenceRejected::Reason::stale_fence);
  CHECK_FALSE(claimable(after, T0 + 5 + 30 * kSecond - 1));
  CHECK(claimable(after, T0 + 5 + 30 * kSecond));

  CHECK(std::holds_alternative<ItemFinished>(
      decide_finish(claimed_row(3, 3), "i1", 3, Outcome::failed, "", "", T0).body));
  CHECK(std::holds_alternative<ItemFinished>(
      decide_finish(first, "i1", 1, Outcome::failed, "", "", T0, true).body));
  CHECK(std::holds_alternative<ItemFinished>(
      decide_finish(claimed_row(1, 0), "i1", 1, Outcome::failed, "", "", T0).body));
  CHECK(std::holds_alternative<ItemFinished>(
      decide_finish(first, "i1", 1, Outcome::done, "", "", T0).body));
}

TEST_CASE("a lapsed lease with no attempts left is never claimable: and the sweep fails it",
          "[lifecycle][decide]") {
  const ItemRow row = claimed_row(2, 2);
  const Micros later = row.lease_expires_at;
  CHECK(lapsed_exhausted(row, later));
  CHECK_FALSE(claimable(row, later));
  CHECK_FALSE(lapsed_exhausted(row, later - 1));
  const auto e = decide_expire_lease(row, std::nullopt, later);
  REQUIRE(e);
  REQUIRE(std::holds_alternative<ItemFinished>(e->body));
  CHECK(std::get<ItemFinished>(e->body).outcome == Outcome::failed);
  CHECK(std::get<ItemFinished>(e->body).detail == "lease lapsed, attempts exhausted");
  CHECK_THROWS_AS(decide_exhaust(claimed_row(1, 2), later), InternalError);
  // With attempts left, or with no policy, a lapse is reclaimable as ever.
  CHECK(claimable(claimed_row(1, 2), later));
  CHECK(claimable(claimed_row(50, 0), later));
}

TEST_CASE("retry: reschedule and cancel decide by status: and say why they refuse",
          "[lifecycle][decide]") {
  ItemRow failed = claimed_row(1, 1);
  failed.status = ItemStatus::failed;
  const Event r = decide_retry(failed, "i1", std::nullopt, "alice", "", T0);
  CHECK(std::get<ItemRetried>(r.body).attempts == 1);  // its policy's
  CHECK(r.actor == "alice");
  const ItemRow ready = apply(failed, StoredEvent{10, r});
  CHECK(ready.status == ItemStatus::ready);
  CHECK(ready.attempt_limit == 2);
  CHECK(ready.queued_seq == 10);
  CHECK(fence_refusal(&ready, 1) == FenceRejected::Reason::stale_fence);

  for (const ItemStatus s : {ItemStatus::ready, ItemStatus::claimed, ItemStatus::done,
                             ItemStatus::closed, ItemStatus::scheduled}) {
    ItemRow row = failed;
    row.status = s;
    INFO(to_string(s));
    try {
      decide_retry(row, "i1", std::nullopt, "", "", T0);
      FAIL("retried");
    } catch (const InvalidArgument& e) {
      CHECK(e.reason() == InvalidArgument::Reason::conflict);
      CHECK(std::string(e.what()).find(std::string(to_string(s))) != std::string::npos);
    }
  }
  CHECK_THROWS_AS(decide_retry(std::nullopt, "x", std::nullopt, "", "", T0), NotFound);

  ItemRow held = claimed_row(1, 0);
  CHECK_THROWS_AS(decide_reschedule(held, "i1", T0, "", T0), InvalidArgument);
  const Event c = decide_cancel(held, "i1", "why", "ops", "op-1", T0);
  CHECK(std::get<ItemCancelled>(c.body).fence == 1);
  const ItemRow cancelled = apply(held, StoredEvent{11, c});
  CHECK(cancelled.status == ItemStatus::cancelled);
  CHECK(is_terminal(cancelled.status));
  CHECK(fence_refusal(&cancelled, 1) == FenceRejected::Reason::cancelled);
  CHECK_THROWS_AS(decide_cancel(cancelled, "i1", "", "", "", T0), InvalidArgument);
  ItemRow waiting = held;
  waiting.status = ItemStatus::scheduled;
  CHECK(std::get<ItemCancelled>(decide_cancel(waiting, "i1", "", "", "", T0).body).fence == 0);
}

TEST_CASE("the claim order: available earliest: ties in queue order", "[lifecycle][decide]") {
  ItemRow ready;
  ready.status = ItemStatus::ready;
  ready.queued_at = T0 + 5;
  ready.queued_seq = 3;
  ItemRow due;
  due.status = ItemStatus::scheduled;
  due.run_at = T0 + 4;
  due.queued_seq = 7;
  ItemRow lapsed;
  lapsed.status = ItemStatus::claimed;
  lapsed.lease_expires_at = T0 + 5;
  lapsed.queued_seq = 2;
  CHECK(available_before(due, ready));
  CHECK(available_before(lapsed, ready));  // the same instant: queued first
  CHECK_FALSE(available_before(ready, lapsed));
}
