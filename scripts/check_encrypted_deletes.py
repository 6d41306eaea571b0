#!/usr/bin/env python3
"""Independent check of deleting threads of an AES-encrypted store, with the real LangGraph.

    .venv/bin/python scripts/check_encrypted_deletes.py [--dfck target/release/dfck] [--fixtures fixtures]
                                                        [--pg-url URL]

Store: the encrypted fixture aes_delta (fixtures/sqlite/aes_delta.db; with --pg-url /
TEST_POSTGRES_URI also the `dfck_aes_delta` database; threads: scripts/gen_aes_fixtures.py),
on fresh copies (temp files, databases `dfck_pycheck_*`). dfck gets `--aes-key-file
fixtures/aes.key` right after the binary unless the run is "without the key" (LANGGRAPH_AES_KEY
unset). The store holds LangGraph's tables only, so:

bare       `delete t-aes-enc --apply` exits 2 (dfck delete deletes the way DeerFlow does and
           needs DeerFlow's tables; it points to prune) and changes no row;
older      `prune t-aes-enc --older-than 1s --apply`, the way to delete a LangGraph thread:
           t-aes-enc pruned whole;
deerflow   the same store given DeerFlow's tables (fixtures/deerflow-schema/<kind>.sql at the
           alembic head of SOURCE) and, per thread, a threads_meta row, a finished `runs` row
           and a run_events row: `delete t-aes-enc --apply`, the same without the key (a whole
           thread's delete decodes no value), and `delete t-aes-switch t-aes-pending --erase
           --apply` (a thread encrypted later and one with pending writes).

Every run but `bare`: exit 0, each named thread `done`; afterwards every table equals the
untouched copy less the deleted threads' rows (byte for byte; PostgreSQL values in text form)
in the checkpoint tables (plus threads_meta for delete, every table with a thread_id for
--erase); no `+aes` row lost its encryption (aeskey.compare_census); then the real SqliteSaver /
PostgresSaver with the key's EncryptedSerializer read every checkpoint of every other thread as
on the untouched copy (values and next tasks), its latest state equal, and a branch, a resume of
each interrupt and one more turn give the same states on both copies (check_pruned.compare_store).

Exit 1 on any mismatch; the last line counts them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import aeskey  # noqa: E402
from check_pruned import (PgCopies, SqliteCopies, Tables, census, compare_store, raw_tables,  # noqa: E402
                          without)

STEM = "aes_delta"
CHECKPOINT_TABLES = {"checkpoints", "writes", "checkpoint_blobs", "checkpoint_writes"}
# (name, DeerFlow tables added, dfck arguments, with the key, threads deleted, tables they leave)
RUNS: list[tuple[str, bool, list[str], bool, set[str], set[str] | None]] = [
    ("older", False, ["prune", "t-aes-enc", "--older-than", "1s"], True, {"t-aes-enc"}, CHECKPOINT_TABLES),
    ("deerflow", True, ["delete", "t-aes-enc"], True, {"t-aes-enc"}, CHECKPOINT_TABLES | {"threads_meta"}),
    ("deerflow", True, ["delete", "t-aes-enc"], False, {"t-aes-enc"}, CHECKPOINT_TABLES | {"threads_meta"}),
    ("deerflow", True, ["delete", "t-aes-switch", "t-aes-pending", "--erase"], True,
     {"t-aes-switch", "t-aes-pending"}, None),
]


def add_deerflow(kind: str, target: str, fixtures: Path) -> None:
    """DeerFlow's schema, its alembic version row, and per thread a threads_meta, a finished
    `runs` and a run_events row (DeerFlow with encrypted checkpoints)."""
    schema = fixtures / "deerflow-schema"
    head = re.search(r"^alembic_head:\s*(\S+)", (schema / "SOURCE").read_text(encoding="utf-8"), re.M).group(1)
    ddl = (schema / f"{kind}.sql").read_text(encoding="utf-8")
    ts = "2026-01-01 00:00:00.000000" if kind == "sqlite" else "2026-01-01 00:00:00+00"
    rows = {
        "alembic_version": ["version_num"],
        "threads_meta": ["thread_id", "assistant_id", "user_id", "display_name", "status", "metadata_json",
                         "created_at", "updated_at"],
        "runs": ["run_id", "thread_id", "assistant_id", "user_id", "status", "operation_kind", "multitask_strategy",
                 "metadata_json", "kwargs_json", "message_count", "total_input_tokens", "total_output_tokens",
                 "total_tokens", "llm_call_count", "lead_agent_tokens", "subagent_tokens", "middleware_tokens",
                 "created_at", "updated_at"],
        "run_events": ["id", "thread_id", "run_id", "user_id", "event_type", "category", "content",
                       "event_metadata", "seq", "created_at"],
    }

    def inserts(threads: list[str]) -> list[tuple[str, tuple]]:
        out = [("alembic_version", (head,))]
        for i, t in enumerate(threads, 1):
            out += [("threads_meta", (t, "lead_agent", "u-1", f"title of {t}", "idle", "{}", ts, ts)),
                    ("runs", (f"run-{t}", t, "lead_agent", "u-1", "success", "run", "reject", "{}", "{}", 2,
                              *(0,) * 7, ts, ts)),
                    ("run_events", (i, t, f"run-{t}", "u-1", "message", "message", f"event of {t}", "{}", 1, ts))]
        return out

    def sql(table: str, ph: str, prefix: str) -> str:
        return f"INSERT INTO {prefix}{table} ({', '.join(rows[table])}) VALUES ({', '.join([ph] * len(rows[table]))})"

    if kind == "sqlite":
        conn = sqlite3.connect(target)
        conn.executescript(ddl)
        threads = [r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")]
        for table, values in inserts(threads):
            conn.execute(sql(table, "?", ""), values)
        conn.commit()
        conn.close()
        return
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        threads = [r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM public.checkpoints ORDER BY 1")]
        conn.execute("\n".join(line for line in ddl.splitlines() if not line.startswith("\\")))
        for table, values in inserts(threads):
            conn.execute(sql(table, "%s", "public."), values)


def diff_tables(label: str, got: Tables, exp: Tables, errs: list[str]) -> int:
    """Every table's rows equal (as sorted lists); returns the number of rows compared."""
    for t in sorted(set(got) | set(exp)):
        if got.get(t) != exp.get(t):
            g, e = got.get(t, ([], []))[1], exp.get(t, ([], []))[1]
            errs.append(f"{label}: table {t}: {len(g)} rows instead of {len(e)}, "
                        f"{len(set(g) - set(e))} unexpected, {len(set(e) - set(g))} missing")
    return sum(len(rows) for _, rows in exp.values())


def run(dfck: str, target: str, args: list[str], with_key: bool) -> subprocess.CompletedProcess:
    key = aeskey.dfck_args(STEM) if with_key else []
    return subprocess.run([dfck, *key, "--db", target, *args, "--apply", "--format", "json"], capture_output=True,
                          text=True, env=None if with_key else aeskey.env_without_key())


def check_bare(dfck: str, be: Any, errs: list[str]) -> None:
    label = f"{be.kind} bare [delete t-aes-enc]"
    work = be.copy(STEM, "encdel_bare")
    before = raw_tables(work)
    p = run(dfck, work, ["delete", "t-aes-enc"], True)
    if p.returncode != 2 or "prune --older-than" not in p.stderr:
        errs.append(f"{label}: exited {p.returncode} (expected 2, pointing to prune --older-than): "
                    f"{p.stderr.strip()[:300]} {p.stdout.strip()[:200]}")
    n = diff_tables(label, raw_tables(work), before, errs)
    print(f"{label}: exit {p.returncode}, pointing to prune --older-than; {n} rows unchanged")


def check_run(dfck: str, be: Any, fixtures: Path, k: int, spec: tuple, errs: list[str]) -> None:
    name, deerflow, args, with_key, gone, tables = spec
    label = f"{be.kind} {name} [{' '.join(args)}]" + ("" if with_key else " without the key")
    work, untouched = be.copy(STEM, f"encdel_work{k}"), be.copy(STEM, f"encdel_untouched{k}")
    if deerflow:
        for target in (work, untouched):
            add_deerflow(be.kind, target, fixtures)
    before, cb = raw_tables(untouched), census(untouched)
    p = run(dfck, work, args, with_key)
    try:
        doc = json.loads(p.stdout)
        status = {t["thread_id"]: t["status"] for t in doc["threads"]}
    except (json.JSONDecodeError, KeyError, TypeError):
        status = {}
    if p.returncode != 0 or status != {t: "done" for t in gone}:
        errs.append(f"{label}: exited {p.returncode}, threads {status}: {p.stderr.strip()[:300]}")
    after = raw_tables(work)
    n = diff_tables(label, after, without(before, gone, tables), errs)
    prot, problems = aeskey.compare_census(cb, census(work), label)
    errs += problems
    cp = compare_store(label, STEM, lambda t: be.open_saver(STEM, t), work, untouched, errs)
    deleted = sum(len(rows) for _, rows in before.values()) - sum(len(rows) for _, rows in after.values())
    print(f"{label}: exit {p.returncode}, {sorted(gone)} done; {deleted} rows deleted, {n} rows as expected; {prot}; "
          f"{cp} checkpoints of the other threads read by {be.reader} with the key, equal, continued equally")


def check_backend(dfck: str, be: Any, fixtures: Path, errs: list[str]) -> int:
    try:
        check_bare(dfck, be, errs)
    finally:
        be.cleanup()
    for k, spec in enumerate(RUNS):
        try:
            check_run(dfck, be, fixtures, k, spec, errs)
        except Exception as e:  # noqa: BLE001 - report and go on with the next run
            errs.append(f"{be.kind} {spec[0]} {spec[2]}: {type(e).__name__}: {str(e)[:300]}")
        finally:
            be.cleanup()
    return 1 + len(RUNS)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfck", default=str(HERE.parent / "target" / "release" / "dfck"))
    ap.add_argument("--fixtures", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"))
    args = ap.parse_args()
    fixtures, errs, runs = Path(args.fixtures), [], 0
    with tempfile.TemporaryDirectory(prefix="dfck-check-encdel-") as t:
        dfck = str(shutil.copy2(args.dfck, Path(t) / "dfck"))  # a concurrent `cargo build` may replace it
        runs += check_backend(dfck, SqliteCopies(fixtures, Path(t)), fixtures, errs)
        if args.pg_url:
            runs += check_backend(dfck, PgCopies(args.pg_url), fixtures, errs)
        else:
            print("check_encrypted_deletes: no --pg-url / TEST_POSTGRES_URI: PostgreSQL skipped", file=sys.stderr)
    sys.stdout.flush()
    for e in errs:
        print(f"MISMATCH {e}", file=sys.stderr)
    sys.stderr.flush()
    print(f"check_encrypted_deletes: {runs} runs checked, {len(errs)} mismatch(es)")
    return 1 if errs else 0


if __name__ == "__main__":
    raise SystemExit(main())
