"""Retention scenarios for `dfck prune` (fixtures retention.db / retention.sql), written by
the real LangGraph through the saver that `st` wraps (gen_fixtures.Store or
gen_pg_fixtures.PgStore): conversations on the conversation graph of graphs.py, each run
followed by a duration-only checkpoint exactly as DeerFlow's run worker writes one
(`persist_run_durations`: the latest checkpoint copied with a fresh id and ts, the same
channel versions and no new blobs, metadata plus `source: update`, `step + 1`,
`run_durations` and `writes.runtime_run_duration`, parent = that checkpoint), put through
the saver's own `put`.

Every thread exists twice: `…-full` (add_messages) and `…-delta` (DeltaChannel, K=3).

  r-linear     three turns (one with a tool call), each followed by its duration-only
               checkpoint: the last one is a trailing duration-only leaf (E1)
  r-branch     two turns, then a new turn from the end of turn 1 (a regenerate-style
               branch): the superseded turn-2 line is a leaf branch (E2)
  r-interrupt  a turn; a branch from its end that stops at an interrupt (a leaf that
               owns pending writes); then a new turn from the end of the first turn
  r-cut        five turns, for --keep-last-turns

The race fixture (retention_race.db / retention_race.sql, gen_retention_race) holds the shape
in which DeerFlow's run worker writes its duration-only checkpoint late:

  r-late-duration  a turn; a second run whose worker read "latest" at its end (Z); then the
               user edits the second message (a new run from the end of turn 1, E, with its
               own duration-only checkpoint); only then does the first worker write its
               duration-only copy of Z. The newest checkpoint, the one LangGraph resumes, is
               that copy, on the older branch: pruning it would switch the conversation to E.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base.id import uuid6

from graphs import build_conv_graph, messages_annotation

SYNC = {"durability": "sync"}


def h(text: str, mid: str) -> HumanMessage:
    return HumanMessage(content=text, id=mid)


def latest(st: Any, tid: str) -> Any:
    return st.saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ""}})


def add_duration_only(st: Any, tid: str, seconds: float, tup: Any = None) -> None:
    """DeerFlow's duration-only checkpoint after a run (see the module docstring): a copy of
    the latest checkpoint, or of `tup` (the one the run's worker read when the run ended)."""
    if tup is None:
        tup = latest(st, tid)
    ck = dict(tup.checkpoint)
    ck["id"] = str(uuid6())
    ck["ts"] = datetime.now(timezone.utc).isoformat()
    md = dict(tup.metadata)
    run_id = str(md.get("run_id", "run"))
    md["source"] = "update"
    md["step"] = int(md.get("step", 0)) + 1
    md["run_durations"] = {run_id: seconds}
    md["writes"] = {"runtime_run_duration": {"run_ids": [run_id], "message_ids": []}}
    st.saver.put(tup.config, ck, md, {})


def turn(g: Any, st: Any, tid: str, text: str, mid: str, at: Any = None) -> None:
    """One run (from the latest checkpoint, or from config `at`) and its duration-only
    checkpoint."""
    cfg = st.cfg(tid)
    if at is not None:
        cfg = {"configurable": dict(at["configurable"]), "metadata": cfg["metadata"]}
    g.invoke({"messages": [h(text, mid)]}, cfg, **SYNC)
    add_duration_only(st, tid, 1.25)


def r_linear(g: Any, st: Any, tid: str) -> None:
    st.register(tid, g)
    turn(g, st, tid, "calc 1+1", "h-0")
    turn(g, st, tid, "hello there", "h-1")
    turn(g, st, tid, "calc 2+2", "h-2")


def r_branch(g: Any, st: Any, tid: str) -> None:
    st.register(tid, g)
    turn(g, st, tid, "calc 1+1", "h-0")
    end_of_turn_1 = latest(st, tid).config
    turn(g, st, tid, "first answer please", "h-1")
    turn(g, st, tid, "regenerated turn two", "h-1b", at=end_of_turn_1)


def r_interrupt(g: Any, st: Any, tid: str) -> None:
    st.register(tid, g)
    turn(g, st, tid, "hello", "h-0")
    end_of_turn_1 = latest(st, tid).config
    cfg = st.cfg(tid)
    g.invoke(
        {"messages": [h("ask for approval", "h-ask")]},
        {"configurable": dict(end_of_turn_1["configurable"]), "metadata": cfg["metadata"]},
        **SYNC,
    )
    turn(g, st, tid, "calc 3+3", "h-1", at=end_of_turn_1)


def r_cut(g: Any, st: Any, tid: str) -> None:
    st.register(tid, g)
    for n, text in enumerate(["calc 1+1", "hello", "calc 2+2", "more", "calc 3+3"]):
        turn(g, st, tid, text, f"h-{n}")


def r_late_duration(g: Any, st: Any, tid: str) -> None:
    st.register(tid, g)
    turn(g, st, tid, "calc 1+1", "h-0")
    end_of_turn_1 = latest(st, tid).config
    cfg = st.cfg(tid)
    g.invoke({"messages": [h("hello there", "h-1")]}, cfg, **SYNC)
    run_2_end = latest(st, tid)
    turn(g, st, tid, "hello there, edited", "h-1e", at=end_of_turn_1)
    add_duration_only(st, tid, 2.5, run_2_end)


SCENARIOS = [("r-linear", r_linear), ("r-branch", r_branch), ("r-interrupt", r_interrupt), ("r-cut", r_cut)]


def gen_retention(st: Any) -> None:
    for mode, k in (("full", None), ("delta", 3)):
        g = build_conv_graph(messages_annotation(mode, k), st.saver)
        for tid, fn in SCENARIOS:
            fn(g, st, f"{tid}-{mode}")


def gen_retention_race(st: Any) -> None:
    for mode, k in (("full", None), ("delta", 3)):
        g = build_conv_graph(messages_annotation(mode, k), st.saver)
        r_late_duration(g, st, f"r-late-duration-{mode}")
