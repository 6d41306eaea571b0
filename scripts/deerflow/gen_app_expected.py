#!/usr/bin/env python3
"""Expected JSON of the DeerFlow fixture stores, from the real LangGraph.

    .venv/bin/python scripts/deerflow/gen_app_expected.py [--pg-url URL] [--out fixtures]

Reads fixtures/sqlite/deerflow_app.db (a scratch copy) with SqliteSaver and the database
`dfck_deerflow_app` (loaded by scripts/pg-test-server.sh from fixtures/postgres/deerflow_app.sql;
--pg-url or TEST_POSTGRES_URI names the server) with PostgresSaver, and writes what
`get_state` returns at every checkpoint through the fixture's graph (gen_fixtures'
build_deerflow_graph, delta messages with DeerFlow's reducer at the cadence the fixture was
written with) to fixtures/expected/deerflow_app.json and fixtures/expected-pg/deerflow_app.json,
in the format of gen_fixtures.build_expected. The Rust tests compare dfck's state of every
checkpoint with them (tests/it/inspect_fixtures.rs, postgres_fixtures.rs): DeerFlow's own tables
beside the checkpoints change nothing of what the library reads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import gen_fixtures as gf  # noqa: E402
import scenario as S  # noqa: E402
from graphs import messages_annotation  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402


def threads_of(rows: list[tuple]) -> list[str]:
    return sorted({r[0] for r in rows})


def sqlite_expected(fixtures: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "deerflow_app.db"
        shutil.copyfile(fixtures / "sqlite" / "deerflow_app.db", path)
        st = object.__new__(gf.Store)
        st.path = path
        st.conn = sqlite3.connect(str(path), check_same_thread=False)
        st.saver = SqliteSaver(st.conn)
        st.threads, st.runs = {}, {}
        graph = gf.build_deerflow_graph(
            messages_annotation("delta", S.SNAPSHOT_FREQUENCY, reducer="deerflow"), st.saver)
        for tid in threads_of(st.conn.execute("SELECT thread_id FROM checkpoints").fetchall()):
            st.register(tid, graph)
        out = gf.build_expected(st, "deerflow_app.db")
        st.conn.close()
        return out


def pg_expected(url: str) -> dict:
    import psycopg
    from psycopg.rows import dict_row

    import gen_pg_fixtures as gp
    from langgraph.checkpoint.postgres import PostgresSaver

    st = object.__new__(gp.PgStore)
    st.url, st.stem, st.dbname = url, "deerflow_app", "dfck_deerflow_app"
    st.conninfo = gp.db_conninfo(url, st.dbname)
    st.conn = psycopg.Connection.connect(st.conninfo, autocommit=True, prepare_threshold=0,
                                         row_factory=dict_row)
    st.saver = PostgresSaver(st.conn)
    st.threads, st.runs = {}, {}
    graph = gf.build_deerflow_graph(
        messages_annotation("delta", S.SNAPSHOT_FREQUENCY, reducer="deerflow"), st.saver)
    for tid in threads_of(st.q("SELECT thread_id FROM checkpoints")):
        st.register(tid, graph)
    try:
        return gp.build_expected_pg(st)
    finally:
        st.close()


def write(path: Path, doc: dict) -> None:
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    n = sum(len(ns["checkpoints"]) for t in doc["threads"] for ns in t["namespaces"])
    print(f"{path}: {len(doc['threads'])} threads, {n} checkpoints", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"))
    ap.add_argument("--out", default="fixtures")
    args = ap.parse_args()
    out = Path(args.out)
    write(out / "expected" / "deerflow_app.json", sqlite_expected(out))
    if args.pg_url:
        write(out / "expected-pg" / "deerflow_app.json", pg_expected(args.pg_url))
    else:
        print("no --pg-url: fixtures/expected-pg/deerflow_app.json not written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
