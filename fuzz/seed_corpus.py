#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, from the committed SQLite fixtures.

Writes fuzz/corpus/<target>/<sha1> files (deduplicated; the directory is not committed):
  codec        every checkpoint blob and write value
  rows         (selector, checkpoint blob, metadata, id, parent, write value) records
  materialize  (lineage shape, write values…) records: one per thread's messages writes

Usage (from the repository root): python3 fuzz/seed_corpus.py
"""
import glob
import hashlib
import os
import sqlite3
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def join(parts):
    out = b""
    for p in parts:
        p = p[:0xFFFF]
        out += struct.pack("<H", len(p)) + p
    return out


def put(target, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def blob(v):
    if v is None:
        return b""
    return v.encode() if isinstance(v, str) else bytes(v)


for db in sorted(glob.glob(os.path.join(ROOT, "fixtures", "sqlite", "*.db"))):
    c = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    rows = c.execute(
        "SELECT thread_id, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
        "FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id"
    ).fetchall()
    writes = c.execute(
        "SELECT thread_id, checkpoint_id, channel, type, value FROM writes "
        "ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx"
    ).fetchall()
    for t, cid, parent, typ, body, meta in rows:
        if typ == "msgpack":
            put("codec", blob(body))
        sel = 0x80 if parent else 0x00
        put("rows", join([bytes([sel]), blob(body), blob(meta), blob(cid), blob(parent)]))
    by_thread = {}
    for t, cid, ch, typ, val in writes:
        if typ == "msgpack":
            put("codec", blob(val))
            if ch == "messages":
                by_thread.setdefault(t, []).append(blob(val))
            put("rows", join([bytes([0x80]), b"", b"{}", blob(cid), b"", blob(val)]))
    for t, vals in by_thread.items():
        n = min(16, max(1, len(vals)))
        # A chain c00 <- c01 <- …; the root stores the first value (0x40), one fork at the end.
        shape = bytes([0x7F] + [k - 1 for k in range(1, n)] + ([max(0, n - 2)] if n > 2 else []))
        put("materialize", join([shape] + vals[:32]))
print("corpus:", {d: len(os.listdir(os.path.join(OUT, d))) for d in sorted(os.listdir(OUT))})
