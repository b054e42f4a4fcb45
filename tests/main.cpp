// The tests' main: Catch2's, after one check. A run against PostgreSQL
// ($CPLANE_TEST_BACKEND=postgres) with no server to reach is skipped, loudly
// (exit 77, which ctest reports as Skipped), unless $CPLANE_TEST_PG_REQUIRED
// is set (CI), where it fails.
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
    const char* url = std::getenv("CPLANE_TEST_PG_URL");
    std::fprintf(stderr,
                 "SKIPPED: no PostgreSQL server answers at $CPLANE_TEST_PG_URL (%s); start one "
                 "with `scripts/postgres.sh start` and export CPLANE_TEST_PG_URL=$(scripts/"
                 "postgres.sh url)\n",
                 url != nullptr ? url : "unset");
    const char* required = std::getenv("CPLANE_TEST_PG_REQUIRED");
    return required != nullptr && *required != '\0' ? 1 : 77;
  }
  return Catch::Session().run(argc, argv);
}
