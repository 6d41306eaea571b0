#!/usr/bin/env bash
# Giant full-mode threads (issue #26): one thread of each size in SIZES (MB of file), written
# by the real LangGraph (scripts/gen_giant_thread.py), then on each:
#   - the floor: sqlite3 reading every checkpoint byte once, warm cache (read once before);
#   - dfck prune --all --keep-last-turns 100 --apply, on a copy;
#   - dfck copy --all --to new.db --apply, then the real library reads a sample of the copy's
#     checkpoints back and continues the thread (gen_giant_thread.py --check --mode full);
#   - dfck migrate full-to-delta --all --apply, in place, then the real library reads a
#     sample of checkpoints back and continues the thread (gen_giant_thread.py --check).
# Prints one markdown table row per command; each store is deleted once measured (at most
# two copies of the largest exist at a time: ~2 x 8 GB with the default sizes).
# Run it from a clean build: `cargo build --release` first. With PG_URL (a server URL, e.g. the
# test server of scripts/pg-test-server.sh), the first size is also copied into a PostgreSQL
# database and measured there, against a binary COPY of the three tables (warm), each result
# read back by the real PostgresSaver.
#
#   scripts/bench-giant-thread.sh                  # SIZES="428 2048 4096 8192"
#   SIZES="428" DIR=/tmp/dfck-giant scripts/bench-giant-thread.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DFCK=${DFCK:-target/release/dfck}
PG_URL=${PG_URL:-}
PY=${PY:-.venv/bin/python}
DIR=${DIR:-/tmp/dfck-giant}
SIZES=${SIZES:-"428 2048 4096 8192"}
mkdir -p "$DIR"

# Runs a command under /usr/bin/time; prints "WALL_S PEAK_KB". Exit 1 (a report with
# refusals) is a result; any other failure stops the run.
measure() {
    /usr/bin/time -f "%e %M" -o "$DIR/time" "$@" >"$DIR/out" 2>"$DIR/err" || [ $? -eq 1 ] \
        || { cat "$DIR/err" >&2; exit 1; }
    tail -1 "$DIR/time"
}

row() { # size label wall kb floor
    awk -v s="$1" -v l="$2" -v w="$3" -v k="$4" -v f="$5" -v m="$6" -v c="$7" \
        'BEGIN { printf "| %s MB | %s | %s | %.2f s | %s | %.2f s | %.2f× | %.1f MiB |\n", s, m, c, f, l, w, w / f, k / 1024 }'
}

SCHEMA=$(sqlite3 "$(dirname "$0")/../fixtures/sqlite/full.db" .schema)
# pg_section MB DB MSGS CKS: the thread of DB copied into database dfck_giant, then prune, copy
# and full-to-delta there (each on a database of its own), each read back.
pg_section() {
    local base=${PG_URL%/*} g
    fresh() { psql -X -q "$PG_URL" -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1 ${2:+TEMPLATE $2}" 2>/dev/null; }
    g="$base/dfck_giant"
    fresh dfck_giant
    "$DFCK" --db "$2" copy --all --to "$g" --apply >/dev/null
    local floor_cmd="for t in checkpoints checkpoint_blobs checkpoint_writes; do psql -X -q '$g' -c \"\\\\copy \$t TO '/dev/null' WITH (FORMAT binary)\"; done"
    bash -c "$floor_cmd"
    r=$(measure bash -c "$floor_cmd"); read -r pfloor _ <<<"$r"
    fresh dfck_giant_p dfck_giant
    r=$(measure "$DFCK" --db "$base/dfck_giant_p" prune --all --keep-last-turns 100 --apply); read -r w k <<<"$r"
    row "$1" "PostgreSQL: prune --keep-last-turns 100 --apply" "$w" "$k" "$pfloor" "$3" "$4"
    echo "<!-- read back: $("$PY" scripts/gen_giant_thread.py --check "$base/dfck_giant_p" --mode full) -->"
    fresh dfck_giant_c
    r=$(measure "$DFCK" --db "$g" copy --all --to "$base/dfck_giant_c" --apply); read -r w k <<<"$r"
    row "$1" "PostgreSQL: copy --to another database --apply" "$w" "$k" "$pfloor" "$3" "$4"
    echo "<!-- read back: $("$PY" scripts/gen_giant_thread.py --check "$base/dfck_giant_c" --mode full) -->"
    fresh dfck_giant_d dfck_giant
    r=$(measure "$DFCK" --db "$base/dfck_giant_d" migrate full-to-delta --all --apply); read -r w k <<<"$r"
    row "$1" "PostgreSQL: migrate full-to-delta --apply" "$w" "$k" "$pfloor" "$3" "$4"
    echo "<!-- read back: $("$PY" scripts/gen_giant_thread.py --check "$base/dfck_giant_d") -->"
    for d in dfck_giant dfck_giant_p dfck_giant_c dfck_giant_d; do
        psql -X -q "$PG_URL" -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" 2>/dev/null
    done
}

FLOOR_SQL="SELECT sum(instr(checkpoint, x'c7c7c7c7c7')) FROM checkpoints"
echo "| file | messages | checkpoints | floor (sqlite3, warm) | command | wall | ratio | peak RSS |"
echo "|---|---|---|---|---|---|---|---|"
for mb in $SIZES; do
    db="$DIR/g$mb.db"
    "$PY" scripts/gen_giant_thread.py --out "$db" --target-mb "$mb" >"$DIR/gen.json"
    msgs=$(python3 -c "import json; print(json.load(open('$DIR/gen.json'))['messages'])")
    cks=$(python3 -c "import json; print(json.load(open('$DIR/gen.json'))['checkpoints'])")
    sqlite3 "$db" "$FLOOR_SQL" >/dev/null
    r=$(measure sqlite3 "$db" "$FLOOR_SQL")
    read -r floor _ <<<"$r"

    cp "$db" "$DIR/p.db"
    r=$(measure "$DFCK" --db "$DIR/p.db" prune --all --keep-last-turns 100 --apply --format json)
    read -r w k <<<"$r"
    deleted=$(python3 -c "import json; print(json.load(open('$DIR/out'))['checkpoints'])")
    row "$mb" "prune --keep-last-turns 100 --apply ($deleted deleted)" "$w" "$k" "$floor" "$msgs" "$cks"
    rm -f "$DIR"/p.db*

    # For reference: SQLite copying the same rows into a fresh WAL-mode file by itself.
    rm -f "$DIR"/c.db*
    sqlite3 "$DIR/c.db" "PRAGMA journal_mode=WAL; $SCHEMA" >/dev/null
    r=$(measure sqlite3 "$DIR/c.db" "ATTACH '$db' AS s; INSERT INTO checkpoints SELECT * FROM s.checkpoints; INSERT INTO writes SELECT * FROM s.writes;")
    read -r w k <<<"$r"
    row "$mb" "(reference) sqlite3 INSERT … SELECT into a new WAL file" "$w" "$k" "$floor" "$msgs" "$cks"
    rm -f "$DIR"/c.db*

    rm -f "$DIR"/new.db*
    r=$(measure "$DFCK" --db "$db" copy --all --to "$DIR/new.db" --apply --format json)
    read -r w k <<<"$r"
    copied=$(python3 -c "import json; print(json.load(open('$DIR/out'))['checkpoints'])")
    row "$mb" "copy --to new.db --apply ($copied copied)" "$w" "$k" "$floor" "$msgs" "$cks"
    "$PY" scripts/gen_giant_thread.py --check "$DIR/new.db" --mode full >"$DIR/check.json"
    echo "<!-- $mb MB copy read back: $(cat "$DIR/check.json") -->"
    rm -f "$DIR"/new.db*

    if [ -n "$PG_URL" ] && [ "$mb" = "${SIZES%% *}" ]; then
        pg_section "$mb" "$db" "$msgs" "$cks"
    fi

    r=$(measure "$DFCK" --db "$db" migrate full-to-delta --all --apply --format json)
    read -r w k <<<"$r"
    rewritten=$(python3 -c "import json; print(json.load(open('$DIR/out'))['threads'][0]['checkpoints_rewritten'])")
    row "$mb" "migrate full-to-delta --apply ($rewritten rewritten)" "$w" "$k" "$floor" "$msgs" "$cks"
    "$PY" scripts/gen_giant_thread.py --check "$db" >"$DIR/check.json"
    echo "<!-- $mb MB read back: $(cat "$DIR/check.json") -->"
    rm -f "$db"*
done
