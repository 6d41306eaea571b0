"""Opens a store written by dfck's native benchmark engine with the real Python LangGraph and
checks that it is a genuine LangGraph store.

  check_native_store.py --db PATH.sqlite | --pg-url URL  --thread ID --mode full|delta
                        --updates N [--payload-bytes P] [--snapshot-frequency F]

Through the same one-node graph the benchmark uses (dump_langgraph_rows.py), with SqliteSaver or
PostgresSaver:
  * get_state(head) returns N messages whose canonical digest (docs/bench-rows.md#digests) equals the
    deterministic workload's;
  * every checkpoint in get_state_history reads without error, with 0..N messages, and its
    messages are a prefix of the workload;
  * the checkpoint, write and (delta) snapshot counts are the ones LangGraph itself writes.
Prints one JSON line of results; exit 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dump_langgraph_rows import bench_config, bench_messages, build_graph  # noqa: E402


def digest(messages: list) -> str:
    items = [{"id": m.id, "type": m.type, "content": m.content} for m in messages]
    text = json.dumps(items, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check(saver, args) -> dict:
    graph = build_graph(args.mode, args.snapshot_frequency, saver)
    cfg = bench_config(args.mode, args.thread)
    expected = bench_messages(args.updates, args.payload_bytes)
    want = digest(expected)
    problems: list[str] = []
    state = graph.get_state(cfg)
    msgs = state.values.get("messages", [])
    if len(msgs) != args.updates:
        problems.append(f"head has {len(msgs)} messages, expected {args.updates}")
    if digest(msgs) != want:
        problems.append("head digest differs from the workload")
    if state.next:
        problems.append(f"head has pending tasks {state.next}")
    history = list(graph.get_state_history(cfg))
    sources: dict[str, int] = {}
    for snap in history:
        src = snap.metadata.get("source")
        sources[src] = sources.get(src, 0) + 1
        got = snap.values.get("messages", [])
        if digest(got) != digest(expected[: len(got)]):
            problems.append(f"checkpoint {snap.config['configurable']['checkpoint_id']} is not a prefix")
        if args.mode == "delta" and snap.metadata.get("deerflow_checkpoint_channel_mode") != "delta":
            problems.append("a delta checkpoint lacks the mode marker")
    if len(history) != 3 * args.updates:
        problems.append(f"{len(history)} checkpoints, expected {3 * args.updates}")
    writes = sum(len(t.pending_writes or []) for t in saver.list(cfg))
    if writes != 3 * args.updates:
        problems.append(f"{writes} pending writes, expected {3 * args.updates}")
    # Distinct snapshot versions: Postgres hands a snapshot blob to every checkpoint that
    # shares its channel version (docs/storage-format.md#delta-channels-in-postgresql), SQLite stores it once.
    snapshot_versions = set()
    for t in saver.list(cfg):
        if type(t.checkpoint["channel_values"].get("messages")).__name__ == "_DeltaSnapshot":
            snapshot_versions.add(t.checkpoint["channel_versions"].get("messages"))
    snapshots = len(snapshot_versions)
    if args.mode == "delta" and snapshots != args.updates // args.snapshot_frequency:
        problems.append(f"{snapshots} snapshots, expected {args.updates // args.snapshot_frequency}")
    return {
        "head_messages": len(msgs),
        "head_digest": digest(msgs),
        "expected_digest": want,
        "checkpoints": len(history),
        "sources": sources,
        "pending_writes": writes,
        "snapshots": snapshots,
        "problems": problems,
        "ok": not problems,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db")
    ap.add_argument("--pg-url")
    ap.add_argument("--thread", default="checkpoint-bench-1-0")
    ap.add_argument("--mode", choices=["full", "delta"], required=True)
    ap.add_argument("--updates", type=int, required=True)
    ap.add_argument("--payload-bytes", type=int, default=128)
    ap.add_argument("--snapshot-frequency", type=int, default=10)
    args = ap.parse_args()
    if args.db:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(args.db, check_same_thread=False)
        result = check(SqliteSaver(conn), args)
        conn.close()
    elif args.pg_url:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(args.pg_url) as saver:
            result = check(saver, args)
    else:
        ap.error("--db or --pg-url is required")
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
