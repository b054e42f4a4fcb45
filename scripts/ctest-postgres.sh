#!/usr/bin/env bash
# The PostgreSQL server of a ctest run: the fixture `postgres_server` that
# every "postgres: ..." entry requires (tests/CMakeLists.txt), so that the
# README's plain `ctest --test-dir build` runs them too.
#
#   scripts/ctest-postgres.sh setup URL_FILE
#   scripts/ctest-postgres.sh cleanup URL_FILE
#
# setup: with $CPLANE_TEST_PG_URL set, the entries use that server and none
#   is started. Otherwise, when PostgreSQL's server binaries are installed
#   (/usr/lib/postgresql/*/bin/postgres; nothing is installed from here), it
#   starts a throwaway server with scripts/postgres.sh in a folder of its own
#   (/tmp/cplane-ctest-pg-N, N a checksum of URL_FILE: two build trees never
#   share one, and a run cut short leaves a server the next run reuses and
#   stops) and writes its URL to URL_FILE. When no server can be started,
#   URL_FILE.skip says why in one line, which each entry prints as it skips
#   (tests/support.cpp, scripts/pg-test-url.sh); with $CPLANE_TEST_PG_REQUIRED
#   set (CI) that is a failure of this step instead.
# cleanup: stops that server and removes its folder and files, unless
#   another ctest run in the same build tree still uses it (URL_FILE.holders:
#   the pids of the ctest runs that set it up).
set -euo pipefail
cmd=${1:-}
url_file=${2:-}
if [ -z "$url_file" ]; then
  echo "usage: $0 setup|cleanup URL_FILE" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
dir=/tmp/cplane-ctest-pg-$(printf '%s' "$(readlink -m "$url_file")" | cksum | cut -d' ' -f1)

# The ctest runs using the server, one pid a line (the caller's parent: ctest).
holders=$url_file.holders

case "$cmd" in
setup)
  if [ -n "${CPLANE_TEST_PG_URL:-}" ]; then
    echo "using the server at \$CPLANE_TEST_PG_URL; none started"
    exit 0
  fi
  mkdir -p "$(dirname "$url_file")"
  why=
  if ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
    why="PostgreSQL's server binaries are not installed (no /usr/lib/postgresql/*/bin/postgres; apt-get install postgresql-15)"
  elif ! url=$("$here/postgres.sh" start "$dir" 2>"$url_file.log"); then
    why="scripts/postgres.sh start $dir failed: $(grep -v '^$' "$url_file.log" | tail -n 1)"
  fi
  rm -f "$url_file.log"
  if [ -n "$why" ]; then
    rm -f "$url_file"
    echo "$why" >"$url_file.skip"
    if [ -n "${CPLANE_TEST_PG_REQUIRED:-}" ]; then
      echo "FAIL: no PostgreSQL server for the postgres entries: $why" >&2
      exit 1
    fi
    echo "no PostgreSQL server: the postgres entries will skip: $why"
    exit 0
  fi
  # Written whole (another run may be reading it: postgres.sh start hands an
  # already running server back).
  echo "$url" >"$url_file.new" && mv -f "$url_file.new" "$url_file"
  rm -f "$url_file.skip"
  echo "$PPID" >>"$holders"
  echo "PostgreSQL server for the postgres entries at $url (data in $dir)"
  ;;
cleanup)
  # Stopped when the last run that holds it lets go.
  left=
  if [ -f "$holders" ]; then
    while read -r pid; do
      if [ "$pid" != "$PPID" ] && kill -0 "$pid" 2>/dev/null; then left+="$pid"$'\n'; fi
    done <"$holders"
  fi
  if [ -n "$left" ]; then
    printf '%s' "$left" >"$holders"
    echo "the server stays up: another ctest run uses it"
    exit 0
  fi
  "$here/postgres.sh" stop "$dir"
  rm -f "$url_file" "$url_file.skip" "$holders"
  ;;
*)
  echo "usage: $0 setup|cleanup URL_FILE" >&2
  exit 2
  ;;
esac
