#!/usr/bin/env python3
"""A large DeerFlow-shaped store for the prune / reclaim benchmarks (not committed).

    .venv/bin/python scripts/gen_retention_store.py --out /tmp/dfck-retention.db \
        [--threads 2] [--turns 240] [--payload 4096] [--regenerate-every 40]
    .venv/bin/python scripts/gen_retention_store.py --pg-url URL --pg-db dfck_retention_big ...

Written by the real LangGraph (full mode, `add_messages`, durability="sync") through the
conversation graph of graphs.py: every turn a human message of --payload bytes and the
graph's answer (seeded random text, which PostgreSQL cannot compress), then DeerFlow's duration-only checkpoint (scripts/retention.py); every
--regenerate-every turns the turn is regenerated: run again from the end of the previous
turn, so the first attempt is a superseded leaf branch. A full-mode thread grows with the
square of its turns, which is what makes such stores large.
"""

from __future__ import annotations

import argparse
import base64
import random
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graphs import build_conv_graph, messages_annotation  # noqa: E402
from retention import add_duration_only, latest, turn  # noqa: E402


class Store:
    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.runs: dict[str, int] = {}

    def register(self, tid: str, graph: Any) -> None:
        pass

    def cfg(self, tid: str) -> dict:
        n = self.runs.get(tid, 0) + 1
        self.runs[tid] = n
        return {"configurable": {"thread_id": tid}, "metadata": {"user_id": "u-1", "run_id": f"run-{tid}-{n:05d}"}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="SQLite file to create")
    ap.add_argument("--pg-url", help="server URL (a role that may CREATE DATABASE)")
    ap.add_argument("--pg-db", default="dfck_retention_big")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--turns", type=int, default=240)
    ap.add_argument("--payload", type=int, default=4096)
    ap.add_argument("--regenerate-every", type=int, default=40)
    args = ap.parse_args()
    if args.pg_url:
        import psycopg
        from psycopg.rows import dict_row
        from langgraph.checkpoint.postgres import PostgresSaver

        with psycopg.connect(args.pg_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{args.pg_db}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{args.pg_db}"')
        base = args.pg_url.rsplit("/", 1)[0]
        conn = psycopg.connect(f"{base}/{args.pg_db}", autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = PostgresSaver(conn)
        saver.setup()
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        Path(args.out).unlink(missing_ok=True)
        conn = sqlite3.connect(args.out, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        saver = SqliteSaver(conn)
    st = Store(saver)
    g = build_conv_graph(messages_annotation("full"), saver)
    # Incompressible text (seeded): PostgreSQL's TOAST would shrink a repeated payload.
    rng = random.Random(7)
    t0 = time.time()
    for k in range(args.threads):
        tid = f"t-big-{k:02d}"
        for n in range(args.turns):
            text = f"turn {n} " + base64.b64encode(rng.randbytes(args.payload * 3 // 4)).decode()
            if n and args.regenerate_every and n % args.regenerate_every == 0:
                end_of_previous = latest(st, tid).config
                turn(g, st, tid, text, f"h-{n}-first")
                turn(g, st, tid, text, f"h-{n}", at=end_of_previous)
            else:
                turn(g, st, tid, text, f"h-{n}")
        print(f"{tid}: {args.turns} turns, {time.time() - t0:.0f} s", file=sys.stderr)
    conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
