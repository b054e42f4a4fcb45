#!/bin/bash
# cplane on SQLite against its SQLite peers (docs/peers.md), interleaved in
# one session: each round runs every configuration once, in the same order,
# and the table gives medians over the rounds and the ratios the targets are
# stated in. Configurations, all one item per call, --items each:
#   cplane normal, fenced, full     cplane-bench --scenario drain --durability D (16 and 64 workers)
#   raw NORMAL, raw FULL            cplane-bench --scenario raw --durability normal|full
#                                   (plain sqlite3 calls, same statements, one transaction each)
#   plainjob                        bench/peers/plainjob.sh (Node, NORMAL; skipped without npm)
#
#   bench/peers/compare-sqlite.sh [--rounds 3] [--items 10000] [--workers 16] [--wide 64]
#
# BUILD=build names the build folder holding bench/cplane-bench. Each run's
# JSON line goes to stderr prefixed with its round; the table to stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=3 items=10000 workers=16 wide=64
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --items) items=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --wide) wide=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--items N] [--workers N] [--wide N]" >&2; exit 2 ;;
  esac
done
bench=${BUILD:-build}/bench/cplane-bench
[ -x "$bench" ] || { echo "compare-sqlite.sh: no $bench (build the cplane_bench target)" >&2; exit 2; }
command -v jq >/dev/null || { echo "compare-sqlite.sh: needs jq" >&2; exit 2; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/cplane-compare-sqlite.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
plainjob=yes
if command -v npm >/dev/null && command -v node >/dev/null; then
  export PLAINJOB_HOME=${PLAINJOB_HOME:-$scratch/npm}
  # The install is untimed: a first run of 2 items builds it.
  bash "$here/plainjob.sh" --workers 1 --items 2 > /dev/null
else
  plainjob=
  echo "compare-sqlite.sh: no node/npm, plainjob skipped (apt-get install -y nodejs npm)" >&2
fi

declare -A figures
# run NAME COMMAND...: runs one configuration, keeps its items/s.
run() {
  local name=$1; shift
  local line
  line=$("$@")
  echo "R$round $name $line" >&2
  figures[$name]+="$(jq -r '.items_per_s' <<< "$line") "
}

for round in $(seq 1 "$rounds"); do
  for d in normal fenced full; do
    run "cplane-$d-$workers" "$bench" --scenario drain --workers "$workers" --items "$items" --durability "$d"
  done
  run "raw-normal-$workers" "$bench" --scenario raw --workers "$workers" --items "$items" --durability normal
  run "raw-full-$workers" "$bench" --scenario raw --workers "$workers" --items "$items" --durability full
  [ -n "$plainjob" ] && run "plainjob-$workers" bash "$here/plainjob.sh" --workers "$workers" --items "$items"
  for d in normal fenced full; do
    run "cplane-$d-$wide" "$bench" --scenario drain --workers "$wide" --items "$items" --durability "$d"
  done
done

median() {
  tr ' ' '\n' <<< "${figures[$1]:-}" | grep . | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() {
  awk -v a="$(median "$1")" -v b="$(median "$2")" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'
}

echo "SQLite, $items items, one per call, medians of $rounds interleaved rounds (items/s)"
echo
echo "| configuration | items/s | all rounds |"
echo "| --- | --- | --- |"
for name in cplane-normal-$workers cplane-fenced-$workers cplane-full-$workers \
            raw-normal-$workers raw-full-$workers plainjob-$workers \
            cplane-normal-$wide cplane-fenced-$wide cplane-full-$wide; do
  echo "| $name | $(median "$name") | ${figures[$name]:-skipped}|"
done
echo
echo "| ratio | measured | target |"
echo "| --- | --- | --- |"
echo "| cplane normal / raw NORMAL ($workers workers) | $(ratio cplane-normal-$workers raw-normal-$workers) | >= 1.0 |"
echo "| cplane normal / plainjob ($workers workers) | $(ratio cplane-normal-$workers plainjob-$workers) | >= 1.3 |"
echo "| cplane fenced / raw FULL ($workers workers) | $(ratio cplane-fenced-$workers raw-full-$workers) | >= 1.5 |"
for d in normal fenced full; do
  echo "| cplane $d, $wide workers / $workers | $(ratio cplane-$d-$wide cplane-$d-$workers) | >= 1.0 |"
done
