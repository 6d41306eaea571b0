#!/usr/bin/env python3
"""Independent check of `dfck copy` with the real LangGraph.

    .venv/bin/python scripts/check_copied.py [--dfck target/release/dfck] [--pg-url URL]

For each fixture in STEMS (delta and full twins, DeerFlow's delta thread with its reducer,
a mixed full→delta thread, subgraph namespaces):

1. copy fixtures/sqlite/<stem>.db to a temp dir, then
   `dfck --db COPY copy --to PG --all --apply` into a fresh database dfck_copy_py_<stem> on
   the test server (--pg-url / TEST_POSTGRES_URI), then
   `dfck --db PG copy --to BACK.db --all --apply` into a new SQLite file (both must exit 0);
2. open PG with the real PostgresSaver (whose `setup()` must find migrations v0–v9 done) and BACK.db with the real SqliteSaver and, for every
   thread / namespace / checkpoint of fixtures/expected/<stem>.json (written by the real
   library from the original), read `graph.get_state(...).values` through the graph the
   generator used for that thread, and compare it with the expected `values`;
3. check that BACK.db's `writes` rows are the original's, byte for byte, and that every
   checkpoint has the original's id, parent and type;
4. continue every root thread with the real library on both copies: one more turn through
   the same graph (`Command(resume)` on a head waiting on an interrupt, else a new human
   message); the new head must extend the copied one.

Encrypted stems (`aes_delta`, `aes_full`, scripts/gen_aes_fixtures.py): both dfck runs get
`--aes-key-file fixtures/aes.key` right after the binary, the savers `serde=` the fixture
key's EncryptedSerializer (scripts/aeskey.py), so encrypted threads are read and continued.
Before, `copy --to PG` WITHOUT the key (LANGGRAPH_AES_KEY unset, into a fresh database) must
refuse every encrypted thread (exit 1, the refusal naming LANGGRAPH_AES_KEY) and create no row
of one in the target. After the SQLite→PostgreSQL copy: every PostgreSQL write copied from a
`+aes` SQLite write is `+aes`, and every blob named only by checkpoints that were `+aes` in
SQLite is `+aes` (blobs shared by a plaintext and an encrypted checkpoint — the thread whose
encryption was switched on later — may be either and are counted; checkpoint metadata and
inline primitive values are JSONB, plaintext by nature). After the way back: the checkpoint
ids and parents are the original's; a checkpoint that was `+aes` is `+aes` with the same inner
tag (a plaintext one may come back encrypted: PostgreSQL does not record a checkpoint's own
protection; counted); `+aes` / plain row counts are printed.

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
from check_migrated import compare_values, with_db, writes_rows  # noqa: E402
from gen_fixtures import build_deerflow_graph, build_subgraph_pair, graph_for_ns  # noqa: E402
from graphs import build_conv_graph, continue_thread, messages_annotation  # noqa: E402

STEMS = ["delta_k3", "full", "deerflow", "mixed", "subgraph", "aes_delta", "aes_full"]


def annotation(stem: str, tid: str) -> Any:
    """The messages annotation the generator used for this thread."""
    if stem in ("full", "aes_full") or tid in ("t-deerflow-full", "t-subgraph"):
        return messages_annotation("full")
    if tid in ("t-deerflow", "t-mixed", "t-aes-deerflow"):
        return messages_annotation("delta", 3, reducer="deerflow")
    if stem.startswith("delta_k"):
        return messages_annotation("delta", int(stem[len("delta_k"):]))
    return messages_annotation("delta", 3)


def graphs_for(stem: str, tid: str, saver: Any) -> dict:
    ann = annotation(stem, tid)
    if tid.startswith("t-deerflow") or tid in ("t-mixed", "t-aes-deerflow"):
        return {"graph": build_deerflow_graph(ann, saver), "subgraphs": {}}
    if tid.startswith("t-subgraph"):
        parent, child = build_subgraph_pair(ann, saver)
        return {"graph": parent, "subgraphs": {"call_child": child}}
    return {"graph": build_conv_graph(ann, saver), "subgraphs": {}}


def read_all(label: str, stem: str, saver: Any, expected: dict, errs: list[str]) -> int:
    error_threads = {e["thread_id"] for e in expected.get("errors", [])}
    n = 0
    for th in expected["threads"]:
        tid = th["thread_id"]
        if tid in error_threads:
            continue
        entry = graphs_for(stem, tid, saver)
        for nsd in th["namespaces"]:
            ns = nsd["checkpoint_ns"]
            graph = graph_for_ns(entry, ns)
            for cp in nsd["checkpoints"]:
                cid = cp["checkpoint_id"]
                cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
                try:
                    snap = graph.get_state(cfg)
                    if snap.config["configurable"]["checkpoint_id"] != cid:
                        errs.append(f"{label} {tid} {cid}: get_state returned another checkpoint")
                        continue
                    got = fixturelib.render_values(dict(snap.values))
                except Exception as e:  # noqa: BLE001
                    errs.append(f"{label} {tid} ns={ns!r} {cid}: get_state raised {type(e).__name__}: {e}")
                    continue
                n += 1
                d = compare_values(got, cp["values"], set(cp.get("graph_defaults", [])))
                if d:
                    errs.append(f"{label} {tid} ns={ns!r} {cid} (step {cp.get('step')}): {d}")
    return n


def continue_threads(label: str, stem: str, saver: Any, expected: dict, errs: list[str]) -> int:
    error_threads = {e["thread_id"] for e in expected.get("errors", [])}
    n = 0
    for th in expected["threads"]:
        tid = th["thread_id"]
        entry = graphs_for(stem, tid, saver)
        if tid in error_threads:
            continue
        problem = continue_thread(entry["graph"], tid, "copy")
        if problem:
            errs.append(f"{label} {tid}: {problem}")
            continue
        n += 1
    return n


def checkpoint_keys(path: Path) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        return conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type FROM checkpoints ORDER BY 1, 2, 3"
        ).fetchall()
    finally:
        conn.close()


def copy_args(to: str) -> list[str]:
    return ["copy", "--to", to, "--all", "--apply", "--format", "json"]


def dfck_copy(dfck: str, source: str, to: str, errs: list[str], label: str, key: list[str] = ()) -> bool:
    proc = subprocess.run([dfck, *key, "--db", source, *copy_args(to)], capture_output=True, text=True)
    if proc.returncode != 0:
        errs.append(f"{label}: dfck copy exited {proc.returncode}: {proc.stderr.strip()} {proc.stdout[:400]}")
        return False
    return True


def pg_copy_protection(src: aeskey.Census, conn: Any, label: str) -> tuple[str, list[str]]:
    """A PostgreSQL copy of a SQLite store: writes keep their source write's protection, a blob
    named only by `+aes` source checkpoints is `+aes`. Returns (summary, problems)."""
    from psycopg.rows import tuple_row

    pg, problems = aeskey.pg_census(conn), []
    refs: dict[tuple, set] = {}
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute("SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint->'channel_versions' FROM checkpoints")
        for tid, ns, cid, versions in cur.fetchall():
            enc = aeskey.is_encrypted(src.get(("checkpoints", (tid, ns, cid))))
            for ch, v in (versions or {}).items():
                refs.setdefault((tid, ns, ch, str(v)), set()).add(enc)
    shared = shared_aes = upgraded = 0
    for (table, key), typ in sorted(pg.items()):
        if table == "checkpoint_writes":
            was = src.get(("writes", key))
            if aeskey.is_encrypted(was) and (not aeskey.is_encrypted(typ) or aeskey.inner_type(was) != aeskey.inner_type(typ)):
                problems.append(f"{label}: write {key} was {was} in SQLite, {typ} in PostgreSQL")
            elif aeskey.is_encrypted(typ) and not aeskey.is_encrypted(was):
                upgraded += 1
            continue
        r = refs.get(key, set())
        if r == {True} and not aeskey.is_encrypted(typ):
            problems.append(f"{label}: blob {key} is {typ} but only encrypted checkpoints name it")
        elif r == {True, False}:
            shared += 1
            shared_aes += aeskey.is_encrypted(typ)
        elif r == {False} and aeskey.is_encrypted(typ):
            upgraded += 1
    return (f"postgres rows {aeskey.counts_text(pg)} ({shared} blobs shared by plaintext and encrypted "
            f"checkpoints, {shared_aes} of them +aes; {upgraded} rows plain→+aes)"), problems


def no_key_copy(dfck: str, orig: Path, tmp: Path, server: str, stem: str) -> list[str]:
    """`copy --to PG` without the key (another source copy, another fresh database): exit 1,
    encrypted threads refused naming LANGGRAPH_AES_KEY, none of their rows in the target."""
    import psycopg

    src, pgdb = tmp / f"{stem}.nokey.db", f"dfck_copy_py_{stem}_nokey"
    shutil.copyfile(orig, src)
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{pgdb}"')
        admin.execute(f'CREATE DATABASE "{pgdb}"')
    url = with_db(server, pgdb)
    try:
        return aeskey.no_key_problems([dfck, "--db", str(src), *copy_args(url)],
                                      lambda: (aeskey.sqlite_fingerprint(src), aeskey.pg_fingerprint(url)), stem)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{pgdb}" WITH (FORCE)')


def check_stem(stem: str, dfck: str, fixtures: Path, tmp: Path, server: str) -> tuple[int, int, list[str]]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    errs: list[str] = []
    expected = json.loads((fixtures / "expected" / f"{stem}.json").read_text(encoding="utf-8"))
    orig = fixtures / "sqlite" / f"{stem}.db"
    src, back = tmp / f"{stem}.db", tmp / f"{stem}-back.db"
    shutil.copyfile(orig, src)
    pgdb = f"dfck_copy_py_{stem}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{pgdb}"')
        admin.execute(f'CREATE DATABASE "{pgdb}"')
    url = with_db(server, pgdb)
    key = aeskey.dfck_args(stem)
    if key:
        errs += no_key_copy(dfck, orig, tmp, server, stem)
    if not (dfck_copy(dfck, str(src), url, errs, f"{stem} sqlite→postgres", key)
            and dfck_copy(dfck, url, str(back), errs, f"{stem} postgres→sqlite", key)):
        return 0, 0, errs
    if writes_rows(orig) != writes_rows(back):
        errs.append(f"{stem}: the final copy's writes differ from the original's")
    if key:  # types: compared by protection below (PostgreSQL keeps no checkpoint type)
        if [k[:4] for k in checkpoint_keys(orig)] != [k[:4] for k in checkpoint_keys(back)]:
            errs.append(f"{stem}: the final copy's checkpoint ids or parents differ")
        prot, problems = aeskey.compare_census(aeskey.sqlite_census(orig), aeskey.sqlite_census(back),
                                               f"{stem} back", plain_may_encrypt=True)
        errs += problems
        with psycopg.connect(url, autocommit=True) as conn:
            pg_prot, problems = pg_copy_protection(aeskey.sqlite_census(orig), conn, f"{stem} postgres")
        errs += problems
        print(f"  {stem}: {pg_prot}; sqlite {prot}")
    elif checkpoint_keys(orig) != checkpoint_keys(back):
        errs.append(f"{stem}: the final copy's checkpoint ids, parents or types differ")
    n = cont = 0
    with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        migrations = conn.execute("SELECT count(*) AS n FROM checkpoint_migrations").fetchone()["n"]
        saver = PostgresSaver(conn, **aeskey.saver_kwargs(stem))
        saver.setup()  # must find nothing to migrate
        after = conn.execute("SELECT count(*) AS n FROM checkpoint_migrations").fetchone()["n"]
        if (migrations, after) != (10, 10):
            errs.append(f"{stem}: checkpoint_migrations held {migrations} rows, {after} after PostgresSaver.setup()")
        n += read_all(f"{stem} [postgres]", stem, saver, expected, errs)
        cont += continue_threads(f"{stem} [postgres]", stem, saver, expected, errs)
    conn2 = sqlite3.connect(str(back), check_same_thread=False)
    try:
        saver = SqliteSaver(conn2, **aeskey.saver_kwargs(stem))
        n += read_all(f"{stem} [sqlite]", stem, saver, expected, errs)
        cont += continue_threads(f"{stem} [sqlite]", stem, saver, expected, errs)
        conn2.commit()
    finally:
        conn2.close()
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{pgdb}" WITH (FORCE)')
    return n, cont, errs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--stems", nargs="*", default=STEMS)
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"),
                    help="test server (scripts/pg-test-server.sh); default TEST_POSTGRES_URI")
    args = ap.parse_args()
    if not args.pg_url:
        print("check_copied: no --pg-url / TEST_POSTGRES_URI", file=sys.stderr)
        return 1
    total = continued = 0
    mismatches: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dfck-check-copied-") as t:
        dfck = str(Path(t) / "dfck")  # a concurrent `cargo build` may replace the binary
        shutil.copy2(args.dfck, dfck)
        for stem in args.stems:
            n, c, errs = check_stem(stem, dfck, Path(args.fixtures), Path(t), args.pg_url)
            total += n
            continued += c
            mismatches += errs
            print(f"{stem}: copied sqlite→postgres→sqlite; {n} checkpoints read by PostgresSaver and SqliteSaver, "
                  f"{c} thread copies continued one more turn, {len(errs)} mismatch(es)")
    for e in mismatches[:8]:
        print("  MISMATCH " + e)
    if len(mismatches) > 8:
        print(f"  … and {len(mismatches) - 8} more")
    print(f"copy: {total} checkpoints read by the real savers equal the original's state, "
          f"{continued} copied threads continued, {len(mismatches)} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
