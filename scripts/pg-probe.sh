#!/usr/bin/env bash
# Runs one cplane-probe scenario against the PostgreSQL server the tests use
# ($CPLANE_TEST_PG_URL, else the ctest fixture's: scripts/pg-test-url.sh), in
# a schema of its own (created, then dropped).
#   scripts/pg-probe.sh PROBE SCENARIO WORKERS ITEMS
# Exit 77 (ctest: Skipped) when there is no server, unless
# $CPLANE_TEST_PG_REQUIRED is set (CI), where that fails.
set -euo pipefail
probe=$1 scenario=$2 workers=$3 items=$4
url=$(bash "$(dirname "$0")/pg-test-url.sh") || exit $?
schema="probe_${scenario//-/_}_$$"
psql "$url" -qc "CREATE SCHEMA $schema" >/dev/null
trap 'psql "$url" -qc "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true' EXIT
sep='?'
case "$url" in *\?*) sep='&' ;; esac
"$probe" --store "$url${sep}options=-csearch_path%3D$schema" --scenario "$scenario" \
  --workers "$workers" --items "$items"
