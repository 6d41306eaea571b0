#!/usr/bin/env python3
"""Independent check of `dfck reclaim --apply` (and `--into`) with the real LangGraph.

    .venv/bin/python scripts/check_reclaimed.py [--dfck target/release/dfck] [--fixtures fixtures]
                                               [--pg-url URL]

For each SQLite fixture of STEMS:

1. copy fixtures/sqlite/<stem>.db to a temp dir and delete every row of one thread (as a
   DeerFlow thread delete does), so the file holds free pages;
2. run `dfck --db COPY reclaim --into COMPACT --apply --format json`: status `done`, the
   original byte-identical afterwards, the compact copy smaller than the original;
3. run `dfck --db COPY reclaim --apply --format json`: status `done`, the file smaller than
   before, no free page left;
4. open the reclaimed COPY and the COMPACT copy with the real SqliteSaver and, for every
   remaining thread / namespace / checkpoint of fixtures/expected/<stem>.json, read
   `graph.get_state(...).values` through the graph (full or delta mode) the generator used for
   that thread, and compare it with the expected values;
5. continue every remaining thread of the reclaimed COPY with the real library: one more turn
   (`Command(resume)` on a head waiting on an interrupt, else a new human message); the new
   head must extend the old one.

With --pg-url / TEST_POSTGRES_URI the same on a copy of each Postgres fixture database
(dfck_<stem>, read back with PostgresSaver): delete one thread, `reclaim --apply` (status
`done`, dead rows 0 afterwards), read every remaining expected checkpoint, continue.

Encrypted stem `aes_delta` (scripts/gen_aes_fixtures.py; its wholly plaintext thread is the
one deleted): dfck runs get `--aes-key-file fixtures/aes.key` right after the binary, the
savers `serde=` the fixture key's EncryptedSerializer (scripts/aeskey.py), so the remaining
encrypted threads are read and continued. Row protection after each reclaim equals the
store's before it (SQLite `checkpoints.type` / `writes.type` of the reclaimed file and of the
`--into` copy, PostgreSQL `checkpoint_blobs.type` / `checkpoint_writes.type`); the `+aes` /
plain counts are printed. Reclaim never decodes a value, so no run without the key is required
to fail here (check_migrated.py, check_full_to_delta.py and check_copied.py test that).

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

import aeskey  # noqa: E402
import fixturelib  # noqa: E402
from check_migrated import compare_values, with_db  # noqa: E402
from gen_fixtures import build_deerflow_graph  # noqa: E402
from graphs import build_conv_graph, continue_thread, messages_annotation  # noqa: E402

# stem -> (thread deleted before reclaiming, {thread: (builder, mode, k, reducer)}); threads
# not named use the stem's default.
CONV, DEERFLOW = "conv", "deerflow"
STEMS: dict[str, tuple[str, tuple, dict]] = {
    "delta_k3": ("t-fork", (CONV, "delta", 3, "langgraph"), {}),
    "full": ("t-fork", (CONV, "full", None, "langgraph"), {}),
    "deerflow": (
        "t-deerflow-full",
        (DEERFLOW, "delta", 3, "deerflow"),
        {"t-deerflow-full": (DEERFLOW, "full", None, "langgraph")},
    ),
    "aes_delta": ("t-aes-plain", (CONV, "delta", 3, "langgraph"), {"t-aes-deerflow": (DEERFLOW, "delta", 3, "deerflow")}),
}


def graph_of(spec: tuple, saver: Any) -> Any:
    kind, mode, k, reducer = spec
    ann = messages_annotation(mode, k, reducer=reducer)
    return build_conv_graph(ann, saver) if kind == CONV else build_deerflow_graph(ann, saver)


def dfck_json(dfck: str, target: str, *args: str, key: list[str] = ()) -> tuple[int, dict]:
    p = subprocess.run([dfck, *key, "--db", target, *args, "--format", "json"], capture_output=True, text=True)
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        return p.returncode, {"stderr": p.stderr.strip()[:500]}


def read_all(label: str, stem: str, saver: Any, expected: dict, gone: str, errs: list[str]) -> int:
    """Reads every expected checkpoint of the remaining threads; returns how many."""
    default, per_thread = STEMS[stem][1], STEMS[stem][2]
    error_threads = {e["thread_id"] for e in expected.get("errors", [])}
    n = 0
    for th in expected["threads"]:
        tid = th["thread_id"]
        if tid == gone or tid in error_threads:
            continue
        graph = graph_of(per_thread.get(tid, default), saver)
        for nsd in th["namespaces"]:
            ns = nsd["checkpoint_ns"]
            if ns != "":
                continue
            for cp in nsd["checkpoints"]:
                cid = cp["checkpoint_id"]
                cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
                try:
                    snap = graph.get_state(cfg)
                    got = fixturelib.render_values(dict(snap.values))
                except Exception as e:  # noqa: BLE001
                    errs.append(f"{label} {tid} {cid}: get_state raised {type(e).__name__}: {e}")
                    continue
                d = compare_values(got, cp["values"], set(cp.get("graph_defaults", [])))
                if d:
                    errs.append(f"{label} {tid} {cid} (step {cp.get('step')}): {d}")
                n += 1
    return n


def continue_all(label: str, stem: str, saver: Any, expected: dict, gone: str, errs: list[str]) -> int:
    default, per_thread = STEMS[stem][1], STEMS[stem][2]
    error_threads = {e["thread_id"] for e in expected.get("errors", [])}
    n = 0
    for th in expected["threads"]:
        tid = th["thread_id"]
        if tid == gone or tid in error_threads:
            continue
        graph = graph_of(per_thread.get(tid, default), saver)
        problem = continue_thread(graph, tid, "reclaim")
        if problem:
            errs.append(f"{label} {tid}: {problem}")
            continue
        n += 1
    return n


def check_sqlite(stem: str, dfck: str, fixtures: Path, tmp: Path) -> tuple[int, list[str], str]:
    gone = STEMS[stem][0]
    expected = json.loads((fixtures / "expected" / f"{stem}.json").read_text(encoding="utf-8"))
    db, compact = tmp / f"{stem}.db", tmp / f"{stem}.compact.db"
    shutil.copyfile(fixtures / "sqlite" / f"{stem}.db", db)
    with sqlite3.connect(db) as c:
        c.execute("DELETE FROM checkpoints WHERE thread_id = ?", (gone,))
        c.execute("DELETE FROM writes WHERE thread_id = ?", (gone,))
    c.close()
    errs: list[str] = []
    original = db.read_bytes()
    key = aeskey.dfck_args(stem)
    census = aeskey.sqlite_census(db) if key else {}
    code, r = dfck_json(dfck, str(db), "reclaim", "--into", str(compact), "--apply", key=key)
    if code != 0 or r.get("status") != "done":
        errs.append(f"{stem}: reclaim --into exited {code}: {r}")
    if db.read_bytes() != original:
        errs.append(f"{stem}: reclaim --into changed the original")
    if compact.exists() and compact.stat().st_size >= len(original):
        errs.append(f"{stem}: the compact copy is not smaller ({compact.stat().st_size} >= {len(original)})")
    code, r = dfck_json(dfck, str(db), "reclaim", "--apply", key=key)
    after = db.stat().st_size
    prot = ""
    for label, path in ((stem, db), (f"{stem} (--into copy)", compact)) if key else ():
        if path.exists():
            prot, problems = aeskey.compare_census(census, aeskey.sqlite_census(path), label)
            errs += problems
            prot = f", {aeskey.counts_text(census)} before and after"
    if code != 0 or r.get("status") != "done":
        errs.append(f"{stem}: reclaim exited {code}: {r}")
    elif after >= len(original) or r["after"]["freelist_pages"] != 0:
        errs.append(f"{stem}: the file did not shrink ({len(original)} → {after})")
    n = 0
    for label, path in ((stem, db), (f"{stem} (--into copy)", compact)):
        if not path.exists():
            continue
        conn = sqlite3.connect(str(path), check_same_thread=False)
        try:
            n += read_all(label, stem, SqliteSaver(conn, **aeskey.saver_kwargs(stem)), expected, gone, errs)
        finally:
            conn.close()
    conn = sqlite3.connect(str(db), check_same_thread=False)
    try:
        cont = continue_all(stem, stem, SqliteSaver(conn, **aeskey.saver_kwargs(stem)), expected, gone, errs)
        conn.commit()
    finally:
        conn.close()
    return n, errs, f"file {len(original)} → {after} bytes{prot}, {cont} thread(s) continued"


def check_pg(stem: str, dfck: str, fixtures: Path, server: str) -> tuple[int, list[str], str]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    gone = STEMS[stem][0]
    expected = json.loads((fixtures / "expected-pg" / f"{stem}.json").read_text(encoding="utf-8"))
    copy = f"dfck_reclaim_py_{stem}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
        admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "dfck_{stem}"')
    url = with_db(server, copy)
    with psycopg.connect(url, autocommit=True) as c:
        for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
            c.execute(f"DELETE FROM {table} WHERE thread_id = %s", (gone,))
    errs: list[str] = []
    key, prot = aeskey.dfck_args(stem), ""
    if key:
        with psycopg.connect(url) as c:
            census = aeskey.pg_census(c)
    code, r = dfck_json(dfck, url, "reclaim", "--apply", key=key)
    if key:
        with psycopg.connect(url) as c:
            prot, problems = aeskey.compare_census(census, aeskey.pg_census(c), f"pg {stem}")
        errs += problems
        prot = f", {aeskey.counts_text(census)} before and after"
    if code != 0 or r.get("status") != "done":
        errs.append(f"pg {stem}: reclaim exited {code}: {r}")
    elif any(t["dead_tuples"] for t in r["after"]["tables"]):
        errs.append(f"pg {stem}: dead rows left after VACUUM: {r['after']['tables']}")
    with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn, **aeskey.saver_kwargs(stem))
        n = read_all(f"pg {stem}", stem, saver, expected, gone, errs)
        cont = continue_all(f"pg {stem}", stem, saver, expected, gone, errs)
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
    return n, errs, f"{r.get('bytes_before')} → {r.get('bytes_after')} table bytes{prot}, {cont} thread(s) continued"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"))
    args = ap.parse_args()
    fixtures = Path(args.fixtures)
    total, mismatches = 0, []
    with tempfile.TemporaryDirectory(prefix="dfck-check-reclaimed-") as t:
        dfck = str(Path(t) / "dfck")
        shutil.copy2(args.dfck, dfck)
        for stem in STEMS:
            n, errs, summary = check_sqlite(stem, dfck, fixtures, Path(t))
            total += n
            mismatches += errs
            print(f"reclaim {stem}: {summary}; {n} checkpoints read back, {len(errs)} mismatch(es)")
        for stem in STEMS if args.pg_url else []:
            n, errs, summary = check_pg(stem, dfck, fixtures, args.pg_url)
            total += n
            mismatches += errs
            print(f"reclaim postgres {stem}: {summary}; {n} checkpoints read back, {len(errs)} mismatch(es)")
        if not args.pg_url:
            print("reclaim postgres: skipped (no --pg-url / TEST_POSTGRES_URI)")
    for e in mismatches[:8]:
        print("  MISMATCH " + e)
    print(f"reclaim: {total} checkpoints read back by the real LangGraph after reclaim, {len(mismatches)} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
