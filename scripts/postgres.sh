#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and benchmarks.
#
#   scripts/postgres.sh start [DIR]   initdb into DIR (default /tmp/cplane-pg),
#                                     start a server there on a free port,
#                                     listening on 127.0.0.1 and a unix socket
#                                     in DIR only; prints its URL, also kept
#                                     in DIR/url
#   scripts/postgres.sh stop [DIR]    stop it and remove DIR
#   scripts/postgres.sh url [DIR]     print the URL of the running server
#
# The server refuses to run as root, so it runs as the `postgres` user (as
# the caller when that is not root). Binaries: those of the newest server
# installed in /usr/lib/postgresql/*/bin; if there is none, `start` installs
# postgresql-15 from Debian's packages.
set -euo pipefail
cmd=${1:-}
dir=${2:-/tmp/cplane-pg}
bin=$(ls /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sort -V | tail -n 1)
bin=${bin%/postgres}
bin=${bin:-/usr/lib/postgresql/15/bin}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 - <<'PY' 2>/dev/null || shuf -i 20000-60000 -n 1
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
PY
}

case "$cmd" in
start)
  if [ ! -x "$bin/initdb" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends postgresql-15
  fi
  if [ -f "$dir/url" ] && as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    cat "$dir/url"
    exit 0
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  port=$(free_port)
  as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
  as_owner "$bin/psql" -h "$dir" -p "$port" -U postgres -qAt -c "CREATE DATABASE cplane" >/dev/null
  url="postgresql://postgres@localhost:$port/cplane?host=$dir"
  echo "$url" | as_owner tee "$dir/url" >/dev/null
  echo "$url"
  ;;
stop)
  if [ -d "$dir/data" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
  ;;
url)
  cat "$dir/url"
  ;;
*)
  echo "usage: $0 start|stop|url [DIR]" >&2
  exit 2
  ;;
esac
