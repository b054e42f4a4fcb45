// Problem kinds: one list (CPLANE_PROBLEM_KINDS in include/cplane/ledger.hpp)
// gives each its enumerator, its stored name and its meaning. The names are
// what `cplane verify --json` prints and programs match on, so they never
// change; and every kind is documented where a user looks for it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <cplane/ledger.hpp>

#include "tests/support.hpp"

using namespace cplane;

namespace {

std::string source_file(const std::string& relative) {
  const std::string path = std::string(CPLANE_SOURCE_DIR) + "/" + relative;
  std::ifstream in(path);
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The rows "| `name` | meaning |" of the tables in `text`: name -> meaning.
std::map<std::string, std::string> kind_rows(const std::string& text) {
  std::map<std::string, std::string> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const auto name_end = line.find("` | ", 3);
    if (name_end == std::string::npos || line.size() < 2 ||
        line.compare(line.size() - 2, 2, " |") != 0) {
      continue;
    }
    const auto meaning_start = name_end + 4;
    rows[line.substr(3, name_end - 3)] =
        line.substr(meaning_start, line.size() - 2 - meaning_start);
  }
  return rows;
}

std::string doc_row(const ProblemKindInfo& info) {
  return "| `" + std::string(info.name) + "` | " + std::string(info.meaning) + " |";
}

}  // namespace

TEST_CASE("each problem kind has one stored name, which parses back to it", "[verify][kinds]") {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < std::size(kProblemKinds); ++i) {
    const ProblemKindInfo& info = kProblemKinds[i];
    CAPTURE(info.name);
    CHECK(static_cast<std::size_t>(info.kind) == i);  // to_string indexes by the enum
    CHECK(to_string(info.kind) == info.name);
    CHECK(parse_problem_kind(info.name) == info.kind);
    CHECK(names.insert(info.name).second);
    CHECK(std::all_of(info.name.begin(), info.name.end(),
                      [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; }));
    CHECK_FALSE(info.meaning.empty());
  }
  CHECK_FALSE(parse_problem_kind("").has_value());
  CHECK_FALSE(parse_problem_kind("Fence_skipped").has_value());
  CHECK_FALSE(parse_problem_kind("fence_skipped ").has_value());
  CHECK_FALSE(parse_problem_kind("fence").has_value());
}

// Programs match on these names (`cplane verify --json`): a rename, or a
// kind dropped, fails here. A new kind is added to this list as well.
TEST_CASE("the stored names of problem kinds never change", "[verify][kinds]") {
  const std::vector<std::string> released = {
      "assignment_disagrees", "assignment_missing", "assignment_not_allowed",
      "assignment_without_event", "attempt_not_rising", "attempts_disagrees",
      "claim_while_leased", "concurrency_exceeded", "detail_disagrees", "digest_disagrees", "duplicate_creation_event",
      "event_after_terminal", "event_before_project", "event_edited", "event_inserted",
      "event_missing", "event_reordered", "event_without_terminal", "expired_while_leased",
      "fence_disagrees", "fence_not_monotonic", "fence_skipped", "forge_disagrees",
      "forge_fact_invalid", "grant_without_project", "head_disagrees", "head_missing",
      "incident_link_disagrees", "incident_link_missing", "incident_link_without_event",
      "index_disagrees", "invalid_payload", "item_in_unknown_project", "key_disagrees",
      "last_seq_disagrees", "lease_before_claim", "lease_disagrees", "lifecycle_not_allowed",
      "limit_clock_disagrees", "limit_row_disagrees", "limit_row_missing", "limit_row_without_event",
      "mutation_without_assignment", "no_creation_event", "orphan_events", "owner_disagrees",
      "payload_disagrees", "project_disagrees", "project_row_disagrees", "project_row_missing",
      "project_row_without_event", "queued_disagrees", "rate_exceeded", "ready_after_claim", "routing_disagrees",
      "schedule_disagrees", "schedule_fire_unmatched", "schedule_row_disagrees",
      "schedule_row_missing", "schedule_row_without_event", "segment_disagrees", "seq_gap", "session_closed_while_holding", "session_row_disagrees", "session_row_missing",
      "session_row_without_event", "stale_fence_accepted", "status_disagrees", "stream_missing",
      "tail_missing", "terminal_events_disagree", "terminal_lock_disagrees",
      "terminal_lock_missing", "terminal_lock_without_event", "terminal_without_event",
      "two_terminal_events", "undecodable_event", "unknown_event_type",
  };
  std::vector<std::string> names;
  for (const auto& info : kProblemKinds) names.emplace_back(info.name);
  std::sort(names.begin(), names.end());
  CHECK(names == released);
}

// A kind a user meets in `cplane verify` and cannot look up is a silence;
// so is a docs row for a kind that no longer exists.
TEST_CASE("every problem kind is documented in ledger.hpp and in docs/verify.md's tables",
          "[verify][kinds]") {
  const std::string header = source_file("include/cplane/ledger.hpp");
  const auto documented = kind_rows(source_file("docs/verify.md"));
  for (const auto& info : kProblemKinds) {
    CAPTURE(info.name);
    CHECK(header.find("X(" + std::string(info.name) + ",") != std::string::npos);
    // docs/verify.md gives the meaning as ledger.hpp does: the row to paste.
    const auto row = documented.find(std::string(info.name));
    if (row == documented.end()) {
      FAIL_CHECK("docs/verify.md has no row " << doc_row(info));
      continue;
    }
    INFO("docs/verify.md needs the row " << doc_row(info));
    CHECK(row->second == info.meaning);
  }
  for (const auto& [name, meaning] : documented) {
    CAPTURE(name);
    CHECK(parse_problem_kind(name).has_value());
  }
}
