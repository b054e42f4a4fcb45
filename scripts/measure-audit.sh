#!/usr/bin/env bash
# Throughput and peak memory of verify, rebuild, export, audit, restore and
# recover on a store of N items (default 10^6), with the command for each.
#   scripts/measure-audit.sh [BUILD_DIR] [N]
# Prints one line per command: seconds, events/s, peak RSS. Uses a scratch
# folder under /tmp (removed at the end).
set -euo pipefail
BUILD=${1:-build}
N=${2:-1000000}
CPLANE=$(realpath "$BUILD/cli/cplane")
WORK=$(mktemp -d /tmp/cplane-measure.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

measure() {  # NAME EVENTS COMMAND...
  local name=$1 events=$2
  shift 2
  /usr/bin/time -o time.txt -f '%e %M' "$@" >/dev/null 2>err.txt || true
  local out
  out=$(tail -1 time.txt)
  local secs=${out% *} kb=${out#* }
  printf '%-34s %8.2f s %12s events/s %8s MiB peak RSS\n' "$name" "$secs" \
    "$(awk -v e="$events" -v s="$secs" 'BEGIN { printf "%d", (s > 0 ? e / s : 0) }')" \
    "$(( kb / 1024 ))"
}

echo "building a store of $N items (enqueue --batch) ..." >&2
"$CPLANE" --db s.db --durability normal project create alpha A >/dev/null
python3 -c "
import sys
for i in range($N): sys.stdout.write('{\"n\": %d, \"pad\": \"xxxxxxxxxxxxxxxx\"}\n' % i)" > batch.txt
"$CPLANE" --db s.db --durability normal enqueue alpha --batch batch.txt >/dev/null
CLAIMS=$(( N / 10 ))
"$CPLANE" --db s.db --durability normal claim --owner w --max "$CLAIMS" >/dev/null
EVENTS=$(( N + 1 + CLAIMS ))
echo "$EVENTS events" >&2

measure "verify" "$EVENTS" "$CPLANE" --db s.db verify
measure "export" "$EVENTS" "$CPLANE" --db s.db export s.cpx
measure "audit" "$EVENTS" "$CPLANE" audit s.cpx
measure "audit --against" "$EVENTS" "$CPLANE" audit s.cpx --against s.db
measure "restore" "$EVENTS" "$CPLANE" --db r.db restore s.cpx
measure "recover (undamaged)" "$EVENTS" "$CPLANE" --db s.db recover --to v.db
sqlite3 s.db "UPDATE items SET attempts = attempts + 1 WHERE status = 'claimed'"
measure "verify, $CLAIMS rows changed" "$EVENTS" "$CPLANE" --db s.db verify
measure "rebuild, $CLAIMS rows changed" "$EVENTS" "$CPLANE" --db s.db rebuild
# 200 items with 1 MiB payloads, their rows then changed.
python3 -c "
import sys
pad = 'x' * (1024 * 1024 - 64)
for i in range(200): sys.stdout.write('{\"n\": %d, \"pad\": \"%s\"}\n' % (i, pad))" > big.txt
"$CPLANE" --db s.db --durability normal enqueue alpha --batch big.txt >/dev/null
sqlite3 s.db "UPDATE items SET payload = replace(payload, 'x', 'y') WHERE length(payload) > 1000000"
measure "verify, 200 changed 1 MiB payloads" "$(( EVENTS + 200 ))" "$CPLANE" --db s.db verify
measure "rebuild, 200 changed 1 MiB payloads" "$(( EVENTS + 200 ))" "$CPLANE" --db s.db rebuild
