#!/usr/bin/env python3
"""Generate dfck's SQLite test fixtures and their expected JSON with the real LangGraph.

    python scripts/gen_fixtures.py --out fixtures

Writes fixtures/sqlite/<name>.db and fixtures/expected/<name>.json (see
fixtures/README.md for the list of threads). Everything is driven through StateGraph +
SqliteSaver; nothing is hand-written into the stores except the `mixed` step of
graph switching (same saver, two graph definitions), which is also a real library path.

Expected JSON (one per db):
* values  = graph.get_state({"configurable": {thread_id, checkpoint_ns, checkpoint_id}}).values,
            rendered with fixturelib (JsonPlusSerializer bytes -> JSON).
* stored  = the value stored AT the checkpoint without its own NULL_TASK_ID writes. It is
            computed exactly like Pregel._prepare_state_snapshot but stopping before
            "apply pending writes": channels_from_checkpoint(graph.channels, saved.checkpoint,
            saver=saver, config=saved.config) followed by read_channels(channels,
            graph.stream_channels_asis). Only emitted when it differs from values.
* graph_defaults = keys of values whose channel is not in the checkpoint's
            channel_versions (and not written by the checkpoint's own NULL_TASK_ID writes):
            values a store-only reader can only know from the graph definition.
* thread mode: per checkpoint, "delta" iff metadata deerflow_checkpoint_channel_mode ==
            "delta" or counters_since_delta_snapshot (a dict) has "messages"; else "full"
            (docs/replay-and-forks.md#modes-and-markers). Thread: "full" if no checkpoint (any ns) is delta;
            "mixed" if some checkpoint that is not delta and stores messages as a plain list
            (messages_encoding == "plain") has a smaller checkpoint_id than some delta
            checkpoint of the same namespace (full -> delta migration); else "delta".
"""

from __future__ import annotations

import argparse
import importlib.metadata as im
import json
import os
import shutil
import sqlite3
import sys
import uuid
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer  # noqa: E402
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: E402
from langgraph.checkpoint.serde.types import _DeltaSnapshot  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.pregel._checkpoint import channels_from_checkpoint  # noqa: E402
from langgraph.pregel._io import read_channels  # noqa: E402
from langgraph.types import Command  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

import fixturelib  # noqa: E402
from graphs import (  # noqa: E402
    REMOVE_ALL_MESSAGES,
    AIMessage,
    HumanMessage,
    Overwrite,
    RemoveMessage,
    SystemMessage,
    build_conv_graph,
    merge_artifacts,
    merge_sandbox,
    merge_todos,
    messages_annotation,
    text_of,
)

NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
MARKER_KEY = "deerflow_checkpoint_channel_mode"
DELTA_MARKER = {MARKER_KEY: "delta"}

VERSION_PACKAGES = [
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langchain-core",
    "ormsgpack",
]


def versions() -> dict[str, str]:
    return {p: im.version(p) for p in VERSION_PACKAGES}


# ---------------------------------------------------------------------------------------
# Store bookkeeping
# ---------------------------------------------------------------------------------------


class XorCipher:
    """Toy cipher for EncryptedSerializer: every byte XOR 0x5A; name 'xor'."""

    KEY = 0x5A

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "xor", bytes(b ^ self.KEY for b in plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor", ciphername
        return bytes(b ^ self.KEY for b in ciphertext)


class Store:
    """One fixture db: a SqliteSaver plus a registry thread -> graphs for get_state."""

    def __init__(self, path: Path, serde: Any = None) -> None:
        self.path = path
        for suffix in ("", "-wal", "-shm", "-journal"):
            p = Path(str(path) + suffix)
            if p.exists():
                p.unlink()
        self.conn = sqlite3.connect(str(path), check_same_thread=False)
        self.saver = SqliteSaver(self.conn, serde=serde) if serde is not None else SqliteSaver(self.conn)
        self.saver.setup()
        # thread_id -> {"graph": root graph, "subgraphs": {node_name: graph}}
        self.threads: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, int] = {}

    def register(self, thread_id: str, graph: Any, subgraphs: Optional[dict[str, Any]] = None) -> None:
        self.threads[thread_id] = {"graph": graph, "subgraphs": subgraphs or {}}

    def cfg(self, thread_id: str, checkpoint_id: Optional[str] = None, marker: bool = False, run: bool = True) -> dict:
        conf: dict[str, Any] = {"thread_id": thread_id}
        if checkpoint_id:
            conf["checkpoint_ns"] = ""
            conf["checkpoint_id"] = checkpoint_id
        md: dict[str, Any] = {"user_id": "u-1"}
        if run:
            n = self.runs.get(thread_id, 0) + 1
            self.runs[thread_id] = n
            md["run_id"] = f"run-{thread_id}-{n:04d}"
        if marker:
            md.update(DELTA_MARKER)
        return {"configurable": conf, "metadata": md}

    def close(self) -> None:
        self.conn.commit()
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()
        for suffix in ("-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                raise RuntimeError(f"sidecar left behind: {p}")


def find_state(graph: Any, thread_id: str, pred) -> dict:
    """Config of the newest checkpoint (root ns) whose snapshot satisfies pred."""
    for snap in graph.get_state_history({"configurable": {"thread_id": thread_id}}):
        if pred(snap):
            return snap.config
    raise LookupError(f"no matching checkpoint in {thread_id}")


def ids_of(snap: Any) -> list[str]:
    return [m.id for m in snap.values.get("messages", [])]


def with_meta(config: dict, store: Store, thread_id: str, marker: bool = False) -> dict:
    """Add run/user metadata (and optionally the DeerFlow marker) to a found config."""
    c = store.cfg(thread_id, marker=marker)
    return {"configurable": dict(config["configurable"]), "metadata": c["metadata"]}


# ---------------------------------------------------------------------------------------
# Scenario scripts for the conversation graph (same script for full and delta twins)
# ---------------------------------------------------------------------------------------

SYNC = {"durability": "sync"}


def h(text: Any, mid: str) -> HumanMessage:
    return HumanMessage(content=text, id=mid)


def scenario_linear(g: Any, st: Store, tid: str) -> None:
    st.register(tid, g)
    g.invoke(
        {"messages": [SystemMessage(content="You are a helpful assistant. 你好！", id="sys-0"), h("calc 1+2", "h-0")]},
        st.cfg(tid),
        **SYNC,
    )
    g.invoke(
        {
            "messages": [
                h(
                    [
                        {"type": "text", "text": "blocks please 🌏"},
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                    ],
                    "h-1",
                )
            ]
        },
        st.cfg(tid),
        **SYNC,
    )
    g.invoke({"messages": [h("中文测试 — emoji 😀🎉 and ünïcödé \u00e9", "h-2")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("calc again", "h-3")]}, st.cfg(tid), **SYNC)


def scenario_sendfan(g: Any, st: Store, tid: str) -> None:
    st.register(tid, g)
    g.invoke({"messages": [h("fan out to three workers", "h-0")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("calc after fan", "h-1")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("fan again", "h-2")]}, st.cfg(tid), **SYNC)


def scenario_update(g: Any, st: Store, tid: str) -> None:
    st.register(tid, g)
    g.invoke({"messages": [h("calc 2+2", "h-0")]}, st.cfg(tid), **SYNC)
    g.update_state(st.cfg(tid), {"messages": [h("appended by update_state", "upd-1")]}, as_node="agent")
    g.update_state(st.cfg(tid), {"messages": [h("second append", "upd-2")]}, as_node="agent")
    g.update_state(st.cfg(tid), {"messages": [RemoveMessage(id="upd-1")]}, as_node="agent")
    g.invoke({"messages": [h("hello after remove", "h-1")]}, st.cfg(tid), **SYNC)
    g.update_state(
        st.cfg(tid),
        {"messages": Overwrite([SystemMessage(content="reset", id="sys-ow"), h("fresh start", "h-ow")])},
        as_node="agent",
    )
    g.invoke({"messages": [h("hello after overwrite", "h-2")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("overwrite now", "h-3")]}, st.cfg(tid), **SYNC)  # node-level Overwrite
    g.invoke({"messages": [h("after node overwrite", "h-4")]}, st.cfg(tid), **SYNC)


def scenario_fork(g: Any, st: Store, tid: str) -> None:
    st.register(tid, g)
    g.invoke({"messages": [h("calc 3+4", "h-0")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("second turn", "h-1")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("third turn", "h-2")]}, st.cfg(tid), **SYNC)
    # X: end of turn 1 (idle, last message is the final answer)
    cfg_x = find_state(g, tid, lambda s: s.next == () and ids_of(s)[-1:] == ["ai-3"])
    # Y: turn 1, the checkpoint where the tools task is pending (it has the tools writes)
    cfg_y = find_state(g, tid, lambda s: s.next == ("tools",) and ids_of(s)[-1:] == ["ai-1"])
    # 1. new input on an old checkpoint
    g.invoke({"messages": [h("branch A from turn 1", "h-fa")]}, with_meta(cfg_x, st, tid), **SYNC)
    # 2. update_state on an old checkpoint (as tools: replaces the tool output), then continue
    up = g.update_state(with_meta(cfg_y, st, tid), {"messages": [h("edit-1", "edit-1")]}, as_node="tools")
    g.invoke(None, with_meta(up, st, tid), **SYNC)
    # 3. replay from an old checkpoint
    g.invoke(None, with_meta(cfg_y, st, tid), **SYNC)
    # 4. __copy__ fork of X
    g.update_state(with_meta(cfg_x, st, tid), None, as_node="__copy__")
    # 5. continue the newest head
    g.invoke({"messages": [h("after forks", "h-3")]}, st.cfg(tid), **SYNC)


def scenario_interrupt(g: Any, st: Store, tid: str) -> None:
    st.register(tid, g)
    g.invoke({"messages": [h("ask for approval", "h-0")]}, st.cfg(tid), **SYNC)
    cfg_i1 = g.get_state({"configurable": {"thread_id": tid}}).config
    g.invoke(
        Command(resume="yes 好的", update={"messages": [h("resume note", "h-resume")]}),
        st.cfg(tid),
        **SYNC,
    )
    g.invoke({"messages": [h("ask again", "h-1")]}, st.cfg(tid), **SYNC)
    g.invoke(Command(resume="no"), st.cfg(tid), **SYNC)
    # resume at the OLD first interrupt without an update (fork)
    g.invoke(Command(resume="maybe"), with_meta(cfg_i1, st, tid), **SYNC)
    g.invoke({"messages": [h("after old resume", "h-2")]}, st.cfg(tid), **SYNC)


def scenario_resume_old_update(g: Any, st: Store, tid: str) -> None:
    """Resume an OLD interrupt again with Command(update=...).

    The second NULL_TASK_ID write lands on the same checkpoint as the first resume's.
    Full mode keeps the first branch's values; delta replay of the first branch picks
    up the later write as well (LangGraph 1.2.22 behaviour, a real fork leak)."""
    st.register(tid, g)
    g.invoke({"messages": [h("ask for approval", "h-0")]}, st.cfg(tid), **SYNC)
    cfg_i1 = g.get_state({"configurable": {"thread_id": tid}}).config
    g.invoke(
        Command(resume="yes", update={"messages": [h("resume note", "h-resume")]}),
        st.cfg(tid),
        **SYNC,
    )
    g.invoke({"messages": [h("second turn", "h-1")]}, st.cfg(tid), **SYNC)
    g.invoke(
        Command(resume="maybe", update={"messages": [h("late resume note", "h-late")]}),
        with_meta(cfg_i1, st, tid),
        **SYNC,
    )
    g.invoke({"messages": [h("after late resume", "h-2")]}, st.cfg(tid), **SYNC)


def scenario_exit(g: Any, st: Store, tid: str) -> None:
    st.register(tid, g)
    ex = {"durability": "exit"}
    g.invoke({"messages": [h("calc exit 1", "h-0")]}, st.cfg(tid), **ex)
    g.invoke({"messages": [h("second exit turn", "h-1")]}, st.cfg(tid), **ex)
    g.invoke({"messages": [h("fan under exit", "h-2")]}, st.cfg(tid), **ex)
    g.invoke({"messages": [h("calc exit 2", "h-3")]}, st.cfg(tid), **ex)
    # an exit run starting from an older (addressed) checkpoint
    cfg_old = find_state(g, tid, lambda s: ids_of(s)[-1:] == ["ai-1"] or ids_of(s)[-1:] == ["ai-3"])
    g.invoke({"messages": [h("calc from old exit", "h-4")]}, with_meta(cfg_old, st, tid), **ex)


def scenario_error(g: Any, st: Store, tid: str) -> None:
    st.register(tid, g)
    g.invoke({"messages": [h("hi", "h-0")]}, st.cfg(tid), **SYNC)
    try:
        g.invoke({"messages": [h("boom", "h-1")]}, st.cfg(tid), **SYNC)
    except ValueError:
        pass
    else:  # pragma: no cover
        raise AssertionError("expected boom")
    g.invoke({"messages": [h("recover", "h-2")]}, st.cfg(tid), **SYNC)


TWIN_SCENARIOS = [
    ("t-linear", scenario_linear),
    ("t-sendfan", scenario_sendfan),
    ("t-update", scenario_update),
    ("t-fork", scenario_fork),
    ("t-interrupt", scenario_interrupt),
    ("t-exit", scenario_exit),
    ("t-error", scenario_error),
    ("t-resume-old-update", scenario_resume_old_update),
]


# Fork shapes for the twin test (forks_full / forks_delta_k*): every way LangGraph can
# start a second branch from a checkpoint that holds pending writes. The full twin shows
# what each branch really holds; wherever the delta twin's get_state differs, delta replay
# picked up another branch's writes and `dfck verify` must say so.


def _turn_with_tools(g: Any, st: Store, tid: str) -> dict:
    """One calc turn; returns the config of its checkpoint where the tools task is pending."""
    st.register(tid, g)
    g.invoke({"messages": [h("calc 5+6", "h-0")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("second turn", "h-1")]}, st.cfg(tid), **SYNC)
    return find_state(g, tid, lambda s: s.next == ("tools",) and ids_of(s)[-1:] == ["ai-1"])


def fork_update(g: Any, st: Store, tid: str) -> None:
    cfg_y = _turn_with_tools(g, st, tid)
    up = g.update_state(with_meta(cfg_y, st, tid), {"messages": [h("edit-1", "edit-1")]}, as_node="tools")
    g.invoke(None, with_meta(up, st, tid), **SYNC)
    g.invoke({"messages": [h("after update fork", "h-2")]}, st.cfg(tid), **SYNC)


def fork_update_twice(g: Any, st: Store, tid: str) -> None:
    cfg_y = _turn_with_tools(g, st, tid)
    up1 = g.update_state(with_meta(cfg_y, st, tid), {"messages": [h("edit-1", "edit-1")]}, as_node="tools")
    g.invoke(None, with_meta(up1, st, tid), **SYNC)
    up2 = g.update_state(with_meta(cfg_y, st, tid), {"messages": [h("edit-2", "edit-2")]}, as_node="tools")
    g.invoke(None, with_meta(up2, st, tid), **SYNC)
    g.invoke({"messages": [h("after second update", "h-2")]}, st.cfg(tid), **SYNC)


def fork_input(g: Any, st: Store, tid: str) -> None:
    cfg_y = _turn_with_tools(g, st, tid)
    g.invoke({"messages": [h("input on a pending checkpoint", "h-in")]}, with_meta(cfg_y, st, tid), **SYNC)
    g.invoke({"messages": [h("after input fork", "h-2")]}, st.cfg(tid), **SYNC)


def fork_copy(g: Any, st: Store, tid: str) -> None:
    cfg_y = _turn_with_tools(g, st, tid)
    cp = g.update_state(with_meta(cfg_y, st, tid), None, as_node="__copy__")
    g.invoke(None, with_meta(cp, st, tid), **SYNC)
    g.invoke({"messages": [h("after copy", "h-2")]}, st.cfg(tid), **SYNC)


def fork_replay(g: Any, st: Store, tid: str) -> None:
    cfg_y = _turn_with_tools(g, st, tid)
    g.invoke(None, with_meta(cfg_y, st, tid), **SYNC)
    g.invoke({"messages": [h("after replay", "h-2")]}, st.cfg(tid), **SYNC)


def _interrupted(g: Any, st: Store, tid: str) -> dict:
    st.register(tid, g)
    g.invoke({"messages": [h("ask for approval", "h-0")]}, st.cfg(tid), **SYNC)
    return g.get_state({"configurable": {"thread_id": tid}}).config


def fork_resume_update_thrice(g: Any, st: Store, tid: str) -> None:
    cfg_i = _interrupted(g, st, tid)
    for n, resume in enumerate(["yes", "maybe", "no"]):
        cfg = st.cfg(tid) if n == 0 else with_meta(cfg_i, st, tid)
        g.invoke(Command(resume=resume, update={"messages": [h(f"note {n}", f"h-note-{n}")]}), cfg, **SYNC)
        g.invoke({"messages": [h(f"turn after resume {n}", f"h-after-{n}")]}, st.cfg(tid), **SYNC)
    g.invoke(Command(resume="plain"), with_meta(cfg_i, st, tid), **SYNC)


def fork_update_after_resume(g: Any, st: Store, tid: str) -> None:
    cfg_i = _interrupted(g, st, tid)
    g.invoke(Command(resume="yes"), st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("turn after resume", "h-1")]}, st.cfg(tid), **SYNC)
    up = g.update_state(with_meta(cfg_i, st, tid), {"messages": [h("edit on interrupt", "edit-i")]}, as_node="approve")
    g.invoke({"messages": [h("after edit", "h-2")]}, with_meta(up, st, tid), **SYNC)


def fork_input_on_interrupt(g: Any, st: Store, tid: str) -> None:
    cfg_i = _interrupted(g, st, tid)
    g.invoke(Command(resume="yes", update={"messages": [h("resume note", "h-note")]}), st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("calc on the old interrupt", "h-in")]}, with_meta(cfg_i, st, tid), **SYNC)
    g.invoke({"messages": [h("after input", "h-2")]}, st.cfg(tid), **SYNC)


FORK_SCENARIOS = [
    ("f-update", fork_update),
    ("f-update-twice", fork_update_twice),
    ("f-input", fork_input),
    ("f-copy", fork_copy),
    ("f-replay", fork_replay),
    ("f-resume-update-thrice", fork_resume_update_thrice),
    ("f-update-after-resume", fork_update_after_resume),
    ("f-input-on-interrupt", fork_input_on_interrupt),
]


def gen_forks(st: Store, mode: str, k: Optional[int]) -> None:
    g = build_conv_graph(messages_annotation(mode, k), st.saver)
    for tid, fn in FORK_SCENARIOS:
        fn(g, st, tid)


def gen_twin(st: Store, mode: str, k: Optional[int]) -> None:
    g = build_conv_graph(messages_annotation(mode, k), st.saver)
    for tid, fn in TWIN_SCENARIOS:
        fn(g, st, tid)


# ---------------------------------------------------------------------------------------
# exit.db: durability="exit" threads, full and delta (K=100, anchors carry everything)
# ---------------------------------------------------------------------------------------


def gen_exit(st: Store) -> None:
    gf = build_conv_graph(messages_annotation("full"), st.saver)
    gd = build_conv_graph(messages_annotation("delta", 100), st.saver)
    scenario_exit(gf, st, "t-exit-full")
    scenario_exit(gd, st, "t-exit-delta")
    # interrupt + resume under exit durability (delta)
    tid = "t-exit-interrupt"
    st.register(tid, gd)
    gd.invoke({"messages": [h("ask under exit", "h-0")]}, st.cfg(tid), durability="exit")
    gd.invoke(
        Command(resume="ok", update={"messages": [h("exit resume note", "h-r")]}),
        st.cfg(tid),
        durability="exit",
    )


# ---------------------------------------------------------------------------------------
# subgraph.db: a node that invokes a compiled subgraph (checkpointer inherited)
# ---------------------------------------------------------------------------------------


def build_subgraph_pair(messages_ann: Any, saver: Any):
    ChildState = TypedDict("ChildState", {"messages": messages_ann, "steps": int})

    def child_think(state: dict) -> dict:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"child thinking ({n})", id=f"sub-ai-{n}")], "steps": 1}

    def child_answer(state: dict) -> dict:
        n = len(state["messages"])
        return {
            "messages": [AIMessage(content=f"child answer to: {text_of(state['messages'][0])}", id=f"sub-ai-{n}")],
            "steps": state.get("steps", 0) + 1,
        }

    def child_builder() -> StateGraph:
        cb = StateGraph(ChildState)
        cb.add_node("think", child_think)
        cb.add_node("answer", child_answer)
        cb.add_edge(START, "think")
        cb.add_edge("think", "answer")
        cb.add_edge("answer", END)
        return cb

    child = child_builder().compile()  # checkpointer=None: inherits the parent's
    child_for_state = child_builder().compile(checkpointer=saver)

    ParentState = TypedDict("ParentState", {"messages": messages_ann})

    def call_child(state: dict) -> dict:
        msgs = state["messages"]
        n = len(msgs)
        out = child.invoke({"messages": [HumanMessage(content=f"sub: {text_of(msgs[-1])}", id=f"sub-h-{n}")]})
        return {"messages": [AIMessage(content=f"parent got: {text_of(out['messages'][-1])}", id=f"p-ai-{n}")]}

    pb = StateGraph(ParentState)
    pb.add_node("call_child", call_child)
    pb.add_edge(START, "call_child")
    pb.add_edge("call_child", END)
    parent = pb.compile(checkpointer=saver)
    return parent, child_for_state


def gen_subgraph(st: Store) -> None:
    for tid, ann in (
        ("t-subgraph", messages_annotation("full")),
        ("t-subgraph-delta", messages_annotation("delta", 3)),
    ):
        parent, child = build_subgraph_pair(ann, st.saver)
        st.register(tid, parent, {"call_child": child})
        parent.invoke({"messages": [h("question one 一", "h-0")]}, st.cfg(tid), **SYNC)
        parent.invoke({"messages": [h("question two 🚀", "h-1")]}, st.cfg(tid), **SYNC)


# ---------------------------------------------------------------------------------------
# values.db: non-message channels
# ---------------------------------------------------------------------------------------


def gen_values(st: Store) -> None:
    ValState = TypedDict(
        "ValState",
        {
            "messages": Annotated[list, add_messages_full()],
            "when_utc": datetime,
            "when_naive": datetime,
            "when_tz": datetime,
            "day": date,
            "clock": time,
            "span": timedelta,
            "uid": uuid.UUID,
            "tags": set,
            "pair": tuple,
            "raw": bytes,
            "nothing": Optional[str],
            "nested": dict,
            "intkeys": dict,
            "price": Decimal,
            "ratio": float,
            "special_floats": list,
            "status": HTTPStatus,
            "path": Path,
            "counter": Annotated[int, lambda a, b: a + b],
        },
    )

    def set_values(state: dict) -> dict:
        return {
            "messages": [AIMessage(content="values set", id="ai-values")],
            "when_utc": datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc),
            "when_naive": datetime(2025, 1, 2, 3, 4, 5),
            "when_tz": datetime(2025, 6, 7, 8, 9, 10, tzinfo=timezone(timedelta(hours=8))),
            "day": date(2025, 1, 2),
            "clock": time(3, 4, 5),
            "span": timedelta(days=1, seconds=2, microseconds=3),
            "uid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            "tags": {3, 1, 2},
            "pair": ("left", 2),
            "raw": b"\x00\x01\x02\xffraw",
            "nothing": None,
            "nested": {"a": {"b": [1, 2, {"c": None}], "bin": b"\xde\xad"}, "z": "last", "中": "文"},
            "intkeys": {1: "one", 2: "two", "three": 3},
            "price": Decimal("12.50"),
            "ratio": 1.5,
            "special_floats": [float("nan"), float("inf"), float("-inf"), -0.0, 1e-300],
            "status": HTTPStatus.OK,
            "path": Path("/mnt/user-data/outputs/report.md"),
            "counter": 1,
        }

    def mutate(state: dict) -> dict:
        return {
            "tags": state["tags"] | {10},
            "nested": {**state["nested"], "added": True},
            "ratio": state["ratio"] * 2,
            "nothing": "something",
            "counter": 5,
        }

    b = StateGraph(ValState)
    b.add_node("set_values", set_values)
    b.add_node("mutate", mutate)
    b.add_edge(START, "set_values")
    b.add_edge("set_values", "mutate")
    b.add_edge("mutate", END)
    g = b.compile(checkpointer=st.saver)
    tid = "t-values"
    st.register(tid, g)
    g.invoke({"messages": [h("set the values", "h-0")]}, st.cfg(tid), **SYNC)
    g.update_state(st.cfg(tid), {"raw": b"updated bytes", "pair": (1, "two", 3.0)}, as_node="mutate")


def add_messages_full():
    from langgraph.graph.message import add_messages

    return add_messages


# ---------------------------------------------------------------------------------------
# DeerFlow-style threads (deerflow.db, mixed.db)
# ---------------------------------------------------------------------------------------


def build_deerflow_graph(messages_ann: Any, saver: Any):
    DFState = TypedDict(
        "DFState",
        {
            "messages": messages_ann,
            "sandbox": Annotated[Optional[dict], merge_sandbox],
            "thread_data": Optional[dict],
            "title": Optional[str],
            "artifacts": Annotated[list, merge_artifacts],
            "todos": Annotated[Optional[list], merge_todos],
        },
    )

    def lead_agent(state: dict) -> dict:
        msgs = state["messages"]
        n = len(msgs)
        last = msgs[-1]
        t = text_of(last)
        if isinstance(last, HumanMessage):
            if t.startswith("setup"):
                return {
                    "messages": [AIMessage(content="Sandbox ready. 沙盒已就绪 ✅", id=f"df-ai-{n}")],
                    "sandbox": {"sandbox_id": "sb-0001"},
                    "thread_data": {
                        "workspace_path": "/mnt/user-data/workspace",
                        "uploads_path": "/mnt/user-data/uploads",
                        "outputs_path": "/mnt/user-data/outputs",
                    },
                    "title": "Fixture thread 标题",
                }
            if t.startswith("plan"):
                return {
                    "messages": [AIMessage(content="Here is the plan.", id=f"df-ai-{n}")],
                    "todos": [
                        {"content": "write the report", "status": "in_progress"},
                        {"content": "review 审阅", "status": "pending"},
                    ],
                    "sandbox": {"sandbox_id": "sb-0001"},
                }
            if t.startswith("write"):
                call = {"name": "write_file", "args": {"path": "/mnt/user-data/outputs/report.md", "content": "# Report\n"}, "id": f"wf_{n}", "type": "tool_call"}
                return {"messages": [AIMessage(content=[{"type": "text", "text": "Writing the file…"}], tool_calls=[call], id=f"df-ai-{n}")]}
            if t.startswith("fix"):
                # in-place replace of the plan message (same id, new content)
                target = next(m for m in msgs if isinstance(m, AIMessage) and text_of(m) == "Here is the plan.")
                return {
                    "messages": [
                        AIMessage(content="Here is the REVISED plan.", id=target.id),
                        AIMessage(content="Fixed the plan in place.", id=f"df-ai-{n}"),
                    ],
                    "todos": [{"content": "write the report", "status": "completed"}],
                }
            return {"messages": [AIMessage(content=f"df echo ({n}): {t}", id=f"df-ai-{n}")]}
        if last.type == "tool":
            return {
                "messages": AIMessage(content="Report written.", id=f"df-ai-{n}"),
                "artifacts": ["/mnt/user-data/outputs/report.md"],
            }
        return {"messages": [AIMessage(content=f"df noted ({n})", id=f"df-ai-{n}")]}

    def route_start(state: dict) -> str:
        return "summarize" if text_of(state["messages"][-1]).startswith("summarize") else "lead_agent"

    def route_agent(state: dict) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    def tools(state: dict) -> dict:
        from langchain_core.messages import ToolMessage

        last = state["messages"][-1]
        return {
            "messages": [
                ToolMessage(content="OK: wrote 9 bytes", tool_call_id=c["id"], name=c["name"], id=f"df-tool-{c['id']}")
                for c in last.tool_calls
            ],
            "artifacts": ["/mnt/user-data/outputs/report.md", "/mnt/user-data/outputs/data.csv"],
        }

    def summarize(state: dict) -> dict:
        msgs = state["messages"]
        n = len(msgs)
        kept = msgs[-2:]
        summary = HumanMessage(content=f"Summary of {n - 2} earlier messages: 用户要求写报告。", id=f"df-summary-{n}")
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *kept, AIMessage(content="Conversation summarized.", id=f"df-ai-{n}")]}

    b = StateGraph(DFState)
    b.add_node("lead_agent", lead_agent)
    b.add_node("tools", tools)
    b.add_node("summarize", summarize)
    b.add_conditional_edges(START, route_start, ["lead_agent", "summarize"])
    b.add_conditional_edges("lead_agent", route_agent, ["tools", END])
    b.add_edge("tools", "lead_agent")
    b.add_edge("summarize", END)
    return b.compile(checkpointer=saver)


def deerflow_turns_part1(g: Any, st: Store, tid: str, marker: bool) -> None:
    g.invoke({"messages": [h("setup the sandbox", "df-h-0")]}, st.cfg(tid, marker=marker), **SYNC)
    g.invoke({"messages": [h("plan the work 计划", "df-h-1")]}, st.cfg(tid, marker=marker), **SYNC)


def deerflow_turns_part2(g: Any, st: Store, tid: str, marker: bool) -> None:
    g.invoke({"messages": [h("write the report", "df-h-2")]}, st.cfg(tid, marker=marker), **SYNC)
    g.invoke({"messages": [h("fix the plan", "df-h-3")]}, st.cfg(tid, marker=marker), **SYNC)
    g.update_state(
        st.cfg(tid, marker=marker),
        {"messages": [h("note added via POST /state", "df-upd-1")]},
        as_node="lead_agent",
    )
    g.update_state(st.cfg(tid, marker=marker), {"messages": [RemoveMessage(id="df-upd-1")]}, as_node="lead_agent")
    g.invoke({"messages": [h("summarize please", "df-h-4")]}, st.cfg(tid, marker=marker), **SYNC)
    g.invoke({"messages": [h("one more question 🙂", "df-h-5")]}, st.cfg(tid, marker=marker), **SYNC)
    g.invoke({"messages": [h("write again", "df-h-6")]}, st.cfg(tid, marker=marker), **SYNC)


def gen_deerflow(st: Store) -> None:
    gd = build_deerflow_graph(messages_annotation("delta", 3, reducer="deerflow"), st.saver)
    tid = "t-deerflow"
    st.register(tid, gd)
    deerflow_turns_part1(gd, st, tid, marker=True)
    deerflow_turns_part2(gd, st, tid, marker=True)
    # a branch from an older checkpoint (DeerFlow "regenerate"-like): new input on the
    # checkpoint right after the plan turn
    cfg_old = find_state(gd, tid, lambda s: s.next == () and ids_of(s)[-1:] == ["df-ai-3"])
    gd.invoke({"messages": [h("regenerate from plan", "df-h-re")]}, with_meta(cfg_old, st, tid, marker=True), **SYNC)

    gf = build_deerflow_graph(messages_annotation("full"), st.saver)
    tid = "t-deerflow-full"
    st.register(tid, gf)
    deerflow_turns_part1(gf, st, tid, marker=False)
    deerflow_turns_part2(gf, st, tid, marker=False)


def gen_mixed(st: Store) -> None:
    gf = build_deerflow_graph(messages_annotation("full"), st.saver)
    gd = build_deerflow_graph(messages_annotation("delta", 3, reducer="deerflow"), st.saver)
    tid = "t-mixed"
    st.register(tid, gd)  # a delta process reads the whole thread
    deerflow_turns_part1(gf, st, tid, marker=False)
    deerflow_turns_part2(gd, st, tid, marker=True)

    # plain LangGraph full -> delta switch without any DeerFlow marker
    cf = build_conv_graph(messages_annotation("full"), st.saver)
    cd = build_conv_graph(messages_annotation("delta", 3), st.saver)
    tid = "t-mixed-lg"
    st.register(tid, cd)
    cf.invoke({"messages": [SystemMessage(content="sys", id="sys-0"), h("calc 5+5", "h-0")]}, st.cfg(tid), **SYNC)
    cf.invoke({"messages": [h("full turn 2", "h-1")]}, st.cfg(tid), **SYNC)
    cd.invoke({"messages": [h("delta turn 3", "h-2")]}, st.cfg(tid), **SYNC)
    cd.invoke({"messages": [h("calc delta 4", "h-3")]}, st.cfg(tid), **SYNC)
    cd.invoke({"messages": [h("delta turn 5", "h-4")]}, st.cfg(tid), **SYNC)


# ---------------------------------------------------------------------------------------
# encrypted.db and pickle.db
# ---------------------------------------------------------------------------------------


def gen_encrypted(st: Store) -> None:
    gf = build_conv_graph(messages_annotation("full"), st.saver)
    gd = build_conv_graph(messages_annotation("delta", 3), st.saver)
    scenario_linear(gf, st, "t-enc-full")
    scenario_linear(gd, st, "t-enc-delta")


def gen_pickle(st: Store) -> None:
    PState = TypedDict("PState", {"messages": Annotated[list, add_messages_full()], "big": Optional[int]})

    def agent(state: dict) -> dict:
        msgs = state["messages"]
        n = len(msgs)
        t = text_of(msgs[-1])
        if t.startswith("big"):
            # > 64 bits: msgpack cannot encode it -> pickle_fallback
            return {"messages": [AIMessage(content="a big number", id=f"ai-{n}")], "big": 2**70 + 7}
        return {"messages": [AIMessage(content=f"small ({n})", id=f"ai-{n}")], "big": n}

    b = StateGraph(PState)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    b.add_edge("agent", END)
    g = b.compile(checkpointer=st.saver)
    tid = "t-pickle"
    st.register(tid, g)
    g.invoke({"messages": [h("hello", "h-0")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("big number please", "h-1")]}, st.cfg(tid), **SYNC)
    g.invoke({"messages": [h("back to small", "h-2")]}, st.cfg(tid), **SYNC)


# ---------------------------------------------------------------------------------------
# Expected JSON
# ---------------------------------------------------------------------------------------


def metadata_is_delta(md: dict) -> bool:
    if not md:
        return False
    if md.get(MARKER_KEY) == "delta":
        return True
    ctr = md.get("counters_since_delta_snapshot")
    return isinstance(ctr, dict) and "messages" in ctr


def messages_encoding(checkpoint: dict) -> str:
    cv = checkpoint.get("channel_values", {})
    if "messages" in cv:
        return "snapshot" if isinstance(cv["messages"], _DeltaSnapshot) else "plain"
    if "messages" in checkpoint.get("channel_versions", {}):
        return "absent"
    return "unversioned"


def graph_for_ns(entry: dict, ns: str) -> Any:
    if ns == "":
        return entry["graph"]
    node = ns.split("|")[-1].split(":")[0]
    return entry["subgraphs"][node]


def checkpoint_expected(st: Store, graph: Any, tid: str, ns: str, cid: str, n_writes: int) -> dict:
    cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
    saved = st.saver.get_tuple(cfg)
    assert saved is not None and saved.checkpoint["id"] == cid
    md = saved.metadata or {}
    snap = graph.get_state(cfg)
    assert snap.config["configurable"]["checkpoint_id"] == cid, (snap.config, cid)
    values = fixturelib.render_values(dict(snap.values))

    # stored: same as _prepare_state_snapshot, minus "apply pending writes"
    saved2 = st.saver.get_tuple(cfg)
    channels, _managed = channels_from_checkpoint(
        graph.channels, saved2.checkpoint, saver=st.saver, config=saved2.config
    )
    stored = fixturelib.render_values(dict(read_channels(channels, graph.stream_channels_asis)))

    null_channels = {w[1] for w in (saved.pending_writes or []) if w[0] == NULL_TASK_ID}
    versions = saved.checkpoint.get("channel_versions", {})
    defaults = [k for k in values if k not in versions and k not in null_channels]

    out: dict[str, Any] = {
        "checkpoint_id": cid,
        "parent_checkpoint_id": (saved.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
        "source": md.get("source"),
        "step": md.get("step"),
        "mode": "delta" if metadata_is_delta(md) else "full",
        "messages_encoding": messages_encoding(saved.checkpoint),
        "writes": n_writes,
        "values": values,
    }
    if stored != values:
        out["stored"] = stored
    if defaults:
        out["graph_defaults"] = defaults
    return out


def thread_mode(namespaces: list[dict]) -> str:
    any_delta = False
    mixed = False
    for ns in namespaces:
        cps = ns["checkpoints"]
        delta_ids = [c["checkpoint_id"] for c in cps if c["mode"] == "delta"]
        if delta_ids:
            any_delta = True
            newest_delta = max(delta_ids)
            if any(
                c["mode"] == "full" and c["messages_encoding"] == "plain" and c["checkpoint_id"] < newest_delta
                for c in cps
            ):
                mixed = True
    if not any_delta:
        return "full"
    return "mixed" if mixed else "delta"


def build_expected(st: Store, dbname: str) -> dict:
    cur = st.conn.cursor()
    threads_out = []
    for tid in sorted(st.threads):
        entry = st.threads[tid]
        # root namespace first, then subgraph namespaces in creation order (oldest id)
        ns_rows = cur.execute(
            "SELECT checkpoint_ns FROM checkpoints WHERE thread_id=? GROUP BY checkpoint_ns"
            " ORDER BY checkpoint_ns != '', MIN(checkpoint_id)",
            (tid,),
        ).fetchall()
        namespaces = []
        any_marker = False
        for (ns,) in ns_rows:
            graph = graph_for_ns(entry, ns)
            rows = cur.execute(
                "SELECT c.checkpoint_id, c.metadata, (SELECT COUNT(*) FROM writes w WHERE w.thread_id=c.thread_id"
                " AND w.checkpoint_ns=c.checkpoint_ns AND w.checkpoint_id=c.checkpoint_id)"
                " FROM checkpoints c WHERE thread_id=? AND checkpoint_ns=? ORDER BY checkpoint_id DESC",
                (tid, ns),
            ).fetchall()
            cps = []
            for cid, md_raw, nw in rows:
                md = json.loads(bytes(md_raw).decode("utf-8")) if md_raw else {}
                if MARKER_KEY in md:
                    any_marker = any_marker or md.get(MARKER_KEY) == "delta"
                cps.append(checkpoint_expected(st, graph, tid, ns, cid, nw))
            namespaces.append({"checkpoint_ns": ns, "checkpoints": cps})
        threads_out.append(
            {
                "thread_id": tid,
                "mode": thread_mode(namespaces),
                "reducer": "deerflow" if any_marker else "langgraph",
                "namespaces": namespaces,
            }
        )
    return {"db": dbname, "versions": versions(), "threads": threads_out, "errors": collect_errors(st)}


def collect_errors(st: Store) -> list[dict]:
    """Rows a reader without Python (or without the key) cannot decode."""
    cur = st.conn.cursor()
    errs = []
    for tid, ns, cid, typ in cur.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, type FROM checkpoints"
        " WHERE type NOT IN ('msgpack', 'null', 'bytes', 'bytearray') OR type IS NULL"
        " ORDER BY thread_id, checkpoint_ns, checkpoint_id"
    ).fetchall():
        what = "pickle checkpoint" if typ == "pickle" else f"{typ} checkpoint"
        errs.append({"what": what, "thread_id": tid, "checkpoint_id": cid, "checkpoint_ns": ns, "type": typ})
    for tid, ns, cid, task_id, idx, ch, typ in cur.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type FROM writes"
        " WHERE type NOT IN ('msgpack', 'null', 'bytes', 'bytearray') OR type IS NULL"
        " ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_path, task_id, idx"
    ).fetchall():
        what = "pickle write" if typ == "pickle" else f"{typ} write"
        errs.append(
            {
                "what": what,
                "thread_id": tid,
                "checkpoint_id": cid,
                "checkpoint_ns": ns,
                "type": typ,
                "task_id": task_id,
                "idx": idx,
                "channel": ch,
            }
        )
    return errs


# ---------------------------------------------------------------------------------------


DBS: list[tuple[str, Any, Any]] = [
    # (name, generator, serde factory)
    ("full", lambda st: gen_twin(st, "full", None), None),
    ("delta_k1", lambda st: gen_twin(st, "delta", 1), None),
    ("delta_k3", lambda st: gen_twin(st, "delta", 3), None),
    ("delta_k10", lambda st: gen_twin(st, "delta", 10), None),
    ("forks_full", lambda st: gen_forks(st, "full", None), None),
    ("forks_delta_k1", lambda st: gen_forks(st, "delta", 1), None),
    ("forks_delta_k4", lambda st: gen_forks(st, "delta", 4), None),
    ("retention", lambda st: __import__("retention").gen_retention(st), None),
    ("retention_race", lambda st: __import__("retention").gen_retention_race(st), None),
    ("exit", gen_exit, None),
    ("subgraph", gen_subgraph, None),
    ("values", gen_values, None),
    ("deerflow", gen_deerflow, None),
    ("mixed", gen_mixed, None),
    ("encrypted", gen_encrypted, lambda: EncryptedSerializer(XorCipher())),
    ("pickle", gen_pickle, lambda: JsonPlusSerializer(pickle_fallback=True)),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures", help="output directory (default: fixtures)")
    ap.add_argument("--only", nargs="*", help="generate only these db stems")
    args = ap.parse_args()
    out = Path(args.out)
    sqlite_dir = out / "sqlite"
    exp_dir = out / "expected"
    sqlite_dir.mkdir(parents=True, exist_ok=True)
    exp_dir.mkdir(parents=True, exist_ok=True)
    for name, gen, serde in DBS:
        if args.only and name not in args.only:
            continue
        path = sqlite_dir / f"{name}.db"
        st = Store(path, serde() if serde else None)
        gen(st)
        st.conn.commit()
        expected = build_expected(st, path.name)
        st.close()
        text = json.dumps(expected, ensure_ascii=False, indent=1) + "\n"
        (exp_dir / f"{name}.json").write_text(text, encoding="utf-8")
        n_cp = sum(len(ns["checkpoints"]) for t in expected["threads"] for ns in t["namespaces"])
        print(f"{path}: {len(expected['threads'])} threads, {n_cp} checkpoints, {path.stat().st_size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
