#!/usr/bin/env bash
# Interleaved before/after timing of a write command on PostgreSQL (CMD, by default
# `prune --all --branches --apply`): N rounds of (the floor: a binary \copy of the three
# tables of TEMPLATE; then OLD and NEW with each --jobs of JOBS, "1 2" by default, each on a
# fresh CREATE DATABASE ... TEMPLATE), medians printed, and the two binaries' reports
# compared. PG_URL: a server URL without a database name.
# usage: PG_URL=postgresql://u:p@host:port N=3 TEMPLATE=prof20k scripts/bench-pg-apply-ab.sh OLD NEW
#        CMD="migrate full-to-delta --all --apply" JOBS=1 TEMPLATE=dfck_giant ... OLD NEW
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: PG_URL=... $0 OLD_BIN NEW_BIN" >&2; exit 2; }
P=${PG_URL:?set PG_URL}; T=${TEMPLATE:-prof20k}; N=${N:-3}; OLD=$1; NEW=$2
read -r -a CMD <<<"${CMD:-prune --all --branches --apply}"; JOBS=${JOBS:-1 2}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
now() { date +%s.%N; }
declare -A times
for _ in $(seq "$N"); do
    s=$(now)
    for t in checkpoints checkpoint_blobs checkpoint_writes; do
        psql -X -q "$P/$T" -c "\\copy $t TO '/dev/null' WITH (FORMAT binary)"
    done
    times[floor]+="$(echo "$(now) - $s" | bc) "
    for j in $JOBS; do
        for b in OLD NEW; do
            psql -X -q "$P/postgres" -c "DROP DATABASE IF EXISTS dfck_ab" \
                -c "CREATE DATABASE dfck_ab TEMPLATE $T" 2>/dev/null
            s=$(now)
            "${!b}" "${CMD[@]}" --db "$P/dfck_ab" --jobs "$j" --format json >"$W/$b.json"
            times[$b$j]+="$(echo "$(now) - $s" | bc) "
        done
        cmp -s "$W/OLD.json" "$W/NEW.json" || echo "reports differ (--jobs $j)"
    done
done
psql -X -q "$P/postgres" -c "DROP DATABASE IF EXISTS dfck_ab"
for k in floor $(for j in $JOBS; do echo "OLD$j NEW$j"; done); do
    echo "$k ${times[$k]}" | python3 -c "
import sys, statistics
p = sys.stdin.read().split()
print(f'{p[0]}: median {statistics.median(map(float, p[1:])):.2f} s', p[1:])"
done
