#!/usr/bin/env python3
"""A live LangGraph writer for dfck's live-store tests: the real library appends turns to a
store while dfck reads (and writes) it.

    .venv/bin/python scripts/live_writer.py --db PATH.db | --pg-url URL \
        [--threads t-live-0,t-live-1] [--mode delta|full] [--seconds 10] [--stop-file F] \
        [--busy-timeout S] [--tolerate-busy]

Each turn opens a fresh connection and saver, invokes a real StateGraph once (a human+AI pair
appended to `messages`, DeltaChannel with snapshot_frequency 3 in delta mode), and closes the
connection again, as a DeerFlow gateway does across requests. Threads are written round-robin.
It stops after --seconds or when --stop-file appears, then prints one JSON line on stdout:
{"turns": N, "threads": {"t-live-0": n_messages, ...}}. The message list of every thread is
deterministic (ids h-<thread>-<i> / ai-<thread>-<i>), so a reader can check what it saw.

SQLite connections wait --busy-timeout seconds for a lock (30 by default; DeerFlow's own is 5).
With --tolerate-busy a turn that fails with "database is locked" (expected beside a VACUUM)
is counted in "busy" and tried again; any other error — above all a corruption error such
as "database disk image is malformed" — ends the writer with exit 3 and the error on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from graphs import AIMessage, HumanMessage, build_append_graph, messages_annotation  # noqa: E402


def turn_messages(thread: str, i: int) -> list:
    return [
        HumanMessage(content=f"[{thread} user {i}] live question", id=f"h-{thread}-{i}"),
        AIMessage(content=f"[{thread} assistant {i}] live answer", id=f"ai-{thread}-{i}"),
    ]


def sqlite_turn(path: str, ann, thread: str, i: int, timeout: float) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False, timeout=timeout)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        g = build_append_graph(ann, saver)
        g.invoke({"messages": turn_messages(thread, i)}, {"configurable": {"thread_id": thread}})
    finally:
        conn.close()


def pg_turn(url: str, ann, thread: str, i: int) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        g = build_append_graph(ann, saver)
        g.invoke({"messages": turn_messages(thread, i)}, {"configurable": {"thread_id": thread}})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db")
    ap.add_argument("--pg-url")
    ap.add_argument("--threads", default="t-live-0,t-live-1")
    ap.add_argument("--mode", choices=["delta", "full"], default="delta")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--stop-file")
    ap.add_argument("--max-turns", type=int, default=100000)
    ap.add_argument("--busy-timeout", type=float, default=30.0)
    ap.add_argument("--tolerate-busy", action="store_true")
    a = ap.parse_args()
    if bool(a.db) == bool(a.pg_url):
        ap.error("give exactly one of --db and --pg-url")
    ann = messages_annotation(a.mode, 3 if a.mode == "delta" else None)
    threads = [t for t in a.threads.split(",") if t]
    counts = {t: 0 for t in threads}
    deadline = time.monotonic() + a.seconds
    turns = 0
    busy = 0
    while time.monotonic() < deadline and turns < a.max_turns:
        if a.stop_file and os.path.exists(a.stop_file):
            break
        t = threads[turns % len(threads)]
        i = counts[t] // 2
        try:
            if a.db:
                sqlite_turn(a.db, ann, t, i, a.busy_timeout)
            else:
                pg_turn(a.pg_url, ann, t, i)
        except sqlite3.OperationalError as e:
            if a.tolerate_busy and "locked" in str(e):
                busy += 1
                time.sleep(0.05)
                continue
            print(f"live writer: turn {i} of {t}: {type(e).__name__}: {e}", file=sys.stderr)
            return 3
        except sqlite3.DatabaseError as e:
            print(f"live writer: turn {i} of {t}: {type(e).__name__}: {e}", file=sys.stderr)
            return 3
        counts[t] += 2
        turns += 1
    print(json.dumps({"turns": turns, "threads": counts, "busy": busy}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
