#!/usr/bin/env python3
"""Sanity checks over generated fixtures (python scripts/check_fixtures.py --out fixtures).

* no -wal/-shm sidecars, `writes.task_path` exists, type tags as expected;
* delta dbs: ext-7 snapshots and counters_since_delta_snapshot present;
* deerflow db: every t-deerflow checkpoint carries the marker;
* an independent store-only materializer (docs/replay-and-forks.md#delta-replay, written against the
  raw SQLite rows + the msgpack renderer, no LangGraph state API) reproduces
  expected values["messages"] (and "stored") for every checkpoint of every db whose rows
  are plain msgpack. Mismatches are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ormsgpack  # noqa: E402

import aeskey  # noqa: E402
import fixturelib  # noqa: E402

NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
REMOVE = "langchain_core.messages.modifier.RemoveMessage"
OVERWRITE = "langgraph.types.Overwrite"


def decode_checkpoint(blob: bytes) -> dict:
    # top level is a map; channel values rendered; ext7 -> {"$delta_snapshot": v}
    return fixturelib.render_msgpack(blob)


def as_list(v):
    return v if isinstance(v, list) else [v]


def get_overwrite(v):
    if isinstance(v, dict):
        if v.get("$class") == OVERWRITE:
            return True, v["$kwargs"]["value"]
        if set(v) == {"__overwrite__"}:
            return True, v["__overwrite__"]
        if v.get("type") == "__overwrite__" and "value" in v and "$class" not in v:
            return True, v["value"]
    return False, None


def lg_reducer(state, writes):
    # _messages_delta_reducer: index over state, then apply new messages
    base = list(state)
    index = {m["id"]: i for i, m in enumerate(base) if m.get("id") is not None}
    out = list(base)
    for w in writes:
        for m in as_list(w):
            mid = m.get("id")
            if mid is None:
                out.append(m)
            elif m.get("$class") == REMOVE:
                if mid in index:
                    out[index.pop(mid)] = None
            elif mid in index:
                out[index[mid]] = m
            else:
                index[mid] = len(out)
                out.append(m)
    return [m for m in out if m is not None]


def df_reducer(state, writes):
    msgs = list(state)
    for w in writes:
        batch = as_list(w)
        cut = [i for i, m in enumerate(batch) if m.get("$class") == REMOVE and m.get("id") == "__remove_all__"]
        if cut:
            msgs = list(batch[cut[-1] + 1 :])
            continue
        pos = {}
        for i, m in enumerate(msgs):
            pos[m["id"]] = i
        remove = set()
        for m in batch:
            mid = m["id"]
            if mid in pos:
                if m.get("$class") == REMOVE:
                    remove.add(mid)
                else:
                    remove.discard(mid)
                    msgs[pos[mid]] = m
            elif m.get("$class") == REMOVE:
                raise ValueError(mid)
            else:
                pos[mid] = len(msgs)
                msgs.append(m)
        msgs = [m for m in msgs if m["id"] not in remove]
    return msgs


def replay(base, values, reducer):
    start = 0
    for i, v in enumerate(values):
        ow, val = get_overwrite(v)
        if ow:
            base = list(val) if val is not None else []
            start = i + 1
    rest = values[start:]
    return reducer(base, rest) if rest else base


def update(value, values, reducer):
    if not values:
        return value
    ows = [get_overwrite(v) for v in values]
    for ow, val in ows:
        if ow:
            return list(val) if val is not None else []
    return reducer(value, values)


class Store:
    def __init__(self, path: Path):
        self.conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        self.ck = {}
        for tid, ns, cid, parent, typ, blob in self.conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint FROM checkpoints"
        ):
            self.ck[(tid, ns, cid)] = (parent, typ, blob)
        self.decoded = {}

    def load(self, key):
        if key not in self.decoded:
            parent, typ, blob = self.ck[key]
            typ, blob = aeskey.open_typed(typ, blob)  # aes_* stems: the fixture key
            if typ != "msgpack":
                raise LookupError(typ)
            self.decoded[key] = (parent, decode_checkpoint(blob))
        return self.decoded[key]

    def writes(self, tid, ns, cid, ch):
        rows = self.conn.execute(
            "SELECT task_path, task_id, idx, type, value FROM writes WHERE thread_id=? AND checkpoint_ns=?"
            " AND checkpoint_id=? AND channel=?",
            (tid, ns, cid, ch),
        ).fetchall()
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        out = []
        for tp, task, idx, typ, val in rows:
            typ, val = aeskey.open_typed(typ, val)
            if "+" in typ or typ == "pickle":
                raise LookupError(typ)
            out.append((task, fixturelib.render_typed(typ, bytes(val))))
        return out

    def materialize(self, tid, ns, cid, reducer, as_get_state=True, ch="messages"):
        parent, ck = self.load((tid, ns, cid))
        cv = ck["channel_values"]
        if ch in cv:
            v = cv[ch]
            v = v["$delta_snapshot"] if isinstance(v, dict) and "$delta_snapshot" in v else v
        elif ch not in ck["channel_versions"]:
            v = []
        else:
            chain, seed, cur, seen = [], None, parent, {cid}
            while cur is not None and cur not in seen and (tid, ns, cur) in self.ck:
                seen.add(cur)
                p, a = self.load((tid, ns, cur))
                chain.append(cur)
                if ch in a["channel_values"]:
                    seed = a["channel_values"][ch]
                    break
                cur = p
            ws = []
            for c in reversed(chain):
                ws.extend(val for _, val in self.writes(tid, ns, c, ch))
            base = []
            if seed is not None:
                base = seed["$delta_snapshot"] if isinstance(seed, dict) and "$delta_snapshot" in seed else seed
            v = replay(list(base), ws, reducer)
        if as_get_state:
            nulls = [val for task, val in self.writes(tid, ns, cid, ch) if task == NULL_TASK_ID]
            v = update(v, nulls, reducer)
        return v


def check_db(db: Path, expected: dict) -> list[str]:
    problems = []
    for suffix in ("-wal", "-shm"):
        if Path(str(db) + suffix).exists():
            problems.append(f"sidecar {suffix}")
    st = Store(db)
    cols = [r[1] for r in st.conn.execute("PRAGMA table_info(writes)")]
    if "task_path" not in cols:
        problems.append("writes.task_path missing")
    n_ok = n_skip = 0
    for t in expected["threads"]:
        reducer = df_reducer if t["reducer"] == "deerflow" else lg_reducer
        for ns in t["namespaces"]:
            for c in ns["checkpoints"]:
                try:
                    got = st.materialize(t["thread_id"], ns["checkpoint_ns"], c["checkpoint_id"], reducer)
                    got_stored = st.materialize(
                        t["thread_id"], ns["checkpoint_ns"], c["checkpoint_id"], reducer, as_get_state=False
                    )
                except LookupError:
                    n_skip += 1
                    continue
                want = c["values"].get("messages")
                want_stored = c.get("stored", c["values"]).get("messages")
                if got != want or got_stored != want_stored:
                    problems.append(
                        f"{t['thread_id']} {ns['checkpoint_ns']!r} {c['checkpoint_id']} step {c['step']}: "
                        f"materialized {[m.get('id') for m in got]} expected {[m.get('id') for m in want]}"
                    )
                else:
                    n_ok += 1
    st.conn.close()
    print(f"{db.name}: {n_ok} checkpoints materialized OK, {n_skip} unreadable skipped", file=sys.stderr)
    return problems


def structural(db: Path) -> dict:
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    types = dict(conn.execute("SELECT type, COUNT(*) FROM checkpoints GROUP BY type").fetchall())
    wtypes = dict(conn.execute("SELECT type, COUNT(*) FROM writes GROUP BY type").fetchall())
    snaps = counters = marker = total = 0
    for blob, md, typ in conn.execute("SELECT checkpoint, metadata, type FROM checkpoints"):
        total += 1
        m = json.loads(bytes(md))
        counters += "messages" in (m.get("counters_since_delta_snapshot") or {})
        marker += m.get("deerflow_checkpoint_channel_mode") == "delta"
        typ, blob = aeskey.open_typed(typ, blob)
        if typ == "msgpack":
            ck = ormsgpack.unpackb(bytes(blob), ext_hook=lambda c, d: ("ext", c, d), option=ormsgpack.OPT_NON_STR_KEYS)
            v = ck["channel_values"].get("messages")
            snaps += isinstance(v, tuple) and v[1] == 7
    conn.close()
    with open(db, "rb") as f:  # header bytes 18/19 == 2 means WAL
        hdr = f.read(20)
    jm = "wal" if hdr[18] == 2 and hdr[19] == 2 else "rollback"
    return {"checkpoints": total, "ext7_snapshots": snaps, "with_counters": counters, "with_marker": marker,
            "checkpoint_types": types, "write_types": wtypes, "journal_mode": jm}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="fixtures")
    args = ap.parse_args()
    out = Path(args.out)
    problems = []
    for db in sorted((out / "sqlite").glob("*.db")):
        for p in check_db(db, json.loads((out / "expected" / f"{db.stem}.json").read_text(encoding="utf-8"))):
            problems.append(f"{db.name}: {p}")
        exp = json.loads((out / "expected" / f"{db.stem}.json").read_text(encoding="utf-8"))
        print(db.name, json.dumps(structural(db)))
    for p in problems:
        print("PROBLEM", p)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
