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
"$CPLANE" enqueue alpha '{"task": "summarise the report"}' --now $T >/dev/null
echo "queued 1 item in project alpha"

# worker-1 claims with a 10 s lease, then stalls past it (it lapses at T + 11 s).
first=$("$CPLANE" claim --owner worker-1 --lease 10 --json --now $((T + 1000000)))
item=$(echo "$first" | sed -E 's/.*"item_id":"([^"]+)".*/\1/')
echo "worker-1 claimed $item under fence 1"
for task in "translate the abstract" "file the results"; do
  "$CPLANE" enqueue alpha "{\"task\": \"$task\"}" --now $((T + 12000000)) >/dev/null
done
echo "queued 2 more items after its lease lapsed"
# worker-2 finds the lease lapsed and reclaims the same item under fence 2:
# a claim takes the item available earliest (this one, since T + 11 s).
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
# Two coding agents and one pull request: only one holds it (the other
# waits), every mutation passes the gate, and a head moved on the forge
# stops the holder's next push.
pr=$("$CPLANE" enqueue alpha '{"title": "fix the flaky test"}' --kind pr --ref acme/api#42 \
       --head 3f2a9c1 --now $((T + 40000000)))
"$CPLANE" session open agent-1 --now $((T + 40000000)) >/dev/null
"$CPLANE" session open agent-2 --now $((T + 40000000)) >/dev/null
"$CPLANE" assign agent-1 "$pr" --actions push,comment --lease 300 --now $((T + 41000000))
set +e
"$CPLANE" assign agent-2 "$pr" --actions push --now $((T + 42000000))
echo "agent-2 was told to wait (exit $?)"
set -e
"$CPLANE" gate agent-1 "$pr" --fence 1 --action push --head 3f2a9c1 --record \
  --now $((T + 43000000)) >/dev/null
echo "agent-1 passed the gate and its push is in the ledger"
"$CPLANE" observe head "$pr" 77bd0e4 --now $((T + 44000000)) >/dev/null
set +e
reason=$("$CPLANE" gate agent-1 "$pr" --fence 1 --action push --now $((T + 45000000)) 2>/dev/null)
echo "after the head moved on the forge, agent-1's next push was denied: $reason (exit $?)"
set -e
"$CPLANE" finish "$pr" --fence 1 --status done --now $((T + 46000000)) >/dev/null
# The allocator picks agent-2's next item: the terminal path first, then
# priority, then age; --apply reserves it in the same transaction.
"$CPLANE" enqueue alpha '{"task": "triage"}' --priority 5 --now $((T + 46500000)) >/dev/null
urgent=$("$CPLANE" enqueue alpha '{"task": "merge the approved fix"}' --now $((T + 46500000)))
"$CPLANE" terminal add "$urgent" --reason approved --now $((T + 46600000)) >/dev/null
"$CPLANE" allocate agent-2 --now $((T + 46700000))
got=$("$CPLANE" allocate agent-2 --apply --actions merge --json --now $((T + 46700000)))
if [ "$(echo "$got" | sed -E 's/.*"item_id":"([^"]+)".*/\1/')" != "$urgent" ]; then
  echo "unexpected allocation: $got" >&2
  exit 1
fi
echo "agent-2 was given the item on the terminal path before the priority-5 one"
"$CPLANE" session close agent-1 --now $((T + 47000000)) >/dev/null
"$CPLANE" session close agent-2 --now $((T + 47000000)) >/dev/null
"$CPLANE" verify
# The log leaves the database whole: an export, audited with no database,
# then restored into a fresh one that verifies clean.
rm -f "$DB.cpx" "$DB.restored" "$DB.restored-wal" "$DB.restored-shm" "$DB.restored-lock"
"$CPLANE" export "$DB.cpx"
"$CPLANE" audit "$DB.cpx"
"$CPLANE" --db "$DB.restored" restore "$DB.cpx"
"$CPLANE" --db "$DB.restored" verify
