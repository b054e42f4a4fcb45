#!/bin/bash
# cplane on PostgreSQL against its PostgreSQL peers (docs/peers.md),
# interleaved in one session on one server, each run in a fresh database of
# its own: each round runs every configuration once, the table gives
# medians and ratios. Configurations, --workers processes, --items each:
#   cplane batch      cplane-bench --scenario drain --mode batch --claim-batch B --db URL
#   pg-boss batch     fetch(batchSize B) + complete(ids), bench/peers/pg-queues-drain.mjs
#   graphile batch    graphile-worker, local queue of B, batched completions
#   cplane single     cplane-bench --scenario drain --db URL (one item per transaction)
#   raw one-stmt,     cplane-bench --scenario pg-raw (plain libpq, one item per
#   raw multi-stmt    transaction; see bench/pg_raw.hpp)
#
#   bench/peers/compare-postgres.sh [--url URL] [--rounds 3] [--items 10000] [--workers 16] [--batch 32]
#
# Without --url it starts a throwaway server (scripts/postgres.sh) in a
# temporary folder and stops it at the end. pg-boss and graphile-worker are
# installed from npm into a temporary folder (PG_PEERS_HOME=DIR reuses one);
# needs node and npm (bench-only). BUILD=build names the build folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
url='' rounds=3 items=10000 workers=16 batch=32
while [ $# -gt 0 ]; do
  case "$1" in
    --url) url=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --items) items=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    *) echo "usage: $0 [--url URL] [--rounds N] [--items N] [--workers N] [--batch N]" >&2; exit 2 ;;
  esac
done
bench=${BUILD:-build}/bench/cplane-bench
[ -x "$bench" ] || { echo "compare-postgres.sh: no $bench (build the cplane_bench target)" >&2; exit 2; }
for tool in jq node npm; do
  command -v $tool >/dev/null || { echo "compare-postgres.sh: needs $tool" >&2; exit 2; }
done
psql=$(command -v psql || ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/cplane-compare-pg.XXXXXX")
chmod 755 "$scratch"  # the server runs as the postgres user
server=
cleanup() {
  if [ -n "$server" ]; then bash "$root/scripts/postgres.sh" stop "$server" >/dev/null 2>&1 || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
if [ -z "$url" ]; then
  server=$scratch/pg
  url=$(bash "$root/scripts/postgres.sh" start "$server")
fi

home=${PG_PEERS_HOME:-$scratch/npm}
if [ ! -f "$home/node_modules/pg-boss/package.json" ] || [ ! -f "$home/node_modules/graphile-worker/package.json" ]; then
  mkdir -p "$home"
  [ -f "$home/package.json" ] || echo '{"private":true}' > "$home/package.json"
  (cd "$home" && npm install --no-audit --no-fund --loglevel=error "pg-boss@${PG_BOSS_VERSION:-12.38.0}" \
    "graphile-worker@${GRAPHILE_WORKER_VERSION:-0.18.0}" pg >&2)
fi

# fresh NAME: a new database on the server, its URL on stdout.
fresh() {
  local db
  db="peers_$1_$(date +%s%N)"
  "$psql" "$url" -qAt -c "CREATE DATABASE $db" >/dev/null
  sed -E "s#^([a-z]+://[^/]*/)[^?]*#\1$db#" <<< "$url"
}
drop_all() {
  for db in $("$psql" "$url" -qAt -c "SELECT datname FROM pg_database WHERE datname LIKE 'peers\_%'"); do
    "$psql" "$url" -qAt -c "DROP DATABASE $db" >/dev/null
  done
}

declare -A figures
# keep NAME LINE: prints a run's JSON line, keeps its items/s.
keep() {
  echo "R$round $1 $2" >&2
  figures[$1]+="$(jq -r '.items_per_s' <<< "$2") "
}

for round in $(seq 1 "$rounds"); do
  keep cplane-batch "$("$bench" --scenario drain --mode batch --claim-batch "$batch" --workers "$workers" \
    --items "$items" --db "$(fresh cplane)")"
  keep pg-boss-batch "$(NODE_PATH="$home/node_modules" node "$here/pg-queues-drain.mjs" --system pg-boss \
    --url "$(fresh pgboss)" --workers "$workers" --items "$items" --batch "$batch")"
  keep graphile-batch "$(NODE_PATH="$home/node_modules" node "$here/pg-queues-drain.mjs" --system graphile-worker \
    --url "$(fresh graphile)" --workers "$workers" --items "$items" --batch "$batch")"
  keep cplane-single "$("$bench" --scenario drain --workers "$workers" --items "$items" --db "$(fresh single)")"
  for claim in one-statement multi-statement; do
    keep "raw-$claim" "$("$bench" --scenario pg-raw --claim $claim --workers "$workers" --items "$items" \
      --db "$(fresh raw)")"
  done
  drop_all
done

median() {
  tr ' ' '\n' <<< "${figures[$1]:-}" | grep . | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() {
  awk -v a="$(median "$1")" -v b="$(median "$2")" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'
}

echo "PostgreSQL, $workers workers, $items items, medians of $rounds interleaved rounds (items/s)"
echo
echo "| configuration | items/s | all rounds |"
echo "| --- | --- | --- |"
for name in cplane-batch pg-boss-batch graphile-batch cplane-single raw-one-statement raw-multi-statement; do
  echo "| $name | $(median "$name") | ${figures[$name]:-}|"
done
echo
echo "| ratio | measured | target |"
echo "| --- | --- | --- |"
echo "| cplane batch $batch / pg-boss batch $batch | $(ratio cplane-batch pg-boss-batch) | >= 1.0 |"
echo "| cplane batch $batch / graphile-worker batched $batch | $(ratio cplane-batch graphile-batch) | >= 1.0 |"
echo "| cplane single / raw one-statement | $(ratio cplane-single raw-one-statement) | >= 0.85 |"
echo "| cplane single / raw multi-statement | $(ratio cplane-single raw-multi-statement) | >= 0.85 |"
