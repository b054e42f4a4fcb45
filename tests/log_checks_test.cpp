// What the log must say on its own, whatever the rows: each forged event
// (appended with raw SQL, body and columns agreeing, as a bug or an editor
// with the codec could) is named by the check that guards against it.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>

#include <cplane/cplane.hpp>

#include "events/codec.hpp"
#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::sql;
using cplane::test::TempDir;
using cplane::test::test_context;

constexpr Micros T0 = 1'700'000'000'000'000;

// Appends `event` to the log as the engine would file it, without a row.
void forge(const std::string& db, const Event& event) {
  const std::string body = encode(event);
  std::string hex;
  for (unsigned char c : body) hex += fmt::format("{:02x}", c);
  const StreamRef stream = stream_of(event);
  sql(db, fmt::format("INSERT INTO events (item_id, project_id, type, at, body, stream_kind, "
                      "stream_id) VALUES ({}, '{}', '{}', {}, x'{}', '{}', '{}')",
                      event.item_id.empty() ? "NULL" : "'" + event.item_id + "'",
                      event.project_id, type_name(event.body), event.at, hex,
                      to_string(stream.kind), stream.id));
  // Chained, heads and digest and all: these checks must hold against a
  // writer that chains what it forges.
  test_context().forge_chain(db);
}

bool reports(const std::vector<LedgerProblem>& problems, ProblemKind kind, const std::string& id) {
  return std::any_of(problems.begin(), problems.end(), [&](const LedgerProblem& p) {
    return p.kind == kind && (p.item_id == id || p.project_id == id);
  });
}

std::string kinds(const std::vector<LedgerProblem>& problems) {
  std::string out;
  for (const auto& p : problems) {
    out += std::string(to_string(p.kind)) + " " + p.item_id + " " + p.project_id + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("verify checks what the log says on its own", "[verify][log]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  std::string id;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    id = store.enqueue("alpha", "{}", {}, T0 + 1);
    store.claim("w1", {.lease = Seconds{1}, .now = T0 + 2});  // fence 1, attempt 1
  }
  const Micros later = T0 + 10'000'000;  // after the lease
  struct Case {
    const char* name;
    Event forged;
    ProblemKind kind;
    std::string about;
  };
  const std::vector<Case> cases = {
      {"a fence that jumps", Event{later, "w2", "alpha", id, ItemClaimed{"w2", 3, later + 1'000'000, 2}},
       ProblemKind::fence_skipped, id},
      {"an attempt that does not rise", Event{later, "w2", "alpha", id, ItemClaimed{"w2", 2, later + 1'000'000, 7}},
       ProblemKind::attempt_not_rising, id},
      {"a lease that ends before its claim", Event{later, "w2", "alpha", id, ItemClaimed{"w2", 2, later, 2}},
       ProblemKind::lease_before_claim, id},
      {"a payload no command accepts", Event{T0 + 5, "", "alpha", "forged-item", ItemQueued{"{not json"}},
       ProblemKind::invalid_payload, "forged-item"},
      {"a grant to a project never created", Event{T0 + 5, "", "ghost", "", ActorAssigned{"bob"}},
       ProblemKind::grant_without_project, "ghost"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      forge(db, c.forged);
      ControlStore store{db};
      const auto problems = verify_ledger(store);
      INFO(kinds(problems));
      CHECK(reports(problems, c.kind, c.about));
    }
  }
  SECTION("a clean log has none of them") {
    ControlStore store{db};
    CHECK(verify_ledger(store).empty());
  }
}

TEST_CASE("an item's events before its project's creation are named", "[verify][log]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  { ControlStore{db}.create_project("alpha", "A", "open", T0); }
  // Queued into 'late' before 'late' exists in the log.
  forge(db, Event{T0 + 1, "", "late", "early-item", ItemQueued{"{}"}});
  { ControlStore{db}.create_project("late", "L", "open", T0 + 2); }
  ControlStore store{db};
  const auto problems = verify_ledger(store);
  INFO(kinds(problems));
  CHECK(reports(problems, ProblemKind::event_before_project, "early-item"));
  CHECK_FALSE(reports(problems, ProblemKind::item_in_unknown_project, "early-item"));
}

TEST_CASE("problem details quote at most 200 bytes of a value, with its length and fingerprint",
          "[verify]") {
  TempDir dir;
  const std::string db = test_context().fresh_store(dir, "c.db");
  std::string id;
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    id = store.enqueue("alpha", "{\"big\": \"" + std::string(500'000, 'x') + "\"}");
  }
  sql(db, "UPDATE items SET payload = '{\"big\": \"" + std::string(400'000, 'y') + "\"}'");
  ControlStore store{db};
  const auto problems = verify_ledger(store);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == ProblemKind::payload_disagrees);
  CHECK(problems[0].detail.size() < 1000);
  CHECK(problems[0].detail.find("400011 bytes") != std::string::npos);
  CHECK(problems[0].detail.find("500011 bytes") != std::string::npos);
  const auto report = rebuild(store, {.dry_run = true});
  REQUIRE(report.changes.size() == 1);
  CHECK(report.changes[0].fields.at(0).size() < 1000);
}
