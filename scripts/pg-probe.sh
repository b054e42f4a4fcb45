#!/usr/bin/env bash
# Runs one cplane-probe scenario against the PostgreSQL server
# $CPLANE_TEST_PG_URL names, in a schema of its own (created, then dropped).
#   scripts/pg-probe.sh PROBE SCENARIO WORKERS ITEMS
# Exit 77 (ctest: Skipped) when no server is named, unless
# $CPLANE_TEST_PG_REQUIRED is set (CI), where that fails.
set -euo pipefail
probe=$1 scenario=$2 workers=$3 items=$4
if [ -z "${CPLANE_TEST_PG_URL:-}" ] || ! psql "$CPLANE_TEST_PG_URL" -qAtc 'SELECT 1' >/dev/null 2>&1; then
  echo "SKIPPED: no PostgreSQL server answers at \$CPLANE_TEST_PG_URL (${CPLANE_TEST_PG_URL:-unset}); start one with scripts/postgres.sh start" >&2
  [ -n "${CPLANE_TEST_PG_REQUIRED:-}" ] && exit 1
  exit 77
fi
schema="probe_${scenario//-/_}_$$"
psql "$CPLANE_TEST_PG_URL" -qc "CREATE SCHEMA $schema" >/dev/null
trap 'psql "$CPLANE_TEST_PG_URL" -qc "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true' EXIT
sep='?'
case "$CPLANE_TEST_PG_URL" in *\?*) sep='&' ;; esac
"$probe" --store "$CPLANE_TEST_PG_URL${sep}options=-csearch_path%3D$schema" --scenario "$scenario" \
  --workers "$workers" --items "$items"
