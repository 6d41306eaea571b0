#!/usr/bin/env bash
# Checks the files for running `dfck maintain` unattended (docs/operations.md):
#   - contrib/systemd: each unit passes `systemd-analyze verify` (a temporary copy whose
#     ExecStart names an existing binary), runs `dfck maintain --apply`, reads its credentials
#     from an EnvironmentFile and is hardened; the timer starts an existing service;
#   - contrib/kubernetes/dfck-maintain-cronjob.yaml: a batch/v1 CronJob with a valid schedule,
#     concurrencyPolicy Forbid, a `dfck maintain --apply` command, no credential in it;
#   - contrib/cron/dfck-maintain: one cron.d line with 5 valid schedule fields, a user, the command;
#   - contrib/prometheus/dfck-alerts.yml: `promtool check rules` and `promtool test rules`
#     (else a structural check of the YAML); every dfck metric it uses is documented;
#   - the example policy (contrib/dfck-policy.example.yaml and the `dfck:` section of
#     docs/operations.md) uses only known keys;
#   - with --dfck PATH: every option the units, the CronJob and the cron line give dfck is in
#     `dfck maintain --help`; `dfck maintain --explain` accepts both example policies; and on a
#     copy of fixtures/sqlite/deerflow.db, `maintain --apply --metrics-file` and
#     `inspect --format openmetrics` write text that Prometheus' text parser (the one
#     node_exporter's textfile collector uses) reads, with no duplicate series.
# Tools: systemd-analyze (Debian package systemd), python3 with PyYAML (python3-yaml), promtool
# (from Debian's prometheus package: only the promtool binary is unpacked, into
# target/check-ops/, so no Prometheus server is installed or started). Missing ones are
# installed with apt-get when run as root; otherwise their checks are skipped with a note, or
# fail when DFCK_REQUIRE_OPS=1. Exit 1 on any problem, 2 on bad arguments.
set -euo pipefail

usage() { echo "usage: scripts/check-ops.sh [--dfck PATH]" >&2; exit 2; }
DFCK=""
while [ $# -gt 0 ]; do
    case "$1" in
        --dfck) [ $# -ge 2 ] || usage; DFCK="$2"; shift 2 ;;
        --dfck=*) DFCK="${1#--dfck=}"; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) usage ;;
    esac
done
if [ -n "$DFCK" ]; then
    case "$DFCK" in */*) ;; *) DFCK="$(command -v "$DFCK" || echo "$DFCK")" ;; esac
    [ -x "$DFCK" ] || { echo "check-ops: --dfck $DFCK is not an executable file" >&2; exit 2; }
    DFCK="$(cd "$(dirname "$DFCK")" && pwd)/$(basename "$DFCK")"
fi
cd "$(dirname "$0")/.."

SYSTEMD_DIR=contrib/systemd
CRONJOB=contrib/kubernetes/dfck-maintain-cronjob.yaml
CRONFILE=contrib/cron/dfck-maintain
RULES=contrib/prometheus/dfck-alerts.yml
RULE_TESTS=contrib/prometheus/dfck-alerts.test.yml
POLICY=contrib/dfck-policy.example.yaml
DOC=docs/operations.md
FIXTURE=fixtures/sqlite/deerflow.db
TOOLS_DIR="${DFCK_OPS_TOOLS:-$PWD/target/check-ops}"

TMP="$(mktemp -d /tmp/dfck-check-ops.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT

FAILED=0
fail() { echo "check-ops: FAIL: $*" >&2; FAILED=1; }
note() { echo "check-ops: $*" >&2; }
# A tool a check needs is missing: a failure under DFCK_REQUIRE_OPS=1, else a skipped check.
missing() {
    if [ "${DFCK_REQUIRE_OPS:-0}" = 1 ]; then
        fail "$1 is missing (DFCK_REQUIRE_OPS=1): $2"
    else
        note "skipped: $2 ($1 missing; run as root to install it, DFCK_REQUIRE_OPS=1 to fail instead)"
    fi
}

APT_UPDATED=0
can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
apt_update() {
    if [ "$APT_UPDATED" = 0 ]; then
        apt-get update -qq >/dev/null 2>&1 || true
        APT_UPDATED=1
    fi
}
apt_install() {
    can_apt || return 1
    note "installing $* (apt-get)"
    apt_update
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>"$TMP/apt.err" \
        || { cat "$TMP/apt.err" >&2; return 1; }
}

# --- tools ---------------------------------------------------------------------------------

# A python3 that has PyYAML: the one on PATH, Debian's, the project's venv; else python3-yaml.
PY=""
find_python() {
    local p
    for p in python3 /usr/bin/python3 "${DFCK_VENV:-.venv}/bin/python"; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import yaml' 2>/dev/null; then
            PY="$p"; return 0
        fi
    done
    return 1
}
find_python || { apt_install python3-yaml && find_python; } || true
PLAIN_PY="$(command -v python3 || command -v /usr/bin/python3 || true)"
if [ -z "$PLAIN_PY" ]; then
    echo "check-ops: no python3" >&2
    exit 1
fi

SYSTEMD_ANALYZE="$(command -v systemd-analyze || true)"
if [ -z "$SYSTEMD_ANALYZE" ] && apt_install systemd; then
    SYSTEMD_ANALYZE="$(command -v systemd-analyze || true)"
fi

# promtool: DFCK_PROMTOOL, on PATH, unpacked before, or unpacked now from Debian's package.
PROMTOOL="${DFCK_PROMTOOL:-$(command -v promtool || true)}"
if [ -z "$PROMTOOL" ] && [ -x "$TOOLS_DIR/promtool" ]; then
    PROMTOOL="$TOOLS_DIR/promtool"
fi
if [ -z "$PROMTOOL" ] && can_apt && command -v dpkg-deb >/dev/null; then
    note "promtool missing; unpacking it from Debian's prometheus package into $TOOLS_DIR"
    mkdir -p "$TMP/deb" "$TOOLS_DIR"
    download() { (cd "$TMP/deb" && apt-get download -qq prometheus >/dev/null 2>"$TMP/apt.err"); }
    if download || { apt_update; download; }; then
        dpkg-deb -x "$TMP"/deb/prometheus_*.deb "$TMP/deb/root" \
            && install -m 0755 "$TMP/deb/root/usr/bin/promtool" "$TOOLS_DIR/promtool" \
            && PROMTOOL="$TOOLS_DIR/promtool"
    else
        cat "$TMP/apt.err" >&2
    fi
fi

# --- the Python side: YAML, cron syntax, option lists ----------------------------------------

cat >"$TMP/check.py" <<'PY'
import re, sys

CRED = re.compile(r"://[^/@\s:'\"]+:[^/@\s'\"]+@|password=|PGPASSWORD=|LANGGRAPH_AES_KEY=", re.I)
POLICY_KEYS = {
    "prune": {"branches", "keep_last_turns"},
    "delete": {"idle", "older_than"},
    "convert": {"full_to_delta_over"},
    "reclaim": {"free_over", "wal_over"},
    "exempt": {"pinned", "threads", "users", "metadata_key"},
    "sweep": {"limit", "time_budget"},
    "verify": None,
    "lease_ttl": None,
}
errors = []

def err(msg):
    errors.append(msg)

RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
NAMES = [None, None, None,
         "jan feb mar apr may jun jul aug sep oct nov dec".split(),
         "sun mon tue wed thu fri sat".split()]

def cron_value(text, i):
    if text.isdigit():
        v = int(text)
    elif NAMES[i] and text.lower() in NAMES[i]:
        return True
    else:
        return False
    lo, hi = RANGES[i]
    return lo <= v <= hi

def cron_fields(fields, where):
    """Five schedule fields, each a list of *, N, N-M, optionally /STEP."""
    if len(fields) != 5:
        err(f"{where}: {len(fields)} schedule fields, expected 5: {' '.join(fields)!r}")
        return
    for i, f in enumerate(fields):
        for part in f.split(","):
            base, _, step = part.partition("/")
            ok = bool(part) and (not _ or (step.isdigit() and int(step) > 0))
            if base != "*":
                lo, dash, hi = base.partition("-")
                ok = ok and cron_value(lo, i) and (not dash or cron_value(hi, i))
            if not ok:
                err(f"{where}: schedule field {i + 1} {f!r} is not valid")

def options(tokens, where):
    """The options given to `dfck maintain` in a command's tokens."""
    for i, t in enumerate(tokens):
        if t.rsplit("/", 1)[-1] == "dfck" and i + 1 < len(tokens) and tokens[i + 1] == "maintain":
            opts = []
            for u in tokens[i + 2:]:
                if u in ("|", "||", "&&", ";") or u.startswith(("2>", ">", "<")):
                    break
                if u.startswith("--"):
                    opts.append(u.split("=", 1)[0])
            if "--apply" not in opts:
                err(f"{where}: dfck maintain without --apply changes nothing")
            return opts
    err(f"{where}: no `dfck maintain` command")
    return []

def check_cron(path):
    lines = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        s = line.strip()
        if not s or s.startswith("#") or re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s*=", s):
            continue
        lines.append((n, s))
    if len(lines) != 1:
        err(f"{path}: {len(lines)} cron lines, expected 1")
        return []
    n, s = lines[0]
    where = f"{path}:{n}"
    fields = s.split()
    if fields[0].startswith("@"):
        err(f"{where}: use 5 schedule fields, not {fields[0]}")
        return []
    cron_fields(fields[:5], where)
    if len(fields) < 7 or not re.fullmatch(r"[a-z_][a-z0-9_-]*\$?", fields[5]):
        err(f"{where}: a /etc/cron.d line needs a user after the schedule, then the command")
        return []
    command = " ".join(fields[6:])
    if re.search(r"(?<!\\)%", command):
        err(f"{where}: an unescaped % ends the command in cron")
    if CRED.search(command):
        err(f"{where}: a credential on the command line (use the environment file)")
    return options(fields[6:], where)

def check_cronjob(path):
    import yaml
    docs = [d for d in yaml.safe_load_all(open(path, encoding="utf-8")) if d is not None]
    if len(docs) != 1:
        err(f"{path}: {len(docs)} documents, expected 1")
        return []
    d = docs[0]
    if d.get("apiVersion") != "batch/v1" or d.get("kind") != "CronJob":
        err(f"{path}: not a batch/v1 CronJob")
        return []
    spec = d.get("spec") or {}
    sched = spec.get("schedule")
    if not isinstance(sched, str):
        err(f"{path}: spec.schedule missing")
    else:
        cron_fields(sched.split(), f"{path}: spec.schedule")
    if spec.get("concurrencyPolicy") != "Forbid":
        err(f"{path}: spec.concurrencyPolicy is {spec.get('concurrencyPolicy')!r}, expected Forbid")
    pod = (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        err(f"{path}: the pod's restartPolicy must be Never or OnFailure")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if not isinstance(grace, int) or grace < 60:
        err(f"{path}: terminationGracePeriodSeconds {grace} leaves the clean stop too little time (at least 60)")
    containers = pod.get("containers") or []
    if len(containers) != 1:
        err(f"{path}: {len(containers)} containers, expected 1")
        return []
    c = containers[0]
    tokens = [str(t) for t in (c.get("command") or []) + (c.get("args") or [])]
    for t in tokens:
        if CRED.search(t):
            err(f"{path}: a credential in the command (use a Secret)")
    for e in c.get("env") or []:
        if "value" in e and (e.get("name") in ("DFCK_DB", "PGPASSWORD", "LANGGRAPH_AES_KEY")
                             or CRED.search(str(e["value"]))):
            err(f"{path}: env {e.get('name')} holds a credential in the manifest (use a Secret)")
    opts = options(tokens, path)
    if "--policy" in tokens:
        i = tokens.index("--policy")
        policy = tokens[i + 1] if i + 1 < len(tokens) else ""
        mounts = [m.get("mountPath", "") for m in c.get("volumeMounts") or []]
        if not any(policy.startswith(m.rstrip("/") + "/") for m in mounts):
            err(f"{path}: --policy {policy} is on no mounted volume")
    return opts

def check_policy(path, text=None, nested=False):
    import yaml
    doc = yaml.safe_load(text if text is not None else open(path, encoding="utf-8"))
    if nested:
        doc = (doc or {}).get("dfck")
    if not isinstance(doc, dict) or not doc:
        err(f"{path}: no policy")
        return
    for k, v in doc.items():
        if k not in POLICY_KEYS:
            err(f"{path}: unknown policy key {k!r}")
        elif POLICY_KEYS[k] is not None:
            for sk in (v or {}):
                if sk not in POLICY_KEYS[k]:
                    err(f"{path}: unknown policy key {k}.{sk}")

def doc_policy(doc, out):
    """The docs' `dfck:` example: checked, and written with its keys at the top level."""
    text = open(doc, encoding="utf-8").read()
    m = re.search(r"```yaml\n(dfck:\n.*?)```", text, re.S)
    if not m:
        err(f"{doc}: no ```yaml block starting with `dfck:`")
        return
    check_policy(f"{doc} (dfck: example)", m.group(1), nested=True)
    body = m.group(1).split("\n", 1)[1]
    indent = min(len(l) - len(l.lstrip()) for l in body.splitlines() if l.strip())
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(l[indent:] for l in body.splitlines()) + "\n")

def check_rules(path, doc, structural):
    import yaml
    d = yaml.safe_load(open(path, encoding="utf-8"))
    groups = (d or {}).get("groups")
    if not isinstance(groups, list) or not groups:
        err(f"{path}: no groups")
        return 0
    documented = open(doc, encoding="utf-8").read()
    names, count = set(), 0
    for g in groups:
        if not isinstance(g, dict) or not g.get("name") or not isinstance(g.get("rules"), list):
            err(f"{path}: a group needs a name and a list of rules")
            continue
        for r in g["rules"]:
            count += 1
            a = r.get("alert")
            expr = r.get("expr")
            if not a or not isinstance(expr, str) or not expr.strip():
                err(f"{path}: rule {count} needs alert and expr")
                continue
            if a in names:
                err(f"{path}: alert {a} twice")
            names.add(a)
            for metric in sorted(set(re.findall(r"\bdfck_[a-z0-9_]+", expr))):
                if f"`{metric}" not in documented:
                    err(f"{path}: {a} uses {metric}, which {doc} does not document")
            if f"**`{a}`**" not in documented:
                err(f"{path}: {doc} does not say what to do when {a} fires")
            if structural:
                if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
                    err(f"{path}: {a}: unbalanced brackets in expr")
                if "for" in r and not re.fullmatch(r"(\d+(ms|[smhdwy]))+", str(r["for"])):
                    err(f"{path}: {a}: `for: {r['for']}` is not a duration")
                if (r.get("labels") or {}).get("severity") not in ("critical", "warning", "info"):
                    err(f"{path}: {a}: labels.severity must be critical, warning or info")
                if not (r.get("annotations") or {}).get("summary"):
                    err(f"{path}: {a}: no annotations.summary")
    return count

def check_metrics(path):
    """Sample lines of a metrics file: no series twice (node_exporter rejects the file)."""
    seen = set()
    n = 0
    for line in open(path, encoding="utf-8"):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        series = s.rsplit(" ", 1)[0] if "}" not in s else s[: s.rindex("}") + 1]
        if series in seen:
            err(f"{path}: series {series} twice")
        seen.add(series)
        n += 1
    if n == 0:
        err(f"{path}: no samples")
    return n

what = sys.argv[1]
if what == "cron":
    out = check_cron(sys.argv[2])
elif what == "cronjob":
    out = check_cronjob(sys.argv[2])
elif what == "policy":
    check_policy(sys.argv[2]); out = []
elif what == "doc-policy":
    doc_policy(sys.argv[2], sys.argv[3]); out = []
elif what == "rules":
    out = [str(check_rules(sys.argv[2], sys.argv[3], sys.argv[4] == "structural"))]
elif what == "metrics":
    out = [str(check_metrics(sys.argv[2]))]
else:
    raise SystemExit(f"unknown check {what}")
for e in errors:
    print(f"check-ops: FAIL: {e}", file=sys.stderr)
print("\n".join(out))
sys.exit(1 if errors else 0)
PY
py() { "$@" || FAILED=1; }

OPTIONS="$TMP/options"
: >"$OPTIONS"

# --- systemd --------------------------------------------------------------------------------

UNITS=("$SYSTEMD_DIR"/*.service "$SYSTEMD_DIR"/*.timer)
UNITS_VERIFIED=0
[ -e "${UNITS[0]}" ] || fail "no units in $SYSTEMD_DIR"
for u in "${UNITS[@]}"; do
    [ -e "$u" ] || continue
    name="$(basename "$u")"
    case "$name" in
    *.service)
        exec_line="$(grep -E '^ExecStart=' "$u" || true)"
        [ "$(printf '%s\n' "$exec_line" | grep -c .)" = 1 ] || fail "$u: expected one ExecStart="
        printf '%s\n' "$exec_line" | grep -q ' maintain .*--apply' || fail "$u: ExecStart does not run dfck maintain --apply"
        if printf '%s\n' "$exec_line" | grep -Eiq "://[^/@ :]+:[^/@ ]+@|password=|PGPASSWORD=|LANGGRAPH_AES_KEY="; then
            fail "$u: a credential on the command line (use EnvironmentFile=)"
        fi
        grep -q '^EnvironmentFile=' "$u" || fail "$u: no EnvironmentFile="
        grep -q '^Environment=.*\(DFCK_DB\|PASSWORD\|AES_KEY\)' "$u" && fail "$u: a credential in Environment= (use EnvironmentFile=)"
        for k in NoNewPrivileges=yes ProtectSystem=strict PrivateTmp=yes ProtectHome= CapabilityBoundingSet=; do
            grep -q "^$k" "$u" || fail "$u: hardening option $k missing"
        done
        case "$name" in *watch*) printf '%s\n' "$exec_line" | grep -q -- '--watch' || fail "$u: no --watch" ;; esac
        printf '%s\n' "$exec_line" | sed 's/^ExecStart=//' | tr ' ' '\n' \
            | awk 'seen && /^--/ { sub(/=.*/, ""); print } $0 == "maintain" { seen = 1 }' >>"$OPTIONS"
        ;;
    *.timer)
        target="$(sed -n 's/^Unit=//p' "$u")"
        [ -n "$target" ] || target="${name%.timer}.service"
        [ -e "$SYSTEMD_DIR/$target" ] || fail "$u: starts $target, which is not in $SYSTEMD_DIR"
        grep -q '^OnCalendar=' "$u" || fail "$u: no OnCalendar="
        ;;
    esac
done
if [ -z "$SYSTEMD_ANALYZE" ]; then
    missing systemd-analyze "systemd-analyze verify of ${#UNITS[@]} units"
else
    # A temporary copy whose ExecStart names a binary that exists here (verify checks that).
    mkdir -p "$TMP/units"
    cp "${UNITS[@]}" "$TMP/units/"
    exe="${DFCK:-$(command -v true)}"
    sed -i -E "s#^ExecStart=[^ ]+#ExecStart=$exe#" "$TMP"/units/*.service
    for u in "${UNITS[@]}"; do
        name="$(basename "$u")"
        if ! out="$("$SYSTEMD_ANALYZE" verify --man=no "$TMP/units/$name" 2>&1)"; then
            fail "$u: systemd-analyze verify failed:"$'\n'"$out"
            continue
        fi
        # Warnings (an unknown key, a bad value) do not change verify's exit code.
        ours="$(printf '%s\n' "$out" | grep -F -e "$name" -e "$TMP" || true)"
        if [ -n "$ours" ]; then
            fail "$u: systemd-analyze verify:"$'\n'"$ours"
            continue
        fi
        [ -z "$out" ] || note "systemd-analyze verify $name (not about the unit): $out"
        UNITS_VERIFIED=$((UNITS_VERIFIED + 1))
    done
fi

# --- cron, CronJob, policy --------------------------------------------------------------------

py "$PLAIN_PY" "$TMP/check.py" cron "$CRONFILE" >>"$OPTIONS"
CRONJOB_DONE=0
POLICY_DONE=0
if [ -n "$PY" ]; then
    py "$PY" "$TMP/check.py" cronjob "$CRONJOB" >>"$OPTIONS" && CRONJOB_DONE=1
    py "$PY" "$TMP/check.py" policy "$POLICY" >/dev/null
    py "$PY" "$TMP/check.py" doc-policy "$DOC" "$TMP/doc-policy.yaml" >/dev/null && POLICY_DONE=1
else
    missing "python3 with PyYAML" "the CronJob and example policy checks"
fi

# --- alert rules ----------------------------------------------------------------------------

RULE_COUNT=0
RULES_HOW=""
if [ -n "$PROMTOOL" ]; then
    if ! out="$("$PROMTOOL" check rules "$RULES" 2>&1)"; then
        fail "promtool check rules $RULES:"$'\n'"$out"
    else
        RULE_COUNT="$(printf '%s\n' "$out" | sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p')"
        RULES_HOW="promtool check rules"
    fi
    if [ -e "$RULE_TESTS" ]; then
        if out="$(cd "$(dirname "$RULE_TESTS")" && "$PROMTOOL" test rules "$(basename "$RULE_TESTS")" 2>&1)"; then
            RULES_HOW="$RULES_HOW and test rules"
        else
            fail "promtool test rules $RULE_TESTS:"$'\n'"$(printf '%s\n' "$out" | grep -v '^$')"
        fi
    fi
    [ -z "$PY" ] || py "$PY" "$TMP/check.py" rules "$RULES" "$DOC" promtool >/dev/null
elif [ -n "$PY" ]; then
    missing promtool "promtool check rules and test rules (a structural YAML check only)"
    if n="$("$PY" "$TMP/check.py" rules "$RULES" "$DOC" structural)"; then
        RULE_COUNT="$n"
        RULES_HOW="structural check"
    else
        FAILED=1
    fi
else
    missing "promtool or python3 with PyYAML" "the alert rules check"
fi

# --- the dfck binary --------------------------------------------------------------------------

DFCK_SUMMARY=""
if [ -n "$DFCK" ]; then
    if ! "$DFCK" maintain --help >"$TMP/help" 2>"$TMP/help.err"; then
        fail "$DFCK maintain --help failed: $(head -n 3 "$TMP/help.err")"
    else
        n=0
        sort -u "$OPTIONS" | grep . >"$TMP/options.sorted" || true
        while read -r opt; do
            n=$((n + 1))
            grep -Eq -- "(^|[^A-Za-z0-9-])${opt}([^A-Za-z0-9-]|\$)" "$TMP/help" \
                || fail "option $opt (used in contrib/) is not in 'dfck maintain --help'"
        done <"$TMP/options.sorted"
        DFCK_SUMMARY=", $n dfck options found in 'dfck maintain --help'"
    fi
    # The example policies as dfck reads them.
    for p in "$POLICY" "$TMP/doc-policy.yaml"; do
        [ -e "$p" ] || continue
        cp "$FIXTURE" "$TMP/explain.db"
        if ! "$DFCK" maintain --db "$TMP/explain.db" --policy "$p" --explain >"$TMP/explain.out" 2>&1; then
            shown="$p"; [ "$p" = "$POLICY" ] || shown="the dfck: example of $DOC"
            fail "dfck maintain --explain refuses $shown:"$'\n'"$(cat "$TMP/explain.out")"
        fi
    done
    # A real run on a copy of the DeerFlow fixture: its metrics file, and inspect's.
    cp "$FIXTURE" "$TMP/store.db"
    rc=0
    "$DFCK" maintain --db "$TMP/store.db" --policy "$POLICY" --apply --metrics-file "$TMP/maintain.prom" \
        >"$TMP/maintain.out" 2>&1 || rc=$?
    if [ "$rc" -gt 1 ]; then
        fail "dfck maintain --apply on a copy of $FIXTURE exited $rc:"$'\n'"$(tail -n 5 "$TMP/maintain.out")"
    elif [ ! -s "$TMP/maintain.prom" ]; then
        fail "dfck maintain --apply --metrics-file wrote no metrics"
    fi
    if ! "$DFCK" inspect --db "$TMP/store.db" --format openmetrics >"$TMP/inspect.prom" 2>"$TMP/inspect.err"; then
        fail "dfck inspect --format openmetrics failed: $(head -n 3 "$TMP/inspect.err")"
    fi
    for m in "$TMP/maintain.prom" "$TMP/inspect.prom"; do
        [ -s "$m" ] || continue
        py "$PLAIN_PY" "$TMP/check.py" metrics "$m" >/dev/null
        grep -q '^dfck_maintain_last_run_timestamp_seconds' "$m" \
            || fail "$(basename "$m"): no dfck_maintain_last_run_timestamp_seconds after a run"
        if [ -n "$PROMTOOL" ]; then
            rc=0
            out="$("$PROMTOOL" check metrics <"$m" 2>&1)" || rc=$?
            case "$rc" in
                0) ;;
                3) note "promtool check metrics $(basename "$m") (lint only): $out" ;;
                *) fail "$(basename "$m") is not Prometheus text format (node_exporter could not read it): $out" ;;
            esac
        else
            missing promtool "promtool check metrics of dfck's metrics"
        fi
    done
    DFCK_SUMMARY="$DFCK_SUMMARY, example policies accepted, metrics files readable"
fi

# --- summary ----------------------------------------------------------------------------------

if [ "$FAILED" != 0 ]; then
    echo "check-ops: failed" >&2
    exit 1
fi
units="${#UNITS[@]} units verified"
[ "$UNITS_VERIFIED" = "${#UNITS[@]}" ] || units="${#UNITS[@]} units checked ($UNITS_VERIFIED verified by systemd-analyze)"
rules="$RULE_COUNT alert rules${RULES_HOW:+ ($RULES_HOW)}"
[ -n "$RULES_HOW" ] || rules="alert rules not checked"
cronjob="cronjob and cron line checked"
[ "$CRONJOB_DONE" = 1 ] || cronjob="cron line checked (cronjob not checked)"
[ "$POLICY_DONE" = 1 ] || cronjob="$cronjob, example policies not checked"
echo "check-ops: $units, $rules, $cronjob$DFCK_SUMMARY"
