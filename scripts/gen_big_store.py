#!/usr/bin/env python3
"""Build a multi-gigabyte SQLite checkpoint store from the perf stores, for whole-store
benchmarks (not committed).

    python3 scripts/gen_big_store.py OUT.db SRC.db:COPIES [SRC.db:COPIES ...]

Copies every row of `checkpoints` and `writes` of each source COPIES times, the thread ids
prefixed with "c<copy>-" so every copy is a thread of its own. Checkpoint blobs, metadata and
writes are copied byte for byte: LangGraph stores the thread id only in the key columns, so
each copy reads back exactly like its source thread. The sources are the real-library stores
of gen_perf_stores.py; for example, 8 copies of full_400mb.db and one of delta_10k.db make a
5.3 GB store of 17 threads in both modes:

    python3 scripts/gen_big_store.py /tmp/dfck-perf/big.db \\
        /tmp/dfck-perf/full_400mb.db:8 /tmp/dfck-perf/delta_10k.db:1
"""

from __future__ import annotations

import os
import sqlite3
import sys


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    if os.path.exists(out):
        os.remove(out)
    db = sqlite3.connect(out)
    first = sys.argv[2].rsplit(":", 1)[0]
    src = sqlite3.connect(f"file:{first}?mode=ro", uri=True)
    for (sql,) in src.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL"):
        db.execute(sql)
    src.close()
    db.commit()
    n = 0
    for spec in sys.argv[2:]:
        path, copies = spec.rsplit(":", 1)
        db.execute("ATTACH DATABASE ? AS src", (f"file:{path}?mode=ro",))
        for _ in range(int(copies)):
            prefix = f"c{n}-"
            n += 1
            db.execute(
                "INSERT INTO checkpoints SELECT ? || thread_id, checkpoint_ns, checkpoint_id, "
                "parent_checkpoint_id, type, checkpoint, metadata FROM src.checkpoints",
                (prefix,),
            )
            cols = [r[1] for r in db.execute("PRAGMA src.table_info(writes)")]
            rest = ", ".join(c for c in cols if c != "thread_id")
            db.execute(
                f"INSERT INTO writes (thread_id, {rest}) SELECT ? || thread_id, {rest} FROM src.writes",
                (prefix,),
            )
            db.commit()
            print(f"{path} copy {prefix}: {os.path.getsize(out) / 1e9:.2f} GB", flush=True)
        db.execute("DETACH DATABASE src")
    db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
