#!/usr/bin/env bash
# Throwaway PostgreSQL 15 cluster for dfck's Postgres tests.
#
#   scripts/pg-test-server.sh start   # (re)create + start, load fixtures/postgres/*.sql, print URI
#   scripts/pg-test-server.sh env     # print the URI of the running server again
#   scripts/pg-test-server.sh stop    # stop the server and remove its directory
#   scripts/pg-test-server.sh status  # exit 0 iff the server is running
#   scripts/pg-test-server.sh standby # a hot standby of the running server (streaming
#                                     # replication, read-only), print its URI
#
# Layout under ${DFCK_PG_DIR:-/tmp/dfck-pg} (wiped by start and stop):
#   data/   the cluster (initdb), fsync=off, listen_addresses=127.0.0.1 only
#   sock/   unix socket directory (trust auth, used by this script only)
#   log     server log
#   port    the TCP port chosen
#   env     "export TEST_POSTGRES_URI=postgresql://dfck:dfck-test-pw@127.0.0.1:<port>/postgres"
#
# TCP connections need a password (scram-sha-256): role "dfck", password "dfck-test-pw",
# superuser. The server has TLS on (a self-signed certificate made with openssl); role
# "dfck_tls" (same password, member of dfck) may connect over TLS only. Every fixtures/postgres/<stem>.sql is loaded into its own database
# "dfck_<stem>" owned by dfck (stem lower-cased, other characters than [a-z0-9_] -> "_"), and every
# fixtures/defects-pg/<stem>.sql (gen_defects.py) into "dfck_defect_<stem>" the same way.
#
# stdout carries only the URI (last line of `start`, only line of `env`); progress and
# errors go to stderr, so  TEST_POSTGRES_URI=$(scripts/pg-test-server.sh start)  works.
#
# Run as root (CI), initdb refuses to run, so the cluster belongs to a system user
# "dfckpg" (created if missing) and initdb/pg_ctl run through `runuser -u dfckpg --`.
# Run as any other user, everything runs as that user.
#
# Environment: DFCK_PG_DIR (default /tmp/dfck-pg), DFCK_PG_BIN (default
# /usr/lib/postgresql/15/bin), DFCK_PG_PORT (first port tried, default 55432),
# DFCK_PG_FIXTURES (default <repo>/fixtures/postgres), DFCK_PG_DEFECT_FIXTURES (default
# <repo>/fixtures/defects-pg), DFCK_PG_USER (default dfckpg).
set -euo pipefail

PG_DIR="${DFCK_PG_DIR:-/tmp/dfck-pg}"
PG_BIN="${DFCK_PG_BIN:-/usr/lib/postgresql/15/bin}"
PORT_FROM="${DFCK_PG_PORT:-55432}"
SYS_USER="${DFCK_PG_USER:-dfckpg}"
ROLE=dfck
PASSWORD=dfck-test-pw
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FIXTURES="${DFCK_PG_FIXTURES:-$SCRIPT_DIR/../fixtures/postgres}"
DEFECT_FIXTURES="${DFCK_PG_DEFECT_FIXTURES:-$SCRIPT_DIR/../fixtures/defects-pg}"

DATA="$PG_DIR/data"
SOCK="$PG_DIR/sock"
LOG="$PG_DIR/log"

die() { echo "pg-test-server: error: $*" >&2; exit 1; }
say() { echo "pg-test-server: $*" >&2; }

need_bins() {
    local b
    for b in initdb pg_ctl postgres psql; do
        [[ -x "$PG_BIN/$b" ]] || die "missing PostgreSQL binary $PG_BIN/$b (install postgresql-15, or set DFCK_PG_BIN)"
    done
}

# run CMD... as the cluster owner
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u "$SYS_USER" -- "$@"
    else
        "$@"
    fi
}

ensure_sys_user() {
    [[ $(id -u) -eq 0 ]] || return 0
    command -v runuser >/dev/null || die "runuser not found (util-linux)"
    if ! id -u "$SYS_USER" >/dev/null 2>&1; then
        command -v useradd >/dev/null || die "useradd not found; cannot create system user $SYS_USER"
        say "creating system user $SYS_USER"
        useradd --system --no-create-home --shell /usr/sbin/nologin "$SYS_USER" \
            || die "useradd $SYS_USER failed"
    fi
}

is_running() {
    [[ -f "$DATA/postmaster.pid" ]] || return 1
    as_owner "$PG_BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

port_busy() {
    # 0 (busy) if something accepts on 127.0.0.1:$1 or ss lists a listener on it
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
        return 0
    fi
    if command -v ss >/dev/null 2>&1 && ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; then
        return 0
    fi
    return 1
}

pick_port() {
    local p
    for ((p = PORT_FROM; p < PORT_FROM + 200; p++)); do
        if ! port_busy "$p"; then
            echo "$p"
            return 0
        fi
    done
    die "no free TCP port in $PORT_FROM..$((PORT_FROM + 199))"
}

uri_of() { echo "postgresql://$ROLE:$PASSWORD@127.0.0.1:$1/postgres"; }

STANDBY="$PG_DIR/standby"

do_stop() {
    if [[ -f "$STANDBY/postmaster.pid" ]]; then
        say "stopping the standby in $STANDBY"
        as_owner "$PG_BIN/pg_ctl" -D "$STANDBY" -m immediate -w -t 30 stop >&2 || true
    fi
    if [[ -d "$DATA" ]] && [[ -f "$DATA/postmaster.pid" ]]; then
        say "stopping server in $DATA"
        as_owner "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w -t 30 stop >&2 || {
            # stale pid file (e.g. after a machine restart): nothing to stop
            is_running && die "pg_ctl stop failed for $DATA"
        }
    fi
    if [[ -e "$PG_DIR" ]]; then
        # refuse to wipe something that is clearly not ours
        if [[ -e "$PG_DIR/data" || -e "$PG_DIR/env" || -e "$PG_DIR/sock" || -z "$(ls -A "$PG_DIR" 2>/dev/null)" ]]; then
            rm -rf -- "$PG_DIR"
        else
            die "$PG_DIR exists and does not look like a pg-test-server directory; not removing it"
        fi
    fi
}

psql_local() {
    # superuser over the unix socket (trust); -X: no ~/.psqlrc
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" "$@"
}

do_start() {
    need_bins
    ensure_sys_user
    do_stop
    local t0=$SECONDS
    mkdir -p "$PG_DIR" "$SOCK"
    chmod 700 "$PG_DIR"
    if [[ $(id -u) -eq 0 ]]; then
        chown "$SYS_USER" "$PG_DIR" "$SOCK"
        runuser -u "$SYS_USER" -- test -w "$PG_DIR" \
            || die "$SYS_USER cannot write $PG_DIR (a parent directory is not searchable?); set DFCK_PG_DIR"
    fi
    PORT=$(pick_port)

    say "initdb $DATA"
    as_owner "$PG_BIN/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C --no-sync >"$PG_DIR/initdb.log" 2>&1 \
        || { cat "$PG_DIR/initdb.log" >&2; die "initdb failed"; }
    as_owner tee -a "$DATA/postgresql.conf" >/dev/null <<EOF

# pg-test-server.sh
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCK'
fsync = off
synchronous_commit = off
full_page_writes = off
password_encryption = 'scram-sha-256'
max_connections = 50
shared_buffers = 128MB
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
EOF
    # A self-signed certificate for the TLS tests (role dfck_tls may only connect over TLS).
    command -v openssl >/dev/null || die "openssl is needed for the server's TLS certificate"
    as_owner openssl req -new -x509 -days 2 -nodes -subj "/CN=127.0.0.1" \
        -keyout "$DATA/server.key" -out "$DATA/server.crt" >/dev/null 2>&1 \
        || die "could not create a TLS certificate"
    as_owner chmod 600 "$DATA/server.key"
    # TCP only from 127.0.0.1, password (scram) only; dfck_tls only over TLS; unix socket: trust
    as_owner tee "$DATA/pg_hba.conf" >/dev/null <<EOF
local      all   all                     trust
local      replication all               trust
hostnossl  all   dfck_tls  127.0.0.1/32  reject
hostssl    all   dfck_tls  127.0.0.1/32  scram-sha-256
host       all   all       127.0.0.1/32  scram-sha-256
EOF

    say "starting on 127.0.0.1:$PORT"
    if ! as_owner "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 30 start >&2; then
        [[ -f "$LOG" ]] && tail -n 30 "$LOG" >&2
        die "server did not start (log: $LOG)"
    fi

    psql_local -U postgres -d postgres \
        -c "CREATE ROLE $ROLE LOGIN SUPERUSER PASSWORD '$PASSWORD'" >&2
    psql_local -U postgres -d postgres \
        -c "CREATE ROLE dfck_tls LOGIN PASSWORD '$PASSWORD' IN ROLE $ROLE" >&2

    local f stem db n=0 i
    local dirs=("$FIXTURES" "$DEFECT_FIXTURES") prefixes=(dfck_ dfck_defect_)
    shopt -s nullglob
    for i in 0 1; do
        for f in "${dirs[$i]}"/*.sql; do
            stem=$(basename "$f" .sql)
            db="${prefixes[$i]}$(echo "$stem" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9_\n' '_')"
            psql_local -U postgres -d postgres -c "CREATE DATABASE \"$db\" OWNER $ROLE" >&2
            # loaded as dfck so that every object belongs to dfck
            psql_local -U "$ROLE" -d "$db" -f "$f" >/dev/null \
                || die "loading $f into $db failed"
            n=$((n + 1))
        done
    done
    shopt -u nullglob
    say "loaded $n fixture dump(s) from $FIXTURES and $DEFECT_FIXTURES"

    local uri
    uri=$(uri_of "$PORT")
    echo "$PORT" >"$PG_DIR/port"
    echo "export TEST_POSTGRES_URI=$uri" >"$PG_DIR/env"
    chmod 644 "$PG_DIR/env" "$PG_DIR/port"
    # make env/port readable for non-root users when created by root
    [[ $(id -u) -eq 0 ]] && chmod 711 "$PG_DIR"

    # sanity: the password login over TCP works
    PGPASSWORD="$PASSWORD" "$PG_BIN/psql" -X -q -w -h 127.0.0.1 -p "$PORT" -U "$ROLE" -d postgres \
        -tAc "SELECT 1" >/dev/null || die "password login over TCP failed"
    say "ready in $((SECONDS - t0)) s; env file $PG_DIR/env"
    echo "$uri"
}

do_env() {
    [[ -f "$PG_DIR/env" ]] || die "no $PG_DIR/env: server not started (run: $0 start)"
    is_running || die "server in $DATA is not running (run: $0 start)"
    sed -n 's/^export TEST_POSTGRES_URI=//p' "$PG_DIR/env"
}

# A hot standby of the running server: a base backup over the unix socket, streaming from
# the primary (primary_conninfo written by -R), read-only; same roles and databases.
do_standby() {
    need_bins
    is_running || die "server in $DATA is not running (run: $0 start)"
    PORT=$(cat "$PG_DIR/port")
    local sport
    PORT_FROM=$((PORT + 1))
    if [[ -f "$STANDBY/postmaster.pid" ]]; then
        as_owner "$PG_BIN/pg_ctl" -D "$STANDBY" -m immediate -w -t 30 stop >&2 || true
    fi
    sport=$(pick_port)
    rm -rf -- "$STANDBY"
    as_owner "$PG_BIN/pg_basebackup" -D "$STANDBY" -R -X stream -c fast -h "$SOCK" -p "$PORT" -U postgres \
        >"$PG_DIR/standby.log" 2>&1 || { cat "$PG_DIR/standby.log" >&2; die "pg_basebackup failed"; }
    printf '\n# pg-test-server.sh standby\nport = %s\nhot_standby = on\n' "$sport" \
        | as_owner tee -a "$STANDBY/postgresql.conf" >/dev/null
    if ! as_owner "$PG_BIN/pg_ctl" -D "$STANDBY" -l "$PG_DIR/standby-server.log" -w -t 30 start >&2; then
        tail -n 30 "$PG_DIR/standby-server.log" >&2
        die "the standby did not start"
    fi
    local i
    for ((i = 0; i < 100; i++)); do
        if PGPASSWORD="$PASSWORD" "$PG_BIN/psql" -X -q -w -h 127.0.0.1 -p "$sport" -U "$ROLE" \
            -d postgres -tAc "SELECT pg_is_in_recovery()" 2>/dev/null | grep -q t; then
            say "standby ready on 127.0.0.1:$sport"
            uri_of "$sport"
            return 0
        fi
        sleep 0.1
    done
    die "the standby does not answer"
}

case "${1:-}" in
    start) do_start ;;
    stop) need_bins; do_stop; say "stopped" ;;
    env) need_bins; do_env ;;
    standby) do_standby ;;
    status) need_bins; if is_running; then say "running ($(cat "$PG_DIR/port" 2>/dev/null))"; else say "not running"; exit 1; fi ;;
    *) echo "usage: $0 start|stop|env|status|standby" >&2; exit 2 ;;
esac
