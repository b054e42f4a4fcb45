#include <catch2/catch.hpp>

#include <set>

#include "events/clock.hpp"
#include "events/codec.hpp"
#include "events/errors.hpp"

using namespace cplane;

namespace {

std::vector<Event> samples() {
  return {
      Event{1, "", "alpha", "", ProjectCreated{"Project Alpha", "open"}},
      Event{2, "", "alpha", "", ActorAssigned{"bob"}},
      Event{3, "bob", "alpha", "item-1", ItemQueued{R"({"task":"x"})"}},
      Event{4, "w1", "alpha", "item-1", ItemClaimed{"w1", 7, 900'000'004, 3}},
      Event{5, "w1", "alpha", "item-1", ItemFinished{Outcome::failed, 7, "disk full"}},
      Event{6, "w1", "alpha", "item-1", LeaseExtended{7, 900'000'009}},
      Event{7, "w1", "alpha", "item-1", ItemReleased{7, "blocked"}},
      Event{8, "", "alpha", "item-1", LeaseExpired{7, "w1", 900'000'009}},
  };
}

}  // namespace

TEST_CASE("every event type survives an encode/decode round trip", "[events]") {
  for (const auto& event : samples()) {
    CAPTURE(type_name(event.body));
    CHECK(decode(encode(event)) == event);
  }
}

TEST_CASE("events decode from an unaligned buffer", "[events]") {
  const std::string bytes = encode(samples()[3]);
  std::string shifted = "x" + bytes;  // one byte off the word boundary
  CHECK(decode(std::string_view(shifted).substr(1)) == samples()[3]);
}

TEST_CASE("type names are the stored, user-facing names", "[events]") {
  auto all = samples();
  CHECK(type_name(all[0].body) == "project_created");
  CHECK(type_name(all[1].body) == "actor_assigned");
  CHECK(type_name(all[2].body) == "queued");
  CHECK(type_name(all[3].body) == "claimed");
  CHECK(type_name(all[4].body) == "failed");
  CHECK(type_name(EventBody{ItemFinished{Outcome::done, 1, ""}}) == "done");
}

TEST_CASE("truncated or foreign bytes are an UnreadableEvent, not a crash", "[events]") {
  const std::string bytes = encode(samples()[2]);
  CHECK_THROWS_AS(decode(std::string_view()), UnreadableEvent);
  CHECK_THROWS_AS(decode(std::string_view(bytes).substr(0, bytes.size() - 8)), UnreadableEvent);
  CHECK_THROWS_AS(decode(std::string_view(bytes).substr(0, 5)), UnreadableEvent);
  CHECK_THROWS_AS(decode(std::string_view("not an event, just some text....")), UnreadableEvent);
  std::string noise(64, '\xff');
  CHECK_THROWS_AS(decode(noise), UnreadableEvent);
}

TEST_CASE("an event type from a newer build is UnknownEventType", "[events]") {
  std::string bytes = encode(samples()[2]);
  // Layout: 8-byte segment table, root pointer (8), then the Event struct's
  // data section; the union discriminant is the 16-bit field after `at`.
  const size_t discriminant = 8 + 8 + 8;
  bytes[discriminant] = 42;
  bytes[discriminant + 1] = 0;
  CHECK_THROWS_AS(decode(bytes), UnknownEventType);
  try {
    decode(bytes);
  } catch (const StorageError& e) {
    CHECK(e.category() == StorageError::Category::incompatible);
  }
}

TEST_CASE("outcomes parse from their names and nothing else", "[events]") {
  CHECK(parse_outcome("done") == Outcome::done);
  CHECK(parse_outcome("failed") == Outcome::failed);
  CHECK_THROWS_AS(parse_outcome("DONE"), InvalidArgument);
  CHECK_THROWS_AS(parse_outcome(""), InvalidArgument);
  CHECK_THROWS_AS(parse_outcome("cancelled"), InvalidArgument);
}

TEST_CASE("item ids are UUIDv7 strings, unique and ordered by time", "[events]") {
  std::set<std::string> ids;
  for (int i = 0; i < 10'000; ++i) ids.insert(new_item_id(1'700'000'000'000'000));
  CHECK(ids.size() == 10'000);
  const std::string id = *ids.begin();
  REQUIRE(id.size() == 36);
  CHECK(id[14] == '7');
  CHECK(new_item_id(1'700'000'000'000'000) < new_item_id(1'700'000'001'000'000));
}
