#!/bin/bash
# cplane-probe against the Python store cplane descends from (docs/peers.md):
# LazyBridge's lazybridge/control_plane (store.py, ledger.py, probe.py,
# __init__.py). Its four files are copied into a temporary package (without
# the rest of LazyBridge, whose own dependencies the probe does not need),
# then its own probe and cplane-probe run the same scenario back to back,
# each timed as a whole process (fill, drain, verification), for --rounds
# rounds; prints one line per run and a JSON line with the medians and
# python / cplane. Nothing of LazyBridge is kept in the tree.
#
#   bench/peers/python-store.sh [--source DIR] [--rounds 3] [--workers 16] [--items 10000]
#
# DIR (or $LAZYBRIDGE_SRC) is a LazyBridge checkout at a commit that has
# lazybridge/control_plane/, or that folder itself; without one the script
# says so and exits 0 having measured nothing. BUILD=build names the build
# folder holding probe/cplane-probe; PYTHON=python3 the interpreter.
set -euo pipefail
source_dir=${LAZYBRIDGE_SRC:-} rounds=3 workers=16 items=10000
while [ $# -gt 0 ]; do
  case "$1" in
    --source) source_dir=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --items) items=$2; shift 2 ;;
    *) echo "usage: $0 [--source DIR] [--rounds N] [--workers N] [--items N]" >&2; exit 2 ;;
  esac
done
build=${BUILD:-build}
python=${PYTHON:-python3}
probe=$build/probe/cplane-probe
[ -x "$probe" ] || { echo "python-store.sh: no $probe (build the cplane_probe target)" >&2; exit 2; }

package=
for candidate in "$source_dir/lazybridge/control_plane" "$source_dir"; do
  if [ -n "$source_dir" ] && [ -f "$candidate/store.py" ] && [ -f "$candidate/ledger.py" ] &&
     [ -f "$candidate/probe.py" ] && [ -f "$candidate/__init__.py" ]; then
    package=$candidate
    break
  fi
done
if [ -z "$package" ]; then
  echo "python-store.sh: skipped, no Python store to run (give --source DIR or LAZYBRIDGE_SRC:"
  echo "  a clone of the LazyBridge repository at a commit with lazybridge/control_plane/;"
  echo "  see docs/peers.md for how to get one)"
  exit 0
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/cplane-python-store.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/pkg/lazybridge/control_plane"
: > "$scratch/pkg/lazybridge/__init__.py"
cp "$package"/{__init__,store,ledger,probe}.py "$scratch/pkg/lazybridge/control_plane/"

# Runs a command and prints its wall time in seconds; exits on failure.
wall() {
  local out=$1; shift
  local start end
  start=$(date +%s.%N)
  if ! "$@" > "$out" 2>&1; then
    echo "python-store.sh: failed: $*" >&2
    cat "$out" >&2
    exit 1
  fi
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

python_times=() cplane_times=()
for round in $(seq 1 "$rounds"); do
  rm -rf "$scratch/run" && mkdir "$scratch/run"
  t=$(cd "$scratch/pkg" && wall "$scratch/run/python.txt" "$python" -m lazybridge.control_plane.probe \
    --store "$scratch/run/python.db" --scenario concurrent-queue --workers "$workers" --items "$items")
  grep -qx PASS "$scratch/run/python.txt" || { cat "$scratch/run/python.txt" >&2; exit 1; }
  python_times+=("$t")
  echo "round $round python-store whole_s=$t $(grep -o 'elapsed=[^ ]*' "$scratch/run/python.txt")"
  t=$(wall "$scratch/run/cplane.txt" "$probe" --store "$scratch/run/cplane.db" \
    --scenario concurrent-queue --workers "$workers" --items "$items")
  cplane_times+=("$t")
  echo "round $round cplane-probe whole_s=$t $(grep -E '^(elapsed_s|items_per_s)=' "$scratch/run/cplane.txt" | tr '\n' ' ')"
done
py=$(printf '%s\n' "${python_times[@]}" | median)
cp=$(printf '%s\n' "${cplane_times[@]}" | median)
awk -v py="$py" -v cp="$cp" -v w="$workers" -v n="$items" -v r="$rounds" 'BEGIN {
  printf "{\"scenario\":\"concurrent-queue\",\"workers\":%d,\"items\":%d,\"rounds\":%d,", w, n, r
  printf "\"python_store_s\":%.3f,\"cplane_probe_s\":%.3f,\"ratio\":%.2f}\n", py, cp, py / cp }'
