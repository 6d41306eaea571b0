#!/usr/bin/env python3
"""Independent check of dfck on DeerFlow's own tables, with SQLAlchemy and the real LangGraph.

    .venv/bin/python scripts/check_deerflow_db.py [--dfck target/release/dfck] [--pg-url URL]
        [--only delete|erase|copy] [--backend sqlite|postgres|both] [--reference]

Store: the DeerFlow fixture (fixtures/sqlite/deerflow_app.db; `dfck_deerflow_app` on the server of
scripts/pg-test-server.sh; its threads and rows: fixtures/deerflow-schema/README.md). DeerFlow is
not imported: tables are read through SQLAlchemy reflection, checkpoints through SqliteSaver /
PostgresSaver and the fixture's graph (gen_fixtures.build_deerflow_graph, delta messages with
DeerFlow's reducer). Every run works on fresh copies (temp files; databases `dfck_pycheck_df_*`
from the template `dfck_deerflow_app` on --pg-url / TEST_POSTGRES_URI, with session time zone
Asia/Shanghai so that a timestamp handled without its offset shows) and compares with an
untouched copy. Active = a `runs` row pending or running, whatever its lease: …03 (running, live
lease), …04 (running, lease expired), …05 (pending delete reservation), …0b (pending, NULL lease).

delete  `dfck --db W delete …01 …02 …09 …03 …05 --apply --format json` exits 1 (…03, …05 refused)
        and W equals the untouched copy minus the deleted threads' rows in the checkpoint tables
        and threads_meta: no new threads_meta-without-checkpoints or checkpoints-without-
        threads_meta thread, no row of a deleted thread left there, the refused threads' rows
        identical in every table, the same thread list per owner, no new operation_kind='delete'
        `runs` row (dfck's reservation is removed), every other table unchanged.
erase   per user (alice: 3 erased, 2 refused; admin: 1 erased, 2 refused; bob: 1 erased),
        `dfck --db W delete --user U --erase --apply --format json` (exit 1 if one is refused):
        W equals the untouched copy minus every row whose `thread_id` is an erased thread, in
        every table with that column (checkpoint tables, threads_meta, runs, run_events,
        feedback, mcp_tasks, channel_conversations, scheduled_tasks, scheduled_task_runs).
        `scheduled_tasks.last_thread_id` does not make a row the thread's (a fresh_thread_per_run
        cron task keeps its schedule): such rows stay unchanged, their number is printed. Rows
        of a thread without threads_meta (…0d's leftovers) are no thread of the user's and stay;
        users, agents, channel connections are not thread data and stay.
        Both: the real saver reads every kept thread's latest state as on the untouched copy,
        and one kept thread continued one turn on both copies gives the same state.
copy    both: SQLite fixture -> `copy --all --to PG --apply` into a database holding DeerFlow's
        schema and no rows (fixtures/deerflow-schema/postgres.sql + the alembic_version row of
        SOURCE's head, as DeerFlow's bootstrap "create_all + alembic stamp head" leaves it) ->
        `copy --all --to BACK.db --apply` into a SQLite file made alike from sqlite.sql
        (--backend sqlite: SQLite -> SQLite; postgres: the PostgreSQL fixture -> PostgreSQL).
        Every DeerFlow table (those of sqlite.sql, alembic_version included) holds the
        original's rows in every target, read through SQLAlchemy and normalised by reflected
        type (JSON parsed, DATETIME/timestamptz as UTC datetimes, 0/1 as bool); SQLite targets
        store values as DeerFlow does (DATETIME text `YYYY-MM-DD HH:MM:SS.ffffff`, BOOLEAN 0/1,
        JSON text; DeerFlow compares SQLite datetimes as text); run_events_id_seq hands out an id
        above max(id); checkpoint and write keys are the original's (SQLite to SQLite: writes
        byte for byte); every thread's latest state reads equal everywhere; one thread continued
        on the source and the last target gives the same state.

--reference checks a Python rendition of the contract instead of dfck (SQL deletes of the rows
above; for copy, fixture copies stand in for the targets, without webhook_deliveries, which
DeerFlow writes on PostgreSQL only): 0 mismatches shows the checker agrees with the contract and
the fixture. One line per check, MISMATCH lines on stderr, exit 1 on any mismatch (a dfck exit
code other than the expected one, e.g. 2 for an unknown command, is one). Secret columns
(users.password_hash, channel_* encrypted and hash columns) are never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Callable, NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "deerflow"))

from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from sqlalchemy import MetaData, create_engine, select, text  # noqa: E402
from sqlalchemy.pool import NullPool  # noqa: E402
from sqlalchemy.sql import sqltypes  # noqa: E402

import fixturelib  # noqa: E402
from check_pruned import with_db  # noqa: E402
import scenario as S  # noqa: E402  (scripts/deerflow/scenario.py: the fixture's ids, stdlib only)
from gen_fixtures import build_deerflow_graph  # noqa: E402
from graphs import HumanMessage, messages_annotation  # noqa: E402

STEM = "deerflow_app"
CHECKPOINT_TABLES = {"checkpoints", "writes", "checkpoint_writes", "checkpoint_blobs"}
SECRET = {("users", "password_hash"), ("channel_credentials", "encrypted_access_token"),
          ("channel_credentials", "encrypted_refresh_token"), ("channel_credentials", "encrypted_extra_json"),
          ("channel_oauth_states", "code_verifier_encrypted"), ("channel_oauth_states", "state_hash"),
          ("channel_oauth_states", "nonce_hash")}
DELETE_NAMED = [S.T_A, S.T_B, S.T_I, S.T_C, S.T_E]  # alice's ordinary threads + running + reserved
ERASE_USERS = [S.U_ALICE, S.U_ADMIN, S.U_BOB]
# sessions on the scratch databases are not in UTC, so a timestamp written or read without
# its offset shows up as a shifted instant (DeerFlow's drivers send and read aware datetimes)
PG_TIMEZONE = "Asia/Shanghai"
DT_TEXT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}")


class Tab(NamedTuple):
    cols: list[str]
    pk: list[int]
    rows: list[tuple]


Snap = dict[str, Tab]


class Out:
    """Collects mismatches; prints one line per check with the mismatches it added."""

    def __init__(self) -> None:
        self.errs: list[str] = []
        self.mark = 0

    def bad(self, label: str, msg: str) -> None:
        self.errs.append(f"{label}: {msg}")

    def line(self, label: str, msg: str) -> None:
        n, self.mark = len(self.errs) - self.mark, len(self.errs)
        print(f"{label}: {msg}" + (f" — {n} MISMATCH(ES)" if n else ""))


class Store:
    """One SQLite file or PostgreSQL database: the --db dfck gets, an engine, a LangGraph graph."""

    def __init__(self, kind: str, db: str, name: str) -> None:
        self.kind, self.db, self.name = kind, db, name
        url = f"sqlite:///{db}" if kind == "sqlite" else "postgresql+psycopg://" + db.split("://", 1)[1]
        self.engine = create_engine(url, poolclass=NullPool)
        self.conns: list[Any] = []
        self._graph: Any = None

    def graph(self) -> Any:
        if self._graph is None:
            if self.kind == "sqlite":
                conn = sqlite3.connect(self.db, check_same_thread=False, isolation_level=None)
                saver = SqliteSaver(conn)
            else:
                import psycopg
                from langgraph.checkpoint.postgres import PostgresSaver
                from psycopg.rows import dict_row

                conn = psycopg.connect(self.db, autocommit=True, prepare_threshold=0, row_factory=dict_row)
                saver = PostgresSaver(conn)
            self.conns.append(conn)
            ann = messages_annotation("delta", S.SNAPSHOT_FREQUENCY, reducer="deerflow")
            self._graph = build_deerflow_graph(ann, saver)
        return self._graph

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.conns.clear()
        self._graph = None
        self.engine.dispose()


class Lab:
    """Makes fresh stores (fixture copies, schema-only DeerFlow databases) and removes them."""

    def __init__(self, fixtures: Path, tmp: Path, server: str | None) -> None:
        self.fixtures, self.tmp, self.server = fixtures, tmp, server
        self.stores: list[Store] = []
        self.pg_dbs: list[str] = []
        src = (fixtures / "deerflow-schema" / "SOURCE").read_text(encoding="utf-8")
        self.alembic_head = re.search(r"^alembic_head:\s*(\S+)", src, re.M).group(1)
        ddl = (fixtures / "deerflow-schema" / "sqlite.sql").read_text(encoding="utf-8")
        self.df_tables = sorted(set(re.findall(r"^CREATE TABLE (\w+)", ddl, re.M)))

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as admin:
            admin.execute(sql)

    def _new(self, kind: str, name: str, template: str | None) -> Store:
        if kind == "sqlite":
            path = self.tmp / f"{name}.db"
            path.unlink(missing_ok=True)
            if template:
                shutil.copyfile(template, path)
            st = Store(kind, str(path), name)
        else:
            db = f"dfck_pycheck_df_{name}"
            self._admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            self._admin(f'CREATE DATABASE "{db}"' + (f' TEMPLATE "{template}"' if template else ""))
            self._admin(f'ALTER DATABASE "{db}" SET timezone TO {PG_TIMEZONE!r}')
            self.pg_dbs.append(db)
            st = Store(kind, with_db(self.server, db), name)
        self.stores.append(st)
        return st

    def fixture_copy(self, kind: str, name: str) -> Store:
        return self._new(kind, name, str(self.fixtures / "sqlite" / f"{STEM}.db") if kind == "sqlite" else f"dfck_{STEM}")

    def schema_only(self, kind: str, name: str) -> Store:
        """DeerFlow's schema at the alembic head, no rows: the DDL, then the version row."""
        st = self._new(kind, name, None)
        ddl = (self.fixtures / "deerflow-schema" / f"{kind}.sql").read_text(encoding="utf-8")
        if kind == "sqlite":
            conn = sqlite3.connect(st.db)
            conn.executescript(ddl)
            conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (self.alembic_head,))
            conn.commit()
            conn.close()
        else:
            import psycopg

            ddl = "\n".join(line for line in ddl.splitlines() if not line.startswith("\\"))
            with psycopg.connect(st.db, autocommit=True) as conn:
                conn.execute(ddl)
                conn.execute("INSERT INTO public.alembic_version (version_num) VALUES (%s)", (self.alembic_head,))
        return st

    def cleanup(self) -> None:
        for st in self.stores:
            st.close()
        for db in self.pg_dbs:
            self._admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        self.stores.clear()
        self.pg_dbs.clear()


def reflect(st: Store) -> MetaData:
    md = MetaData()
    md.reflect(st.engine)
    return md


def raw_snapshot(st: Store) -> Snap:
    """Every table's rows as stored: SQLite values as sqlite3 returns them, PostgreSQL values
    in their text form (bytea hex, json text, timestamptz text)."""
    out: Snap = {}
    with st.engine.connect() as conn:
        for name, t in reflect(st).tables.items():
            cols = [c.name for c in t.columns]
            sel = ", ".join(f'"{c}"' + ("::text" if st.kind == "postgres" else "") for c in cols)
            rows = sorted((tuple(r) for r in conn.exec_driver_sql(f'SELECT {sel} FROM "{name}"')), key=repr)
            out[name] = Tab(cols, [cols.index(c.name) for c in t.primary_key], rows)
    return out


def norm_value(v: Any, typ: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, datetime):
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
    if isinstance(typ, sqltypes.Boolean):
        return bool(v)
    if isinstance(typ, sqltypes.JSON):
        return "json:" + json.dumps(v, sort_keys=True, ensure_ascii=False)
    return bytes(v) if isinstance(v, memoryview) else v


def norm_snapshot(st: Store, tables: list[str], out: Out, label: str) -> Snap:
    """DeerFlow's tables as SQLAlchemy reads them through the reflected types, normalised."""
    md, snap = reflect(st), {}
    with st.engine.connect() as conn:
        for name in (n for n in tables if n in md.tables):
            t = md.tables[name]
            cols = [c.name for c in t.columns]
            try:
                rows = [tuple(norm_value(v, c.type) for v, c in zip(r, t.columns)) for r in conn.execute(select(t))]
            except Exception as e:  # noqa: BLE001  (e.g. a DATETIME text SQLAlchemy cannot parse)
                out.bad(label, f"{name}: SQLAlchemy cannot read the table: {type(e).__name__}: {e}")
                rows = []
            snap[name] = Tab(cols, [cols.index(c.name) for c in t.primary_key], sorted(rows, key=repr))
    return snap


def storage_problem(v: Any, typ: Any) -> bool:
    """Whether a raw SQLite value is not stored the way DeerFlow's SQLAlchemy stores the type."""
    if isinstance(typ, sqltypes.DateTime):
        return not (isinstance(v, str) and DT_TEXT.fullmatch(v))
    if isinstance(typ, sqltypes.Boolean):
        return type(v) is not int or v not in (0, 1)
    if isinstance(typ, sqltypes.JSON):
        try:
            return not isinstance(v, str) or (json.loads(v) is None and v != "null")
        except ValueError:
            return True
    if isinstance(typ, sqltypes.Integer):
        return type(v) is not int
    return isinstance(typ, sqltypes.String) and not isinstance(v, str)


def sqlite_format(label: str, st: Store, tables: list[str], out: Out) -> int:
    md, n = reflect(st), 0
    with st.engine.connect() as conn:
        for t in (md.tables[n] for n in tables if n in md.tables):
            sel = ", ".join(f'"{c.name}"' for c in t.columns)
            for r in conn.exec_driver_sql(f'SELECT {sel} FROM "{t.name}"'):
                for v, c in zip(r, t.columns):
                    n += v is not None
                    if v is not None and storage_problem(v, c.type):
                        out.bad(label, f"{t.name}.{c.name} stored as {type(v).__name__} {shown(t.name, c.name, v)}, "
                                       f"not as DeerFlow stores {type(c.type).__name__}")
    return n


def shown(table: str, col: str, v: Any) -> str:
    return "<secret>" if (table, col) in SECRET else repr(v)[:80]


def key_of(table: str, tab: Tab, row: tuple) -> str:
    if any((table, tab.cols[i]) in SECRET for i in tab.pk):
        return "<secret key>"
    return "/".join(str(row[i]) for i in tab.pk) or "<row>"


def diff_snap(label: str, got: Snap, exp: Snap, out: Out, only: list[str] | None = None) -> tuple[int, int]:
    """Compares tables row for row (as multisets); returns (tables, rows) compared."""
    names, rows = only if only is not None else sorted(set(got) | set(exp)), 0
    for name in names:
        g, e = got.get(name), exp.get(name)
        if g is None or e is None or g.cols != e.cols:
            out.bad(label, f"{name}: " + ("table missing" if g is None else "unexpected table" if e is None
                                          else f"columns {g.cols} instead of {e.cols}"))
            continue
        rows += len(e.rows)
        if g.rows == e.rows:
            continue
        pk = e.pk or list(range(len(e.cols)))
        gk, ek = ({tuple(r[i] for i in pk): r for r in tab.rows} for tab in (g, e))
        msgs = [f"row {key_of(name, e, ek[k])} missing" for k in ek if k not in gk]
        msgs += [f"unexpected row {key_of(name, g, gk[k])}" for k in gk if k not in ek]
        for k in ek.keys() & gk.keys():
            cols = [i for i, (a, b) in enumerate(zip(gk[k], ek[k])) if a != b]
            if cols:
                msgs.append(f"row {key_of(name, e, ek[k])}: " + ", ".join(
                    f"{e.cols[i]} = {shown(name, e.cols[i], gk[k][i])} instead of {shown(name, e.cols[i], ek[k][i])}"
                    for i in cols))
        msgs = msgs or [f"{len(g.rows)} rows instead of {len(e.rows)} (duplicate keys)"]
        for m in msgs[:6] + ([f"… and {len(msgs) - 6} more row differences"] if len(msgs) > 6 else []):
            out.bad(label, f"{name}: {m}")
    return len(names), rows


def column(snap: Snap, table: str, col: str) -> list[Any]:
    tab = snap.get(table)
    return [r[tab.cols.index(col)] for r in tab.rows] if tab and col in tab.cols else []


def thread_tables(snap: Snap) -> list[str]:
    return sorted(t for t, tab in snap.items() if "thread_id" in tab.cols)


def thread_rows(snap: Snap, table: str, threads: set[str]) -> list[tuple]:
    rows = snap[table].rows if table in snap else []
    return [r for r, t in zip(rows, column(snap, table, "thread_id")) if t in threads]


def without(snap: Snap, threads: set[str], tables: set[str]) -> Snap:
    return {t: tab._replace(rows=[r for r in tab.rows if r[tab.cols.index("thread_id")] not in threads])
            if t in tables else tab for t, tab in snap.items()}


def active_threads(snap: Snap) -> set[str]:
    return {t for t, s in zip(column(snap, "runs", "thread_id"), column(snap, "runs", "status"))
            if s in ("pending", "running")}


def threads_per_user(snap: Snap) -> dict[Any, list[str]]:
    out: dict[Any, list[str]] = {}
    for u, t in zip(column(snap, "threads_meta", "user_id"), column(snap, "threads_meta", "thread_id")):
        out.setdefault(u, []).append(t)
    return {k: sorted(v) for k, v in out.items()}


def latest(st: Store, tid: str) -> tuple:
    snap = st.graph().get_state({"configurable": {"thread_id": tid}})
    return fixturelib.render_values(dict(snap.values)), tuple(snap.next)


def lg_compare(label: str, stores: list[Store], threads: list[str], out: Out) -> int:
    for tid in threads:
        try:
            states = [latest(st, tid) for st in stores]
        except Exception as e:  # noqa: BLE001
            out.bad(label, f"{tid}: get_state raised {type(e).__name__}: {e}")
            continue
        for st, s in zip(stores[1:], states[1:]):
            if s != states[0]:
                out.bad(label, f"{tid}: latest state on {st.name} differs from {stores[0].name}: "
                               f"{json.dumps(s, ensure_ascii=False, default=str)[:300]}")
    return len(threads)


def lg_continue(label: str, stores: list[Store], threads: list[str], out: Out) -> str | None:
    """One more turn, on every store, of the first thread whose head waits on nothing."""
    tid = next((t for t in threads if latest(stores[0], t)[1] == ()), None)
    if tid is None:
        out.bad(label, "no idle thread to continue")
        return None
    after = []
    for st in stores:
        n = len(latest(st, tid)[0].get("messages", []))
        try:
            st.graph().invoke({"messages": [HumanMessage(content="one more turn after dfck", id="h-dfck-check")]},
                              {"configurable": {"thread_id": tid}}, durability="sync")
        except Exception as e:  # noqa: BLE001
            out.bad(label, f"{tid}: continuing on {st.name} raised {type(e).__name__}: {e}")
            return tid
        after.append(latest(st, tid))
        if len(after[-1][0].get("messages", [])) <= n:
            out.bad(label, f"{tid}: continuing on {st.name} added no message")
    if any(a != after[0] for a in after):
        out.bad(label, f"{tid}: the continued states differ between {', '.join(s.name for s in stores)}")
    return tid


def reference_delete(st: Store, args: list[str]) -> tuple[int, str]:
    snap = raw_snapshot(st)
    if "--user" in args:
        named = set(threads_per_user(snap).get(args[args.index("--user") + 1], []))
    else:
        named = set(args[1:args.index("--apply")])
    refused = named & active_threads(snap)
    gone = sorted(named - refused)
    tables = thread_tables(snap) if "--erase" in args else sorted((CHECKPOINT_TABLES | {"threads_meta"}) & set(snap))
    with st.engine.begin() as conn:
        for t in tables:
            for tid in gone:
                conn.execute(text(f'DELETE FROM "{t}" WHERE thread_id = :t'), {"t": tid})
    return (1 if refused else 0), json.dumps({"deleted": len(gone), "refused": len(refused)})


def run_dfck(ctx: argparse.Namespace, st: Store, args: list[str], code: int, label: str, out: Out) -> bool:
    full = [*args, "--apply", "--format", "json"]
    ref = ctx.reference and args[0] == "delete"
    if ref:
        (rc, stdout), stderr = reference_delete(st, full), ""
    else:
        proc = subprocess.run([ctx.dfck, "--db", st.db, *full], capture_output=True, text=True)
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    args = [a for a in args if not a.endswith(".json")]
    what = ("reference " if ref else "dfck ") + " ".join(
        a[-4:] if a.startswith("df0a") else re.sub(r"://([^:/@]+):[^@/]*@", r"://\1:***@", a) for a in args)
    if rc != code:
        out.bad(label, f"{what} exited {rc}, expected {code}: {stderr.strip()[:400]} {stdout.strip()[:200]}")
        out.line(label, f"{what} exited {rc}, expected {code}; the rest of this check not run")
        return False
    summary = ""
    try:
        doc = json.loads(stdout) if stdout.strip() else {}
        summary = json.dumps({k: v for k, v in doc.items() if not isinstance(v, (dict, list))})[:200] \
            if isinstance(doc, dict) else ""
    except ValueError:
        out.bad(label, f"{what} printed no JSON document: {stdout[:200]}")
    out.line(label, f"{what} exited {rc} as expected {summary}")
    return True


def check_receipt(label: str, path: Path, user: str, gone: set[str], refused: set[str], before: Snap,
                  out: Out) -> None:
    """The erasure receipt: the user, every erased and refused thread, counts, and no content."""
    if not path.exists():
        out.bad(label, f"no erasure receipt at {path.name}")
        return
    text_ = path.read_text(encoding="utf-8")
    doc = json.loads(text_)
    done = {t["thread_id"] for t in doc.get("threads", []) if t.get("status") == "done"}
    ref = {t["thread_id"] for t in doc.get("threads", []) if t.get("status") == "refused"}
    if doc.get("user_id") != user or done != gone or ref != refused:
        out.bad(label, f"receipt names user {doc.get('user_id')}, done {sorted(done)}, refused {sorted(ref)}")
    if doc.get("complete") != (not refused) or not doc.get("dfck_version") or not doc.get("finished_at"):
        out.bad(label, "receipt lacks complete/dfck_version/finished_at")
    want = len(thread_rows(before, "run_events", gone)) if "run_events" in before else 0
    if doc.get("totals", {}).get("run_events", 0) != want:
        out.bad(label, f"receipt counts {doc.get('totals', {}).get('run_events')} run_events, expected {want}")
    contents = [str(c) for c in column(before, "run_events", "content") if c and len(str(c)) > 12] \
        if "run_events" in before else []
    leaked = [c for c in contents if c in text_]
    if leaked:
        out.bad(label, f"receipt holds {len(leaked)} run_events content value(s)")
    out.line(label, f"receipt: {len(done)} erased, {len(ref)} refused, {want} run_events counted, "
             f"none of {len(contents)} event contents in it")


def thread_delete_run(ctx: argparse.Namespace, lab: Lab, kind: str, name: str, args: list[str],
                      pick: Callable[[Snap], set[str]], erase: bool, out: Out) -> None:
    label = f"[{kind}] {name}"
    work, untouched = lab.fixture_copy(kind, f"{name}_work"), lab.fixture_copy(kind, f"{name}_untouched")
    before = raw_snapshot(untouched)
    named = pick(before)
    refused = named & active_threads(before)
    gone = named - refused
    tables = set(thread_tables(before)) if erase else (CHECKPOINT_TABLES | {"threads_meta"}) & set(before)
    exp = without(before, gone, tables)
    print(f"{label}: {len(named)} threads named, {len(gone)} to delete, {len(refused)} active to refuse "
          f"{sorted(t[-4:] for t in refused)}")
    if not run_dfck(ctx, work, args, 1 if refused else 0, label, out):
        return
    after = raw_snapshot(work)

    def lonely(s: Snap) -> tuple[set, set]:
        meta, ckpt = set(column(s, "threads_meta", "thread_id")), set(column(s, "checkpoints", "thread_id"))
        return meta - ckpt, ckpt - meta

    for what, b, a in zip(("threads_meta row without checkpoints", "checkpoints without threads_meta"),
                          lonely(before), lonely(after)):
        for tid in sorted(a - b):
            out.bad(label, f"new {what}: thread {tid}")
    out.line(label, "threads_meta rows without checkpoints / checkpoint threads without threads_meta: "
             f"{' / '.join(str(len(x)) for x in lonely(before))} before, none new")

    left = {t: len(thread_rows(after, t, gone)) for t in sorted(tables & set(after))}
    for t in (t for t, n in left.items() if n):
        out.bad(label, f"{left[t]} rows of deleted threads left in {t}")
    out.line(label, f"{len(gone)} threads deleted: none of their rows left in {', '.join(left)}")

    tt = thread_tables(before)
    for t in (t for t in tt if thread_rows(after, t, refused) != thread_rows(before, t, refused)):
        out.bad(label, f"refused threads' rows in {t} changed")
    out.line(label, f"{len(refused)} refused threads: {sum(len(thread_rows(before, t, refused)) for t in tt)} rows "
             f"in {len(tt)} thread tables identical")

    got_users, exp_users = threads_per_user(after), threads_per_user(exp)
    if got_users != exp_users:
        out.bad(label, f"threads per owner {got_users} instead of {exp_users}")
    out.line(label, f"thread list of {len(exp_users)} owners (NULL included), "
             f"{sum(map(len, exp_users.values()))} threads, as expected")

    def dels(s: Snap) -> set[str]:
        return {r for r, k in zip(column(s, "runs", "run_id"), column(s, "runs", "operation_kind")) if k == "delete"}

    if dels(after) - dels(before):
        out.bad(label, f"operation_kind='delete' runs rows left behind: {sorted(dels(after) - dels(before))}")
    out.line(label, f"no new runs row with operation_kind='delete' ({len(dels(before))} in the fixture)")

    nt, nr = diff_snap(label, after, exp, out)
    ptr = sum(t in gone for t in column(after, "scheduled_tasks", "last_thread_id"))
    out.line(label, f"{nt} tables, {nr} rows equal to the untouched copy minus the deleted threads' rows in "
             f"{len(tables & set(before))} tables" + (f"; {ptr} scheduled_tasks rows keep a last_thread_id of "
                                                       "an erased thread" if erase else ""))

    if "--receipt" in args and not ctx.reference:
        check_receipt(label, Path(args[args.index("--receipt") + 1]), args[args.index("--user") + 1],
                      gone, refused, before, out)

    kept = sorted(set(column(exp, "checkpoints", "thread_id")))
    n = lg_compare(label, [untouched, work], kept, out)
    tid = lg_continue(label, [untouched, work], kept, out)
    out.line(label, f"{'SqliteSaver' if kind == 'sqlite' else 'PostgresSaver'}: {n} kept threads' latest state "
             f"equal to the untouched copy's; thread {tid} continued one turn equally")


def check_delete(ctx: argparse.Namespace, lab: Lab, kind: str, out: Out) -> None:
    try:
        thread_delete_run(ctx, lab, kind, "delete", ["delete", *DELETE_NAMED], lambda s: set(DELETE_NAMED), False, out)
    finally:
        lab.cleanup()


def check_erase(ctx: argparse.Namespace, lab: Lab, kind: str, out: Out) -> None:
    for n, user in enumerate(ERASE_USERS):
        try:
            receipt = lab.tmp / f"receipt_{kind}_{n}.json"
            receipt.unlink(missing_ok=True)
            thread_delete_run(ctx, lab, kind, f"erase{n}",
                              ["delete", "--user", user, "--erase", "--receipt", str(receipt)],
                              lambda s, u=user: set(threads_per_user(s).get(u, [])), True, out)
        finally:
            lab.cleanup()


def seq_check(label: str, st: Store, out: Out) -> str:
    with st.engine.connect() as conn:
        seq = conn.exec_driver_sql("SELECT pg_get_serial_sequence('public.run_events', 'id')").scalar()
        top = conn.exec_driver_sql("SELECT coalesce(max(id), 0) FROM run_events").scalar()
        if seq is None:
            out.bad(label, "run_events.id has no sequence")
            return "no sequence"
        last, called = conn.exec_driver_sql(f"SELECT last_value, is_called FROM {seq}").one()
    nxt = last + 1 if called else last
    if nxt <= top:
        out.bad(label, f"{seq} would hand out {nxt}, not above max(run_events.id) {top}")
    return f"{seq} next value {nxt} (max run_events.id {top})"


LG_KEYS = {"checkpoints": ["thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id"],
           "writes": ["thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type"]}


def lg_keys(snap: Snap) -> dict[str, list]:
    """Checkpoint and write keys, as text (SQLite `writes` / PostgreSQL `checkpoint_writes`)."""
    tabs = {"checkpoints": "checkpoints", "writes": "writes" if "writes" in snap else "checkpoint_writes"}
    return {k: sorted(zip(*(map(str, column(snap, tabs[k], c)) for c in cols))) for k, cols in LG_KEYS.items()}


def check_copy(ctx: argparse.Namespace, lab: Lab, backend: str, out: Out) -> None:
    src = lab.fixture_copy("postgres" if backend == "postgres" else "sqlite", "copy_src")
    chain = [src]
    for i, kind in enumerate(["postgres", "sqlite"] if backend == "both" else [backend]):
        if ctx.reference:  # the fixture copies stand in for what dfck should produce
            chain.append(lab.fixture_copy(kind, f"copy_target{i}"))
            continue
        target = lab.schema_only(kind, f"copy_target{i}")
        if not run_dfck(ctx, chain[-1], ["copy", "--all", "--to", target.db], 0, f"[copy {chain[-1].kind}→{kind}]", out):
            return
        chain.append(target)
    tables = [t for t in lab.df_tables if not (ctx.reference and t == "webhook_deliveries")]
    if ctx.reference:
        print("[copy] reference: fixture copies stand in for the targets; webhook_deliveries not compared")
    want, raw_src = norm_snapshot(src, tables, out, "[copy] source"), raw_snapshot(src)
    if src.kind == "sqlite":
        out.line("[copy] source", f"{sqlite_format('[copy] source', src, tables, out)} values of the original in "
                 "DeerFlow's SQLite format (checker self-check)")
    for st in chain[1:]:
        label = f"[copy] {st.name} ({st.kind})"
        nt, nr = diff_snap(label, norm_snapshot(st, tables, out, label), want, out, only=tables)
        extra = seq_check(label, st, out) if st.kind == "postgres" else \
            f"{sqlite_format(label, st, tables, out)} values stored in DeerFlow's SQLite format"
        out.line(label, f"{nt} DeerFlow tables, {nr} rows equal to the original's (normalised); {extra}")
        raw, same_kind = raw_snapshot(st), st.kind == src.kind == "sqlite"
        got_keys, src_keys = lg_keys(raw), lg_keys(raw_src)
        for k in (k for k in LG_KEYS if got_keys[k] != src_keys[k]):
            out.bad(label, f"{k} keys differ ({len(got_keys[k])} rows instead of {len(src_keys[k])})")
        if same_kind:
            diff_snap(label, raw, raw_src, out, only=["writes"])
        out.line(label, f"{len(src_keys['checkpoints'])} checkpoint and {len(src_keys['writes'])} write keys equal"
                 + (" (writes byte for byte)" if same_kind else ""))
    threads = sorted(set(column(raw_src, "checkpoints", "thread_id")))
    n = lg_compare("[copy]", chain, threads, out)
    tid = lg_continue("[copy]", [src, chain[-1]], threads, out)
    out.line("[copy]", f"{n} threads' latest state equal on {', '.join(s.name for s in chain)}; "
             f"thread {tid} continued one turn equally on {src.name} and {chain[-1].name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"),
                    help="test server (scripts/pg-test-server.sh); default TEST_POSTGRES_URI")
    ap.add_argument("--only", choices=["delete", "erase", "copy"], help="run one check (default: all)")
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both",
                    help="delete/erase: where to run; copy: both = SQLite→PostgreSQL→SQLite")
    ap.add_argument("--reference", action="store_true",
                    help="check a Python rendition of the contract instead of dfck (validates this script)")
    ctx = ap.parse_args()
    checks = [ctx.only] if ctx.only else ["delete", "erase", "copy"]
    kinds = ["sqlite", "postgres"] if ctx.backend == "both" else [ctx.backend]
    if ctx.backend != "sqlite" and not ctx.pg_url:
        print("check_deerflow_db: PostgreSQL selected but no --pg-url / TEST_POSTGRES_URI "
              "(--backend sqlite runs without it)", file=sys.stderr)
        return 1
    out = Out()
    with tempfile.TemporaryDirectory(prefix="dfck-check-deerflow-") as t:
        if not ctx.reference:
            ctx.dfck = str(shutil.copy2(ctx.dfck, Path(t) / "dfck"))  # a concurrent `cargo build` may replace it
        lab = Lab(Path(ctx.fixtures), Path(t), ctx.pg_url)
        try:
            for check in checks:
                if check == "copy":
                    check_copy(ctx, lab, ctx.backend, out)
                for kind in kinds if check != "copy" else []:
                    (check_delete if check == "delete" else check_erase)(ctx, lab, kind, out)
        finally:
            lab.cleanup()
    sys.stdout.flush()
    for e in out.errs:
        print(f"MISMATCH {e}", file=sys.stderr)
    sys.stderr.flush()
    print(f"check_deerflow_db: {', '.join(checks)} on {', '.join(kinds)}"
          f"{' (reference, not dfck)' if ctx.reference else ''}: {len(out.errs)} mismatch(es)")
    return 1 if out.errs else 0


if __name__ == "__main__":
    raise SystemExit(main())
