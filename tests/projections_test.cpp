// The pure fold, without a database.
#include <catch2/catch.hpp>

#include <vector>

#include "projections/apply.hpp"

using namespace cplane;

namespace {

StoredEvent at(Seq seq, Event e) { return StoredEvent{seq, std::move(e)}; }

std::vector<StoredEvent> lifecycle() {
  return {
      at(3, Event{100, "", "alpha", "i1", ItemQueued{R"({"n":1})"}}),
      at(4, Event{200, "w1", "alpha", "i1", ItemClaimed{"w1", 1, 1200, 1}}),
      at(9, Event{2000, "w2", "alpha", "i1", ItemClaimed{"w2", 2, 3000, 2}}),
      at(12, Event{2500, "w2", "alpha", "i1", ItemFinished{Outcome::done, 2, "ok"}}),
  };
}

}  // namespace

TEST_CASE("queued makes a ready row with the payload and its place in line", "[fold]") {
  const ItemRow row = apply(ItemRow{}, lifecycle()[0]);
  CHECK(row.item_id == "i1");
  CHECK(row.project_id == "alpha");
  CHECK(row.payload == R"({"n":1})");
  CHECK(row.status == ItemStatus::ready);
  CHECK(row.fence == 0);
  CHECK(row.attempts == 0);
  CHECK(row.queued_seq == 3);
  CHECK(row.queued_at == 100);
  CHECK(row.last_seq == 3);
}

TEST_CASE("a claim sets owner, fence, attempt and lease", "[fold]") {
  auto events = lifecycle();
  const ItemRow row = fold<ItemRow>(std::vector(events.begin(), events.begin() + 2));
  CHECK(row.status == ItemStatus::claimed);
  CHECK(row.owner == "w1");
  CHECK(row.fence == 1);
  CHECK(row.attempts == 1);
  CHECK(row.lease_expires_at == 1200);
  CHECK(row.updated_at == 200);
  CHECK(row.last_seq == 4);
}

TEST_CASE("a reclaim replaces the owner and raises the fence", "[fold]") {
  auto events = lifecycle();
  const ItemRow row = fold<ItemRow>(std::vector(events.begin(), events.begin() + 3));
  CHECK(row.owner == "w2");
  CHECK(row.fence == 2);
  CHECK(row.attempts == 2);
  CHECK(row.lease_expires_at == 3000);
}

TEST_CASE("a finish makes the row terminal and clears the lease", "[fold]") {
  const ItemRow row = fold<ItemRow>(lifecycle());
  CHECK(row.status == ItemStatus::done);
  CHECK(row.owner == "w2");
  CHECK(row.fence == 2);
  CHECK(row.lease_expires_at == 0);
  CHECK(row.detail == "ok");
  CHECK(row.last_seq == 12);
  auto failed = lifecycle();
  failed[3].event.body = ItemFinished{Outcome::failed, 2, "boom"};
  CHECK(fold<ItemRow>(failed).status == ItemStatus::failed);
}

TEST_CASE("folding is deterministic: the same log gives the same row", "[fold]") {
  CHECK(fold<ItemRow>(lifecycle()) == fold<ItemRow>(lifecycle()));
}

TEST_CASE("project events fold into project and assignment rows only", "[fold]") {
  const StoredEvent created = at(1, Event{10, "", "alpha", "", ProjectCreated{"Alpha", "open"}});
  const StoredEvent assigned = at(2, Event{20, "", "alpha", "", ActorAssigned{"bob"}});
  const ProjectRow project = apply(ProjectRow{}, created);
  CHECK(project == ProjectRow{"alpha", "Alpha", "open", 10, 1});
  const ProjectActorRow assignment = apply(ProjectActorRow{}, assigned);
  CHECK(assignment == ProjectActorRow{"alpha", "bob", 20, 2});
  CHECK(apply(ItemRow{}, created) == ItemRow{});
  CHECK(apply(project, assigned) == project);
}

TEST_CASE("item statuses round-trip through their stored names", "[fold]") {
  for (auto s : {ItemStatus::ready, ItemStatus::claimed, ItemStatus::done, ItemStatus::failed}) {
    CHECK(parse_item_status(to_string(s)) == s);
  }
  CHECK_FALSE(parse_item_status("pending").has_value());
}
