#!/usr/bin/env python3
"""Independent check of `dfck migrate full-to-delta --all --apply` with the real LangGraph.

    .venv/bin/python scripts/check_full_to_delta.py [--dfck target/release/dfck] [--fixtures fixtures]

For each SQLite fixture holding full-mode threads (full, forks_full, deerflow, exit,
subgraph), and with --pg-url / TEST_POSTGRES_URI also for a copy of each Postgres fixture
database (dfck_<stem>, read back with PostgresSaver):

1. copy the store and run `dfck migrate full-to-delta --all --apply --snapshot-frequency 3`
   (`--form deerflow` on deerflow, so DeerFlow's marked form is exercised too); nothing may be
   refused, and the writes table must be row-for-row the original's;
2. check the raw rows of every converted thread: no versioned checkpoint stores a plain
   `messages` list any more (only `_DeltaSnapshot`s or nothing), so a reader that did not
   replay could not pass step 3 by accident;
3. open the copy with the real saver and, for every thread / namespace / checkpoint of
   fixtures/expected[-pg]/<stem>.json, read `graph.get_state(...).values` through the
   generator's graph with `messages` as a DELTA channel (DeerFlow's `merge_message_writes`
   for threads carrying DeerFlow's marker, LangGraph's `_messages_delta_reducer` otherwise,
   snapshot_frequency 3) and compare with the expected values (written from the original
   full-mode store);
4. continue every converted thread 3 more turns with the real library through the same
   delta graph (`Command(resume)` when the head waits on an interrupt, else a new human
   message): each new head must extend the previous one, and `dfck verify` must report no
   more errors than before.

Encrypted stems (`aes_full`, scripts/gen_aes_fixtures.py): dfck runs get `--aes-key-file
fixtures/aes.key` right after the binary, the savers `serde=` the fixture key's
EncryptedSerializer (scripts/aeskey.py). First the conversion of another copy WITHOUT the key must refuse
every encrypted thread (exit 1, naming LANGGRAPH_AES_KEY) and change none of their rows; after the keyed run, row protection is compared with the original (a `+aes` row stays
`+aes` with its inner tag, plaintext stays plaintext, a new row of a wholly encrypted thread is
`+aes`; counts printed), and step 2 decrypts `+aes` rows to look for plain lists.

Exit 1 on any mismatch, 0 otherwise.
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
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

import aeskey  # noqa: E402
import fixturelib  # noqa: E402
from check_migrated import (  # noqa: E402
    CONV,
    DEERFLOW,
    SUBGRAPH,
    THREAD_GRAPH,
    compare_values,
    graph_for_ns,
    verify_errors,
    with_db,
)
from gen_fixtures import build_deerflow_graph, build_subgraph_pair  # noqa: E402
from graphs import HumanMessage, build_conv_graph, messages_annotation  # noqa: E402

STEMS = ["full", "forks_full", "deerflow", "exit", "subgraph", "aes_full"]
K = 3
MARKER_KEY = "deerflow_checkpoint_channel_mode"
TURNS = 3


def delta_graphs(kind: str, reducer: str, saver: Any) -> dict:
    """{"graph": root graph, "subgraphs": {node: graph}} with messages as a DeltaChannel."""
    ann = messages_annotation("delta", K, reducer=reducer)
    if kind == CONV:
        return {"graph": build_conv_graph(ann, saver), "subgraphs": {}}
    if kind == DEERFLOW:
        return {"graph": build_deerflow_graph(ann, saver), "subgraphs": {}}
    if kind == SUBGRAPH:
        parent, child = build_subgraph_pair(ann, saver)
        return {"graph": parent, "subgraphs": {"call_child": child}}
    raise ValueError(kind)


def convert_args(stem: str) -> list[str]:
    extra = ["--form", "deerflow"] if stem == "deerflow" else []
    return ["migrate", "full-to-delta", "--all", "--apply", "--snapshot-frequency", str(K), "--format", "json", *extra]


def convert(dfck: str, target: str, stem: str, key: list[str] = ()) -> tuple[set[str], list[str]]:
    """Runs the conversion (`key`: aeskey.dfck_args); returns the converted threads and any problem."""
    proc = subprocess.run(
        [dfck, *key, "--db", target, *convert_args(stem)],
        capture_output=True, text=True,
    )
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return set(), [f"{stem}: dfck exited {proc.returncode} with no JSON: {proc.stderr.strip()[:500]}"]
    errs = []
    if proc.returncode != 0 or report.get("refused"):
        errs.append(f"{stem}: dfck exited {proc.returncode}, refused {report.get('refused')}")
    done = {t["thread_id"] for t in report["threads"] if t["status"] == "done"}
    if not done:
        errs.append(f"{stem}: nothing converted")
    return done, errs


def marked_threads_sqlite(conn: sqlite3.Connection) -> set[str]:
    out = set()
    for tid, md in conn.execute("SELECT thread_id, metadata FROM checkpoints"):
        if md and MARKER_KEY in json.loads(bytes(md).decode("utf-8")):
            out.add(tid)
    return out


def plain_lists_sqlite(conn: sqlite3.Connection, threads: set[str]) -> list[str]:
    """Converted checkpoints that still store `messages` as a plain list."""
    out = []
    for tid, ns, cid, typ, blob in conn.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, type, checkpoint FROM checkpoints"
    ):
        typ, blob = aeskey.open_typed(typ, blob)  # aes_* stems: decrypted with the fixture key
        if tid not in threads or typ != "msgpack":
            continue
        cp = fixturelib._unpack(bytes(blob))
        cv = cp.get("channel_values", {}) if isinstance(cp, dict) else {}
        m = cv.get("messages") if isinstance(cv, dict) else None
        if m is not None and not (isinstance(m, fixturelib._Ext) and m.code == 7):
            out.append(f"{tid} ns={ns!r} {cid}: messages still stored as a plain list")
    return out


def read_all(stem: str, saver: Any, expected: dict, marked: set[str], errs: list[str]) -> int:
    """Reads every expected checkpoint through delta-mode graphs; returns the count read."""
    error_threads = {e["thread_id"] for e in expected.get("errors", [])}
    graphs: dict[tuple, dict] = {}
    n = 0
    for th in expected["threads"]:
        tid = th["thread_id"]
        if tid in error_threads:
            continue
        kind = THREAD_GRAPH.get(tid, CONV)
        reducer = "deerflow" if tid in marked else "langgraph"
        entry = graphs.setdefault((kind, reducer), delta_graphs(kind, reducer, saver))
        for nsd in th["namespaces"]:
            ns = nsd["checkpoint_ns"]
            graph = graph_for_ns(entry, ns)
            for cp in nsd["checkpoints"]:
                cid = cp["checkpoint_id"]
                cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
                try:
                    snap = graph.get_state(cfg)
                    got = fixturelib.render_values(dict(snap.values))
                except Exception as e:  # noqa: BLE001
                    errs.append(f"{stem} {tid} ns={ns!r} {cid}: get_state raised {type(e).__name__}: {e}")
                    continue
                n += 1
                d = compare_values(got, cp["values"], set(cp.get("graph_defaults", [])))
                if d:
                    errs.append(f"{stem} {tid} ns={ns!r} {cid} (step {cp.get('step')}): {d}")
    return n


def continue_threads(stem: str, saver: Any, threads: set[str], marked: set[str], errs: list[str]) -> int:
    """The real library continues every converted thread TURNS more turns."""
    n = 0
    for tid in sorted(threads):
        kind = THREAD_GRAPH.get(tid, CONV)
        reducer = "deerflow" if tid in marked else "langgraph"
        graph = delta_graphs(kind, reducer, saver)["graph"]
        cfg = {"configurable": {"thread_id": tid}}
        try:
            for turn in range(TURNS):
                before = graph.get_state(cfg)
                old = [m.id for m in before.values.get("messages", [])]
                if before.interrupts:
                    graph.invoke(Command(resume=f"approved {turn}"), cfg)
                    how = "resume"
                else:
                    mid = f"h-f2d-{tid}-{turn}"
                    graph.invoke({"messages": [HumanMessage(content=f"continue {turn}", id=mid)]}, cfg)
                    how = "input"
                new = [m.id for m in graph.get_state(cfg).values.get("messages", [])]
                if new[: len(old)] != old or len(new) <= len(old):
                    errs.append(f"{stem} {tid} turn {turn} [{how}]: the new head does not extend the old "
                                f"({len(old)} → {len(new)} messages)")
                    break
                if how == "input" and mid not in new[len(old):]:
                    errs.append(f"{stem} {tid} turn {turn}: the new human message is missing")
                    break
            else:
                n += 1
        except Exception as e:  # noqa: BLE001
            errs.append(f"{stem} {tid}: continuing raised {type(e).__name__}: {e}")
    return n


def check_stem(stem: str, dfck: str, fixtures: Path, tmp: Path) -> tuple[int, list[str], str]:
    src = fixtures / "sqlite" / f"{stem}.db"
    expected = json.loads((fixtures / "expected" / f"{stem}.json").read_text(encoding="utf-8"))
    db = tmp / f"{stem}.db"
    shutil.copyfile(src, db)
    key, errs = aeskey.dfck_args(stem), []
    if key:  # without the key (on another copy): encrypted threads refused, untouched
        errs += aeskey.no_key_sqlite(dfck, src, tmp, convert_args(stem), stem)
    done, more = convert(dfck, str(db), stem, key)
    errs += more
    prot = ""
    if key:
        prot, problems = aeskey.compare_census(aeskey.sqlite_census(src), aeskey.sqlite_census(db), stem)
        errs += problems
        prot = f"; {prot}"
    q = "SELECT * FROM writes ORDER BY 1, 2, 3, 4, 5"
    with sqlite3.connect(str(src)) as a, sqlite3.connect(str(db)) as b:
        if a.execute(q).fetchall() != b.execute(q).fetchall():
            errs.append(f"{stem}: writes table differs from the original")
    conn = sqlite3.connect(str(db), check_same_thread=False)
    try:
        marked = marked_threads_sqlite(conn)
        errs += [f"{stem}: {p}" for p in plain_lists_sqlite(conn, done)]
        saver = SqliteSaver(conn, **aeskey.saver_kwargs(stem))
        n = read_all(stem, saver, expected, marked, errs)
        before = verify_errors(dfck, str(db), key)
        continued = continue_threads(stem, saver, done, marked, errs)
        conn.commit()
        after = verify_errors(dfck, str(db), key)
        if after != before or before != 0:
            errs.append(f"{stem}: dfck verify errors {before} → {after} after continuing")
    finally:
        conn.close()
    return n, errs, f"{len(done)} thread(s) converted, {continued} continued {TURNS} turns{prot}"


PG_PLAIN_SQL = """
SELECT c.thread_id, c.checkpoint_id FROM checkpoints c JOIN checkpoint_blobs b
  ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = 'messages'
 AND b.version = c.checkpoint -> 'channel_versions' ->> 'messages'
WHERE b.type = 'msgpack' AND NOT ((get_byte(b.blob, 0) = 199 AND get_byte(b.blob, 2) = 7)
   OR (get_byte(b.blob, 0) = 200 AND get_byte(b.blob, 3) = 7)
   OR (get_byte(b.blob, 0) = 201 AND get_byte(b.blob, 5) = 7))
"""
# aes_* stems: the messages blob each checkpoint names, judged in Python once decrypted
PG_AES_BLOBS_SQL = """
SELECT c.thread_id, c.checkpoint_id, b.type, b.blob FROM checkpoints c JOIN checkpoint_blobs b
  ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = 'messages'
 AND b.version = c.checkpoint -> 'channel_versions' ->> 'messages'
WHERE b.type LIKE '%+aes'
"""
PG_WRITES_SQL = "SELECT * FROM checkpoint_writes ORDER BY 1, 2, 3, 4, 5, 6"


def pg_plain_lists(conn: Any, aes: bool) -> list[tuple[str, str]]:
    """(thread, checkpoint) whose messages blob is not an ext-7 snapshot."""
    rows = conn.execute(PG_PLAIN_SQL).fetchall()
    for tid, cid, typ, blob in conn.execute(PG_AES_BLOBS_SQL).fetchall() if aes else []:
        typ, plain = aeskey.open_typed(typ, blob)
        v = fixturelib._unpack(plain) if typ == "msgpack" else None
        if typ == "msgpack" and not (isinstance(v, fixturelib._Ext) and v.code == 7):
            rows.append((tid, cid))
    return rows


PG_MARKED_SQL = "SELECT DISTINCT thread_id FROM checkpoints WHERE metadata ? 'deerflow_checkpoint_channel_mode'"


def check_stem_pg(stem: str, dfck: str, fixtures: Path, server: str) -> tuple[int, list[str], str]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    expected = json.loads((fixtures / "expected-pg" / f"{stem}.json").read_text(encoding="utf-8"))
    template, copy = f"dfck_{stem}", f"dfck_f2dcheck_{stem}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
        admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{template}"')
    url = with_db(server, copy)
    key, errs = aeskey.dfck_args(stem), []
    if key:  # without the key (on another copy): encrypted threads refused, untouched
        errs += aeskey.no_key_pg(dfck, server, template, convert_args(f"pg {stem}"), f"pg {stem}", with_db)
    done, more = convert(dfck, url, f"pg {stem}", key)
    errs += more
    prot = ""
    with psycopg.connect(with_db(server, template)) as a, psycopg.connect(url) as b:
        if a.execute(PG_WRITES_SQL).fetchall() != b.execute(PG_WRITES_SQL).fetchall():
            errs.append(f"pg {stem}: checkpoint_writes differs from the original")
        if key:
            prot, problems = aeskey.compare_census(aeskey.pg_census(a), aeskey.pg_census(b), f"pg {stem}")
            errs += problems
            prot = f"; {prot}"
        for tid, cid in pg_plain_lists(b, bool(key)):
            if tid in done:
                errs.append(f"pg {stem} {tid} {cid}: messages still stored as a plain blob")
        marked = {r[0] for r in b.execute(PG_MARKED_SQL).fetchall()}
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        conn.row_factory = dict_row
        saver = PostgresSaver(conn, **aeskey.saver_kwargs(stem))
        n = read_all(f"pg {stem}", saver, expected, marked, errs)
        before = verify_errors(dfck, url, key)
        continued = continue_threads(f"pg {stem}", saver, done, marked, errs)
        after = verify_errors(dfck, url, key)
        if after != before or before != 0:
            errs.append(f"pg {stem}: dfck verify errors {before} → {after} after continuing")
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
    return n, errs, f"{len(done)} thread(s) converted, {continued} continued {TURNS} turns{prot}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--stems", nargs="*", default=STEMS)
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"),
                    help="test server holding dfck_<stem> databases; default TEST_POSTGRES_URI")
    args = ap.parse_args()
    fixtures = Path(args.fixtures)
    total, mismatches = 0, []
    with tempfile.TemporaryDirectory(prefix="dfck-check-f2d-") as t:
        dfck = str(Path(t) / "dfck")  # a concurrent build may replace the binary
        shutil.copy2(args.dfck, dfck)
        for stem in args.stems:
            n, errs, summary = check_stem(stem, dfck, fixtures, Path(t))
            total += n
            mismatches += errs
            print(f"{stem}: {summary}; {n} checkpoints read through a delta-mode graph, {len(errs)} mismatch(es)")
        for stem in args.stems if args.pg_url else []:
            n, errs, summary = check_stem_pg(stem, dfck, fixtures, args.pg_url)
            total += n
            mismatches += errs
            print(f"postgres {stem}: {summary}; {n} checkpoints read through a delta-mode graph, "
                  f"{len(errs)} mismatch(es)")
        if not args.pg_url:
            print("postgres: skipped (no --pg-url / TEST_POSTGRES_URI)")
    for e in mismatches[:8]:
        print("  MISMATCH " + e)
    if len(mismatches) > 8:
        print(f"  … and {len(mismatches) - 8} more")
    print(f"full-to-delta: {total} converted checkpoints read through delta-mode graphs equal the "
          f"original state, {len(mismatches)} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
