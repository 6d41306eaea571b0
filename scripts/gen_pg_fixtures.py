#!/usr/bin/env python3
"""Generate dfck's Postgres test fixtures with the real PostgresSaver.

    TEST_POSTGRES_URI=$(scripts/pg-test-server.sh start)
    .venv/bin/python scripts/gen_pg_fixtures.py --pg-url "$TEST_POSTGRES_URI" --out fixtures
    .venv/bin/python scripts/check_pg_fixtures.py --pg-url "$TEST_POSTGRES_URI" --out fixtures
    scripts/pg-test-server.sh stop

Sibling of gen_fixtures.py: the same scenario scripts (imported from it, unchanged) run
against langgraph-checkpoint-postgres's PostgresSaver (setup() run: migrations v0..9).
Each stem gets its own fresh database "dfckgen_<stem>" on the given server (the URL must
name a role that may CREATE/DROP DATABASE; its own database is only used to do that).
Afterwards each database is saved as a plain-SQL dump

    pg_dump --no-owner --no-privileges --no-comments --inserts

into fixtures/postgres/<stem>.sql. INSERT statements instead of COPY so that the dumps
can also be replayed by a client library's simple-query batch (no COPY FROM stdin);
`psql -v ON_ERROR_STOP=1 -f <stem>.sql` into an empty database restores them. Lines
that tie a dump to one pg_dump build are removed: the "Dumped from/by ... version"
comments and the per-dump random \\restrict / \\unrestrict keys (pg_dump >= 15.14),
which older psql builds do not understand.

Expected JSON fixtures/expected-pg/<stem>.json has exactly the format of
fixtures/expected/<stem>.json (see gen_fixtures.py's docstring), computed through the
PostgresSaver: values = graph.get_state(...) per checkpoint, stored, graph_defaults,
writes = number of checkpoint_writes rows of that checkpoint. messages_encoding is judged
on the channel_values that PostgresSaver.get_tuple rebuilds (inline JSONB values + blobs
looked up by (channel, version)): "plain" (a list), "snapshot" (a _DeltaSnapshot),
"absent" (versioned, no value), "unversioned" (no version). "db" is "<stem>.sql".

Stores (same threads as the SQLite twins; see fixtures/README.md):
  full, delta_k1, delta_k3, delta_k10, exit, subgraph, values, deerflow, mixed
  shallow   ShallowPostgresSaver (deprecated, still shipped in 3.2.0), thread t-shallow;
            a layout dfck must refuse (no checkpoint_id in checkpoints, no version in blobs)
  notlg     unrelated tables only
  future    a small PostgresSaver db whose checkpoint_migrations has an extra row v=10
The last three have no expected JSON.
"""

from __future__ import annotations

import argparse
import importlib.metadata as im
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402
from psycopg.rows import dict_row, tuple_row  # noqa: E402
from langgraph.checkpoint.postgres import PostgresSaver  # noqa: E402
from langgraph.checkpoint.postgres.shallow import ShallowPostgresSaver  # noqa: E402
from langgraph.checkpoint.serde.types import _DeltaSnapshot  # noqa: E402

import gen_fixtures as gf  # noqa: E402
from graphs import build_conv_graph, messages_annotation  # noqa: E402

VERSION_PACKAGES = [
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "ormsgpack",
    "psycopg",
]

DB_PREFIX = "dfckgen_"


def versions() -> dict[str, str]:
    return {p: im.version(p) for p in VERSION_PACKAGES}


def db_conninfo(url: str, dbname: str) -> str:
    """The server URL/conninfo with its database replaced."""
    return make_conninfo(url, dbname=dbname)


def admin_connect(url: str) -> psycopg.Connection:
    return psycopg.Connection.connect(url, autocommit=True)


def recreate_db(url: str, dbname: str) -> None:
    with admin_connect(url) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(sql.Identifier(dbname)))


def drop_db(url: str, dbname: str) -> None:
    with admin_connect(url) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))


# ---------------------------------------------------------------------------------------
# A gen_fixtures.Store look-alike on Postgres (the scenario functions only use
# saver / register / cfg / threads / runs).
# ---------------------------------------------------------------------------------------


class PgStore(gf.Store):
    def __init__(self, url: str, stem: str, saver_cls: Any = PostgresSaver, setup: bool = True) -> None:
        self.url = url
        self.stem = stem
        self.dbname = DB_PREFIX + stem
        recreate_db(url, self.dbname)
        self.conninfo = db_conninfo(url, self.dbname)
        # exactly what PostgresSaver.from_conn_string opens
        self.conn = psycopg.Connection.connect(
            self.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            self.saver = saver_cls(self.conn)
        if setup:
            self.saver.setup()
        self.threads: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, int] = {}

    def q(self, query: str, params: tuple = ()) -> list[tuple]:
        with self.conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else []

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------------------------------
# Expected JSON (same format as gen_fixtures.build_expected)
# ---------------------------------------------------------------------------------------


def messages_encoding_pg(checkpoint: dict) -> str:
    """On the channel_values PostgresSaver.get_tuple rebuilds (inline JSONB + blobs)."""
    cv = checkpoint.get("channel_values", {})
    if "messages" in cv:
        v = cv["messages"]
        if isinstance(v, _DeltaSnapshot):
            return "snapshot"
        if isinstance(v, list):
            return "plain"
        # e.g. an inline `true` snapshot marker whose blob is missing: never seen so far
        raise AssertionError(f"unexpected rebuilt messages value {type(v)!r}: {v!r}")
    if "messages" in checkpoint.get("channel_versions", {}):
        return "absent"
    return "unversioned"


# checkpoint_expected() (shared with the SQLite generator) looks this name up at call time
gf.messages_encoding = messages_encoding_pg


def build_expected_pg(st: PgStore) -> dict:
    threads_out = []
    for tid in sorted(st.threads):
        entry = st.threads[tid]
        ns_rows = st.q(
            "SELECT checkpoint_ns FROM checkpoints WHERE thread_id=%s GROUP BY checkpoint_ns"
            ' ORDER BY checkpoint_ns <> \'\', MIN(checkpoint_id COLLATE "C")',
            (tid,),
        )
        namespaces = []
        any_marker = False
        for (ns,) in ns_rows:
            graph = gf.graph_for_ns(entry, ns)
            rows = st.q(
                "SELECT c.checkpoint_id, c.metadata, (SELECT COUNT(*) FROM checkpoint_writes w"
                " WHERE w.thread_id=c.thread_id AND w.checkpoint_ns=c.checkpoint_ns"
                " AND w.checkpoint_id=c.checkpoint_id)"
                ' FROM checkpoints c WHERE thread_id=%s AND checkpoint_ns=%s ORDER BY checkpoint_id COLLATE "C" DESC',
                (tid, ns),
            )
            cps = []
            for cid, md, nw in rows:
                md = md or {}
                if md.get(gf.MARKER_KEY) == "delta":
                    any_marker = True
                cps.append(gf.checkpoint_expected(st, graph, tid, ns, cid, int(nw)))
            namespaces.append({"checkpoint_ns": ns, "checkpoints": cps})
        threads_out.append(
            {
                "thread_id": tid,
                "mode": gf.thread_mode(namespaces),
                "reducer": "deerflow" if any_marker else "langgraph",
                "namespaces": namespaces,
            }
        )
    return {"db": f"{st.stem}.sql", "versions": versions(), "threads": threads_out, "errors": collect_errors_pg(st)}


READABLE = ("msgpack", "null", "bytes", "bytearray")


def collect_errors_pg(st: PgStore) -> list[dict]:
    """Rows a reader without Python cannot decode (checkpoints.type is always NULL in
    Postgres: the checkpoint itself is JSONB; blob and write rows carry the tags)."""
    errs = []
    for tid, ns, ch, ver, typ in st.q(
        "SELECT thread_id, checkpoint_ns, channel, version, type FROM checkpoint_blobs"
        " WHERE type NOT IN ('msgpack', 'null', 'bytes', 'bytearray', 'empty')"
        ' ORDER BY thread_id, checkpoint_ns, channel, version COLLATE "C"'
    ):
        what = "pickle blob" if typ == "pickle" else f"{typ} blob"
        errs.append({"what": what, "thread_id": tid, "checkpoint_ns": ns, "channel": ch, "version": ver, "type": typ})
    for tid, ns, cid, task_id, idx, ch, typ in st.q(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type FROM checkpoint_writes"
        " WHERE type NOT IN ('msgpack', 'null', 'bytes', 'bytearray') OR type IS NULL"
        ' ORDER BY thread_id, checkpoint_ns, checkpoint_id COLLATE "C", task_path, task_id, idx'
    ):
        what = "pickle write" if typ == "pickle" else f"{typ} write"
        errs.append(
            {"what": what, "thread_id": tid, "checkpoint_id": cid, "checkpoint_ns": ns, "type": typ,
             "task_id": task_id, "idx": idx, "channel": ch}
        )
    return errs


# ---------------------------------------------------------------------------------------
# Extra stores without expected JSON
# ---------------------------------------------------------------------------------------


def gen_shallow(st: PgStore) -> None:
    g = build_conv_graph(messages_annotation("full"), st.saver)
    tid = "t-shallow"
    st.register(tid, g)
    g.invoke({"messages": [gf.h("calc 1+2", "h-0")]}, st.cfg(tid), **gf.SYNC)
    g.invoke({"messages": [gf.h("second turn", "h-1")]}, st.cfg(tid), **gf.SYNC)
    n = len(g.get_state({"configurable": {"thread_id": tid}}).values["messages"])
    rows = st.q("SELECT count(*) FROM checkpoints")[0][0]
    assert rows == 1, rows  # shallow: one row per (thread, ns)
    print(f"  shallow: t-shallow head has {n} messages, {rows} checkpoint row", file=sys.stderr)


NOTLG_SQL = """
CREATE TABLE users (id SERIAL PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE, created_at TIMESTAMPTZ NOT NULL DEFAULT '2025-01-02T03:04:05Z');
CREATE TABLE orders (id BIGSERIAL PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), total NUMERIC(10,2) NOT NULL, items JSONB NOT NULL DEFAULT '[]', note BYTEA);
CREATE TABLE threads (thread_id TEXT PRIMARY KEY, title TEXT);
CREATE INDEX orders_user_idx ON orders(user_id);
CREATE VIEW user_totals AS SELECT u.name, SUM(o.total) AS total FROM users u JOIN orders o ON o.user_id = u.id GROUP BY u.name;
INSERT INTO users (name, email) VALUES ('alice', 'alice@example.com'), ('bob', 'bob@example.com'), ('张三', NULL);
INSERT INTO orders (user_id, total, items, note) VALUES (1, 12.50, '[{"sku": "a", "qty": 1}]', '\\x00ff'), (1, 3.00, '[]', NULL), (2, 99.99, '[{"sku": "b"}]', NULL);
INSERT INTO threads VALUES ('t-linear', 'not a LangGraph thread');
"""


def gen_notlg(st: PgStore) -> None:
    st.conn.execute(NOTLG_SQL, prepare=False)


def gen_future(st: PgStore) -> None:
    g = build_conv_graph(messages_annotation("full"), st.saver)
    tid = "t-future"
    st.register(tid, g)
    g.invoke({"messages": [gf.h("calc 1+2", "h-0")]}, st.cfg(tid), **gf.SYNC)
    st.conn.execute("INSERT INTO checkpoint_migrations (v) VALUES (10)")


# ---------------------------------------------------------------------------------------
# Dumps
# ---------------------------------------------------------------------------------------

DROP_LINE = re.compile(r"^(\\restrict |\\unrestrict |-- Dumped from database version|-- Dumped by pg_dump version)")


def find_pg_dump() -> str:
    for cand in (os.environ.get("DFCK_PG_BIN", "/usr/lib/postgresql/15/bin") + "/pg_dump", "/usr/bin/pg_dump"):
        if os.access(cand, os.X_OK):
            return cand
    raise SystemExit("pg_dump not found (set DFCK_PG_BIN)")


def dump_db(conninfo: str, path: Path) -> int:
    out = subprocess.run(
        [find_pg_dump(), "--no-owner", "--no-privileges", "--no-comments", "--inserts",
         "--format=plain", "--encoding=UTF8", "--dbname", conninfo],
        check=True, capture_output=True,
    ).stdout.decode("utf-8")
    lines = [ln for ln in out.split("\n") if not DROP_LINE.match(ln)]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    path.write_text(text, encoding="utf-8")
    return path.stat().st_size


# ---------------------------------------------------------------------------------------


STORES: list[tuple[str, Any, Any, bool]] = [
    # (stem, generator, saver class, expected JSON?)
    ("full", lambda st: gf.gen_twin(st, "full", None), PostgresSaver, True),
    ("delta_k1", lambda st: gf.gen_twin(st, "delta", 1), PostgresSaver, True),
    ("delta_k3", lambda st: gf.gen_twin(st, "delta", 3), PostgresSaver, True),
    ("delta_k10", lambda st: gf.gen_twin(st, "delta", 10), PostgresSaver, True),
    ("forks_full", lambda st: gf.gen_forks(st, "full", None), PostgresSaver, True),
    ("forks_delta_k1", lambda st: gf.gen_forks(st, "delta", 1), PostgresSaver, True),
    ("forks_delta_k4", lambda st: gf.gen_forks(st, "delta", 4), PostgresSaver, True),
    ("retention", lambda st: __import__("retention").gen_retention(st), PostgresSaver, True),
    ("retention_race", lambda st: __import__("retention").gen_retention_race(st), PostgresSaver, True),
    ("exit", gf.gen_exit, PostgresSaver, True),
    ("subgraph", gf.gen_subgraph, PostgresSaver, True),
    ("values", gf.gen_values, PostgresSaver, True),
    ("deerflow", gf.gen_deerflow, PostgresSaver, True),
    ("mixed", gf.gen_mixed, PostgresSaver, True),
    ("shallow", gen_shallow, ShallowPostgresSaver, False),
    ("notlg", gen_notlg, None, False),
    ("future", gen_future, PostgresSaver, False),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"),
                    help="server URL (default $TEST_POSTGRES_URI), e.g. from scripts/pg-test-server.sh start")
    ap.add_argument("--out", default="fixtures", help="output directory (default: fixtures)")
    ap.add_argument("--only", nargs="*", help="generate only these stems")
    ap.add_argument("--keep", action="store_true", help=f"keep the {DB_PREFIX}<stem> databases")
    args = ap.parse_args()
    if not args.pg_url:
        ap.error("--pg-url (or TEST_POSTGRES_URI) is required")
    conninfo_to_dict(args.pg_url)  # validate early
    out = Path(args.out)
    dump_dir = out / "postgres"
    exp_dir = out / "expected-pg"
    dump_dir.mkdir(parents=True, exist_ok=True)
    exp_dir.mkdir(parents=True, exist_ok=True)
    for stem, gen, saver_cls, want_expected in STORES:
        if args.only and stem not in args.only:
            continue
        if saver_cls is None:
            st = PgStore(args.pg_url, stem, saver_cls=PostgresSaver, setup=False)
        else:
            st = PgStore(args.pg_url, stem, saver_cls=saver_cls)
        try:
            gen(st)
            n_cp = "-"
            if want_expected:
                expected = build_expected_pg(st)
                text = json.dumps(expected, ensure_ascii=False, indent=1) + "\n"
                (exp_dir / f"{stem}.json").write_text(text, encoding="utf-8")
                n_cp = sum(len(ns["checkpoints"]) for t in expected["threads"] for ns in t["namespaces"])
            counts = {}
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
                if st.q("SELECT to_regclass(%s)", (table,))[0][0] is not None:
                    counts[table] = st.q(f"SELECT count(*) FROM {table}")[0][0]
        finally:
            st.close()
        size = dump_db(st.conninfo, dump_dir / f"{stem}.sql")
        if not args.keep:
            drop_db(args.pg_url, st.dbname)
        print(f"{dump_dir / (stem + '.sql')}: {len(st.threads)} threads, {n_cp} checkpoints, rows {counts}, "
              f"{size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
