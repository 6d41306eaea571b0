#!/usr/bin/env python3
"""Generate large LangGraph stores for dfck performance work (not committed).

    python scripts/gen_perf_stores.py --out /tmp/dfck-perf [--only delta_1k delta_10k full_400mb]
    python scripts/gen_perf_stores.py --pg-url URL [--pg-db dfck_perf] --only delta_10k_pg [--delta-k K]

Writes, with the real LangGraph (StateGraph + SqliteSaver, durability="sync"):
* delta_1k.db   thread "t-delta-1k":  1,000 messages, DeltaChannel(_messages_delta_reducer,
                snapshot_frequency=10), one invoke per human+ai pair (500 invokes);
* delta_10k.db  thread "t-delta-10k": 10,000 messages, same (5,000 invokes). With K=10
                a snapshot every 10 invokes makes this store ~1 GB (quadratic); --delta-k
                changes K for both delta stores;
* delta_many.db threads "t-many-000", ...: DeerFlow-marked delta threads (K=--delta-k) of
                --many-messages messages (default 500) until the file reaches
                --many-target-mb (default 110 MB): the migrate benchmark's store;
* full_400mb.db threads "t-full-00", "t-full-01", ...: add_messages (full mode), each
                thread grows to --full-messages messages (default 1,000) two at a time,
                new threads until the file reaches --full-target-mb (default 450 MB).

Postgres (real PostgresSaver, setup() run), into ONE database --pg-db (default dfck_perf,
dropped and re-created at the start of the run) on the server of --pg-url (a role that
may CREATE DATABASE, e.g. from scripts/pg-test-server.sh start):
* delta_1k_pg   thread "t-delta-1k", same content as delta_1k.db;
* delta_10k_pg  thread "t-delta-10k", same content as delta_10k.db (--delta-k applies);
* delta_many_pg --many-threads (default 30) threads like delta_many.db (use its own --pg-db).

Message content is deterministic (~200 bytes, ids "h-<i>"/"ai-<i>"), so the message
list at the head of every thread is known: see expected_messages() (used by
py_cold_get_state.py --check).
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

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from graphs import build_append_graph, messages_annotation  # noqa: E402

FILLER = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud "
    "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat."
)


def pair(i: int) -> list:
    """The i-th (0-based) human+ai pair; content is ~200 bytes each."""
    return [
        HumanMessage(content=f"[user {i:06d}] {FILLER}"[:200], id=f"h-{i}"),
        AIMessage(content=f"[assistant {i:06d}] {FILLER[::-1]}"[:200], id=f"ai-{i}"),
    ]


def expected_messages(n_messages: int) -> list[tuple[str, str]]:
    out = []
    for i in range(n_messages // 2):
        out.extend((m.id, m.content) for m in pair(i))
    return out


def open_saver(path: Path) -> tuple[sqlite3.Connection, SqliteSaver]:
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(path) + suffix)
        if p.exists():
            p.unlink()
    conn = sqlite3.connect(str(path), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    return conn, saver


def close(conn: sqlite3.Connection) -> None:
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def db_bytes(conn: sqlite3.Connection) -> int:
    pc = conn.execute("PRAGMA page_count").fetchone()[0]
    ps = conn.execute("PRAGMA page_size").fetchone()[0]
    return pc * ps


def open_pg_db(url: str, dbname: str):
    """Drop + create dbname on the server of url; return (connection, PostgresSaver)."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo
    from psycopg.rows import dict_row
    from langgraph.checkpoint.postgres import PostgresSaver

    with psycopg.Connection.connect(url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(sql.Identifier(dbname)))
    conninfo = make_conninfo(url, dbname=dbname)
    # what PostgresSaver.from_conn_string opens
    conn = psycopg.Connection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = PostgresSaver(conn)
    saver.setup()
    return conn, saver


def gen_delta_pg(conn, saver, name: str, thread_id: str, n_messages: int, k: int) -> dict:
    g = build_append_graph(messages_annotation("delta", k), saver)
    cfg = {"configurable": {"thread_id": thread_id}}
    t0 = time.perf_counter()
    for i in range(n_messages // 2):
        g.invoke({"messages": pair(i)}, cfg, durability="sync")
    secs = time.perf_counter() - t0
    n = len(g.get_state(cfg).values["messages"])
    assert n == n_messages, (n, n_messages)
    with conn.cursor() as cur:
        cur.execute("SELECT current_database(), pg_database_size(current_database())")
        row = cur.fetchone()
        counts = {}
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            cur.execute(
                f"SELECT count(*) AS n, pg_total_relation_size('{table}') AS b FROM {table} WHERE thread_id = %s",
                (thread_id,),
            )
            r = cur.fetchone()
            counts[table] = {"rows": r["n"], "table_bytes": r["b"]}
    return {"store": name, "database": row["current_database"], "thread_id": thread_id, "messages": n, "k": k,
            "seconds": round(secs, 1), "database_bytes": row["pg_database_size"], "tables": counts}


def gen_delta_many_pg(conn, saver, per_thread: int, threads: int, k: int) -> dict:
    """delta_many through PostgresSaver: `threads` DeerFlow-marked delta threads."""
    g = build_append_graph(messages_annotation("delta", k), saver)
    t0 = time.perf_counter()
    for t in range(threads):
        cfg = {"configurable": {"thread_id": f"t-many-{t:03d}"},
               "metadata": {"deerflow_checkpoint_channel_mode": "delta"}}
        for i in range(per_thread // 2):
            g.invoke({"messages": pair(i)}, cfg, durability="sync")
    secs = time.perf_counter() - t0
    with conn.cursor() as cur:
        cur.execute("SELECT current_database() AS db, pg_database_size(current_database()) AS size")
        row = cur.fetchone()
        cur.execute("SELECT coalesce(sum(octet_length(blob)), 0) AS b FROM checkpoint_blobs")
        blobs = cur.fetchone()["b"]
    return {"store": "delta_many_pg", "database": row["db"], "threads": threads,
            "messages_per_thread": per_thread, "k": k, "seconds": round(secs, 1),
            "database_bytes": row["size"], "blob_bytes": blobs}


def gen_delta(out: Path, name: str, thread_id: str, n_messages: int, k: int) -> dict:
    path = out / f"{name}.db"
    conn, saver = open_saver(path)
    g = build_append_graph(messages_annotation("delta", k), saver)
    cfg = {"configurable": {"thread_id": thread_id}}
    t0 = time.perf_counter()
    for i in range(n_messages // 2):
        g.invoke({"messages": pair(i)}, cfg, durability="sync")
    secs = time.perf_counter() - t0
    n = len(g.get_state(cfg).values["messages"])
    assert n == n_messages, (n, n_messages)
    close(conn)
    return {"db": str(path), "thread_id": thread_id, "messages": n, "seconds": round(secs, 1), "bytes": path.stat().st_size}


def gen_delta_many(out: Path, per_thread: int, target_mb: float, k: int) -> dict:
    """Many moderate DeerFlow-marked delta threads until the file reaches target_mb."""
    path = out / "delta_many.db"
    conn, saver = open_saver(path)
    g = build_append_graph(messages_annotation("delta", k), saver)
    target = int(target_mb * 1024 * 1024)
    t0 = time.perf_counter()
    threads = []
    for t in range(10_000):
        tid = f"t-many-{t:03d}"
        cfg = {"configurable": {"thread_id": tid}, "metadata": {"deerflow_checkpoint_channel_mode": "delta"}}
        for i in range(per_thread // 2):
            g.invoke({"messages": pair(i)}, cfg, durability="sync")
        threads.append(tid)
        conn.commit()
        if db_bytes(conn) >= target:
            break
    secs = time.perf_counter() - t0
    close(conn)
    return {"db": str(path), "threads": len(threads), "messages_per_thread": per_thread, "k": k,
            "seconds": round(secs, 1), "bytes": path.stat().st_size}


def gen_full(out: Path, per_thread: int, target_mb: float, max_threads: int) -> dict:
    path = out / "full_400mb.db"
    conn, saver = open_saver(path)
    g = build_append_graph(messages_annotation("full"), saver)
    target = int(target_mb * 1024 * 1024)
    t0 = time.perf_counter()
    threads = []
    for t in range(max_threads):
        tid = f"t-full-{t:02d}"
        cfg = {"configurable": {"thread_id": tid}}
        for i in range(per_thread // 2):
            g.invoke({"messages": pair(i)}, cfg, durability="sync")
        threads.append(tid)
        conn.commit()
        if db_bytes(conn) >= target:
            break
    secs = time.perf_counter() - t0
    close(conn)
    return {
        "db": str(path),
        "threads": threads,
        "messages_per_thread": per_thread,
        "seconds": round(secs, 1),
        "bytes": path.stat().st_size,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="directory of the SQLite stores (required for those)")
    ap.add_argument("--only", nargs="*", choices=["delta_1k", "delta_10k", "full_400mb", "delta_many", "delta_1k_pg", "delta_10k_pg", "delta_many_pg"])
    ap.add_argument("--pg-url", help="Postgres server URL for the *_pg stores")
    ap.add_argument("--pg-db", default="dfck_perf", help="database for the *_pg stores (re-created; default dfck_perf)")
    ap.add_argument("--delta-k", type=int, default=10, help="snapshot_frequency of the delta stores (default 10)")
    ap.add_argument("--full-messages", type=int, default=1000, help="messages per full-mode thread")
    ap.add_argument("--full-target-mb", type=float, default=450.0)
    ap.add_argument("--full-max-threads", type=int, default=12)
    ap.add_argument("--many-messages", type=int, default=500, help="messages per delta_many thread")
    ap.add_argument("--many-target-mb", type=float, default=110.0)
    ap.add_argument("--many-threads", type=int, default=30, help="threads of delta_many_pg")
    args = ap.parse_args()
    todo = args.only or ["delta_1k", "delta_10k", "full_400mb"]
    pg_todo = [w for w in todo if w.endswith("_pg")]
    lite_todo = [w for w in todo if not w.endswith("_pg")]
    if pg_todo and not args.pg_url:
        ap.error("--pg-url is required for " + ", ".join(pg_todo))
    if lite_todo and not args.out:
        ap.error("--out is required for " + ", ".join(lite_todo))
    if pg_todo:
        conn, saver = open_pg_db(args.pg_url, args.pg_db)
        for what in pg_todo:
            if what == "delta_1k_pg":
                r = gen_delta_pg(conn, saver, what, "t-delta-1k", 1000, args.delta_k)
            elif what == "delta_many_pg":
                r = gen_delta_many_pg(conn, saver, args.many_messages, args.many_threads, args.delta_k)
            else:
                r = gen_delta_pg(conn, saver, what, "t-delta-10k", 10000, args.delta_k)
            print(json.dumps(r), flush=True)
        conn.close()
    if not lite_todo:
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for what in lite_todo:
        if what == "delta_1k":
            r = gen_delta(out, "delta_1k", "t-delta-1k", 1000, args.delta_k)
        elif what == "delta_10k":
            r = gen_delta(out, "delta_10k", "t-delta-10k", 10000, args.delta_k)
        elif what == "delta_many":
            r = gen_delta_many(out, args.many_messages, args.many_target_mb, args.delta_k)
        else:
            r = gen_full(out, args.full_messages, args.full_target_mb, args.full_max_threads)
        print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
