#!/usr/bin/env python3
"""The `langgraph` engine of `dfck bench production`: one case on the real Python LangGraph.

    python scripts/bench_worker_langgraph_production.py --worker-case '<compact case JSON>'
    python scripts/bench_worker_langgraph_production.py --identity   # identity fields, one line

The dfck controller runs this once per case (docs/bench-rows.md#child-processes). It runs the
same DeerFlow-shaped turns as dfck's native production engine (src/bench/production/workload.rs)
through a real LangGraph `StateGraph` and a real saver, then reads state and history back
through the real graph, and prints ONE compact JSON row on stdout with the native engine's
field names and order. Exit 0 (success), 1 (the case failed), 2 (unusable case JSON; minimal
row with "benchmark").

The graph: nodes `before_agent`, `model`, `tools`, `after_model`, `after_agent`. Every edge is a
conditional edge driven by the turn's script (the next scripted step's node, or END), so a
generated turn runs before_agent -> model -> tools -> model -> after_model -> after_agent (one
input checkpoint plus seven loop checkpoints: 8 per turn, like the native engine) and a replayed
turn runs model/tools steps only, exactly as the native engine's `replay_turns` splits it. The
"model" is scripted: each node returns the writes the native workload gives its step.

Channels (ThreadState-like): `messages` (full: `add_messages`; delta: `DeltaChannel` with the
channel worker's DeerFlow-style batch reducer at `snapshot_frequency=F`, plus the
`deerflow_checkpoint_channel_mode: delta` marker in the config metadata), `artifacts` (list
union), `delegations` (upsert by `id`), `viewed_images` (dict merge), and last-value channels
`thread_data`, `uploaded_files`, `sandbox`, `skill_context`, `todos`, `title`.

Backends: sqlite (SqliteSaver on `production-benchmark.sqlite` in a fresh temporary directory
`deerflow-checkpoint-production-*` honouring TMPDIR, deleted afterwards) and postgres
(PostgresSaver on env DFCK_BENCH_PG_URL, a unique thread per case, only that thread deleted
afterwards). Rows never contain the temporary path, a database path or the PostgreSQL URL.
Requires: langgraph 1.2.x, langgraph-checkpoint-sqlite, langgraph-checkpoint-postgres, psycopg.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any, Callable, Sequence

# The channel worker next to this file holds the shared helpers (identity, redaction, RSS,
# statistics, the digest (docs/bench-rows.md#digests), the DeerFlow-style delta reducer, storage statistics).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_worker_langgraph import (  # noqa: E402
    digest,
    emit,
    file_size,
    identity,
    merge_message_writes,
    nearest_rank,
    peak_rss,
    postgres_stats,
    safe_error,
    sqlite_stats,
)

SCHEMA_VERSION = 2
BENCHMARK_VERSION = 1
BENCHMARK = "checkpoint_production"
TEMP_PREFIX = "deerflow-checkpoint-production-"
PG_URL_ENV = "DFCK_BENCH_PG_URL"
WARMUP_TURNS = 2
HISTORY_LIMIT_CAP = 100
DB_NAME = "production-benchmark.sqlite"
# The fixed date of the reminder message (docs/bench-rows.md#workloads), as in workload.rs.
FIXED_DATE = "2026-01-01, Thursday"
NODES = ("before_agent", "model", "tools", "after_model", "after_agent")


# ---------------------------------------------------------------------------------------------
# Case
# ---------------------------------------------------------------------------------------------


class CaseError(ValueError):
    """The case JSON is unusable (exit 2)."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_case(text: str) -> dict[str, Any]:
    """Decodes and validates a case like dfck's `ProductionCase::validate`."""
    try:
        m = json.loads(text)
    except json.JSONDecodeError as e:
        raise CaseError(f"invalid case: {e}") from None
    if not isinstance(m, dict):
        raise CaseError("invalid case: expected a JSON object")
    for key in (
        "mode",
        "turns",
        "payload_bytes",
        "snapshot_frequency",
        "history_limits",
        "read_repetitions",
        "repetition",
        "seed",
    ):
        if key not in m:
            raise CaseError(f"invalid case: missing field `{key}`")
    if m["mode"] not in ("full", "delta"):
        raise CaseError(f"invalid case: unknown mode {json.dumps(m['mode'])}")
    m.setdefault("backend", "sqlite")
    if m["backend"] not in ("sqlite", "postgres"):
        raise CaseError("bench production runs on sqlite or postgres")
    m.setdefault("engine", "langgraph")
    if m["engine"] != "langgraph":
        raise CaseError(f"this worker runs the langgraph engine; the case asks for '{m['engine']}'")
    for key in ("turns", "payload_bytes", "read_repetitions", "repetition", "seed"):
        if not _is_int(m[key]):
            raise CaseError(f"invalid case: {key} must be an integer")
    if m["turns"] <= WARMUP_TURNS:
        raise CaseError("turns must exceed the 2-turn warm-up")
    if m["payload_bytes"] <= 0:
        raise CaseError("payload_bytes must be positive")
    f = m["snapshot_frequency"]
    if m["mode"] == "full" and f is not None:
        raise CaseError("snapshot_frequency is a delta-only axis")
    if m["mode"] == "delta" and (not _is_int(f) or f <= 0):
        raise CaseError("delta cases need a positive snapshot_frequency")
    limits = m["history_limits"]
    if not isinstance(limits, list) or not all(_is_int(x) for x in limits):
        raise CaseError("invalid case: history_limits must be a list of integers")
    if any(x <= 0 for x in limits):
        raise CaseError("history limits must be positive")
    if m["read_repetitions"] <= 0:
        raise CaseError("read_repetitions must be positive")
    if m["repetition"] < 0:
        raise CaseError("invalid case: repetition must be non-negative")
    replay = m.get("replay")
    if replay is not None and (
        not isinstance(replay, dict)
        or not isinstance(replay.get("messages_file"), str)
        or not isinstance(replay.get("source_thread_sha256"), str)
    ):
        raise CaseError("invalid case: replay needs messages_file and source_thread_sha256")
    return m


def base_row(case: dict[str, Any], ident: dict[str, Any]) -> dict[str, Any]:
    """The identity fields, in dfck's `production_base_row` order."""
    row = {
        "schema_version": SCHEMA_VERSION,
        "benchmark_version": BENCHMARK_VERSION,
        "benchmark": BENCHMARK,
        "success": True,
        "error": None,
        "profiled": False,
        "git_sha": ident["git_sha"],
        "python_version": ident["python_version"],
        "langgraph_version": ident["langgraph_version"],
        "platform": ident["platform"],
        "engine": "langgraph",
        "engine_version": ident["langgraph_version"],
        "runtime_version": ident["runtime_version"],
        "backend": case["backend"],
        "mode": case["mode"],
        "snapshot_frequency": case["snapshot_frequency"],
        "turns": case["turns"],
        "payload_bytes": case["payload_bytes"],
        "history_limits": case["history_limits"],
        "read_repetitions": case["read_repetitions"],
        "repetition": case["repetition"],
        "seed": case["seed"],
    }
    if case.get("replay") is not None:
        row["source_thread_sha256"] = case["replay"]["source_thread_sha256"]
    return row


def effective_limits(limits: Sequence[int]) -> list[int]:
    """min(l, 100), duplicates dropped, order kept (docs/bench-rows.md#production-reads-and-wire-digests)."""
    out: list[int] = []
    for x in limits:
        e = min(x, HISTORY_LIMIT_CAP)
        if e not in out:
            out.append(e)
    return out


# ---------------------------------------------------------------------------------------------
# Workload: the native engine's turns (workload.rs), step by step
# ---------------------------------------------------------------------------------------------

# A step is (node, [(channel, value), ...]); a turn is a list of steps, the first "__input__".
Step = tuple[str, list[tuple[str, Any]]]


def generated_turn(t: int, p: int) -> list[Step]:
    """Turn `t` of the generated workload, exactly as workload.rs `generated_turn`."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    call_id = f"call-{t:08d}"
    path = f"/mnt/user-data/outputs/turn-{t:08d}.md"
    if t == 0:
        inputs: list[Any] = [
            SystemMessage(
                content=(
                    f"<system-reminder><current_date>{FIXED_DATE}</current_date>"
                    "</system-reminder>"
                ),
                id="bench-h-00000000",
            ),
            HumanMessage(content="y" * p, id="bench-h-00000000__user"),
        ]
    else:
        inputs = [HumanMessage(content="y" * p, id=f"bench-h-{t:08d}")]
    before: list[tuple[str, Any]] = []
    if t == 0:
        before += [
            (
                "thread_data",
                {
                    "workspace_path": "/mnt/user-data/workspace",
                    "uploads_path": "/mnt/user-data/uploads",
                    "outputs_path": "/mnt/user-data/outputs",
                },
            ),
            ("uploaded_files", []),
            ("sandbox", {"sandbox_id": "bench-sandbox"}),
        ]
    before.append(
        (
            "skill_context",
            [
                {
                    "name": "bench-skill",
                    "path": "/mnt/skills/public/bench/SKILL.md",
                    "description": "deterministic benchmark skill",
                    "loaded_at": t,
                }
            ],
        )
    )
    tool_call = {"name": "write_file", "args": {"path": path}, "id": call_id, "type": "tool_call"}
    after_model: list[tuple[str, Any]] = [
        ("todos", [{"content": f"turn {t}", "status": "completed"}])
    ]
    if t % 5 == 0:
        after_model.append(
            (
                "delegations",
                [{"id": f"delegation-{t:08d}", "status": "completed", "run_id": "bench-run"}],
            )
        )
    after_agent: list[tuple[str, Any]] = [
        ("viewed_images", {path: {"mime_type": "text/markdown", "size": p}})
    ]
    if t == 0:
        after_agent.append(("title", "Benchmark conversation"))
    return [
        ("__input__", [("messages", inputs)]),
        ("before_agent", before),
        (
            "model",
            [
                (
                    "messages",
                    AIMessage(content="", id=f"bench-ai-{t:08d}-call", tool_calls=[tool_call]),
                )
            ],
        ),
        (
            "tools",
            [
                (
                    "messages",
                    ToolMessage(
                        content="z" * p,
                        id=f"bench-tool-{t:08d}",
                        tool_call_id=call_id,
                        status="success",
                    ),
                ),
                ("artifacts", [path]),
            ],
        ),
        ("model", [("messages", AIMessage(content="x" * p, id=f"bench-ai-{t:08d}"))]),
        ("after_model", after_model),
        ("after_agent", after_agent),
    ]


def replay_turns(messages: Sequence[Any]) -> list[list[Step]]:
    """A real thread's messages as turns, exactly as workload.rs `replay_turns`: a turn starts
    at each human message (leading non-human messages join the first turn); its input runs up
    to and including its first human message, every further message is one model (or, for a
    tool message, tools) step."""
    groups: list[list[Any]] = []
    for m in messages:
        human = m.type == "human"
        if groups and (not human or all(x.type != "human" for x in groups[-1])):
            groups[-1].append(m)
        else:
            groups.append([m])
    turns = []
    for msgs in groups:
        first = next((i + 1 for i, m in enumerate(msgs) if m.type == "human"), 1)
        steps: list[Step] = [("__input__", [("messages", list(msgs[:first]))])]
        for m in msgs[first:]:
            steps.append(("tools" if m.type == "tool" else "model", [("messages", m)]))
        turns.append(steps)
    return turns


def load_replay(messages_file: str) -> list[Any]:
    """The replayed thread's messages, decoded with LangGraph's own serializer."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    try:
        data = Path(messages_file).read_bytes()
    except OSError as e:
        raise RuntimeError(f"cannot read the replayed thread's messages: {e}") from None
    value = JsonPlusSerializer().loads_typed(("msgpack", data))
    if not isinstance(value, list):
        raise RuntimeError("the replayed thread's messages are not a list")
    return value


def case_turns(case: dict[str, Any]) -> list[list[Step]]:
    if case.get("replay") is not None:
        return replay_turns(load_replay(case["replay"]["messages_file"]))
    return [generated_turn(t, case["payload_bytes"]) for t in range(case["turns"])]


def written_messages(turns: Sequence[Sequence[Step]]) -> list[Any]:
    out: list[Any] = []
    for steps in turns:
        for _node, writes in steps:
            for ch, v in writes:
                if ch == "messages":
                    out.extend(v if isinstance(v, list) else [v])
    return out


# ---------------------------------------------------------------------------------------------
# Reducers of the ThreadState-like channels (this project's own code)
# ---------------------------------------------------------------------------------------------


def union_list(old: list | None, new: list | None) -> list:
    """`artifacts`: the old items, then every new item not already present."""
    out = list(old or [])
    for x in new or []:
        if x not in out:
            out.append(x)
    return out


def upsert_by_id(old: list | None, new: list | None) -> list:
    """`delegations`: an item replaces the one with its `id`, else it is appended."""
    out = list(old or [])
    for x in new or []:
        key = x.get("id") if isinstance(x, dict) else None
        at = next(
            (
                i
                for i, y in enumerate(out)
                if key is not None and isinstance(y, dict) and y.get("id") == key
            ),
            None,
        )
        if at is None:
            out.append(x)
        else:
            out[at] = x
    return out


def merge_dict(old: dict | None, new: dict | None) -> dict:
    """`viewed_images`: dict merge, the new value wins per key (insertion order kept)."""
    out = dict(old or {})
    out.update(new or {})
    return out


# ---------------------------------------------------------------------------------------------
# The graph
# ---------------------------------------------------------------------------------------------


class Script:
    """The scripted model: the current turn's remaining steps (set before each invoke)."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.i = 0

    def load(self, steps: Sequence[Step]) -> None:
        self.steps = list(steps)
        self.i = 0

    def next_node(self) -> str:
        from langgraph.graph import END

        return self.steps[self.i][0] if self.i < len(self.steps) else END

    def take(self, node: str) -> dict[str, Any]:
        if self.i >= len(self.steps) or self.steps[self.i][0] != node:
            raise RuntimeError(f"node {node} ran out of script order")
        writes = dict(self.steps[self.i][1])
        self.i += 1
        return writes


def state_schema(mode: str, frequency: int | None) -> Any:
    from langchain_core.messages import AnyMessage
    from langgraph.channels import DeltaChannel
    from langgraph.graph.message import add_messages
    from typing_extensions import TypedDict

    if mode == "full":
        messages: Any = Annotated[list[AnyMessage], add_messages]
    else:
        messages = Annotated[
            list[AnyMessage],
            DeltaChannel(merge_message_writes, snapshot_frequency=frequency or 1),
        ]
    return TypedDict(
        "BenchThreadState",
        {
            "messages": messages,
            "thread_data": Any,
            "uploaded_files": Any,
            "sandbox": Any,
            "skill_context": Any,
            "artifacts": Annotated[list, union_list],
            "todos": Any,
            "delegations": Annotated[list, upsert_by_id],
            "viewed_images": Annotated[dict, merge_dict],
            "title": Any,
        },
        total=False,
    )


def build_graph(mode: str, frequency: int | None, saver: Any, script: Script) -> Any:
    """The production-shaped graph over `saver`; every edge follows the script."""
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(state_schema(mode, frequency))
    targets = [*NODES, END]

    def route(_state: Any) -> str:
        return script.next_node()

    def node(name: str) -> Callable[[Any], dict[str, Any]]:
        def run(_state: Any) -> dict[str, Any]:
            return script.take(name)

        run.__name__ = name
        return run

    for name in NODES:
        builder.add_node(name, node(name))
    builder.add_conditional_edges(START, route, targets)
    for name in NODES:
        builder.add_conditional_edges(name, route, targets)
    return builder.compile(checkpointer=saver)


def run_config(mode: str, thread_id: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "configurable": {"thread_id": thread_id, "__deerflow_checkpoint_channel_mode": mode}
    }
    if mode == "delta":
        config["metadata"] = {"deerflow_checkpoint_channel_mode": "delta"}
    return config


# ---------------------------------------------------------------------------------------------
# Timing proxy, digests, rendering
# ---------------------------------------------------------------------------------------------


class WriteTimer:
    """Wraps a saver instance's `put` and `put_writes` (instance attributes, signatures kept,
    so the saver stays a real `BaseCheckpointSaver`) and records each call's interval; the
    writes of one turn may run concurrently on LangGraph's background executor."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.lock = threading.Lock()
        self.intervals: list[tuple[float, float]] = []
        self.puts = 0
        for name in ("put", "put_writes"):
            setattr(saver, name, self._wrap(name, getattr(saver, name)))

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            a = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                b = time.perf_counter()
                with self.lock:
                    self.intervals.append((a, b))
                    if name == "put":
                        self.puts += 1

        return timed

    def take(self) -> list[tuple[float, float]]:
        with self.lock:
            out, self.intervals = self.intervals, []
        return out

    def remove(self) -> None:
        """Back to the raw saver (the class's own methods)."""
        for name in ("put", "put_writes"):
            self.saver.__dict__.pop(name, None)


def merged_busy_ms(intervals: Sequence[tuple[float, float]]) -> float:
    """Length of the union of the intervals (docs/bench-rows.md#workloads), in ms."""
    total = 0.0
    end = None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total * 1000.0


def wire_digest(messages: Sequence[Any]) -> str:
    """The wire digest (docs/bench-rows.md#production-reads-and-wire-digests): [type, id, content] triples, non-string content as
    json.dumps(sort_keys=True) with default separators, compact outer JSON."""
    triples = [
        [
            m.type,
            m.id,
            m.content if isinstance(m.content, str) else json.dumps(m.content, sort_keys=True),
        ]
        for m in messages
    ]
    text = json.dumps(triples, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _jsonable(v: Any) -> Any:
    dump = getattr(v, "model_dump", None)
    if callable(dump):
        return dump()
    return str(v)


def response_bytes(values: dict[str, Any], checkpoint_id: Any) -> int:
    body = {"values": values, "checkpoint_id": checkpoint_id}
    return len(json.dumps(body, default=_jsonable, ensure_ascii=False).encode("utf-8"))


def pctl(samples: Sequence[float], permille: int) -> float:
    return nearest_rank(sorted(samples), permille)


def ms_since(t: float) -> float:
    return (time.perf_counter() - t) * 1000.0


# ---------------------------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------------------------


def measure(
    case: dict[str, Any],
    turns: list[list[Step]],
    thread_id: str,
    open_saver: Callable[[ExitStack], Any],
    stats: Callable[[Any], tuple],
    sizes: Callable[[], tuple[Any, Any, Any]],
    durable: Callable[[Any], tuple[Any, Any, Any, Any]],
) -> dict[str, Any]:
    mode, freq = case["mode"], case["snapshot_frequency"]
    config = run_config(mode, thread_id)
    expected = written_messages(turns)
    expected_digest = digest(expected)
    out: dict[str, Any] = {}
    with ExitStack() as stack:
        # Run phase.
        saver = open_saver(stack)
        saver.setup()
        script = Script()
        graph = build_graph(mode, freq, saver, script)
        timer = WriteTimer(saver)
        turn_ms: list[float] = []
        write_ms: list[float] = []
        run0 = time.perf_counter()
        for steps in turns:
            script.load(steps[1:])
            inputs = dict(steps[0][1])
            timer.take()
            t = time.perf_counter()
            graph.invoke(inputs, config)
            turn_ms.append(ms_since(t))
            write_ms.append(merged_busy_ms(timer.take()))
            if script.i != len(script.steps):
                raise RuntimeError("a turn ended before its script did")
        run_total_ms = ms_since(run0)
        timer.remove()
        puts = timer.puts
        run = turn_ms[WARMUP_TURNS:]
        writes = write_ms[WARMUP_TURNS:]

        # Seed correctness: a graph over the raw saver.
        seed_graph = build_graph(mode, freq, saver, Script())
        seed = list(seed_graph.get_state(config).values.get("messages", []))
        seed_digest = digest(seed)
        if len(seed) != len(expected) or seed_digest != expected_digest:
            raise RuntimeError(
                f"materialized {len(seed)} messages that differ from the {len(expected)} "
                "the turns wrote"
            )
        out["run_turn_p50_ms"] = pctl(run, 500)
        out["run_turn_p95_ms"] = pctl(run, 950)
        for q, pm in (("p50", 500), ("p95", 950), ("p99", 990)):
            out[f"checkpoint_write_{q}_ms"] = pctl(writes, pm)
        out["message_count"] = len(seed)
        out["seed_content_sha256"] = seed_digest

        # State: cold (fresh saver + graph, first get_state), then warm on the same graph.
        reads = stack.enter_context(ExitStack())
        t = time.perf_counter()
        read_saver = open_saver(reads)
        read_graph = build_graph(mode, freq, read_saver, Script())
        build_ms = ms_since(t)
        snap = read_graph.get_state(config)
        state_msgs = list(snap.values.get("messages", []))
        state_cold_ms = ms_since(t)
        state_wire = wire_digest(state_msgs)
        state_bytes = response_bytes(
            dict(snap.values), snap.config["configurable"].get("checkpoint_id")
        )
        warm: list[float] = []
        for _ in range(case["read_repetitions"]):
            t = time.perf_counter()
            again = read_graph.get_state(config)
            warm.append(ms_since(t))
            if wire_digest(again.values.get("messages", [])) != state_wire:
                raise RuntimeError("warm state read differs from the cold one")
        reads.close()

        # History per effective limit: cold on a fresh saver + graph, then warm.
        history: dict[str, Any] = {}
        digests: list[str] = []
        for limit in effective_limits(case["history_limits"]):
            with ExitStack() as hs:
                t = time.perf_counter()
                h_saver = open_saver(hs)
                h_graph = build_graph(mode, freq, h_saver, Script())
                entries = list(h_graph.get_state_history(config, limit=limit))
                cold_ms = ms_since(t)
                newest = list(entries[0].values.get("messages", [])) if entries else []
                digests.append(wire_digest(newest))
                hw: list[float] = []
                for _ in range(case["read_repetitions"]):
                    t = time.perf_counter()
                    list(h_graph.get_state_history(config, limit=limit))
                    hw.append(ms_since(t))
            history[f"history_limit_{limit}_cold_ms"] = cold_ms
            history[f"history_limit_{limit}_cold_saver_ms"] = 0.0
            history[f"history_limit_{limit}_warm_p50_ms"] = pctl(hw, 500)
            history[f"history_limit_{limit}_warm_p95_ms"] = pctl(hw, 950)

        # Online sizes and per-table storage while the run saver is still open.
        db, wal, shm = sizes()
        ck_rows, ck_bytes, bl_rows, bl_bytes, wr_rows, wr_bytes = stats(saver)
        # Durable sizes: SQLite after wal_checkpoint(TRUNCATE); PostgreSQL per-table totals.
        durable_fields = durable(saver)

    out["db_bytes"] = db
    out["wal_bytes"] = wal
    out["shm_bytes"] = shm
    out["state_cold_ms"] = state_cold_ms
    out["state_cold_saver_ms"] = 0.0
    out["state_cold_graph_build_ms"] = build_ms
    out["state_warm_p50_ms"] = pctl(warm, 500)
    out["state_warm_p95_ms"] = pctl(warm, 950)
    out["state_wire_sha256"] = state_wire
    out["history_wire_sha256"] = hashlib.sha256("".join(digests).encode("ascii")).hexdigest()
    out["saver_read_attribution"] = False
    out.update(history)
    out["run_turn_p99_ms"] = pctl(run, 990)
    out["run_total_ms"] = run_total_ms
    out["checkpoints_per_turn"] = puts / max(1, len(turns))
    out["checkpoint_rows"] = ck_rows
    out["checkpoint_bytes"] = ck_bytes
    out["blob_rows"] = bl_rows
    out["blob_bytes"] = bl_bytes
    out["write_rows"] = wr_rows
    out["write_bytes"] = wr_bytes
    out["state_response_bytes"] = state_bytes
    out["state_cache_hits"] = None
    out["state_cache_misses"] = None
    out["history_cache_hits"] = None
    out["history_cache_misses"] = None
    out["durable_db_bytes"] = durable_fields[0]
    out["pg_checkpoints_total_bytes"] = durable_fields[1]
    out["pg_checkpoint_blobs_total_bytes"] = durable_fields[2]
    out["pg_checkpoint_writes_total_bytes"] = durable_fields[3]
    return out


def run_case(case: dict[str, Any], work_dir: str) -> dict[str, Any]:
    # Load lazily imported message modules up front (not inside the first timed turn).
    from langchain_core.messages import (  # noqa: F401
        RemoveMessage,
        convert_to_messages,
        message_chunk_to_message,
    )

    turns = case_turns(case)
    thread_id = f"checkpoint-production-{case['seed']}-{case['repetition']}"
    if case["backend"] == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        db = Path(work_dir) / DB_NAME

        def open_sqlite(stack: ExitStack) -> Any:
            conn = sqlite3.connect(str(db), check_same_thread=False)
            stack.callback(conn.close)
            return SqliteSaver(conn)

        def sizes() -> tuple[Any, Any, Any]:
            return file_size(db), file_size(Path(f"{db}-wal")), file_size(Path(f"{db}-shm"))

        def sqlite_durable(saver: Any) -> tuple[Any, Any, Any, Any]:
            saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            return file_size(db), None, None, None

        return measure(
            case,
            turns,
            thread_id,
            open_sqlite,
            lambda s: sqlite_stats(s, thread_id),
            sizes,
            sqlite_durable,
        )

    from langgraph.checkpoint.postgres import PostgresSaver

    url = os.environ.get(PG_URL_ENV, "")
    if not url:
        raise RuntimeError(f"backend postgres needs a PostgreSQL URL in {PG_URL_ENV}")
    thread_id = f"{thread_id}-{os.getpid()}-{uuid.uuid4().hex[:12]}"

    def open_pg(stack: ExitStack) -> Any:
        return stack.enter_context(PostgresSaver.from_conn_string(url))

    def pg_durable(saver: Any) -> tuple[Any, Any, Any, Any]:
        row = saver.conn.execute(
            "SELECT pg_total_relation_size('checkpoints') AS c,"
            " pg_total_relation_size('checkpoint_blobs') AS b,"
            " pg_total_relation_size('checkpoint_writes') AS w"
        ).fetchone()
        return None, int(row["c"]), int(row["b"]), int(row["w"])

    try:
        return measure(
            case,
            turns,
            thread_id,
            open_pg,
            lambda s: postgres_stats(s, thread_id),
            lambda: (None, None, None),
            pg_durable,
        )
    finally:
        try:
            with PostgresSaver.from_conn_string(url) as saver:
                saver.delete_thread(thread_id)
        except Exception as exc:
            print(
                f"warning: could not delete the case's thread: {safe_error(exc)}",
                file=sys.stderr,
            )


def main(argv: list[str]) -> int:
    if argv == ["--identity"]:
        ident = identity()
        ident["engine_version"] = ident["langgraph_version"]
        emit(ident)
        return 0
    if len(argv) != 2 or argv[0] != "--worker-case":
        print(
            "usage: bench_worker_langgraph_production.py --worker-case JSON | --identity",
            file=sys.stderr,
        )
        return 2
    try:
        case = parse_case(argv[1])
    except CaseError as e:
        emit(
            {
                "schema_version": SCHEMA_VERSION,
                "benchmark_version": BENCHMARK_VERSION,
                "benchmark": BENCHMARK,
                "success": False,
                "error": safe_error(e),
            }
        )
        return 2
    row = base_row(case, identity())
    work_dir = tempfile.mkdtemp(prefix=TEMP_PREFIX)
    try:
        row.update(run_case(case, work_dir))
        rss, source = peak_rss()
        row["peak_rss_bytes"] = rss
        row["rss_source"] = source
    except Exception as exc:
        row["success"] = False
        row["error"] = safe_error(exc, work_dir)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    emit(row)
    return 0 if row["success"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
