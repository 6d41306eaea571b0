#!/usr/bin/env python3
"""Independent check of `dfck audit` with the real LangGraph: the allowlist it emits lets
strict deserialization read every stored value, and nothing less does.

    .venv/bin/python scripts/check_audit.py [--dfck target/release/dfck] [--fixtures fixtures]
                                           [--pg-url URL]

For every SQLite fixture with an expected JSON (fixtures/expected/<stem>.json), and with
--pg-url / TEST_POSTGRES_URI every PostgreSQL fixture database dfck_<stem> with one
(fixtures/expected-pg/<stem>.json):

1. run `dfck --db STORE audit --emit python` and exec what it prints: the list
   `allowed_msgpack_modules` (and `audit --format json`: every value but pickle ones audited);
2. read every checkpoint and every pending write with the real saver (`saver.list(None)`: each
   CheckpointTuple's checkpoint, metadata and pending writes), once permissive
   (`JsonPlusSerializer(allowed_msgpack_modules=True)`) and once strict with the list
   (`JsonPlusSerializer(allowed_msgpack_modules=list)`), with a serde event listener
   (langgraph/checkpoint/serde/event_hooks.py) registered: the two reads must be equal and the
   strict one must emit no `msgpack_blocked` / `msgpack_method_blocked` event (sufficient);
3. for each entry of the list, read strict again with the list less that entry: a blocked event
   naming it, or a difference from the permissive read, must appear (minimal).

`pickle` stores are read with `pickle_fallback=True` on both sides; `encrypted` (a toy `xor`
cipher only Python has) is skipped; `aes_*` stores, when present, are audited with
`--aes-key-file fixtures/aes.key` and read through
`EncryptedSerializer.from_pycryptodome_aes(serde, key=…)`.

Then every tampered store (fixtures/tampered/expected.json; SQLite files, and PostgreSQL copies
of dfck_apptypes with the UPDATE of each `.pg.sql` applied) must make `dfck audit` exit 1 and
report the rewritten value's import as never allowed. Tampered stores are never opened with
LangGraph.

Exit 1 on any failure, 0 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections import deque
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer  # noqa: E402
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener  # noqa: E402
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from check_migrated import with_db  # noqa: E402

# Permissive reads warn once per unregistered type; strict ones once per blocked type: the
# events are what this script counts.
logging.getLogger("langgraph.checkpoint.serde.jsonplus").setLevel(logging.ERROR)

SKIP = {"encrypted": "a toy xor cipher only Python has"}
BLOCKED = ("msgpack_blocked", "msgpack_method_blocked")


def canon(v: Any) -> Any:
    """A comparable picture of a value: types kept, NaN equal to NaN, sets ordered."""
    if isinstance(v, float):
        return ("float", "nan" if math.isnan(v) else repr(v))
    if v is None or isinstance(v, (bool, int, str, bytes, bytearray)):
        return (type(v).__name__, v)
    t = f"{type(v).__module__}.{type(v).__qualname__}"
    if isinstance(v, dict):
        return (t, [(canon(k), canon(x)) for k, x in v.items()])
    if isinstance(v, (list, tuple, deque)):
        return (t, [canon(x) for x in v])
    if isinstance(v, (set, frozenset)):
        return (t, sorted(repr(canon(x)) for x in v))
    if isinstance(v, Enum):
        return (t, canon(v.value))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (t, [(f.name, canon(getattr(v, f.name))) for f in dataclasses.fields(v)])
    if hasattr(v, "__dict__") and not callable(v):
        return (t, canon(dict(vars(v))))
    return (t, repr(v))


def serde_for(allowed: Any, stem: str, key: Optional[bytes]) -> Any:
    s = JsonPlusSerializer(allowed_msgpack_modules=allowed, pickle_fallback=stem.startswith("pickle"))
    return EncryptedSerializer.from_pycryptodome_aes(serde=s, key=key) if key is not None else s


def read_store(open_saver: Callable[[Any], Any], serde: Any) -> tuple[list[Any], list[dict], int, int]:
    """Every checkpoint tuple (checkpoint, metadata, pending writes) read with `serde`, the
    serde events seen meanwhile, and the checkpoints and writes read."""
    events: list[dict] = []
    unregister = register_serde_event_listener(events.append)
    try:
        saver = open_saver(serde)
        out, writes = [], 0
        for t in saver.list(None):
            cfg = t.config["configurable"]
            writes += len(t.pending_writes or [])
            out.append(
                (cfg["thread_id"], cfg.get("checkpoint_ns", ""), cfg["checkpoint_id"],
                 canon(t.checkpoint), canon(t.metadata), canon(t.pending_writes))
            )
    finally:
        unregister()
    out.sort(key=lambda r: r[:3])
    return out, events, len(out), writes


def run_audit(dfck: str, db: str, key_file: Optional[Path], args: list[str]) -> subprocess.CompletedProcess:
    cmd = [dfck, "--db", db]
    if key_file is not None:
        cmd += ["--aes-key-file", str(key_file)]
    return subprocess.run(cmd + ["audit", *args], capture_output=True, text=True, env={**os.environ, "DFCK_DB": ""})


def emitted_list(dfck: str, db: str, key_file: Optional[Path], errs: list[str], label: str) -> Optional[list[tuple]]:
    r = run_audit(dfck, db, key_file, ["--emit", "python"])
    if r.returncode not in (0, 1):
        errs.append(f"{label}: audit --emit python exited {r.returncode}: {r.stderr.strip()[:300]}")
        return None
    j = run_audit(dfck, db, key_file, ["--format", "json"])
    doc = json.loads(j.stdout) if j.returncode in (0, 1) else None
    if doc is None or doc["strict"]["rows_undecodable"] or doc["strict"]["rows_not_audited"] != doc["strict"]["pickle_rows"]:
        errs.append(f"{label}: audit left values unread (exit {j.returncode}): {doc and doc['strict']}")
    scope: dict[str, Any] = {}
    exec(r.stdout, {}, scope)  # the artifact is Python source: one assignment
    lst = scope.get("allowed_msgpack_modules")
    if not isinstance(lst, list) or not all(isinstance(x, tuple) and len(x) == 2 for x in lst):
        errs.append(f"{label}: --emit python printed no list of pairs: {r.stdout[:200]!r}")
        return None
    return lst


def check_store(label: str, stem: str, dfck: str, db: str, open_saver: Callable[[Any], Any],
                key: Optional[bytes], key_file: Optional[Path], errs: list[str]) -> tuple[int, int, int]:
    """Returns (checkpoints read, writes read, entries emitted)."""
    allowed = emitted_list(dfck, db, key_file, errs, label)
    if allowed is None:
        return 0, 0, 0
    base, _, n_cp, n_w = read_store(open_saver, serde_for(True, stem, key))
    strict, events, _, _ = read_store(open_saver, serde_for(allowed, stem, key))
    blocked = [e for e in events if e["kind"] in BLOCKED]
    if blocked:
        errs.append(f"{label}: strict mode with the emitted list blocked {blocked[:3]}")
    if strict != base:
        diff = next((a[:3] for a, b in zip(base, strict) if a != b), "row count")
        errs.append(f"{label}: strict read with the emitted list differs from the permissive read at {diff}")
    for entry in allowed:
        less = [x for x in allowed if x != entry]
        got, events, _, _ = read_store(open_saver, serde_for(less, stem, key))
        named = any(e["kind"] == "msgpack_blocked" and (e["module"], e["name"]) == tuple(entry) for e in events)
        if not named and got == base:
            errs.append(f"{label}: without {entry} strict mode still reads everything: the entry is not needed")
    return n_cp, n_w, len(allowed)


def sqlite_opener(path: Path, tmp: Path) -> Callable[[Any], Any]:
    copy = tmp / f"read-{path.name}"
    shutil.copyfile(path, copy)

    def open_saver(serde: Any) -> Any:
        return SqliteSaver(sqlite3.connect(str(copy), check_same_thread=False), serde=serde)

    return open_saver


def pg_opener(url: str) -> tuple[Callable[[Any], Any], Callable[[], None]]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    return (lambda serde: PostgresSaver(conn, serde=serde)), conn.close


def key_for(stem: str, fixtures: Path) -> tuple[Optional[bytes], Optional[Path]]:
    if not stem.startswith("aes"):
        return None, None
    path = fixtures / "aes.key"
    raw = path.read_bytes()
    if raw.endswith(b"\n"):
        raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
    return raw, path


def check_tampered(dfck: str, fixtures: Path, pg_url: Optional[str], errs: list[str]) -> int:
    spec_path = fixtures / "tampered" / "expected.json"
    n = 0
    for t in json.loads(spec_path.read_text(encoding="utf-8"))["tampered"]:
        want = t["never_allowed"]
        targets = [("sqlite", str(fixtures / "tampered" / t["sqlite"]["file"]), None)]
        if pg_url and "postgres" in t:
            targets.append(("postgres", None, t["postgres"]))
        for backend, db, pg in targets:
            label = f"tampered {t['name']} [{backend}]"
            drop: Optional[Callable[[], None]] = None
            if pg is not None:
                import psycopg

                scratch = f"dfck_audit_check_{t['name']}"
                with psycopg.connect(pg_url, autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
                    admin.execute(f'CREATE DATABASE "{scratch}" TEMPLATE "{pg["database_template"]}"')
                db = with_db(pg_url, scratch)
                with psycopg.connect(db, autocommit=True) as c:
                    c.execute((fixtures / "tampered" / pg["file"]).read_text(encoding="utf-8"))

                def drop(scratch: str = scratch) -> None:
                    with psycopg.connect(pg_url, autocommit=True) as admin:
                        admin.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
            try:
                r = run_audit(dfck, db, None, ["--format", "json"])
                n += 1
                if r.returncode != 1:
                    errs.append(f"{label}: audit exited {r.returncode}, expected 1: {r.stderr.strip()[:200]}")
                    continue
                doc = json.loads(r.stdout)
                hits = [
                    e for e in doc["entries"]
                    if (e["ext"], e["module"], e["name"], e["method"]) == (want["ext"], want["module"], want["name"], want["method"])
                ]
                if doc["strict"]["verdict"] != "breaks" or [e["class"] for e in hits] != ["never_allowed"]:
                    errs.append(f"{label}: verdict {doc['strict']['verdict']}, entries {hits}: expected {want} never allowed")
                elif hits[0]["first_seen"]["checkpoint_id"] != (pg or t["sqlite"])["checkpoint_id"]:
                    errs.append(f"{label}: first seen {hits[0]['first_seen']}, expected checkpoint {(pg or t['sqlite'])['checkpoint_id']}")
            finally:
                if drop is not None:
                    drop()
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"))
    args = ap.parse_args()
    fixtures = Path(args.fixtures)
    errs: list[str] = []
    stores = cps = writes = entries = 0
    with tempfile.TemporaryDirectory(prefix="dfck-check-audit-") as t:
        tmp = Path(t)
        dfck = str(tmp / "dfck")
        shutil.copy2(args.dfck, dfck)
        for exp in sorted((fixtures / "expected").glob("*.json")):
            stem, db = exp.stem, fixtures / "sqlite" / f"{exp.stem}.db"
            if stem in SKIP or not db.exists():
                print(f"audit {stem}: skipped ({SKIP.get(stem, 'no store')})")
                continue
            key, key_file = key_for(stem, fixtures)
            before = len(errs)
            c, w, e = check_store(stem, stem, dfck, str(db), sqlite_opener(db, tmp), key, key_file, errs)
            stores, cps, writes, entries = stores + 1, cps + c, writes + w, entries + e
            print(f"audit {stem}: {e} allowlist entries, {c} checkpoints and {w} writes read strict, {len(errs) - before} failure(s)")
        for exp in sorted((fixtures / "expected-pg").glob("*.json")) if args.pg_url else []:
            stem = exp.stem
            if stem in SKIP:
                continue
            key, key_file = key_for(stem, fixtures)
            url = with_db(args.pg_url, f"dfck_{stem}")
            open_saver, close = pg_opener(url)
            before = len(errs)
            try:
                c, w, e = check_store(f"pg {stem}", stem, dfck, url, open_saver, key, key_file, errs)
            finally:
                close()
            stores, cps, writes, entries = stores + 1, cps + c, writes + w, entries + e
            print(f"audit postgres {stem}: {e} allowlist entries, {c} checkpoints and {w} writes read strict, {len(errs) - before} failure(s)")
        if not args.pg_url:
            print("audit postgres: skipped (no --pg-url / TEST_POSTGRES_URI)")
        tampered = check_tampered(dfck, fixtures, args.pg_url, errs)
    for e in errs[:12]:
        print("  FAILURE " + e)
    print(
        f"audit: {stores} stores, {cps} checkpoints and {writes} writes read by the real LangGraph in strict mode "
        f"with the emitted allowlist ({entries} entries), {tampered} tampered stores never allowed, "
        f"{len(errs)} failures"
    )
    return 1 if errs else 0


if __name__ == "__main__":
    raise SystemExit(main())
