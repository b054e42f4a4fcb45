#!/usr/bin/env bash
# Runs every cplane-bench scenario and writes the JSON lines to OUT (default
# bench-results.jsonl) and the charts to DIR (default docs/bench). Takes
# about 15 minutes on the 2-core development machine.
#   usage: scripts/bench-all.sh [BUILD_DIR] [OUT] [DIR]
set -euo pipefail
BUILD="${1:-build}"
OUT="${2:-bench-results.jsonl}"
DIR="${3:-docs/bench}"
B="$BUILD/bench/cplane-bench"
: > "$OUT"
run() { "$B" "$@" | tee -a "$OUT"; }
run --scenario enqueue --items 10000 --batch 1 --durability normal
run --scenario enqueue --items 10000 --batch 1 --durability fenced
run --scenario enqueue --items 100000 --batch 1000 --durability fenced
for d in normal fenced full; do run --scenario single --items 10000 --durability "$d"; done
run --scenario drain-matrix --items 10000 --mode plain
for d in normal full; do
  run --scenario drain --workers 16 --items 10000 --mode batch --durability "$d"
  run --scenario drain --workers 16 --items 10000 --mode next --durability "$d"
done
run --scenario drain --workers 16 --items 10000 --lock busy --durability normal
run --scenario drain --workers 64 --items 10000 --lock busy --durability normal
run --scenario latency --workers 16 --items 10000 --durability fenced
run --scenario depth --max-depth 1000000 --durability normal
run --scenario verify --max-items 1000000
"$B" --plot "$DIR" --items 10000 | tee -a "$OUT"
