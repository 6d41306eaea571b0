#!/usr/bin/env python3
"""Generate dfck's DEFECT fixtures for `dfck verify`: copies of real-library stores with
exactly one defect injected surgically.

    # SQLite only
    .venv/bin/python scripts/gen_defects.py --out fixtures
    # SQLite + Postgres (needs a throwaway server, e.g. scripts/pg-test-server.sh start)
    .venv/bin/python scripts/gen_defects.py --out fixtures --pg-url "$TEST_POSTGRES_URI"

Inputs are the real-library fixtures (fixtures/sqlite/<stem>.db written by SqliteSaver,
fixtures/postgres/<stem>.sql pg_dumps written by PostgresSaver). Outputs:

* fixtures/defects/<name>.db       SQLite copy (VACUUM INTO, other threads deleted, defect
                                   injected with UPDATE/INSERT/DELETE, VACUUM, journal_mode
                                   WAL as LangGraph leaves it, no -wal/-shm sidecars)
* fixtures/defects/expected.json   what `dfck verify` must report for each copy
* fixtures/defects-pg/<name>.sql   the source dump restored into a scratch database
                                   "dfckdefect_<name>", other threads deleted, defect injected
                                   with SQL, dumped with gen_pg_fixtures.dump_db (pg_dump
                                   --no-owner --no-privileges --no-comments --inserts, same
                                   clean-up). scripts/pg-test-server.sh loads it into
                                   database "dfck_defect_<name>".
* fixtures/defects-pg/expected.json  same shape, Postgres checkpoint ids.

Every target is picked by a rule over the store's content (documented in DEFECTS below and
in each entry's "rule"), never by a hard-coded id, so the script works on regenerated
fixtures. Values are changed by decoding with LangGraph's own JsonPlusSerializer, editing
the Python object and re-encoding with the same serializer; the script asserts first that
the untouched value re-encodes to exactly the stored bytes, so every other byte is as
LangGraph wrote it. SQLite metadata is re-encoded with json.dumps(ensure_ascii=False) (the
saver's own encoding; asserted the same way). Postgres metadata/checkpoint are JSONB
(edited with jsonb operators).

After writing each file the script re-opens it with the real saver (SqliteSaver on a temp
copy; PostgresSaver on a fresh restore of the dump) and records LangGraph's view in the
entry's "evidence" (get_state results / the exception it raises), asserting that the
injection took.

expected.json: {"defects": [{"name", "file", "database" (pg), "source", "thread_id",
"checkpoint_ns", "rule", "description", "threads": [{"thread_id", "checkpoints"}] (what
the copy holds, i.e. threads_checked / checkpoints_checked), "expect": [{"code",
"severity", "thread_id", "checkpoint_ns", "checkpoint_id", ... extra keys locating the
row: task_id/idx/channel for writes, channel/version for Postgres blobs; "secondary":
true for findings that follow from the defect rather than being it}], "exit",
"evidence"}]}. "exit" is 1 iff a non-secondary expected finding has severity "error".

Deterministic: the same inputs give byte-identical outputs (no randomness, no clocks).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: E402
from langgraph.checkpoint.serde.types import _DeltaSnapshot  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.types import Overwrite  # noqa: E402

from graphs import build_conv_graph, messages_annotation  # noqa: E402

SERDE = JsonPlusSerializer()
MARKER_KEY = "deerflow_checkpoint_channel_mode"
COUNTERS_KEY = "counters_since_delta_snapshot"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"

SEVERITY = {
    "lineage.dangling_parent": "error",
    "lineage.cycle": "error",
    "lineage.depth_exceeded": "error",
    "lineage.multiple_roots": "warning",
    "lineage.order_anomaly": "warning",
    "lineage.unsettled_head": "warning",
    "mode.unmarked_delta": "error",
    "mode.unmarked_snapshot": "warning",
    "mode.marker_without_delta": "warning",
    "mode.unknown_marker": "warning",
    "mode.mixed_thread": "info",
    "delta.fork_contaminated": "error",
    "delta.fork_ambiguous": "warning",
    "value.literal_overwrite": "error",
    "value.undecodable": "error",
    "value.unsupported_serializer": "error",
    "message.missing_id": "warning",
}


class DefectError(RuntimeError):
    pass


def need(cond: bool, what: str) -> None:
    if not cond:
        raise DefectError(what)


# ---------------------------------------------------------------------------------------
# Serializer helpers (re-encode with the same library; assert byte identity first)
# ---------------------------------------------------------------------------------------


def decode_exact(typ: str, data: bytes) -> Any:
    obj = SERDE.loads_typed((typ, bytes(data)))
    t2, d2 = SERDE.dumps_typed(obj)
    need((t2, bytes(d2)) == (typ, bytes(data)), "value does not re-encode to its stored bytes")
    return obj


def encode(obj: Any, typ: str) -> bytes:
    t2, d2 = SERDE.dumps_typed(obj)
    need(t2 == typ, f"re-encoded type {t2!r} != {typ!r}")
    return bytes(d2)


def sqlite_md_decode(raw: bytes) -> dict:
    md = json.loads(bytes(raw).decode("utf-8"))
    need(json.dumps(md, ensure_ascii=False).encode("utf-8") == bytes(raw), "metadata does not re-encode exactly")
    return md


def sqlite_md_encode(md: dict) -> bytes:
    return json.dumps(md, ensure_ascii=False).encode("utf-8")


def shift_uuid6(u: str, delta_100ns: int) -> str:
    """The UUIDv6 `u` with its 60-bit timestamp moved by delta (100 ns units); clock_seq
    and node kept."""
    x = uuid.UUID(u).int
    need((x >> 76) & 0xF == 6, f"{u} is not a UUIDv6")
    ts = ((x >> 96) << 28) | (((x >> 80) & 0xFFFF) << 12) | ((x >> 64) & 0x0FFF)
    ts += delta_100ns
    x = ((ts >> 28) << 96) | (((ts >> 12) & 0xFFFF) << 80) | (0x6 << 76) | ((ts & 0xFFF) << 64) | (x & ((1 << 64) - 1))
    return str(uuid.UUID(int=x))


# ---------------------------------------------------------------------------------------
# A uniform read model of one (thread, ns) for the selection rules
# ---------------------------------------------------------------------------------------


@dataclass
class Wr:
    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    value: bytes


@dataclass
class Cp:
    id: str
    parent: Optional[str]
    metadata: dict
    checkpoint: dict  # channel_values as the saver rebuilds them (decoded)
    writes: list[Wr] = field(default_factory=list)
    inline: Optional[dict] = None  # Postgres: the inline JSONB channel_values

    @property
    def source(self) -> Any:
        return self.metadata.get("source")

    @property
    def step(self) -> Any:
        return self.metadata.get("step")

    @property
    def encoding(self) -> str:
        cv = self.checkpoint.get("channel_values", {})
        if "messages" in cv:
            return "snapshot" if isinstance(cv["messages"], _DeltaSnapshot) else "plain"
        if "messages" in self.checkpoint.get("channel_versions", {}):
            return "absent"
        return "unversioned"

    @property
    def writes_snapshot_here(self) -> bool:
        """The _DeltaSnapshot is stored BY this checkpoint (SQLite: in its row; Postgres:
        the inline `true` marker; other checkpoints may share the blob by version)."""
        if self.encoding != "snapshot":
            return False
        return self.inline is None or self.inline.get("messages") is True

    def version(self, ch: str) -> Optional[str]:
        v = self.checkpoint.get("channel_versions", {}).get(ch)
        return None if v is None else str(v)


def metadata_is_delta(md: dict) -> bool:
    """DeerFlow's checkpoint_metadata_uses_delta (docs/replay-and-forks.md#modes-and-markers)."""
    if not md:
        return False
    if md.get(MARKER_KEY) == "delta":
        return True
    ctr = md.get(COUNTERS_KEY)
    return isinstance(ctr, dict) and "messages" in ctr


def pending_tasks(ck: dict) -> list[str]:
    """docs/storage-format.md#versions-seen heuristic: node X is pending iff channel_values has its
    trigger T (branch:to:X, or __start__ for __start__) and versions[T] > seen[X][T]
    (compared as strings, missing = "")."""
    cv = ck.get("channel_values", {})
    vers = ck.get("channel_versions", {})
    seen = ck.get("versions_seen", {})
    out = []
    for key in cv:
        if key.startswith("branch:to:"):
            node = key[len("branch:to:"):]
        elif key == "__start__":
            node = "__start__"
        else:
            continue
        if str(vers.get(key, "")) > str(seen.get(node, {}).get(key, "")):
            out.append(node)
    if cv.get("__pregel_tasks"):
        out.append("__pregel_push")
    return out


def children_of(cps: list[Cp]) -> dict[str, list[Cp]]:
    out: dict[str, list[Cp]] = {}
    for c in cps:
        if c.parent is not None:
            out.setdefault(c.parent, []).append(c)
    return out


def by_id(cps: list[Cp]) -> dict[str, Cp]:
    return {c.id: c for c in cps}


# ---------------------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------------------


class SqliteBackend:
    kind = "sqlite"

    def __init__(self, src: Path, work: Path) -> None:
        self.path = work
        if work.exists():
            work.unlink()
        src_conn = sqlite3.connect(f"file:{src}?immutable=1", uri=True)
        src_conn.execute("VACUUM INTO ?", (str(work),))
        src_conn.close()
        self.conn = sqlite3.connect(str(work))

    def q(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self.conn.execute(sql, params).fetchall()

    def thread_ids(self) -> list[str]:
        return [r[0] for r in self.q("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id")]

    def keep_threads(self, keep: list[str]) -> None:
        marks = ",".join("?" * len(keep))
        self.q(f"DELETE FROM checkpoints WHERE thread_id NOT IN ({marks})", tuple(keep))
        self.q(f"DELETE FROM writes WHERE thread_id NOT IN ({marks})", tuple(keep))

    def checkpoints(self, tid: str, ns: str = "") -> list[Cp]:
        out = []
        for cid, pid, typ, blob, md in self.q(
            "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints"
            " WHERE thread_id=? AND checkpoint_ns=? ORDER BY checkpoint_id",
            (tid, ns),
        ):
            try:
                ck = SERDE.loads_typed((typ, bytes(blob)))
            except Exception:
                ck = {}
            cp = Cp(cid, pid, json.loads(bytes(md).decode("utf-8")) if md else {}, ck)
            for task_id, path, idx, ch, wt, val in self.q(
                "SELECT task_id, task_path, idx, channel, type, value FROM writes WHERE thread_id=? AND checkpoint_ns=?"
                " AND checkpoint_id=? ORDER BY task_path, task_id, idx",
                (tid, ns, cid),
            ):
                cp.writes.append(Wr(task_id, path, idx, ch, wt, bytes(val) if val is not None else b""))
            out.append(cp)
        return out

    def set_parent(self, tid: str, cid: str, parent: Optional[str], ns: str = "") -> None:
        n = self.conn.execute(
            "UPDATE checkpoints SET parent_checkpoint_id=? WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?",
            (parent, tid, ns, cid),
        ).rowcount
        need(n == 1, "set_parent: no row")

    def edit_metadata(self, tid: str, cid: str, fn: Callable[[dict], None], ns: str = "") -> None:
        (raw,), = self.q(
            "SELECT metadata FROM checkpoints WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?", (tid, ns, cid)
        )
        md = sqlite_md_decode(raw)
        fn(md)
        self.q(
            "UPDATE checkpoints SET metadata=? WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?",
            (sqlite_md_encode(md), tid, ns, cid),
        )

    def edit_checkpoint(self, tid: str, cid: str, fn: Callable[[dict], None], ns: str = "") -> None:
        (typ, blob), = self.q(
            "SELECT type, checkpoint FROM checkpoints WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?",
            (tid, ns, cid),
        )
        ck = decode_exact(typ, blob)
        fn(ck)
        self.q(
            "UPDATE checkpoints SET checkpoint=? WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?",
            (encode(ck, typ), tid, ns, cid),
        )

    def set_write_value(self, tid: str, cid: str, w: Wr, value: bytes, ns: str = "") -> None:
        n = self.conn.execute(
            "UPDATE writes SET value=? WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=? AND task_id=? AND idx=?",
            (value, tid, ns, cid, w.task_id, w.idx),
        ).rowcount
        need(n == 1, "set_write_value: no row")

    def delete_checkpoints(self, tid: str, ids: list[str], ns: str = "") -> None:
        for cid in ids:
            self.q("DELETE FROM checkpoints WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?", (tid, ns, cid))
            self.q("DELETE FROM writes WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?", (tid, ns, cid))

    def delete_writes(self, tid: str, cid: str, keys: list[tuple[str, int]], ns: str = "") -> None:
        for task_id, idx in keys:
            need(self.conn.execute("DELETE FROM writes WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?"
                                   " AND task_id=? AND idx=?", (tid, ns, cid, task_id, idx)).rowcount == 1,
                 "delete_writes: no row")

    def insert_copy(self, tid: str, src_id: str, new_id: str, parent: str, ts: str, md_fn: Callable[[dict], None],
                    ns: str = "") -> None:
        (typ, blob, raw_md), = self.q(
            "SELECT type, checkpoint, metadata FROM checkpoints WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?",
            (tid, ns, src_id),
        )
        ck = decode_exact(typ, blob)
        ck["id"] = new_id
        ck["ts"] = ts
        md = sqlite_md_decode(raw_md)
        md_fn(md)
        self.q(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,"
            " metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (tid, ns, new_id, parent, typ, encode(ck, typ), sqlite_md_encode(md)),
        )

    def truncate_checkpoint_blob(self, tid: str, cid: str, ns: str = "") -> dict:
        (blob,), = self.q(
            "SELECT checkpoint FROM checkpoints WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?", (tid, ns, cid)
        )
        blob = bytes(blob)
        cut = blob[: len(blob) // 2]
        self.q(
            "UPDATE checkpoints SET checkpoint=? WHERE thread_id=? AND checkpoint_ns=? AND checkpoint_id=?",
            (cut, tid, ns, cid),
        )
        return {"column": "checkpoints.checkpoint", "bytes_before": len(blob), "bytes_after": len(cut)}

    def finish(self, dest: Path) -> None:
        self.conn.commit()
        self.conn.execute("VACUUM")
        self.conn.execute("PRAGMA journal_mode=WAL")  # as SqliteSaver leaves its files
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()
        for suffix in ("-wal", "-shm"):
            need(not Path(str(self.path) + suffix).exists(), "sidecar left behind")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(self.path), str(dest))


class PgBackend:
    kind = "postgres"

    def __init__(self, url: str, dump: Path, name: str) -> None:
        import psycopg
        from psycopg.rows import tuple_row

        import check_pg_fixtures as cpf

        self.url = url
        self.dbname = "dfckdefect_" + name
        self.conninfo = cpf.restore(url, self.dbname, dump)
        self.conn = psycopg.Connection.connect(self.conninfo, autocommit=True, row_factory=tuple_row)

    def q(self, query: str, params: tuple = ()) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else []

    def n(self, query: str, params: tuple = ()) -> int:
        with self.conn.cursor() as cur:
            cur.execute(query, params)
            return cur.rowcount

    def thread_ids(self) -> list[str]:
        return [r[0] for r in self.q('SELECT thread_id FROM checkpoints GROUP BY thread_id ORDER BY thread_id COLLATE "C"')]

    def keep_threads(self, keep: list[str]) -> None:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            self.q(f"DELETE FROM {table} WHERE NOT (thread_id = ANY(%s))", (keep,))

    def checkpoints(self, tid: str, ns: str = "") -> list[Cp]:
        blobs = {
            (ch, ver): (typ, bytes(b) if b is not None else None)
            for ch, ver, typ, b in self.q(
                "SELECT channel, version, type, blob FROM checkpoint_blobs WHERE thread_id=%s AND checkpoint_ns=%s",
                (tid, ns),
            )
        }
        out = []
        for cid, pid, ck, md in self.q(
            "SELECT checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints"
            ' WHERE thread_id=%s AND checkpoint_ns=%s ORDER BY checkpoint_id COLLATE "C"',
            (tid, ns),
        ):
            inline = dict(ck.get("channel_values") or {})
            cv = dict(inline)
            for ch, ver in (ck.get("channel_versions") or {}).items():
                b = blobs.get((ch, str(ver)))
                if b is not None and b[0] != "empty":
                    try:
                        cv[ch] = SERDE.loads_typed((b[0], b[1] or b""))
                    except Exception:
                        cv[ch] = None
            ck2 = dict(ck)
            ck2["channel_values"] = cv
            cp = Cp(cid, pid, md or {}, ck2, inline=inline)
            for task_id, path, idx, ch, wt, val in self.q(
                "SELECT task_id, task_path, idx, channel, type, blob FROM checkpoint_writes WHERE thread_id=%s"
                " AND checkpoint_ns=%s AND checkpoint_id=%s",
                (tid, ns, cid),
            ):
                cp.writes.append(Wr(task_id, path, idx, ch, wt, bytes(val)))
            # writes_sort_key: (task_path, task_id, idx), strings by code point
            cp.writes.sort(key=lambda w: (w.task_path, w.task_id, w.idx))
            out.append(cp)
        return out

    def set_parent(self, tid: str, cid: str, parent: Optional[str], ns: str = "") -> None:
        need(self.n("UPDATE checkpoints SET parent_checkpoint_id=%s WHERE thread_id=%s AND checkpoint_ns=%s"
                    " AND checkpoint_id=%s", (parent, tid, ns, cid)) == 1, "set_parent: no row")

    def edit_metadata(self, tid: str, cid: str, fn: Callable[[dict], None], ns: str = "") -> None:
        from psycopg.types.json import Jsonb

        (md,), = self.q("SELECT metadata FROM checkpoints WHERE thread_id=%s AND checkpoint_ns=%s AND checkpoint_id=%s",
                        (tid, ns, cid))
        fn(md)
        self.q("UPDATE checkpoints SET metadata=%s WHERE thread_id=%s AND checkpoint_ns=%s AND checkpoint_id=%s",
               (Jsonb(md), tid, ns, cid))

    def edit_checkpoint_json(self, tid: str, cid: str, fn: Callable[[dict], None], ns: str = "") -> None:
        from psycopg.types.json import Jsonb

        (ck,), = self.q(
            "SELECT checkpoint FROM checkpoints WHERE thread_id=%s AND checkpoint_ns=%s AND checkpoint_id=%s",
            (tid, ns, cid))
        fn(ck)
        self.q("UPDATE checkpoints SET checkpoint=%s WHERE thread_id=%s AND checkpoint_ns=%s AND checkpoint_id=%s",
               (Jsonb(ck), tid, ns, cid))

    def blob_refs(self, tid: str, ch: str, ver: str, ns: str = "") -> list[str]:
        return [r[0] for r in self.q(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id=%s AND checkpoint_ns=%s"
            ' AND checkpoint->\'channel_versions\'->>%s = %s ORDER BY checkpoint_id COLLATE "C"',
            (tid, ns, ch, ver))]

    def get_blob(self, tid: str, ch: str, ver: str, ns: str = "") -> tuple[str, bytes]:
        (typ, b), = self.q("SELECT type, blob FROM checkpoint_blobs WHERE thread_id=%s AND checkpoint_ns=%s"
                           " AND channel=%s AND version=%s", (tid, ns, ch, ver))
        return typ, bytes(b)

    def set_blob(self, tid: str, ch: str, ver: str, data: bytes, ns: str = "") -> None:
        need(self.n("UPDATE checkpoint_blobs SET blob=%s WHERE thread_id=%s AND checkpoint_ns=%s AND channel=%s"
                    " AND version=%s", (data, tid, ns, ch, ver)) == 1, "set_blob: no row")

    def delete_blob(self, tid: str, ch: str, ver: str, ns: str = "") -> None:
        need(self.n("DELETE FROM checkpoint_blobs WHERE thread_id=%s AND checkpoint_ns=%s AND channel=%s"
                    " AND version=%s", (tid, ns, ch, ver)) == 1, "delete_blob: no row")

    def set_write_value(self, tid: str, cid: str, w: Wr, value: bytes, ns: str = "") -> None:
        need(self.n("UPDATE checkpoint_writes SET blob=%s WHERE thread_id=%s AND checkpoint_ns=%s AND checkpoint_id=%s"
                    " AND task_id=%s AND idx=%s", (value, tid, ns, cid, w.task_id, w.idx)) == 1,
             "set_write_value: no row")

    def delete_checkpoints(self, tid: str, ids: list[str], ns: str = "") -> None:
        for cid in ids:
            self.q("DELETE FROM checkpoints WHERE thread_id=%s AND checkpoint_ns=%s AND checkpoint_id=%s",
                   (tid, ns, cid))
            self.q("DELETE FROM checkpoint_writes WHERE thread_id=%s AND checkpoint_ns=%s AND checkpoint_id=%s",
                   (tid, ns, cid))
        # blobs only the deleted checkpoints referenced (put() writes them with the checkpoint)
        self.q(
            "DELETE FROM checkpoint_blobs b WHERE b.thread_id=%s AND b.checkpoint_ns=%s AND NOT EXISTS ("
            " SELECT 1 FROM checkpoints c WHERE c.thread_id=b.thread_id AND c.checkpoint_ns=b.checkpoint_ns"
            " AND c.checkpoint->'channel_versions'->>b.channel = b.version)",
            (tid, ns),
        )

    def delete_writes(self, tid: str, cid: str, keys: list[tuple[str, int]], ns: str = "") -> None:
        for task_id, idx in keys:
            need(self.n("DELETE FROM checkpoint_writes WHERE thread_id=%s AND checkpoint_ns=%s AND checkpoint_id=%s"
                        " AND task_id=%s AND idx=%s", (tid, ns, cid, task_id, idx)) == 1, "delete_writes: no row")

    def insert_copy(self, tid: str, src_id: str, new_id: str, parent: str, ts: str, md_fn: Callable[[dict], None],
                    ns: str = "") -> None:
        from psycopg.types.json import Jsonb

        (ck, md), = self.q("SELECT checkpoint, metadata FROM checkpoints WHERE thread_id=%s AND checkpoint_ns=%s"
                           " AND checkpoint_id=%s", (tid, ns, src_id))
        ck["id"] = new_id
        ck["ts"] = ts
        md_fn(md)
        self.q("INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint,"
               " metadata) VALUES (%s, %s, %s, %s, %s, %s)", (tid, ns, new_id, parent, Jsonb(ck), Jsonb(md)))

    def finish(self, dest: Path) -> None:
        import gen_pg_fixtures as gpf

        self.q("VACUUM FULL")  # physical row order = dump order; keep it compact and stable
        self.conn.close()
        dest.parent.mkdir(parents=True, exist_ok=True)
        gpf.dump_db(self.conninfo, dest)
        gpf.drop_db(self.url, self.dbname)


# ---------------------------------------------------------------------------------------
# The defects
# ---------------------------------------------------------------------------------------


def finding(code: str, tid: str, cid: str, ns: str = "", secondary: bool = False, **extra: Any) -> dict:
    f = {"code": code, "severity": SEVERITY[code], "thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}
    f.update(extra)
    if secondary:
        f["secondary"] = True
    return f


def first(cps: list[Cp], pred: Callable[[Cp], bool], what: str) -> Cp:
    for c in cps:
        if pred(c):
            return c
    raise DefectError(f"no checkpoint matches: {what}")


def mid_input(cps: list[Cp]) -> Cp:
    return first(cps, lambda c: c.source == "input" and isinstance(c.step, int) and c.step > 0,
                 "first `input` checkpoint with step > 0")


def d_dangling_parent(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    ids = by_id(cps)
    t = mid_input(cps)
    need(t.parent is not None, "target has no parent")
    fake = t.parent[:-12] + "deaddeaddead"
    need(fake not in ids, "fake parent id exists")
    b.set_parent(tid, t.id, fake)
    return {
        "rule": "the first `input` checkpoint with step > 0 (start of turn 2): parent_checkpoint_id := its old "
                "parent id with the last 12 hex digits replaced by `deaddeaddead` (an id that does not exist)",
        "description": f"parent_checkpoint_id of {t.id} (input, step {t.step}) changed from {t.parent} to {fake}",
        "target": t.id,
        "details": {"old_parent": t.parent, "new_parent": fake},
        "expect": [finding("lineage.dangling_parent", tid, t.id, parent_checkpoint_id=fake)],
        "not_expected": ["lineage.multiple_roots"],
    }


def d_cycle(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    roots = [c for c in cps if c.parent is None]
    need(len(roots) == 1, "expected one root")
    root = roots[0]
    kids = children_of(cps)
    # BFS for the first descendant (in walk order) that stores a _DeltaSnapshot
    members = [root.id]
    cur = root
    while True:
        ch = kids.get(cur.id, [])
        need(len(ch) == 1, "expected a linear chain")
        cur = ch[0]
        members.append(cur.id)
        if cur.writes_snapshot_here:
            break
    b.set_parent(tid, root.id, cur.id)
    return {
        "rule": "the root's parent_checkpoint_id := its first descendant that stores a _DeltaSnapshot "
                "(closes a loop root -> ... -> snapshot -> root)",
        "description": f"parent_checkpoint_id of the root {root.id} (was NULL) set to its descendant {cur.id} "
                       f"(step {cur.step}); loop of {len(members)} checkpoints; the namespace has no root any more",
        "target": root.id,
        "details": {"cycle_members": members, "closing_parent": cur.id},
        "expect": [
            finding("lineage.cycle", tid, root.id, cycle=members),
            # a verifier may also (or instead) name the other loop members; allowed, not required
            *[finding("lineage.cycle", tid, m, secondary=True, cycle=members) for m in members[1:]],
            # the edge that closes a loop necessarily goes from a newer id to an older one
            finding("lineage.order_anomaly", tid, root.id, secondary=True, parent_checkpoint_id=cur.id,
                    reason="child id sorts below its parent id"),
        ],
    }


def d_two_roots(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    roots = [c for c in cps if c.parent is None]
    need(len(roots) == 1, "expected one root")
    t = mid_input(cps)
    b.set_parent(tid, t.id, None)
    return {
        "rule": "the first `input` checkpoint with step > 0: parent_checkpoint_id := NULL",
        "description": f"parent_checkpoint_id of {t.id} (input, step {t.step}) set to NULL (was {t.parent}); "
                       f"roots are now {roots[0].id} and {t.id}",
        "target": t.id,
        "details": {"old_parent": t.parent, "roots": [roots[0].id, t.id]},
        "expect": [finding("lineage.multiple_roots", tid, t.id, roots=[roots[0].id, t.id]),
                   # the original root may be named too; allowed, not required
                   finding("lineage.multiple_roots", tid, roots[0].id, secondary=True, roots=[roots[0].id, t.id])],
    }


def fork_update_child(cps: list[Cp]) -> tuple[Cp, Cp]:
    """(P, U): U has source 'update' and stores a _DeltaSnapshot; its parent P has pending
    `messages` writes and a `loop` child (the consumer of those writes)."""
    ids = by_id(cps)
    kids = children_of(cps)
    for u in cps:
        if u.source != "update" or u.parent not in ids:
            continue
        p = ids[u.parent]
        if not any(w.channel == "messages" for w in p.writes):
            continue
        if not any(k.source == "loop" for k in kids.get(p.id, [])):
            continue
        return p, u
    raise DefectError("no update-fork child of a checkpoint with loop-owned messages writes")


def contaminated_set(cps: list[Cp], u: Cp) -> list[str]:
    """U plus every descendant whose replay walk reaches P (= U's parent) before a stored
    value: descendants reached from U through checkpoints that store no messages value."""
    kids = children_of(cps)
    out = [u.id]
    stack = [u]
    while stack:
        cur = stack.pop()
        for k in kids.get(cur.id, []):
            if k.encoding in ("snapshot", "plain"):
                continue  # replay starts at a stored value: clean (and so is everything below it)
            out.append(k.id)
            stack.append(k)
    return sorted(out)


def d_contaminated_fork(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    p, u = fork_update_child(cps)
    need(u.writes_snapshot_here, "the update child does not store a snapshot")
    ctr = {"messages": [1, 1]}
    details: dict[str, Any] = {"fork_point": p.id, "fork_point_children": [
        {"checkpoint_id": k.id, "source": k.source, "step": k.step} for k in children_of(cps)[p.id]]}
    if b.kind == "sqlite":
        def strip(ck: dict) -> None:
            need(isinstance(ck["channel_values"].get("messages"), _DeltaSnapshot), "no snapshot")
            del ck["channel_values"]["messages"]
        b.edit_checkpoint(tid, u.id, strip)
    else:
        ver = u.version("messages")
        refs = b.blob_refs(tid, "messages", ver)
        need(refs == [u.id], f"messages blob {ver} is shared by {refs}")

        def strip_inline(ck: dict) -> None:
            need(ck["channel_values"].get("messages") is True, "no inline marker")
            del ck["channel_values"]["messages"]
        b.edit_checkpoint_json(tid, u.id, strip_inline)
        b.delete_blob(tid, "messages", ver)
        details["deleted_blob"] = {"channel": "messages", "version": ver}

    def add_ctr(md: dict) -> None:
        need(COUNTERS_KEY not in md, "already has counters")
        md[COUNTERS_KEY] = ctr
    b.edit_metadata(tid, u.id, add_ctr)
    after = b.checkpoints(tid)
    bad = contaminated_set(after, by_id(after)[u.id])
    details["contaminated"] = bad
    how = ("removed `messages` (the _DeltaSnapshot) from its channel_values" if b.kind == "sqlite" else
           "removed the inline `\"messages\": true` marker and deleted its (unshared) messages blob row, so its "
           "messages version now has no blob")
    return {
        "rule": "the `update` child U that stores a _DeltaSnapshot and whose parent P has pending `messages` "
                "writes owned by a `loop` child (update_state on an old checkpoint; LangGraph forced the snapshot)",
        "description": f"update-fork child {u.id} of fork point {p.id}: {how}; added "
                       f"metadata {COUNTERS_KEY}={json.dumps(ctr)}. Its replay now walks into P and picks up the "
                       f"loop sibling's writes (DeerFlow #4458, docs/replay-and-forks.md#fork-ownership)",
        "target": u.id,
        "details": details,
        "expect": [finding("delta.fork_contaminated", tid, cid, fork_point=p.id) for cid in bad],
        "notes": "P's `messages` writes all come from the `tools` task (none has task_id uuid5(P, '__interrupt__')), "
                 "so by docs/replay-and-forks.md#fork-ownership they belong to the `loop` child; the `fork` child (replay) stores a "
                 "snapshot and is safe. docs/replay-and-forks.md#fork-ownership also calls 'a loop child and an update child both present with "
                 "non-update writes' ambiguous; this fixture expects fork_contaminated, not delta.fork_ambiguous.",
    }


def d_unmarked_delta(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    t = first(cps, lambda c: c.encoding == "absent" and COUNTERS_KEY in c.metadata,
              "first checkpoint whose messages are versioned but not stored")
    need(MARKER_KEY not in t.metadata, "target has a marker")
    old = t.metadata[COUNTERS_KEY]
    b.edit_metadata(tid, t.id, lambda md: md.pop(COUNTERS_KEY))
    return {
        "rule": "the first checkpoint (id order) whose messages are versioned but not stored: drop "
                f"metadata `{COUNTERS_KEY}`",
        "description": f"removed {COUNTERS_KEY}={json.dumps(old)} from the metadata of {t.id} ({t.source}, step "
                       f"{t.step}); it keeps a messages version without a stored value and has no marker",
        "target": t.id,
        "expect": [finding("mode.unmarked_delta", tid, t.id)],
    }


def d_unmarked_snapshot(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    need(all(c.metadata.get(MARKER_KEY) == "delta" for c in cps), "not every checkpoint is marked")
    t = first(cps, lambda c: c.writes_snapshot_here, "first checkpoint that stores a _DeltaSnapshot")
    need(COUNTERS_KEY not in t.metadata, "snapshot checkpoint with counters")
    b.edit_metadata(tid, t.id, lambda md: md.pop(MARKER_KEY))
    return {
        "rule": "the first checkpoint (id order) that stores a _DeltaSnapshot (Postgres: has the inline "
                f"`messages: true` marker): drop metadata `{MARKER_KEY}`",
        "description": f"removed {MARKER_KEY}=\"delta\" from the metadata of snapshot checkpoint {t.id} "
                       f"({t.source}, step {t.step}); every other checkpoint of the thread keeps the marker",
        "target": t.id,
        "expect": [finding("mode.unmarked_snapshot", tid, t.id)],
    }


def d_marker_without_delta(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    need(not any(MARKER_KEY in c.metadata or COUNTERS_KEY in c.metadata for c in cps), "thread not full")
    t = first(cps, lambda c: c.encoding == "plain", "first checkpoint that stores messages as a plain list")

    def add(md: dict) -> None:
        md[MARKER_KEY] = "delta"
    b.edit_metadata(tid, t.id, add)
    return {
        "rule": f"the first checkpoint (id order) storing messages as a plain list: add `{MARKER_KEY}: \"delta\"`",
        "description": f"added {MARKER_KEY}=\"delta\" to the metadata of {t.id} ({t.source}, step {t.step}), which "
                       "stores a plain messages list (the only checkpoint of the thread with a marker; the older "
                       "root has messages unversioned, so this is not a full->delta migration)",
        "target": t.id,
        "expect": [finding("mode.marker_without_delta", tid, t.id)],
    }


def d_unknown_marker(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    t = first(cps, lambda c: c.encoding == "absent" and isinstance(c.metadata.get(COUNTERS_KEY), dict)
              and "messages" in c.metadata[COUNTERS_KEY] and c.metadata.get(MARKER_KEY) == "delta",
              "first marked non-snapshot checkpoint with messages counters")

    def setm(md: dict) -> None:
        md[MARKER_KEY] = "Delta"
    b.edit_metadata(tid, t.id, setm)
    return {
        "rule": "the first checkpoint (id order) with messages versioned but not stored (it carries messages "
                f"counters, so it stays delta by rule 2): `{MARKER_KEY}` := \"Delta\"",
        "description": f"{MARKER_KEY} of {t.id} ({t.source}, step {t.step}) changed from \"delta\" to \"Delta\" "
                       f"(it still has {COUNTERS_KEY}.messages, so it is not unmarked)",
        "target": t.id,
        "expect": [finding("mode.unknown_marker", tid, t.id, marker="Delta")],
    }


def d_literal_overwrite(b, tid: str) -> dict:
    ch = "artifacts"
    cps = b.checkpoints(tid)
    t = first(cps, lambda c: ch in c.checkpoint.get("channel_values", {}), f"first checkpoint storing `{ch}`")
    value = t.checkpoint["channel_values"][ch]
    extra: dict[str, Any] = {}
    if b.kind == "sqlite":
        def wrap(ck: dict) -> None:
            ck["channel_values"][ch] = Overwrite(ck["channel_values"][ch])
        b.edit_checkpoint(tid, t.id, wrap)
    else:
        ver = t.version(ch)
        refs = b.blob_refs(tid, ch, ver)
        need(refs == [t.id], f"{ch} blob {ver} is shared by {refs}")
        typ, data = b.get_blob(tid, ch, ver)
        v = decode_exact(typ, data)
        b.set_blob(tid, ch, ver, encode(Overwrite(v), typ))
        extra = {"channel": ch, "version": ver}
    where = "in its checkpoint blob" if b.kind == "sqlite" else f"in its checkpoint_blobs row ({ch}, {extra['version']}), referenced by this checkpoint only"
    return {
        "rule": f"the first checkpoint (id order) that stores `{ch}` (a merge-reducer list; in Postgres its blob "
                "version is referenced by this one checkpoint only, so exactly one checkpoint is affected)",
        "description": f"channel_values[{ch!r}] of {t.id} ({t.source}, step {t.step}) replaced {where} by "
                       f"Overwrite({value!r}) encoded by JsonPlusSerializer (ext 2, langgraph.types.Overwrite, "
                       "{value, type: __overwrite__}); DeerFlow #4380",
        "target": t.id,
        "expect": [finding("value.literal_overwrite", tid, t.id, channel=ch, **({"version": extra["version"]} if extra else {}))],
    }


def loop_after_mid_input(cps: list[Cp]) -> Cp:
    mi = mid_input(cps)
    return first(cps, lambda c: c.parent == mi.id and c.source == "loop", "loop child of the first mid input")


def d_truncated_blob(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    t = loop_after_mid_input(cps)
    if b.kind == "sqlite":
        info = b.truncate_checkpoint_blob(tid, t.id)
        exp = finding("value.undecodable", tid, t.id, column="checkpoint")
        where = "its `checkpoint` column"
    else:
        need(t.encoding == "plain", "target does not hold a messages list")
        ver = t.version("messages")
        refs = b.blob_refs(tid, "messages", ver)
        need(refs == [t.id], f"messages blob {ver} is shared by {refs}")
        typ, data = b.get_blob(tid, "messages", ver)
        b.set_blob(tid, "messages", ver, data[: len(data) // 2])
        info = {"column": "checkpoint_blobs.blob", "channel": "messages", "version": ver,
                "bytes_before": len(data), "bytes_after": len(data) // 2}
        exp = finding("value.undecodable", tid, t.id, channel="messages", version=ver)
        where = f"its messages blob ({ver}, referenced by this checkpoint only)"
    return {
        "rule": "the `loop` child of the first `input` checkpoint with step > 0: truncate "
                + ("its checkpoint blob" if b.kind == "sqlite" else "its messages blob (a list channel)")
                + " to half its length",
        "description": f"{where} of {t.id} ({t.source}, step {t.step}) truncated from {info['bytes_before']} to "
                       f"{info['bytes_after']} bytes; the other checkpoints and threads are untouched",
        "target": t.id,
        "details": info,
        "expect": [exp],
    }


def d_truncated_write(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    t, w = None, None
    for c in cps:
        for x in c.writes:
            if x.channel == "messages" and x.task_path.endswith(", tools"):
                t, w = c, x
                break
        if w:
            break
    need(w is not None, "no tools messages write")
    decode_exact(w.type, w.value)
    cut = w.value[: len(w.value) // 2]
    b.set_write_value(tid, t.id, w, cut)
    return {
        "rule": "the first `messages` write (checkpoint id order, then writes_sort_key) of a `tools` task: "
                "truncate its value to half its length",
        "description": f"write ({w.task_id}, idx {w.idx}, channel messages, path {w.task_path!r}) on {t.id} "
                       f"({t.source}, step {t.step}) truncated from {len(w.value)} to {len(cut)} bytes",
        "target": t.id,
        "expect": [finding("value.undecodable", tid, t.id, task_id=w.task_id, idx=w.idx, channel="messages")],
    }


def d_missing_message_id(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    kids = children_of(cps)
    t, w, consumer = None, None, None
    for c in cps:
        loop_kids = [k for k in kids.get(c.id, []) if k.source == "loop" and k.encoding == "absent"]
        for x in c.writes:
            if x.channel == "messages" and x.task_path.endswith(", agent") and loop_kids:
                t, w, consumer = c, x, loop_kids[0]
                break
        if w:
            break
    need(w is not None, "no replayed agent messages write")
    val = decode_exact(w.type, w.value)
    msgs = val if isinstance(val, list) else [val]
    old_id = msgs[0].id
    msgs[0].id = None
    b.set_write_value(tid, t.id, w, encode(val, w.type))
    return {
        "rule": "the first `messages` write (checkpoint id order, then writes_sort_key) of an `agent` task whose "
                "`loop` child stores no messages value (so delta replay reads the write): its first message's "
                "id := None (re-encoded with JsonPlusSerializer: `id: nil`)",
        "description": f"in write ({w.task_id}, idx {w.idx}) on {t.id} ({t.source}, step {t.step}) the "
                       f"{type(msgs[0]).__name__} {old_id!r} now has id null",
        "target": t.id,
        "details": {"old_message_id": old_id, "message_type": type(msgs[0]).__name__, "replayed_by": consumer.id},
        "expect": [finding("message.missing_id", tid, t.id, task_id=w.task_id, idx=w.idx, channel="messages",
                           message_index=0)],
    }


def d_order_anomaly(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    head = cps[-1]
    kids = children_of(cps)
    need(head.id not in kids, "head already has a child")
    new_id = shift_uuid6(head.id, -10_000)  # 1 ms earlier than the head: sorts below it
    need(new_id < head.id and new_id not in by_id(cps), "bad new id")
    ts = (datetime.fromisoformat(head.checkpoint["ts"]) - timedelta(milliseconds=1)).isoformat()
    step = head.step + 1

    def md_fn(md: dict) -> None:
        md["source"] = "update"
        md["step"] = step
    b.insert_copy(tid, head.id, new_id, head.id, ts, md_fn)
    return {
        "rule": "the head H (greatest id): insert a copy of H (same values and versions, source `update`, step "
                "H.step+1) whose id is H's UUIDv6 with the timestamp 1 ms earlier, parent = H (a child written "
                "by a process with a skewed clock)",
        "description": f"inserted checkpoint {new_id} (copy of head {head.id}, source update, step {step}, ts "
                       f"{ts}) with parent {head.id}; its id sorts below its parent's, and the head is no longer "
                       "a leaf",
        "target": new_id,
        "details": {"head": head.id, "inserted": new_id},
        "expect": [
            finding("lineage.order_anomaly", tid, new_id, parent_checkpoint_id=head.id,
                    reason="child id sorts below its parent id"),
            finding("lineage.order_anomaly", tid, head.id, secondary=True, reason="the head is not a leaf"),
        ],
    }


def d_unsettled_head(b, tid: str) -> dict:
    cps = b.checkpoints(tid)
    t = None
    for c in reversed(cps):
        if "branch:to:tools" in c.checkpoint.get("channel_values", {}) and "tools" in pending_tasks(c.checkpoint):
            t = c
            break
    need(t is not None, "no checkpoint with a pending tools task")
    later = [c.id for c in cps if c.id > t.id]
    need(later, "target is already the head")
    b.delete_checkpoints(tid, later)
    # ... and the pending task's own writes: the run was killed while `tools` ran (with them
    # present, LangGraph's live get_state (no checkpoint_id) applies them and reports next=())
    dropped = [w for w in t.writes if w.task_path.endswith(", tools")]
    need(bool(dropped), "no tools writes")
    b.delete_writes(tid, t.id, [(w.task_id, w.idx) for w in dropped])
    return {
        "rule": "the newest checkpoint whose channel_values hold `branch:to:tools` with channel_versions[T] > "
                "versions_seen['tools'][T] (docs/storage-format.md#versions-seen): delete every checkpoint of the thread with a "
                "greater id (and their writes"
                + ("" if b.kind == "sqlite" else ", and blobs no remaining checkpoint references")
                + "), and the target's own pending writes of the `tools` task",
        "description": f"deleted the {len(later)} checkpoints after {t.id} ({t.source}, step {t.step}); it is now "
                       f"the head, with the `tools` task pending; also deleted the tools task's {len(dropped)} "
                       "pending write(s) on it (the run was killed while `tools` ran)",
        "target": t.id,
        "details": {"deleted": later, "deleted_writes": [
            {"task_id": w.task_id, "idx": w.idx, "channel": w.channel} for w in dropped]},
        "expect": [finding("lineage.unsettled_head", tid, t.id, pending=["tools"])],
    }


def d_unsupported(b, tid: Optional[str]) -> dict:
    """pickle.db / encrypted.db copies: nothing changed; the rows carry serializer types a
    reader without Python (or without the key) cannot decode."""
    exp = []
    for tid_, ns, cid, typ in b.q(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, type FROM checkpoints"
        " WHERE type NOT IN ('msgpack', 'null', 'bytes', 'bytearray') OR type IS NULL"
        " ORDER BY thread_id, checkpoint_ns, checkpoint_id"
    ):
        exp.append(finding("value.unsupported_serializer", tid_, cid, ns, row="checkpoint", type=typ))
    wrows = b.q(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type FROM writes"
        " WHERE type NOT IN ('msgpack', 'null', 'bytes', 'bytearray') OR type IS NULL"
        " ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_path, task_id, idx"
    )
    return {"exp": exp, "wrows": wrows}


def d_pickle_row(b, tid: str) -> dict:
    r = d_unsupported(b, tid)
    exp = list(r["exp"])
    for tid_, ns, cid, task_id, idx, ch, typ in r["wrows"]:
        exp.append(finding("value.unsupported_serializer", tid_, cid, ns, row="write", type=typ, task_id=task_id,
                           idx=idx, channel=ch))
    need(len(exp) >= 2, "no pickle rows")
    return {
        "rule": "fixtures/sqlite/pickle.db copied unchanged (JsonPlusSerializer(pickle_fallback=True) wrote a >64-bit "
                "int channel as `pickle`)",
        "description": f"unchanged copy; {len(r['exp'])} checkpoint rows and {len(r['wrows'])} write row(s) have type "
                       "`pickle`",
        "target": None,
        "expect": exp,
    }


def d_encrypted_row(b, tid: str) -> dict:
    r = d_unsupported(b, tid)
    per_cp: dict[tuple, list] = {}
    for tid_, ns, cid, task_id, idx, ch, typ in r["wrows"]:
        per_cp.setdefault((tid_, ns, cid), []).append(typ)
    exp = []
    for f in r["exp"]:
        wt = per_cp.get((f["thread_id"], f["checkpoint_ns"], f["checkpoint_id"]), [])
        f["write_rows"] = len(wt)
        exp.append(f)
    return {
        "rule": "fixtures/sqlite/encrypted.db copied unchanged (EncryptedSerializer, toy cipher `xor`)",
        "description": f"unchanged copy; all {len(r['exp'])} checkpoint rows are `msgpack+xor` and all "
                       f"{len(r['wrows'])} write rows are `msgpack+xor` / `null+xor`. One finding per checkpoint "
                       "row is expected; a verifier may fold the checkpoint's write rows (`write_rows`) into it or "
                       "report them separately",
        "target": None,
        "expect": exp,
    }


@dataclass
class Defect:
    name: str
    source: str  # store stem
    thread: Optional[str]  # the thread the defect is in (None: whole store)
    keep: Optional[list[str]]  # threads kept in the copy (None: all)
    fn: Callable[[Any, str], dict]
    graph: str  # "delta3" | "full" | "df-delta3" | "df-full" | "-"
    pg: bool = True


DEFECTS = [
    Defect("dangling_parent", "delta_k3", "t-linear", ["t-linear"], d_dangling_parent, "delta3"),
    Defect("cycle", "delta_k3", "t-linear", ["t-linear"], d_cycle, "delta3"),
    Defect("two_roots", "full", "t-linear", ["t-linear"], d_two_roots, "full"),
    Defect("contaminated_fork", "delta_k3", "t-fork", ["t-fork"], d_contaminated_fork, "delta3"),
    Defect("unmarked_delta", "delta_k3", "t-linear", ["t-linear"], d_unmarked_delta, "delta3"),
    Defect("unmarked_snapshot", "deerflow", "t-deerflow", ["t-deerflow"], d_unmarked_snapshot, "df-delta3"),
    Defect("marker_without_delta", "full", "t-linear", ["t-linear"], d_marker_without_delta, "full"),
    Defect("unknown_marker", "deerflow", "t-deerflow", ["t-deerflow"], d_unknown_marker, "df-delta3"),
    Defect("literal_overwrite", "deerflow", "t-deerflow-full", ["t-deerflow-full"], d_literal_overwrite, "df-full"),
    Defect("truncated_blob", "full", "t-linear", ["t-linear", "t-error"], d_truncated_blob, "full"),
    Defect("truncated_write", "delta_k3", "t-linear", ["t-linear", "t-error"], d_truncated_write, "delta3"),
    Defect("pickle_row", "pickle", None, None, d_pickle_row, "-", pg=False),
    Defect("encrypted_row", "encrypted", None, None, d_encrypted_row, "-", pg=False),
    Defect("missing_message_id", "delta_k3", "t-update", ["t-update"], d_missing_message_id, "delta3"),
    Defect("order_anomaly", "full", "t-linear", ["t-linear"], d_order_anomaly, "full"),
    Defect("unsettled_head", "full", "t-linear", ["t-linear"], d_unsettled_head, "full"),
]


# ---------------------------------------------------------------------------------------
# Evidence: LangGraph's own view of the finished copy
# ---------------------------------------------------------------------------------------


def build_graph(kind: str, saver: Any) -> Any:
    import gen_fixtures as gf

    if kind == "delta3":
        return build_conv_graph(messages_annotation("delta", 3), saver)
    if kind == "full":
        return build_conv_graph(messages_annotation("full"), saver)
    if kind == "df-delta3":
        return gf.build_deerflow_graph(messages_annotation("delta", 3, reducer="deerflow"), saver)
    if kind == "df-full":
        return gf.build_deerflow_graph(messages_annotation("full"), saver)
    raise ValueError(kind)


def cfg(tid: str, cid: Optional[str] = None) -> dict:
    c: dict[str, Any] = {"thread_id": tid, "checkpoint_ns": ""}
    if cid:
        c["checkpoint_id"] = cid
    return {"configurable": c}


def msg_ids(values: dict) -> Any:
    m = values.get("messages")
    if isinstance(m, list):
        return [getattr(x, "id", None) for x in m]
    return f"<{type(m).__name__}>"


def err(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) <= 200 else s[:200] + "…"


def try_state(g: Any, tid: str, cid: Optional[str]) -> dict:
    try:
        snap = g.get_state(cfg(tid, cid))
        return {"messages": msg_ids(snap.values), "next": list(snap.next)}
    except Exception as e:  # noqa: BLE001
        return {"error": err(e)}


class SaverCtx:
    """Open a finished fixture with the real saver (SQLite: on a temp copy; Postgres: a
    fresh restore of the dump)."""

    def __init__(self, kind: str, path: Path, url: Optional[str] = None, name: str = "") -> None:
        self.kind, self.path, self.url, self.name = kind, path, url, name

    def __enter__(self):
        if self.kind == "sqlite":
            self.tmp = tempfile.TemporaryDirectory()
            p = Path(self.tmp.name) / self.path.name
            shutil.copyfile(self.path, p)
            self.conn = sqlite3.connect(str(p), check_same_thread=False)
            self.saver = SqliteSaver(self.conn)
            self.saver.setup()
        else:
            import psycopg
            from psycopg.rows import dict_row
            from langgraph.checkpoint.postgres import PostgresSaver

            import check_pg_fixtures as cpf

            self.dbname = "dfckdefectchk_" + self.name
            conninfo = cpf.restore(self.url, self.dbname, self.path)
            self.conn = psycopg.Connection.connect(conninfo, autocommit=True, prepare_threshold=0,
                                                   row_factory=dict_row)
            self.saver = PostgresSaver(self.conn)
        return self.saver

    def __exit__(self, *a) -> None:
        self.conn.close()
        if self.kind == "sqlite":
            self.tmp.cleanup()
        else:
            import check_pg_fixtures as cpf

            cpf.drop(self.url, self.dbname)


def source_saver(kind: str, stem: str, url: Optional[str], fixtures: Path) -> SaverCtx:
    if kind == "sqlite":
        return SaverCtx("sqlite", fixtures / "sqlite" / f"{stem}.db")
    return SaverCtx("postgres", fixtures / "postgres" / f"{stem}.sql", url, "src_" + stem)


def evidence(d: Defect, entry: dict, kind: str, out_file: Path, url: Optional[str], fixtures: Path) -> dict:
    tid = d.thread
    tgt = entry.get("target")
    ev: dict[str, Any] = {}
    with SaverCtx(kind, out_file, url, d.name) as saver:
        if d.graph == "-":
            # opens; and LangGraph's default serializer cannot read these rows either
            try:
                rows = list(saver.list(None))
                ev["langgraph_default_serde_list"] = f"{len(rows)} rows decoded"
            except Exception as e:  # noqa: BLE001
                ev["langgraph_default_serde_list"] = err(e)
            ev["opens_with_saver"] = True
            return ev
        g = build_graph(d.graph, saver)
        heads = {}
        for t in entry["threads"]:
            heads[t["thread_id"]] = try_state(g, t["thread_id"], None)
        ev["opens_with_saver"] = True
        n = d.name
        if n == "dangling_parent":
            tup = saver.get_tuple(cfg(tid, tgt))
            parent = tup.parent_config["configurable"]["checkpoint_id"]
            need(saver.get_tuple(cfg(tid, parent)) is None, "dangling parent resolves")
            ev["parent_lookup"] = f"get_tuple({parent}) -> None"
            ev["get_state_target"] = try_state(g, tid, tgt)
            with source_saver(kind, d.source, url, fixtures) as os_:
                ev["get_state_target_before"] = try_state(build_graph(d.graph, os_), tid, tgt)
            need(ev["get_state_target"] != ev["get_state_target_before"], "state unchanged")
        elif n == "cycle":
            tup = saver.get_tuple(cfg(tid, tgt))
            ev["root_parent"] = tup.parent_config["configurable"]["checkpoint_id"]
            members = entry["details"]["cycle_members"]
            # get_state on the members whose replay walk enters the loop (guarded in a child process)
            ev["get_state_loop_members"] = {m: guarded_state(kind, out_file, url, d, m) for m in members[1:-1]}
            with source_saver(kind, d.source, url, fixtures) as os_:
                og = build_graph(d.graph, os_)
                ev["get_state_loop_members_before"] = {m: try_state(og, tid, m) for m in members[1:-1]}
        elif n == "two_roots":
            tup = saver.get_tuple(cfg(tid, tgt))
            need(tup.parent_config is None, "target still has a parent")
            hist = list(g.get_state_history(cfg(tid)))
            ev["history_from_head"] = len(hist)
            ev["roots_via_saver"] = sorted(c.config["configurable"]["checkpoint_id"]
                                           for c in saver.list(cfg(tid)) if c.parent_config is None)
        elif n == "contaminated_fork":
            bad = entry["details"]["contaminated"]
            st = {c: try_state(g, tid, c) for c in bad}
            ev["get_state_defect_delta"] = st
            # the full-mode twin (same rule on the full store) and the untouched delta store
            with source_saver(kind, "full", url, fixtures) as fs:
                fg = build_graph("full", fs)
                fcps = [c for c in SaverModel(fs).checkpoints(tid)]
                fp, fu = fork_update_child(fcps)
                fbad = twin_positions(fcps, fu)
                ev["get_state_full_twin"] = {c: try_state(fg, tid, c) for c in fbad}
            with source_saver(kind, d.source, url, fixtures) as os_:
                og = build_graph("delta3", os_)
                ev["get_state_original_delta"] = {c: try_state(og, tid, c) for c in bad}
            for c, fc in zip(bad, fbad):
                need(st[c] != ev["get_state_full_twin"][fc], f"{c}: defect equals full twin")
                need(ev["get_state_original_delta"][c] == ev["get_state_full_twin"][fc],
                     f"{c}: original delta differs from full twin")
            ev["note"] = ("defect delta get_state vs the full twin (paired in walk order: "
                          f"{dict(zip(bad, fbad))}) and vs the untouched delta store")
        elif n in ("unmarked_delta", "unmarked_snapshot", "marker_without_delta", "unknown_marker"):
            tup = saver.get_tuple(cfg(tid, tgt))
            md = tup.metadata
            ev["metadata_marker"] = md.get(MARKER_KEY, None)
            ev["metadata_counters"] = md.get(COUNTERS_KEY, None)
            ev["get_state_target"] = try_state(g, tid, tgt)
            ev["deerflow_rule_says_delta"] = metadata_is_delta(md)
            # the same graph with `messages` declared add_messages (a full-mode process with DeerFlow's gate
            # bypassed). LangGraph 1.2.22 replays a BinaryOperatorAggregate that has a version but no stored
            # value through the delta history and unwraps _DeltaSnapshot, so it sees the same messages.
            fk = "full" if d.graph in ("delta3", "full") else "df-full"
            ev["get_state_target_add_messages_graph"] = try_state(build_graph(fk, saver), tid, tgt)
            if n == "unmarked_delta":
                need(COUNTERS_KEY not in md and MARKER_KEY not in md, "still marked")
            if n == "unmarked_snapshot":
                need(MARKER_KEY not in md, "still marked")
            if n == "marker_without_delta":
                need(md.get(MARKER_KEY) == "delta", "no marker")
            if n == "unknown_marker":
                need(md.get(MARKER_KEY) == "Delta", "marker not changed")
        elif n == "literal_overwrite":
            snap = g.get_state(cfg(tid, tgt))
            v = snap.values.get("artifacts")
            need(isinstance(v, Overwrite), "artifacts is not an Overwrite")
            ev["get_state_target_artifacts"] = f"{type(v).__module__}.{type(v).__name__}(value={v.value!r})"
        elif n in ("truncated_blob", "truncated_write"):
            ev["get_state_target"] = try_state(g, tid, tgt)
            need("error" in ev["get_state_target"], "target still decodes")
            others = [c for c in entry["all_ids"] if c != tgt]
            ok = sum(1 for c in others if "error" not in try_state(g, tid, c))
            ev["other_checkpoints_get_state_ok"] = f"{ok}/{len(others)}"
        elif n == "missing_message_id":
            tup = saver.get_tuple(cfg(tid, tgt))
            ids = [(w[0], w[1], [getattr(m, 'id', None) for m in (w[2] if isinstance(w[2], list) else [w[2]])])
                   for w in tup.pending_writes if w[1] == "messages"]
            ev["target_pending_messages_write_ids"] = ids
            need(any(None in x[2] for x in ids), "no null id")
            c = entry["details"]["replayed_by"]
            a = try_state(g, tid, c)
            need(entry["details"]["old_message_id"] not in a["messages"], "old id still visible")
            ev["get_state_replaying_child"] = {"checkpoint_id": c, **a}
        elif n == "order_anomaly":
            tup = saver.get_tuple(cfg(tid))
            ev["saver_head"] = tup.config["configurable"]["checkpoint_id"]
            ins = saver.get_tuple(cfg(tid, tgt))
            ev["inserted_parent"] = ins.parent_config["configurable"]["checkpoint_id"]
            need(ev["saver_head"] == entry["details"]["head"] and ev["inserted_parent"] == ev["saver_head"],
                 "head/parent mismatch")
            ev["get_state_inserted"] = try_state(g, tid, tgt)
        elif n == "unsettled_head":
            tup = saver.get_tuple(cfg(tid))
            need(tup.config["configurable"]["checkpoint_id"] == tgt, "target is not the head")
            snap = g.get_state(cfg(tid))
            ev["get_state_head_next"] = list(snap.next)
            ev["get_state_head_by_id_next"] = list(g.get_state(cfg(tid, tgt)).next)
            need(ev["get_state_head_next"] == ["tools"] == ev["get_state_head_by_id_next"],
                 "head has no pending tools task")
        ev["get_state_heads"] = heads
    return ev


def twin_positions(cps: list[Cp], u: Cp) -> list[str]:
    """In the full twin: U and its descendants that correspond to the contaminated set
    (same shape: U's subtree down to the first checkpoint that would store a snapshot;
    in full mode every checkpoint stores, so pair by depth)."""
    kids = children_of(cps)
    out = [u.id]
    cur = u
    while len(kids.get(cur.id, [])) == 1:
        cur = kids[cur.id][0]
        out.append(cur.id)
    return out


class SaverModel:
    """Cp list from a real saver (for the full-twin comparison)."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver

    def checkpoints(self, tid: str) -> list[Cp]:
        out = []
        for t in self.saver.list(cfg(tid)):
            cp = Cp(t.config["configurable"]["checkpoint_id"],
                    (t.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                    dict(t.metadata or {}), t.checkpoint)
            for task_id, ch, _v in t.pending_writes or []:
                cp.writes.append(Wr(task_id, "", 0, ch, "", b""))
            out.append(cp)
        return sorted(out, key=lambda c: c.id)


def _guarded_worker(q, kind, path, url, d_graph, d_name, tid, cid):  # pragma: no cover - child process
    try:
        with SaverCtx(kind, Path(path), url, d_name + "_g") as saver:
            q.put(try_state(build_graph(d_graph, saver), tid, cid))
    except Exception as e:  # noqa: BLE001
        q.put({"error": err(e)})


def guarded_state(kind: str, path: Path, url: Optional[str], d: Defect, cid: str, timeout: float = 20.0) -> dict:
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_guarded_worker, args=(q, kind, str(path), url, d.graph, d.name, d.thread, cid))
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        p.join()
        if kind == "postgres":
            import check_pg_fixtures as cpf

            cpf.drop(url, "dfckdefectchk_" + d.name + "_g")
        return {"error": f"get_state did not return within {timeout:g} s (killed)"}
    return q.get() if not q.empty() else {"error": "no result"}


# ---------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------


def threads_summary(b) -> list[dict]:
    table = "checkpoints"
    return [{"thread_id": t, "checkpoints": n} for t, n in b.q(
        f"SELECT thread_id, COUNT(*) FROM {table} GROUP BY thread_id ORDER BY thread_id"
        + (' COLLATE "C"' if b.kind == "postgres" else ""))]


def make_one(d: Defect, kind: str, fixtures: Path, out_dir: Path, url: Optional[str]) -> dict:
    if kind == "sqlite":
        src = fixtures / "sqlite" / f"{d.source}.db"
        work = out_dir / f".{d.name}.tmp.db"
        b = SqliteBackend(src, work)
        dest = out_dir / f"{d.name}.db"
    else:
        src = fixtures / "postgres" / f"{d.source}.sql"
        b = PgBackend(url, src, d.name)
        dest = out_dir / f"{d.name}.sql"
    try:
        if d.keep is not None:
            have = b.thread_ids()
            need(all(t in have for t in d.keep), f"{src} lacks threads {d.keep}")
            b.keep_threads(d.keep)
        entry = d.fn(b, d.thread)
        threads = threads_summary(b)
        if d.thread:
            entry["all_ids"] = [c.id for c in b.checkpoints(d.thread)]
    except BaseException:
        if kind == "sqlite":
            b.conn.close()
            work.unlink(missing_ok=True)
        raise
    b.finish(dest)
    out: dict[str, Any] = {"name": d.name, "file": dest.name}
    if kind == "postgres":
        out["database"] = "dfck_defect_" + d.name
    out.update({
        "source": d.source + (".db" if kind == "sqlite" else ".sql"),
        "thread_id": d.thread,
        "checkpoint_ns": "" if d.thread else None,
        "rule": entry["rule"],
        "description": entry["description"],
        "threads": threads,
        "expect": entry["expect"],
    })
    if entry.get("not_expected"):
        out["not_expected"] = entry["not_expected"]
    if entry.get("notes"):
        out["notes"] = entry["notes"]
    out["exit"] = 1 if any(f["severity"] == "error" and not f.get("secondary") for f in entry["expect"]) else 0
    if entry.get("details"):
        out["details"] = entry["details"]
    out["target"] = entry.get("target")
    out["evidence"] = evidence(d, {**entry, "threads": threads}, kind, dest, url, fixtures)
    del out["target"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures", help="fixtures directory (default: fixtures)")
    ap.add_argument("--pg-url", default=None, help="Postgres server URL: also write defects-pg/ (needs CREATEDB)")
    ap.add_argument("--only", nargs="*", help="only these defect names (expected.json then holds only them)")
    ap.add_argument("--no-sqlite", action="store_true", help="skip the SQLite defects")
    args = ap.parse_args()
    fixtures = Path(args.out)
    kinds = ([] if args.no_sqlite else ["sqlite"]) + (["postgres"] if args.pg_url else [])
    for kind in kinds:
        out_dir = fixtures / ("defects" if kind == "sqlite" else "defects-pg")
        out_dir.mkdir(parents=True, exist_ok=True)
        entries = []
        for d in DEFECTS:
            if args.only and d.name not in args.only:
                continue
            if kind == "postgres" and not d.pg:
                continue
            e = make_one(d, kind, fixtures, out_dir, args.pg_url)
            entries.append(e)
            size = (out_dir / e["file"]).stat().st_size
            codes = ", ".join(f"{f['code']}{'(2nd)' if f.get('secondary') else ''}@{(f['checkpoint_id'] or '')[:13]}"
                              for f in e["expect"][:4]) + (" …" if len(e["expect"]) > 4 else "")
            print(f"{kind:8} {e['file']:26} {size:8} B  {codes}", file=sys.stderr)
        text = json.dumps({"defects": entries}, ensure_ascii=False, indent=1) + "\n"
        (out_dir / "expected.json").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
