"""The public AES test key of the encrypted fixtures (`aes_*` stems) and the helpers the
generator (scripts/gen_aes_fixtures.py) and the read-back scripts (check_migrated.py,
check_full_to_delta.py, check_copied.py, check_reclaimed.py) share for them.

Nothing is written or run by importing this module; it is a library:

    from aeskey import serde_for, saver_kwargs, dfck_args

fixtures/aes.key holds a PUBLIC TEST KEY (32 ASCII bytes and one newline), committed on
purpose so that anyone can read and regenerate the `aes_*` fixtures. It protects nothing; never
use it for real data. The key bytes are never printed by any script.

* key_bytes()       the key as LangGraph takes it: the file's bytes less one trailing newline
                    (the same rule as `dfck --aes-key-file`);
* serde_for(stem)   EncryptedSerializer.from_pycryptodome_aes(key=...) for `aes_*` stems, else
                    None (the saver's default JsonPlusSerializer);
* saver_kwargs(stem) {"serde": serde_for(stem)} or {}: SqliteSaver(conn, **saver_kwargs(stem));
* dfck_args(stem)   ["--aes-key-file", <repo>/fixtures/aes.key] for `aes_*` stems, else [] —
                    a global flag, placed right after the binary: dfck --aes-key-file KEY --db …;
* open_typed(t, b)  a stored `<inner>+aes` (type, bytes) decrypted to (inner, plaintext); any
                    other pair returned unchanged (for raw-row checks);
* row protection:   sqlite_census(path) / pg_census(conn) map every value row to its stored type
                    (SQLite: checkpoints, writes; PostgreSQL: checkpoint_blobs without `empty`
                    tombstones, checkpoint_writes); protection_counts() counts `+aes` vs plain rows
                    per table; compare_census(before, after) names every row that lost (or changed)
                    its encryption and every new plaintext row in a thread that was wholly
                    encrypted;
* no_key_problems() a dfck run without any key refuses the encrypted threads (exit 1, the
                    refusal naming LANGGRAPH_AES_KEY) and leaves their rows' fingerprint
                    (sqlite_fingerprint / pg_fingerprint: threads holding a `+aes` row)
                    unchanged.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Optional

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

REPO = Path(__file__).resolve().parent.parent
KEY_FILE = REPO / "fixtures" / "aes.key"
KEY_ENV = "LANGGRAPH_AES_KEY"
AES_PREFIX = "aes_"

# a row key: (table, (thread_id, checkpoint_ns, ...identifying columns))
RowKey = tuple[str, tuple]
Census = dict[RowKey, str]


def is_aes(stem: str) -> bool:
    return stem.startswith(AES_PREFIX)


def key_bytes(path: Path = KEY_FILE) -> bytes:
    data = path.read_bytes()
    if data.endswith(b"\n"):
        data = data[:-1]
        if data.endswith(b"\r"):
            data = data[:-1]
    if len(data) not in (16, 24, 32):
        raise ValueError(f"{path}: an AES key is 16, 24 or 32 bytes, this one is {len(data)}")
    return data


def aes_serde() -> EncryptedSerializer:
    return EncryptedSerializer.from_pycryptodome_aes(key=key_bytes())


def serde_for(stem: str) -> Optional[EncryptedSerializer]:
    return aes_serde() if is_aes(stem) else None


def saver_kwargs(stem: str) -> dict[str, Any]:
    serde = serde_for(stem)
    return {"serde": serde} if serde is not None else {}


def dfck_args(stem: str) -> list[str]:
    return ["--aes-key-file", str(KEY_FILE)] if is_aes(stem) else []


def env_without_key() -> dict[str, str]:
    """The environment minus LANGGRAPH_AES_KEY (dfck would take the key from it)."""
    return {k: v for k, v in os.environ.items() if k != KEY_ENV}


# ---------------------------------------------------------------------------------------
# stored types
# ---------------------------------------------------------------------------------------


def is_encrypted(typ: Optional[str]) -> bool:
    return bool(typ) and "+" in typ and typ.split("+", 1)[1] == "aes"


def inner_type(typ: Optional[str]) -> Optional[str]:
    return typ.split("+", 1)[0] if typ and "+" in typ else typ


_CIPHER = None


def open_typed(typ: Optional[str], data: Any) -> tuple[Optional[str], Any]:
    """(inner, plaintext) of an `<inner>+aes` value; anything else unchanged."""
    global _CIPHER
    if not is_encrypted(typ) or data is None:
        return typ, data
    if _CIPHER is None:
        _CIPHER = aes_serde().cipher
    return inner_type(typ), _CIPHER.decrypt("aes", bytes(data))


# ---------------------------------------------------------------------------------------
# row protection census
# ---------------------------------------------------------------------------------------

SQLITE_TABLES = {
    "checkpoints": "SELECT thread_id, checkpoint_ns, checkpoint_id, type FROM checkpoints",
    "writes": "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, type FROM writes",
}
PG_TABLES = {
    "checkpoint_blobs": "SELECT thread_id, checkpoint_ns, channel, version, type FROM checkpoint_blobs"
                        " WHERE type IS DISTINCT FROM 'empty'",
    "checkpoint_writes": "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, type FROM checkpoint_writes",
}


def sqlite_census(path: Path) -> Census:
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        return {(t, tuple(r[:-1])): r[-1] for t, q in SQLITE_TABLES.items() for r in conn.execute(q)}
    finally:
        conn.close()


def pg_census(conn: Any) -> Census:
    """`conn`: a psycopg connection (any row factory)."""
    out: Census = {}
    for t, q in PG_TABLES.items():
        with conn.cursor() as cur:
            cur.execute(q)
            for r in cur.fetchall():
                r = tuple(r.values()) if isinstance(r, dict) else tuple(r)
                out[(t, r[:-1])] = r[-1]
    return out


def protection_counts(census: Census) -> dict[str, dict[str, int]]:
    c: Counter = Counter()
    for (table, _key), typ in census.items():
        c[(table, "aes" if is_encrypted(typ) else "plain")] += 1
    tables = sorted({t for t, _ in c})
    return {t: {"aes": c[(t, "aes")], "plain": c[(t, "plain")]} for t in tables}


def counts_text(census: Census) -> str:
    return ", ".join(f"{t} {v['aes']} +aes / {v['plain']} plain" for t, v in protection_counts(census).items())


def thread_protection(census: Census) -> dict[str, str]:
    """thread_id -> "aes" (every row encrypted), "plain" (none) or "mixed"."""
    seen: dict[str, set] = {}
    for (_t, key), typ in census.items():
        seen.setdefault(key[0], set()).add(is_encrypted(typ))
    return {tid: ("mixed" if len(s) == 2 else "aes" if True in s else "plain") for tid, s in seen.items()}


def compare_census(before: Census, after: Census, label: str, plain_may_encrypt: bool = False) -> tuple[str, list[str]]:
    """Rows present before and after keep their protection: `+aes` stays `+aes` with the same
    inner tag, plaintext stays plaintext (unless plain_may_encrypt, then only counted). A row
    dfck added to a thread whose rows were all `+aes` must be `+aes`. Returns (summary, problems)."""
    problems: list[str] = []
    threads = thread_protection(before)
    encrypted_now = added = removed = 0
    for k, b in before.items():
        if k not in after:
            removed += 1
            continue
        a = after[k]
        where = f"{label}: {k[0]} {k[1]}"
        if is_encrypted(b) and not is_encrypted(a):
            problems.append(f"{where}: was {b}, became plaintext {a}")
        elif is_encrypted(b) and inner_type(a) != inner_type(b):
            problems.append(f"{where}: inner tag changed {b} -> {a}")
        elif not is_encrypted(b) and is_encrypted(a):
            encrypted_now += 1
            if not plain_may_encrypt:
                problems.append(f"{where}: was plaintext {b}, became {a}")
    for k, a in after.items():
        if k in before:
            continue
        added += 1
        if threads.get(k[1][0]) == "aes" and not is_encrypted(a):
            problems.append(f"{label}: {k[0]} {k[1]}: a new plaintext row ({a}) in a wholly encrypted thread")
    summary = (f"rows before: {counts_text(before)}; after: {counts_text(after)}"
               f" ({added} added, {removed} removed, {encrypted_now} plain→+aes)")
    return summary, problems


# ---------------------------------------------------------------------------------------
# a dfck run without the key
# ---------------------------------------------------------------------------------------


def sqlite_fingerprint(path: Path) -> tuple:
    """SHA-256 of every row of the threads holding a `+aes` row (checkpoints and writes)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        enc = sorted(r[0] for r in conn.execute(
            "SELECT thread_id FROM checkpoints WHERE type LIKE '%+aes' UNION "
            "SELECT thread_id FROM writes WHERE type LIKE '%+aes'"))
        h = hashlib.sha256()
        for tid in enc:
            for table in ("checkpoints", "writes"):
                for row in conn.execute(f"SELECT * FROM {table} WHERE thread_id = ? ORDER BY 1, 2, 3, 4", (tid,)):
                    h.update(repr(row).encode())
        return tuple(enc), h.hexdigest()
    finally:
        conn.close()


def pg_fingerprint(url: str) -> tuple:
    """md5 of every row of the threads holding a `+aes` blob or write, table by table."""
    import psycopg

    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        if not {"checkpoints", "checkpoint_blobs", "checkpoint_writes"} <= tables:
            return ()
        enc = sorted(r[0] for r in conn.execute(
            "SELECT thread_id FROM checkpoint_blobs WHERE type LIKE '%+aes' UNION "
            "SELECT thread_id FROM checkpoint_writes WHERE type LIKE '%+aes'"))
        if not enc:
            return ()
        out.append(("threads", tuple(enc)))
        for t in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            h = conn.execute(
                f'SELECT md5(coalesce(string_agg(x::text, \'|\' ORDER BY x::text), \'\')) FROM "{t}" x'
                " WHERE thread_id = ANY(%s)", (enc,)).fetchone()[0]
            out.append((t, h))
    return tuple(out)


def no_key_problems(cmd: list[str], fingerprint: Callable[[], Any], label: str) -> list[str]:
    """Runs `cmd` (a dfck command line without --aes-key-file) with LANGGRAPH_AES_KEY unset:
    dfck's per-thread refusal (docs/security.md): exit 1, the refusal naming LANGGRAPH_AES_KEY,
    and no row of an encrypted thread changed (plaintext threads may be worked on)."""
    before = fingerprint()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env_without_key())
    after = fingerprint()
    problems = []
    if p.returncode != 1:
        problems.append(f"{label}: without the key dfck exited {p.returncode} (expected 1, threads refused): {p.stderr.strip()[:300]}")
    if KEY_ENV not in p.stdout + p.stderr:
        problems.append(f"{label}: without the key the refusal should name {KEY_ENV}")
    if before != after:
        problems.append(f"{label}: the run without the key changed an encrypted thread")
    return problems


def no_key_sqlite(dfck: str, src: Path, tmp: Path, args: list[str], label: str) -> list[str]:
    """no_key_problems on a fresh copy of `src` (the keyed run gets a pristine store)."""
    db = tmp / f"{src.stem}.nokey.db"
    db.write_bytes(src.read_bytes())
    try:
        return no_key_problems([dfck, "--db", str(db), *args], lambda: sqlite_fingerprint(db), label)
    finally:
        for s in ("", "-wal", "-shm", "-journal"):
            Path(f"{db}{s}").unlink(missing_ok=True)


def no_key_pg(dfck: str, server: str, template: str, args: list[str], label: str,
              with_db: Callable[[str, str], str]) -> list[str]:
    """no_key_problems on a fresh copy (database <template>_nokey) of a fixture database;
    with_db(server, name) is the URL of database `name` (check_migrated.with_db)."""
    import psycopg

    copy = f"{template}_nokey"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
        admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{template}"')
    url = with_db(server, copy)
    try:
        return no_key_problems([dfck, "--db", url, *args], lambda: pg_fingerprint(url), label)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')
