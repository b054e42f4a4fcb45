#include <catch2/catch.hpp>

#include <set>

#include "events/clock.hpp"
#include "events/codec.hpp"
#include "events/event.hpp"
#include "events/names.hpp"
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

// One sample per kind, every field set to something other than its
// default, so that a field the codec forgets cannot round-trip. A kind with
// no entry here does not compile (the primary template is undefined).
template <class E>
struct Sample;
template <>
struct Sample<ProjectCreated> {
  static ProjectCreated make() { return {"Project Alpha", "open"}; }
};
template <>
struct Sample<ActorAssigned> {
  static ActorAssigned make() { return {"bob"}; }
};
template <>
struct Sample<ItemQueued> {
  static ItemQueued make() {
    return {R"({"task":"x"})", WorkKind::pr, "o/r#1", "abc123", "agent-2", 5, "key-1",
            3, "exponential:1s:1h", 1'700'000'000'000'000, "repo:acme/web"};
  }
};
template <>
struct Sample<AttemptFailed> {
  static AttemptFailed make() { return {7, "timeout", 900'000'123}; }
};
template <>
struct Sample<ItemRetried> {
  static ItemRetried make() { return {2, "op-00000000000000ab"}; }
};
template <>
struct Sample<ItemRescheduled> {
  static ItemRescheduled make() { return {900'000'555}; }
};
template <>
struct Sample<ItemCancelled> {
  static ItemCancelled make() { return {7, "not wanted", "op-1"}; }
};
template <>
struct Sample<RetryPolicySet> {
  static RetryPolicySet make() { return {5, "fixed:30s"}; }
};
template <>
struct Sample<ProjectPaused> {
  static ProjectPaused make() { return {"deploy freeze"}; }
};
template <>
struct Sample<ScheduleCreated> {
  static ScheduleCreated make() {
    return {"nightly", "0 3 * * *", "Europe/Berlin", R"({"job":"backup"})", true, -1, 900'000'777};
  }
};
template <>
struct Sample<ScheduleFired> {
  static ScheduleFired make() { return {"nightly", 900'000'000, "item-9", 2, 900'086'400}; }
};
template <>
struct Sample<ScheduleSkipped> {
  static ScheduleSkipped make() { return {"nightly", 900'000'001, "overlap", 900'086'401}; }
};
template <>
struct Sample<SchedulePaused> {
  static SchedulePaused make() { return {"nightly"}; }
};
template <>
struct Sample<ScheduleResumed> {
  static ScheduleResumed make() { return {"nightly", 900'172'800}; }
};
template <>
struct Sample<ScheduleRemoved> {
  static ScheduleRemoved make() { return {"nightly"}; }
};
template <>
struct Sample<ProjectResumed> {
  static ProjectResumed make() { return {}; }
};
template <>
struct Sample<ProjectWeightSet> {
  static ProjectWeightSet make() { return {3}; }
};
template <>
struct Sample<LimitSet> {
  static LimitSet make() { return {"api", 4, 10, 1'000'000, 5}; }
};
template <>
struct Sample<LimitRemoved> {
  static LimitRemoved make() { return {"api"}; }
};
template <>
struct Sample<SegmentArchived> {
  static SegmentArchived make() {
    return {"5eg", std::string(64, 'a'), "/var/seg", 900'000'000, "alpha", 4, 9, 4096, 2, 1, 1, 2};
  }
};
template <>
struct Sample<KeyReleased> {
  static KeyReleased make() { return {"nightly-42"}; }
};
template <>
struct Sample<LimitClockCarried> {
  static LimitClockCarried make() { return {"api", 900'000'123, "5eg"}; }
};
template <>
struct Sample<ItemClaimed> {
  static ItemClaimed make() { return {"w1", 7, 900'000'004, 3, "api", 4'000'000}; }
};
template <>
struct Sample<ItemFinished> {
  static ItemFinished make() { return {Outcome::failed, 7, "disk full"}; }
};
template <>
struct Sample<LeaseExtended> {
  static LeaseExtended make() { return {7, 900'000'009}; }
};
template <>
struct Sample<ItemReleased> {
  static ItemReleased make() { return {7, "blocked"}; }
};
template <>
struct Sample<LeaseExpired> {
  static LeaseExpired make() { return {7, "w1", 900'000'009}; }
};
template <>
struct Sample<ItemAssigned> {
  static ItemAssigned make() {
    return {"s1", 8, 900'000'010, 4, {"comment", "push"}, "abc123", "repo:acme/web"};
  }
};
template <>
struct Sample<HeadMoved> {
  static HeadMoved make() { return {"def456"}; }
};
template <>
struct Sample<ReviewChanged> {
  static ReviewChanged make() { return {ReviewState::changes_requested}; }
};
template <>
struct Sample<ItemClosed> {
  static ItemClosed make() { return {CloseReason::merged}; }
};
template <>
struct Sample<MutationRecorded> {
  static MutationRecorded make() { return {"s1", 8, "push", "abc123"}; }
};
template <>
struct Sample<SessionOpened> {
  static SessionOpened make() { return {"s1", "bob"}; }
};
template <>
struct Sample<SessionSeen> {
  static SessionSeen make() { return {"s1"}; }
};
template <>
struct Sample<SessionClosed> {
  static SessionClosed make() { return {"s1"}; }
};
template <>
struct Sample<TerminalPathEntered> {
  static TerminalPathEntered make() { return {"approved"}; }
};
template <>
struct Sample<TerminalPathLeft> {
  static TerminalPathLeft make() { return {}; }
};
template <>
struct Sample<IncidentLinked> {
  static IncidentLinked make() {
    return {"sentry", "fp/1", "org", "repo", "prod", "item-9", "open", 12,
            "https://x/1", "2026-01-01", "2026-01-02", "o/r#3,o/r#4"};
  }
};

bool is_set(const EventField::Value& v) {
  return std::visit(
      [](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) return false;
        else if constexpr (std::is_same_v<T, std::int64_t>) return x != 0;
        else if constexpr (std::is_same_v<T, EventField::Json>) return !x.text.empty();
        else return !x.empty();
      },
      v);
}

}  // namespace

TEST_CASE("every event type survives an encode/decode round trip", "[events]") {
  int kinds = 0;
  std::set<std::string_view> names;
  for_each_event_kind([&]<class E>() {
    ++kinds;
    const Event event{100 + kinds, "actor-1", "alpha", "item-1", Sample<E>::make(), 42};
    const std::string_view name = type_name(event.body);
    CAPTURE(name);
    CHECK(decode(encode(event)) == event);
    CHECK(names.insert(name).second);  // one stored name per kind
    // Every field is set in the sample, so each one is carried through.
    for (const auto& field : fields_of(event.body)) {
      CAPTURE(field.name);
      CHECK(is_set(field.value));
    }
    if (const auto fence = fence_of(event.body)) CHECK(*fence != 0);
    // The stream is the kind's, with an id the registration finds.
    const StreamRef stream = stream_of(event);
    CHECK(stream.kind == EventTraits<E>::stream);
    CHECK_FALSE(stream.id.empty());
  });
  CHECK(kinds == static_cast<int>(std::variant_size_v<EventBody>));
  for (const auto& event : samples()) CHECK(decode(encode(event)) == event);
}

TEST_CASE("every event kind names its fields once, and never as one of the event's own",
          "[events]") {
  for_each_event_kind([&]<class E>() {
    const EventBody body = Sample<E>::make();
    CAPTURE(type_name(body));
    std::set<std::string_view> seen = {"seq",     "type",       "actor",      "fence",
                                       "at",      "item_id",    "project_id", "request_id"};
    for (const auto& field : fields_of(body)) {
      CAPTURE(field.name);
      CHECK(seen.insert(field.name).second);
    }
  });
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

TEST_CASE("every enum's one name table parses its own names back, and nothing else",
          "[events]") {
  auto check = [&]<class Enum>() {
    for (const auto& [value, name] : EnumNames<Enum>::table) {
      CAPTURE(name);
      CHECK(name_of(value) == name);
      CHECK(enum_named<Enum>(name) == value);
      CHECK_FALSE(enum_named<Enum>(std::string(name) + " "));
    }
    CHECK_FALSE(enum_named<Enum>(""));
  };
  check.operator()<Outcome>();
  check.operator()<WorkKind>();
  check.operator()<ReviewState>();
  check.operator()<CloseReason>();
  check.operator()<StreamKind>();
  check.operator()<ItemStatus>();
  CHECK(to_string(WorkKind::pr) == "pr");
  CHECK(parse_review_state("changes_requested") == ReviewState::changes_requested);
  try {
    parse_work_kind("bug");
    FAIL("parsed a kind that is not one");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()) == "unknown kind 'bug': expected task, issue or pr");
  }
}
