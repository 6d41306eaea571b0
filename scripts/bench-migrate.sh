#!/usr/bin/env bash
# The migrate benchmark (benchmarks.md, issue #5): dfck converting every thread of a
# >= 100 MB delta store made by the real LangGraph vs Python LangGraph merely reading every
# checkpoint of the same threads with get_state.
#
#   scripts/bench-migrate.sh [PERF_DIR]      (default /tmp/dfck-perf)
#
# Needs PERF_DIR/delta_many.db (.venv/bin/python scripts/gen_perf_stores.py --out PERF_DIR
# --only delta_many, ~4 min), .venv with scripts/requirements.txt, target/release/dfck and
# GNU time (/usr/bin/time). Prints wall time, CPU time and peak RSS of both, bytes before/after.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-/tmp/dfck-perf}"
SRC="$DIR/delta_many.db"
[ -f "$SRC" ] || { echo "missing $SRC (see the header)" >&2; exit 2; }
T=$(mktemp -d "$DIR/bench-migrate.XXXXXX")
trap 'rm -rf "$T"' EXIT
cp "$SRC" "$T/store.db"

stat_of() { # file → "wall_s cpu_s rss_mib"
    awk -F': ' '/Elapsed/ {split($2, a, ":"); w = (length(a) == 3) ? a[1]*3600 + a[2]*60 + a[3] : a[1]*60 + a[2]}
                /User time/ {u = $2} /System time/ {s = $2}
                /Maximum resident/ {r = $2 / 1024}
                END {printf "%.1f %.1f %.0f", w, u + s, r}' "$1"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -v .venv/bin/python scripts/py_read_all_checkpoints.py "$T/store.db" --delta 10 \
    > "$T/py.json" 2> "$T/py.time"
read -r pw pc pr <<<"$(stat_of "$T/py.time")"
echo "python get_state of every checkpoint: wall ${pw} s, cpu ${pc} s, peak RSS ${pr} MiB; $(cat "$T/py.json")"

before=$(stat -c %s "$T/store.db")
/usr/bin/time -v target/release/dfck --db "$T/store.db" migrate delta-to-full --all --apply --format json \
    > "$T/dfck.json" 2> "$T/dfck.time"
read -r dw dc dr <<<"$(stat_of "$T/dfck.time")"
after=$(stat -c %s "$T/store.db")
conv=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["converted"], sum(t["checkpoints_rewritten"] for t in r["threads"]))' "$T/dfck.json")
echo "dfck migrate --apply: wall ${dw} s, cpu ${dc} s, peak RSS ${dr} MiB; threads converted + checkpoints rewritten: ${conv}"
echo "store bytes: before ${before}, after ${after}"
python3 -c "import sys; pw,pc,dw,dc=map(float,sys.argv[1:]); print(f'ratio python/dfck: wall {pw/dw:.1f}x, cpu {pc/dc:.1f}x')" "$pw" "$pc" "$dw" "$dc"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
