#!/usr/bin/env bash
# Reproduces benchmarks.md "Many short threads (issue #26, first step)": whole-store commands
# on a SQLite store of ~50,000 short threads, against the sqlite3 read floor measured in the
# same run (warm page cache: every command runs once before it is timed), with peak RSS.
#
#   scripts/bench-short-threads.sh [DIR]
#
# DIR (default /tmp/dfck-scale) receives s50k.db, built once from the committed real-library
# fixtures (3,200 copies of delta_k3's 8 threads, 3,000 of retention's 8: 49,600 threads,
# ~747,000 checkpoints, 1.8 GB) and deleted at the end unless KEEP=1. Needs hyperfine,
# sqlite3 and GNU time. Prints a markdown table. `prune --apply` runs once, on a fresh copy
# of the store made just before (which leaves the copy in the page cache).
#
# With PG_URL (a server, e.g. the one scripts/pg-test-server.sh starts) it also builds a
# PostgreSQL database of ~20,000 short threads (PG_COPIES copies of delta_k3's and of
# retention's 8 threads; default 1250: 20,000) with scripts/gen_big_pg_store.py, times the
# summary, verify and prune's dry run against a binary COPY of the three tables (warm: each
# runs once first) and drops the database at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
D="${1:-/tmp/dfck-scale}"
DB="$D/s50k.db"
DFCK=target/release/dfck
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"; [ "${KEEP:-0}" = 1 ] || rm -f "$DB" "$DB-wal" "$DB-shm"' EXIT
cargo build --release -q
mkdir -p "$D"
if [ ! -f "$DB" ]; then
    python3 scripts/gen_big_store.py "$DB" fixtures/sqlite/delta_k3.db:3200 fixtures/sqlite/retention.db:3000 >&2
    sqlite3 "$DB" 'PRAGMA journal_mode=WAL' >/dev/null
fi

# The floor: sqlite3 reading every checkpoint, metadata and write byte once (instr() must
# look at every byte; length() would not). Warm page cache: every command, the floor too,
# runs once before it is timed.
FLOOR="sqlite3 $DB \"SELECT sum(instr(checkpoint, x'c7c7c7c7c7')) + sum(instr(metadata, x'c7c7c7c7c7')) FROM checkpoints; SELECT sum(instr(value, x'c7c7c7c7c7')) FROM writes\""
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

cmds=(
    "inspect"
    "verify --format ndjson"
    "verify --format ndjson --jobs 2"
    "prune --all --branches"
)
args=("$FLOOR")
for c in "${cmds[@]}"; do args+=("$DFCK --db $DB $c"); done
mapfile -t t < <(mean "${args[@]}")
floor=${t[0]}
echo "| command | mean | ratio to the floor | peak RSS |"
echo "|---|---|---|---|"
printf '| sqlite3 read floor | %.2f s | 1.00 | - |\n' "$floor"
for i in "${!cmds[@]}"; do
    c=${cmds[$i]}
    # shellcheck disable=SC2086
    rss=$(rss_mib $DFCK --db "$DB" $c)
    row "$c" "${t[$((i+1))]}" "$floor" "$rss"
done
W="$D/s50k-work.db"
rm -f "$W" "$W-wal" "$W-shm" && cp "$DB" "$W"
APPLY="prune --all --branches --apply"
# shellcheck disable=SC2086
read -r m rss < <(timed $DFCK --db "$W" $APPLY)
row "$APPLY" "$m" "$floor" "$rss"
rm -f "$W" "$W-wal" "$W-shm"

[ -n "${PG_URL:-}" ] || exit 0
N=${PG_COPIES:-1250}
PYTHON=${PYTHON:-.venv/bin/python}
"$PYTHON" scripts/gen_big_pg_store.py "$PG_URL" dfck_bench_short \
    fixtures/postgres/delta_k3.sql:"$N" fixtures/postgres/retention.sql:"$N" >&2
PGDB=$("$PYTHON" -c 'import sys; from psycopg.conninfo import conninfo_to_dict, make_conninfo; print(make_conninfo(**{**conninfo_to_dict(sys.argv[1]), "dbname": "dfck_bench_short"}))' "$PG_URL")
PGURI="${PG_URL%/*}/dfck_bench_short"
trap 'rm -rf "$OUT"; [ "${KEEP:-0}" = 1 ] || { rm -f "$DB" "$DB-wal" "$DB-shm"; psql -X -q "$PG_URL" -c "DROP DATABASE IF EXISTS dfck_bench_short" >/dev/null; }' EXIT
PGFLOOR="for t in checkpoints checkpoint_blobs checkpoint_writes; do psql -X -q '$PGDB' -c \"\\\\copy \$t TO '/dev/null' WITH (FORMAT binary)\"; done"
pgcmds=(
    "inspect"
    "verify --format ndjson --jobs 1"
    "verify --format ndjson --jobs 2"
    "prune --all --branches --jobs 1"
    "prune --all --branches --jobs 2"
)
args=("$PGFLOOR")
for c in "${pgcmds[@]}"; do args+=("$DFCK --db $PGURI $c"); done
mapfile -t t < <(mean "${args[@]}")
floor=${t[0]}
echo
echo "| PostgreSQL command | mean | ratio to the floor | peak RSS |"
echo "|---|---|---|---|"
printf '| binary COPY of the three tables | %.2f s | 1.00 | - |\n' "$floor"
for i in "${!pgcmds[@]}"; do
    c=${pgcmds[$i]}
    # shellcheck disable=SC2086
    rss=$(rss_mib $DFCK --db "$PGURI" $c)
    row "$c" "${t[$((i+1))]}" "$floor" "$rss"
done
# prune --apply on a fresh copy of the database (CREATE DATABASE ... TEMPLATE, untimed).
PGW="${PG_URL%/*}/dfck_bench_short_work"
for jobs in 1 2; do
    psql -X -q "$PG_URL" -c "DROP DATABASE IF EXISTS dfck_bench_short_work" \
        -c "CREATE DATABASE dfck_bench_short_work TEMPLATE dfck_bench_short" >/dev/null
    c="prune --all --branches --apply --jobs $jobs"
    # shellcheck disable=SC2086
    read -r m rss < <(timed $DFCK --db "$PGW" $c)
    row "$c" "$m" "$floor" "$rss"
done
psql -X -q "$PG_URL" -c "DROP DATABASE IF EXISTS dfck_bench_short_work" >/dev/null
