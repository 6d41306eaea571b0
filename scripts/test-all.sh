#!/usr/bin/env bash
# The whole test suite: starts a throwaway PostgreSQL 15 server (scripts/pg-test-server.sh)
# with the fixture databases and a throwaway Redis (scripts/redis-test-server.sh), runs every test (SQLite and Postgres) in release mode, checks
# converted stores with the real Python LangGraph (scripts/check_migrated.py), and stops the
# servers again, whatever happens. This is the test command README.md names and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_BIN="${DFCK_PG_BIN:-/usr/lib/postgresql/15/bin}"
if [ ! -x "$PG_BIN/initdb" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "test-all: PostgreSQL 15 server binaries missing; installing postgresql-15" >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
    else
        echo "test-all: no PostgreSQL 15 server binaries in $PG_BIN (install postgresql-15, or run 'cargo test' for the SQLite tests alone)" >&2
        exit 2
    fi
fi

export DFCK_PG_DIR="${DFCK_PG_DIR:-$(mktemp -d /tmp/dfck-pg-test.XXXXXX)}"
export DFCK_REDIS_DIR="${DFCK_REDIS_DIR:-$(mktemp -d /tmp/dfck-redis-test.XXXXXX)}"
trap 'scripts/pg-test-server.sh stop >/dev/null 2>&1 || true; scripts/redis-test-server.sh stop >/dev/null 2>&1 || true' EXIT
TEST_POSTGRES_URI="$(scripts/pg-test-server.sh start | tail -n 1)"
export TEST_POSTGRES_URI
export DFCK_REQUIRE_POSTGRES=1
echo "test-all: PostgreSQL test server at ${TEST_POSTGRES_URI//dfck-test-pw/***}" >&2
# A hot standby of it (streaming replication): write commands must refuse it up front.
TEST_POSTGRES_STANDBY_URI="$(scripts/pg-test-server.sh standby | tail -n 1)"
export TEST_POSTGRES_STANDBY_URI
# DeerFlow's Redis history cache: the commands that delete or rewrite threads purge its keys.
TEST_REDIS_URL="$(scripts/redis-test-server.sh start | tail -n 1)"
export TEST_REDIS_URL
export DFCK_REQUIRE_REDIS=1
echo "test-all: Redis test server at $TEST_REDIS_URL" >&2

# PgBouncer in transaction mode (Debian's pgbouncer, installed when missing): the tests start
# one in front of the test server for dfck maintain's lease behind a transaction-pooling proxy.
if ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "test-all: pgbouncer missing; installing it" >&2
        { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null 2>&1 \
            || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }; }
        # The package's own service is not wanted: the tests run their own.
        { systemctl disable --now pgbouncer || service pgbouncer stop; } >/dev/null 2>&1 || true
    fi
fi
export DFCK_REQUIRE_PGBOUNCER=1

# The pinned Python LangGraph (installed into .venv once) serves the tests that compare dfck
# with the real library: the langgraph bench engine, Python reading native-engine stores.
VENV="${DFCK_VENV:-.venv}"
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import langgraph, langgraph.checkpoint.postgres, sqlalchemy, Crypto, prometheus_client" 2>/dev/null; then
    echo "test-all: installing the pinned Python packages into $VENV (scripts/requirements.txt)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q -r scripts/requirements.txt
fi
export DFCK_TEST_PYTHON="$VENV/bin/python"
export DFCK_REQUIRE_PYTHON=1

cargo test --release --workspace -- --show-output

# The real library agrees: converted stores read through a full-mode (add_messages) graph by
# the pinned Python LangGraph show exactly the delta view (SQLite and Postgres copies).
"$VENV/bin/python" scripts/check_migrated.py --dfck target/release/dfck

# The real library reads pruned stores: latest, every kept checkpoint, a branch from an older
# turn, one more turn and an interrupted branch's resume equal an untouched copy's.
"$VENV/bin/python" scripts/check_pruned.py --dfck target/release/dfck

# The real library reads every checkpoint of full threads converted to delta form through
# delta-mode graphs, and continues each converted thread three turns.
"$VENV/bin/python" scripts/check_full_to_delta.py --dfck target/release/dfck

# A full-mode thread over the write commands' in-memory budget (32 MiB stored), so dfck reads it
# back a checkpoint at a time: pruned to its last 100 turns, copied to a new file row by row, and
# converted to delta form; the real library reads a sample of checkpoints of each result and
# continues the thread.
GIANT=$(mktemp -d)
"$VENV/bin/python" scripts/gen_giant_thread.py --out "$GIANT/giant.db" --target-mb 48 >/dev/null
cp "$GIANT/giant.db" "$GIANT/pruned.db"
target/release/dfck --db "$GIANT/pruned.db" prune --all --keep-last-turns 100 --apply >/dev/null
"$VENV/bin/python" scripts/gen_giant_thread.py --check "$GIANT/pruned.db" --mode full
target/release/dfck --db "$GIANT/giant.db" copy --all --to "$GIANT/copied.db" --apply >/dev/null
"$VENV/bin/python" scripts/gen_giant_thread.py --check "$GIANT/copied.db" --mode full
target/release/dfck --db "$GIANT/giant.db" migrate full-to-delta --all --apply >/dev/null
"$VENV/bin/python" scripts/gen_giant_thread.py --check "$GIANT/giant.db"
rm -rf "$GIANT"

# The real library reads copied stores (SQLite -> PostgreSQL -> SQLite) and continues them.
"$VENV/bin/python" scripts/check_copied.py --dfck target/release/dfck

# DeerFlow's own tables, read through SQLAlchemy reflection of the committed schema: delete and
# erase (SQLite and PostgreSQL) change exactly the rows DeerFlow's contract names, the real
# saver reads and continues every kept thread; copy SQLite -> PostgreSQL -> SQLite keeps every
# DeerFlow table's rows.
"$VENV/bin/python" scripts/check_deerflow_db.py --dfck target/release/dfck

# The real library reads stores reclaimed in place and --into, and continues them.
"$VENV/bin/python" scripts/check_reclaimed.py --dfck target/release/dfck

# Deleting threads of an encrypted store (prune --older-than on a bare LangGraph store, delete and
# erase with DeerFlow's tables, with and without the key): exactly those threads' rows gone, every
# other thread unchanged, no row losing its encryption, the rest read and continued with the key.
"$VENV/bin/python" scripts/check_encrypted_deletes.py --dfck target/release/dfck

# The allowlist `dfck audit --emit python` prints lets the real library read every checkpoint
# and pending write of every fixture in strict mode exactly as permissive mode reads them, with
# no blocked serde event, and every entry of it is needed; tampered stores exit 1, never allowed.
"$VENV/bin/python" scripts/check_audit.py --dfck target/release/dfck

# The Prometheus project's own OpenMetrics parser reads `inspect --format openmetrics` of SQLite
# and PostgreSQL stores (and a store with a recorded maintain run), every number equal to
# `inspect --format json`.
"$VENV/bin/python" scripts/check_metrics.py --dfck target/release/dfck

# dfck maintain --apply run several times beside a live LangGraph writer (SQLite and
# PostgreSQL): every run works, the real library reads every kept checkpoint and the live
# threads' heads back and continues every thread.
"$VENV/bin/python" scripts/check_maintained.py --dfck target/release/dfck

# The operations files (docs/operations.md): systemd units verified, the CronJob and cron line
# parsed, the alert rules checked with promtool, every dfck option they use in --help, the
# metrics files parsed.
DFCK_REQUIRE_OPS=1 scripts/check-ops.sh --dfck target/release/dfck

# The fuzz targets (run under nightly with cargo-fuzz, see fuzz/) still compile against the
# library as it is now.
cargo check --quiet --manifest-path fuzz/Cargo.toml --bins
echo "fuzz targets: codec, rows, materialize compile"

# A release build carries no crash-injection points (they exist only in test builds, through
# the `failpoints` feature that the crate's own dev-dependency turns on for `cargo test`).
cargo build --release --quiet
if grep -c -a DFCK_FAILPOINT target/release/dfck >/dev/null; then
    echo "test-all: the release binary contains failpoints" >&2
    exit 1
fi
echo "release binary: 0 failpoints (grep -c -a DFCK_FAILPOINT target/release/dfck)"
