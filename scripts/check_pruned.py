#!/usr/bin/env python3
"""Independent check of `dfck prune --apply` with the real LangGraph (SQLite and Postgres).

    .venv/bin/python scripts/check_pruned.py [--dfck target/release/dfck] [--pg-url URL]

The retention fixture (fixtures/sqlite/retention.db, and the `dfck_retention` database that
scripts/pg-test-server.sh loads from fixtures/postgres/retention.sql) holds DeerFlow-shaped
threads written by the real library: turns each followed by DeerFlow's duration-only
checkpoint, a regenerate-style branch, an interrupted branch, in full and delta mode
(scripts/retention.py). For each prune run below, on a pruned copy and an untouched copy of
the same store, the real savers (SqliteSaver / PostgresSaver) through the graph that wrote the
thread must give:

  (a) latest resume: `get_state` of the thread (no checkpoint id) equal on both copies;
  (b) explicit `checkpoint_id`: every checkpoint left in the pruned copy reads exactly as it
      did before (values and next tasks);
  (c) a branch from an older visible turn (new input at the end of the first turn) gives
      the same messages on both copies, and so does one more turn at the head, and a
      `Command(resume)` of every interrupted checkpoint;
  (d) no orphan rows: every write sits on a checkpoint, every Postgres blob is named by a
      checkpoint's channel_versions.

Runs on the retention fixture: `prune --all --branches --apply` (trailing duration-only
leaves and leaf branches), and `prune --all --keep-last-turns 2 --apply` (history trimming).
On the retention_race fixture (DeerFlow's run worker wrote its duration-only checkpoint after
the user edited an older turn, so the newest checkpoint sits on the older branch): the default
prune and `--branches` must leave the latest state where the user was, and
`--keep-last-turns` refuses those threads (exit 1).

Encrypted fixtures aes_delta and aes_full (scripts/gen_aes_fixtures.py: t-aes-enc,
t-aes-switch — plaintext first, encrypted later, with a branch —, t-aes-pending — interrupts,
a ValueError write, an interrupt waiting at the head —, t-aes-plain, t-aes-deerflow): dfck
gets `--aes-key-file fixtures/aes.key`, the savers the key's EncryptedSerializer
(scripts/aeskey.py), the graphs are the generator's. Runs `prune --all --branches --apply`
(t-aes-switch's branch goes), `prune --all --keep-last-turns 1 --apply` (exit 1: only
t-aes-switch refused, its cut would take a branch's ancestors) and the same with `--branches`
(every thread cut), each with (a)–(d) and: exactly the expected threads refused, their rows and
those of skipped threads unchanged; rows gone per table = dfck's checkpoint and write counts;
no stored value changed except on the new roots of a cut (parent id, and the checkpoint row —
SQLite — which then holds the root's whole state); no row lost or changed its encryption
(aeskey.compare_census: the `+aes` count only goes down by deleted rows), a new row (the
PostgreSQL `messages` blob of a new delta root) is `+aes` exactly in threads holding `+aes`
rows. Runs without the key (LANGGRAPH_AES_KEY unset), compared thread by thread with a keyed
dry run on another copy: `--keep-last-turns 1 --branches` (every thread holding a `+aes` row
refused, the refusal naming LANGGRAPH_AES_KEY, t-aes-plain pruned), `--branches` and
`--older-than 1s`: each thread either gets what the key run would do or is refused naming
LANGGRAPH_AES_KEY (never skipped where the key run prunes); exit 1 iff a thread is refused;
rows of every thread not pruned unchanged.

Exit 1 on any mismatch; the last line counts them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

import aeskey  # noqa: E402
import fixturelib  # noqa: E402
from gen_fixtures import build_deerflow_graph  # noqa: E402
from graphs import build_conv_graph, messages_annotation  # noqa: E402

PRUNE_ALL_BRANCHES = ["prune", "--all", "--branches", "--apply"]
CUT_1 = ["prune", "--all", "--keep-last-turns", "1", "--apply"]
CUT_1_BRANCHES = ["prune", "--all", "--keep-last-turns", "1", "--branches", "--apply"]
AES_STEMS = ("aes_delta", "aes_full")

# (fixture stem, arguments, the exit codes dfck may give, the threads it must refuse or None)
RUNS: list[tuple[str, list[str], tuple, set | None]] = [
    ("retention", PRUNE_ALL_BRANCHES, (0,), None),
    ("retention", ["prune", "--all", "--keep-last-turns", "2", "--apply"], (0,), None),
    ("retention", ["prune", "r-cut-full", "r-cut-delta", "r-linear-delta", "--keep-last-turns", "1", "--apply"], (0,), None),
    ("retention_race", ["prune", "--all", "--apply"], (0,), None),
    ("retention_race", PRUNE_ALL_BRANCHES, (0,), None),
    ("retention_race", ["prune", "--all", "--keep-last-turns", "1", "--apply"], (1,), None),
] + [run for stem in AES_STEMS for run in (
    (stem, PRUNE_ALL_BRANCHES, (0,), set()),
    (stem, CUT_1, (1,), {"t-aes-switch"}),
    (stem, CUT_1_BRANCHES, (0,), set()),
)]
# runs without the key on the aes stems: (arguments, every thread holding a `+aes` row refused)
NO_KEY_RUNS = [
    (CUT_1_BRANCHES, True),
    (PRUNE_ALL_BRANCHES, False),
    (["prune", "--all", "--older-than", "1s", "--apply"], False),
]
# the identifying columns of each LangGraph table (the rest is the stored value)
LG_KEYS = {
    "checkpoints": ("thread_id", "checkpoint_ns", "checkpoint_id"),
    "writes": ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
    "checkpoint_writes": ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
    "checkpoint_blobs": ("thread_id", "checkpoint_ns", "channel", "version"),
}
Tables = dict[str, tuple[list[str], list[tuple]]]


def graph_for(stem: str, tid: str, saver: Any) -> Any:
    """The graph that wrote the thread (gen_aes_fixtures.py / retention.py)."""
    if aeskey.is_aes(stem):
        delta = stem == "aes_delta"
        if tid == "t-aes-deerflow":
            ann = messages_annotation("delta", 3, reducer="deerflow") if delta else messages_annotation("full")
            return build_deerflow_graph(ann, saver)
        return build_conv_graph(messages_annotation("delta", 3) if delta else messages_annotation("full"), saver)
    ann = messages_annotation("delta", 3) if tid.endswith("-delta") else messages_annotation("full")
    return build_conv_graph(ann, saver)


def cfg(tid: str, cid: str | None = None) -> dict:
    c: dict[str, Any] = {"thread_id": tid, "checkpoint_ns": ""}
    if cid:
        c["checkpoint_id"] = cid
    return {"configurable": c}


def values(graph: Any, config: dict) -> Any:
    s = graph.get_state(config)
    return fixturelib.render_values(dict(s.values)), tuple(s.next)


def history(graph: Any, tid: str) -> list[Any]:
    return list(graph.get_state_history(cfg(tid)))


def ids(graph: Any, tid: str) -> list[str]:
    return [s.config["configurable"]["checkpoint_id"] for s in history(graph, tid)]


def first_turn_end(graph: Any, tid: str) -> str | None:
    """The oldest settled checkpoint (no next task) after the first answer."""
    for s in reversed(history(graph, tid)):
        msgs = s.values.get("messages", [])
        if s.next == () and len(msgs) >= 2:
            return s.config["configurable"]["checkpoint_id"]
    return None


def interrupted_heads(graph: Any, tid: str) -> list[str]:
    return [s.config["configurable"]["checkpoint_id"] for s in history(graph, tid) if s.interrupts]


def compare_store(label: str, stem: str, open_saver: Callable[[str], Any], pruned: str, untouched: str,
                  errs: list[str]) -> int:
    """Compares the pruned and untouched copies through the real saver; returns the number
    of checkpoints read. Threads without a checkpoint in the pruned copy are left out."""
    sp, su = open_saver(pruned), open_saver(untouched)
    threads = sorted({t.config["configurable"]["thread_id"] for t in su.list(None)})
    n = 0
    for tid in threads:
        gp, gu = graph_for(stem, tid, sp), graph_for(stem, tid, su)
        try:
            n += compare_thread(label, tid, gp, gu, errs)
        except Exception as e:  # noqa: BLE001 - the real library failing is a mismatch
            errs.append(f"{label} {tid}: {type(e).__name__}: {str(e)[:300]}")
    return n


def compare_thread(label: str, tid: str, gp: Any, gu: Any, errs: list[str]) -> int:
    left = ids(gp, tid)
    if not left:
        return 0
    # (a) latest resume
    if values(gp, cfg(tid)) != values(gu, cfg(tid)):
        errs.append(f"{label} {tid}: latest state differs")
    # (b) every kept checkpoint by explicit id
    for cid in left:
        if values(gp, cfg(tid, cid)) != values(gu, cfg(tid, cid)):
            errs.append(f"{label} {tid} {cid}: state differs")
    # (c) a branch from the end of the first turn, if it survived
    end = first_turn_end(gp, tid)
    if end is not None:
        for g in (gp, gu):
            g.invoke({"messages": [HumanMessage(content="calc 9+9", id="h-branch")]}, cfg(tid, end),
                     durability="sync")
        if values(gp, cfg(tid)) != values(gu, cfg(tid)):
            errs.append(f"{label} {tid}: a branch from {end} differs")
    for cid in interrupted_heads(gp, tid):
        for g in (gp, gu):
            g.invoke(Command(resume="approved after prune"), cfg(tid, cid), durability="sync")
        if values(gp, cfg(tid)) != values(gu, cfg(tid)):
            errs.append(f"{label} {tid}: resuming interrupt {cid} differs")
    for g in (gp, gu):
        g.invoke({"messages": [HumanMessage(content="one more turn", id="h-more")]}, cfg(tid),
                 durability="sync")
    if values(gp, cfg(tid)) != values(gu, cfg(tid)):
        errs.append(f"{label} {tid}: continuing the head differs")
    return len(left)


def run_dfck(dfck: str, target: str, args: list[str], label: str, errs: list[str], codes: tuple = (0,),
             key: list[str] = (), env: dict | None = None) -> tuple[str, dict | None]:
    """Runs dfck (`key` right after the binary); returns (summary, JSON document or None)."""
    proc = subprocess.run([dfck, *key, "--db", target, *args, "--format", "json"], capture_output=True, text=True,
                          env=env)
    try:
        r = json.loads(proc.stdout)
    except json.JSONDecodeError:
        r = None
    if proc.returncode not in codes or r is None:
        why = proc.stderr.strip()[:300] or (r and f"{r.get('pruned')} pruned, {r.get('refused')} refused")
        errs.append(f"{label}: dfck {' '.join(args)} exited {proc.returncode}: {why}")
        return "failed", r
    return f"{r['pruned']} threads pruned, {r['refused']} refused, {r['checkpoints']} checkpoints deleted", r


# ---------------------------------------------------------------------------------------
# stored rows
# ---------------------------------------------------------------------------------------


def raw_tables(target: str) -> Tables:
    """Every table's columns and rows as stored (PostgreSQL: each value in its text form), sorted."""
    out: Tables = {}
    if target.startswith("postgres"):
        import psycopg

        with psycopg.connect(target) as c:
            for (t,) in c.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall():
                cols = [d.name for d in c.execute(f'SELECT * FROM public."{t}" LIMIT 0').description]
                sel = ", ".join(f'"{col}"::text' for col in cols)
                out[t] = (cols, sorted(c.execute(f'SELECT {sel} FROM public."{t}"').fetchall(), key=repr))
        return out
    conn = sqlite3.connect(target)
    try:
        for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            cur = conn.execute(f'SELECT * FROM "{t}"')
            out[t] = ([d[0] for d in cur.description], sorted(cur.fetchall(), key=repr))
    finally:
        conn.close()
    return out


def thread_rows(tables: Tables, tids: set[str], only: set[str] | None = None) -> dict[str, list[tuple]]:
    """The rows of these threads, per table with a thread_id column (or only those tables)."""
    return {t: [r for r in rows if r[cols.index("thread_id")] in tids] for t, (cols, rows) in tables.items()
            if "thread_id" in cols and (only is None or t in only)}


def without(tables: Tables, tids: set[str], only: set[str] | None = None) -> Tables:
    """The tables less every row of these threads (in the tables `only` names, if given)."""
    return {t: (cols, [r for r in rows if "thread_id" not in cols or (only is not None and t not in only)
                       or r[cols.index("thread_id")] not in tids]) for t, (cols, rows) in tables.items()}


def keyed(tables: Tables, table: str) -> dict[tuple, dict[str, Any]]:
    cols, rows = tables.get(table, ([], []))
    return {tuple(r[cols.index(c)] for c in LG_KEYS[table]): dict(zip(cols, r)) for r in rows}


def census(target: str) -> aeskey.Census:
    if not target.startswith("postgres"):
        with sqlite3.connect(target) as c:  # aeskey reads the file as immutable: no WAL left
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        c.close()
        return aeskey.sqlite_census(Path(target))
    import psycopg

    with psycopg.connect(target) as c:
        return aeskey.pg_census(c)


def encrypted_threads(c: aeskey.Census) -> set[str]:
    return {t for t, p in aeskey.thread_protection(c).items() if p != "plain"}


def aes_rows(label: str, before: Tables, after: Tables, cb: aeskey.Census, ca: aeskey.Census, doc: dict,
             refused: set[str], errs: list[str]) -> str:
    """What a keyed prune of an aes stem did to the stored rows (module docstring)."""
    status = {t["thread_id"]: t for t in doc["threads"]}
    got = {t for t, r in status.items() if r["status"] == "refused"}
    if got != refused:
        errs.append(f"{label}: refused {sorted(got)} instead of {sorted(refused)}: "
                    + "; ".join(f"{t}: {status[t]['reason']}" for t in sorted(got - refused))[:600])
    untouched = {t for t, r in status.items() if r["status"] != "done"}
    tb, ta = thread_rows(before, untouched), thread_rows(after, untouched)
    for t in (t for t in tb if tb[t] != ta.get(t)):
        errs.append(f"{label}: {t} rows of the refused or skipped threads changed")
    prot, problems = aeskey.compare_census(cb, ca, label)
    errs += problems
    enc = encrypted_threads(cb)
    for (table, key), typ in ca.items():
        if (table, key) not in cb and aeskey.is_encrypted(typ) != (key[0] in enc):
            errs.append(f"{label}: new {table} row {key} stored as {typ} in a thread "
                        f"{'holding +aes rows' if key[0] in enc else 'without +aes rows'}")
    done = [r for r in status.values() if r["status"] == "done"]
    writes = "writes" if "writes" in before else "checkpoint_writes"
    for table, field in (("checkpoints", "checkpoints"), (writes, "writes")):
        gone = len(keyed(before, table).keys() - keyed(after, table).keys())
        if gone != sum(r[field] for r in done):
            errs.append(f"{label}: {gone} {table} rows gone, dfck reports {sum(r[field] for r in done)} {field}")
    roots = rewritten = 0
    for table in (t for t in LG_KEYS if t in before):
        kb, ka = keyed(before, table), keyed(after, table)
        for k in kb.keys() & ka.keys():
            changed = {c for c in kb[k] if kb[k][c] != ka[k][c]}
            if not changed:
                continue
            if table == "checkpoints" and "parent_checkpoint_id" in changed and ka[k]["parent_checkpoint_id"] is None \
                    and changed <= {"parent_checkpoint_id", "checkpoint"}:
                roots += 1
                rewritten += "checkpoint" in changed
            else:
                errs.append(f"{label}: {table} {k}: stored {', '.join(sorted(changed))} changed")
    return f"{prot}; {roots} new roots ({rewritten} with their checkpoint column rewritten)"


def no_key_run(dfck: str, label: str, fresh: Callable[[str], str], args: list[str], all_refused: bool,
               errs: list[str]) -> str:
    """A run without the key on a fresh copy, thread by thread against a keyed dry run on another."""
    key = aeskey.dfck_args(AES_STEMS[0])
    _, ref = run_dfck(dfck, fresh("nokey_ref"), [a for a in args if a != "--apply"], label, errs, (0, 1), key=key)
    work = fresh("nokey")
    before, cb = raw_tables(work), census(work)
    p = subprocess.run([dfck, "--db", work, *args, "--format", "json"], capture_output=True, text=True,
                       env=aeskey.env_without_key())
    after = raw_tables(work)
    try:
        got = {t["thread_id"]: t for t in json.loads(p.stdout)["threads"]}
    except (json.JSONDecodeError, KeyError):
        errs.append(f"{label}: without the key dfck exited {p.returncode}: {p.stderr.strip()[:300]}")
        return "failed"
    if ref is None:
        return "failed"
    enc, refused = encrypted_threads(cb), set()
    for tid, e in sorted({t["thread_id"]: t for t in ref["threads"]}.items()):
        g = got.get(tid)
        if g is None:
            errs.append(f"{label}: {tid} missing from the report without the key")
            continue
        if g["status"] == "refused":
            refused.add(tid)
            if e["status"] != "refused" and (tid not in enc or aeskey.KEY_ENV not in (g["reason"] or "")):
                errs.append(f"{label}: {tid} refused without the key: {g['reason']}")
        elif (g["status"], g["checkpoints"]) != ({"would": "done"}.get(e["status"], e["status"]), e["checkpoints"]):
            errs.append(f"{label}: {tid}: without the key {g['status']} ({g['checkpoints']} checkpoints, "
                        f"{g['reason']}) where the dry run with the key says {e['status']} "
                        f"({e['checkpoints']} checkpoints); expected the same or a refusal naming {aeskey.KEY_ENV}")
        if all_refused and tid in enc and g["status"] != "refused":
            errs.append(f"{label}: {tid} holds +aes rows and was not refused without the key ({g['status']})")
        if g["status"] != "done" and thread_rows(before, {tid}) != thread_rows(after, {tid}):
            errs.append(f"{label}: {tid} was {g['status']} without the key, yet its rows changed")
    if p.returncode != (1 if refused else 0):
        errs.append(f"{label}: without the key dfck exited {p.returncode} with {len(refused)} threads refused")
    done = sorted(t for t, g in got.items() if g["status"] == "done")
    return (f"exit {p.returncode}; {len(refused & enc)} of {len(enc)} threads holding +aes rows refused naming "
            f"{aeskey.KEY_ENV}, pruned {done or 'none'}; rows of the others unchanged")


# ---------------------------------------------------------------------------------------
# SQLite / PostgreSQL
# ---------------------------------------------------------------------------------------


class SqliteCopies:
    kind, reader = "sqlite", "SqliteSaver"

    def __init__(self, fixtures: Path, tmp: Path) -> None:
        self.fixtures, self.tmp = fixtures, tmp

    def copy(self, stem: str, name: str) -> str:
        path = self.tmp / f"{name}.db"
        for s in ("", "-wal", "-shm"):
            Path(f"{path}{s}").unlink(missing_ok=True)
        shutil.copyfile(self.fixtures / "sqlite" / f"{stem}.db", path)
        return str(path)

    def open_saver(self, stem: str, path: str) -> Any:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        return SqliteSaver(conn, **aeskey.saver_kwargs(stem))

    def orphans(self, path: str) -> int:
        conn = sqlite3.connect(path)
        try:
            return conn.execute(
                "SELECT count(*) FROM writes w WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = "
                "w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)"
            ).fetchone()[0]
        finally:
            conn.close()

    def cleanup(self) -> None:
        pass


class PgCopies:
    kind, reader = "postgres", "PostgresSaver"

    def __init__(self, server: str) -> None:
        self.server, self.dbs, self.conns = server, [], []

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as admin:
            admin.execute(sql)

    def copy(self, stem: str, name: str) -> str:
        db = f"dfck_pycheck_{name}"
        self._admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        self._admin(f'CREATE DATABASE "{db}" TEMPLATE "dfck_{stem}"')
        self.dbs.append(db)
        return with_db(self.server, db)

    def open_saver(self, stem: str, url: str) -> Any:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        c = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        self.conns.append(c)
        return PostgresSaver(c, **aeskey.saver_kwargs(stem))

    def orphans(self, url: str) -> int:
        import psycopg

        with psycopg.connect(url) as c:
            return c.execute(
                "SELECT count(*) FROM checkpoint_writes w WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
                "c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)"
            ).fetchone()[0] + c.execute(
                "SELECT count(*) FROM checkpoint_blobs b WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
                "c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
                "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
            ).fetchone()[0]

    def cleanup(self) -> None:
        for c in self.conns:
            c.close()
        self.conns.clear()
        for db in self.dbs:
            self._admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        self.dbs.clear()


def with_db(url: str, db: str) -> str:
    base, _, query = url.partition("?")
    head = base[: base.index("/", base.index("://") + 3)]
    return f"{head}/{db}" + (f"?{query}" if query else "")


def check_backend(dfck: str, be: Any, errs: list[str]) -> int:
    """Every run of RUNS and NO_KEY_RUNS on copies made by `be`; returns the number of runs."""
    for k, (stem, args, codes, refused) in enumerate(RUNS):
        try:
            pruned, untouched = be.copy(stem, f"pruned{k}"), be.copy(stem, f"untouched{k}")
            label = f"{be.kind} {stem} [{' '.join(args[1:-1])}]"
            aes = aeskey.is_aes(stem)
            before, cb = (raw_tables(untouched), census(untouched)) if aes else ({}, {})
            summary, doc = run_dfck(dfck, pruned, args, label, errs, codes, key=aeskey.dfck_args(stem))
            if aes and doc is not None:
                summary += "; " + aes_rows(label, before, raw_tables(pruned), cb, census(pruned), doc, refused, errs)
            orphans = be.orphans(pruned)
            if orphans:
                errs.append(f"{label}: {orphans} orphan rows")
            n = compare_store(label, stem, lambda t, s=stem: be.open_saver(s, t), pruned, untouched, errs)
            print(f"{label}: {summary}; {n} kept checkpoints read by {be.reader}, {orphans} orphans")
        finally:
            be.cleanup()
    for stem in AES_STEMS:
        for k, (args, all_refused) in enumerate(NO_KEY_RUNS):
            label = f"{be.kind} {stem} [{' '.join(args[1:-1])}] without the key"
            try:
                fresh = lambda n, s=stem, k=k: be.copy(s, f"{n}{k}")  # noqa: E731
                print(f"{label}: {no_key_run(dfck, label, fresh, args, all_refused, errs)}")
            finally:
                be.cleanup()
    return len(RUNS) + len(AES_STEMS) * len(NO_KEY_RUNS)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"))
    args = ap.parse_args()
    errs: list[str] = []
    runs = 0
    with tempfile.TemporaryDirectory(prefix="dfck-check-pruned-") as t:
        dfck = str(shutil.copy2(args.dfck, Path(t) / "dfck"))  # a concurrent `cargo build` may replace it
        runs += check_backend(dfck, SqliteCopies(Path(args.fixtures), Path(t)), errs)
        if args.pg_url:
            runs += check_backend(dfck, PgCopies(args.pg_url), errs)
        else:
            print("check_pruned: no --pg-url / TEST_POSTGRES_URI: PostgreSQL skipped", file=sys.stderr)
    sys.stdout.flush()
    for e in errs:
        print(f"MISMATCH {e}", file=sys.stderr)
    sys.stderr.flush()
    print(f"check_pruned: {runs} prune runs checked, {len(errs)} mismatch(es)")
    return 1 if errs else 0


if __name__ == "__main__":
    raise SystemExit(main())
