// The tests' main: Catch2's, after one check. A run against PostgreSQL
// ($CPLANE_TEST_BACKEND=postgres) with no server to reach (postgres_test_url:
// $CPLANE_TEST_PG_URL, else the ctest fixture's) is skipped with one line
// saying why (exit 77, which ctest reports as Skipped), unless
// $CPLANE_TEST_PG_REQUIRED is set (CI), where it fails.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support.hpp"

int main(int argc, char* argv[]) {
  const char* backend = std::getenv("CPLANE_TEST_BACKEND");
  if (backend != nullptr && std::string(backend) == "postgres" &&
      !cplane::test::postgres_test_url()) {
    std::fprintf(stderr, "SKIPPED: %s\n", cplane::test::postgres_test_skip_reason().c_str());
    const char* required = std::getenv("CPLANE_TEST_PG_REQUIRED");
    return required != nullptr && *required != '\0' ? 1 : 77;
  }
  return Catch::Session().run(argc, argv);
}
