#!/bin/bash
# The plainjob peer baseline (docs/peers.md): installs plainjob and
# better-sqlite3 from npm into a temporary folder, drains a fresh queue with
# worker processes, one job per call, and prints one JSON line like
# cplane-bench's drain. Nothing of plainjob is kept in the tree.
#
#   bench/peers/plainjob.sh [--workers 16] [--items 10000]
#
# Needs node and npm (bench-only: `apt-get install -y nodejs npm`; cplane
# itself never needs them) and a C++ compiler for better-sqlite3's addon.
# PLAINJOB_HOME=DIR installs into DIR, or reuses DIR when it already holds
# the install (compare-sqlite.sh does so across its rounds); versions:
# PLAINJOB_VERSION, BETTER_SQLITE3_VERSION.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
workers=16 items=10000
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers=$2; shift 2 ;;
    --items) items=$2; shift 2 ;;
    *) echo "usage: $0 [--workers N] [--items N]" >&2; exit 2 ;;
  esac
done
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "plainjob.sh: needs node and npm (apt-get install -y nodejs npm)" >&2
  exit 3
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/cplane-plainjob.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
home=${PLAINJOB_HOME:-$scratch/npm}
if [ ! -f "$home/node_modules/plainjob/package.json" ] ||
   [ ! -f "$home/node_modules/better-sqlite3/package.json" ]; then
  mkdir -p "$home"
  [ -f "$home/package.json" ] || echo '{"private":true}' > "$home/package.json"
  echo "plainjob.sh: npm install into $home (better-sqlite3 compiles: a few minutes)" >&2
  (cd "$home" && npm install --no-audit --no-fund --loglevel=error \
    "plainjob@${PLAINJOB_VERSION:-0.0.14}" "better-sqlite3@${BETTER_SQLITE3_VERSION:-12.11.1}" >&2)
fi
mkdir -p "$scratch/db"
NODE_PATH="$home/node_modules" node "$here/plainjob-drain.mjs" --dir "$scratch/db" \
  --workers "$workers" --items "$items"
