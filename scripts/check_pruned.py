#!/usr/bin/env python3
"""Independent check of `dfck prune --apply` with the real LangGraph (SQLite and Postgres).

    .venv/bin/python scripts/check_pruned.py [--dfck target/release/dfck] [--pg-url URL]

The retention fixture (fixtures/sqlite/retention.db, and the `dfck_retention` database that
scripts/pg-test-server.sh loads from fixtures/postgres/retention.sql) holds DeerFlow-shaped
threads written by the real library: turns each followed by DeerFlow's duration-only
checkpoint, a regenerate-style branch, an interrupted branch, in full and delta mode
(scripts/retention.py). For each prune run below, on a pruned copy and an untouched copy of
the same store, the real savers (SqliteSaver / PostgresSaver) through the conversation graph
in the thread's mode must give:

  (a) latest resume: `get_state` of the thread (no checkpoint id) equal on both copies;
  (b) explicit `checkpoint_id`: every checkpoint left in the pruned copy reads exactly as it
      did before;
  (c) a branch from an older visible turn (new input at the end of the first turn) gives
      the same messages on both copies, and so does one more turn at the head, and a
      `Command(resume)` of the interrupted branch head;
  (d) no orphan rows: every write sits on a checkpoint, every Postgres blob is named by a
      checkpoint's channel_versions.

Runs on the retention fixture: `prune --all --branches --apply` (trailing duration-only
leaves and leaf branches), and `prune --all --keep-last-turns 2 --apply` (history trimming).
On the retention_race fixture (DeerFlow's run worker wrote its duration-only checkpoint after
the user edited an older turn, so the newest checkpoint sits on the older branch): the default
prune and `--branches` must leave the latest state where the user was, and
`--keep-last-turns` refuses those threads (exit 1). Exit 1 on any mismatch.
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
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

import fixturelib  # noqa: E402
from graphs import build_conv_graph, messages_annotation  # noqa: E402

# (fixture stem, arguments, the exit codes dfck may give)
RUNS = [
    ("retention", ["prune", "--all", "--branches", "--apply"], (0,)),
    ("retention", ["prune", "--all", "--keep-last-turns", "2", "--apply"], (0,)),
    ("retention", ["prune", "r-cut-full", "r-cut-delta", "r-linear-delta", "--keep-last-turns", "1", "--apply"], (0,)),
    ("retention_race", ["prune", "--all", "--apply"], (0,)),
    ("retention_race", ["prune", "--all", "--branches", "--apply"], (0,)),
    ("retention_race", ["prune", "--all", "--keep-last-turns", "1", "--apply"], (1,)),
]


def graph_for(tid: str, saver: Any) -> Any:
    ann = messages_annotation("delta", 3) if tid.endswith("-delta") else messages_annotation("full")
    return build_conv_graph(ann, saver)


def cfg(tid: str, cid: str | None = None) -> dict:
    c: dict[str, Any] = {"thread_id": tid, "checkpoint_ns": ""}
    if cid:
        c["checkpoint_id"] = cid
    return {"configurable": c}


def values(graph: Any, config: dict) -> Any:
    return fixturelib.render_values(dict(graph.get_state(config).values))


def history(graph: Any, tid: str) -> list[Any]:
    return list(graph.get_state_history(cfg(tid)))


def ids(graph: Any, tid: str) -> list[str]:
    return [s.config["configurable"]["checkpoint_id"] for s in history(graph, tid)]


def first_turn_end(graph: Any, tid: str) -> str | None:
    """The oldest settled checkpoint (no next task) after the first answer."""
    for s in reversed(history(graph, tid)):
        msgs = s.values.get("messages", [])
        if s.next == () and len(msgs) >= 2:
            return s.config["configurable"]["checkpoint_id"]
    return None


def interrupted_heads(graph: Any, tid: str) -> list[str]:
    return [s.config["configurable"]["checkpoint_id"] for s in history(graph, tid) if s.interrupts]


def compare_store(label: str, open_saver: Callable[[str], Any], pruned: str, untouched: str, errs: list[str]) -> int:
    """Compares the pruned and untouched copies through the real saver; returns the number
    of checkpoints read."""
    sp, su = open_saver(pruned), open_saver(untouched)
    threads = sorted({t.config["configurable"]["thread_id"] for t in su.list(None)})
    n = 0
    for tid in threads:
        gp, gu = graph_for(tid, sp), graph_for(tid, su)
        left = ids(gp, tid)
        if not left:
            continue
        # (a) latest resume
        if values(gp, cfg(tid)) != values(gu, cfg(tid)):
            errs.append(f"{label} {tid}: latest state differs")
        # (b) every kept checkpoint by explicit id
        for cid in left:
            n += 1
            if values(gp, cfg(tid, cid)) != values(gu, cfg(tid, cid)):
                errs.append(f"{label} {tid} {cid}: state differs")
        # (c) a branch from the end of the first turn, if it survived
        end = first_turn_end(gp, tid)
        if end is not None:
            for g in (gp, gu):
                g.invoke({"messages": [HumanMessage(content="calc 9+9", id="h-branch")]}, cfg(tid, end),
                         durability="sync")
            if values(gp, cfg(tid)) != values(gu, cfg(tid)):
                errs.append(f"{label} {tid}: a branch from {end} differs")
        for cid in interrupted_heads(gp, tid):
            for g in (gp, gu):
                g.invoke(Command(resume="approved after prune"), cfg(tid, cid), durability="sync")
            if values(gp, cfg(tid)) != values(gu, cfg(tid)):
                errs.append(f"{label} {tid}: resuming interrupt {cid} differs")
        for g in (gp, gu):
            g.invoke({"messages": [HumanMessage(content="one more turn", id="h-more")]}, cfg(tid),
                     durability="sync")
        if values(gp, cfg(tid)) != values(gu, cfg(tid)):
            errs.append(f"{label} {tid}: continuing the head differs")
    return n


def run_dfck(dfck: str, target: str, args: list[str], label: str, errs: list[str], codes: tuple = (0,)) -> str:
    proc = subprocess.run([dfck, "--db", target, *args, "--format", "json"], capture_output=True, text=True)
    if proc.returncode not in codes:
        errs.append(f"{label}: dfck {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[:300]}")
        return "failed"
    r = json.loads(proc.stdout)
    return f"{r['pruned']} threads pruned, {r['refused']} refused, {r['checkpoints']} checkpoints deleted"


def check_sqlite(dfck: str, fixtures: Path, tmp: Path, errs: list[str]) -> None:
    def open_saver(path: str) -> Any:
        return SqliteSaver(sqlite3.connect(path, check_same_thread=False, isolation_level=None))

    for k, (stem, args, codes) in enumerate(RUNS):
        src = fixtures / "sqlite" / f"{stem}.db"
        pruned, untouched = tmp / f"pruned{k}.db", tmp / f"untouched{k}.db"
        shutil.copyfile(src, pruned)
        shutil.copyfile(src, untouched)
        label = f"sqlite {stem} [{' '.join(args[1:-1])}]"
        summary = run_dfck(dfck, str(pruned), args, label, errs, codes)
        conn = sqlite3.connect(pruned)
        orphans = conn.execute(
            "SELECT count(*) FROM writes w WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
            "c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)"
        ).fetchone()[0]
        conn.close()
        if orphans:
            errs.append(f"{label}: {orphans} orphan writes")
        n = compare_store(label, open_saver, str(pruned), str(untouched), errs)
        print(f"{label}: {summary}; {n} kept checkpoints read by SqliteSaver, 0 orphans" if not orphans else label)


def with_db(url: str, db: str) -> str:
    base, _, query = url.partition("?")
    head = base[: base.index("/", base.index("://") + 3)]
    return f"{head}/{db}" + (f"?{query}" if query else "")


def check_postgres(dfck: str, server: str, errs: list[str]) -> None:
    import psycopg
    from psycopg.rows import dict_row
    from langgraph.checkpoint.postgres import PostgresSaver

    conns: list[Any] = []

    def open_saver(url: str) -> Any:
        c = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        conns.append(c)
        return PostgresSaver(c)

    for k, (stem, args, codes) in enumerate(RUNS):
        names = [f"dfck_pycheck_pruned{k}", f"dfck_pycheck_untouched{k}"]
        with psycopg.connect(server, autocommit=True) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "dfck_{stem}"')
        pruned, untouched = (with_db(server, n) for n in names)
        label = f"postgres {stem} [{' '.join(args[1:-1])}]"
        summary = run_dfck(dfck, pruned, args, label, errs, codes)
        with psycopg.connect(pruned) as c:
            ow = c.execute(
                "SELECT count(*) FROM checkpoint_writes w WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
                "c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)"
            ).fetchone()[0]
            ob = c.execute(
                "SELECT count(*) FROM checkpoint_blobs b WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
                "c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
                "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
            ).fetchone()[0]
        if ow or ob:
            errs.append(f"{label}: {ow} orphan writes, {ob} orphan blobs")
        n = compare_store(label, open_saver, pruned, untouched, errs)
        for c in conns:
            c.close()
        conns.clear()
        with psycopg.connect(server, autocommit=True) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        print(f"{label}: {summary}; {n} kept checkpoints read by PostgresSaver, {ow + ob} orphans")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"))
    args = ap.parse_args()
    errs: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dfck-check-pruned-") as t:
        check_sqlite(args.dfck, Path(args.fixtures), Path(t), errs)
    if args.pg_url:
        check_postgres(args.dfck, args.pg_url, errs)
    else:
        print("check_pruned: no --pg-url / TEST_POSTGRES_URI: PostgreSQL skipped", file=sys.stderr)
    for e in errs:
        print(f"MISMATCH {e}", file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    raise SystemExit(main())
