#!/usr/bin/env bash
# Reproduces benchmarks.md "Many short threads" (issue #26): whole-store commands on stores of
# many short threads, each against its read floor measured in the same run (warm page cache:
# every command, the floor too, runs once before hyperfine times three runs), with peak RSS.
#
#   scripts/bench-short-threads.sh [DIR]
#
# Sections (SECTIONS, default "s50k df pg20k pgdf"; each store is deleted once measured,
# unless KEEP=1; beside it, at most one copy at a time and the keys of the rows a prune
# deleted, which the script removes however it ends):
#   s50k   DIR/s50k.db, built once from the committed real-library fixtures (3,200 copies of
#          delta_k3's 8 threads, 3,000 of retention's 8: 49,600 threads, ~747,000
#          checkpoints, 1.8 GB) with scripts/gen_big_store.py;
#   df     DIR/df.db, DF_THREADS (default 1,000,000) tiny DeerFlow-shaped threads of
#          scripts/gen_short_threads.py (3 checkpoints each, one in five a 6-checkpoint thread
#          with a regenerate branch; every thread ends in a duration-only leaf);
#   pg20k  with PG_URL: a PostgreSQL database of PG_COPIES (default 1250) copies of delta_k3's
#          and retention's 8 threads (20,000) with scripts/gen_big_pg_store.py;
#   pgdf   with PG_URL: a PostgreSQL database of PG_THREADS (default 100,000) DeerFlow-shaped
#          threads of scripts/gen_short_threads.py.
# The SQLite floor is sqlite3 reading every checkpoint, metadata and write byte once; the
# PostgreSQL floor a binary \copy of the three tables. `prune --apply` runs once, on a fresh
# copy made just before (which leaves the copy in the page cache), timed with GNU time; on
# SQLite, its write floor is sqlite3 deleting the same rows from another fresh copy, in one
# transaction.
# Needs hyperfine, sqlite3, psql and GNU time. Prints markdown tables.
set -euo pipefail
cd "$(dirname "$0")/.."
D="${1:-/tmp/dfck-scale}"
SECTIONS="${SECTIONS:-s50k df pg20k pgdf}"
DFCK=target/release/dfck
PYTHON=${PYTHON:-.venv/bin/python}
OUT=$(mktemp -d)
CLEAN=()
cleanup() {
    rm -rf "$OUT"
    # The copies a section makes, whatever KEEP says.
    rm -f "$D"/work.db* "$D"/floor.db* "$D"/keys.db*
    [ "${KEEP:-0}" = 1 ] && return
    for c in "${CLEAN[@]}"; do eval "$c" || true; done
}
trap cleanup EXIT
cargo build --release -q
mkdir -p "$D"

# (verify exits 1 on error findings: the exit code is not the measurement.)
rss_mib() { { /usr/bin/time -f %M "$@" 2>&1 >/dev/null || true; } | tail -n 1 | awk '{printf "%.1f", $1/1024}'; }
mean() {
    hyperfine -i -w 1 -r 3 --export-json "$OUT/h.json" "$@" >/dev/null 2>&1
    python3 -c 'import json,sys; [print(r["mean"]) for r in json.load(open(sys.argv[1]))["results"]]' "$OUT/h.json"
}
# timed CMD...: one run's wall seconds and peak RSS (MiB), for runs that change the store.
timed() {
    { /usr/bin/time -f '%e %M' "$@" 2>&1 >/dev/null || true; } | tail -n 1 | awk '{printf "%s %.1f\n", $1, $2/1024}'
}
# row LABEL MEAN FLOOR RSS: one table row.
row() {
    python3 -c 'import sys; m,f=float(sys.argv[2]),float(sys.argv[3]); print(f"| `dfck {sys.argv[1]}` | {m:.2f} s | {m/f:.2f} | {sys.argv[4]} MiB |")' "$@"
}

# table TITLE FLOOR_LABEL FLOOR_CMD TARGET CMD...: the floor and each command against TARGET
# (hyperfine, warm), then each command's peak RSS; sets $floor.
table() {
    local title=$1 floor_label=$2 floor_cmd=$3 target=$4
    shift 4
    local cmds=("$@") args=("$floor_cmd") t i c rss
    for c in "${cmds[@]}"; do args+=("$DFCK --db $target $c"); done
    mapfile -t t < <(mean "${args[@]}")
    floor=${t[0]}
    echo
    echo "| $title | mean | ratio to the floor | peak RSS |"
    echo "|---|---|---|---|"
    printf '| %s (warm) | %.2f s | 1.00 | - |\n' "$floor_label" "$floor"
    for i in "${!cmds[@]}"; do
        c=${cmds[$i]}
        # shellcheck disable=SC2086
        rss=$(rss_mib $DFCK --db "$target" $c)
        row "$c" "${t[$((i+1))]}" "$floor" "$rss"
    done
}

# sqlite_section TITLE DB: the SQLite commands on DB, then prune --apply on a copy.
sqlite_section() {
    local db=$2
    # instr() must look at every byte; length() would not.
    local floor_cmd="sqlite3 $db \"SELECT sum(instr(checkpoint, x'c7c7c7c7c7')) + sum(instr(metadata, x'c7c7c7c7c7')) FROM checkpoints; SELECT sum(instr(value, x'c7c7c7c7c7')) FROM writes\""
    table "$1" "sqlite3 read floor" "$floor_cmd" "$db" \
        "inspect" "verify --format ndjson" "verify --format ndjson --jobs 2" \
        "prune --all --branches" "prune --all --branches --jobs 2"
    local w="$D/work.db" apply="prune --all --branches --apply" m rss
    # The copy's pages reach the disk before the timing: the first fsync of the run would
    # otherwise write the whole copy out.
    rm -f "$w" "$w-wal" "$w-shm" && cp "$db" "$w" && sync
    # shellcheck disable=SC2086
    read -r m rss < <(timed $DFCK --db "$w" $apply)
    row "$apply" "$m" "$floor" "$rss"
    write_floor "$db" "$w" "$m"
}

# write_floor DB PRUNED APPLY_SECONDS: the rows the prune deleted (DB's keys not in PRUNED,
# which is then deleted), deleted by sqlite3 from a fresh synced copy of DB in one
# transaction, set-based; a row with its ratio to the read floor and the apply's ratio to it.
# (A prune that makes new roots also rewrites rows; the floor only deletes.)
write_floor() {
    local db=$1 pruned=$2 m=$3 k="$D/keys.db" c="$D/floor.db" t
    rm -f "$k" "$c" "$c-wal" "$c-shm"
    sqlite3 "$k" "ATTACH '$db' AS o; ATTACH '$pruned' AS p;
        CREATE TABLE ck AS SELECT thread_id, checkpoint_ns, checkpoint_id FROM o.checkpoints
            EXCEPT SELECT thread_id, checkpoint_ns, checkpoint_id FROM p.checkpoints;
        CREATE TABLE wk AS SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM o.writes
            EXCEPT SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM p.writes;"
    rm -f "$pruned" "$pruned-wal" "$pruned-shm"
    cp "$db" "$c" && sync
    # dfck's SQLite leaves secure_delete off; Debian's sqlite3 turns it on.
    t=$({ /usr/bin/time -f %e sqlite3 "$c" "PRAGMA secure_delete = 0; ATTACH '$k' AS k; BEGIN;
        DELETE FROM main.checkpoints WHERE (thread_id, checkpoint_ns, checkpoint_id) IN (SELECT thread_id, checkpoint_ns, checkpoint_id FROM k.ck);
        DELETE FROM main.writes WHERE (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) IN (SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM k.wk);
        COMMIT;" 2>&1 >/dev/null; } | tail -n 1)
    rm -f "$k" "$c" "$c-wal" "$c-shm"
    python3 -c 'import sys; t,f,m=(max(float(a), 0.01) for a in sys.argv[1:]); print(f"| sqlite3 deleting the same rows, one transaction (write floor) | {t:.2f} s | {t/f:.2f} | - |"); print(f"| `--apply` to the write floor | | {m/t:.2f} | |")' "$t" "$floor" "$m"
}

# pg_section TITLE DBNAME: the PostgreSQL commands, then prune --apply on copies.
pg_section() {
    local name=$2
    local pgdb uri work
    pgdb=$("$PYTHON" -c 'import sys; from psycopg.conninfo import conninfo_to_dict, make_conninfo; print(make_conninfo(**{**conninfo_to_dict(sys.argv[1]), "dbname": sys.argv[2]}))' "$PG_URL" "$name")
    uri="${PG_URL%/*}/$name"
    work="${name}_work"
    local floor_cmd="for t in checkpoints checkpoint_blobs checkpoint_writes; do psql -X -q '$pgdb' -c \"\\\\copy \$t TO '/dev/null' WITH (FORMAT binary)\"; done"
    table "$1" "binary COPY of the three tables" "$floor_cmd" "$uri" \
        "inspect" "verify --format ndjson --jobs 1" "verify --format ndjson --jobs 2" \
        "prune --all --branches --jobs 1" "prune --all --branches --jobs 2"
    local jobs c m rss
    for jobs in 1 2; do
        psql -X -q "$PG_URL" -c "DROP DATABASE IF EXISTS $work" \
            -c "CREATE DATABASE $work TEMPLATE $name" >/dev/null
        c="prune --all --branches --apply --jobs $jobs"
        # shellcheck disable=SC2086
        read -r m rss < <(timed $DFCK --db "${PG_URL%/*}/$work" $c)
        row "$c" "$m" "$floor" "$rss"
    done
    psql -X -q "$PG_URL" -c "DROP DATABASE IF EXISTS $work" >/dev/null
}

for s in $SECTIONS; do
    case $s in
    s50k)
        DB="$D/s50k.db"
        CLEAN+=("rm -f '$DB' '$DB-wal' '$DB-shm'")
        if [ ! -f "$DB" ]; then
            python3 scripts/gen_big_store.py "$DB" fixtures/sqlite/delta_k3.db:3200 fixtures/sqlite/retention.db:3000 >&2
            sqlite3 "$DB" 'PRAGMA journal_mode=WAL' >/dev/null
        fi
        sqlite_section "SQLite, 49,600 short threads" "$DB"
        [ "${KEEP:-0}" = 1 ] || rm -f "$DB" "$DB-wal" "$DB-shm"
        ;;
    df)
        N=${DF_THREADS:-1000000}
        DB="$D/df.db"
        CLEAN+=("rm -f '$DB' '$DB-wal' '$DB-shm'")
        [ -f "$DB" ] || "$PYTHON" scripts/gen_short_threads.py --out "$DB" --threads "$N" >&2
        sqlite_section "SQLite, $N DeerFlow-shaped threads, $(du -h "$DB" | cut -f1)" "$DB"
        [ "${KEEP:-0}" = 1 ] || rm -f "$DB" "$DB-wal" "$DB-shm"
        ;;
    pg20k | pgdf)
        [ -n "${PG_URL:-}" ] || continue
        if [ "$s" = pg20k ]; then
            NAME=dfck_bench_short
            N=${PG_COPIES:-1250}
            "$PYTHON" scripts/gen_big_pg_store.py "$PG_URL" "$NAME" \
                fixtures/postgres/delta_k3.sql:"$N" fixtures/postgres/retention.sql:"$N" >&2
            TITLE="PostgreSQL, $((N * 16)) short threads"
        else
            NAME=dfck_bench_deerflow
            N=${PG_THREADS:-100000}
            "$PYTHON" scripts/gen_short_threads.py --pg-url "$PG_URL" --pg-db "$NAME" --threads "$N" >&2
            TITLE="PostgreSQL, $N DeerFlow-shaped threads"
        fi
        CLEAN+=("psql -X -q '$PG_URL' -c 'DROP DATABASE IF EXISTS $NAME' >/dev/null")
        pg_section "$TITLE" "$NAME"
        [ "${KEEP:-0}" = 1 ] || psql -X -q "$PG_URL" -c "DROP DATABASE IF EXISTS $NAME" >/dev/null
        ;;
    *)
        echo "unknown section $s" >&2
        exit 2
        ;;
    esac
done
