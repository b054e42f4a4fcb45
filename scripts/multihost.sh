#!/usr/bin/env bash
# Workers on separate (simulated) hosts against one PostgreSQL server, and a
# network partition that cuts one of them off while it holds leases.
#
#   scripts/multihost.sh CPLANE        (as root: it makes network namespaces)
#
# Topology: three network namespaces, made fresh for this run (names end in
# this shell's pid, so two runs never share one):
#
#   srv    br0 10.77.0.1/24, a bridge; PostgreSQL 15 listens on that address
#          only (port 5432: the namespace is private, so no port clash), with
#          trust auth for 10.77.0.0/24 and the unix socket of its own folder.
#   hostA  lo + eth0 10.77.0.2/24, a veth whose peer (vA) is a port of br0
#   hostB  lo + eth0 10.77.0.3/24, a veth whose peer (vB) is a port of br0
#
# One bridged /24 rather than point-to-point /30s: the server has one address
# that both workers use in the same URL, and cutting a host off is taking
# its bridge port down on the server's side (`ip link set vA down` in srv):
# hostA's own interface stays configured, it simply stops hearing back, as
# with a pulled cable or a dead switch port. The namespaces have no route
# anywhere else.
#
# What it proves: hostA claims items with a 2 s lease and is cut off; its
# attempts to reach the server fail within the connect timeout as
# `unavailable` (never hang); once its leases lapse, hostB drains the queue
# and takes hostA's items under higher fences; hostA, back on the network,
# reports late under its old fences and every report is refused (exit 4:
# `stale_fence` for an item hostB still holds, `stale_fence`/`terminal` for
# one it finished), appending nothing. Then every item is done exactly once
# (one `done` event, under the last claim's fence), nothing is lost, and
# verify is clean.
#
# Prints PASS and exits 0 only when every check holds; else lists what
# failed and exits 1. Everything it made (namespaces, the server, its temp
# folder) is removed on exit, failure included.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 CPLANE" >&2
  exit 2
fi
CPLANE=$(readlink -f "$1")
PGBIN=/usr/lib/postgresql/15/bin
N=${MULTIHOST_ITEMS:-40}   # items queued
K=6                         # items hostA claims before it is cut off
LEASE=2                     # hostA's lease, seconds
PORT=5432

[ "$(id -u)" = 0 ] || { echo "FAIL: $0 must run as root (ip netns)"; exit 1; }
[ -x "$CPLANE" ] || { echo "FAIL: no cplane binary at $1"; exit 1; }
[ -x "$PGBIN/initdb" ] || { echo "FAIL: PostgreSQL 15 is not installed in $PGBIN"; exit 1; }

SRV=cplane-srv-$$
HA=cplane-hostA-$$
HB=cplane-hostB-$$
WORK=
PG_STARTED=0
failures=()

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  if [ "$PG_STARTED" = 1 ]; then
    ip netns exec "$SRV" runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/data" -m immediate -w stop \
      >/dev/null 2>&1
  fi
  local ns pid
  for ns in "$HA" "$HB" "$SRV"; do
    if [ -e "/run/netns/$ns" ]; then
      # Only processes inside this run's own namespaces (ours: the server if
      # pg_ctl could not stop it, a cplane left running).
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
      ip netns del "$ns" 2>/dev/null
    fi
  done
  [ -n "$WORK" ] && rm -rf "$WORK"
  if [ "$rc" != 0 ]; then
    [ "${#failures[@]}" -gt 0 ] || echo "FAIL: the script stopped early (exit $rc); see above"
    exit 1
  fi
  exit 0
}
trap cleanup EXIT
trap 'exit 1' INT TERM
trap 'echo "error: line $LINENO: $BASH_COMMAND (exit $?)" >&2' ERR

fail() {
  echo "FAIL: $*"
  failures+=("$*")
}

say() { echo "== $*"; }

on() {  # on NAMESPACE COMMAND...
  local ns=$1
  shift
  ip netns exec "$ns" "$@"
}

URL="postgresql://postgres@10.77.0.1:$PORT/cplane?connect_timeout=3"
cp_on() {  # cp_on NAMESPACE ARGS...: cplane on that host, JSON output
  local ns=$1
  shift
  ip netns exec "$ns" "$CPLANE" --db "$URL" --json "$@"
}

start_ns=$(date +%s%N)
WORK=$(mktemp -d /tmp/cplane-multihost.XXXXXX)
chmod 755 "$WORK"   # the postgres user must reach data/ and run/ inside

# ---- the network -------------------------------------------------------------
say "namespaces $SRV $HA $HB"
ip netns add "$SRV"
ip netns add "$HA"
ip netns add "$HB"
ip -n "$SRV" link set lo up
ip -n "$SRV" link add br0 type bridge
ip -n "$SRV" addr add 10.77.0.1/24 dev br0
ip -n "$SRV" link set br0 up
host_link() {  # host_link NS PORTNAME ADDRESS
  ip -n "$SRV" link add "$2" type veth peer name eth0 netns "$1"
  ip -n "$SRV" link set "$2" master br0
  ip -n "$SRV" link set "$2" up
  ip -n "$1" link set lo up
  ip -n "$1" addr add "$3/24" dev eth0
  ip -n "$1" link set eth0 up
}
host_link "$HA" vA 10.77.0.2
host_link "$HB" vB 10.77.0.3

for ns in "$HA" "$HB"; do
  links=$(ip -n "$ns" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')
  [ "$links" = "eth0 lo " ] || fail "$ns has links '$links', not just lo and eth0"
done

# ---- the server ----------------------------------------------------------------
say "PostgreSQL 15 in $SRV on 10.77.0.1:$PORT"
mkdir -p "$WORK/run" "$WORK/data"
chown postgres: "$WORK/run" "$WORK/data"
chmod 700 "$WORK/data"
runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/data" -U postgres -A trust --no-sync -E UTF8 \
  --locale=C.UTF-8 >"$WORK/initdb.log"
runuser -u postgres -- tee "$WORK/data/pg_hba.conf" >/dev/null <<'EOF'
# multihost.sh: the unix socket (setup) and the private subnet only
local all all trust
host  all all 10.77.0.0/24 trust
EOF
PG_STARTED=1
on "$SRV" runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/run/server.log" -w -t 30 \
  -o "-p $PORT -k $WORK/run -c listen_addresses=10.77.0.1 -c fsync=off" start >/dev/null ||
  { tail -n 20 "$WORK/run/server.log"; exit 1; }
on "$SRV" runuser -u postgres -- "$PGBIN/psql" -h "$WORK/run" -p "$PORT" -U postgres -qAt \
  -c "CREATE DATABASE cplane" >/dev/null
listening=$(on "$SRV" ss -Hltn "sport = :$PORT" | awk '{print $4}' | sort | tr '\n' ' ')
[ "$listening" = "10.77.0.1:$PORT " ] || fail "the server listens on '$listening', not 10.77.0.1:$PORT only"

# ---- the queue -------------------------------------------------------------------
say "hostB creates the project and queues $N items"
cp_on "$HB" project create mh "multihost" >/dev/null
seq 1 "$N" | sed 's/.*/{"n":&}/' >"$WORK/payloads"
cp_on "$HB" enqueue mh --batch "$WORK/payloads" | jq -r '.[].item_id' >"$WORK/ids"
[ "$(sort -u "$WORK/ids" | wc -l)" = "$N" ] || fail "enqueue returned $(wc -l <"$WORK/ids") ids, not $N distinct"

# ---- hostA claims, then is cut off -----------------------------------------------------
# In one transaction (claim --max): K separate claims could take longer than
# the lease on a loaded machine, and hostA would take back its own first item.
say "hostA claims $K items with --lease $LEASE"
declare -A a_fence=()   # hostA's item -> its fence
a_items=()
out=$(cp_on "$HA" claim --owner hostA --lease "$LEASE" --max "$K")
while read -r item fence; do
  a_fence[$item]=$fence
  a_items+=("$item")
done < <(jq -r '.[] | "\(.item_id) \(.fence)"' <<<"$out")
lease_end=$(jq '[.[].lease_expires_at] | max' <<<"$out")
[ "${#a_items[@]}" = "$K" ] && [ "${#a_fence[@]}" = "$K" ] ||
  fail "hostA's claim --max $K got ${#a_items[@]} claims of ${#a_fence[@]} distinct items"

say "cut hostA off (vA down on the server's side)"
ip -n "$SRV" link set vA down

# hostA tries to keep its lease and to report: both must fail, as
# unavailable, within the connect timeout (timeout 30 only guards the test).
try_cut_off() {  # try_cut_off WHAT ARGS...
  local what=$1 rc t0 t1
  shift
  t0=$(date +%s%N)
  rc=0
  timeout 30 ip netns exec "$HA" "$CPLANE" --db "$URL" --json "$@" >"$WORK/cut.out" 2>"$WORK/cut.err" || rc=$?
  t1=$(date +%s%N)
  local ms=$(((t1 - t0) / 1000000))
  echo "   hostA $what while cut off: exit $rc after ${ms} ms: $(head -c 300 "$WORK/cut.err")"
  if [ "$rc" = 124 ]; then
    fail "hostA's $what hung while cut off (killed after 30 s)"
  elif [ "$rc" != 1 ]; then
    fail "hostA's $what exited $rc while cut off, not 1"
  fi
  [ "$ms" -lt 15000 ] || fail "hostA's $what took ${ms} ms to fail while cut off"
  if [ -s "$WORK/cut.out" ]; then fail "hostA's $what printed on stdout while cut off"; fi
  local reason
  reason=$(jq -r '.error.kind + "/" + .error.reason' "$WORK/cut.err" 2>/dev/null || echo "?")
  [ "$reason" = "storage_error/unavailable" ] || fail "hostA's $what failed as '$reason', not storage_error/unavailable"
  grep -qi 'cannot connect' "$WORK/cut.err" || fail "hostA's $what error does not say it cannot connect"
  return 0
}
first=${a_items[0]}
try_cut_off heartbeat heartbeat "$first" --fence "${a_fence[$first]}" --lease 60
try_cut_off finish finish "$first" --fence "${a_fence[$first]}" --status done
try_cut_off claim claim --owner hostA --lease "$LEASE"

# The partition is hostA's alone: hostB still reaches the server.
cp_on "$HB" stats >/dev/null || fail "hostB cannot reach the server while hostA is cut off"

# ---- the leases lapse; hostB drains ----------------------------------------------------
while [ "$(date +%s%6N)" -le $((lease_end + 300000)) ]; do sleep 0.1; done
say "hostA's leases lapsed; hostB drains the queue"
declare -A b_fence=()
held=$first   # hostB keeps this one of hostA's items claimed until hostA has reported
loops=0
while :; do
  loops=$((loops + 1))
  if [ "$loops" -gt $((N + 5)) ]; then
    fail "hostB's drain did not end after $N claims"
    break
  fi
  rc=0
  out=$(cp_on "$HB" claim --owner hostB 2>"$WORK/b.err") || rc=$?
  [ "$rc" = 3 ] && break
  if [ "$rc" != 0 ]; then
    fail "hostB's claim exited $rc: $(cat "$WORK/b.err")"
    break
  fi
  item=$(jq -r .item_id <<<"$out")
  fence=$(jq -r .fence <<<"$out")
  [ -z "${b_fence[$item]:-}" ] || fail "hostB claimed $item twice"
  b_fence[$item]=$fence
  [ "$item" = "$held" ] && continue
  if ! cp_on "$HB" finish "$item" --fence "$fence" --status done >/dev/null 2>"$WORK/b.err"; then
    fail "hostB's finish of $item under fence $fence was refused: $(cat "$WORK/b.err")"
  fi
done
[ "${#b_fence[@]}" = "$N" ] || fail "hostB claimed ${#b_fence[@]} items, not all $N"
for item in "${a_items[@]}"; do
  if [ -z "${b_fence[$item]:-}" ]; then
    fail "hostB never took hostA's item $item"
  elif [ "${b_fence[$item]}" -le "${a_fence[$item]}" ]; then
    fail "hostB took $item under fence ${b_fence[$item]}, not above hostA's ${a_fence[$item]}"
  fi
done

# ---- hostA comes back and reports late ---------------------------------------------------
say "hostA back on the network; its late reports under the old fences"
ip -n "$SRV" link set vA up
for _ in $(seq 1 50); do
  cp_on "$HA" stats >/dev/null 2>&1 && break
  sleep 0.2
done
cp_on "$HA" stats >/dev/null || fail "hostA cannot reach the server after the link came back"

events_count() { cp_on "$HB" events "$1" | jq length; }
declare -A before=()
for item in "${a_items[@]}"; do before[$item]=$(events_count "$item"); done
seq_before=$(cp_on "$HB" events "$held" | jq '.[-1].seq')

LATE_REASON=
late_report() {  # late_report WHAT ITEM CPLANE-ARGS...: hostA reports late; sets LATE_REASON
  local what=$1 item=$2 rc
  shift 2
  rc=0
  cp_on "$HA" "$@" >"$WORK/late.out" 2>"$WORK/late.err" || rc=$?
  LATE_REASON=$(jq -r '.error.reason' "$WORK/late.err" 2>/dev/null || echo "?")
  echo "   hostA's late $what of $item: exit $rc, $LATE_REASON"
  [ "$rc" = 4 ] || fail "hostA's late $what of $item exited $rc, not 4 (fence rejected): $(cat "$WORK/late.err")"
  if [ -s "$WORK/late.out" ]; then fail "hostA's refused late $what of $item printed on stdout"; fi
  return 0
}
for item in "${a_items[@]}"; do
  late_report finish "$item" finish "$item" --fence "${a_fence[$item]}" --status done
  if [ "$item" = "$held" ]; then
    [ "$LATE_REASON" = stale_fence ] || fail "hostA's late finish of $item (hostB holds it) refused as '$LATE_REASON', not stale_fence"
  else
    case "$LATE_REASON" in
      stale_fence | terminal) ;;
      *) fail "hostA's late finish of finished item $item refused as '$LATE_REASON'" ;;
    esac
  fi
done
# Its heartbeat and a release of the item hostB holds, under the old fence.
late_report heartbeat "$held" heartbeat "$held" --fence "${a_fence[$held]}" --lease 60
[ "$LATE_REASON" = stale_fence ] || fail "hostA's late heartbeat of $held refused as '$LATE_REASON', not stale_fence"
late_report release "$held" release "$held" --fence "${a_fence[$held]}"
[ "$LATE_REASON" = stale_fence ] || fail "hostA's late release of $held refused as '$LATE_REASON', not stale_fence"
# None of the refused reports appended anything.
for item in "${a_items[@]}"; do
  after=$(events_count "$item")
  [ "$after" = "${before[$item]}" ] || fail "hostA's refused reports appended to $item (${before[$item]} -> $after events)"
done
row=$(cp_on "$HB" item "$held")
[ "$(jq -r '.status + " " + .owner + " " + (.fence|tostring)' <<<"$row")" = "claimed hostB ${b_fence[$held]}" ] ||
  fail "the held item's row changed under hostA's late reports: $(jq -c '{status,owner,fence}' <<<"$row")"

say "hostB finishes the item it held"
cp_on "$HB" finish "$held" --fence "${b_fence[$held]}" --status done >/dev/null ||
  fail "hostB's finish of $held under fence ${b_fence[$held]} was refused"
seq_after=$(cp_on "$HB" events "$held" | jq '[.[] | select(.type != "done")][-1].seq')
[ "$seq_after" = "$seq_before" ] || fail "events were appended to $held between hostA's reports and hostB's finish"

# ---- every item done exactly once ----------------------------------------------------------
say "checks: every item done exactly once, verify"
stats=$(cp_on "$HA" stats)
[ "$(jq -c . <<<"$stats")" = "{\"ready\":0,\"claimed\":0,\"done\":$N,\"failed\":0,\"closed\":0,\"scheduled\":0,\"cancelled\":0}" ] ||
  fail "stats: $stats, not $N done and nothing else"
# Per item: exactly one done event, the last one, under the fence of its
# last claim, which hostB held (a done event's actor is the holder), no
# failed event; and its row says done.
want='{"done":1,"failed":0,"last":"done","fence_is_last_claims":true,"holder":"hostB","row":"done"}'
while read -r item; do
  summary=$(jq -c --arg row "$(cp_on "$HA" item "$item" | jq -r .status)" '{
      done: [.[] | select(.type == "done")] | length,
      failed: [.[] | select(.type == "failed")] | length,
      last: .[-1].type,
      fence_is_last_claims: (([.[] | select(.type == "done")][0].fence) ==
                             ([.[] | select(.type == "claimed")] | map(.fence) | max)),
      holder: ([.[] | select(.type == "done")][0].actor),
      row: $row
    }' <<<"$(cp_on "$HB" events "$item")")
  [ "$summary" = "$want" ] || fail "item $item: $summary, want $want"
done <"$WORK/ids"

verify_rc=0
verify_out=$(cp_on "$HA" verify 2>&1) || verify_rc=$?
[ "$verify_rc" = 0 ] || fail "verify exited $verify_rc: $verify_out"
[ "$verify_out" = "[]" ] || fail "verify listed problems: $verify_out"

elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))
if [ "${#failures[@]}" -gt 0 ]; then
  echo "FAILED checks (${#failures[@]}):"
  printf '  - %s\n' "${failures[@]}"
  exit 1
fi
echo "items=$N hostA_items=$K elapsed_ms=$elapsed_ms"
echo PASS
