#!/usr/bin/env python3
"""Long threads for the regenerate-reach checks (`lineage.regenerate_budget`), written by the
real LangGraph (StateGraph + SqliteSaver, DeltaChannel messages, snapshot_frequency 50):

    .venv/bin/python scripts/gen_long_threads.py --out fixtures/sqlite/long_threads.db

* t-100-turns: 100 turns, each a human question, an AI tool call, the tool's answer and a
  final AI answer (a DeerFlow-shaped exchange): about 500 checkpoints, so DeerFlow's
  400-checkpoint regenerate walk reaches only the newest turns (a warning, no error);
* t-long-turn: one short turn, then one turn with 210 tool calls in a row (over 400
  checkpoints in the last turn): even the last turn is out of reach (an error).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from graphs import AIMessage, HumanMessage, ToolMessage, messages_annotation  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402


def build(saver):
    S = TypedDict("S", {"messages": messages_annotation("delta", 50)})

    def agent(state: dict) -> dict:
        msgs = state["messages"]
        n = len(msgs)
        # The human message of this turn says how many tool calls to make in a row.
        human_at = max(i for i, m in enumerate(msgs) if isinstance(m, HumanMessage))
        calls_wanted = int(msgs[human_at].content.split()[-1])
        calls_done = sum(1 for m in msgs[human_at:] if isinstance(m, ToolMessage))
        if calls_done < calls_wanted:
            call = {"name": "add", "args": {"a": n, "b": 1}, "id": f"call-{n}", "type": "tool_call"}
            return {"messages": [AIMessage(content="", tool_calls=[call], id=f"ai-{n}")]}
        return {"messages": [AIMessage(content=f"done after {calls_done} call(s)", id=f"ai-{n}")]}

    def route(state: dict) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    def tools(state: dict) -> dict:
        c = state["messages"][-1].tool_calls[0]
        out = ToolMessage(content=str(c["args"]["a"] + 1), tool_call_id=c["id"], name="add", id=f"tool-{c['id']}")
        return {"messages": [out]}

    b = StateGraph(S)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", route, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=saver)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out)
    for suffix in ("", "-wal", "-shm"):
        Path(str(out) + suffix).unlink(missing_ok=True)
    conn = sqlite3.connect(str(out), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    g = build(saver)
    cfg = {"configurable": {"thread_id": "t-100-turns"}, "recursion_limit": 10_000}
    for i in range(100):
        g.invoke({"messages": [HumanMessage(content=f"turn {i}: calls 1", id=f"h-{i}")]}, cfg)
    cfg = {"configurable": {"thread_id": "t-long-turn"}, "recursion_limit": 10_000}
    g.invoke({"messages": [HumanMessage(content="warm up: calls 1", id="h-0")]}, cfg)
    g.invoke({"messages": [HumanMessage(content="a long turn: calls 210", id="h-1")]}, cfg)
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
