#!/usr/bin/env python3
"""A store of many short DeerFlow-shaped threads, for the whole-store benchmarks (not committed).

    .venv/bin/python scripts/gen_short_threads.py --out /tmp/dfck-scale/df1m.db --threads 1000000
    .venv/bin/python scripts/gen_short_threads.py --pg-url URL --pg-db dfck_df100k --threads 100000

Two template threads are written by the real LangGraph (delta mode by default: `DeltaChannel`
with snapshot frequency --k; --mode full for `add_messages`) through graphs.py's conversation
graph, with durability "exit" (one checkpoint per run), each run followed by DeerFlow's
duration-only checkpoint (retention.py, as DeerFlow's run worker writes it):

  plain   one turn: the thread's first checkpoint (the input as its pending writes), the
          run's end, then a trailing duration-only leaf (3 checkpoints, 2 writes);
  branch  a turn, a second turn, then the second turn regenerated from the end of the first:
          the first attempt (its run and its duration checkpoint) is a superseded leaf branch
          that `prune --branches` deletes (6 checkpoints).

Every thread of the store is then a copy of one of them under its own id (`s0000000`, ...;
one in --branch-every a branch thread, the rest plain), byte for byte otherwise: LangGraph
keeps the thread id only in the key columns, so each copy reads back exactly like its
template (as gen_big_store.py and gen_big_pg_store.py copy). The copies are made in SQL,
--chunk threads per statement; the templates are removed at the end.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from graphs import build_conv_graph, messages_annotation  # noqa: E402
from retention import add_duration_only, h, latest  # noqa: E402

PLAIN, BRANCH = "tpl-plain", "tpl-branch"


class Store:
    """What retention.py's helpers expect: the saver and a run id per thread."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.runs: dict[str, int] = {}

    def cfg(self, tid: str, at: Any = None) -> dict:
        n = self.runs.get(tid, 0) + 1
        self.runs[tid] = n
        conf = dict(at["configurable"]) if at is not None else {"thread_id": tid}
        return {"configurable": conf, "metadata": {"user_id": "u-1", "run_id": f"run-{tid}-{n}"}}


def turn(g: Any, st: Store, tid: str, text: str, mid: str, at: Any = None) -> None:
    """One run (from the latest checkpoint, or from config `at`), then its duration-only
    checkpoint."""
    g.invoke({"messages": [h(text, mid)]}, st.cfg(tid, at), durability="exit")
    add_duration_only(st, tid, 1.25)


def templates(saver: Any, mode: str, k: int) -> None:
    st = Store(saver)
    g = build_conv_graph(messages_annotation(mode, k if mode == "delta" else None), saver)
    turn(g, st, PLAIN, "hello there", "h-0")
    turn(g, st, BRANCH, "calc 1+1", "h-0")
    end_of_turn_1 = latest(st, BRANCH).config
    turn(g, st, BRANCH, "first answer please", "h-1")
    turn(g, st, BRANCH, "regenerated turn two", "h-1b", at=end_of_turn_1)


def copy_threads(conn: Any, cols: dict[str, list[str]], insert: str, ph: str, args: argparse.Namespace) -> None:
    """Copies the templates under `args.threads` ids, `args.chunk` threads per statement, then
    removes them. `insert` copies one table ({t}; {rest}: its columns but thread_id) for the
    ids of a series (start, end), the branch template every `branch_every`-th; `ph` is the
    driver's placeholder."""
    t0 = time.time()
    for start in range(0, args.threads, args.chunk):
        end = min(start + args.chunk, args.threads) - 1
        for t, names in cols.items():
            rest = ", ".join(c for c in names if c != "thread_id")
            conn.execute(insert.format(t=t, rest=rest), (start, end, args.branch_every, BRANCH, PLAIN))
        conn.commit()
        print(f"{end + 1} threads, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    for t in cols:
        conn.execute(f"DELETE FROM {t} WHERE thread_id IN ({ph}, {ph})", (PLAIN, BRANCH))
    conn.commit()


def sqlite_store(args: argparse.Namespace) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    out = Path(args.out)
    for p in (out, Path(f"{out}-wal"), Path(f"{out}-shm")):
        p.unlink(missing_ok=True)
    conn = sqlite3.connect(out, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    templates(SqliteSaver(conn), args.mode, args.k)
    conn.commit()
    cols = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in ("checkpoints", "writes")}
    copy_threads(
        conn,
        cols,
        "WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
        "INSERT INTO {t} (thread_id, {rest}) SELECT printf('s%07d', i), {rest} "
        "FROM n JOIN {t} ON thread_id = CASE WHEN i % ? = 0 THEN ? ELSE ? END ORDER BY i",
        "?",
        args,
    )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    print(f"{out}: {args.threads} threads, {out.stat().st_size / 1e9:.2f} GB", flush=True)


def pg_store(args: argparse.Namespace) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.rows import dict_row

    with psycopg.connect(args.pg_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{args.pg_db}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{args.pg_db}"')
    target = make_conninfo(**{**conninfo_to_dict(args.pg_url), "dbname": args.pg_db})
    with psycopg.connect(target, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        templates(saver, args.mode, args.k)
    tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
    with psycopg.connect(target) as conn:
        cols = {
            t: [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = 'public' AND table_name = %s ORDER BY ordinal_position",
                    (t,),
                )
            ]
            for t in tables
        }
        copy_threads(
            conn,
            cols,
            "INSERT INTO {t} (thread_id, {rest}) SELECT 's' || lpad(i::text, 7, '0'), {rest} "
            "FROM generate_series(%s::int, %s::int) i JOIN {t} "
            "ON thread_id = CASE WHEN i %% %s = 0 THEN %s ELSE %s END ORDER BY i",
            "%s",
            args,
        )
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))").fetchone()
        print(f"{args.pg_db}: {args.threads} threads, {size[0]}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="SQLite file to create (replaced)")
    ap.add_argument("--pg-url", help="server URL (a role that may CREATE DATABASE)")
    ap.add_argument("--pg-db", default="dfck_short_threads")
    ap.add_argument("--threads", type=int, default=1_000_000)
    ap.add_argument("--branch-every", type=int, default=5, help="one thread in N has a regenerate branch")
    ap.add_argument("--mode", choices=("delta", "full"), default="delta")
    ap.add_argument("--k", type=int, default=3, help="delta mode's snapshot frequency")
    ap.add_argument("--chunk", type=int, default=50_000, help="threads copied per statement")
    args = ap.parse_args()
    if not args.out and not args.pg_url:
        ap.error("give --out or --pg-url")
    if args.pg_url:
        pg_store(args)
    else:
        sqlite_store(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
