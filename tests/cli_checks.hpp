// Checks on a run of the cplane CLI (tests/support.hpp: run_cli).
#pragma once

#include "tests/support.hpp"

// A CLI result's exit status, with its stdout and stderr shown on failure.
// (Include after <catch2/catch.hpp>.)
#define CHECK_EXIT(result, code)                                               \
  do {                                                                         \
    const ::cplane::test::CliResult& r_ = (result);                            \
    INFO("stdout: " << r_.out);                                                \
    INFO("stderr: " << r_.err);                                                \
    CHECK(r_.exit_code == (code));                                             \
  } while (false)

#define REQUIRE_EXIT(result, code)                                             \
  do {                                                                         \
    const ::cplane::test::CliResult& r_ = (result);                            \
    INFO("stdout: " << r_.out);                                                \
    INFO("stderr: " << r_.err);                                                \
    REQUIRE(r_.exit_code == (code));                                           \
  } while (false)

namespace cplane::test {

// `cplane --db DB ARGS... --now NOW`.
inline CliResult cli_at(const std::string& db, std::vector<std::string> args, long long now) {
  args.insert(args.begin(), {"--db", db});
  args.push_back("--now");
  args.push_back(std::to_string(now));
  return run_cli(args);
}

// The first line of a command's output (an id, say).
inline std::string first_line(const std::string& out) { return out.substr(0, out.find('\n')); }

inline bool has_text(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// How many events the store's log holds (a refusal must add none).
inline std::string event_count_of(const std::string& db) {
  return sql_column(db, "SELECT count(*) FROM events").at(0);
}

}  // namespace cplane::test
