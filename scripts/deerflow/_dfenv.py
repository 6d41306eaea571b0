"""Shared helpers for the DeerFlow generator scripts in scripts/deerflow/.

Nothing here is DeerFlow code: it only puts an extracted DeerFlow checkout on
``sys.path`` (so DeerFlow's own modules can be imported at generation time), and
holds the small pieces both generators need (pg_dump post-processing identical to
scripts/gen_pg_fixtures.py, URL helpers, deterministic randomness).

The DeerFlow checkout is expected at the pinned commit (see PINNED_COMMIT):

    git -C /work/.mirror/bytedance+deer-flow/repo archive PINNED_COMMIT | tar -x -C /tmp/deerflow-src
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

PINNED_COMMIT = "f1f4af99bbf1cffb83a80744bf6e4a44ee8f24be"

REPO_ROOT = Path(__file__).resolve().parents[2]

# Lines that tie a pg_dump output to one pg_dump build: the version comments and the
# per-dump random \restrict / \unrestrict keys (pg_dump >= 15.14). Same rule as
# scripts/gen_pg_fixtures.py (DROP_LINE / dump_db).
DROP_LINE = re.compile(r"^(\\restrict |\\unrestrict |-- Dumped from database version|-- Dumped by pg_dump version)")


def pin_hash_seed() -> None:
    """Re-exec with PYTHONHASHSEED=0 unless already set, so that everything that
    iterates str-keyed sets/frozensets (e.g. bootstrap's _BASELINE_TABLE_NAMES) runs
    in the same order on every regeneration. (It does NOT fix the order in which
    create_all emits a table's CREATE INDEX statements: Table.indexes is a set of
    Index objects hashed by id(); see sort_sqlite_index_runs.)"""
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def add_deerflow_to_path(src: str | os.PathLike[str]) -> Path:
    """Make ``import deerflow`` / ``import app`` resolve to the extracted checkout."""
    root = Path(src).resolve()
    backend = root / "backend"
    harness = backend / "packages" / "harness"
    ext_api = backend / "packages" / "extension-api"
    for p in (harness / "deerflow", ext_api / "deerflow_extension_api", backend / "app"):
        if not p.is_dir():
            raise SystemExit(f"{src}: not a DeerFlow checkout (missing {p})")
    for p in (backend, ext_api, harness):
        s = str(p)
        if s in sys.path:
            sys.path.remove(s)
        sys.path.insert(0, s)
    return root


def find_pg_bin(name: str) -> str:
    for cand in (os.environ.get("DFCK_PG_BIN", "/usr/lib/postgresql/15/bin") + "/" + name, "/usr/bin/" + name):
        if os.access(cand, os.X_OK):
            return cand
    raise SystemExit(f"{name} not found (set DFCK_PG_BIN)")


def strip_pg_dump(text: str) -> str:
    lines = [ln for ln in text.split("\n") if not DROP_LINE.match(ln)]
    out = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", out)


def pg_dump(conninfo: str, *extra: str) -> str:
    out = subprocess.run(
        [find_pg_bin("pg_dump"), "--no-owner", "--no-privileges", *extra,
         "--format=plain", "--encoding=UTF8", "--dbname", conninfo],
        check=True, capture_output=True,
    ).stdout.decode("utf-8")
    return strip_pg_dump(out)


def url_with_db(url: str, dbname: str) -> str:
    """postgresql://u:p@h:port/<db> with the database replaced (URL form only)."""
    parts = urlsplit(url)
    if not parts.scheme:
        raise SystemExit(f"--pg-url must be a URL (postgresql://...), got {url!r}")
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, parts.fragment))


def pg_server_version(url: str) -> str:
    out = subprocess.run(
        [find_pg_bin("psql"), "-X", "-At", "-d", url, "-c", "SHOW server_version"],
        check=True, capture_output=True,
    ).stdout.decode().strip()
    return out


def tool_version(*argv: str) -> str:
    try:
        return subprocess.run(list(argv), check=True, capture_output=True).stdout.decode().strip().splitlines()[0]
    except Exception as exc:  # noqa: BLE001
        return f"unknown ({exc})"


_CREATE_INDEX = re.compile(r"^CREATE (?:UNIQUE )?INDEX (\S+) ON ")


def sort_sqlite_index_runs(schema: str) -> str:
    """Sort each contiguous run of CREATE INDEX statements of `sqlite3 .schema` output
    by index name.

    SQLAlchemy's create_all emits the indexes of one table in the iteration order of
    ``Table.indexes``, a set of Index objects hashed by id(): the order (and so the
    order of sqlite_master rows) changes from run to run. Statements are otherwise
    unchanged."""
    stmts: list[str] = []
    cur: list[str] = []
    for line in schema.splitlines(keepends=True):
        cur.append(line)
        if line.rstrip().endswith(";"):
            stmts.append("".join(cur))
            cur = []
    tail = "".join(cur)
    out: list[str] = []
    run: list[str] = []
    for st in stmts:
        if _CREATE_INDEX.match(st):
            run.append(st)
            continue
        out.extend(sorted(run, key=lambda x: _CREATE_INDEX.match(x).group(1)))
        run = []
        out.append(st)
    out.extend(sorted(run, key=lambda x: _CREATE_INDEX.match(x).group(1)))
    return "".join(out) + tail


class DetBytes:
    """A deterministic byte stream: sha256(label || counter) blocks."""

    def __init__(self, label: str) -> None:
        self.label = label.encode()
        self.counter = 0

    def __call__(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            out += hashlib.sha256(self.label + self.counter.to_bytes(8, "big")).digest()
            self.counter += 1
        return out[:n]
