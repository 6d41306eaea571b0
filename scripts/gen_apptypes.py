#!/usr/bin/env python3
"""Generate the `apptypes` fixtures: stores holding application types outside LangGraph's
safe set, written by the real library, and tampered copies of them (for `dfck audit`).

    .venv/bin/python scripts/gen_apptypes.py --out fixtures                       # SQLite
    TEST_POSTGRES_URI=$(scripts/pg-test-server.sh start)
    .venv/bin/python scripts/gen_apptypes.py --out fixtures --pg-url "$TEST_POSTGRES_URI"   # + PostgreSQL

Writes, through StateGraph + SqliteSaver / PostgresSaver (the machinery of gen_fixtures.py and
gen_pg_fixtures.py, imported):

* fixtures/sqlite/apptypes.db + fixtures/expected/apptypes.json
* fixtures/postgres/apptypes.sql + fixtures/expected-pg/apptypes.json   (with --pg-url)
* fixtures/tampered/apptypes_method.db, apptypes_module.db: copies of apptypes.db with one
  value rewritten (see TAMPERED), and fixtures/tampered/apptypes_method.pg.sql,
  apptypes_module.pg.sql: the same rewrite of the PostgreSQL store, as UPDATE statements to
  apply to a copy of database dfck_apptypes (with --pg-url); fixtures/tampered/expected.json
  says what each holds.

The types live in scripts/fixture_types.py (pydantic v2 model, dataclass, Enum, NamedTuple).
Threads:

* t-apptypes (full, add_messages): turn "plan" sets profile (Profile with a datetime), color
  (Color), span (Span); turn "move" sets point (Point holding a Color) and appends to trail (a
  list of Points, reducer); turn "ask" interrupts with a Point payload (an Interrupt write
  holding it), resumed with Command(resume=Color.BLUE); then update_state(profile=…).
* t-apptypes-delta (DeltaChannel messages, snapshot_frequency=3): turns "plan" and "move".

Tampering edits msgpack bytes with ormsgpack and an ext hook of this script's own (an ext stays
opaque bytes): nothing tampered is ever loaded through LangGraph. Re-encoding an untouched value
is asserted to give its stored bytes back.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ormsgpack  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

import gen_fixtures as gf  # noqa: E402
from fixture_types import Color, Point, Profile, Span, add_points  # noqa: E402
from graphs import AIMessage, messages_annotation, text_of  # noqa: E402

STEM = "apptypes"


# ---------------------------------------------------------------------------------------
# The graph and the scenario
# ---------------------------------------------------------------------------------------


def build_graph(messages_ann: Any, saver: Any):
    AppState = TypedDict(
        "AppState",
        {
            "messages": messages_ann,
            "profile": Optional[Profile],
            "color": Optional[Color],
            "span": Optional[Span],
            "point": Optional[Point],
            "trail": Annotated[list, add_points],
        },
    )

    def route(state: dict) -> str:
        t = text_of(state["messages"][-1])
        return "ask" if t.startswith("ask") else "move" if t.startswith("move") else "plan"

    def plan(state: dict) -> dict:
        n = len(state["messages"])
        return {
            "messages": [AIMessage(content=f"planned at {n}", id=f"ai-{n}")],
            "profile": Profile(
                name="ada",
                tags=["admin", f"turn-{n}"],
                level=n,
                since=datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone.utc),
            ),
            "color": Color.GREEN,
            "span": Span(0, n),
        }

    def move(state: dict) -> dict:
        n = len(state["messages"])
        p = Point(n, 2 * n, Color.BLUE)
        return {"messages": [AIMessage(content=f"moved to {p.x},{p.y}", id=f"ai-{n}")], "point": p, "trail": [p]}

    def ask(state: dict) -> dict:
        n = len(state["messages"])
        answer = interrupt(Point(9, 9, Color.RED))
        return {"messages": [AIMessage(content=f"answer {answer.value}", id=f"ai-{n}")], "color": answer}

    b = StateGraph(AppState)
    b.add_node("plan", plan)
    b.add_node("move", move)
    b.add_node("ask", ask)
    b.add_conditional_edges(START, route, ["plan", "move", "ask"])
    for node in ("plan", "move", "ask"):
        b.add_edge(node, END)
    return b.compile(checkpointer=saver)


def gen_apptypes(st: Any) -> None:
    gfull = build_graph(messages_annotation("full"), st.saver)
    tid = "t-apptypes"
    st.register(tid, gfull)
    for i, text in enumerate(["plan the day", "move along", "ask me"]):
        gfull.invoke({"messages": [gf.h(text, f"h-{i}")]}, st.cfg(tid), **gf.SYNC)
    gfull.invoke(Command(resume=Color.BLUE), st.cfg(tid), **gf.SYNC)
    gfull.update_state(st.cfg(tid), {"profile": Profile(name="ada", tags=["edited"], level=99)}, as_node="plan")

    gdelta = build_graph(messages_annotation("delta", 3), st.saver)
    tid = "t-apptypes-delta"
    st.register(tid, gdelta)
    for i, text in enumerate(["plan ahead", "move on", "plan again", "move back"]):
        gdelta.invoke({"messages": [gf.h(text, f"h-{i}")]}, st.cfg(tid), **gf.SYNC)


# ---------------------------------------------------------------------------------------
# Tampering (ormsgpack with an opaque ext hook; never LangGraph)
# ---------------------------------------------------------------------------------------


class Opaque:
    """An ext kept as its code and payload bytes."""

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data


def unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data, ext_hook=Opaque, option=ormsgpack.OPT_NON_STR_KEYS)


def pack(obj: Any) -> bytes:
    def default(o: Any) -> Any:
        if isinstance(o, Opaque):
            return ormsgpack.Ext(o.code, o.data)
        raise TypeError(type(o))

    return ormsgpack.packb(obj, default=default, option=ormsgpack.OPT_NON_STR_KEYS)


def exact(data: bytes) -> Any:
    obj = unpack(data)
    assert pack(obj) == data, "re-encoding an untouched value must give its bytes back"
    return obj


def ext(code: int, *items: Any) -> Opaque:
    return Opaque(code, ormsgpack.packb(list(items)))


# The two rewrites: (a) the `color` value of the first checkpoint of t-apptypes that stores
# one becomes an ext 3 call of a method outside SAFE_MSGPACK_METHODS; (b) the first pending
# write to `point` becomes an ext 2 constructor from a denied module (inert if ever called:
# Popen() without args raises before any process starts).
TAMPERED = {
    "method": {
        "ext": 3,
        "module": "datetime",
        "name": "datetime",
        "method": "now",
        "value": lambda: ext(3, "datetime", "datetime", "2025-01-01T00:00:00", "now"),
        "where": "channel 'color' of the first checkpoint of t-apptypes that stores it (SQLite: the checkpoint row; PostgreSQL: the blob of that version)",
    },
    "module": {
        "ext": 2,
        "module": "subprocess",
        "name": "Popen",
        "method": None,
        "value": lambda: ext(2, "subprocess", "Popen", {}),
        "where": "the first pending write to channel 'point' of t-apptypes",
    },
}


def tamper_sqlite(src: Path, out_dir: Path, kind: str) -> dict:
    dst = out_dir / f"{STEM}_{kind}.db"
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(dst) + suffix)
        if p.exists():
            p.unlink()
    shutil.copyfile(src, dst)
    conn = sqlite3.connect(str(dst))
    spec = TAMPERED[kind]
    if kind == "method":
        rows = conn.execute(
            "SELECT checkpoint_ns, checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = ?"
            " ORDER BY checkpoint_id",
            ("t-apptypes",),
        ).fetchall()
        for ns, cid, typ, body in rows:
            assert typ == "msgpack", typ
            doc = exact(bytes(body))
            if "color" in doc["channel_values"]:
                doc["channel_values"]["color"] = spec["value"]()
                conn.execute(
                    "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    (pack(doc), "t-apptypes", ns, cid),
                )
                place = {"thread_id": "t-apptypes", "checkpoint_ns": ns, "checkpoint_id": cid, "channel": "color", "row": "checkpoint"}
                break
        else:
            raise SystemExit("no checkpoint of t-apptypes stores color")
    else:
        ns, cid, task_id, idx, typ, value = conn.execute(
            "SELECT checkpoint_ns, checkpoint_id, task_id, idx, type, value FROM writes"
            " WHERE thread_id = ? AND channel = 'point' ORDER BY checkpoint_id, task_path, task_id, idx LIMIT 1",
            ("t-apptypes",),
        ).fetchone()
        assert typ == "msgpack", typ
        exact(bytes(value))
        conn.execute(
            "UPDATE writes SET value = ? WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
            " AND task_id = ? AND idx = ?",
            (pack(spec["value"]()), "t-apptypes", ns, cid, task_id, idx),
        )
        place = {"thread_id": "t-apptypes", "checkpoint_ns": ns, "checkpoint_id": cid, "channel": "point", "row": "write",
                 "task_id": task_id, "idx": idx}
    conn.commit()
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for suffix in ("-wal", "-shm"):
        if Path(str(dst) + suffix).exists():
            raise RuntimeError(f"sidecar left behind: {dst}{suffix}")
    return {"file": dst.name, **place}


def sql_bytes(b: bytes) -> str:
    return "'\\x" + b.hex() + "'::bytea"


def sql_text(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def tamper_pg(st: Any, out_dir: Path, kind: str) -> dict:
    """UPDATE statements rewriting one value of a copy of dfck_apptypes (read from `st`)."""
    spec = TAMPERED[kind]
    if kind == "method":
        ns, cid, version = st.q(
            "SELECT c.checkpoint_ns, c.checkpoint_id, c.checkpoint -> 'channel_versions' ->> 'color'"
            " FROM checkpoints c WHERE c.thread_id = %s AND c.checkpoint -> 'channel_versions' ? 'color'"
            ' ORDER BY c.checkpoint_id COLLATE "C" LIMIT 1',
            ("t-apptypes",),
        )[0]
        typ, blob = st.q(
            "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s"
            " AND channel = 'color' AND version = %s",
            ("t-apptypes", ns, version),
        )[0]
        assert typ == "msgpack", typ
        exact(bytes(blob))
        stmt = (
            f"UPDATE checkpoint_blobs SET blob = {sql_bytes(pack(spec['value']()))}"
            f" WHERE thread_id = 't-apptypes' AND checkpoint_ns = {sql_text(ns)}"
            f" AND channel = 'color' AND version = {sql_text(version)};"
        )
        place = {"thread_id": "t-apptypes", "checkpoint_ns": ns, "checkpoint_id": cid, "channel": "color", "row": "blob",
                 "version": version}
    else:
        ns, cid, task_id, idx, typ, blob = st.q(
            "SELECT checkpoint_ns, checkpoint_id, task_id, idx, type, blob FROM checkpoint_writes"
            " WHERE thread_id = %s AND channel = 'point'"
            ' ORDER BY checkpoint_id COLLATE "C", task_path, task_id, idx LIMIT 1',
            ("t-apptypes",),
        )[0]
        assert typ == "msgpack", typ
        exact(bytes(blob))
        stmt = (
            f"UPDATE checkpoint_writes SET blob = {sql_bytes(pack(spec['value']()))}"
            f" WHERE thread_id = 't-apptypes' AND checkpoint_ns = {sql_text(ns)}"
            f" AND checkpoint_id = {sql_text(cid)} AND task_id = {sql_text(task_id)} AND idx = {int(idx)};"
        )
        place = {"thread_id": "t-apptypes", "checkpoint_ns": ns, "checkpoint_id": cid, "channel": "point", "row": "write",
                 "task_id": task_id, "idx": int(idx)}
    name = f"{STEM}_{kind}.pg.sql"
    (out_dir / name).write_text(
        f"-- gen_apptypes.py: apply to a copy of database dfck_{STEM} ({spec['where']})\n{stmt}\n",
        encoding="utf-8",
    )
    return {"file": name, "database_template": f"dfck_{STEM}", **place}


# ---------------------------------------------------------------------------------------


def write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures", help="output directory (default: fixtures)")
    ap.add_argument("--pg-url", default=None, help="also write the PostgreSQL fixture on this server")
    args = ap.parse_args()
    out = Path(args.out)
    for d in ("sqlite", "expected", "tampered"):
        (out / d).mkdir(parents=True, exist_ok=True)

    path = out / "sqlite" / f"{STEM}.db"
    st = gf.Store(path)
    gen_apptypes(st)
    st.conn.commit()
    expected = gf.build_expected(st, path.name)
    st.close()
    write_json(out / "expected" / f"{STEM}.json", expected)
    n_cp = sum(len(ns["checkpoints"]) for t in expected["threads"] for ns in t["namespaces"])
    print(f"{path}: {len(expected['threads'])} threads, {n_cp} checkpoints", file=sys.stderr)

    tampered: dict[str, Any] = {"tampered": []}
    for kind, spec in TAMPERED.items():
        entry = {
            "name": f"{STEM}_{kind}",
            "source": STEM,
            "description": spec["where"],
            "never_allowed": {k: spec[k] for k in ("ext", "module", "name", "method")},
            "sqlite": tamper_sqlite(path, out / "tampered", kind),
        }
        tampered["tampered"].append(entry)

    if args.pg_url:
        import gen_pg_fixtures as gpf  # sets gf.messages_encoding to the PostgreSQL judge

        for d in ("postgres", "expected-pg"):
            (out / d).mkdir(parents=True, exist_ok=True)
        pst = gpf.PgStore(args.pg_url, STEM)
        try:
            gen_apptypes(pst)
            write_json(out / "expected-pg" / f"{STEM}.json", gpf.build_expected_pg(pst))
            for entry, kind in zip(tampered["tampered"], TAMPERED):
                entry["postgres"] = tamper_pg(pst, out / "tampered", kind)
        finally:
            pst.close()
        size = gpf.dump_db(pst.conninfo, out / "postgres" / f"{STEM}.sql")
        gpf.drop_db(args.pg_url, pst.dbname)
        print(f"{out / 'postgres' / (STEM + '.sql')}: {size} bytes", file=sys.stderr)
    else:
        old = out / "tampered" / "expected.json"
        if old.exists():  # keep the PostgreSQL half of an earlier run
            prev = {e["name"]: e for e in json.loads(old.read_text(encoding="utf-8"))["tampered"]}
            for entry in tampered["tampered"]:
                if "postgres" in prev.get(entry["name"], {}):
                    entry["postgres"] = prev[entry["name"]]["postgres"]
    write_json(out / "tampered" / "expected.json", tampered)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
