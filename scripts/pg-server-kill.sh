#!/usr/bin/env bash
# A fault test: the PostgreSQL server is SIGKILLed in the middle of a drain.
#
#   scripts/pg-server-kill.sh CPLANE [PROBE]     (PROBE is accepted and unused)
#
# It makes a throwaway PostgreSQL 15 cluster of its own (initdb into a temp
# folder, run as the postgres user, 127.0.0.1 on a free port and a unix
# socket in that folder), queues N items (default 600: see below), and
# starts W worker processes (default 8), each a bash loop of one-shot CLI
# commands: `claim --owner wN --json --lease 5`, then `finish` (both with
# --durability PGKILL_DURABILITY, default fenced, cplane's default). On any error
# but "nothing to claim" (exit 3) a worker prints it, sleeps 0.2 s and goes
# on. A finish that fails in any other way than a fence refusal (a lost
# connection, `unavailable`; a connection lost during COMMIT,
# `commit_unknown`) is never retried blindly: the worker reads the item and
# retries only if it is still claimed under its fence; if it is done under
# its fence, that finish committed. A worker stops when claim says nothing is
# left and `stats` shows nothing ready or claimed (a claim whose reply was
# lost is held by nobody until its 5 s lease lapses, then taken again).
#
# Once a third of the items are done, it SIGKILLs the postmaster (the pid on
# the first line of DATA/postmaster.pid, after checking that it is this
# cluster's; only that pid: its backends notice and exit by themselves),
# waits 1 s, and starts the server again on the same port (crash recovery;
# retried while the killed server's backends still hold its shared memory).
#
# Checks: the workers saw clear errors (at least one `unavailable` whose
# message is about the connection, and nothing but `unavailable` and
# `commit_unknown`); the drain completed; every queued item is done, with
# exactly one `done` event (the log, read with psql, and `cplane events` for
# every item claimed more than once plus a sample), under its last claim's
# fence; no `failed` event; `cplane verify` exits 0; and the workers' own
# records agree: each item was reported done, under the fence of its done
# event, to exactly one worker. A worker told "done" under a lower fence is
# a finish acknowledged and then lost in the crash: fenced durability
# committed finishes with synchronous_commit = off, and this test found
# acknowledged finishes undone by the server's crash (an asynchronous commit
# is lost by a crash of the server, not only by a power loss). Every commit
# on PostgreSQL now waits for its WAL flush, and any acknowledged finish
# lost is a failure, at every durability.
#
# Time: each item costs two CLI processes (each a new PostgreSQL
# connection, so a new backend): about 70 ms a call on this 2-core machine,
# most of it the process's start (dynamic linking) and the backend's. 8
# workers drained 600 items in 77-85 s on a quiet machine, and CI's run ran
# out of an 80 s limit with 6 items left (nothing lost or duplicated). So N
# defaults to 300 (the kill still lands after 100 are done, 200 after the
# restart) and a worker gives up only after 180 s: the entry takes ~40 s,
# and a run twice as slow still passes. PGKILL_ITEMS and PGKILL_WORKERS (at
# most 16) override: `PGKILL_ITEMS=3000 scripts/pg-server-kill.sh CPLANE` is
# the long run.
#
# Prints PASS and exits 0 only when every check holds; else lists what
# failed and exits 1. The workers, the server and the temp folder are
# removed on exit, failure included.
set -euo pipefail
export LC_ALL=C

if [ $# -lt 1 ]; then
  echo "usage: $0 CPLANE [PROBE]" >&2
  exit 2
fi
CPLANE=$(readlink -f "$1")
PGBIN=/usr/lib/postgresql/15/bin
N=${PGKILL_ITEMS:-300}
W=${PGKILL_WORKERS:-8}
LEASE=5
DURABILITY=${PGKILL_DURABILITY:-fenced}   # the workers' --durability
DRAIN_LIMIT=${PGKILL_DRAIN_LIMIT:-180}   # seconds: a worker gives up (and the test fails) past this

[ "$W" -ge 1 ] && [ "$W" -le 16 ] || { echo "FAIL: PGKILL_WORKERS must be 1..16"; exit 1; }
case "$DURABILITY" in full | fenced | normal) ;; *) echo "FAIL: PGKILL_DURABILITY must be full, fenced or normal"; exit 1 ;; esac
[ "$(id -u)" = 0 ] || { echo "FAIL: $0 must run as root (it runs the server as postgres)"; exit 1; }
[ -x "$CPLANE" ] || { echo "FAIL: no cplane binary at $1"; exit 1; }
[ -x "$PGBIN/initdb" ] || { echo "FAIL: PostgreSQL 15 is not installed in $PGBIN"; exit 1; }

WORK=
PG_STARTED=0
worker_pids=()
serve_pid=
failures=()

postmaster_pid() {  # this cluster's postmaster, or nothing
  local pid
  pid=$(head -n 1 "$WORK/data/postmaster.pid" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  # Make sure the pid is a postgres running on this data folder.
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$WORK/data"; then echo "$pid"; fi
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  local pid
  for pid in "${worker_pids[@]}" $serve_pid; do kill "$pid" 2>/dev/null; done
  for pid in "${worker_pids[@]}" $serve_pid; do wait "$pid" 2>/dev/null; done
  if [ "$PG_STARTED" = 1 ]; then
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/data" -m immediate -w -t 20 stop >/dev/null 2>&1
    pid=$(postmaster_pid)
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  fi
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
now_ms() { echo $(($(date +%s%N) / 1000000)); }
start_ms=$(now_ms)

WORK=$(mktemp -d /tmp/cplane-pgkill.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$WORK/run" "$WORK/data" "$WORK/logs"
chown postgres: "$WORK/run" "$WORK/data"
chmod 700 "$WORK/data"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
  shuf -i 20000-60000 -n 1)
URL="postgresql://postgres@127.0.0.1:$PORT/cplane?connect_timeout=3"

pg_start() {
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/run/server.log" -w -t 30 \
    -o "-p $PORT -k $WORK/run -c listen_addresses=127.0.0.1 -c max_connections=100" start \
    >>"$WORK/pg_ctl.log" 2>&1
}
psql_q() {
  runuser -u postgres -- "$PGBIN/psql" -h "$WORK/run" -p "$PORT" -U postgres -d cplane -qAt -v ON_ERROR_STOP=1 -c "$1"
}

say "PostgreSQL 15 on 127.0.0.1:$PORT"
runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/data" -U postgres -A trust --no-sync -E UTF8 \
  --locale=C.UTF-8 >"$WORK/initdb.log"
PG_STARTED=1
pg_start || { tail -n 20 "$WORK/pg_ctl.log" "$WORK/run/server.log"; exit 1; }
runuser -u postgres -- "$PGBIN/psql" -h "$WORK/run" -p "$PORT" -U postgres -qAt -c "CREATE DATABASE cplane" >/dev/null

say "queue $N items"
"$CPLANE" --db "$URL" project create kill "server kill" >/dev/null
seq 1 "$N" | sed 's/.*/{"n":&}/' >"$WORK/payloads"
"$CPLANE" --db "$URL" enqueue kill --batch "$WORK/payloads" >"$WORK/ids"
sort "$WORK/ids" >"$WORK/ids.sorted"
[ "$(uniq "$WORK/ids.sorted" | wc -l)" = "$N" ] || fail "enqueue printed $(wc -l <"$WORK/ids") ids, not $N distinct"

# ---- the workers ---------------------------------------------------------------------
# Each writes what it did to logs/wN.log ("done ITEM FENCE", "refused ...",
# "lost ...") and every error it saw to logs/wN.err (cplane's JSON error).
worker() {
  set +e
  trap - ERR EXIT INT TERM
  local w=$1
  local log="$WORK/logs/w$w.log" errs="$WORK/logs/w$w.err" tmp="$WORK/logs/w$w.tmp"
  local now deadline out rc item fence status row_fence s
  printf -v now '%(%s)T' -1
  deadline=$((now + DRAIN_LIMIT))
  note_error() {  # note_error WHAT
    local msg
    msg=$(tr '\n' ' ' <"$tmp")
    echo "$msg" >>"$errs"
    echo "w$w: $1: ${msg:0:220}"
  }
  while :; do
    printf -v now '%(%s)T' -1
    if [ "$now" -ge "$deadline" ]; then
      echo "gave_up" >>"$log"
      echo "w$w: gave up after ${DRAIN_LIMIT} s"
      return 1
    fi
    out=$("$CPLANE" --db "$URL" --json --durability "$DURABILITY" claim --owner "w$w" --lease "$LEASE" 2>"$tmp")
    rc=$?
    if [ "$rc" = 3 ]; then
      # Nothing claimable now. Done once nothing is ready or claimed at all
      # (a claim whose reply was lost lapses after its lease and is taken again).
      s=$("$CPLANE" --db "$URL" --json stats 2>"$tmp")
      if [ $? != 0 ]; then
        note_error "stats exit 1"
        sleep 0.2
        continue
      fi
      if [[ $s =~ \"ready\":0, ]] && [[ $s =~ \"claimed\":0, ]]; then
        echo "drained" >>"$log"
        return 0
      fi
      sleep 0.3
      continue
    elif [ "$rc" != 0 ]; then
      note_error "claim exit $rc"
      sleep 0.2
      continue
    fi
    if ! [[ $out =~ \"item_id\":\"([^\"]+)\" ]]; then
      echo "w$w: unreadable claim: $out"
      echo "unreadable_claim $out" >>"$log"
      continue
    fi
    item=${BASH_REMATCH[1]}
    [[ $out =~ \"fence\":([0-9]+) ]]
    fence=${BASH_REMATCH[1]}
    echo "claimed $item $fence" >>"$log"
    while :; do
      "$CPLANE" --db "$URL" --json --durability "$DURABILITY" finish "$item" --fence "$fence" --status done \
        >/dev/null 2>"$tmp"
      rc=$?
      if [ "$rc" = 0 ]; then
        echo "done $item $fence" >>"$log"
        break
      elif [ "$rc" = 4 ]; then
        # Our lease lapsed while the server was away and someone took it.
        echo "refused $item $fence $(tr '\n' ' ' <"$tmp")" >>"$log"
        break
      fi
      note_error "finish exit $rc"
      grep -q commit_unknown "$tmp" && echo "commit_unknown $item $fence" >>"$log"
      # Did it happen? Read the item (retrying while the server is away).
      while :; do
        sleep 0.2
        printf -v now '%(%s)T' -1
        [ "$now" -lt "$deadline" ] || break
        out=$("$CPLANE" --db "$URL" --json item "$item" 2>"$tmp") && break
        note_error "item exit $?"
      done
      [[ $out =~ \"status\":\"([a-z]+)\" ]] && status=${BASH_REMATCH[1]} || status=unknown
      [[ $out =~ \"fence\":([0-9]+) ]] && row_fence=${BASH_REMATCH[1]} || row_fence=-1
      if [ "$status" = done ] && [ "$row_fence" = "$fence" ]; then
        echo "done $item $fence confirmed" >>"$log"
        break
      elif [ "$status" = claimed ] && [ "$row_fence" = "$fence" ]; then
        continue # it did not happen and the claim still stands: finish again
      else
        echo "lost $item $fence (now $status under $row_fence)" >>"$log"
        break
      fi
    done
  done
}

say "$W workers drain"
drain_start=$(now_ms)
for w in $(seq 1 "$W"); do
  worker "$w" &
  worker_pids+=("$!")
done

done_count() {
  local s
  s=$("$CPLANE" --db "$URL" --json stats 2>/dev/null) || return 1
  [[ $s =~ \"done\":([0-9]+) ]] && echo "${BASH_REMATCH[1]}"
}

# ---- a long-lived process across the crash --------------------------------------------------
# A console (one connection, kept open) must answer its first request after
# the server comes back: the connection broke while idle, and the next
# transaction reconnects once and runs, instead of failing `unavailable`.
"$CPLANE" --db "$URL" serve --read-only --listen 127.0.0.1:0 >"$WORK/serve.out" 2>"$WORK/serve.err" &
serve_pid=$!
serve_url=
for _ in $(seq 1 100); do
  serve_url=$(grep -oE 'http://[0-9.]+:[0-9]+' "$WORK/serve.out" 2>/dev/null || true)
  [ -n "$serve_url" ] && break
  sleep 0.1
done
http_status() {  # the status of one GET, or 000
  python3 -c 'import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=20).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")' "$1/api/projects"
}
if [ -z "$serve_url" ]; then
  fail "the console did not start: $(head -c 300 "$WORK/serve.err")"
else
  [ "$(http_status "$serve_url")" = 200 ] || fail "the console did not answer before the kill"
fi

# ---- the kill -----------------------------------------------------------------------------
target=$((N / 3))
killed=0
while :; do
  d=$(done_count || echo 0)
  if [ "$d" -ge "$target" ]; then break; fi
  if [ $(($(now_ms) - drain_start)) -gt 120000 ]; then
    fail "the drain did not reach $target done items within 120 s (at $d)"
    break
  fi
  sleep 0.1
done
old_pm=$(postmaster_pid)
if [ -z "$old_pm" ]; then
  fail "no postmaster pid for this cluster in $WORK/data/postmaster.pid"
else
  say "$d of $N done: SIGKILL the postmaster (pid $old_pm)"
  kill -KILL "$old_pm"
  killed=1
  kill_ms=$(now_ms)
  for _ in $(seq 1 50); do
    [ -d "/proc/$old_pm" ] || break
    sleep 0.1
  done
  [ -d "/proc/$old_pm" ] && fail "the postmaster $old_pm is still there after SIGKILL"
  sleep 1
  say "start the server again on port $PORT"
  started=0
  for attempt in $(seq 1 40); do
    if pg_start; then
      started=1
      break
    fi
    sleep 0.5 # the killed server's backends may still hold its shared memory
  done
  if [ "$started" = 1 ]; then
    new_pm=$(postmaster_pid)
    echo "   back after $(($(now_ms) - kill_ms)) ms (attempt $attempt), postmaster pid $new_pm"
    [ -n "$new_pm" ] && [ "$new_pm" != "$old_pm" ] || fail "no new postmaster after the restart"
  else
    fail "the server did not start again: $(tail -n 5 "$WORK/pg_ctl.log")"
  fi
fi

if [ -n "$serve_url" ]; then
  code=$(http_status "$serve_url")
  [ "$code" = 200 ] || fail "the console's first request after the crash answered $code: $(tail -c 300 "$WORK/serve.err")"
  # An immediate shutdown: each backend sends its FATAL before it closes,
  # and libpq still calls the idle connection good until a send fails.
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/data" -m immediate -w -t 30 restart \
    -l "$WORK/run/server.log" >>"$WORK/pg_ctl.log" 2>&1 || fail "pg_ctl restart -m immediate failed"
  code=$(http_status "$serve_url")
  [ "$code" = 200 ] || fail "the console's first request after an immediate restart answered $code: $(tail -c 300 "$WORK/serve.err")"
  say "the console answered its first request after the crash and after an immediate restart"
fi

# ---- the drain completes ----------------------------------------------------------------------
worker_failures=0
for pid in "${worker_pids[@]}"; do
  wait "$pid" || worker_failures=$((worker_failures + 1))
done
worker_pids=()
drain_ms=$(($(now_ms) - drain_start))
say "drain over after $drain_ms ms"
[ "$worker_failures" = 0 ] || fail "$worker_failures workers did not finish their drain"
[ "$killed" = 1 ] || fail "the server was never killed"

# ---- what the workers saw --------------------------------------------------------------------
cat "$WORK"/logs/w*.err 2>/dev/null >"$WORK/errors" || true
n_errors=$(grep -c . "$WORK/errors" || true)
n_unavailable=$(grep -c '"reason":"unavailable"' "$WORK/errors" || true)
n_unknown=$(grep -c '"reason":"commit_unknown"' "$WORK/errors" || true)
n_conn=$(grep '"reason":"unavailable"' "$WORK/errors" | grep -ciE 'connect|connection' || true)
echo "   worker errors: $n_errors ($n_unavailable unavailable, $n_conn of them about the connection; $n_unknown commit_unknown)"
grep -oE '"message":"[^"]{0,160}' "$WORK/errors" | sed 's/"message":"//; s/[0-9a-f-]\{36\}/ID/g; s/port [0-9]*/port P/g' |
  sort | uniq -c | sort -rn | head -n 6 | sed 's/^/     /' || true
[ "$n_conn" -ge 1 ] || fail "no worker error says the connection was unavailable"
others=$(grep -vE '"reason":"(unavailable|commit_unknown)"' "$WORK/errors" || true)
[ -z "$others" ] || fail "workers saw errors other than unavailable/commit_unknown: $(head -c 600 <<<"$others")"
cat "$WORK"/logs/w*.log >"$WORK/records"
grep -q '^unreadable_claim' "$WORK/records" && fail "a claim printed unreadable JSON"
n_refused=$(grep -c '^refused' "$WORK/records" || true)
n_lost=$(grep -c '^lost' "$WORK/records" || true)
n_confirmed=$(grep -c '^done .* confirmed$' "$WORK/records" || true)
n_claims=$(grep -c '^claimed' "$WORK/records" || true)
echo "   worker records: $n_claims claims seen, $n_refused late finishes refused, $n_lost lost to a reclaim, $n_confirmed finishes confirmed after an error"
# ---- the store ---------------------------------------------------------------------------------
say "checks: every item done exactly once, verify"
stats=$("$CPLANE" --db "$URL" --json stats)
[ "$stats" = "{\"ready\":0,\"claimed\":0,\"done\":$N,\"failed\":0,\"closed\":0,\"scheduled\":0,\"cancelled\":0}" ] ||
  fail "stats: $stats, not $N done and nothing else"

psql_q "SELECT item_id FROM events WHERE type = 'done' ORDER BY item_id" >"$WORK/log_done"
if ! diff -q "$WORK/ids.sorted" <(sort -u "$WORK/log_done") >/dev/null; then
  fail "items without a done event, or done items never queued: $(comm -3 "$WORK/ids.sorted" <(sort -u "$WORK/log_done") | head -n 5 | tr '\n' ' ')"
fi
twice=$(uniq -d "$WORK/log_done" | head -n 5)
[ -z "$twice" ] || fail "items with two done events: $twice"
[ "$(psql_q "SELECT count(*) FROM events WHERE type = 'failed'")" = 0 ] || fail "the log has failed events"
[ "$(psql_q "SELECT count(*) FROM items WHERE project_id = 'kill' AND status = 'done'")" = "$N" ] ||
  fail "not all $N item rows are done"
# No claim went missing: with no releases, an item's fence is its number of claims.
wrong_fence=$(psql_q "SELECT count(*) FROM items WHERE project_id = 'kill' AND fence <> attempts")
[ "$wrong_fence" = 0 ] || fail "$wrong_fence items whose fence is not their number of claims"

# What the workers were told against what the store holds. Every item is
# reported done (exit 0) under the fence its done event carries by exactly one
# worker. Other reports of done are finishes acknowledged and then lost in
# the crash: under --durability fenced (the default) a finish commits with
# synchronous_commit = off, and the postmaster's death takes WAL not yet
# flushed with it. That is allowed there (the item stayed claimed under the
# lower fence, lapsed, and was done again under a higher one: what fenced
# promises for a power loss), never under full.
psql_q "SELECT item_id || ' ' || fence FROM items WHERE project_id = 'kill'" | sort >"$WORK/row_fences"
awk '$1 == "done" {print $2, $3}' "$WORK/records" | sort >"$WORK/worker_done"
join -a 1 -a 2 -e NONE -o 0,1.2,2.2 "$WORK/worker_done" "$WORK/row_fences" | awk '
  $3 != "NONE" { row[$1] = $3 }
  $3 == "NONE" { print "unknown", $1, $2; next }
  $2 == "NONE" { next }
  $2 == $3 { kept[$1]++; next }
  $2 < $3 { print "lost_ack", $1, $2, $3; next }
  { print "above", $1, $2, $3 }
  END {
    for (i in row) {
      k = (i in kept) ? kept[i] : 0
      if (k > 1) print "twice", i, "-", row[i]
      if (k == 0) print "unreported", i, "-", row[i]
    }
  }' >"$WORK/report_problems"
awk '$1 == "done" {print $2}' "$WORK/records" | sort -u >"$WORK/worker_done_items"
if ! diff -q "$WORK/ids.sorted" "$WORK/worker_done_items" >/dev/null; then
  fail "the items reported done by workers are not the queued items: $(comm -3 "$WORK/ids.sorted" "$WORK/worker_done_items" | head -n 5 | tr '\n' ' ')"
fi
n_lost_acks=$(grep -c '^lost_ack' "$WORK/report_problems" || true)
while read -r kind item fence row_fence; do
  case "$kind" in
    lost_ack) fail "item $item: a worker was told its finish under fence $fence succeeded, but the item was done again under $row_fence (durability $DURABILITY)" ;;
    unknown) fail "item $item: a worker reported done under fence $fence, and no such item row" ;;
    above) fail "item $item: a worker reported done under fence $fence, above the row's $row_fence" ;;
    twice) fail "item $item: two workers were told their finish under the same fence succeeded" ;;
    unreported) fail "item $item: no worker was told its finish succeeded" ;;
  esac
  if [ "$kind" != lost_ack ]; then grep -h -- "$item" "$WORK/records" | sed 's/^/     record: /' || true; fi
done <"$WORK/report_problems"
echo "   $n_lost_acks acknowledged finishes were lost in the crash and redone under a higher fence (durability $DURABILITY)"
grep '^lost_ack' "$WORK/report_problems" | head -n 3 >"$WORK/lost_acks" || true
while read -r _ item fence row_fence; do
  echo "     $item: acknowledged under fence $fence; its events: $("$CPLANE" --db "$URL" --json events "$item" |
    jq -r '[.[] | "\(.type)/\(.fence)/\(.actor)"] | join(" ")')"
done <"$WORK/lost_acks"

# Through the CLI: every item claimed more than once, and a sample of the rest.
{
  psql_q "SELECT item_id FROM items WHERE project_id = 'kill' AND attempts > 1 ORDER BY item_id LIMIT 100"
  shuf -n 20 "$WORK/ids"
} | sort -u >"$WORK/sample"
n_reclaimed=$(psql_q "SELECT count(*) FROM items WHERE project_id = 'kill' AND attempts > 1")
echo "   $n_reclaimed items were claimed more than once; checking $(wc -l <"$WORK/sample") items' events through the CLI"
while read -r item; do
  summary=$("$CPLANE" --db "$URL" --json events "$item" | jq -c '{
      done: [.[] | select(.type == "done")] | length,
      failed: [.[] | select(.type == "failed")] | length,
      last: .[-1].type,
      fenced: (([.[] | select(.type == "done")][0].fence) == ([.[] | select(.type == "claimed")] | map(.fence) | max))
    }')
  [ "$summary" = '{"done":1,"failed":0,"last":"done","fenced":true}' ] ||
    fail "item $item's events: $summary (want one done, last, under its last claim's fence)"
done <"$WORK/sample"

verify_rc=0
verify_out=$("$CPLANE" --db "$URL" --json verify 2>&1) || verify_rc=$?
[ "$verify_rc" = 0 ] || fail "verify exited $verify_rc: ${verify_out:0:600}"
[ "$verify_out" = "[]" ] || fail "verify listed problems: ${verify_out:0:600}"

total_ms=$(($(now_ms) - start_ms))
if [ "${#failures[@]}" -gt 0 ]; then
  echo "FAILED checks (${#failures[@]}):"
  printf '  - %s\n' "${failures[@]}"
  exit 1
fi
echo "items=$N workers=$W durability=$DURABILITY drain_ms=$drain_ms total_ms=$total_ms lost_acks=$n_lost_acks commit_unknown=$n_unknown"
echo PASS
