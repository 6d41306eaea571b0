#!/usr/bin/env python3
"""Independent check of `dfck migrate delta-to-full --all --apply` with the real LangGraph.

    .venv/bin/python scripts/check_migrated.py [--dfck target/release/dfck] [--fixtures fixtures]

For each delta-bearing SQLite fixture (delta_k1, delta_k3, delta_k10, mixed, deerflow), and
with --pg-url / TEST_POSTGRES_URI also for a copy of each Postgres fixture database
(dfck_<stem> on scripts/pg-test-server.sh's server, read back with PostgresSaver):

1. copy fixtures/sqlite/<stem>.db to a temp dir and run
   `dfck --db COPY migrate delta-to-full --all --apply --format json`. It may refuse only
   threads where the real library itself leaks writes across a fork (the threads `dfck
   verify` reports as `delta.fork_contaminated`, exit 1); a second run with
   `--accept-delta-view` converts those to exactly what delta mode shows (must exit 0);
2. open the COPY with the real SqliteSaver and, for every thread / namespace / checkpoint of
   fixtures/expected/<stem>.json, read
   `graph.get_state({"configurable": {thread_id, checkpoint_ns, checkpoint_id}}).values`
   through the same graph the generator used for that thread but with `messages` in FULL
   mode (`messages_annotation("full")` = `Annotated[list, add_messages]`, no DeltaChannel),
   render it with fixturelib and compare it with the expected (delta-mode) `values`
   (keys in `graph_defaults` may be absent; set/frozenset members compare as multisets).
   Each checkpoint is read twice: with LangGraph as shipped ("lenient": 1.2.22's full-mode
   channel still unwraps _DeltaSnapshot and replays ancestors for a missing value, so this
   pass alone would also pass on an unconverted store) and "strict", with that fallback
   disabled for non-DeltaChannel channels, so values come only from the converted rows;
3. check the raw rows: no checkpoint metadata carries `deerflow_checkpoint_channel_mode`
   or `counters_since_delta_snapshot.messages`, no checkpoint blob holds an ext-7
   `_DeltaSnapshot` under channel_values.messages, and the `writes` table is row-for-row
   identical to the original fixture's.

4. continue every converted thread with the real library: one more turn through the same
   full-mode graph (`Command(resume)` on a head waiting on an interrupt, else a new human
   message); the new head must extend the converted one, and `dfck verify` must report no
   more errors than before.

Encrypted stems (`aes_*`, scripts/gen_aes_fixtures.py): every dfck run gets
`--aes-key-file fixtures/aes.key` (right after the binary) and the savers get
`serde=EncryptedSerializer.from_pycryptodome_aes(key=…)` (scripts/aeskey.py), so encrypted
checkpoints are read and continued (new rows encrypted). Before the keyed run, the same command
on another copy WITHOUT the key (LANGGRAPH_AES_KEY unset) must refuse every encrypted thread (exit 1, the refusal
naming LANGGRAPH_AES_KEY) and change none of their rows (a hash of every row of the threads
holding a `+aes` value). After the keyed run, row protection: SQLite `checkpoints.type` /
`writes.type`, PostgreSQL `checkpoint_blobs.type` (without `empty`) / `checkpoint_writes.type` —
a `+aes` row stays `+aes` with the same inner tag, a plaintext row stays plaintext, a new row in
a wholly encrypted thread is `+aes`; the `+aes` / plain counts per table are printed. Raw-row
checks decrypt `+aes` rows with the key (on PostgreSQL also the messages blobs, in Python).

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
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import langgraph.pregel._checkpoint as lg_checkpoint  # noqa: E402
from langgraph.channels import DeltaChannel  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

import aeskey  # noqa: E402
import fixturelib  # noqa: E402
from gen_fixtures import build_deerflow_graph, build_subgraph_pair  # noqa: E402
from graphs import HumanMessage, build_conv_graph, messages_annotation  # noqa: E402
from langgraph.types import Command  # noqa: E402

STEMS = ["delta_k1", "delta_k3", "delta_k10", "forks_delta_k1", "forks_delta_k4", "mixed", "deerflow", "aes_delta"]
MARKER_KEY = "deerflow_checkpoint_channel_mode"

# Which graph builder the generator registered for each thread (gen_fixtures.py:
# gen_twin / gen_deerflow / gen_mixed / gen_subgraph). Here always with FULL messages.
CONV, DEERFLOW, SUBGRAPH = "conv", "deerflow", "subgraph"
THREAD_GRAPH = {
    "t-deerflow": DEERFLOW,
    "t-deerflow-full": DEERFLOW,
    "t-mixed": DEERFLOW,
    "t-mixed-lg": CONV,
    "t-subgraph": SUBGRAPH,
    "t-subgraph-delta": SUBGRAPH,
    "t-aes-deerflow": DEERFLOW,  # gen_aes_fixtures.py
}


def full_graphs(kind: str, saver: Any) -> dict:
    """{"graph": root graph, "subgraphs": {node: graph}} with messages in full mode."""
    ann = messages_annotation("full")
    if kind == CONV:
        return {"graph": build_conv_graph(ann, saver), "subgraphs": {}}
    if kind == DEERFLOW:
        return {"graph": build_deerflow_graph(ann, saver), "subgraphs": {}}
    if kind == SUBGRAPH:
        parent, child = build_subgraph_pair(ann, saver)
        return {"graph": parent, "subgraphs": {"call_child": child}}
    raise ValueError(kind)


def graph_for_ns(entry: dict, ns: str) -> Any:  # same rule as gen_fixtures.graph_for_ns
    if ns == "":
        return entry["graph"]
    return entry["subgraphs"][ns.split("|")[-1].split(":")[0]]


# LangGraph 1.2.22's full-mode channel (BinaryOperatorAggregate) is lenient: it unwraps a
# _DeltaSnapshot and, when a versioned value is missing from channel_values, replays the
# ancestors' writes (pregel/_checkpoint.py::_delta_channels_to_replay). So a full-mode
# get_state sees the delta view even on an UNCONVERTED store. The strict pass disables that
# fallback for non-DeltaChannel specs: values come only from the checkpoint's own stored
# channel_values plus its pending writes, the contract of a plain full-mode reader.
_LENIENT_REPLAY = lg_checkpoint._delta_channels_to_replay


def _strict_replay(specs, checkpoint):
    return [k for k in _LENIENT_REPLAY(specs, checkpoint) if isinstance(specs[k], DeltaChannel)]


def set_strict(strict: bool) -> None:
    lg_checkpoint._delta_channels_to_replay = _strict_replay if strict else _LENIENT_REPLAY


# ---------------------------------------------------------------------------------------
# comparison (mirrors tests/it/common/compare.rs)
# ---------------------------------------------------------------------------------------


def normalize(j: Any) -> Any:
    if isinstance(j, list):
        return [normalize(x) for x in j]
    if isinstance(j, dict):
        is_set = j.get("$class") in ("builtins.set", "builtins.frozenset")
        out = {}
        for k, v in j.items():
            v = normalize(v)
            if is_set and k == "$arg" and isinstance(v, list):
                v = sorted(v, key=lambda x: json.dumps(x, sort_keys=True, ensure_ascii=False))
            out[k] = v
        return out
    return j


def short(j: Any, n: int = 600) -> str:
    s = json.dumps(j, ensure_ascii=False)
    return s if len(s) <= n else s[:n] + "…"


def compare_values(got: dict, exp: dict, defaults: set) -> str | None:
    for k, ev in exp.items():
        if k in got:
            if normalize(got[k]) != normalize(ev):
                return f"channel {k!r}: got {short(got[k])} expected {short(ev)}"
        elif k not in defaults:
            return f"channel {k!r} missing (expected {short(ev)})"
    for k in got:
        if k not in exp:
            return f"unexpected channel {k!r}: {short(got[k])}"
    return None


# ---------------------------------------------------------------------------------------
# raw-row checks
# ---------------------------------------------------------------------------------------


def writes_rows(path: Path) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(writes)")]
        order = ", ".join(cols)
        return [tuple(r) for r in conn.execute(f"SELECT {order} FROM writes ORDER BY {order}")]
    finally:
        conn.close()


def delta_ns_of(conn: sqlite3.Connection) -> set[tuple[str, str]]:
    """(thread, ns) pairs whose checkpoints still carry a delta signal."""
    out = set()
    for tid, ns, md_raw in conn.execute("SELECT thread_id, checkpoint_ns, metadata FROM checkpoints"):
        md = json.loads(bytes(md_raw).decode("utf-8")) if md_raw else {}
        ctr = md.get("counters_since_delta_snapshot")
        if md.get(MARKER_KEY) is not None or (isinstance(ctr, dict) and "messages" in ctr):
            out.add((tid, ns))
    return out


def raw_row_problems(conn: sqlite3.Connection, skip_ns: set[tuple[str, str]]) -> list[str]:
    probs = []
    for tid, ns, cid, typ, blob, md_raw in conn.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, metadata FROM checkpoints"
        " ORDER BY thread_id, checkpoint_ns, checkpoint_id"
    ):
        where = f"{tid} ns={ns!r} {cid}"
        if (tid, ns) in skip_ns:
            continue
        md = json.loads(bytes(md_raw).decode("utf-8")) if md_raw else {}
        if MARKER_KEY in md:
            probs.append(f"{where}: metadata still has {MARKER_KEY}={md[MARKER_KEY]!r}")
        ctr = md.get("counters_since_delta_snapshot")
        if isinstance(ctr, dict) and "messages" in ctr:
            probs.append(f"{where}: metadata still has counters_since_delta_snapshot.messages={ctr['messages']!r}")
        typ, blob = aeskey.open_typed(typ, blob)  # aes_* stems: decrypted with the fixture key
        if typ != "msgpack":
            continue
        cp = fixturelib._unpack(bytes(blob))
        cv = cp.get("channel_values", {}) if isinstance(cp, dict) else {}
        m = cv.get("messages") if isinstance(cv, dict) else None
        if isinstance(m, fixturelib._Ext) and m.code == 7:
            probs.append(f"{where}: checkpoint blob holds an ext-7 _DeltaSnapshot under channel_values.messages")
        versions = cp.get("channel_versions", {}) if isinstance(cp, dict) else {}
        if "messages" in versions and not (isinstance(cv, dict) and "messages" in cv):
            probs.append(f"{where}: messages is versioned but not stored (a full-mode checkpoint stores it)")
    # inline blobs are not used by SqliteSaver, but be thorough about the schema we read
    return probs


# ---------------------------------------------------------------------------------------


def read_all(stem: str, saver: Any, expected: dict, skip_ns: set, errs: list[str]) -> int:
    """Reads every expected checkpoint through full-mode graphs (lenient and strict) and
    compares with the expected delta-mode values; returns the checkpoints read."""
    error_threads = {e["thread_id"] for e in expected.get("errors", [])}
    graphs: dict[str, dict] = {}
    n = 0
    for th in expected["threads"]:
        tid = th["thread_id"]
        if tid in error_threads:
            continue
        kind = THREAD_GRAPH.get(tid, CONV)
        entry = graphs.setdefault(kind, full_graphs(kind, saver))
        for nsd in th["namespaces"]:
            ns = nsd["checkpoint_ns"]
            if (tid, ns) in skip_ns:
                continue
            graph = graph_for_ns(entry, ns)
            for cp, strict in [(cp, st) for cp in nsd["checkpoints"] for st in (False, True)]:
                set_strict(strict)
                how = "strict" if strict else "lenient"
                cid = cp["checkpoint_id"]
                cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
                try:
                    snap = graph.get_state(cfg)
                    got_id = snap.config["configurable"]["checkpoint_id"]
                    if got_id != cid:
                        errs.append(f"{stem} {tid} ns={ns!r} {cid} [{how}]: get_state returned checkpoint {got_id}")
                        continue
                    got = fixturelib.render_values(dict(snap.values))
                except Exception as e:  # noqa: BLE001
                    errs.append(f"{stem} {tid} ns={ns!r} {cid} [{how}]: get_state raised {type(e).__name__}: {e}")
                    continue
                n += strict  # a checkpoint counts once, when both passes have read it
                d = compare_values(got, cp["values"], set(cp.get("graph_defaults", [])))
                if d:
                    errs.append(f"{stem} {tid} ns={ns!r} {cid} (step {cp.get('step')}) [{how}]: {d}")
    set_strict(False)
    return n



def continue_threads(stem: str, saver: Any, expected: dict, skip_ns: set, errs: list[str]) -> int:
    """The real library CONTINUES every converted thread: one more turn through the same
    full-mode graph (a `Command(resume)` where the head waits on an interrupt, else a new
    human message). The new head must hold the old head's messages, in order, followed by the
    new turn's. Returns the threads continued."""
    error_threads = {e["thread_id"] for e in expected.get("errors", [])}
    graphs: dict[str, dict] = {}
    n = 0
    for th in expected["threads"]:
        tid = th["thread_id"]
        if tid in error_threads or (tid, "") in skip_ns:
            continue
        kind = THREAD_GRAPH.get(tid, CONV)
        graph = graphs.setdefault(kind, full_graphs(kind, saver))["graph"]
        cfg = {"configurable": {"thread_id": tid}}
        try:
            before = graph.get_state(cfg)
            old = [m.id for m in before.values.get("messages", [])]
            if before.interrupts:
                graph.invoke(Command(resume="approved after migrate"), cfg)
                how = "resume"
            else:
                msg = HumanMessage(content="continue after migrate", id=f"h-continue-{tid}")
                graph.invoke({"messages": [msg]}, cfg)
                how = "input"
            after = graph.get_state(cfg)
            new = [m.id for m in after.values.get("messages", [])]
        except Exception as e:  # noqa: BLE001
            errs.append(f"{stem} {tid}: continuing the converted thread raised {type(e).__name__}: {e}")
            continue
        if new[: len(old)] != old or len(new) <= len(old):
            errs.append(f"{stem} {tid} [{how}]: the continued head does not extend the converted one "
                        f"({len(old)} → {len(new)} messages)")
            continue
        if how == "input" and f"h-continue-{tid}" not in new[len(old):]:
            errs.append(f"{stem} {tid}: the new human message is missing from the continued head")
            continue
        n += 1
    return n


def verify_errors(dfck: str, target: str, key: list[str] = ()) -> int:
    """Error findings `dfck verify` reports on a store (`key`: aeskey.dfck_args(stem))."""
    proc = subprocess.run([dfck, *key, "--db", target, "verify", "--format", "json"], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        return -1
    return sum(1 for f in json.loads(proc.stdout)["findings"] if f["severity"] == "error")

def contaminated_threads(dfck: str, target: str, key: list[str] = ()) -> set[str]:
    proc = subprocess.run([dfck, *key, "--db", target, "verify", "--format", "json"], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        return set()
    return {f["thread_id"] for f in json.loads(proc.stdout)["findings"] if f["code"] == "delta.fork_contaminated"}


MIGRATE = ["migrate", "delta-to-full", "--all", "--apply", "--format", "json"]


def migrate_all(dfck: str, target: str, label: str, key: list[str] = ()) -> tuple[Optional[dict], list[str], str]:
    """Runs migrate --all --apply: refusals are allowed only for the threads verify calls
    contaminated, and a rerun with --accept-delta-view must convert those and refuse none."""
    contaminated = contaminated_threads(dfck, target, key)
    errs: list[str] = []
    summary = ""
    for extra in ([], ["--accept-delta-view"]):
        proc = subprocess.run(
            [dfck, *key, "--db", target, *MIGRATE, *extra],
            capture_output=True,
            text=True,
        )
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError:
            return None, [f"{label}: dfck exited {proc.returncode} with no JSON: {proc.stderr.strip()[:500]}"], "dfck failed"
        refused = {t["thread_id"] for t in report.get("threads", []) if t.get("status") == "refused"}
        allowed = contaminated if not extra else set()
        if refused - allowed:
            errs.append(f"{label}: dfck refused {short(sorted(refused - allowed))}")
        if proc.returncode != (1 if refused else 0):
            errs.append(f"{label}: dfck exited {proc.returncode} with {len(refused)} refusal(s)")
        summary += (f"{' then with --accept-delta-view: ' if extra else ''}converted={report.get('converted')} "
                    f"refused={report.get('refused')} skipped={report.get('skipped')}")
        if not refused:
            break
    return report, errs, summary


def check_stem(stem: str, dfck: str, fixtures: Path, tmp: Path) -> tuple[int, list[str], str]:
    src = fixtures / "sqlite" / f"{stem}.db"
    expected = json.loads((fixtures / "expected" / f"{stem}.json").read_text(encoding="utf-8"))
    db = tmp / f"{stem}.db"
    shutil.copyfile(src, db)
    key, errs = aeskey.dfck_args(stem), []
    if key:  # without the key (on another copy): encrypted threads refused, untouched
        errs += aeskey.no_key_sqlite(dfck, src, tmp, MIGRATE, stem)
    report, more, summary = migrate_all(dfck, str(db), stem, key)
    errs += more
    if report is None:
        return 0, errs, summary
    if key:
        prot, problems = aeskey.compare_census(aeskey.sqlite_census(src), aeskey.sqlite_census(db), stem)
        errs += problems
        summary += f"; {prot}"

    # writes table must be untouched
    if writes_rows(src) != writes_rows(db):
        a, b = writes_rows(src), writes_rows(db)
        errs.append(f"{stem}: writes table differs ({len(a)} rows before, {len(b)} after; "
                    f"{len(set(a) ^ set(b))} rows in the symmetric difference)")

    conn = sqlite3.connect(str(db), check_same_thread=False)
    try:
        still_delta = delta_ns_of(conn)
        # dfck refuses delta subgraph namespaces: those may stay delta; root ns may not
        skip_ns = {(t, ns) for (t, ns) in still_delta if ns != ""}
        errs += [f"{stem}: {p}" for p in raw_row_problems(conn, skip_ns)]

        saver = SqliteSaver(conn, **aeskey.saver_kwargs(stem))
        n = read_all(stem, saver, expected, skip_ns, errs)
        errors_before = verify_errors(dfck, str(db), key)
        continued = continue_threads(stem, saver, expected, skip_ns, errs)
        conn.commit()
        errors_after = verify_errors(dfck, str(db), key)
        if errors_after != errors_before:
            errs.append(f"{stem}: dfck verify errors {errors_before} → {errors_after} after continuing")
        summary += f"; {continued} thread(s) continued one more turn"
    finally:
        set_strict(False)
        conn.close()
    return n, errs, summary



# ---------------------------------------------------------------------------------------
# PostgreSQL: the same check on a copy of each fixture database the test server loaded
# (scripts/pg-test-server.sh: dfck_<stem>), converted by dfck and read by PostgresSaver
# ---------------------------------------------------------------------------------------

PG_DELTA_SQL = """
SELECT (SELECT count(*) FROM checkpoints WHERE metadata ? 'deerflow_checkpoint_channel_mode'
          OR metadata -> 'counters_since_delta_snapshot' ? 'messages'
          OR checkpoint -> 'channel_values' -> 'messages' = 'true'::jsonb),
       (SELECT count(*) FROM checkpoint_blobs WHERE channel = 'messages' AND type = 'msgpack'
          AND ((get_byte(blob, 0) = 199 AND get_byte(blob, 2) = 7)
            OR (get_byte(blob, 0) = 200 AND get_byte(blob, 3) = 7)
            OR (get_byte(blob, 0) = 201 AND get_byte(blob, 5) = 7)))
"""

PG_WRITES_SQL = "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob FROM checkpoint_writes ORDER BY 1, 2, 3, 4, 6"


def pg_encrypted_snapshots(conn: Any) -> int:
    """`+aes` messages blobs holding an ext-7 _DeltaSnapshot once decrypted (PG_DELTA_SQL
    cannot see into them)."""
    n = 0
    for typ, blob in conn.execute(
        "SELECT type, blob FROM checkpoint_blobs WHERE channel = 'messages' AND type LIKE '%+aes'"
    ).fetchall():
        typ, plain = aeskey.open_typed(typ, blob)
        v = fixturelib._unpack(plain) if typ == "msgpack" else None
        n += isinstance(v, fixturelib._Ext) and v.code == 7
    return n


def with_db(url: str, db: str) -> str:
    base, _, query = url.partition("?")
    head = base[: base.index("/", base.index("://") + 3)] if "/" in base[base.index("://") + 3:] else base
    return f"{head}/{db}" + (f"?{query}" if query else "")


def check_stem_pg(stem: str, dfck: str, fixtures: Path, server: str) -> tuple[int, list[str], str]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    expected = json.loads((fixtures / "expected-pg" / f"{stem}.json").read_text(encoding="utf-8"))
    template, copy = f"dfck_{stem}", f"dfck_pycheck_{stem}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
        admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{template}"')
    url = with_db(server, copy)
    key, errs = aeskey.dfck_args(stem), []
    if key:  # without the key (on another copy): encrypted threads refused, untouched
        errs += aeskey.no_key_pg(dfck, server, template, MIGRATE, f"pg {stem}", with_db)
    report, more, summary = migrate_all(dfck, url, f"pg {stem}", key)
    errs += more
    if report is None:
        return 0, errs, summary
    with psycopg.connect(with_db(server, template)) as a, psycopg.connect(url) as b:
        if a.execute(PG_WRITES_SQL).fetchall() != b.execute(PG_WRITES_SQL).fetchall():
            errs.append(f"pg {stem}: checkpoint_writes differs from the original")
        if key:
            prot, problems = aeskey.compare_census(aeskey.pg_census(a), aeskey.pg_census(b), f"pg {stem}")
            errs += problems
            summary += f"; {prot}"
        marked, snaps = b.execute(PG_DELTA_SQL).fetchone()
        snaps += pg_encrypted_snapshots(b) if key else 0
        if marked or snaps:
            errs.append(f"pg {stem}: {marked} checkpoint(s) with delta metadata/markers, {snaps} snapshot blob(s) remain")
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        from psycopg.rows import dict_row
        conn.row_factory = dict_row
        saver = PostgresSaver(conn, **aeskey.saver_kwargs(stem))
        n = read_all(f"pg {stem}", saver, expected, set(), errs)
        errors_before = verify_errors(dfck, url, key)
        continued = continue_threads(f"pg {stem}", saver, expected, set(), errs)
        errors_after = verify_errors(dfck, url, key)
        if errors_after != errors_before:
            errs.append(f"pg {stem}: dfck verify errors {errors_before} → {errors_after} after continuing")
        summary += f"; {continued} thread(s) continued one more turn"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}"')
    return n, errs, summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--stems", nargs="*", default=STEMS)
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"),
                    help="test server (scripts/pg-test-server.sh) holding dfck_<stem> databases; default TEST_POSTGRES_URI")
    args = ap.parse_args()
    fixtures = Path(args.fixtures)
    total, mismatches = 0, []
    with tempfile.TemporaryDirectory(prefix="dfck-check-migrated-") as t:
        # snapshot the binary: a concurrent `cargo build` may replace target/release/dfck
        dfck = str(Path(t) / "dfck")
        shutil.copy2(args.dfck, dfck)
        for stem in args.stems:
            n, errs, summary = check_stem(stem, dfck, fixtures, Path(t))
            total += n
            mismatches += errs
            print(f"{stem}: dfck {summary}; {n} checkpoints read through a full-mode graph, "
                  f"{len(errs)} mismatch(es)")
        for stem in args.stems if args.pg_url else []:
            n, errs, summary = check_stem_pg(stem, dfck, fixtures, args.pg_url)
            total += n
            mismatches += errs
            print(f"postgres {stem}: dfck {summary}; {n} checkpoints read through a full-mode graph, "
                  f"{len(errs)} mismatch(es)")
        if not args.pg_url:
            print("postgres: skipped (no --pg-url / TEST_POSTGRES_URI)")
    for e in mismatches[:8]:
        print("  MISMATCH " + e)
    if len(mismatches) > 8:
        print(f"  … and {len(mismatches) - 8} more")
    print(f"{total} checkpoints read through a full-mode graph equal the delta view, {len(mismatches)} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
