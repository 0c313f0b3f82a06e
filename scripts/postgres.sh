#!/bin/sh
# A throwaway PostgreSQL cluster for the tests: `start DIR` creates one in DIR on a free local
# port and prints its URL; `restart DIR` restarts it the hard way (`pg_ctl restart -m immediate`:
# every backend killed, crash recovery on start, the same port); `stop DIR` stops it (DIR can
# then be deleted). Nothing outside DIR is touched. Needs the server binaries (Debian/Ubuntu:
# sudo apt-get install postgresql).
#
# A test cluster skips the flushes: nothing in it must survive a power cut. `start DIR durable`
# keeps `synchronous_commit` on, so every commit the server acknowledged survives a restart
# (a crash of the server, not of the machine): what the restart tests need.
#
#   url=$(sh scripts/postgres.sh start /tmp/shopops-pg)
#   SHOPOPS_POSTGRES_URL=$url make test
#   sh scripts/postgres.sh stop /tmp/shopops-pg
set -eu

usage() { echo "usage: sh scripts/postgres.sh start|restart|stop DIR [durable]" >&2; exit 2; }
[ $# -eq 2 ] || { [ $# -eq 3 ] && [ "$1" = start ] && [ "$3" = durable ]; } || usage
action=$1 dir=$2 commits=off
if [ $# -eq 3 ]; then commits=on; fi

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bin" ] && command -v pg_ctl >/dev/null 2>&1; then bin=$(dirname "$(command -v pg_ctl)"); fi
if [ -z "$bin" ]; then
    echo "postgres.sh: no PostgreSQL server found. Install it: sudo apt-get install postgresql" >&2
    exit 1
fi

case $dir in /*) ;; *) dir=$(pwd)/$dir ;; esac
# The server refuses to run as root: as root, run it as the postgres user, from / (the folder
# this was started in may be one only root may enter, as a clone in a `mktemp -d` folder is).
as_owner() { if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi; }

case $action in
start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    # A test cluster: nothing in it must survive a power cut, so skip the flushes.
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=$commits -c full_page_writes=off" \
        start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres shopops
    echo "postgresql://postgres@127.0.0.1:$port/shopops"
    ;;
restart)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m immediate -w restart >/dev/null \
        || { tail -n 20 "$dir/server.log" >&2; exit 1; }
    ;;
stop)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
*) usage ;;
esac
