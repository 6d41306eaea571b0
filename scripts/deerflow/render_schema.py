#!/usr/bin/env python3
"""Render DeerFlow's application schema (SQLite + PostgreSQL) from DeerFlow's own code.

DeerFlow (bytedance/deer-flow) keeps its own tables (threads_meta, runs, run_events,
users, ...) in the same database as LangGraph's checkpoint tables. This script runs
DeerFlow's real start-up path against an empty database and dumps what it created:

    DatabaseConfig(...)                      deerflow/config/database_config.py
    init_engine_from_config(config)          deerflow/persistence/engine.py
      -> bootstrap_schema(): branch "empty"  deerflow/persistence/bootstrap.py
         = Base.metadata.create_all + alembic stamp <head>

then  `sqlite3 <file> .schema` (each table's CREATE INDEX statements sorted by name:
      create_all emits them in set order, which changes from run to run)  and
      `pg_dump --schema-only --no-owner --no-privileges` (build lines stripped exactly
      like scripts/gen_pg_fixtures.py does).

Nothing is compiled by hand, so partial indexes (uq_runs_thread_active, ...), server
defaults and the alembic_version table come out exactly as DeerFlow makes them.

Setup (once; DeerFlow needs Python 3.12):

    git -C /work/.mirror/bytedance+deer-flow/repo archive f1f4af99bbf1cffb83a80744bf6e4a44ee8f24be \\
        | (mkdir -p /tmp/deerflow-src && tar -x -C /tmp/deerflow-src)
    ~/.pyenv/versions/3.12.1/bin/python -m venv .venv-deerflow
    .venv-deerflow/bin/pip install -r scripts/deerflow/requirements.txt

Run (PostgreSQL 15 from the repo's throwaway server; the URL's role must be able to
CREATE/DROP DATABASE):

    export DFCK_PG_DIR=$(mktemp -d)
    TEST_POSTGRES_URI=$(scripts/pg-test-server.sh start)
    .venv-deerflow/bin/python scripts/deerflow/render_schema.py \\
        --deerflow-src /tmp/deerflow-src --pg-url "$TEST_POSTGRES_URI" --out fixtures/deerflow-schema
    scripts/pg-test-server.sh stop

Outputs: <out>/sqlite.sql, <out>/postgres.sql, <out>/SOURCE (commit, alembic head, date,
command, tool versions). `--postgres-schema NAME` additionally renders the
`database.postgres_schema: NAME` variant to <out>/postgres-NAME.sql (not committed; the
committed postgres.sql is the default/public variant).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import importlib.metadata as im
import os
import shlex
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _dfenv  # noqa: E402

if __name__ == "__main__":
    _dfenv.pin_hash_seed()

DB_NAME = "dfckgen_deerflow_schema"


def _versions() -> dict[str, str]:
    out = {}
    for p in ("sqlalchemy", "alembic", "aiosqlite", "asyncpg", "pydantic"):
        try:
            out[p] = im.version(p)
        except im.PackageNotFoundError:
            out[p] = "-"
    return out


async def _bootstrap(db_config) -> None:
    """DeerFlow's own start-up: init_engine_from_config (create_all + stamp head on an empty db)."""
    from deerflow.persistence.engine import close_engine, init_engine_from_config

    try:
        await init_engine_from_config(db_config)
    finally:
        await close_engine()


def render_sqlite(out: Path) -> str:
    from deerflow.config.database_config import DatabaseConfig

    with tempfile.TemporaryDirectory(prefix="dfck-df-schema-") as tmp:
        cfg = DatabaseConfig(backend="sqlite", sqlite_dir=tmp)
        asyncio.run(_bootstrap(cfg))
        path = cfg.sqlite_path
        schema = subprocess.run(["sqlite3", path, ".schema"], check=True, capture_output=True).stdout.decode("utf-8")
        with sqlite3.connect(path) as conn:
            head = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    (out / "sqlite.sql").write_text(_dfenv.sort_sqlite_index_runs(schema), encoding="utf-8")
    return ",".join(r[0] for r in head)


def _recreate_db(url: str, dbname: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.Connection.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(sql.Identifier(dbname)))


def _drop_db(url: str, dbname: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.Connection.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))


def render_postgres(pg_url: str, out_file: Path, postgres_schema: str = "", keep: bool = False) -> str:
    from deerflow.config.database_config import DatabaseConfig

    _recreate_db(pg_url, DB_NAME)
    db_url = _dfenv.url_with_db(pg_url, DB_NAME)
    try:
        cfg = DatabaseConfig(backend="postgres", postgres_url=db_url, postgres_schema=postgres_schema)
        asyncio.run(_bootstrap(cfg))
        text = _dfenv.pg_dump(db_url, "--schema-only")
        out_file.write_text(text, encoding="utf-8")
        head = subprocess.run(
            [_dfenv.find_pg_bin("psql"), "-X", "-At", "-d", db_url, "-c",
             f"SELECT version_num FROM {(postgres_schema or 'public')}.alembic_version"],
            check=True, capture_output=True,
        ).stdout.decode().strip()
    finally:
        if not keep:
            _drop_db(pg_url, DB_NAME)
    return head


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deerflow-src", required=True, help="extracted DeerFlow checkout at the pinned commit")
    ap.add_argument("--commit", default=_dfenv.PINNED_COMMIT, help="commit id of that checkout (recorded in SOURCE)")
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"),
                    help="PostgreSQL server URL (default $TEST_POSTGRES_URI); omit with --skip-postgres")
    ap.add_argument("--skip-postgres", action="store_true", help="render only sqlite.sql")
    ap.add_argument("--postgres-schema", default="", help="also render the database.postgres_schema=NAME variant")
    ap.add_argument("--keep", action="store_true", help=f"keep the {DB_NAME} database")
    ap.add_argument("--out", default="fixtures/deerflow-schema", help="output directory")
    args = ap.parse_args()

    _dfenv.add_deerflow_to_path(args.deerflow_src)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from deerflow.persistence.bootstrap import _get_head_revision

    head = _get_head_revision()
    sqlite_head = render_sqlite(out)
    assert sqlite_head == head, (sqlite_head, head)
    print(f"{out / 'sqlite.sql'}: stamped {sqlite_head}", file=sys.stderr)

    pg_server = "-"
    if not args.skip_postgres:
        if not args.pg_url:
            ap.error("--pg-url (or TEST_POSTGRES_URI) is required unless --skip-postgres")
        pg_head = render_postgres(args.pg_url, out / "postgres.sql", keep=args.keep)
        assert pg_head == head, (pg_head, head)
        print(f"{out / 'postgres.sql'}: stamped {pg_head}", file=sys.stderr)
        if args.postgres_schema:
            variant = out / f"postgres-{args.postgres_schema}.sql"
            render_postgres(args.pg_url, variant, postgres_schema=args.postgres_schema, keep=args.keep)
            print(f"{variant}: written (not a committed fixture)", file=sys.stderr)
        pg_server = _dfenv.pg_server_version(args.pg_url)

    argv = [shlex.quote(a) if "://" not in a else '"$TEST_POSTGRES_URI"' for a in sys.argv[1:]]
    vers = _versions()
    lines = [
        f"deerflow_commit: {args.commit}",
        f"alembic_head: {head}",
        f"date: {_dt.datetime.now(_dt.UTC).date().isoformat()}",
        "command: .venv-deerflow/bin/python scripts/deerflow/render_schema.py " + " ".join(argv),
        "how: DatabaseConfig + deerflow.persistence.engine.init_engine_from_config on an empty database "
        "(bootstrap branch 'empty': Base.metadata.create_all + alembic stamp head), then "
        "`sqlite3 <db> .schema` (CREATE INDEX runs sorted by name) / `pg_dump --schema-only --no-owner --no-privileges` "
        "(version comments and \\restrict keys removed)",
        f"python: {sys.version.split()[0]}",
        *(f"{k}: {v}" for k, v in vers.items()),
        f"sqlite3: {_dfenv.tool_version('sqlite3', '--version').split()[0]}",
        f"pg_dump: {_dfenv.tool_version(_dfenv.find_pg_bin('pg_dump'), '--version')}",
        f"postgres_server: {pg_server}",
    ]
    (out / "SOURCE").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{out / 'SOURCE'}: written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
