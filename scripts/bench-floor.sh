#!/usr/bin/env bash
# Reproduces benchmarks.md "Speed near the floor (issue #18)": every row in one run, each
# dfck command next to its floor or peer, ratios and peak RSS. Prints markdown tables.
#
#   scripts/bench-floor.sh [PERF_DIR] [PG_URL]
#
# PERF_DIR (default /tmp/dfck-perf) holds, written by the real LangGraph:
#   .venv/bin/python scripts/gen_perf_stores.py --out PERF_DIR            # delta_1k, delta_10k, full_400mb
#   python3 scripts/gen_big_store.py PERF_DIR/big.db PERF_DIR/full_400mb.db:8 PERF_DIR/delta_10k.db:1
# PG_URL (optional) names a database holding the 10,000-message delta thread:
#   .venv/bin/python scripts/gen_perf_stores.py --pg-url URL --pg-db dfck_perf --only delta_10k_pg
# Needs hyperfine, sqlite3, psql and GNU time (apt-get install hyperfine sqlite3 time
# postgresql-client), and the venv for the Python rows. Run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
D="${1:-/tmp/dfck-perf}"
PG="${2:-}"
DFCK=target/release/dfck
PY=.venv/bin/python
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cargo build --release -q

SCAN="SELECT sum(instr(checkpoint, x'c7c7c7c7c7')) FROM checkpoints"
rss_mib() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n 1 | awk '{printf "%.1f", $1/1024}'; }
mean() { # runs command... -> mean seconds of each, one per line (one hyperfine session)
    local runs=$1; shift
    hyperfine -N -w 1 -r "$runs" --export-json "$OUT/h.json" "$@" >/dev/null 2>&1
    "$PY" -c 'import json,sys; [print(r["mean"]) for r in json.load(open(sys.argv[1]))["results"]]' "$OUT/h.json"
}
fmt() { "$PY" -c 'import sys; v=float(sys.argv[1]); print(f"{v*1000:.1f} ms" if v < 1 else f"{v:.2f} s")' "$1"; }
ratio() { "$PY" -c 'import sys; print(f"{float(sys.argv[1])/float(sys.argv[2]):.2f}")' "$1" "$2"; }

echo "## verify against the sqlite3 scan (warm page cache)"
echo
echo "| store | largest thread (checkpoints) | sqlite3 scan | dfck verify | ratio | dfck --jobs 2 | ratio | dfck peak RSS |"
echo "|---|---|---|---|---|---|---|---|"
for s in full_400mb:1500 delta_1k:1500 delta_10k:15000 big:15000; do
    db="$D/${s%%:*}.db"
    [ -f "$db" ] || continue
    cat "$db" >/dev/null
    runs=7; [ "${s%%:*}" = big ] && runs=3
    mapfile -t t < <(mean "$runs" "sqlite3 -readonly $db \"$SCAN\"" "$DFCK --db $db verify" "$DFCK --db $db verify --jobs 2")
    echo "| ${s%%:*} ($(du -m "$db" | cut -f1) MB) | ${s##*:} | $(fmt "${t[0]}") | $(fmt "${t[1]}") | $(ratio "${t[1]}" "${t[0]}") | $(fmt "${t[2]}") | $(ratio "${t[2]}" "${t[0]}") | $(rss_mib $DFCK --db "$db" verify) MiB |"
done

echo
echo "## inspect THREAD --state against Python's in-process cold get_state"
echo
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
py_cold() {
    for _ in 1 2 3 4 5 6 7; do
        "$PY" scripts/py_cold_get_state.py "$1" "$2" --delta 10 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["seconds"])'
    done | median
}
echo "| case | Python cold get_state (median of 7) | dfck whole process (mean of 30) | Python/dfck | dfck peak RSS | dfck --version |"
echo "|---|---|---|---|---|---|"
for t in delta_1k:t-delta-1k delta_10k:t-delta-10k; do
    db="$D/${t%%:*}.db"; th="${t##*:}"
    p=$(py_cold "$db" "$th")
    mapfile -t d < <(mean 30 "$DFCK inspect --db $db $th --state --format json" "$DFCK --version")
    echo "| sqlite ${t%%:*} | $(fmt "$p") | $(fmt "${d[0]}") | $(ratio "$p" "${d[0]}")x | $(rss_mib $DFCK inspect --db "$db" "$th" --state --format json) MiB | $(fmt "${d[1]}") |"
done

if [ -n "$PG" ]; then
    echo
    echo "## PostgreSQL verify of the 10,000-message delta thread against psql fetching its rows"
    echo
    T="thread_id = 't-delta-10k'"
    Q1="\\copy (SELECT blob FROM checkpoint_blobs WHERE $T) TO '/dev/null' WITH (FORMAT binary)"
    Q2="\\copy (SELECT checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints WHERE $T) TO '/dev/null' WITH (FORMAT binary)"
    Q3="\\copy (SELECT * FROM checkpoint_writes WHERE $T) TO '/dev/null' WITH (FORMAT binary)"
    printf '#!/bin/sh\npsql "%s" -q -X -c "%s" -c "%s" -c "%s"\n' "$PG" "$Q1" "$Q2" "$Q3" > "$OUT/floor.sh"
    mapfile -t t < <(mean 5 "sh $OUT/floor.sh" "$DFCK --db $PG verify" "$DFCK --db $PG verify --jobs 2")
    echo "| psql binary COPY of the thread's blobs, checkpoints and writes | dfck verify | ratio | dfck --jobs 2 | ratio | dfck peak RSS |"
    echo "|---|---|---|---|---|---|"
    echo "| $(fmt "${t[0]}") | $(fmt "${t[1]}") | $(ratio "${t[1]}" "${t[0]}") | $(fmt "${t[2]}") | $(ratio "${t[2]}" "${t[0]}") | $(rss_mib $DFCK --db "$PG" verify) MiB |"
fi

echo
echo "## bench production, 2,000 turns, delta at cadence 10"
echo
mkdir -p "$OUT/prod"
/usr/bin/time -f "%e %M" -o "$OUT/prod.time" env TMPDIR="$OUT/prod" \
    $DFCK bench production --turns 2000 --modes delta --snapshot-frequencies 10 --repetitions 1 \
    --output "$OUT/prod/rows.jsonl" --timeout-seconds 3600 >/dev/null 2>&1
read -r wall rss < "$OUT/prod.time"
echo "| wall | peak RSS (the case's child included) |"
echo "|---|---|"
echo "| $(fmt "$wall") | $(awk -v r="$rss" 'BEGIN {printf "%.0f", r/1024}') MiB |"

echo
echo "## write commands against the sqlite3 scan of the same store"
echo
echo "| command | store | dfck | sqlite3 scan | ratio | peak RSS |"
echo "|---|---|---|---|---|---|"
FULL="$D/full_400mb.db"
cp "$FULL" "$OUT/f2d.db"
scan=$(mean 3 "sqlite3 -readonly $FULL \"$SCAN\"")
/usr/bin/time -f "%e %M" -o "$OUT/f2d.time" $DFCK --db "$OUT/f2d.db" migrate full-to-delta --all --apply >/dev/null 2>&1
read -r wall rss < "$OUT/f2d.time"
echo "| migrate full-to-delta --all --apply | full_400mb ($(du -m "$FULL" | cut -f1) MB) | $(fmt "$wall") | $(fmt "$scan") | $(ratio "$wall" "$scan") | $(awk -v r="$rss" 'BEGIN {printf "%.0f", r/1024}') MiB |"
cp "$FULL" "$OUT/prune.db"
/usr/bin/time -f "%e %M" -o "$OUT/prune.time" $DFCK --db "$OUT/prune.db" prune --all --keep-last-turns 100 --apply >/dev/null 2>&1
read -r wall rss < "$OUT/prune.time"
echo "| prune --all --keep-last-turns 100 --apply | full_400mb | $(fmt "$wall") | $(fmt "$scan") | $(ratio "$wall" "$scan") | $(awk -v r="$rss" 'BEGIN {printf "%.0f", r/1024}') MiB |"
/usr/bin/time -f "%e %M" -o "$OUT/copy.time" $DFCK --db "$FULL" copy --all --to "$OUT/copy.db" --apply >/dev/null 2>&1
read -r wall rss < "$OUT/copy.time"
echo "| copy --all --to new.db --apply | full_400mb | $(fmt "$wall") | $(fmt "$scan") | $(ratio "$wall" "$scan") | $(awk -v r="$rss" 'BEGIN {printf "%.0f", r/1024}') MiB |"
