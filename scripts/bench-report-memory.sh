#!/usr/bin/env bash
# Peak RSS of whole-store reports by output format, before and after (issue #26): on a SQLite
# store of N DeerFlow-shaped short threads (scripts/gen_short_threads.py; every thread has a
# duration-only leaf, so `verify` has ~1.4 findings a thread), each command in each format
# runs once with OLD and once with NEW under GNU time; their stdout must be byte-identical.
# (`copy` is a dry run into a target that does not exist.)
# The floor of each command is its `--format ndjson` run with NEW (a format that writes each
# row as it comes), measured in the same run; ratios are to it. Warm cache (the store was just
# written, and each command runs once before it is measured). Prints a markdown table.
# usage: N=200000 scripts/bench-report-memory.sh OLD_BIN NEW_BIN [DIR]
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: N=... $0 OLD_BIN NEW_BIN [DIR]" >&2; exit 2; }
cd "$(dirname "$0")/.."
OLD=$1; NEW=$2; D=${3:-/tmp/dfck-report-memory}; N=${N:-200000}
PYTHON=${PYTHON:-.venv/bin/python}
mkdir -p "$D"; DB="$D/df.db"; W=$(mktemp -d)
trap 'rm -rf "$W" "$DB" "$DB-wal" "$DB-shm"' EXIT
rm -f "$DB" "$DB-wal" "$DB-shm"
"$PYTHON" scripts/gen_short_threads.py --out "$DB" --threads "$N" >&2
# rss BIN ARGS...: peak RSS in MiB; stdout to $W/out, stderr to $W/err. A run that fails
# (exit 2 or worse; verify exits 1 on error findings) stops the script.
rss() {
    local rc=0
    /usr/bin/time -o "$W/time" -f %M "$@" >"$W/out" 2>"$W/err" || rc=$?
    if [ "$rc" -gt 1 ]; then
        echo "failed ($rc): $*" >&2
        cat "$W/err" >&2
        exit 1
    fi
    tail -n 1 "$W/time" | awk '{printf "%.0f", $1/1024}'
}
echo "| Command ($N threads) | format | before | after | after / ndjson floor |"
echo "|---|---|---|---|---|"
for cmd in "inspect" "verify" "prune --all --branches" "migrate delta-to-full --all" \
    "copy --all --to $D/target.db"; do
    # shellcheck disable=SC2086
    "$NEW" --db "$DB" $cmd --format ndjson >/dev/null || true
    # shellcheck disable=SC2086
    floor=$(rss "$NEW" --db "$DB" $cmd --format ndjson)
    for fmt in table json csv; do
        # shellcheck disable=SC2086
        before=$(rss "$OLD" --db "$DB" $cmd --format "$fmt"); mv "$W/out" "$W/old"
        # shellcheck disable=SC2086
        after=$(rss "$NEW" --db "$DB" $cmd --format "$fmt")
        cmp -s "$W/old" "$W/out" || echo "outputs differ: $cmd --format $fmt" >&2
        python3 -c 'import sys; b,a,f=map(float,sys.argv[3:]); print(f"| `dfck {sys.argv[1]}` | {sys.argv[2]} | {b:.0f} MiB | {a:.0f} MiB | {a/f:.2f} |")' \
            "$cmd" "$fmt" "$before" "$after" "$floor"
    done
done
