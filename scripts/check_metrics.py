#!/usr/bin/env python3
"""Independent check of `dfck inspect --format openmetrics` with the Prometheus project's own
parser: the text parses as OpenMetrics and every number equals `dfck inspect --format json`.

    .venv/bin/python scripts/check_metrics.py [--dfck target/release/dfck] [--fixtures fixtures]
                                              [--pg-url URL]

For a copy of each SQLite fixture below, and with --pg-url / TEST_POSTGRES_URI each PostgreSQL
fixture database dfck_<stem>:

1. run `dfck --db STORE inspect --format openmetrics` and parse it with
   `prometheus_client.openmetrics.parser.text_string_to_metric_families` (which insists on
   `# EOF`, valid names, units matching the name's suffix, escaped label values);
2. every family is a gauge with a HELP text, and every `dfck_*` name the summary feeds has
   exactly the series `inspect --format json` implies: bytes and rows per table, the file
   sizes and free pages (SQLite) or the table sizes and dead rows (PostgreSQL), threads per
   mode, checkpoints, writes, the history ratio, the ten largest threads; no maintenance run
   (the fixtures were never maintained) and the lease free.

Then one SQLite copy gets a `dfck_maintenance` row holding a finished run (the table as
crates/dfck-core/src/store/maintenance.rs lays it out): the run's families must show it. And a
real `dfck maintain --apply --metrics-file FILE` run on a copy of the DeerFlow fixture: FILE
parses, its store numbers equal `inspect --format json` after the run, its run numbers (threads
by action, checkpoints deleted, bytes reclaimed, findings by code) the run's own report.

Prints one summary line; exit 1 on any mismatch, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from prometheus_client.openmetrics.parser import text_string_to_metric_families

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from check_migrated import with_db  # noqa: E402

SQLITE_STEMS = ["full", "delta_k3", "mixed", "subgraph", "deerflow_app", "long_threads", "retention"]
PG_STEMS = ["full", "delta_k3", "mixed", "subgraph", "deerflow_app"]

Series = dict[tuple[str, frozenset], float]


def run(dfck: str, target: str, fmt: str) -> str:
    p = subprocess.run([dfck, "--db", target, "inspect", "--format", fmt], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"dfck inspect --format {fmt} on {target}: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def parse(text: str, errs: list[str], what: str) -> Series:
    out: Series = {}
    for fam in text_string_to_metric_families(text):
        if fam.type != "gauge":
            errs.append(f"{what}: {fam.name} is a {fam.type}, not a gauge")
        if not fam.documentation:
            errs.append(f"{what}: {fam.name} has no HELP")
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            if key in out:
                errs.append(f"{what}: duplicate series {s.name}{s.labels}")
            out[key] = s.value
    return out


def get(m: Series, name: str, **labels: str) -> float | None:
    return m.get((name, frozenset(labels.items())))


def family(m: Series, name: str) -> list[tuple[frozenset, float]]:
    return [(labels, v) for (n, labels), v in m.items() if n == name]


def expect(errs: list[str], what: str, got: Any, want: Any) -> None:
    ok = got == want if not isinstance(want, float) else got is not None and math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)
    if not ok:
        errs.append(f"{what}: {got!r} in the metrics, {want!r} from the JSON")


def compare(m: Series, j: dict, errs: list[str], what: str) -> int:
    """Checks every summary-fed family against the JSON; returns the series checked."""
    checked = 0

    def eq(label: str, got: Any, want: Any) -> None:
        nonlocal checked
        checked += 1
        expect(errs, f"{what}: {label}", got, want)

    pg = j["backend"] == "postgres"
    tb, counts = j["table_bytes"], j["counts"]
    if pg:
        tables = [("checkpoints", tb["checkpoints"], counts["checkpoints"]),
                  ("checkpoint_blobs", tb["blobs"], counts["blobs"]),
                  ("checkpoint_writes", tb["writes"], counts["writes"])]
    else:
        tables = [("checkpoints", tb["checkpoints"], counts["checkpoints"]),
                  ("writes", tb["writes"], counts["writes"])]
    eq("dfck_store_bytes series", len(family(m, "dfck_store_bytes")), len(tables))
    eq("dfck_store_rows series", len(family(m, "dfck_store_rows")), len(tables))
    for t, b, r in tables:
        eq(f"dfck_store_bytes{{table={t}}}", get(m, "dfck_store_bytes", table=t), b)
        eq(f"dfck_store_rows{{table={t}}}", get(m, "dfck_store_rows", table=t), r)
    eq("sum of dfck_store_bytes", sum(b for _, b, _ in tables), j["bytes"])
    space = j["space"]
    if pg:
        eq("dfck_store_disk_bytes series", len(family(m, "dfck_store_disk_bytes")), len(space["tables"]))
        for t in space["tables"]:
            eq(f"dfck_store_disk_bytes{{table={t['table']}}}", get(m, "dfck_store_disk_bytes", table=t["table"]), t["total_bytes"])
            eq(f"dfck_store_dead_tuples{{table={t['table']}}}", get(m, "dfck_store_dead_tuples", table=t["table"]), t["dead_tuples"])
        eq("dfck_store_free_bytes", get(m, "dfck_store_free_bytes"), None)
    else:
        eq("dfck_store_disk_bytes series", len(family(m, "dfck_store_disk_bytes")), 2)
        eq("dfck_store_disk_bytes{file=db}", get(m, "dfck_store_disk_bytes", file="db"), space["file_bytes"])
        eq("dfck_store_disk_bytes{file=wal}", get(m, "dfck_store_disk_bytes", file="wal"), space["wal_bytes"])
        eq("dfck_store_free_bytes", get(m, "dfck_store_free_bytes"), space["free_page_bytes"])
        eq("dfck_store_dead_tuples series", len(family(m, "dfck_store_dead_tuples")), 0)
    threads = j["threads"]
    for mode in ("full", "delta", "mixed"):
        eq(f"dfck_threads{{mode={mode}}}", get(m, "dfck_threads", mode=mode), sum(1 for t in threads if t["mode"] == mode))
    eq("dfck_checkpoints", get(m, "dfck_checkpoints"), counts["checkpoints"])
    eq("dfck_writes", get(m, "dfck_writes"), counts["writes"])
    history = sum(t["history_bytes"] for t in threads)
    eq("dfck_history_ratio", get(m, "dfck_history_ratio"), history / j["bytes"] if j["bytes"] else 0.0)
    largest = sorted(threads, key=lambda t: (-t["bytes"], t["thread_id"]))[:10]
    eq("dfck_thread_bytes series", len(family(m, "dfck_thread_bytes")), len(largest))
    for t in largest:
        eq(f"dfck_thread_bytes{{thread_id={t['thread_id']}}}", get(m, "dfck_thread_bytes", thread_id=t["thread_id"]), t["bytes"])
    return checked


def never_maintained(m: Series, errs: list[str], what: str) -> None:
    expect(errs, f"{what}: dfck_maintain_lease_held", get(m, "dfck_maintain_lease_held"), 0)
    extra = sorted({n for n, _ in m if n.startswith("dfck_maintain_last_run") or n == "dfck_findings"})
    if extra:
        errs.append(f"{what}: maintenance families on a store never maintained: {extra}")


# The row `dfck maintain` leaves when its run ends: lease released, the run recorded.
RUN = {
    "started_at": 1790000000, "seconds": 42.5, "ended": "complete",
    "threads_examined": 8, "threads_deleted": 1, "threads_pruned": 3, "checkpoints_deleted": 17,
    "threads_converted": 2, "threads_refused": 1, "reclaimed_bytes": 65536,
    "steps": [{"step": "prune", "seconds": 1.25}, {"step": "reclaim", "seconds": 0.5}],
    "findings": [{"code": "lineage.missing_parent", "severity": "error", "count": 2},
                 {"code": "message.missing_id", "severity": "warning", "count": 5}],
}
COLUMNS = ("name TEXT PRIMARY KEY, token TEXT, holder_host TEXT, holder_pid BIGINT, holder_version TEXT, "
           "acquired_at BIGINT, expires_at BIGINT NOT NULL DEFAULT 0, cursor_thread TEXT, last_run TEXT")


def check_maintained(dfck: str, db: Path, errs: list[str]) -> int:
    with sqlite3.connect(db) as conn:
        conn.execute(f"CREATE TABLE dfck_maintenance ({COLUMNS})")
        conn.execute("INSERT INTO dfck_maintenance (name, last_run) VALUES ('sweeper', ?)", (json.dumps(RUN),))
    conn.close()
    what = f"maintained {db.name}"
    m = parse(run(dfck, str(db), "openmetrics"), errs, what)
    want = {
        ("dfck_maintain_last_run_timestamp_seconds", ()): RUN["started_at"],
        ("dfck_maintain_last_run_duration_seconds", ()): RUN["seconds"],
        ("dfck_maintain_last_run_checkpoints_deleted", ()): RUN["checkpoints_deleted"],
        ("dfck_maintain_last_run_reclaimed_bytes", ()): RUN["reclaimed_bytes"],
        ("dfck_maintain_lease_held", ()): 0,
    }
    for action in ("examined", "deleted", "pruned", "converted", "refused"):
        want[("dfck_maintain_last_run_threads", (("action", action),))] = RUN[f"threads_{action}"]
    for s in RUN["steps"]:
        want[("dfck_maintain_last_run_step_seconds", (("step", s["step"]),))] = s["seconds"]
    for f in RUN["findings"]:
        want[("dfck_findings", (("code", f["code"]), ("severity", f["severity"])))] = f["count"]
    for (name, labels), v in want.items():
        expect(errs, f"{what}: {name}{dict(labels)}", get(m, name, **dict(labels)), v)
    expect(errs, f"{what}: dfck_findings series", len(family(m, "dfck_findings")), len(RUN["findings"]))
    return len(want) + 1


def check_metrics_file(dfck: str, db: Path, tmp: Path, errs: list[str]) -> int:
    """A real `maintain --apply --metrics-file` run: the file parses, its store numbers equal
    `inspect --format json` after the run, its run numbers the run's own report."""
    policy, prom = tmp / "policy.yaml", tmp / "dfck.prom"
    policy.write_text("prune:\n  branches: true\ndelete:\n  idle: 30d\nreclaim:\n  free_over: 0%\n", encoding="utf-8")
    p = subprocess.run([dfck, "--db", str(db), "maintain", "--policy", str(policy), "--apply",
                        "--metrics-file", str(prom), "--format", "json"], capture_output=True, text=True)
    what = f"maintain --metrics-file {db.name}"
    if p.returncode not in (0, 1) or not prom.exists():
        errs.append(f"{what}: exited {p.returncode}, {p.stderr.strip()[:300]}")
        return 0
    r = json.loads(p.stdout)["run"]
    m = parse(prom.read_text(encoding="utf-8"), errs, what)
    n = compare(m, json.loads(run(dfck, str(db), "json")), errs, what)
    want = {
        ("dfck_maintain_last_run_timestamp_seconds", ()): r["started_at"],
        ("dfck_maintain_last_run_checkpoints_deleted", ()): r["checkpoints_deleted"],
        ("dfck_maintain_last_run_reclaimed_bytes", ()): r["reclaimed_bytes"],
        ("dfck_maintain_lease_held", ()): 0,
    }
    for action in ("examined", "deleted", "pruned", "converted", "refused"):
        want[("dfck_maintain_last_run_threads", (("action", action),))] = r[f"threads_{action}"]
    for f in r["findings"]:
        want[("dfck_findings", (("code", f["code"]), ("severity", f["severity"])))] = f["count"]
    for (name, labels), v in want.items():
        expect(errs, f"{what}: {name}{dict(labels)}", get(m, name, **dict(labels)), v)
    if r["threads_deleted"] == 0:
        errs.append(f"{what}: the run deleted nothing")
    return n + len(want)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"))
    args = ap.parse_args()
    fixtures = Path(args.fixtures)
    errs: list[str] = []
    stores = series = 0
    with tempfile.TemporaryDirectory(prefix="dfck-check-metrics-") as t:
        dfck = str(Path(t) / "dfck")
        shutil.copy2(args.dfck, dfck)
        for stem in SQLITE_STEMS:
            db = Path(t) / f"{stem}.db"
            shutil.copy2(fixtures / "sqlite" / f"{stem}.db", db)
            m = parse(run(dfck, str(db), "openmetrics"), errs, stem)
            series += compare(m, json.loads(run(dfck, str(db), "json")), errs, stem)
            never_maintained(m, errs, stem)
            stores += 1
        series += check_maintained(dfck, Path(t) / "full.db", errs)
        shutil.copy2(fixtures / "sqlite" / "deerflow_app.db", Path(t) / "deerflow_app.db")
        series += check_metrics_file(dfck, Path(t) / "deerflow_app.db", Path(t), errs)
        stores += 1
        for stem in PG_STEMS if args.pg_url else []:
            url = with_db(args.pg_url, f"dfck_{stem}")
            m = parse(run(dfck, url, "openmetrics"), errs, f"pg {stem}")
            series += compare(m, json.loads(run(dfck, url, "json")), errs, f"pg {stem}")
            never_maintained(m, errs, f"pg {stem}")
            stores += 1
    for e in errs[:8]:
        print("  MISMATCH " + e)
    pg = "" if args.pg_url else " (PostgreSQL skipped: no --pg-url / TEST_POSTGRES_URI)"
    print(f"metrics: {stores} stores' OpenMetrics parsed by prometheus_client, {series} series equal to inspect --format json, {len(errs)} mismatch(es){pg}")
    return 1 if errs else 0


if __name__ == "__main__":
    raise SystemExit(main())
