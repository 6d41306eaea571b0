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
# Run it from a clean build: `cargo build --release` first.
#
#   scripts/bench-giant-thread.sh                  # SIZES="428 2048 4096 8192"
#   SIZES="428" DIR=/tmp/dfck-giant scripts/bench-giant-thread.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DFCK=${DFCK:-target/release/dfck}
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

    r=$(measure "$DFCK" --db "$db" migrate full-to-delta --all --apply --format json)
    read -r w k <<<"$r"
    rewritten=$(python3 -c "import json; print(json.load(open('$DIR/out'))['threads'][0]['checkpoints_rewritten'])")
    row "$mb" "migrate full-to-delta --apply ($rewritten rewritten)" "$w" "$k" "$floor" "$msgs" "$cks"
    "$PY" scripts/gen_giant_thread.py --check "$db" >"$DIR/check.json"
    echo "<!-- $mb MB read back: $(cat "$DIR/check.json") -->"
    rm -f "$db"*
done
