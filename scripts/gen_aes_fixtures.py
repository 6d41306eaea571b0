#!/usr/bin/env python3
"""Generate dfck's AES-encrypted fixtures (issue 27) with the real LangGraph.

    .venv/bin/python scripts/gen_aes_fixtures.py --out fixtures                      # SQLite only
    TEST_POSTGRES_URI=$(scripts/pg-test-server.sh start)
    .venv/bin/python scripts/gen_aes_fixtures.py --out fixtures --pg-url "$TEST_POSTGRES_URI"
    scripts/pg-test-server.sh stop

Writes
  fixtures/sqlite/aes_full.db   + fixtures/expected/aes_full.json      (threads in full mode)
  fixtures/sqlite/aes_delta.db  + fixtures/expected/aes_delta.json     (delta mode, K=3)
and with --pg-url (or TEST_POSTGRES_URI) also
  fixtures/postgres/aes_full.sql  + fixtures/expected-pg/aes_full.json
  fixtures/postgres/aes_delta.sql + fixtures/expected-pg/aes_delta.json
(--skip-sqlite: only the PostgreSQL pair; --only STEM…: some stems).

Values are encrypted by LangGraph's own EncryptedSerializer.from_pycryptodome_aes (AES-EAX,
stored type `<inner>+aes`, body nonce ‖ tag ‖ ciphertext) with the PUBLIC TEST KEY in
fixtures/aes.key (scripts/aeskey.py). SQLite encrypts the whole checkpoint row and every
write; PostgreSQL encrypts blobs and writes, while metadata and inline primitive channel
values stay plaintext JSONB. Every store holds the same threads (conversation graph of
gen_fixtures.py, `add_messages` in aes_full, DeltaChannel(_messages_delta_reducer, 3) in
aes_delta):

  t-aes-enc      encrypted from its first checkpoint: a tool call turn, a second turn, an
                 update_state append;
  t-aes-switch   encryption "switched on later": two turns written through the plain
                 JsonPlusSerializer (rows `msgpack`), then the SAME saver's serde swapped to the
                 encrypted one (rows `msgpack+aes`) for a Send fan-out turn and a new branch
                 from the end of the first (plaintext) turn;
  t-aes-pending  encrypted, pending writes kept in the writes table: an interrupt resumed with
                 Command(resume, update) (NULL_TASK_ID writes), a node raising ValueError
                 (`__error__` write), and a last interrupt left waiting at the head;
  t-aes-plain    wholly plaintext (written before encryption was "switched on");
  t-aes-deerflow encrypted DeerFlow graph: sandbox/thread_data/title/todos/artifacts, a tool
                 call, summarization; in aes_delta with DeerFlow's reducer and the
                 `deerflow_checkpoint_channel_mode: delta` marker (like the `deerflow` fixture),
                 in aes_full with `add_messages` and no marker.

Encrypted messages carry the text SEALED_CANARY, plaintext ones OPEN_CANARY: the generator
asserts the first never appears in the stored bytes (SQLite file, PostgreSQL rows, the dump —
also hex-encoded) and the second does (so the search works).

Expected JSON: gen_fixtures.build_expected / gen_pg_fixtures.build_expected_pg, read through
the encrypted serializer (which reads both kinds of rows); `errors` lists no `+aes` row (dfck
reads them with the key) and must be empty; `versions` adds pycryptodome. Afterwards every
checkpoint is read again without the key (a plain JsonPlusSerializer saver: it must fail on
every checkpoint holding a `+aes` row and read every other one) and with a wrong key (must
fail the same way). The summary lines (stderr) give threads, checkpoints, bytes and the
`+aes` / plain row counts per table; no key material is printed.
"""

from __future__ import annotations

import argparse
import importlib.metadata as im
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from langgraph.checkpoint.serde.base import maybe_add_typed_methods  # noqa: E402
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer  # noqa: E402
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: E402
from langgraph.types import Command  # noqa: E402

import aeskey  # noqa: E402
import gen_fixtures as gf  # noqa: E402
from graphs import SystemMessage, build_conv_graph, messages_annotation  # noqa: E402

SEALED_CANARY = "SEALED-7f3a"  # only ever inside encrypted values
OPEN_CANARY = "OPEN-5c2e"  # in plaintext values
STEMS = {"aes_full": ("full", None), "aes_delta": ("delta", 3)}
THREADS = ["t-aes-enc", "t-aes-switch", "t-aes-pending", "t-aes-plain", "t-aes-deerflow"]
SYNC = gf.SYNC
h = gf.h

# gen_pg_fixtures replaces gf.messages_encoding when imported; keep the SQLite rule at hand.
_SQLITE_MESSAGES_ENCODING = gf.messages_encoding


def set_serde(st: Any, serde: Any) -> None:
    """Swap the saver's serializer in place, the way a process restarted with
    LANGGRAPH_AES_KEY would write through the same tables."""
    st.saver.serde = maybe_add_typed_methods(serde)


# ---------------------------------------------------------------------------------------
# scenarios (graphs are rebuilt after every serde swap; they share the saver object)
# ---------------------------------------------------------------------------------------


def scenario_enc(g: Any, st: Any, tid: str) -> None:
    st.register(tid, g)
    g.invoke(
        {"messages": [SystemMessage(content="Encrypted from the first checkpoint. 加密", id="sys-0"),
                      h(f"calc sealed {SEALED_CANARY}", "h-0")]},
        st.cfg(tid), **SYNC,
    )
    g.invoke({"messages": [h(f"second sealed turn 😀 ünïcödé {SEALED_CANARY}", "h-1")]}, st.cfg(tid), **SYNC)
    g.update_state(st.cfg(tid), {"messages": [h(f"note via update_state {SEALED_CANARY}", "upd-1")]}, as_node="agent")


def scenario_switch_plain(g: Any, st: Any, tid: str) -> None:
    st.register(tid, g)
    g.invoke({"messages": [h(f"calc in the clear {OPEN_CANARY}", "h-0")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h(f"second clear turn {OPEN_CANARY}", "h-1")]}, st.cfg(tid), **SYNC)


def scenario_switch_encrypted(g: Any, st: Any, tid: str) -> None:
    st.register(tid, g)
    g.invoke({"messages": [h(f"fan out, sealed {SEALED_CANARY}", "h-2")]}, st.cfg(tid), **SYNC)
    # a new branch from the end of the first (plaintext) turn: encrypted children of a plain parent
    cfg_x = gf.find_state(g, tid, lambda s: s.next == () and gf.ids_of(s)[-1:] == ["ai-3"])
    g.invoke({"messages": [h(f"branch from turn one, sealed {SEALED_CANARY}", "h-b")]},
             gf.with_meta(cfg_x, st, tid), **SYNC)


def scenario_pending(g: Any, st: Any, tid: str) -> None:
    st.register(tid, g)
    g.invoke({"messages": [h(f"ask for approval {SEALED_CANARY}", "h-0")]}, st.cfg(tid), **SYNC)
    g.invoke(Command(resume=f"yes {SEALED_CANARY}", update={"messages": [h(f"resume note {SEALED_CANARY}", "h-resume")]}),
             st.cfg(tid), **SYNC)
    try:
        g.invoke({"messages": [h("boom", "h-1")]}, st.cfg(tid), **SYNC)
    except ValueError:
        pass
    else:  # pragma: no cover
        raise AssertionError("expected boom")
    # left waiting: the head holds its __interrupt__ write
    g.invoke({"messages": [h(f"ask again {SEALED_CANARY}", "h-2")]}, st.cfg(tid), **SYNC)
    assert g.get_state({"configurable": {"thread_id": tid}}).interrupts, "t-aes-pending should end interrupted"


def scenario_plain(g: Any, st: Any, tid: str) -> None:
    st.register(tid, g)
    g.invoke({"messages": [h(f"calc plain {OPEN_CANARY}", "h-0")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h(f"plain second turn {OPEN_CANARY}", "h-1")]}, st.cfg(tid), **SYNC)


def scenario_deerflow(g: Any, st: Any, tid: str, marker: bool) -> None:
    st.register(tid, g)
    for text, mid in (("setup the sandbox", "df-h-0"), ("plan the work 计划", "df-h-1"),
                      ("write the report", "df-h-2"), ("summarize please", "df-h-3")):
        g.invoke({"messages": [h(f"{text} {SEALED_CANARY}", mid)]}, st.cfg(tid, marker=marker), **SYNC)


def gen_aes(st: Any, mode: str, k: Any) -> None:
    """The five threads of an aes_* store (see the module docstring)."""
    enc, plain = aeskey.aes_serde(), JsonPlusSerializer()
    ann = messages_annotation(mode, k)

    def conv(serde: Any) -> Any:
        set_serde(st, serde)
        return build_conv_graph(ann, st.saver)

    scenario_enc(conv(enc), st, "t-aes-enc")
    scenario_plain(conv(plain), st, "t-aes-plain")
    scenario_switch_plain(conv(plain), st, "t-aes-switch")
    scenario_switch_encrypted(conv(enc), st, "t-aes-switch")  # same saver, serde swapped
    scenario_pending(conv(enc), st, "t-aes-pending")

    set_serde(st, enc)
    df_ann = messages_annotation("delta", 3, reducer="deerflow") if mode == "delta" else messages_annotation("full")
    scenario_deerflow(gf.build_deerflow_graph(df_ann, st.saver), st, "t-aes-deerflow", marker=mode == "delta")

    # every thread is read back (expected JSON) through graphs on the encrypted saver
    set_serde(st, enc)
    g = build_conv_graph(ann, st.saver)
    for tid in THREADS[:-1]:
        st.register(tid, g)
    assert sorted(st.threads) == sorted(THREADS), sorted(st.threads)


# ---------------------------------------------------------------------------------------
# expected JSON and checks
# ---------------------------------------------------------------------------------------


def finish_expected(expected: dict) -> dict:
    """`errors` without the `+aes` rows (dfck reads them with the key); nothing else may be left."""
    left = [e for e in expected["errors"] if not aeskey.is_encrypted(e.get("type"))]
    assert not left, f"unreadable rows besides +aes ones: {left[:3]}"
    expected["errors"] = []
    expected["versions"]["pycryptodome"] = im.version("pycryptodome")
    return expected


def encrypted_checkpoints_sqlite(st: Any) -> dict[tuple, bool]:
    """(thread, ns, checkpoint) -> whether its row or one of its writes is `+aes`."""
    out: dict[tuple, bool] = {}
    for tid, ns, cid, typ in st.conn.execute("SELECT thread_id, checkpoint_ns, checkpoint_id, type FROM checkpoints"):
        out[(tid, ns, cid)] = aeskey.is_encrypted(typ)
    for tid, ns, cid, typ in st.conn.execute("SELECT thread_id, checkpoint_ns, checkpoint_id, type FROM writes"):
        out[(tid, ns, cid)] = out.get((tid, ns, cid), False) or aeskey.is_encrypted(typ)
    return out


def encrypted_checkpoints_pg(st: Any) -> dict[tuple, bool]:
    """(thread, ns, checkpoint) -> whether a blob it names or one of its writes is `+aes`."""
    blobs = {(t, n, c, v): aeskey.is_encrypted(ty) for t, n, c, v, ty in st.q(
        "SELECT thread_id, checkpoint_ns, channel, version, type FROM checkpoint_blobs")}
    out: dict[tuple, bool] = {}
    for tid, ns, cid, versions in st.q(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint->'channel_versions' FROM checkpoints"
    ):
        out[(tid, ns, cid)] = any(blobs.get((tid, ns, ch, str(v)), False) for ch, v in (versions or {}).items())
    for tid, ns, cid, typ in st.q("SELECT thread_id, checkpoint_ns, checkpoint_id, type FROM checkpoint_writes"):
        out[(tid, ns, cid)] = out.get((tid, ns, cid), False) or aeskey.is_encrypted(typ)
    return out


def check_without_key(st: Any, label: str, which: dict[tuple, bool]) -> str:
    """A plain saver fails on every checkpoint holding a `+aes` row and reads every other one;
    a saver with a wrong key fails on the same ones."""
    wrong = EncryptedSerializer.from_pycryptodome_aes(key=b"not-the-fixture-key-0123456789ab")
    good = st.saver.serde
    counts = {"refused": 0, "read": 0}
    try:
        for serde, name in ((JsonPlusSerializer(), "no key"), (wrong, "a wrong key")):
            set_serde(st, serde)
            for (tid, ns, cid), encrypted in sorted(which.items()):
                cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
                try:
                    t = st.saver.get_tuple(cfg)
                    ok = t is not None and t.checkpoint["id"] == cid
                except Exception:  # noqa: BLE001 - any failure to read counts
                    ok = False
                assert ok != encrypted, f"{label} {tid} {cid}: read with {name}: {'ok' if ok else 'failed'}, encrypted={encrypted}"
                if name == "no key":
                    counts["read" if ok else "refused"] += 1
    finally:
        st.saver.serde = good
    return f"without the key {counts['refused']} checkpoints refused, {counts['read']} read (wholly plaintext)"


def check_canaries(label: str, stored: bytes) -> None:
    for canary, want in ((SEALED_CANARY, False), (OPEN_CANARY, True)):
        found = canary.encode() in stored or canary.encode().hex().encode() in stored
        assert found == want, f"{label}: {canary} {'found' if found else 'not found'} in the stored bytes"


# ---------------------------------------------------------------------------------------
# SQLite / PostgreSQL drivers
# ---------------------------------------------------------------------------------------


def write_json(path: Path, expected: dict) -> int:
    path.write_text(json.dumps(expected, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return sum(len(ns["checkpoints"]) for t in expected["threads"] for ns in t["namespaces"])


def gen_sqlite(stem: str, out: Path) -> None:
    gf.messages_encoding = _SQLITE_MESSAGES_ENCODING
    path = out / "sqlite" / f"{stem}.db"
    st = gf.Store(path)
    gen_aes(st, *STEMS[stem])
    st.conn.commit()
    expected = finish_expected(gf.build_expected(st, path.name))
    note = check_without_key(st, stem, encrypted_checkpoints_sqlite(st))
    st.close()
    n_cp = write_json(out / "expected" / f"{stem}.json", expected)
    check_canaries(str(path), path.read_bytes())
    print(f"{path}: {len(expected['threads'])} threads, {n_cp} checkpoints, {path.stat().st_size} bytes; "
          f"rows {aeskey.counts_text(aeskey.sqlite_census(path))}; {note}", file=sys.stderr)


def gen_postgres(stem: str, out: Path, url: str, keep: bool) -> None:
    import gen_pg_fixtures as gpf  # replaces gf.messages_encoding with the PostgreSQL rule

    gf.messages_encoding = gpf.messages_encoding_pg
    st = gpf.PgStore(url, stem)
    try:
        gen_aes(st, *STEMS[stem])
        expected = finish_expected(gpf.build_expected_pg(st))
        note = check_without_key(st, f"pg {stem}", encrypted_checkpoints_pg(st))
        census = aeskey.pg_census(st.conn)
        stored = b"".join(
            bytes(r[0] or b"") for r in st.q("SELECT blob FROM checkpoint_blobs UNION ALL SELECT blob FROM checkpoint_writes")
        ) + "".join(r[0] for r in st.q("SELECT checkpoint::text || metadata::text FROM checkpoints")).encode()
        check_canaries(f"pg {stem} rows", stored)
        n_rows = {t: st.q(f"SELECT count(*) FROM {t}")[0][0] for t in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")}
    finally:
        st.close()
    dump = out / "postgres" / f"{stem}.sql"
    size = gpf.dump_db(st.conninfo, dump)
    check_canaries(str(dump), dump.read_bytes())
    if not keep:
        gpf.drop_db(url, st.dbname)
    n_cp = write_json(out / "expected-pg" / f"{stem}.json", expected)
    print(f"{dump}: {len(st.threads)} threads, {n_cp} checkpoints, rows {n_rows}, {size} bytes; "
          f"{aeskey.counts_text(census)}; {note}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures", help="output directory (default: fixtures)")
    ap.add_argument("--only", nargs="*", choices=sorted(STEMS), help="generate only these stems")
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"),
                    help="PostgreSQL server for the .sql dumps (default $TEST_POSTGRES_URI; none: SQLite only)")
    ap.add_argument("--skip-sqlite", action="store_true", help="write only the PostgreSQL dumps")
    ap.add_argument("--keep", action="store_true", help="keep the dfckgen_<stem> databases")
    args = ap.parse_args()
    out = Path(args.out)
    for d in ("sqlite", "expected", "postgres", "expected-pg"):
        (out / d).mkdir(parents=True, exist_ok=True)
    stems = [s for s in STEMS if not args.only or s in args.only]
    gens: list[Callable[[], None]] = []
    if not args.skip_sqlite:
        gens += [lambda s=s: gen_sqlite(s, out) for s in stems]
    if args.pg_url:
        gens += [lambda s=s: gen_postgres(s, out, args.pg_url, args.keep) for s in stems]
    elif args.skip_sqlite:
        ap.error("--skip-sqlite needs --pg-url (or TEST_POSTGRES_URI)")
    else:
        print("postgres: skipped (no --pg-url / TEST_POSTGRES_URI)", file=sys.stderr)
    for g in gens:
        g()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
