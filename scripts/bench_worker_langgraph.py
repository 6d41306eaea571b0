#!/usr/bin/env python3
"""The `langgraph` engine of `dfck bench channels`: one case on the real Python LangGraph.

    python scripts/bench_worker_langgraph.py --worker-case '<compact case JSON>'
    python scripts/bench_worker_langgraph.py --identity   # the identity fields, one JSON line

The dfck controller runs this once per case (docs/bench-rows.md#child-processes). It runs
the channel workload on a one-node StateGraph with a real saver and prints ONE compact JSON row
on stdout (the v2 channel row schema written down in src/bench/worker.rs, same keys and order as
the native engine), then exits 0 (success), 1 (the case failed) or 2 (unusable case JSON;
minimal row).

* full mode: `messages: Annotated[list[AnyMessage], add_messages]`;
* delta mode: `messages: Annotated[list[AnyMessage], DeltaChannel(merge_message_writes,
  snapshot_frequency=F)]` with this file's own DeerFlow-style batch reducer, and the
  `deerflow_checkpoint_channel_mode: "delta"` marker in the config metadata;
* backends: memory (InMemorySaver), sqlite (SqliteSaver, WAL, a file in a fresh temporary
  directory `deerflow-checkpoint-benchmark-*` honouring TMPDIR), postgres (PostgresSaver on the
  URL in env DFCK_BENCH_PG_URL, a unique thread per case, that thread deleted afterwards).

Rows never contain the temporary path, a database path or the PostgreSQL URL.
Requires: langgraph 1.2.x, langgraph-checkpoint-sqlite, langgraph-checkpoint-postgres, psycopg.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any, Sequence

SCHEMA_VERSION = 2
BENCHMARK_VERSION = 1
TEMP_PREFIX = "deerflow-checkpoint-benchmark-"
PG_URL_ENV = "DFCK_BENCH_PG_URL"
SAFE_ERROR_CHARS = 2000
REMOVE_ALL = "__remove_all__"


# ---------------------------------------------------------------------------------------------
# Redaction and identity
# ---------------------------------------------------------------------------------------------


def _url_password(url: str | None) -> str | None:
    if not url or "://" not in url:
        return None
    rest = url.split("://", 1)[1]
    for sep in "/?#":
        rest = rest.split(sep, 1)[0]
    if "@" in rest:
        userinfo = rest.rsplit("@", 1)[0]
        if ":" in userinfo:
            return userinfo.split(":", 1)[1] or None
    return None


def safe_error(err: Any, work_dir: str | None = None) -> str:
    """DeerFlow's safe_error plus secret redaction: home -> <home>, work dir -> <work-dir>."""
    text = str(err) or type(err).__name__
    pw = _url_password(os.environ.get(PG_URL_ENV))
    if pw:
        text = text.replace(pw, "***")
    if work_dir:
        text = text.replace(work_dir, "<work-dir>")
    home = os.path.expanduser("~").rstrip("/")
    if len(home) > 1:
        text = text.replace(home, "<home>")
    return text[:SAFE_ERROR_CHARS]


def git_sha() -> str:
    for var in ("DFCK_BENCH_GIT_SHA", "DEERFLOW_CHECKPOINT_BENCH_GIT_SHA"):
        v = os.environ.get(var, "").strip()
        if v:
            return v
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def package_version(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return "unknown"


def peak_rss() -> tuple[int | None, str | None]:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024, "VmHWM"
    except OSError:
        pass
    try:
        import resource

        v = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return (v if sys.platform == "darwin" else v * 1024), "getrusage"
    except Exception:
        return None, None


# ---------------------------------------------------------------------------------------------
# Case
# ---------------------------------------------------------------------------------------------


class CaseError(ValueError):
    """The case JSON is unusable (exit 2)."""


def _text(v: Any) -> str:
    return f"'{v}'" if isinstance(v, str) else json.dumps(v)


def parse_case(text: str) -> dict[str, Any]:
    """Decodes and validates a case with the same messages as dfck's native worker."""
    try:
        m = json.loads(text)
    except json.JSONDecodeError as e:
        raise CaseError(f"invalid case JSON: {e}") from None
    if not isinstance(m, dict):
        raise CaseError("invalid case JSON: expected a JSON object")
    for key in ("mode", "backend", "update_count", "payload_bytes", "repetition", "seed"):
        if key not in m:
            raise CaseError(f"missing required field '{key}'")
    if m["mode"] not in ("full", "delta"):
        raise CaseError(f"unsupported mode: {_text(m['mode'])}")
    if m["backend"] not in ("memory", "sqlite", "postgres"):
        raise CaseError(f"unsupported backend: {_text(m['backend'])}")
    engine = m.get("engine", "langgraph")
    if engine not in ("native", "langgraph"):
        raise CaseError(f"unsupported engine: {_text(engine)}")
    if engine != "langgraph":
        raise CaseError(f"this worker runs the langgraph engine; the case asks for '{engine}'")
    scenario = m.get("scenario", "append")
    if scenario != "append":
        raise CaseError(f"unsupported scenario: {_text(scenario)}")
    m.setdefault("snapshot_frequency", 10)
    for key in ("update_count", "payload_bytes", "snapshot_frequency", "repetition"):
        v = m[key]
        if not isinstance(v, int) or isinstance(v, bool):
            raise CaseError(f"{key} must be an integer, got {json.dumps(v)}")
        if key == "repetition":
            if v < 0:
                raise CaseError("repetition must be non-negative")
        elif v <= 0:
            raise CaseError(f"{key} must be positive")
    if not isinstance(m["seed"], int) or isinstance(m["seed"], bool):
        raise CaseError(f"seed must be an integer, got {json.dumps(m['seed'])}")
    m["scenario"] = scenario
    m["engine"] = engine
    return m


def base_row(case: dict[str, Any], ident: dict[str, Any]) -> dict[str, Any]:
    """The identity fields, in dfck's channel_base_row order."""
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark_version": BENCHMARK_VERSION,
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
        "mode": case["mode"],
        "backend": case["backend"],
        "scenario": case["scenario"],
        "snapshot_frequency": case["snapshot_frequency"],
        "update_count": case["update_count"],
        "payload_bytes": case["payload_bytes"],
        "repetition": case["repetition"],
        "seed": case["seed"],
    }


# ---------------------------------------------------------------------------------------------
# Statistics and digest
# ---------------------------------------------------------------------------------------------


def nearest_rank(sorted_values: Sequence[float], permille: int) -> float:
    """HdrHistogram's value_at_quantile on exact samples: rank max(1, ceil(q*n))."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    rank = max(1, (permille * n + 999) // 1000)
    return sorted_values[rank - 1]


def _median(v: Sequence[float]) -> float:
    s = sorted(v)
    n = len(s)
    if n == 0:
        return 0.0
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def window_median(values: Sequence[float], which: str) -> float:
    """DeerFlow's chronological window medians (first/middle/last 10%)."""
    n = len(values)
    if n == 0:
        return 0.0
    width = max(1, n // 10)
    if which == "first":
        w = values[:width]
    elif which == "last":
        w = values[n - width :]
    else:
        start = max(0, n // 2 - width // 2)
        w = values[start : start + width]
    return _median(w)


def digest(messages: Sequence[Any]) -> str:
    payload = [{"id": m.id, "type": m.type, "content": m.content} for m in messages]
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------
# The DeerFlow-style delta reducer (docs/replay-and-forks.md#reducers), this project's own code
# ---------------------------------------------------------------------------------------------


def _normalize(write: Any) -> list[Any]:
    from langchain_core.messages import convert_to_messages, message_chunk_to_message

    items = write if isinstance(write, list) else [write]
    out = []
    for m in convert_to_messages(items):
        m = message_chunk_to_message(m)
        if m.id is None:
            m.id = str(uuid.uuid4())
        out.append(m)
    return out


def merge_message_writes(state: Sequence[Any], writes: Sequence[Any]) -> list[Any]:
    """Folds a batch of message writes with sequential add_messages semantics, in linear time."""
    from langchain_core.messages import RemoveMessage

    if not writes:
        return list(state)
    msgs: list[Any] = _normalize(list(state)) if state else []
    where: dict[str, int] = {m.id: i for i, m in enumerate(msgs)}
    for write in writes:
        if write is None:
            raise ValueError(
                "Must specify non-null arguments for both 'left' and 'right'. "
                "Only received: 'left'."
            )
        batch = _normalize(write)
        marks = [
            i for i, m in enumerate(batch) if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL
        ]
        if marks:
            msgs = list(batch[marks[-1] + 1 :])
            where = {m.id: i for i, m in enumerate(msgs)}
            continue
        doomed: set[str] = set()
        for m in batch:
            at = where.get(m.id)
            if at is None:
                if isinstance(m, RemoveMessage):
                    raise ValueError(
                        f"Attempting to delete a message with an ID that doesn't exist ('{m.id}')"
                    )
                where[m.id] = len(msgs)
                msgs.append(m)
            elif isinstance(m, RemoveMessage):
                doomed.add(m.id)
            else:
                doomed.discard(m.id)
                msgs[at] = m
        if doomed:
            msgs = [m for m in msgs if m.id not in doomed]
            where = {m.id: i for i, m in enumerate(msgs)}
    return msgs


# ---------------------------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------------------------


def build_messages(n: int, payload: int) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    content = "x" * payload
    return [
        (HumanMessage if i % 2 == 0 else AIMessage)(content=content, id=f"bench-message-{i:08d}")
        for i in range(n)
    ]


def build_graph(mode: str, frequency: int, saver: Any) -> Any:
    from langchain_core.messages import AnyMessage
    from langgraph.channels import DeltaChannel
    from langgraph.graph import StateGraph
    from langgraph.graph.message import add_messages
    from typing_extensions import TypedDict

    if mode == "full":
        state = TypedDict("BenchFullState", {"messages": Annotated[list[AnyMessage], add_messages]})
    else:
        state = TypedDict(
            "BenchDeltaState",
            {
                "messages": Annotated[
                    list[AnyMessage],
                    DeltaChannel(merge_message_writes, snapshot_frequency=frequency),
                ]
            },
        )

    def noop(_state: dict) -> dict:
        return {}

    builder = StateGraph(state)
    builder.add_node("noop", noop)
    builder.set_entry_point("noop")
    builder.set_finish_point("noop")
    return builder.compile(checkpointer=saver)


def run_config(mode: str, thread_id: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "configurable": {"thread_id": thread_id, "__deerflow_checkpoint_channel_mode": mode}
    }
    if mode == "delta":
        config["metadata"] = {"deerflow_checkpoint_channel_mode": "delta"}
    return config


def read_messages(graph: Any, config: dict[str, Any]) -> list[Any]:
    return list(graph.get_state(config).values.get("messages", []))


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


# Storage statistics: (checkpoint_rows, checkpoint_bytes, blob_rows, blob_bytes, write_rows,
# write_bytes); blob fields None where the backend has no blob table.


def memory_stats(saver: Any, thread_id: str) -> tuple:
    ck_rows = ck_bytes = 0
    for by_id in saver.storage.get(thread_id, {}).values():
        for ckpt, meta, _parent in by_id.values():
            ck_rows += 1
            ck_bytes += len(ckpt[1]) + len(meta[1])
    bl_rows = bl_bytes = 0
    for key, (_type, blob) in saver.blobs.items():
        if key[0] == thread_id:
            bl_rows += 1
            bl_bytes += len(blob)
    wr_rows = wr_bytes = 0
    for key, inner in saver.writes.items():
        if key[0] == thread_id:
            for value in inner.values():
                wr_rows += 1
                wr_bytes += len(value[2][1])
    return ck_rows, ck_bytes, bl_rows, bl_bytes, wr_rows, wr_bytes


def sqlite_stats(saver: Any, thread_id: str) -> tuple:
    cur = saver.conn.cursor()
    ck_rows, ck_bytes = cur.execute(
        "SELECT COUNT(*), COALESCE(SUM(length(checkpoint)+length(metadata)),0) "
        "FROM checkpoints WHERE thread_id = ?",
        (thread_id,),
    ).fetchone()
    wr_rows, wr_bytes = cur.execute(
        "SELECT COUNT(*), COALESCE(SUM(length(value)),0) FROM writes WHERE thread_id = ?",
        (thread_id,),
    ).fetchone()
    return int(ck_rows), int(ck_bytes), None, None, int(wr_rows), int(wr_bytes)


def postgres_stats(saver: Any, thread_id: str) -> tuple:
    conn = saver.conn
    ck = conn.execute(
        "SELECT COUNT(*) AS n, COALESCE(SUM(octet_length(checkpoint::text)"
        " + octet_length(metadata::text)),0) AS b FROM checkpoints WHERE thread_id = %s",
        (thread_id,),
    ).fetchone()
    bl = conn.execute(
        "SELECT COUNT(*) AS n, COALESCE(SUM(COALESCE(octet_length(blob),0)),0) AS b"
        " FROM checkpoint_blobs WHERE thread_id = %s",
        (thread_id,),
    ).fetchone()
    wr = conn.execute(
        "SELECT COUNT(*) AS n, COALESCE(SUM(octet_length(blob)),0) AS b"
        " FROM checkpoint_writes WHERE thread_id = %s",
        (thread_id,),
    ).fetchone()
    return (
        int(ck["n"]),
        int(ck["b"]),
        int(bl["n"]),
        int(bl["b"]),
        int(wr["n"]),
        int(wr["b"]),
    )


def storage_fields(collect: Any, work_dir: str) -> dict[str, Any]:
    names = (
        "logical_checkpoint_bytes",
        "logical_write_bytes",
        "checkpoint_rows",
        "write_rows",
        "checkpoint_bytes",
        "blob_rows",
        "blob_bytes",
        "write_bytes",
    )
    try:
        ck_rows, ck_bytes, bl_rows, bl_bytes, wr_rows, wr_bytes = collect()
    except Exception as exc:  # the row stays successful (docs/bench-rows.md#measured-fields)
        out: dict[str, Any] = {k: None for k in names}
        out["storage_stats_error"] = safe_error(exc, work_dir)
        return out
    return {
        "logical_checkpoint_bytes": ck_bytes + (bl_bytes or 0),
        "logical_write_bytes": wr_bytes,
        "checkpoint_rows": ck_rows,
        "write_rows": wr_rows,
        "checkpoint_bytes": ck_bytes,
        "blob_rows": bl_rows,
        "blob_bytes": bl_bytes,
        "write_bytes": wr_bytes,
        "storage_stats_error": None,
    }


# ---------------------------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------------------------


def write_phase(graph: Any, config: dict[str, Any], messages: list[Any]) -> dict[str, Any]:
    latencies: list[float] = []
    start = time.perf_counter()
    for m in messages:
        t = time.perf_counter()
        graph.invoke({"messages": [m]}, config)
        latencies.append((time.perf_counter() - t) * 1000.0)
    total = (time.perf_counter() - start) * 1000.0
    s = sorted(latencies)
    n = len(s)
    mean = sum(s) / n if n else 0.0
    var = sum((x - mean) ** 2 for x in s) / n if n else 0.0
    return {
        "write_total_ms": total,
        "write_p50_ms": nearest_rank(s, 500),
        "write_p90_ms": nearest_rank(s, 900),
        "write_p95_ms": nearest_rank(s, 950),
        "write_p99_ms": nearest_rank(s, 990),
        "write_p999_ms": nearest_rank(s, 999),
        "write_max_ms": s[-1] if s else 0.0,
        "write_mean_ms": mean,
        "write_stddev_ms": math.sqrt(var),
        "write_first_window_ms": window_median(latencies, "first"),
        "write_middle_window_ms": window_median(latencies, "middle"),
        "write_last_window_ms": window_median(latencies, "last"),
    }


def timed_read(graph: Any, config: dict[str, Any]) -> tuple[list[Any], float]:
    t = time.perf_counter()
    msgs = read_messages(graph, config)
    return msgs, (time.perf_counter() - t) * 1000.0


def run_case(case: dict[str, Any], work_dir: str) -> dict[str, Any]:
    # langchain_core.messages loads its submodules lazily: load what the reducer uses now, so
    # the first timed reducer call (reducer_replay_ms in full mode) does not pay for imports.
    from langchain_core.messages import (  # noqa: F401
        RemoveMessage,
        convert_to_messages,
        message_chunk_to_message,
    )

    mode, backend = case["mode"], case["backend"]
    n, freq = case["update_count"], case["snapshot_frequency"]
    messages = build_messages(n, case["payload_bytes"])
    expected = digest(messages)
    thread_id = f"checkpoint-bench-{case['seed']}-{case['repetition']}"
    out: dict[str, Any] = {}
    files: dict[str, Any] = {"db_bytes": None, "wal_bytes": None, "shm_bytes": None}
    durable: int | None = None

    if backend == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        config = run_config(mode, thread_id)
        saver = InMemorySaver()
        graph = build_graph(mode, freq, saver)
        out.update(write_phase(graph, config, messages))
        warm, out["warm_read_ms"] = timed_read(graph, config)
        out.update(storage_fields(lambda: memory_stats(saver, thread_id), work_dir))
        cold_graph = build_graph(mode, freq, saver)
        gc.collect()
        cold, cold_ms = timed_read(cold_graph, config)
        reopen_ms = 0.0
    elif backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        config = run_config(mode, thread_id)
        db = Path(work_dir) / "checkpoint-benchmark.sqlite"
        with SqliteSaver.from_conn_string(str(db)) as saver:
            saver.setup()
            graph = build_graph(mode, freq, saver)
            out.update(write_phase(graph, config, messages))
            warm, out["warm_read_ms"] = timed_read(graph, config)
            out.update(storage_fields(lambda: sqlite_stats(saver, thread_id), work_dir))
            files = {
                "db_bytes": file_size(db),
                "wal_bytes": file_size(Path(f"{db}-wal")),
                "shm_bytes": file_size(Path(f"{db}-shm")),
            }
        durable = file_size(db)
        with ExitStack() as stack:
            t = time.perf_counter()
            saver = stack.enter_context(SqliteSaver.from_conn_string(str(db)))
            saver.setup()
            reopen_ms = (time.perf_counter() - t) * 1000.0
            cold_graph = build_graph(mode, freq, saver)
            gc.collect()
            cold, cold_ms = timed_read(cold_graph, config)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        url = os.environ.get(PG_URL_ENV, "")
        if not url:
            raise RuntimeError(f"backend postgres needs a PostgreSQL URL in {PG_URL_ENV}")
        thread_id = f"{thread_id}-{uuid.uuid4().hex[:12]}"
        config = run_config(mode, thread_id)
        try:
            with PostgresSaver.from_conn_string(url) as saver:
                saver.setup()
                graph = build_graph(mode, freq, saver)
                out.update(write_phase(graph, config, messages))
                warm, out["warm_read_ms"] = timed_read(graph, config)
                out.update(storage_fields(lambda: postgres_stats(saver, thread_id), work_dir))
            with ExitStack() as stack:
                t = time.perf_counter()
                saver = stack.enter_context(PostgresSaver.from_conn_string(url))
                saver.setup()
                reopen_ms = (time.perf_counter() - t) * 1000.0
                cold_graph = build_graph(mode, freq, saver)
                gc.collect()
                cold, cold_ms = timed_read(cold_graph, config)
        finally:
            try:
                with PostgresSaver.from_conn_string(url) as saver:
                    saver.delete_thread(thread_id)
            except Exception as exc:
                print(f"warning: could not delete the case's thread: {safe_error(exc)}",
                      file=sys.stderr)

    if len(warm) != n or len(cold) != n:
        raise RuntimeError(f"expected {n} messages, materialized warm={len(warm)} cold={len(cold)}")
    cold_digest = digest(cold)
    if digest(warm) != expected or cold_digest != expected:
        raise RuntimeError(
            "materialized message content or ordering differs from deterministic input"
        )
    out["cold_read_ms"] = cold_ms
    out["saver_reopen_ms"] = reopen_ms
    out.update(files)
    out["durable_db_bytes"] = durable
    out["expected_message_count"] = n
    out["actual_message_count"] = len(cold)
    out["content_sha256"] = cold_digest

    merge_message_writes([], [build_messages(1, 1)])  # warm-up, not timed
    t = time.perf_counter()
    replayed = merge_message_writes([], [[m] for m in messages])
    out["reducer_replay_ms"] = (time.perf_counter() - t) * 1000.0
    if digest(replayed) != expected:
        raise RuntimeError("standalone reducer diagnostic produced incorrect state")
    return out


def emit(row: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    sys.stdout.write("\n")
    sys.stdout.flush()


def identity() -> dict[str, Any]:
    return {
        "git_sha": git_sha(),
        "python_version": platform.python_version(),
        "langgraph_version": package_version("langgraph"),
        "platform": platform.platform(),
        "runtime_version": f"{platform.python_implementation()} {platform.python_version()}",
    }


def main(argv: list[str]) -> int:
    if argv == ["--identity"]:
        # The controller's probe: the identity fields its own failure rows carry.
        ident = identity()
        ident["engine_version"] = ident["langgraph_version"]
        emit(ident)
        return 0
    if len(argv) != 2 or argv[0] != "--worker-case":
        print("usage: bench_worker_langgraph.py --worker-case JSON | --identity", file=sys.stderr)
        return 2
    try:
        case = parse_case(argv[1])
    except CaseError as e:
        emit(
            {
                "schema_version": SCHEMA_VERSION,
                "benchmark_version": BENCHMARK_VERSION,
                "success": False,
                "error": safe_error(e),
            }
        )
        return 2
    row = base_row(case, identity())
    work_dir = tempfile.mkdtemp(prefix=TEMP_PREFIX)
    try:
        metrics = run_case(case, work_dir)
        row.update(metrics)
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
