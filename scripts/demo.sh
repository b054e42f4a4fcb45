#!/usr/bin/env bash
# The main job, end to end, on a fresh SQLite database.
#   usage: scripts/demo.sh CPLANE_BINARY DB_PATH
set -euo pipefail
CPLANE="$1"
DB="$2"
rm -f "$DB" "$DB-wal" "$DB-shm" "$DB-lock"
export CPLANE_DB="$DB"
T=1800000000000000  # a fixed clock (microseconds), so the run is repeatable

"$CPLANE" project create alpha "Project Alpha" --now $T
for task in "summarise the report" "translate the abstract" "file the results"; do
  "$CPLANE" enqueue alpha "{\"task\": \"$task\"}" --now $T >/dev/null
done
echo "queued 3 items in project alpha"

# worker-1 claims with a 10 s lease, then stalls past it.
first=$("$CPLANE" claim --owner worker-1 --lease 10 --json --now $((T + 1000000)))
item=$(echo "$first" | sed -E 's/.*"item_id":"([^"]+)".*/\1/')
echo "worker-1 claimed $item under fence 1"
# worker-2 finds the lease lapsed and reclaims the same item under fence 2.
"$CPLANE" claim --owner worker-2 --json --now $((T + 20000000)) >/dev/null
echo "worker-2 reclaimed it under fence 2 after the lease lapsed"
set +e
"$CPLANE" finish "$item" --fence 1 --status done --now $((T + 21000000))
code=$?
set -e
echo "worker-1's late report with fence 1 was refused (exit $code)"
"$CPLANE" finish "$item" --fence 2 --status done --now $((T + 22000000))
# worker-2 drains the rest.
while out=$("$CPLANE" claim --owner worker-2 --json --now $((T + 30000000))); do
  id=$(echo "$out" | sed -E 's/.*"item_id":"([^"]+)".*/\1/')
  "$CPLANE" finish "$id" --fence 1 --status done --now $((T + 31000000)) >/dev/null
  echo "worker-2 finished $id"
done
echo "the ledger of $item:"
"$CPLANE" events "$item"
"$CPLANE" verify
# The log leaves the database whole: an export, audited with no database,
# then restored into a fresh one that verifies clean.
rm -f "$DB.cpx" "$DB.restored" "$DB.restored-wal" "$DB.restored-shm" "$DB.restored-lock"
"$CPLANE" export "$DB.cpx"
"$CPLANE" audit "$DB.cpx"
"$CPLANE" --db "$DB.restored" restore "$DB.cpx"
"$CPLANE" --db "$DB.restored" verify
