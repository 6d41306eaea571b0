#!/usr/bin/env python3
"""Deletes whole threads through the real PostgresSaver's own API, for the prune benchmark
(benchmarks.md): `PostgresSaver.prune(thread_ids, strategy="delete")`.

    .venv/bin/python scripts/py_prune_delete.py URL THREAD [THREAD ...]
"""

import sys

import psycopg
from psycopg.rows import dict_row
from langgraph.checkpoint.postgres import PostgresSaver

url, threads = sys.argv[1], sys.argv[2:]
with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
    PostgresSaver(conn).prune(threads, strategy="delete")
print(f"deleted {len(threads)} thread(s)")
