#!/usr/bin/env bash
# Reproduces the inspect numbers in benchmarks.md: dfck's whole process vs Python's
# in-process cold get_state, dfck's store summary vs sqlite3's GROUP BY, and peak RSS.
#
#   scripts/bench-inspect.sh [PERF_DIR] [PG_URL]
#
# PERF_DIR (default /tmp/dfck-perf) holds the stores written by
#   .venv/bin/python scripts/gen_perf_stores.py --out PERF_DIR
# (delta_1k.db, delta_10k.db: DeltaChannel K=10; full_400mb.db: full mode, 551 MB).
# PG_URL, if given, is a database holding the same 10k-message thread, written by
#   .venv/bin/python scripts/gen_perf_stores.py --pg-url URL --pg-db dfck_perf --only delta_10k_pg
# Needs hyperfine, sqlite3 and GNU time (apt-get install hyperfine sqlite3 time), the venv.
set -euo pipefail
cd "$(dirname "$0")/.."
D="${1:-/tmp/dfck-perf}"
PG="${2:-}"
DFCK=target/release/dfck
PY=.venv/bin/python
cargo build --release -q

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

py_cold() { # db-or-url thread -> median seconds over 7 runs
    for _ in 1 2 3 4 5 6 7; do
        "$PY" scripts/py_cold_get_state.py "$1" "$2" --delta 10 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["seconds"])'
    done | median
}

dfck_mean() { # command -> mean seconds (hyperfine, 30 runs)
    hyperfine -N --warmup 3 --runs 30 --export-json /tmp/dfck-bench.json "$1" >/dev/null 2>&1
    "$PY" -c 'import json; print(json.load(open("/tmp/dfck-bench.json"))["results"][0]["mean"])'
}

rss_kib() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n 1; }

row() { # label python-seconds dfck-seconds rss
    "$PY" -c 'import sys; l,p,d,r=sys.argv[1:]; p=float(p); d=float(d); print(f"| {l} | {p*1000:.1f} ms | {d*1000:.1f} ms | {p/d:.1f}x | {int(r)/1024:.1f} MiB |")' "$@"
}

echo "| case | Python cold get_state | dfck whole process | ratio | dfck peak RSS |"
echo "|---|---|---|---|---|"
for t in delta_1k:t-delta-1k delta_10k:t-delta-10k; do
    db="$D/${t%%:*}.db"; th="${t##*:}"
    cmd="$DFCK inspect --db $db $th --state --format json"
    row "sqlite ${t%%:*} --state" "$(py_cold "$db" "$th")" "$(dfck_mean "$cmd")" "$(rss_kib $cmd)"
done
if [ -n "$PG" ]; then
    cmd="$DFCK inspect --db $PG t-delta-10k --state --format json"
    row "postgres delta_10k --state" "$(py_cold "$PG" t-delta-10k)" "$(dfck_mean "$cmd")" "$(rss_kib $cmd)"
fi

echo
FULL="$D/full_400mb.db"
Q="SELECT thread_id, count(*), sum(length(checkpoint)), sum(length(metadata)), max(json_extract(metadata,'\$.step')) FROM checkpoints GROUP BY thread_id"
cat "$FULL" >/dev/null   # warm page cache
s=$(dfck_mean "sqlite3 -readonly $FULL \"$Q\"")
d=$(dfck_mean "$DFCK inspect --db $FULL --format json")
echo "| summary of $(du -m "$FULL" | cut -f1) MB full-mode store | sqlite3 GROUP BY | dfck inspect | dfck/sqlite3 | dfck peak RSS |"
echo "|---|---|---|---|---|"
"$PY" -c 'import sys; s,d,r=map(float,sys.argv[1:]); print(f"| warm page cache | {s*1000:.1f} ms | {d*1000:.1f} ms | {d/s:.2f} | {r/1024:.1f} MiB |")' \
    "$s" "$d" "$(rss_kib $DFCK inspect --db "$FULL" --format json)"
