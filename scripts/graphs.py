"""Graph definitions shared by the fixture and perf scripts.

Everything here drives the real LangGraph library (StateGraph + a real saver). The
"models" are deterministic scripted nodes: message ids and contents are a pure function
of the conversation so far, so regenerating the fixtures gives identical content.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Optional

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, _messages_delta_reducer, add_messages
from langgraph.types import Command, Overwrite, Send, interrupt
from typing_extensions import TypedDict

# ---------------------------------------------------------------------------------------
# DeerFlow-compatible reducers (re-implemented from docs/replay-and-forks.md#reducers)
# ---------------------------------------------------------------------------------------


def _null_write_error(have_messages: bool) -> ValueError:
    side = "left" if have_messages else "right"
    return ValueError(
        "Must specify non-null arguments for both 'left' and 'right'. "
        f"Only received: '{side}'."
    )


def _as_message_list(value: Any) -> list[BaseMessage]:
    """Coerce a write (one message-like or a list of them) to messages with ids."""
    items = value if isinstance(value, list) else [value]
    out: list[BaseMessage] = []
    for m in convert_to_messages(items):
        m = message_chunk_to_message(m)
        if m.id is None:
            m.id = str(uuid.uuid4())
        out.append(m)
    return out


def df_merge_message_writes(state: Sequence[Any], writes: Sequence[Any]) -> list[BaseMessage]:
    """Batch messages reducer with sequential ``add_messages`` semantics.

    Per write, in order:
    * a ``RemoveMessage(REMOVE_ALL_MESSAGES)`` in the write resets the state to the
      items after the last such marker of that write;
    * otherwise a message whose id is known replaces the slot in place (at the id's
      latest position), a ``RemoveMessage`` of a known id schedules its removal
      (all positions, applied at the end of the write; a later non-remove message of
      the same id in the write cancels it), a ``RemoveMessage`` of an unknown id
      raises ``ValueError``, anything else is appended.
    """
    if not writes:
        return list(state)
    if writes[0] is None:
        raise _null_write_error(bool(state))

    slots: list[Optional[BaseMessage]] = list(_as_message_list(list(state))) if state else []
    last_pos: dict[str, int] = {}
    positions: dict[str, list[int]] = {}

    def reindex() -> None:
        last_pos.clear()
        positions.clear()
        for i, m in enumerate(slots):
            if m is not None:
                last_pos[m.id] = i
                positions.setdefault(m.id, []).append(i)

    reindex()
    for write in writes:
        if write is None:
            raise _null_write_error(bool(last_pos))
        batch = _as_message_list(write)
        reset_at = -1
        for i, m in enumerate(batch):
            if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES:
                reset_at = i
        if reset_at >= 0:
            slots = list(batch[reset_at + 1 :])
            reindex()
            continue
        pending_removal: set[str] = set()
        for m in batch:
            at = last_pos.get(m.id)
            if at is None:
                if isinstance(m, RemoveMessage):
                    raise ValueError(
                        f"Attempting to delete a message with an ID that doesn't exist ('{m.id}')"
                    )
                last_pos[m.id] = len(slots)
                positions[m.id] = [len(slots)]
                slots.append(m)
            elif isinstance(m, RemoveMessage):
                pending_removal.add(m.id)
            else:
                pending_removal.discard(m.id)
                slots[at] = m
        for mid in pending_removal:
            for i in positions.pop(mid):
                slots[i] = None
            del last_pos[mid]
    return [m for m in slots if m is not None]


def merge_sandbox(existing: Optional[dict], new: Optional[dict]) -> Optional[dict]:
    if new is None:
        return existing
    if existing is None:
        return new
    if existing.get("sandbox_id") == new.get("sandbox_id"):
        return existing
    raise ValueError(
        f"Conflicting sandbox state updates: {existing.get('sandbox_id')!r} != {new.get('sandbox_id')!r}"
    )


def merge_artifacts(existing: Optional[list], new: Optional[list]) -> list:
    if existing is None:
        return new or []
    if new is None:
        return existing
    return list(dict.fromkeys(existing + new))


def merge_todos(existing: Optional[list], new: Optional[list]) -> Optional[list]:
    return existing if new is None else new


# ---------------------------------------------------------------------------------------
# messages annotations
# ---------------------------------------------------------------------------------------


def messages_annotation(mode: str, k: int | None = None, reducer: str = "langgraph") -> Any:
    """mode 'full' -> add_messages; 'delta' -> DeltaChannel(<reducer>, snapshot_frequency=k)."""
    if mode == "full":
        return Annotated[list, add_messages]
    fn = _messages_delta_reducer if reducer == "langgraph" else df_merge_message_writes
    return Annotated[list, DeltaChannel(fn, snapshot_frequency=k)]


def text_of(m: Any) -> str:
    c = getattr(m, "content", "")
    if isinstance(c, str):
        return c
    parts = []
    for b in c:
        if isinstance(b, dict) and b.get("type") == "text":
            parts.append(b.get("text", ""))
        elif isinstance(b, str):
            parts.append(b)
    return " ".join(parts)


# ---------------------------------------------------------------------------------------
# The scenario conversation graph (used by the full/delta twins, exit, encrypted...)
# ---------------------------------------------------------------------------------------


def build_conv_graph(messages_ann: Any, checkpointer: Any):
    ConvState = TypedDict("ConvState", {"messages": messages_ann})

    def route_start(state: dict) -> str:
        t = text_of(state["messages"][-1])
        if t.startswith("fan"):
            return "fan"
        if t.startswith("ask"):
            return "approve"
        return "agent"

    def agent(state: dict) -> dict:
        msgs = state["messages"]
        n = len(msgs)
        last = msgs[-1]
        t = text_of(last)
        if isinstance(last, HumanMessage):
            if t == "boom":
                raise ValueError("boom")
            if t.startswith("calc"):
                call = {"name": "add", "args": {"a": n, "b": 2}, "id": f"call_{n}", "type": "tool_call"}
                return {"messages": [AIMessage(content="", tool_calls=[call], id=f"ai-{n}")]}
            if t.startswith("overwrite"):
                return {
                    "messages": Overwrite(
                        [msgs[0], AIMessage(content=f"history reset by node at {n}", id=f"ai-{n}")]
                    )
                }
            if "blocks" in t:
                content = [
                    {"type": "text", "text": f"block reply {n}"},
                    {"type": "text", "text": "第二块 🚀 ünïcödé"},
                ]
                return {"messages": [AIMessage(content=content, id=f"ai-{n}")]}
            return {"messages": [AIMessage(content=f"echo({n}): {t}", id=f"ai-{n}")]}
        if isinstance(last, ToolMessage):
            # bare message (not a list) on purpose: a bare ext-5 write value
            return {"messages": AIMessage(content=f"The sum is {last.content}.", id=f"ai-{n}")}
        return {"messages": [AIMessage(content=f"noted ({n})", id=f"ai-{n}")]}

    def route_agent(state: dict) -> str:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.tool_calls:
            return "tools"
        return END

    def tools(state: dict) -> dict:
        last = state["messages"][-1]
        out = []
        for c in last.tool_calls:
            out.append(
                ToolMessage(
                    content=str(c["args"]["a"] + c["args"]["b"]),
                    tool_call_id=c["id"],
                    name=c["name"],
                    id=f"tool-{c['id']}",
                )
            )
        return {"messages": out}

    def fan(state: dict) -> dict:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"fanning out at {n}", id=f"fan-{n}")]}

    def route_fan(state: dict) -> list:
        n = len(state["messages"])
        return [Send("worker", {"i": i, "n": n}) for i in range(3)]

    def worker(arg: dict) -> dict:
        i, n = arg["i"], arg["n"]
        return {"messages": [AIMessage(content=f"worker {i} 结果 #{n}", id=f"w{i}-{n}")]}

    def approve(state: dict) -> dict:
        n = len(state["messages"])
        answer = interrupt({"question": "approve?", "n": n})
        return {"messages": [AIMessage(content=f"approved: {answer}", id=f"ap-{n}")]}

    b = StateGraph(ConvState)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_node("fan", fan)
    b.add_node("worker", worker)
    b.add_node("approve", approve)
    b.add_conditional_edges(START, route_start, ["agent", "fan", "approve"])
    b.add_conditional_edges("agent", route_agent, ["tools", END])
    b.add_edge("tools", "agent")
    b.add_conditional_edges("fan", route_fan, ["worker"])
    b.add_edge("worker", END)
    b.add_edge("approve", END)
    return b.compile(checkpointer=checkpointer)


# ---------------------------------------------------------------------------------------
# Simple perf graph: each invoke appends the input messages (human + ai), one node
# ---------------------------------------------------------------------------------------


def build_append_graph(messages_ann: Any, checkpointer: Any):
    S = TypedDict("AppendState", {"messages": messages_ann})

    def noop(state: dict) -> dict:
        return {}

    b = StateGraph(S)
    b.add_node("noop", noop)
    b.add_edge(START, "noop")
    b.add_edge("noop", END)
    return b.compile(checkpointer=checkpointer)


def continue_thread(graph: Any, thread_id: str, after: str) -> Optional[str]:
    """One more turn on a thread with the real library, as the read-back checks do after a
    dfck write: `Command(resume)` on a head waiting on an interrupt, else a new human message
    (id `h-<after>-<thread>`). Returns what went wrong, or None when the new head extends the
    old one."""
    cfg = {"configurable": {"thread_id": thread_id}}
    try:
        before = graph.get_state(cfg)
        old = [m.id for m in before.values.get("messages", [])]
        if before.interrupts:
            graph.invoke(Command(resume=f"approved after {after}"), cfg)
        else:
            msg = HumanMessage(content=f"continue after {after}", id=f"h-{after}-{thread_id}")
            graph.invoke({"messages": [msg]}, cfg)
        new = [m.id for m in graph.get_state(cfg).values.get("messages", [])]
    except Exception as e:  # noqa: BLE001
        return f"continuing raised {type(e).__name__}: {e}"
    if new[: len(old)] != old or len(new) <= len(old):
        return f"the continued head does not extend the old one ({len(old)} → {len(new)})"
    return None


__all__ = [
    "AIMessage",
    "HumanMessage",
    "RemoveMessage",
    "SystemMessage",
    "ToolMessage",
    "Overwrite",
    "REMOVE_ALL_MESSAGES",
    "build_conv_graph",
    "build_append_graph",
    "continue_thread",
    "df_merge_message_writes",
    "merge_artifacts",
    "merge_sandbox",
    "merge_todos",
    "messages_annotation",
    "text_of",
]
