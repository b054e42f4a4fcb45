#!/usr/bin/env bash
# Prints the URL of the PostgreSQL server the postgres test entries use:
# $CPLANE_TEST_PG_URL, else the one the ctest fixture started (its URL in the
# file $CPLANE_TEST_PG_URL_FILE names; scripts/ctest-postgres.sh). The same
# lookup as tests/support.cpp's postgres_test_url().
#
#   url=$(bash scripts/pg-test-url.sh) || exit $?
#
# When no server answers there: one line on stderr saying why, and exit 77
# (ctest: Skipped), or 1 when $CPLANE_TEST_PG_REQUIRED is set (CI).
set -euo pipefail
url=${CPLANE_TEST_PG_URL:-}
file=${CPLANE_TEST_PG_URL_FILE:-}
why=
if [ -n "$url" ]; then
  where="at \$CPLANE_TEST_PG_URL ($url)"
elif [ -n "$file" ] && [ -s "$file" ]; then
  url=$(head -n 1 "$file")
  where="at $url, the server the ctest fixture started"
elif [ -n "$file" ] && [ -s "$file.skip" ]; then
  why="\$CPLANE_TEST_PG_URL is unset and ctest could start no server: $(head -n 1 "$file.skip")"
else
  why="\$CPLANE_TEST_PG_URL is unset and no ctest fixture started a server (run this entry through ctest, or export CPLANE_TEST_PG_URL=\$(scripts/postgres.sh start))"
fi
if [ -z "$why" ] && ! psql "$url" -qAtc 'SELECT 1' >/dev/null 2>&1; then
  why="no PostgreSQL server answers $where"
fi
if [ -n "$why" ]; then
  echo "SKIPPED: $why" >&2
  [ -n "${CPLANE_TEST_PG_REQUIRED:-}" ] && exit 1
  exit 77
fi
echo "$url"
