// The pure decisions, without a database.
#include <catch2/catch.hpp>

#include <cmath>

#include "commands/decide.hpp"
#include "events/errors.hpp"

using namespace cplane;

namespace {

ItemRow claimed_row(Fence fence, Micros lease_expires_at) {
  ItemRow row;
  row.item_id = "i1";
  row.project_id = "alpha";
  row.status = ItemStatus::claimed;
  row.owner = "w1";
  row.fence = fence;
  row.attempts = static_cast<std::uint32_t>(fence);
  row.lease_expires_at = lease_expires_at;
  return row;
}

}  // namespace

TEST_CASE("a claim raises the fence by one and counts the attempt", "[decide]") {
  ItemRow ready;
  ready.item_id = "i1";
  ready.project_id = "alpha";
  const Event e = decide_claim(ready, "w1", "w1", 5'000'000, 1'000);
  const auto& c = std::get<ItemClaimed>(e.body);
  CHECK(c.owner == "w1");
  CHECK(c.fence == 1);
  CHECK(c.attempt == 1);
  CHECK(c.lease_expires_at == 5'001'000);
  CHECK(e.item_id == "i1");
  CHECK(e.at == 1'000);
}

TEST_CASE("a lapsed lease is reclaimed with a higher fence, a live one is not", "[decide]") {
  const ItemRow row = claimed_row(3, 10'000);
  CHECK_FALSE(is_claimable(row, 9'999));
  CHECK(is_claimable(row, 10'000));
  const Event e = decide_claim(row, "w2", "w2", 1'000, 20'000);
  CHECK(std::get<ItemClaimed>(e.body).fence == 4);
  CHECK(std::get<ItemClaimed>(e.body).attempt == 4);
  CHECK_THROWS_AS(decide_claim(row, "w2", "w2", 1'000, 5'000), InternalError);
}

TEST_CASE("a claim needs an owner and a positive lease", "[decide]") {
  ItemRow ready;
  CHECK_THROWS_AS(decide_claim(ready, "", "", 1'000, 0), InvalidArgument);
  CHECK_THROWS_AS(decide_claim(ready, "w1", "w1", 0, 0), InvalidArgument);
  CHECK_THROWS_AS(decide_claim(ready, "w1", "w1", -5, 0), InvalidArgument);
}

TEST_CASE("finish accepts only the current fence of a claimed item", "[decide][fence]") {
  const ItemRow row = claimed_row(2, 10'000);
  const Event e = decide_finish(row, "i1", 2, Outcome::done, "ok", "", 500);
  CHECK(std::get<ItemFinished>(e.body) == ItemFinished{Outcome::done, 2, "ok"});
  CHECK(e.actor == "w1");
  CHECK_THROWS_AS(decide_finish(row, "i1", 1, Outcome::done, "", "", 500), FenceRejected);
  CHECK_THROWS_AS(decide_finish(row, "i1", 3, Outcome::done, "", "", 500), FenceRejected);
}

TEST_CASE("finish refuses unknown, ready and terminal items", "[decide][fence]") {
  CHECK_THROWS_AS(decide_finish(std::nullopt, "x", 0, Outcome::done, "", "", 0), FenceRejected);
  ItemRow ready;
  ready.item_id = "i1";
  CHECK_THROWS_AS(decide_finish(ready, "i1", 0, Outcome::done, "", "", 0), FenceRejected);
  ItemRow done = claimed_row(1, 100);
  done.status = ItemStatus::done;
  CHECK_THROWS_AS(decide_finish(done, "i1", 1, Outcome::failed, "", "", 0), FenceRejected);
}

TEST_CASE("a lapsed lease that nobody reclaimed still accepts its fence", "[decide][fence]") {
  const ItemRow row = claimed_row(1, 100);
  CHECK_NOTHROW(decide_finish(row, "i1", 1, Outcome::done, "", "", 1'000'000));
}

TEST_CASE("projects need an id and a status and cannot be created twice", "[decide]") {
  const Event e = decide_create_project(std::nullopt, "alpha", "Alpha", "open", 7);
  CHECK(e.project_id == "alpha");
  CHECK(std::get<ProjectCreated>(e.body) == ProjectCreated{"Alpha", "open"});
  CHECK_THROWS_AS(decide_create_project(std::nullopt, "", "t", "open", 7), InvalidArgument);
  CHECK_THROWS_AS(decide_create_project(std::nullopt, "a", "t", "", 7), InvalidArgument);
  CHECK_THROWS_AS(decide_create_project(ProjectRow{"alpha"}, "alpha", "t", "open", 7),
                  InvalidArgument);
}

TEST_CASE("assigning twice records nothing the second time", "[decide]") {
  const ProjectRow project{"alpha", "Alpha", "open", 1, 1};
  CHECK(decide_grant(project, false, "bob", 5).has_value());
  CHECK_FALSE(decide_grant(project, true, "bob", 5).has_value());
  CHECK_THROWS_AS(decide_grant(project, false, "", 5), InvalidArgument);
}
