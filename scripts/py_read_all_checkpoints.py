#!/usr/bin/env python3
"""Python baseline of the migrate benchmark: read EVERY checkpoint of every thread with the
real LangGraph, as a converter written in Python would have to.

    python scripts/py_read_all_checkpoints.py DB [--delta K] [--reducer langgraph|deerflow]

DB is a SQLite file (e.g. delta_many.db from gen_perf_stores.py) or a postgresql:// URL of a
PostgresSaver database (e.g. gen_perf_stores.py --only delta_many_pg). Opens SqliteSaver, builds
the append graph of gen_perf_stores.py (DeltaChannel(K) with --delta, else add_messages),
lists the checkpoints of every thread (untimed SQL), then times
graph.get_state({"configurable": {thread_id, checkpoint_ns: "", checkpoint_id}}) for each
one. Prints one JSON line: {"seconds", "threads", "checkpoints", "messages_read",
"peak_rss_bytes"} (peak RSS from ru_maxrss, whole process).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from graphs import build_append_graph, messages_annotation  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("--delta", type=int, metavar="K")
    ap.add_argument("--reducer", choices=["langgraph", "deerflow"], default="langgraph")
    args = ap.parse_args()
    listing = "SELECT thread_id, checkpoint_id FROM checkpoints WHERE checkpoint_ns = '' ORDER BY thread_id, checkpoint_id"
    if args.db.startswith(("postgres://", "postgresql://")):
        import psycopg
        from psycopg.rows import dict_row
        from langgraph.checkpoint.postgres import PostgresSaver

        conn = psycopg.Connection.connect(args.db, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = PostgresSaver(conn)
        rows = [(r["thread_id"], r["checkpoint_id"]) for r in conn.execute(listing).fetchall()]
    else:
        if not os.path.exists(args.db):
            print(f"no such database: {args.db}", file=sys.stderr)
            return 2
        conn = sqlite3.connect(args.db, check_same_thread=False)
        saver = SqliteSaver(conn)
        rows = conn.execute(listing).fetchall()
    ann = messages_annotation("delta", args.delta, args.reducer) if args.delta else messages_annotation("full")
    graph = build_append_graph(ann, saver)
    gc.collect()
    t0 = time.perf_counter()
    n_msgs = 0
    for tid, cid in rows:
        snap = graph.get_state({"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cid}})
        n_msgs += len(snap.values.get("messages", []))
    seconds = time.perf_counter() - t0
    conn.close()
    print(json.dumps({
        "seconds": round(seconds, 2),
        "threads": len({r[0] for r in rows}),
        "checkpoints": len(rows),
        "messages_read": n_msgs,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
