"""Reference rows of the channel benchmark written by the real LangGraph (ground truth for
dfck's native engine, src/bench/native/).

Runs the one-node graph of docs/bench-rows.md#workloads with the pinned LangGraph and dumps every row
as JSON: checkpoints (blob decoded, metadata text, byte lengths), pending writes (task ids and
paths, idx, channel, type, length), and on Postgres the JSONB checkpoints, blob and write rows.

  dump_langgraph_rows.py [--backend sqlite|postgres] [--mode full|delta] [--updates N]
                         [--payload-bytes P] [--snapshot-frequency F] [--path FILE] [--pg-url URL]

The graph: full mode ``messages: Annotated[list[AnyMessage], add_messages]``; delta mode
``DeltaChannel(df_merge_message_writes, snapshot_frequency=F)`` with the DeerFlow-style reducer
re-implemented in graphs.py, plus the metadata marker ``deerflow_checkpoint_channel_mode:
delta``. check_native_store.py imports the graph from here. Postgres threads are deleted
after the dump.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.graph import StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graphs import df_merge_message_writes  # noqa: E402

_SCHEMAS: dict[Any, type] = {}


def state_schema(mode: str, frequency: int) -> type:
    key = (mode, frequency if mode == "delta" else None)
    if key not in _SCHEMAS:
        if mode == "full":
            ann = Annotated[list[AnyMessage], add_messages]
        else:
            ann = Annotated[
                list[AnyMessage], DeltaChannel(df_merge_message_writes, snapshot_frequency=frequency)
            ]
        _SCHEMAS[key] = TypedDict(f"BenchState_{mode}_{frequency}", {"messages": ann})
    return _SCHEMAS[key]


def build_graph(mode: str, frequency: int, checkpointer: Any):
    g = StateGraph(state_schema(mode, frequency))

    def noop(state: dict) -> dict:
        return {}

    g.add_node("noop", noop)
    g.set_entry_point("noop")
    g.set_finish_point("noop")
    return g.compile(checkpointer=checkpointer)


def bench_config(mode: str, thread_id: str) -> dict:
    cfg: dict = {
        "configurable": {"thread_id": thread_id, "__deerflow_checkpoint_channel_mode": mode}
    }
    if mode == "delta":
        cfg["metadata"] = {"deerflow_checkpoint_channel_mode": "delta"}
    return cfg


def bench_messages(n: int, payload: int) -> list:
    out = []
    for i in range(n):
        cls = HumanMessage if i % 2 == 0 else AIMessage
        out.append(cls(id=f"bench-message-{i:08d}", content="x" * payload))
    return out


# ---------------------------------------------------------------------------------------
# Row dumper
# ---------------------------------------------------------------------------------------


def _render(v: Any) -> Any:
    """Readable structure of a decoded msgpack value: ext values keep their code and size,
    messages show class and id, long strings their length."""
    import ormsgpack

    if isinstance(v, ormsgpack.Ext):
        inner = ormsgpack.unpackb(v.data, ext_hook=_ext, option=ormsgpack.OPT_NON_STR_KEYS)
        return {"$ext": v.tag, "$len": len(v.data), "$v": _render(inner)}
    if isinstance(v, _ExtV):
        return {"$ext": v.code, "$len": len(v.data), "$v": _render(v.inner)}
    if isinstance(v, dict):
        return {str(k): _render(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        if len(v) == 4 and isinstance(v[0], str) and v[0].startswith("langchain_core.messages"):
            return {"$msg": v[1], "fields": list(v[2].keys()), "id": v[2].get("id")}
        return [_render(x) for x in v]
    if isinstance(v, str) and len(v) > 60:
        return f"<str {len(v)}>"
    return v


class _ExtV:
    def __init__(self, code: int, data: bytes) -> None:
        import ormsgpack

        self.code = code
        self.data = data
        self.inner = ormsgpack.unpackb(data, ext_hook=_ext, option=ormsgpack.OPT_NON_STR_KEYS)


def _ext(code: int, data: bytes) -> Any:
    return _ExtV(code, data)


def _unpack(b: bytes) -> Any:
    import ormsgpack

    return ormsgpack.unpackb(b, ext_hook=_ext, option=ormsgpack.OPT_NON_STR_KEYS)


def run_sqlite(mode: str, n: int, payload: int, freq: int, path: str) -> None:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    if os.path.exists(path):
        os.remove(path)
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    graph = build_graph(mode, freq, saver)
    cfg = bench_config(mode, "checkpoint-bench-1-0")
    for m in bench_messages(n, payload):
        graph.invoke({"messages": [m]}, cfg)
    rows = conn.execute(
        "select checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata from checkpoints"
        " order by checkpoint_id"
    ).fetchall()
    out = []
    for cid, parent, typ, ck, meta in rows:
        writes = conn.execute(
            "select task_id, task_path, idx, channel, type, length(value), hex(value) from writes"
            " where checkpoint_id=? order by task_path, task_id, idx",
            (cid,),
        ).fetchall()
        out.append(
            {
                "id": cid,
                "parent": parent,
                "type": typ,
                "checkpoint_len": len(ck),
                "metadata_len": len(meta),
                "metadata": meta.decode() if isinstance(meta, bytes) else meta,
                "checkpoint": _render(_unpack(ck)),
                "writes": [
                    {
                        "task_id": w[0],
                        "task_path": w[1],
                        "idx": w[2],
                        "channel": w[3],
                        "type": w[4],
                        "len": w[5],
                        "hex": w[6] if w[5] < 400 else None,
                    }
                    for w in writes
                ],
            }
        )
    conn.close()
    print(json.dumps({"backend": "sqlite", "mode": mode, "n": n, "freq": freq, "rows": out}, indent=1))


def run_postgres(mode: str, n: int, payload: int, freq: int, url: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    thread = f"dump-{mode}-{n}-{os.getpid()}"
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        graph = build_graph(mode, freq, saver)
        cfg = bench_config(mode, thread)
        for m in bench_messages(n, payload):
            graph.invoke({"messages": [m]}, cfg)
        with saver._cursor() as cur:
            cur.execute(
                "select checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata,"
                " length(checkpoint::text) as ct, length(metadata::text) as mt, pg_column_size(checkpoint) as cs,"
                " pg_column_size(metadata) as ms from checkpoints where thread_id=%s order by checkpoint_id",
                (thread,),
            )
            cks = cur.fetchall()
            cur.execute(
                "select channel, version, type, length(blob) from checkpoint_blobs where thread_id=%s"
                " order by channel, version",
                (thread,),
            )
            blobs = cur.fetchall()
            cur.execute(
                "select checkpoint_id, task_id, task_path, idx, channel, type, length(blob)"
                " from checkpoint_writes where thread_id=%s order by checkpoint_id, task_path, task_id, idx",
                (thread,),
            )
            writes = cur.fetchall()
            cur.execute("delete from checkpoints where thread_id=%s", (thread,))
            cur.execute("delete from checkpoint_blobs where thread_id=%s", (thread,))
            cur.execute("delete from checkpoint_writes where thread_id=%s", (thread,))
    out = {
        "backend": "postgres",
        "mode": mode,
        "n": n,
        "freq": freq,
        "checkpoints": [
            {
                "id": r["checkpoint_id"],
                "parent": r["parent_checkpoint_id"],
                "type": r["type"],
                "checkpoint": r["checkpoint"],
                "metadata": r["metadata"],
                "text_len": [r["ct"], r["mt"]],
                "col_size": [r["cs"], r["ms"]],
            }
            for r in cks
        ],
        "blobs": [dict(b) for b in blobs],
        "writes": [dict(w) for w in writes],
    }
    print(json.dumps(out, indent=1, default=str))


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--mode", choices=["full", "delta"], default="full")
    ap.add_argument("--updates", type=int, default=5)
    ap.add_argument("--payload-bytes", type=int, default=128)
    ap.add_argument("--snapshot-frequency", type=int, default=10)
    ap.add_argument("--path", default="/tmp/dfck-dump.sqlite")
    ap.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"))
    a = ap.parse_args()
    if a.backend == "sqlite":
        run_sqlite(a.mode, a.updates, a.payload_bytes, a.snapshot_frequency, a.path)
    else:
        run_postgres(a.mode, a.updates, a.payload_bytes, a.snapshot_frequency, a.pg_url)


if __name__ == "__main__":
    main()
