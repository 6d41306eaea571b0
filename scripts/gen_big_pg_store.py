#!/usr/bin/env python3
"""Build a PostgreSQL checkpoint store of many short threads from the committed real-library
PostgreSQL fixtures, for whole-store benchmarks (not committed).

    python3 scripts/gen_big_pg_store.py URL DB SRC.sql:COPIES [SRC.sql:COPIES ...]

URL names a server (any database on it); DB is dropped and created. Each SRC is a fixture
dump (fixtures/postgres/*.sql). Every row of `checkpoints`, `checkpoint_blobs` and
`checkpoint_writes` is copied COPIES times, the thread ids prefixed with "c<copy>-" so every
copy is a thread of its own, byte for byte otherwise: LangGraph keeps the thread id only in
the key columns, so each copy reads back exactly like its source thread (as
gen_big_store.py does for SQLite). For example, 6,400 copies of delta_k3's 8 threads and
6,000 of retention's 8 make 99,200 short threads:

    python3 scripts/gen_big_pg_store.py "$URL" dfck_s100k \\
        fixtures/postgres/delta_k3.sql:6400 fixtures/postgres/retention.sql:6000
"""

from __future__ import annotations

import subprocess
import sys
import time

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    url, db = sys.argv[1], sys.argv[2]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{db}"')
        admin.execute(f'CREATE DATABASE "{db}"')
    target = make_conninfo(**{**conninfo_to_dict(url), "dbname": db})
    specs = [spec.rsplit(":", 1) for spec in sys.argv[3:]]
    # Each fixture is loaded as it was dumped (schema public), then moved aside to src<i>.
    for i, (path, _) in enumerate(specs):
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
            conn.execute("CREATE SCHEMA public")
        subprocess.run(
            ["psql", "-q", "-X", "-v", "ON_ERROR_STOP=1", "-d", target, "-f", path],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(f"ALTER SCHEMA public RENAME TO src{i}")
    with psycopg.connect(target) as conn:
        conn.execute("CREATE SCHEMA public")
        # The first fixture's tables (keys, indexes, migrations) become the store's.
        for t in ("checkpoint_migrations", *TABLES):
            conn.execute(f"CREATE TABLE public.{t} (LIKE src0.{t} INCLUDING ALL)")
        conn.execute("INSERT INTO public.checkpoint_migrations SELECT * FROM src0.checkpoint_migrations")
        conn.commit()
        n = 0
        for i, (path, copies) in enumerate(specs):
            start = time.monotonic()
            for t in TABLES:
                cols = [
                    r[0]
                    for r in conn.execute(
                        "SELECT column_name FROM information_schema.columns "
                        "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                        (f"src{i}", t),
                    )
                ]
                rest = ", ".join(c for c in cols if c != "thread_id")
                conn.execute(
                    f"INSERT INTO public.{t} (thread_id, {rest}) "
                    f"SELECT 'c' || (g + %s) || '-' || thread_id, {rest} "
                    f"FROM src{i}.{t}, generate_series(0, %s - 1) g ORDER BY g, thread_id",
                    (n, int(copies)),
                )
            conn.execute(f"DROP SCHEMA src{i} CASCADE")
            conn.commit()
            n += int(copies)
            print(f"{path}: {copies} copies in {time.monotonic() - start:.0f} s", flush=True)
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))").fetchone()
        threads = conn.execute("SELECT count(DISTINCT thread_id) FROM checkpoints").fetchone()
        print(f"{db}: {threads[0]} threads, {size[0]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
