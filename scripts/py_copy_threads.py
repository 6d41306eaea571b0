#!/usr/bin/env python3
"""Python baseline of the copy benchmark (benchmarks.md): copy every thread of a SQLite store
into a PostgreSQL database through the real savers' own API, as a migration script written
in Python would: `SqliteSaver.list` each thread (oldest first), then `PostgresSaver.put`
every checkpoint with its parent config and `put_writes` its pending writes.

    .venv/bin/python scripts/py_copy_threads.py SRC.db postgresql://…/TARGET_DB

The target database must exist; `setup()` is run. Prints one JSON line: {"seconds",
"threads", "checkpoints", "writes", "peak_rss_bytes"}.
"""

from __future__ import annotations

import json
import resource
import sqlite3
import sys
import time

import psycopg
from psycopg.rows import dict_row
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver


def main() -> int:
    src, url = sys.argv[1], sys.argv[2]
    source = SqliteSaver(sqlite3.connect(src, check_same_thread=False))
    conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    target = PostgresSaver(conn)
    target.setup()
    t0 = time.time()
    threads = sorted({t.config["configurable"]["thread_id"] for t in source.list(None)})
    n_ck = n_w = 0
    for tid in threads:
        for tup in reversed(list(source.list({"configurable": {"thread_id": tid}}))):
            c = tup.config["configurable"]
            parent = tup.parent_config or {
                "configurable": {"thread_id": tid, "checkpoint_ns": c["checkpoint_ns"]}
            }
            versions = dict(tup.checkpoint["channel_versions"])
            target.put(parent, tup.checkpoint, tup.metadata, versions)
            n_ck += 1
            by_task: dict[tuple[str, str], list] = {}
            for task_id, channel, value in tup.pending_writes or []:
                by_task.setdefault((task_id, ""), []).append((channel, value))
            for (task_id, path), writes in by_task.items():
                target.put_writes(tup.config, writes, task_id, path)
                n_w += len(writes)
    seconds = time.time() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": round(seconds, 3), "threads": len(threads), "checkpoints": n_ck,
                      "writes": n_w, "peak_rss_bytes": rss}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
