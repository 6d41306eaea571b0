#!/usr/bin/env python3
"""One giant full-mode thread, written by the real LangGraph, and its read-back check.

    python scripts/gen_giant_thread.py --out /tmp/giant.db --target-mb 2048
    python scripts/gen_giant_thread.py --check /tmp/giant.db [--k 10] [--sample 24] [--mode full]
    python scripts/gen_giant_thread.py --check postgresql://… [--mode full]

Write (`--out`): thread "t-giant" of a fresh SQLite store, grown by the real LangGraph
(StateGraph + SqliteSaver, `add_messages`, full mode, durability "sync") one human+ai pair
per invoke (scripts/gen_perf_stores.py's deterministic ~200-byte messages) until the file
reaches --target-mb. Full mode stores the whole list at every checkpoint, so the thread's
stored bytes grow with the square of its messages: 2 GB is about 2,800 messages. Prints
one JSON line: messages, checkpoints, bytes, seconds.

Check (`--check`, after `dfck migrate full-to-delta --apply`): opens the store with the real
SqliteSaver (PostgresSaver when --check is a postgresql:// URL) through the same graph with `messages` as a delta channel (LangGraph's own
`_messages_delta_reducer`, snapshot_frequency --k; `--mode full`: `add_messages`, for a store
left in full mode, e.g. after `dfck prune --keep-last-turns`) and, on --sample checkpoints spread over
the thread (the first, the head and evenly between), compares `get_state(...).values` with
the deterministic messages: every list must be a prefix of the thread's messages, in order,
and the head must hold them all. Then continues the thread by one turn: the new head must
be the old one plus the next pair. Exit 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from gen_perf_stores import close, db_bytes, expected_messages, open_saver, pair  # noqa: E402
from graphs import build_append_graph, messages_annotation  # noqa: E402

THREAD = "t-giant"


def write(out: Path, target_mb: float) -> dict:
    conn, saver = open_saver(out)
    g = build_append_graph(messages_annotation("full"), saver)
    cfg = {"configurable": {"thread_id": THREAD}}
    target = int(target_mb * 1024 * 1024)
    t0 = time.perf_counter()
    i = 0
    while True:
        g.invoke({"messages": pair(i)}, cfg, durability="sync")
        i += 1
        if i % 50 == 0:
            conn.commit()
            if db_bytes(conn) >= target:
                break
    secs = time.perf_counter() - t0
    checkpoints = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    close(conn)
    return {"db": str(out), "thread_id": THREAD, "messages": 2 * i, "checkpoints": checkpoints,
            "seconds": round(secs, 1), "bytes": out.stat().st_size}


def shown(values: dict) -> list[tuple[str, str]]:
    return [(m.id, m.content) for m in values.get("messages", [])]


def open_checked(where: str):
    """The real saver on a SQLite file or a PostgreSQL URL, and the thread's checkpoint ids."""
    sql = ("SELECT checkpoint_id FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = '' "
           "ORDER BY checkpoint_id")
    if where.startswith(("postgresql://", "postgres://")):
        import psycopg
        from psycopg.rows import dict_row
        from langgraph.checkpoint.postgres import PostgresSaver
        conn = psycopg.connect(where, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        ids = [r["checkpoint_id"] for r in conn.execute(sql.format(p="%s"), (THREAD,))]
        return conn, PostgresSaver(conn), ids
    conn = sqlite3.connect(where, check_same_thread=False)
    ids = [r[0] for r in conn.execute(sql.format(p="?"), (THREAD,))]
    return conn, SqliteSaver(conn), ids


def check(path: str, k: int, sample: int, mode: str) -> int:
    conn, saver, ids = open_checked(path)
    annotation = messages_annotation("delta", k) if mode == "delta" else messages_annotation("full")
    g = build_append_graph(annotation, saver)
    if not ids:
        print(f"{path}: no checkpoint of {THREAD}")
        return 1
    picks = sorted({ids[round(j * (len(ids) - 1) / max(sample - 1, 1))] for j in range(sample)})
    head = shown(g.get_state({"configurable": {"thread_id": THREAD}}).values)
    everything = expected_messages(len(head))
    bad = 0
    if head != everything:
        print(f"head: {len(head)} messages differ from the thread's")
        bad += 1
    for cid in picks:
        got = shown(g.get_state({"configurable": {"thread_id": THREAD, "checkpoint_id": cid}}).values)
        if got != everything[: len(got)]:
            print(f"{cid}: {len(got)} messages are not the thread's first {len(got)}")
            bad += 1
    cfg = {"configurable": {"thread_id": THREAD}}
    g.invoke({"messages": pair(len(head) // 2)}, cfg)
    after = shown(g.get_state(cfg).values)
    if after != expected_messages(len(head) + 2):
        print(f"continued: {len(after)} messages, not the {len(head) + 2} expected")
        bad += 1
    conn.close()
    print(json.dumps({"db": path.split("@")[-1], "mode": mode, "checkpoints": len(ids), "sampled": len(picks),
                      "head_messages": len(head), "continued_to": len(after), "mismatches": bad}))
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write a fresh store here")
    ap.add_argument("--target-mb", type=float, default=2048.0, help="file size to grow to (default 2048)")
    ap.add_argument("--check", help="check a converted store instead: a SQLite file or a postgresql:// URL")
    ap.add_argument("--k", type=int, default=10, help="snapshot_frequency of the delta graph (default 10)")
    ap.add_argument("--sample", type=int, default=24, help="checkpoints read back (default 24)")
    ap.add_argument("--mode", choices=["delta", "full"], default="delta", help="how the graph reads messages (default delta)")
    args = ap.parse_args()
    if args.check:
        return check(args.check, args.k, args.sample, args.mode)
    if not args.out:
        ap.error("--out or --check is required")
    print(json.dumps(write(args.out, args.target_mb)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
