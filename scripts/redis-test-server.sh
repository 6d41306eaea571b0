#!/usr/bin/env bash
# A throwaway Redis server on loopback for the tests of DeerFlow's Redis history cache
# (tests/it/deerflow_delete.rs, tests/it/history_cache.rs).
#
#   scripts/redis-test-server.sh start   # start on a free port; print its URL last
#   scripts/redis-test-server.sh stop    # stop it and remove its directory
#
# State lives in $DFCK_REDIS_DIR (default /tmp/dfck-redis-test). Nothing is persisted.
set -euo pipefail
DIR="${DFCK_REDIS_DIR:-/tmp/dfck-redis-test}"

case "${1:-}" in
start)
    if ! command -v redis-server >/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "redis-test-server: redis-server missing; installing it" >&2
            apt-get update -qq >/dev/null
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
        else
            echo "redis-test-server: no redis-server (install Debian's redis-server)" >&2
            exit 2
        fi
    fi
    "$0" stop >/dev/null 2>&1 || true
    mkdir -p "$DIR"
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
        --dir "$DIR" --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" >/dev/null
    for _ in $(seq 1 50); do
        if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
            echo "redis://127.0.0.1:$port/0"
            exit 0
        fi
        sleep 0.1
    done
    echo "redis-test-server: the server did not answer; see $DIR/redis.log" >&2
    exit 1
    ;;
stop)
    if [ -f "$DIR/redis.pid" ]; then
        kill "$(cat "$DIR/redis.pid")" 2>/dev/null || true
    fi
    rm -rf "$DIR"
    ;;
*)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
