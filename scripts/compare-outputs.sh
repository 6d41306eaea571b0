#!/usr/bin/env bash
# Compares what two dfck binaries print: every command x every output format on every
# fixture store (SQLite, and PostgreSQL when TEST_POSTGRES_URI names the test server of
# scripts/pg-test-server.sh), diffing stdout, stderr and the exit code. Write commands run
# with --apply on fresh copies, at the same path for both binaries. Measured fields
# (durations, resident memory, timestamps, server process ids) are masked before the diff.
#
#   scripts/compare-outputs.sh BASE_BIN NEW_BIN [STEM ...]
#
# Prints one line per difference and a summary; exit 0 when there is none, 1 otherwise.
# Used for changes that must not change output (a refactoring, a speed-up).
set -euo pipefail
cd "$(dirname "$0")/.."

[[ $# -ge 2 ]] || { echo "usage: $0 BASE_BIN NEW_BIN [STEM ...]" >&2; exit 2; }
BASE=$(realpath "$1"); NEW=$(realpath "$2"); shift 2
[[ -x "$BASE" && -x "$NEW" ]] || { echo "compare-outputs: both binaries must be executable" >&2; exit 2; }

WORK=$(mktemp -d /tmp/dfck-compare.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# Both run under the name `dfck` (usage lines name the program as it was called).
mkdir -p "$WORK/bin-base" "$WORK/bin-new"
cp "$BASE" "$WORK/bin-base/dfck"; cp "$NEW" "$WORK/bin-new/dfck"
BASE="$WORK/bin-base/dfck"; NEW="$WORK/bin-new/dfck"
FORMATS=(table json ndjson csv)
diffs=0
runs=0

# Masks what differs from run to run: durations, rates, RSS, timestamps, pids, temp names,
# and the free space of the disk.
mask() {
    sed -E \
        -e 's/[0-9]+(\.[0-9]+)? ?(ms|µs|us|s|min)\b/<dur>/g' \
        -e 's/"(elapsed|duration|seconds|wall|rss|peak_rss|max_rss)[a-z_]*": ?[0-9.e+-]+/"\1": <m>/g' \
        -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(Z|[+-][0-9:]+)?/<ts>/g' \
        -e 's/server process [0-9]+/server process <pid>/g' \
        -e 's/\.dfck-[a-z]+-[A-Za-z0-9]+/.dfck-<tmp>/g' \
        -e 's/[0-9]+(\.[0-9]+)? MiB\/s/<rate>/g' \
        -e 's/"available_bytes": ?[0-9]+/"available_bytes": <free>/g' \
        -e '/[Aa]vailable|are free|free space|[0-9] free/ s/[0-9][0-9.,]*( ?[KMGT]i?B)?/<n>/g'
}

# run LABEL STORE_SETUP -- ARGS...: runs both binaries with the same arguments on the same
# path (STORE_SETUP is a command that recreates the store there first) and compares.
compare() {
    local label=$1 setup=$2; shift 2
    local out
    for which in base new; do
        local bin=$BASE
        [[ $which == new ]] && bin=$NEW
        rm -rf "$WORK/run"; mkdir -p "$WORK/run"
        eval "$setup"
        (cd "$WORK/run" && set +e; "$bin" "$@" >"$WORK/$which.out" 2>"$WORK/$which.err"; echo $? >"$WORK/$which.code")
        mask <"$WORK/$which.out" >"$WORK/$which.out.m"
        mask <"$WORK/$which.err" >"$WORK/$which.err.m"
    done
    runs=$((runs + 1))
    for part in out.m err.m code; do
        if ! cmp -s "$WORK/base.$part" "$WORK/new.$part"; then
            diffs=$((diffs + 1))
            echo "DIFF [$label] ${part%.m}: dfck $*"
            { diff <(head -c 4000 "$WORK/base.$part") <(head -c 4000 "$WORK/new.$part") || true; } \
                | head -n 8 | sed 's/^/    /'
        fi
    done
}

threads_of() { # the thread ids of a store, as the base binary lists them
    "$BASE" --db "$1" inspect --format ndjson 2>/dev/null \
        | sed -n 's/.*"thread_id":"\([^"]*\)".*/\1/p' | sort -u | head -n "${2:-3}"
}

sqlite_store() { # the commands on one SQLite file
    local src=$1 stem
    stem=$(basename "$src" .db)
    local db="$WORK/run/$stem.db" setup="cp '$src' '$WORK/run/$stem.db'"
    local t
    mapfile -t ts < <(threads_of "$src")
    for f in "${FORMATS[@]}"; do
        compare "$stem" "$setup" --db "$db" inspect --format "$f"
        compare "$stem" "$setup" --db "$db" verify --format "$f"
        compare "$stem" "$setup" --db "$db" prune --all --format "$f"
        compare "$stem" "$setup" --db "$db" prune --all --branches --keep-last-turns 2 --format "$f"
        compare "$stem" "$setup" --db "$db" migrate delta-to-full --all --format "$f"
        compare "$stem" "$setup" --db "$db" migrate full-to-delta --all --format "$f"
        compare "$stem" "$setup" --db "$db" reclaim --format "$f"
        compare "$stem" "$setup" --db "$db" copy --all --to "$WORK/run/copy.db" --format "$f"
        for t in "${ts[@]}"; do
            compare "$stem" "$setup" --db "$db" inspect "$t" --format "$f"
            compare "$stem" "$setup" --db "$db" inspect "$t" --state --format "$f"
            compare "$stem" "$setup" --db "$db" lineage "$t" --tree --format "$f"
        done
    done
    # The store summary's metrics (inspect alone has them).
    compare "$stem" "$setup" --db "$db" inspect --format openmetrics
    # Writes, on fresh copies at the same path.
    compare "$stem" "$setup" --db "$db" prune --all --branches --apply --format json
    compare "$stem" "$setup" --db "$db" migrate delta-to-full --all --apply --accept-delta-view --format json
    compare "$stem" "$setup" --db "$db" migrate full-to-delta --all --apply --format json
    compare "$stem" "$setup" --db "$db" copy --all --to "$WORK/run/copy.db" --apply --format json
    compare "$stem" "$setup" --db "$db" reclaim --apply --format json
    compare "$stem" "$setup" --db "$db" prune --all --apply
}

pg_store() { # read commands and dry runs on one fixture database of the test server
    local url=$1 stem=$2 f t
    mapfile -t ts < <(threads_of "$url")
    for f in "${FORMATS[@]}"; do
        compare "pg $stem" ":" --db "$url" inspect --format "$f"
        compare "pg $stem" ":" --db "$url" verify --format "$f"
        compare "pg $stem" ":" --db "$url" prune --all --branches --format "$f"
        compare "pg $stem" ":" --db "$url" migrate delta-to-full --all --format "$f"
        compare "pg $stem" ":" --db "$url" migrate full-to-delta --all --format "$f"
        compare "pg $stem" ":" --db "$url" reclaim --format "$f"
        for t in "${ts[@]}"; do
            compare "pg $stem" ":" --db "$url" inspect "$t" --state --format "$f"
            compare "pg $stem" ":" --db "$url" lineage "$t" --tree --format "$f"
        done
    done
    compare "pg $stem" ":" --db "$url" inspect --format openmetrics
}

stems=("$@")
for src in fixtures/sqlite/*.db fixtures/defects/*.db; do
    stem=$(basename "$src" .db)
    if [[ ${#stems[@]} -gt 0 ]] && [[ ! " ${stems[*]} " == *" $stem "* ]]; then continue; fi
    sqlite_store "$(realpath "$src")"
done
for code in $("$BASE" explain --format ndjson 2>/dev/null | sed -n 's/.*"code":"\([^"]*\)".*/\1/p' | sort -u); do
    compare "explain" ":" explain "$code"
done
compare "help" ":" --help
if [[ -n "${TEST_POSTGRES_URI:-}" ]]; then
    base_url=${TEST_POSTGRES_URI%/*}
    for sql in fixtures/postgres/*.sql; do
        stem=$(basename "$sql" .sql)
        if [[ ${#stems[@]} -gt 0 ]] && [[ ! " ${stems[*]} " == *" $stem "* ]]; then continue; fi
        pg_store "$base_url/dfck_$stem" "$stem"
    done
fi
echo "compare-outputs: $runs command runs, $diffs difference(s)"
[[ $diffs -eq 0 ]]
