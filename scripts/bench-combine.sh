#!/bin/bash
# Group commit (issue 12): the ratios in docs/benchmarks.md, measured in one session,
# three interleaved rounds. Usage: BUILD=build scripts/bench-combine.sh (about
# 15 minutes on two cores); each line: [items/s, claim p99 ms, longest wait
# ms, fewest claims, fair].
B=${BUILD:-build}/bench/cplane-bench
for round in 1 2 3; do
  for d in fenced normal full; do
    echo "R$round $d on    $($B --scenario drain --workers 16 --items 10000 --durability $d --combine on | jq -c '[.items_per_s,.claim_p99_ms,.longest_wait_ms,.min_claims,.fair]')"
    echo "R$round $d off   $($B --scenario drain --workers 16 --items 10000 --durability $d --combine off | jq -c '[.items_per_s,.claim_p99_ms,.longest_wait_ms,.min_claims,.fair]')"
    echo "R$round $d b8off $($B --scenario drain --workers 16 --items 10000 --durability $d --combine off --mode batch | jq -c '[.items_per_s,.claim_p99_ms,.longest_wait_ms,.min_claims,.fair]')"
    echo "R$round $d b8on  $($B --scenario drain --workers 16 --items 10000 --durability $d --combine on --mode batch | jq -c '[.items_per_s,.claim_p99_ms,.longest_wait_ms,.min_claims,.fair]')"
    echo "R$round $d w64   $($B --scenario drain --workers 64 --items 10000 --durability $d --combine on | jq -c '[.items_per_s,.claim_p99_ms,.longest_wait_ms,.min_claims,.fair]')"
    echo "R$round $d raw   $($B --scenario raw --workers 16 --items 10000 --durability $d | jq -c '[.items_per_s,.claim_p99_ms,.longest_wait_ms,.min_claims,.fair]')"
  done
  echo "R$round normal nocoal $($B --scenario drain --workers 16 --items 10000 --durability normal --combine on --coalesce off | jq -c '[.items_per_s]')"
  echo "R$round fenced nocoal $($B --scenario drain --workers 16 --items 10000 --durability fenced --combine on --coalesce off | jq -c '[.items_per_s]')"
  rm -rf ${TMPDIR:-/tmp}/cplane-combine-probe && mkdir ${TMPDIR:-/tmp}/cplane-combine-probe
  s=$(date +%s.%N); ${BUILD:-build}/probe/cplane-probe --store ${TMPDIR:-/tmp}/cplane-combine-probe/p.db --scenario concurrent-queue --workers 16 --items 10000 > ${TMPDIR:-/tmp}/cplane-combine-probe/out.txt; rc=$?; e=$(date +%s.%N)
  echo "R$round probe concurrent-queue rc=$rc whole_s=$(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.3f", b - a }') $(grep -E '^(elapsed_s|items_per_s)=' ${TMPDIR:-/tmp}/cplane-combine-probe/out.txt | tr '\n' ' ')"
done
