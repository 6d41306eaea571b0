#!/usr/bin/env python3
"""Python in-process cold read of one thread, like DeerFlow's checkpoint bench (docs/bench-rows.md#measured-fields).

    python scripts/py_cold_get_state.py DB THREAD [--delta K] [--reducer langgraph|deerflow] [--check]
    python scripts/py_cold_get_state.py postgresql://USER:PW@HOST:PORT/DBNAME THREAD [...]

DB is a SQLite file or a Postgres URL (postgres:// or postgresql://; the database
holding the thread, e.g. dfck_perf from gen_perf_stores.py --only delta_10k_pg).
Builds a fresh graph + SqliteSaver / PostgresSaver (untimed: the connection is opened
like PostgresSaver.from_conn_string and setup() is run before timing), runs
gc.collect(), then times ONE
graph.get_state({"configurable": {"thread_id": THREAD}}) call and prints
{"seconds": ..., "messages": n} as one JSON line. Without --delta the messages channel is
add_messages (full mode); with --delta K it is DeltaChannel(<reducer>, snapshot_frequency=K).
(A delta graph also reads full-mode checkpoints, and LangGraph 1.2 replays delta history
through a full graph too, so the flag mainly matters for which reducer is timed.)
--check compares the result with the deterministic content of gen_perf_stores.py.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from graphs import build_append_graph, messages_annotation  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("thread")
    ap.add_argument("--delta", type=int, metavar="K", help="read messages as DeltaChannel(snapshot_frequency=K)")
    ap.add_argument("--reducer", choices=["langgraph", "deerflow"], default="langgraph")
    ap.add_argument("--check", action="store_true", help="verify content against gen_perf_stores' deterministic input")
    args = ap.parse_args()
    is_pg = args.db.startswith(("postgres://", "postgresql://"))
    if not is_pg and not os.path.exists(args.db):
        print(f"no such database: {args.db}", file=sys.stderr)
        return 2

    # untimed setup
    if is_pg:
        import psycopg
        from psycopg.rows import dict_row
        from langgraph.checkpoint.postgres import PostgresSaver

        conn = psycopg.Connection.connect(args.db, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = PostgresSaver(conn)
    else:
        conn = sqlite3.connect(args.db, check_same_thread=False)
        saver = SqliteSaver(conn)
    ann = messages_annotation("delta", args.delta, args.reducer) if args.delta else messages_annotation("full")
    graph = build_append_graph(ann, saver)
    config = {"configurable": {"thread_id": args.thread}}
    saver.setup()
    gc.collect()

    t0 = time.perf_counter()
    snap = graph.get_state(config)
    seconds = time.perf_counter() - t0

    messages = snap.values.get("messages", [])
    out = {"seconds": seconds, "messages": len(messages)}
    if args.check:
        from gen_perf_stores import expected_messages

        got = [(m.id, m.content) for m in messages]
        out["content_ok"] = got == expected_messages(len(messages))
    conn.close()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
