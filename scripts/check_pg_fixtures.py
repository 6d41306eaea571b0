#!/usr/bin/env python3
"""Sanity checks over the Postgres fixtures (fixtures/postgres/*.sql, fixtures/expected-pg).

    .venv/bin/python scripts/check_pg_fixtures.py --pg-url "$TEST_POSTGRES_URI" --out fixtures

For every dump: restore it into a fresh database "dfckchk_<stem>" with
`psql -v ON_ERROR_STOP=1 -f` (then drop it again), and check
* LangGraph dumps: checkpoint_migrations is exactly v=0..9 (future.sql: 0..10),
  checkpoints.type is NULL everywhere, no metadata has a "writes" key,
  checkpoint_writes.task_path exists, blob/write type tags are plain;
* delta dumps: inline `"messages": true` snapshot markers exist, each has a messages blob
  at its version whose bytes are msgpack ext 7, every ext-7 blob is pointed to by a
  marker, and non-snapshot delta checkpoints have a versioned messages channel with
  neither an inline value nor a blob;
* blobs are shared by version: some blob rows are referenced by several checkpoints;
* an independent store-only materializer (check_fixtures.py's, fed from the Postgres
  rows: inline JSONB channel_values + blobs by (channel, version), writes sorted by
  (task_path, task_id, idx)) reproduces expected-pg values["messages"] and "stored";
* shallow.sql has the ShallowPostgresSaver layout, notlg.sql has no LangGraph table.
Then it compares expected-pg/<stem>.json with the SQLite twin expected/<stem>.json
checkpoint by checkpoint (ids differ; position in the newest-first list is compared) and
prints the differences as NOTE lines (they are LangGraph behaviour, not failures).
Exit status 1 if any PROBLEM was printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ormsgpack  # noqa: E402
import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

import aeskey  # noqa: E402
import check_fixtures as cf  # noqa: E402
import fixturelib  # noqa: E402

MIGRATIONS = list(range(10))


def psql_bin() -> str:
    for cand in (os.environ.get("DFCK_PG_BIN", "/usr/lib/postgresql/15/bin") + "/psql", "/usr/bin/psql"):
        if os.access(cand, os.X_OK):
            return cand
    raise SystemExit("psql not found (set DFCK_PG_BIN)")


def restore(url: str, dbname: str, dump: Path) -> str:
    with psycopg.Connection.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(sql.Identifier(dbname)))
    conninfo = make_conninfo(url, dbname=dbname)
    r = subprocess.run(
        [psql_bin(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", conninfo, "-f", str(dump)],
        capture_output=True, text=True,
    )
    if r.returncode != 0:
        raise RuntimeError(f"restore of {dump} failed: {r.stderr.strip()}")
    return conninfo


def drop(url: str, dbname: str) -> None:
    with psycopg.Connection.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))


def ext_code(blob: bytes, typ: str = "msgpack"):
    _typ, blob = aeskey.open_typed(typ, blob)  # aes_* stems: decrypted with the fixture key
    v = ormsgpack.unpackb(bytes(blob), ext_hook=lambda c, d: ("ext", c, d), option=ormsgpack.OPT_NON_STR_KEYS)
    return v[1] if isinstance(v, tuple) and len(v) == 3 and v[0] == "ext" else None


class PgRows(cf.Store):
    """check_fixtures.Store (the independent materializer) fed from Postgres rows."""

    def __init__(self, conn: psycopg.Connection):  # noqa: D107 - no super().__init__ (SQLite)
        self.conn = conn
        self.ck = {}
        self.decoded = {}
        self.blobs = {}
        for tid, ns, ch, ver, typ, blob in conn.execute(
            "SELECT thread_id, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs"
        ):
            self.blobs[(tid, ns, ch, ver)] = aeskey.open_typed(typ, blob)
        for tid, ns, cid, parent, ck in conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint FROM checkpoints"
        ):
            self.ck[(tid, ns, cid)] = (parent, "msgpack", ck)

    def load(self, key):
        if key not in self.decoded:
            tid, ns, _cid = key
            parent, _typ, ck = self.ck[key]
            cv = {k: fixturelib.render_value(v) for k, v in (ck.get("channel_values") or {}).items()}
            for ch, ver in ck.get("channel_versions", {}).items():
                b = self.blobs.get((tid, ns, ch, str(ver)))
                if b is not None and b[0] != "empty":
                    cv[ch] = fixturelib.render_typed(b[0], bytes(b[1] or b""))
            self.decoded[key] = (parent, {"channel_values": cv, "channel_versions": ck.get("channel_versions", {})})
        return self.decoded[key]

    def writes(self, tid, ns, cid, ch):
        rows = self.conn.execute(
            "SELECT task_path, task_id, idx, type, blob FROM checkpoint_writes WHERE thread_id=%s AND checkpoint_ns=%s"
            " AND checkpoint_id=%s AND channel=%s",
            (tid, ns, cid, ch),
        ).fetchall()
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        out = []
        for _tp, task, _idx, typ, val in rows:
            typ, val = aeskey.open_typed(typ, val)
            if "+" in typ or typ == "pickle":
                raise LookupError(typ)
            out.append((task, fixturelib.render_typed(typ, bytes(val))))
        return out


def q1(conn, query, params=()):
    return conn.execute(query, params).fetchone()[0]


def tables(conn) -> set[str]:
    return {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


def check_langgraph(conn, stem: str, problems: list[str]) -> dict:
    p = lambda msg: problems.append(f"{stem}: {msg}")  # noqa: E731
    want = MIGRATIONS + [10] if stem == "future" else MIGRATIONS
    got = [r[0] for r in conn.execute("SELECT v FROM checkpoint_migrations ORDER BY v")]
    if got != want:
        p(f"checkpoint_migrations {got} != {want}")
    if q1(conn, "SELECT count(*) FROM checkpoints WHERE type IS NOT NULL"):
        p("checkpoints.type is not always NULL")
    if q1(conn, "SELECT count(*) FROM checkpoints WHERE metadata ? 'writes'"):
        p("metadata with a 'writes' key")
    if not q1(conn, "SELECT count(*) FROM information_schema.columns WHERE table_name='checkpoint_writes' AND column_name='task_path'"):
        p("checkpoint_writes.task_path missing")
    btypes = dict(conn.execute("SELECT type, count(*) FROM checkpoint_blobs GROUP BY type").fetchall())
    wtypes = dict(conn.execute("SELECT type, count(*) FROM checkpoint_writes GROUP BY type").fetchall())
    # aes_* stems: `<tag>+aes` rows, judged by their inner tag
    tag = aeskey.inner_type if aeskey.is_aes(stem) else (lambda t: t)
    if {tag(t) for t in btypes} - {"msgpack", "null", "bytes"}:
        p(f"blob types {btypes}")
    if {tag(t) for t in wtypes} - {"msgpack", "null", "bytes"}:
        p(f"write types {wtypes}")

    n_cp = q1(conn, "SELECT count(*) FROM checkpoints")
    delta_cps = q1(
        conn,
        "SELECT count(*) FROM checkpoints WHERE metadata->'counters_since_delta_snapshot' ? 'messages'"
        " OR metadata->>'deerflow_checkpoint_channel_mode' = 'delta'",
    )
    markers = conn.execute(
        "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.checkpoint->'channel_versions'->>'messages', b.blob, b.type"
        " FROM checkpoints c LEFT JOIN checkpoint_blobs b ON b.thread_id=c.thread_id AND b.checkpoint_ns=c.checkpoint_ns"
        " AND b.channel='messages' AND b.version=c.checkpoint->'channel_versions'->>'messages'"
        " WHERE c.checkpoint->'channel_values'->'messages' = 'true'::jsonb"
    ).fetchall()
    for tid, ns, cid, ver, blob, btype in markers:
        if blob is None:
            p(f"marker without blob: {tid} {ns!r} {cid} version {ver}")
        elif ext_code(blob, btype) != 7:
            p(f"marker blob is not ext 7: {tid} {cid}")
    ext7 = plain = 0
    marker_versions = {(t, n, v) for t, n, _c, v, _b, _t in markers}
    for tid, ns, ver, blob, btype in conn.execute(
        "SELECT thread_id, checkpoint_ns, version, blob, type FROM checkpoint_blobs WHERE channel='messages'"
    ):
        if ext_code(blob, btype) == 7:
            ext7 += 1
            if (tid, ns, ver) not in marker_versions:
                p(f"ext-7 blob without a marker checkpoint: {tid} {ns!r} {ver}")
        else:
            plain += 1
    inline_other = q1(
        conn,
        "SELECT count(*) FROM checkpoints WHERE checkpoint->'channel_values' ? 'messages'"
        " AND checkpoint->'channel_values'->'messages' <> 'true'::jsonb",
    )
    if inline_other:
        p(f"{inline_other} checkpoints with a non-marker inline messages value")
    # delta checkpoints whose messages version has no blob: no inline value, no sentinel
    no_blob = q1(
        conn,
        "SELECT count(*) FROM checkpoints c WHERE c.checkpoint->'channel_versions' ? 'messages'"
        " AND NOT c.checkpoint->'channel_values' ? 'messages' AND NOT EXISTS (SELECT 1 FROM checkpoint_blobs b"
        " WHERE b.thread_id=c.thread_id AND b.checkpoint_ns=c.checkpoint_ns AND b.channel='messages'"
        " AND b.version=c.checkpoint->'channel_versions'->>'messages')",
    )
    shared = conn.execute(
        "SELECT count(*), coalesce(max(n), 0) FROM (SELECT b.thread_id, b.channel, b.version, count(*) AS n"
        " FROM checkpoint_blobs b JOIN checkpoints c ON c.thread_id=b.thread_id AND c.checkpoint_ns=b.checkpoint_ns"
        " AND c.checkpoint->'channel_versions'->>b.channel = b.version GROUP BY 1, 2, 3, b.checkpoint_ns HAVING count(*) > 1) s"
    ).fetchone()
    orphan_blobs = q1(
        conn,
        "SELECT count(*) FROM checkpoint_blobs b WHERE NOT EXISTS (SELECT 1 FROM checkpoints c"
        " WHERE c.thread_id=b.thread_id AND c.checkpoint_ns=b.checkpoint_ns"
        " AND c.checkpoint->'channel_versions'->>b.channel = b.version)",
    )
    if orphan_blobs:
        p(f"{orphan_blobs} blobs referenced by no checkpoint")
    if delta_cps:
        if not markers or not ext7:
            p(f"delta store without snapshot markers/ext-7 blobs ({len(markers)}, {ext7})")
        if not no_blob and stem != "delta_k1":  # K=1: every delta checkpoint is a snapshot
            p("delta store without any blob-less messages version")
    else:
        if markers or ext7 or no_blob:
            p(f"full store with markers {len(markers)} / ext7 {ext7} / blob-less messages versions {no_blob}")
    if n_cp > 10 and not shared[0]:
        p("no blob shared by several checkpoints")
    # non-message channel values kept inline in the checkpoint JSONB (None/str/int/float/bool)
    inline = Counter()
    for (cv,) in conn.execute("SELECT checkpoint->'channel_values' FROM checkpoints"):
        for k, v in (cv or {}).items():
            if k != "messages" and not fixturelib.is_internal_channel(k):
                inline[type(v).__name__] += 1
    return {
        "checkpoints": n_cp, "inline_values": dict(inline), "delta_checkpoints": delta_cps, "true_markers": len(markers),
        "ext7_blobs": ext7, "plain_message_blobs": plain, "blobless_message_versions": no_blob,
        "shared_blobs": shared[0], "max_sharing": shared[1],
        "blobs": q1(conn, "SELECT count(*) FROM checkpoint_blobs"),
        "writes": q1(conn, "SELECT count(*) FROM checkpoint_writes"),
        "blob_types": btypes, "write_types": wtypes,
    }


def materialize_all(conn, stem: str, expected: dict, problems: list[str]) -> None:
    st = PgRows(conn)
    n_ok = 0
    for t in expected["threads"]:
        reducer = cf.df_reducer if t["reducer"] == "deerflow" else cf.lg_reducer
        for ns in t["namespaces"]:
            for c in ns["checkpoints"]:
                got = st.materialize(t["thread_id"], ns["checkpoint_ns"], c["checkpoint_id"], reducer)
                got_stored = st.materialize(
                    t["thread_id"], ns["checkpoint_ns"], c["checkpoint_id"], reducer, as_get_state=False
                )
                want = c["values"].get("messages")
                want_stored = c.get("stored", c["values"]).get("messages")
                if got != want or got_stored != want_stored:
                    problems.append(
                        f"{stem}: {t['thread_id']} {ns['checkpoint_ns']!r} {c['checkpoint_id']} step {c['step']}: "
                        f"materialized {[m.get('id') for m in got]} expected {[m.get('id') for m in (want or [])]}"
                    )
                else:
                    n_ok += 1
    print(f"{stem}: {n_ok} checkpoints materialized OK", file=sys.stderr)


COMPARED = ["source", "step", "mode", "messages_encoding", "writes", "values", "stored", "graph_defaults"]


def compare_with_sqlite(stem: str, pg: dict, lite: dict) -> list[str]:
    notes = []
    if [t["thread_id"] for t in pg["threads"]] != [t["thread_id"] for t in lite["threads"]]:
        return [f"{stem}: thread lists differ"]
    enc = Counter()
    for tp, tl in zip(pg["threads"], lite["threads"]):
        tid = tp["thread_id"]
        for k in ("mode", "reducer"):
            if tp[k] != tl[k]:
                notes.append(f"{stem}: {tid} thread {k}: pg {tp[k]} sqlite {tl[k]}")
        if len(tp["namespaces"]) != len(tl["namespaces"]):
            notes.append(f"{stem}: {tid} namespace count pg {len(tp['namespaces'])} sqlite {len(tl['namespaces'])}")
            continue
        for i, (np_, nl) in enumerate(zip(tp["namespaces"], tl["namespaces"])):
            cp, cl = np_["checkpoints"], nl["checkpoints"]
            if len(cp) != len(cl):
                notes.append(f"{stem}: {tid} ns#{i} checkpoint count pg {len(cp)} sqlite {len(cl)}")
                continue
            for j, (a, b) in enumerate(zip(cp, cl)):
                for k in COMPARED:
                    if a.get(k) == b.get(k):
                        continue
                    if k == "messages_encoding":
                        enc[(b[k], a[k])] += 1
                        continue
                    if isinstance(a.get(k), dict) and isinstance(b.get(k), dict):
                        keys = sorted(x for x in set(a[k]) | set(b[k]) if a[k].get(x) != b[k].get(x))
                        detail = "; ".join(
                            f"{x}: pg {json.dumps(a[k].get(x), ensure_ascii=False)[:80]} sqlite "
                            f"{json.dumps(b[k].get(x), ensure_ascii=False)[:80]}" for x in keys
                        )
                        notes.append(f"{stem}: {tid} ns#{i} #{j} step {a['step']} {k}: {detail}")
                    else:
                        notes.append(f"{stem}: {tid} ns#{i} #{j} step {a['step']} {k}: pg {a.get(k)} sqlite {b.get(k)}")
    for (lite_enc, pg_enc), n in sorted(enc.items()):
        notes.append(f"{stem}: messages_encoding sqlite {lite_enc} -> pg {pg_enc} at {n} checkpoint(s)"
                     " (blob shared by an unchanged version)")
    return notes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"))
    ap.add_argument("--out", default="fixtures")
    args = ap.parse_args()
    if not args.pg_url:
        ap.error("--pg-url (or TEST_POSTGRES_URI) is required")
    out = Path(args.out)
    problems: list[str] = []
    notes: list[str] = []
    for dump in sorted((out / "postgres").glob("*.sql")):
        stem = dump.stem
        dbname = f"dfckchk_{stem}"
        try:
            conninfo = restore(args.pg_url, dbname, dump)
        except RuntimeError as e:
            problems.append(str(e))
            continue
        try:
            with psycopg.Connection.connect(conninfo, autocommit=True) as conn:
                tabs = tables(conn)
                lg = {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"}
                if stem == "notlg":
                    if tabs & lg:
                        problems.append(f"notlg: LangGraph tables {tabs & lg}")
                    print(f"notlg: tables {sorted(tabs)}")
                    continue
                if stem == "shallow":
                    cols = {r[0] for r in conn.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_name='checkpoints'")}
                    bcols = {r[0] for r in conn.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_name='checkpoint_blobs'")}
                    if "checkpoint_id" in cols or "version" in bcols or tabs != lg:
                        problems.append(f"shallow: unexpected layout {cols} {bcols} {tabs}")
                    print(f"shallow: checkpoints columns {sorted(cols)}; blobs columns {sorted(bcols)}; "
                          f"{q1(conn, 'SELECT count(*) FROM checkpoints')} checkpoint row(s)")
                    continue
                if tabs != lg:
                    problems.append(f"{stem}: tables {tabs}")
                stats = check_langgraph(conn, stem, problems)
                print(stem, json.dumps(stats))
                exp_path = out / "expected-pg" / f"{stem}.json"
                if exp_path.exists():
                    expected = json.loads(exp_path.read_text(encoding="utf-8"))
                    materialize_all(conn, stem, expected, problems)
                    lite = out / "expected" / f"{stem}.json"
                    if lite.exists():
                        notes += compare_with_sqlite(stem, expected, json.loads(lite.read_text(encoding="utf-8")))
                elif stem != "future":
                    problems.append(f"{stem}: no {exp_path}")
        finally:
            drop(args.pg_url, dbname)
    for n in notes:
        print("NOTE", n)
    for p in problems:
        print("PROBLEM", p)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
