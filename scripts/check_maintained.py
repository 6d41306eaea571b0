#!/usr/bin/env python3
"""Independent check of `dfck maintain --apply` with the real LangGraph, beside a live writer.

    .venv/bin/python scripts/check_maintained.py [--dfck target/release/dfck] [--fixtures fixtures]
                                                [--pg-url URL] [--cycles 3]

For each stem of STEMS (SQLite, and with --pg-url / TEST_POSTGRES_URI a copy of the PostgreSQL
fixture database dfck_<stem>):

1. start scripts/live_writer.py on the store: the real library appends turns to two live
   threads (a fresh connection per turn, as DeerFlow's gateway does; SQLite turns that meet
   the VACUUM's lock are retried);
2. run `dfck maintain --apply` CYCLES times while it writes, with a policy that prunes
   branches, reclaims every run and handles two threads per run (so runs resume after one
   another), then once more after the writer stopped; every run must exit 0 and the store
   must have lost checkpoints;
3. read with the real saver every checkpoint of fixtures/expected/<stem>.json still in the
   store (`graph.get_state(...).values` through the generator's graph) and compare it with the
   expected values; the live threads' heads must hold exactly the messages the writer wrote;
4. continue every thread one more turn with the real library (`Command(resume)` on a head
   waiting on an interrupt, else a new message): the new head must extend the old one.

Exit 1 on any mismatch, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

import fixturelib  # noqa: E402
from check_migrated import compare_values, with_db  # noqa: E402
from check_reclaimed import STEMS as RECLAIM_STEMS, graph_of  # noqa: E402
from graphs import build_append_graph, continue_thread, messages_annotation  # noqa: E402

STEMS = ["delta_k3", "deerflow"]
LIVE = ["t-live-0", "t-live-1"]
POLICY = "prune:\n  branches: true\nreclaim:\n  free_over: 0%\nsweep:\n  limit: 2\n"


def spec_of(stem: str, tid: str) -> tuple:
    _, default, per_thread = RECLAIM_STEMS[stem]
    return per_thread.get(tid, default)


def maintain(dfck: str, target: str, policy: Path) -> tuple[int, dict]:
    p = subprocess.run(
        [dfck, "--db", target, "maintain", "--policy", str(policy), "--apply", "--format", "json"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("DEER_FLOW_HOME", "DFCK_DB")},
    )
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        return p.returncode, {"stderr": p.stderr.strip()[:500]}


def sweep_beside_writer(label: str, dfck: str, target: str, writer_args: list[str], tmp: Path,
                        cycles: int, errs: list[str]) -> tuple[dict, int]:
    """Runs the writer and `cycles` maintain runs beside it, then one more; returns the
    writer's report and the checkpoints the runs deleted."""
    policy = tmp / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    stop = tmp / f"stop-{label.replace(' ', '-')}"
    writer = subprocess.Popen(
        [sys.executable, str(HERE / "live_writer.py"), *writer_args, "--threads", ",".join(LIVE),
         "--seconds", "120", "--stop-file", str(stop), "--busy-timeout", "5", "--tolerate-busy"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deleted = 0
    try:
        time.sleep(1.0)
        for i in range(cycles):
            code, r = maintain(dfck, target, policy)
            if code != 0 or r.get("lease_held_by"):
                errs.append(f"{label}: maintain run {i + 1} exited {code}: {r}")
            deleted += r.get("run", {}).get("checkpoints_deleted", 0)
            time.sleep(0.3)
    finally:
        stop.touch()
        out, err = writer.communicate(timeout=120)
    if writer.returncode != 0:
        errs.append(f"{label}: the live writer failed ({writer.returncode}): {err.strip()[:300]}")
        return {"threads": {}}, deleted
    code, r = maintain(dfck, target, policy)
    if code != 0:
        errs.append(f"{label}: the last maintain run exited {code}: {r}")
    deleted += r.get("run", {}).get("checkpoints_deleted", 0)
    if deleted == 0:
        errs.append(f"{label}: maintain deleted nothing")
    return json.loads(out.strip().splitlines()[-1]), deleted


def read_back(label: str, stem: str, saver: Any, present: set[str], expected: dict,
              written: dict, errs: list[str]) -> int:
    """Reads every expected checkpoint still present and the live heads; returns how many."""
    error_threads = {e["thread_id"] for e in expected.get("errors", [])}
    n = 0
    for th in expected["threads"]:
        tid = th["thread_id"]
        if tid in error_threads:
            continue
        graph = graph_of(spec_of(stem, tid), saver)
        for nsd in th["namespaces"]:
            if nsd["checkpoint_ns"] != "":
                continue
            for cp in nsd["checkpoints"]:
                cid = cp["checkpoint_id"]
                if cid not in present:
                    continue
                cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cid}}
                try:
                    got = fixturelib.render_values(dict(graph.get_state(cfg).values))
                except Exception as e:  # noqa: BLE001
                    errs.append(f"{label} {tid} {cid}: get_state raised {type(e).__name__}: {e}")
                    continue
                d = compare_values(got, cp["values"], set(cp.get("graph_defaults", [])))
                if d:
                    errs.append(f"{label} {tid} {cid}: {d}")
                n += 1
    live = build_append_graph(messages_annotation("delta", 3), saver)
    for tid, count in written.get("threads", {}).items():
        ids = [m.id for m in live.get_state({"configurable": {"thread_id": tid}}).values.get("messages", [])]
        want = [f"{p}-{tid}-{i}" for i in range(count // 2) for p in ("h", "ai")]
        if ids != want:
            errs.append(f"{label} {tid}: the live head holds {len(ids)} messages, the writer wrote {len(want)}")
        n += 1
    return n


def continue_all(label: str, stem: str, saver: Any, expected: dict, errs: list[str]) -> int:
    error_threads = {e["thread_id"] for e in expected.get("errors", [])}
    graphs = [(th["thread_id"], graph_of(spec_of(stem, th["thread_id"]), saver))
              for th in expected["threads"] if th["thread_id"] not in error_threads]
    graphs += [(tid, build_append_graph(messages_annotation("delta", 3), saver)) for tid in LIVE]
    n = 0
    for tid, graph in graphs:
        problem = continue_thread(graph, tid, "maint")
        if problem:
            errs.append(f"{label} {tid}: {problem}")
        else:
            n += 1
    return n


def check_sqlite(stem: str, dfck: str, fixtures: Path, tmp: Path, cycles: int) -> tuple[int, list[str], str]:
    expected = json.loads((fixtures / "expected" / f"{stem}.json").read_text(encoding="utf-8"))
    db = tmp / f"{stem}.db"
    shutil.copyfile(fixtures / "sqlite" / f"{stem}.db", db)
    errs: list[str] = []
    written, deleted = sweep_beside_writer(stem, dfck, str(db), ["--db", str(db)], tmp, cycles, errs)
    conn = sqlite3.connect(str(db), check_same_thread=False)
    try:
        present = {r[0] for r in conn.execute("SELECT checkpoint_id FROM checkpoints")}
        saver = SqliteSaver(conn)
        n = read_back(stem, stem, saver, present, expected, written, errs)
        cont = continue_all(stem, stem, saver, expected, errs)
        conn.commit()
    finally:
        conn.close()
    return n, errs, f"{deleted} checkpoints deleted over {cycles + 1} runs, {written.get('threads')} written live, {cont} thread(s) continued"


def check_pg(stem: str, dfck: str, fixtures: Path, server: str, tmp: Path, cycles: int) -> tuple[int, list[str], str]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    expected = json.loads((fixtures / "expected-pg" / f"{stem}.json").read_text(encoding="utf-8"))
    copy = f"dfck_maintain_py_{stem}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
        admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "dfck_{stem}"')
    url = with_db(server, copy)
    errs: list[str] = []
    written, deleted = sweep_beside_writer(f"pg {stem}", dfck, url, ["--pg-url", url], tmp, cycles, errs)
    with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        present = {r["checkpoint_id"] for r in conn.execute("SELECT checkpoint_id FROM checkpoints")}
        saver = PostgresSaver(conn)
        n = read_back(f"pg {stem}", stem, saver, present, expected, written, errs)
        cont = continue_all(f"pg {stem}", stem, saver, expected, errs)
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
    return n, errs, f"{deleted} checkpoints deleted over {cycles + 1} runs, {written.get('threads')} written live, {cont} thread(s) continued"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"))
    ap.add_argument("--cycles", type=int, default=3)
    args = ap.parse_args()
    fixtures = Path(args.fixtures)
    total, mismatches = 0, []
    with tempfile.TemporaryDirectory(prefix="dfck-check-maintained-") as t:
        dfck = str(Path(t) / "dfck")
        shutil.copy2(args.dfck, dfck)
        for stem in STEMS:
            n, errs, summary = check_sqlite(stem, dfck, fixtures, Path(t), args.cycles)
            total += n
            mismatches += errs
            print(f"maintain {stem}: {summary}; {n} checkpoints read back, {len(errs)} mismatch(es)")
        for stem in STEMS if args.pg_url else []:
            n, errs, summary = check_pg(stem, dfck, fixtures, args.pg_url, Path(t), args.cycles)
            total += n
            mismatches += errs
            print(f"maintain postgres {stem}: {summary}; {n} checkpoints read back, {len(errs)} mismatch(es)")
        if not args.pg_url:
            print("maintain postgres: skipped (no --pg-url / TEST_POSTGRES_URI)")
    for e in mismatches[:8]:
        print("  MISMATCH " + e)
    print(f"maintain: {total} checkpoints read back by the real LangGraph after maintain beside a live writer, {len(mismatches)} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
