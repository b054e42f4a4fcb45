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
