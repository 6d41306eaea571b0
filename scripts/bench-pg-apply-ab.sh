#!/usr/bin/env bash
# Interleaved before/after timing of `prune --all --branches --apply` on PostgreSQL:
# N rounds of (the floor: a binary \copy of the three tables of TEMPLATE; then OLD and NEW
# with --jobs 1 and 2, each on a fresh CREATE DATABASE ... TEMPLATE), medians printed, and
# the two binaries' reports compared. PG_URL: a server URL without a database name.
# usage: PG_URL=postgresql://u:p@host:port N=3 TEMPLATE=prof20k scripts/bench-pg-apply-ab.sh OLD NEW
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: PG_URL=... $0 OLD_BIN NEW_BIN" >&2; exit 2; }
P=${PG_URL:?set PG_URL}; T=${TEMPLATE:-prof20k}; N=${N:-3}; OLD=$1; NEW=$2
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
now() { date +%s.%N; }
declare -A times
for _ in $(seq "$N"); do
    s=$(now)
    for t in checkpoints checkpoint_blobs checkpoint_writes; do
        psql -X -q "$P/$T" -c "\\copy $t TO '/dev/null' WITH (FORMAT binary)"
    done
    times[floor]+="$(echo "$(now) - $s" | bc) "
    for j in 1 2; do
        for b in OLD NEW; do
            psql -X -q "$P/postgres" -c "DROP DATABASE IF EXISTS dfck_ab" \
                -c "CREATE DATABASE dfck_ab TEMPLATE $T" 2>/dev/null
            s=$(now)
            "${!b}" prune --db "$P/dfck_ab" --all --branches --apply --jobs "$j" --format json >"$W/$b.json"
            times[$b$j]+="$(echo "$(now) - $s" | bc) "
        done
        cmp -s "$W/OLD.json" "$W/NEW.json" || echo "reports differ (--jobs $j)"
    done
done
psql -X -q "$P/postgres" -c "DROP DATABASE IF EXISTS dfck_ab"
for k in floor OLD1 NEW1 OLD2 NEW2; do
    echo "$k ${times[$k]}" | python3 -c "
import sys, statistics
p = sys.stdin.read().split()
print(f'{p[0]}: median {statistics.median(map(float, p[1:])):.2f} s', p[1:])"
done
