#!/usr/bin/env python3
"""Build DeerFlow-shaped stores: LangGraph checkpoints + DeerFlow's own application tables.

Outputs (see fixtures/deerflow-schema/README.md for every thread and row):

    fixtures/sqlite/deerflow_app.db        SQLite, WAL mode, checkpointed (no -wal/-shm)
    fixtures/postgres/deerflow_app.sql     pg_dump --no-owner --no-privileges --no-comments --inserts
    fixtures/sqlite/deerflow_app_0007.db   app schema at alembic 0007 (before operation_kind) + a few rows
    fixtures/deerflow-schema/app_rows.json every DeerFlow table's rows as DeerFlow's models read them
                                           back, per backend (the expected data for Rust tests)

Three steps, two interpreters:

  A  `checkpoints` (LangGraph venv .venv, Python 3.11, scripts/requirements.txt + time-machine):
     the real pinned LangGraph writes ~11 short DeerFlow-mode threads (delta mode with
     DeerFlow's marker `deerflow_checkpoint_channel_mode: delta`, DeltaChannel with
     DeerFlow's batch reducer, snapshot_frequency 10 = DeerFlow's default) through the
     existing machinery (scripts/gen_fixtures.py Store + build_deerflow_graph,
     scripts/gen_pg_fixtures.py PgStore: SqliteSaver.setup()/PostgresSaver.setup()) into
     <work>/sqlite/deerflow.db and the PostgreSQL database dfckgen_deerflow_app, and
     writes <work>/manifest.json (run ids, instants, the messages of every run).
  B  `app` (DeerFlow venv .venv-deerflow, Python 3.12, scripts/deerflow/requirements.txt,
     DeerFlow checkout on sys.path): DeerFlow's own start-up against the SAME databases
     (init_engine_from_config -> bootstrap_schema: branch "empty" because only LangGraph
     tables exist -> Base.metadata.create_all + alembic stamp head; then the LangGraph
     saver/store setup DeerFlow runs at start-up), then every application row through
     DeerFlow's own classes: SQLiteUserRepository (+ DeerFlow's hash_password),
     ThreadMetaRepository, RunManager/RunRepository (create_or_reject, try_start,
     set_status_if_not_cancelled, update_run_completion, renew_lease, the interrupt
     claim of create_thread_operation_atomic, _admit_thread_operation for the delete
     reservation), RunJournal + DbRunEventStore (the run_events message feed),
     FeedbackRepository, McpTaskRepository, ScheduledTaskRepository,
     ScheduledTaskRunRepository, ChannelConnectionRepository, SqlAgentStore,
     PostgresInboundDedupeStore (PostgreSQL only), and the thread delete flow
     (reserve_thread_operation(kind=delete) + checkpointer.adelete_thread +
     ThreadMetaRepository.delete + Paths.delete_thread_dir). Also builds the 0007 variant
     (DeerFlow's alembic `upgrade 0007_scheduled_run_active_index` on an empty file) and
     app_rows.json.
  C  `finish` (.venv): checkpoints the SQLite WAL, copies the file into fixtures/sqlite/,
     dumps the PostgreSQL database exactly like gen_pg_fixtures.py (dump_db) and drops it.

`all` runs A, B, C with the right interpreters. Typical use (from the repo root):

    git -C /work/.mirror/bytedance+deer-flow/repo archive f1f4af99bbf1cffb83a80744bf6e4a44ee8f24be \\
        | (mkdir -p /tmp/deerflow-src && tar -x -C /tmp/deerflow-src)
    python3 -m venv .venv && .venv/bin/pip install -r scripts/requirements.txt time-machine==3.6.0
    ~/.pyenv/versions/3.12.1/bin/python -m venv .venv-deerflow
    .venv-deerflow/bin/pip install -r scripts/deerflow/requirements.txt
    export DFCK_PG_DIR=$(mktemp -d)
    TEST_POSTGRES_URI=$(scripts/pg-test-server.sh start)
    python3 scripts/deerflow/gen_app_fixtures.py all --deerflow-src /tmp/deerflow-src \\
        --pg-url "$TEST_POSTGRES_URI" --out fixtures
    scripts/pg-test-server.sh stop

(`--skip-postgres` builds only the SQLite outputs.) The steps can also be run one by one:

    .venv/bin/python scripts/deerflow/gen_app_fixtures.py checkpoints --work W --pg-url URL
    .venv-deerflow/bin/python scripts/deerflow/gen_app_fixtures.py app --work W --pg-url URL \\
        --deerflow-src /tmp/deerflow-src --out fixtures
    .venv/bin/python scripts/deerflow/gen_app_fixtures.py finish --work W --pg-url URL --out fixtures

Determinism: the clock is frozen with time-machine (tick=False) at scenario.T0 and moved
explicitly, `random` is seeded (LangGraph's uuid6 checkpoint ids), every uuid4 DeerFlow
mints during generation comes from a fixed plan, bcrypt salts / Fernet IVs come from a
seeded byte stream. Not controlled: PostgreSQL's server-side now() (only
webhook_deliveries.first_seen) and bcrypt/Fernet internals if their libraries change.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # scripts/ (gen_fixtures, gen_pg_fixtures, graphs)

import _dfenv  # noqa: E402
import scenario as S  # noqa: E402

if __name__ == "__main__":
    _dfenv.pin_hash_seed()

DEFAULT_WORK = "/tmp/dfck-deerflow-app-work"


def _iso(dt: datetime) -> str:
    return dt.isoformat()


# =======================================================================================
# Step A: LangGraph checkpoints (Python 3.11, .venv)
# =======================================================================================


def _msg_record(m: Any) -> dict:
    rec = {"type": m.type, "id": m.id, "content": m.content}
    if getattr(m, "tool_calls", None):
        rec["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c["id"]} for c in m.tool_calls]
    if m.type == "tool":
        rec["tool_call_id"] = m.tool_call_id
        rec["name"] = m.name
    return rec


def _state_values(values: dict) -> dict:
    from graphs import HumanMessage, RemoveMessage

    out = {}
    for k, v in values.items():
        if k == "messages":
            msgs = []
            for item in v:
                if item[0] == "human":
                    msgs.append(HumanMessage(content=item[1], id=item[2]))
                elif item[0] == "remove":
                    msgs.append(RemoveMessage(id=item[1]))
                else:
                    raise ValueError(item)
            out[k] = msgs
        else:
            out[k] = v
    return out


def _write_threads(st: Any, traveller: Any) -> dict:
    import gen_fixtures as gf
    from graphs import Overwrite, messages_annotation

    g = gf.build_deerflow_graph(messages_annotation("delta", S.SNAPSHOT_FREQUENCY, reducer="deerflow"), st.saver)
    out: dict[str, Any] = {"threads": {}}
    for thread, steps in S.CHECKPOINT_THREADS.items():
        st.register(thread, g)
        owner = S.OWNER[thread]
        t = S.thread_start(thread)
        runs = []
        info: dict[str, Any] = {"owner": owner, "runs": runs}
        for n, step in enumerate(steps):
            at = t + timedelta(minutes=n)
            traveller.move_to(at)
            md: dict[str, Any] = {gf.MARKER_KEY: "delta"}
            if owner:
                md["user_id"] = owner
            cfg = {"configurable": {"thread_id": thread}, "metadata": md}
            snap = g.get_state({"configurable": {"thread_id": thread}})
            before = {(m.id, json.dumps(m.content, ensure_ascii=False)) for m in snap.values.get("messages", [])}
            kind = step["kind"]
            if kind in ("run", "inflight"):
                md["run_id"] = step["run"]
                extra = {"interrupt_before": ["lead_agent"]} if kind == "inflight" else {}
                g.invoke({"messages": [gf.h(step["text"], step["id"])]}, cfg, durability="sync", **extra)
                after = g.get_state({"configurable": {"thread_id": thread}}).values.get("messages", [])
                new = [_msg_record(m) for m in after if (m.id, json.dumps(m.content, ensure_ascii=False)) not in before]
                runs.append({"run_id": step["run"], "kind": kind, "start": _iso(at), "end": _iso(at + timedelta(seconds=3)),
                             "text": step["text"], "input_id": step["id"], "messages": new})
            elif kind == "state":
                g.update_state(cfg, _state_values(step["values"]), as_node="lead_agent")
                if "title" in step["values"]:
                    info["title_update_at"] = _iso(at)
            elif kind == "branch":
                src = step["source"]
                src_cfg = gf.find_state(g, src, lambda s: s.next == () and gf.ids_of(s)[-1:] == [step["source_last_message"]])
                src_vals = g.get_state(src_cfg).values
                values = {"messages": Overwrite(list(src_vals["messages"])), "title": src_vals.get("title"),
                          "todos": Overwrite(list(src_vals.get("todos") or []))}
                g.update_state(cfg, values, as_node="lead_agent")
                info["branch"] = {"parent_thread_id": src, "parent_checkpoint_id": src_cfg["configurable"]["checkpoint_id"],
                                  "parent_message_id": "df-h-1", "created_at": _iso(at)}
            else:
                raise ValueError(kind)
        final = g.get_state({"configurable": {"thread_id": thread}})
        info["title"] = final.values.get("title")
        info["head_checkpoint_id"] = final.config["configurable"]["checkpoint_id"]
        out["threads"][thread] = info
    return out


def cmd_checkpoints(args: argparse.Namespace) -> int:
    import random

    import langgraph.checkpoint.base.id as lg_id

    try:
        import time_machine
    except ImportError:
        raise SystemExit("step A needs time-machine in the LangGraph venv: .venv/bin/pip install time-machine==3.6.0")
    import gen_fixtures as gf

    work = Path(args.work)
    (work / "sqlite").mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"t0": _iso(S.T0), "snapshot_frequency": S.SNAPSHOT_FREQUENCY, "langgraph": gf.versions(), "backends": {}}
    backends: list[tuple[str, Any]] = [("sqlite", lambda: gf.Store(work / "sqlite" / "deerflow.db"))]
    if not args.skip_postgres:
        import gen_pg_fixtures as gpf

        backends.append(("postgres", lambda: gpf.PgStore(args.pg_url, S.PG_STEM)))
    for name, make in backends:
        random.seed(S.RANDOM_SEED)
        lg_id._last_v6_timestamp = None
        with time_machine.travel(S.T0, tick=False) as traveller:
            st = make()
            try:
                manifest["backends"][name] = _write_threads(st, traveller)
            finally:
                st.close()
        n_runs = sum(len(t["runs"]) for t in manifest["backends"][name]["threads"].values())
        print(f"step A ({name}): {len(S.CHECKPOINT_THREADS)} threads, {n_runs} runs", file=sys.stderr)
    (work / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return 0


# =======================================================================================
# Step B: DeerFlow application tables (Python 3.12, .venv-deerflow)
# =======================================================================================


class UuidPlan:
    """uuid.uuid4 replacement: planned ids first, then a deterministic stream."""

    def __init__(self) -> None:
        import uuid

        self._uuid = uuid
        self.queue: list[str] = []
        self.stream = _dfenv.DetBytes("uuid4")
        self.unplanned = 0

    def reset(self) -> None:
        self.queue.clear()
        self.stream = _dfenv.DetBytes("uuid4")
        self.unplanned = 0

    def plan(self, *ids: str) -> "UuidPlan":
        self.queue.extend(ids)
        return self

    def __call__(self):
        if self.queue:
            return self._uuid.UUID(self.queue.pop(0))
        self.unplanned += 1
        return self._uuid.UUID(bytes=self.stream(16), version=4)


_BCRYPT_B64 = b"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _bcrypt_b64(data: bytes) -> bytes:
    """bcrypt's (OpenBSD) base64 without padding: 16 salt bytes -> 22 characters."""
    out = bytearray()
    i = 0
    while i < len(data):
        c1 = data[i]
        i += 1
        out.append(_BCRYPT_B64[c1 >> 2])
        c1 = (c1 & 0x03) << 4
        if i >= len(data):
            out.append(_BCRYPT_B64[c1])
            break
        c2 = data[i]
        i += 1
        out.append(_BCRYPT_B64[c1 | (c2 >> 4)])
        c1 = (c2 & 0x0F) << 2
        if i >= len(data):
            out.append(_BCRYPT_B64[c1])
            break
        c2 = data[i]
        i += 1
        out.append(_BCRYPT_B64[c1 | (c2 >> 6)])
        out.append(_BCRYPT_B64[c2 & 0x3F])
    return bytes(out)


class DetUrandom:
    """Context manager: deterministic randomness for one call.

    os.urandom -> a seeded stream (Fernet IVs: cryptography draws them with os.urandom);
    bcrypt.gensalt -> the same salt format ("$2b$12$" + 22 chars) from that stream
    (bcrypt >= 4 draws its salt in Rust, out of os.urandom's reach). DeerFlow's
    hash_password() then computes the real "$dfv2$" + bcrypt(b64(sha256(pw))) hash."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __enter__(self):
        import bcrypt

        stream = _dfenv.DetBytes(self.label)
        self._saved = (os.urandom, bcrypt.gensalt)
        os.urandom = stream

        def gensalt(rounds: int = 12, prefix: bytes = b"2b") -> bytes:
            return b"$" + prefix + b"$" + b"%02d" % rounds + b"$" + _bcrypt_b64(stream(16))

        bcrypt.gensalt = gensalt
        return self

    def __exit__(self, *exc):
        import bcrypt

        os.urandom, bcrypt.gensalt = self._saved
        return False


def _user_obj(uid: str):
    from types import SimpleNamespace

    return SimpleNamespace(id=uid)


class AppWriter:
    """Writes every application row of the scenario through DeerFlow's classes."""

    def __init__(self, backend: str, db_config: Any, manifest: dict, traveller: Any, uuids: UuidPlan, home: Path) -> None:
        self.backend = backend
        self.db_config = db_config
        self.man = manifest["backends"][backend]
        self.tm = traveller
        self.uuids = uuids
        self.home = home
        self.facts: dict[str, Any] = {}

    # -- helpers ---------------------------------------------------------------------

    def at(self, dt: datetime) -> None:
        self.tm.move_to(dt)

    def _msg(self, rec: dict, *, usage: dict | None = None, model: str | None = None):
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        if rec["type"] == "human":
            return HumanMessage(content=rec["content"], id=rec["id"])
        if rec["type"] == "ai":
            kw: dict[str, Any] = {}
            if rec.get("tool_calls"):
                kw["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c["id"], "type": "tool_call"} for c in rec["tool_calls"]]
            if usage:
                kw["usage_metadata"] = usage
            if model:
                kw["response_metadata"] = {"model_name": model, "finish_reason": "tool_calls" if rec.get("tool_calls") else "stop"}
            return AIMessage(content=rec["content"], id=rec["id"], **kw)
        if rec["type"] == "tool":
            return ToolMessage(content=rec["content"], id=rec["id"], tool_call_id=rec["tool_call_id"], name=rec.get("name"))
        raise ValueError(rec)

    @staticmethod
    def _usage(prompt_len: int, text: Any) -> dict:
        out_tokens = len(json.dumps(text, ensure_ascii=False)) // 3 + 5
        in_tokens = 120 + 40 * prompt_len
        return {"input_tokens": in_tokens, "output_tokens": out_tokens, "total_tokens": in_tokens + out_tokens}

    def _new_uuid(self, n: int):
        import uuid

        return uuid.UUID(int=(0x0C0FFEE0 << 96) | n)

    # -- the run lifecycle, as deerflow/runtime/runs/worker.py drives it ---------------

    async def run(self, rm: Any, thread: str, run: dict, *, outcome: dict, metadata: dict | None = None,
                  model: str = S.MODEL_MAIN, idempotency_key: str | None = None, extra_llm: list | None = None,
                  with_user_context: bool = True, thread_metadata: dict | None = None) -> Any:
        from deerflow.runtime.journal import RunJournal
        from deerflow.runtime.runs.schemas import RunStatus
        from deerflow.runtime.user_context import reset_current_user, set_current_user
        from langchain_core.outputs import ChatGeneration, LLMResult

        owner = S.OWNER[thread]
        start = datetime.fromisoformat(run["start"])
        end = datetime.fromisoformat(run["end"])
        token = set_current_user(_user_obj(owner)) if with_user_context and owner else None
        try:
            self.at(start)
            self.uuids.plan(run["run_id"])
            record = await rm.create_or_reject(
                thread, "lead_agent",
                metadata=metadata or {},
                kwargs={"input": {"messages": [{"role": "user", "content": run["text"]}]}, "config": {"recursion_limit": 100}},
                multitask_strategy=outcome.get("strategy", "reject"),
                model_name=model, user_id=owner, idempotency_key=idempotency_key,
            )
            assert record.run_id == run["run_id"], (record.run_id, run["run_id"])
            # services._ensure_thread_metadata: create the thread row on first run
            if await self.threads.get(thread, user_id=None) is None:
                await self.threads.create(thread, assistant_id="lead_agent", user_id=owner,
                                          metadata=thread_metadata if thread_metadata is not None else (metadata or {}))
            if outcome.get("status") == "pending":
                return record
            self.at(start + timedelta(seconds=1))
            await rm.try_start(record.run_id)
            await self.threads.update_status(thread, "running", user_id=owner)

            journal = RunJournal(record.run_id, thread, self.events)
            n = 0
            root = self._new_uuid(THREAD_SEQ[thread] * 1000 + 1)
            journal.on_chain_start({"name": "LangGraph"}, {"messages": [run["text"]]}, run_id=root, parent_run_id=None)
            history = [self._msg({"type": "human", "id": run["input_id"], "content": run["text"]})]
            def side_call(tags: list[str], rec: dict) -> None:
                # a middleware / subagent model call (tagged callback) inside the run
                nonlocal n
                n += 1
                llm = self._new_uuid(THREAD_SEQ[thread] * 1000 + 100 + n)
                journal.on_chat_model_start({}, [history], run_id=llm, tags=tags)
                ai = self._msg(rec, usage=self._usage(len(history), rec["content"]), model=S.MODEL_ALT)
                journal.on_llm_end(LLMResult(generations=[[ChatGeneration(message=ai)]]), run_id=llm, tags=tags)

            for tags, rec, where in (extra_llm or []):
                if where == "before":
                    side_call(tags, rec)
            for rec in run["messages"]:
                if rec["type"] == "tool":
                    for tags, side, where in (extra_llm or []):
                        if where == "tools":
                            side_call(tags, side)
                if rec["type"] == "ai":
                    n += 1
                    self.at(start + timedelta(seconds=1, milliseconds=250 * n))
                    llm = self._new_uuid(THREAD_SEQ[thread] * 1000 + 100 + n)
                    journal.on_chat_model_start({}, [history], run_id=llm)
                    ai = self._msg(rec, usage=self._usage(len(history), rec["content"]), model=model)
                    journal.on_llm_end(LLMResult(generations=[[ChatGeneration(message=ai)]]), run_id=llm)
                    history.append(ai)
                elif rec["type"] == "tool":
                    tm = self._msg(rec)
                    journal.on_tool_end(tm, run_id=self._new_uuid(THREAD_SEQ[thread] * 1000 + 500 + n))
                    history.append(tm)
            if outcome.get("status") == "running":
                await journal.flush()
                await rm.update_run_progress(record.run_id, **{k: v for k, v in journal.get_completion_data().items() if k != "token_usage_by_model"})
                return record
            if outcome.get("status") == "interrupted":
                await journal.flush()
                return record

            self.at(end)
            status = outcome.get("status", "success")
            if status == "error":
                journal.on_chain_error(RuntimeError(outcome["error"]), run_id=root)
            else:
                journal.on_chain_end({"messages": [m.content for m in history[-1:]]}, run_id=root, parent_run_id=None)
            await journal.flush()
            await self.events.put_if_absent(thread_id=thread, run_id=record.run_id, event_type="run.delivery",
                                            category="outputs", content=journal.get_delivery_content())
            if status == "success":
                await rm.set_status_if_not_cancelled(record.run_id, RunStatus.success)
            elif status == "error":
                await rm.set_status_if_not_cancelled(record.run_id, RunStatus.error, error=outcome["error"])
            elif status == "timeout":
                await rm.set_status(record.run_id, RunStatus.timeout, error=outcome["error"])
            await rm.update_run_completion(record.run_id, status=status, **journal.get_completion_data())
            title = self.man["threads"].get(thread, {}).get("title")
            if title:
                await self.threads.update_display_name(thread, title, user_id=owner)
            await self.threads.update_status(thread, "idle" if status == "success" else status, user_id=owner)
            return record
        finally:
            if token is not None:
                reset_current_user(token)

    # -- the whole scenario ----------------------------------------------------------

    async def write(self) -> None:
        from app.channels.dedupe_store import PostgresInboundDedupeStore
        from app.gateway.auth.models import User
        from app.gateway.auth.password import hash_password
        from app.gateway.auth.repositories.sqlite import SQLiteUserRepository
        from deerflow.config.paths import Paths
        from deerflow.config.run_ownership_config import RunOwnershipConfig
        from deerflow.persistence.agents.sql import SqlAgentStore
        from deerflow.persistence.channel_connections import ChannelConnectionRepository
        from deerflow.persistence.channel_connections.sql import ChannelCredentialCipher
        from deerflow.persistence.engine import get_session_factory
        from deerflow.persistence.feedback import FeedbackRepository
        from deerflow.persistence.mcp_tasks import McpTaskRepository
        from deerflow.persistence.run import RunRepository
        from deerflow.persistence.scheduled_task_runs import ScheduledTaskRunRepository
        from deerflow.persistence.scheduled_tasks import ScheduledTaskRepository
        from deerflow.persistence.thread_meta import THREAD_PINNED_METADATA_KEY, ThreadMetaRepository
        from deerflow.runtime.events.store.db import DbRunEventStore
        from deerflow.runtime.runs.manager import RunManager
        from deerflow.runtime.runs.schemas import ThreadOperationKind

        sf = get_session_factory()
        self.threads = ThreadMetaRepository(sf)
        self.run_store = RunRepository(sf)
        self.events = DbRunEventStore(sf)
        feedback = FeedbackRepository(sf)
        users = SQLiteUserRepository(sf)
        mcp = McpTaskRepository(sf)
        tasks = ScheduledTaskRepository(sf, run_repository=self.run_store)
        task_runs = ScheduledTaskRunRepository(sf, run_repository=self.run_store)
        channels = ChannelConnectionRepository(sf, cipher=ChannelCredentialCipher.from_key(S.CHANNEL_KEY))
        multi = RunOwnershipConfig(heartbeat_enabled=True)  # lease_seconds=30, grace_seconds=10
        single = RunOwnershipConfig(heartbeat_enabled=False)
        rm_live = RunManager(store=self.run_store, worker_id=S.WORKER_LIVE, run_ownership_config=multi, event_store=self.events)
        rm_dead = RunManager(store=self.run_store, worker_id=S.WORKER_DEAD, run_ownership_config=multi, event_store=self.events)
        rm_crash = RunManager(store=self.run_store, worker_id=S.WORKER_CRASHED_DELETE, run_ownership_config=multi, event_store=self.events)
        rm_single = RunManager(store=self.run_store, worker_id=S.WORKER_SINGLE, run_ownership_config=single, event_store=self.events)
        threads = self.man["threads"]

        def runs_of(t: str) -> list[dict]:
            return threads[t]["runs"]

        # ---- users (LocalAuthProvider.create_user = hash_password + repo.create_user) ----
        self.at(S.T0)
        for n, u in enumerate(S.USERS):
            self.at(S.T0 + timedelta(minutes=1 + n))
            pw_hash = None
            if u["password"]:
                with DetUrandom(f"bcrypt:{u['email']}"):
                    pw_hash = hash_password(u["password"])
            await users.create_user(User(id=u["id"], email=u["email"], password_hash=pw_hash, system_role=u["system_role"],
                                         oauth_provider=u.get("oauth_provider"), oauth_id=u.get("oauth_id")))

        # ---- agents (agent_storage.backend: db -> SqlAgentStore on the sync URL) ----
        self.at(S.T0 + timedelta(minutes=5))
        self.uuids.plan("a9e00000-0000-4000-8000-000000000001")
        SqlAgentStore(self.db_config.app_sync_sqlalchemy_url).create(
            "Research-Bot", {"name": "research-bot", "description": "Fixture custom agent", "model": S.MODEL_ALT,
                             "tool_groups": ["web"]}, "You are a careful research assistant.", user_id=S.U_ALICE)

        # ---- T_A: alice's main thread --------------------------------------------------
        ra = runs_of(S.T_A)
        # summarization middleware calls its model before the lead agent's call; a
        # subagent (task tool) runs inside the tools step
        summary_llm = [(["middleware:summarization"], {"type": "ai", "id": "df-summary-llm", "content": "用户要求写报告。 The user asked for a report."}, "before")]
        subagent_llm = [(["subagent:general-purpose"], {"type": "ai", "id": "df-subagent-1", "content": "Subagent: gathered 3 sources."}, "tools")]
        for n, run in enumerate(ra):
            extra = summary_llm if run["text"].startswith("summarize") else subagent_llm if run["text"] == "write the report" else None
            await self.run(rm_live, S.T_A, run, outcome={}, idempotency_key="idem-a-1" if n == 0 else None, extra_llm=extra)
        a_end = datetime.fromisoformat(ra[-1]["end"])
        self.at(a_end + timedelta(seconds=30))
        await self.threads.update_metadata(S.T_A, {THREAD_PINNED_METADATA_KEY: True}, touch=False, user_id=S.U_ALICE)
        self.at(a_end + timedelta(seconds=40))
        self.uuids.plan("fb000000-0000-4000-8000-000000000001")
        await feedback.create(run_id=ra[2]["run_id"], thread_id=S.T_A, rating=1, user_id=S.U_ALICE,
                              message_id=_last_ai_id(ra[2]), comment=None)
        self.at(a_end + timedelta(seconds=50))
        self.uuids.plan("fb000000-0000-4000-8000-000000000002")
        await feedback.create(run_id=ra[3]["run_id"], thread_id=S.T_A, rating=-1, user_id=S.U_ALICE,
                              comment="The revised plan lost a step 步骤")
        self.at(datetime.fromisoformat(ra[2]["start"]) + timedelta(seconds=2))
        await mcp.create(task_id="mcp-task-0000000000000000000000000000000a", user_id=S.U_ALICE, thread_id=S.T_A,
                         run_id=ra[2]["run_id"], tool_call_id="wf_5", server_name="docs-server", driver_name="mcp_tasks_v1",
                         remote_task_id="remote-task-001", task_name="render_report_pdf", status="completed",
                         result={"pages": 3, "url": "/mnt/user-data/outputs/report.pdf"}, result_preview="3 pages rendered",
                         result_truncated=False, result_artifact={"path": "/mnt/user-data/outputs/report.pdf"},
                         error=None, input_required=None, next_poll_at=None, driver_data={"poll_interval": 5})

        # ---- T_B: last run fails --------------------------------------------------------
        rb = runs_of(S.T_B)
        await self.run(rm_live, S.T_B, rb[0], outcome={})
        await self.run(rm_live, S.T_B, rb[1], outcome=S.RUN_OUTCOME[rb[1]["run_id"]], model=S.MODEL_ALT)
        self.at(datetime.fromisoformat(rb[1]["end"]) + timedelta(seconds=20))
        self.uuids.plan("fb000000-0000-4000-8000-000000000003")
        await feedback.create(run_id=rb[1]["run_id"], thread_id=S.T_B, rating=-1, user_id=S.U_ALICE,
                              message_id=_last_ai_id(rb[1]), comment="no answer")

        # ---- T_C: running run, live lease (owner keeps renewing) -----------------------
        rc = runs_of(S.T_C)
        await self.run(rm_live, S.T_C, rc[0], outcome={})
        await self.run(rm_live, S.T_C, rc[1], outcome=S.RUN_OUTCOME[rc[1]["run_id"]])
        self.at(datetime.fromisoformat(rc[1]["start"]) + timedelta(seconds=10))
        renewal = await self.run_store.renew_lease(rc[1]["run_id"], owner_worker_id=S.WORKER_LIVE, lease_expires_at=S.LIVE_LEASE)
        assert renewal.renewed
        await mcp.create(task_id="mcp-task-0000000000000000000000000000000c", user_id=S.U_ADMIN, thread_id=S.T_C,
                         run_id=rc[1]["run_id"], tool_call_id="call_c_1", server_name="data-server", driver_name="mcp_tasks_v1",
                         remote_task_id="remote-task-002", task_name="export_quarterly_numbers", status="working",
                         result=None, result_preview=None, result_truncated=False, result_artifact=None, error=None,
                         input_required=None, next_poll_at=datetime.fromisoformat(rc[1]["start"]) + timedelta(seconds=40))

        # ---- T_D: running run whose owner died (lease expired) -------------------------
        rd = runs_of(S.T_D)
        await self.run(rm_live, S.T_D, rd[0], outcome={})
        await self.run(rm_dead, S.T_D, rd[1], outcome=S.RUN_OUTCOME[rd[1]["run_id"]])

        # ---- T_E: two runs; a delete reservation is left behind later -------------------
        for run in runs_of(S.T_E):
            await self.run(rm_live, S.T_E, run, outcome={})

        # ---- T_F: IM channel thread (bob): success, interrupted, timeout ----------------
        rf = runs_of(S.T_F)
        f0 = datetime.fromisoformat(rf[0]["start"]) - timedelta(minutes=2)
        self.at(f0)
        self.uuids.plan("c4a00000-0000-4000-8000-000000000001")
        conn = await channels.upsert_connection(owner_user_id=S.U_BOB, provider="slack", external_account_id="U024BE7LH",
                                                external_account_name="bob", workspace_id="T0FIXTURE", workspace_name="Fixture Inc",
                                                bot_user_id="B0FIXBOT", scopes=["chat:write", "im:history"],
                                                capabilities={"threads": True}, metadata={"team_domain": "fixture"})
        with DetUrandom("fernet:slack"):
            await channels.store_credentials(conn["id"], access_token="xoxb-fixture-access-token", refresh_token="xoxe-fixture-refresh",
                                             token_type="bot", expires_at=f0 + timedelta(hours=12), extra={"app_id": "A0FIX"})
        self.at(f0 + timedelta(seconds=30))
        self.uuids.plan("c4a00000-0000-4000-8000-000000000002")
        await channels.set_thread_id(connection_id=conn["id"], owner_user_id=S.U_BOB, provider="slack",
                                     external_conversation_id="D0FIXTURE01", thread_id=S.T_F)
        with DetUrandom("fernet:oauth"):
            await channels.create_oauth_state(owner_user_id=S.U_BOB, provider="slack", state="fixture-oauth-state",
                                              expires_at=f0 + timedelta(minutes=10), code_verifier="fixture-pkce-verifier",
                                              redirect_after="/settings/channels", requested_scopes=["chat:write"])
        await self.run(rm_live, S.T_F, rf[0], outcome={})
        await self.run(rm_live, S.T_F, rf[1], outcome=S.RUN_OUTCOME[rf[1]["run_id"]])
        await self.run(rm_live, S.T_F, rf[2], outcome=S.RUN_OUTCOME[rf[2]["run_id"]])

        # ---- T_I: branch of T_A ----------------------------------------------------------
        br = threads[S.T_I]["branch"]
        self.at(datetime.fromisoformat(br["created_at"]))
        await self.threads.create(S.T_I, assistant_id="lead_agent", user_id=S.U_ALICE,
                                  display_name=f"{threads[S.T_A]['title']} (branch)",
                                  metadata={"deerflow_branch": True, "branch_parent_thread_id": br["parent_thread_id"],
                                            "branch_parent_checkpoint_id": br["parent_checkpoint_id"],
                                            "branch_parent_message_id": br["parent_message_id"],
                                            "branch_created_at": br["created_at"]})
        await self.run(rm_live, S.T_I, runs_of(S.T_I)[0], outcome={})

        # ---- T_J: scheduled task execution (fresh_thread_per_run) ------------------------
        rj = runs_of(S.T_J)[0]
        j0 = datetime.fromisoformat(rj["start"])
        self.at(j0 - timedelta(hours=1))
        await tasks.create(task_id="task-0000000000000000000000000000000a", user_id=S.U_ADMIN, thread_id=None,
                           context_mode="fresh_thread_per_run", assistant_id="lead_agent", title="Daily digest",
                           prompt="Daily digest of yesterday's activity", schedule_type="cron",
                           schedule_spec={"cron": "0 9 * * *"}, timezone="Asia/Shanghai", next_run_at=j0)
        await tasks.create(task_id="task-0000000000000000000000000000000b", user_id=S.U_ALICE, thread_id=S.T_E,
                           context_mode="reuse_thread", assistant_id="lead_agent", title="Weekly notes reminder",
                           prompt="write the meeting notes", schedule_type="cron", schedule_spec={"cron": "0 10 * * 1"},
                           timezone="UTC", next_run_at=S.after_all() + timedelta(days=3))
        self.at(j0)
        await task_runs.create(run_record_id="task-run-00000000000000000000000000000a01", task_id="task-0000000000000000000000000000000a",
                               thread_id=S.T_J, scheduled_for=j0, trigger="schedule", status="queued")
        sched_md = {"scheduled_task_id": "task-0000000000000000000000000000000a",
                    "scheduled_task_run_id": "task-run-00000000000000000000000000000a01", "scheduled_trigger": "schedule"}
        # scheduler path: no request user context -> run_events.user_id stays NULL
        await self.run(rm_live, S.T_J, rj, outcome={}, metadata=sched_md, with_user_context=False)
        await task_runs.update_status("task-run-00000000000000000000000000000a01", status="running", run_id=rj["run_id"],
                                      started_at=j0, protect_terminal=True)
        await tasks.update_after_launch("task-0000000000000000000000000000000a", status="enabled", next_run_at=j0 + timedelta(days=1),
                                        last_run_at=j0, last_run_id=rj["run_id"], last_thread_id=S.T_J, last_error=None,
                                        increment_run_count=True, protect_terminal=True)
        self.at(datetime.fromisoformat(rj["end"]))
        await task_runs.update_status("task-run-00000000000000000000000000000a01", status="success", run_id=rj["run_id"],
                                      finished_at=datetime.fromisoformat(rj["end"]))

        # ---- T_K: threads_meta only + a pending run that never started (single worker) ---
        k0 = S.thread_start(S.T_K)
        k_run = {"run_id": S.K_RUN, "start": _iso(k0), "end": _iso(k0 + timedelta(seconds=3)), "text": S.K_TEXT,
                 "input_id": "k-h-0", "messages": []}
        self.at(k0 - timedelta(seconds=30))
        await self.threads.create(S.T_K, assistant_id="lead_agent", user_id=S.U_ALICE, metadata={})
        await self.run(rm_single, S.T_K, k_run, outcome=S.RUN_OUTCOME[S.K_RUN])

        # ---- T_L: pre-auth threads_meta row, no owner ------------------------------------
        self.at(S.thread_start(S.T_L))
        await self.threads.create(S.T_L, assistant_id="lead_agent", user_id=None, display_name="pre-auth thread",
                                  metadata={"source": "legacy-import"})

        # ---- T_M: a run, feedback, then DeerFlow's delete flow ---------------------------
        rm_run = runs_of(S.T_M)[0]
        await self.run(rm_live, S.T_M, rm_run, outcome={})
        self.at(datetime.fromisoformat(rm_run["end"]) + timedelta(seconds=10))
        self.uuids.plan("fb000000-0000-4000-8000-000000000004")
        await feedback.create(run_id=rm_run["run_id"], thread_id=S.T_M, rating=1, user_id=S.U_ALICE)
        self.at(S.after_all())
        self.uuids.plan(S.DELETE_FLOW_RUN)
        async with rm_live.reserve_thread_operation(S.T_M, kind=ThreadOperationKind.delete, user_id=S.U_ALICE):
            # routers/threads.py _delete_thread_data_with_reservation
            Paths(self.home).delete_thread_dir(S.T_M, user_id=S.U_ALICE)
            await self.checkpointer.adelete_thread(S.T_M)
            await self.threads.delete(S.T_M, user_id=S.U_ALICE)

        # ---- T_E: a delete that crashed after admission: the reservation row stays -------
        self.at(S.after_all() + timedelta(minutes=1))
        self.uuids.plan(S.DELETE_RESERVATION_RUN)
        # exactly the call reserve_thread_operation() makes before its body runs; its
        # finally (delete_thread_operation) never ran because the gateway died
        await rm_crash._admit_thread_operation(S.T_E, operation_kind=ThreadOperationKind.delete,
                                               multitask_strategy="reject", user_id=S.U_ALICE)

        # ---- alice changes her password (token_version bump) ------------------------------
        self.at(S.after_all() + timedelta(minutes=2))
        alice = await users.get_user_by_email("alice@example.com")
        alice_spec = next(u for u in S.USERS if u["id"] == S.U_ALICE)
        with DetUrandom("bcrypt:alice-2"):
            alice.password_hash = hash_password(alice_spec["new_password"])
        alice.token_version += 1
        await users.update_user(alice)

        # ---- webhook dedupe (PostgreSQL-only store; first_seen = server now()) -----------
        if self.backend == "postgres":
            await PostgresInboundDedupeStore(sf).try_record(("slack", "T0FIXTURE", "D0FIXTURE01", "1724140800.000100"))

        self.facts["unplanned_uuid4"] = self.uuids.unplanned


THREAD_SEQ = S.THREAD_NO


def _last_ai_id(run: dict) -> str:
    return [m["id"] for m in run["messages"] if m["type"] == "ai"][-1]


def _cache_prefix_examples() -> list[dict]:
    """DeerFlow's own checkpoint_cache_key_prefix() for a few canonical configs."""
    from types import SimpleNamespace

    from deerflow.config.database_config import DatabaseConfig
    from deerflow.runtime.checkpoint_cache.provider import (
        _stable_postgres_identity,
        checkpoint_cache_db_hash,
        checkpoint_cache_key_prefix,
    )

    cases = [
        {"backend": "sqlite", "sqlite_dir": "/app/backend/.deer-flow/data"},
        {"backend": "sqlite", "sqlite_dir": "/home/me/deer-flow/backend/.deer-flow/data"},
        {"backend": "postgres", "postgres_url": "postgresql://deerflow:secret@db:5432/deerflow"},
        {"backend": "postgres", "postgres_url": "postgresql://deerflow:rotated@db/deerflow?sslmode=require"},
        {"backend": "postgres", "postgres_url": "postgres://deerflow:secret@pgbouncer:6432/deerflow"},
        {"backend": "postgres", "postgres_url": "postgresql://deerflow:secret@db:5432/deerflow", "postgres_schema": "deerflow"},
        {"backend": "postgres", "postgres_url": "postgresql:///deerflow"},
        {"backend": "memory"},
        {"backend": "sqlite", "sqlite_dir": "/app/backend/.deer-flow/data", "checkpoint_cache": {"key_prefix": "myprefix"}},
    ]
    out = []
    for case in cases:
        cfg = DatabaseConfig(**case)
        if cfg.backend == "postgres":
            identity = f"postgres:{_stable_postgres_identity(cfg.postgres_url)}:{cfg.postgres_schema}"
        elif cfg.backend == "sqlite":
            identity = f"sqlite:{cfg.checkpointer_sqlite_path}"
        else:
            identity = "memory"
        out.append({"database": case, "identity": identity, "db_hash": checkpoint_cache_db_hash(cfg),
                    "key_prefix": checkpoint_cache_key_prefix(SimpleNamespace(database=cfg))})
    return out


async def _write_backend(backend: str, db_config: Any, manifest: dict, work: Path, uuids: UuidPlan) -> dict:
    import time_machine
    from deerflow.config.checkpointer_config import CheckpointerConfig
    from deerflow.persistence.engine import close_engine, init_engine_from_config
    from deerflow.runtime.checkpoint_cache.memory import MemoryCheckpointHistoryCache
    from deerflow.runtime.checkpoint_cache.provider import checkpoint_cache_key_prefix
    from deerflow.runtime.checkpointer.async_provider import _async_checkpointer_from_database
    from deerflow.runtime.checkpointer.cached_saver import CachedHistorySaver
    from deerflow.runtime.store.async_provider import _async_store
    from types import SimpleNamespace

    uuids.reset()
    home = work / "deer-flow-home"
    home.mkdir(parents=True, exist_ok=True)
    with time_machine.travel(S.T0 - timedelta(minutes=1), tick=False) as traveller:
        # gateway start-up order (app/gateway/deps.py): engine+bootstrap, checkpointer, store
        await init_engine_from_config(db_config)
        try:
            if backend == "sqlite":
                store_cfg = CheckpointerConfig(type="sqlite", connection_string=db_config.checkpointer_sqlite_path)
            else:
                store_cfg = CheckpointerConfig(type="postgres", connection_string=db_config.postgres_url,
                                               postgres_schema=db_config.postgres_schema)
            async with _async_checkpointer_from_database(db_config) as saver:
                async with _async_store(store_cfg):
                    app_config = SimpleNamespace(database=db_config)
                    prefix = checkpoint_cache_key_prefix(app_config)
                    # checkpoint_channel_mode: delta -> CachedHistorySaver (memory cache)
                    checkpointer = CachedHistorySaver(saver, MemoryCheckpointHistoryCache(max_entries=128), key_prefix=prefix)
                    writer = AppWriter(backend, db_config, manifest, traveller, uuids, home)
                    writer.checkpointer = checkpointer
                    await writer.write()
            return dict(writer.facts)
        finally:
            await close_engine()


def _jsonable(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


async def _read_back(db_config: Any) -> dict:
    """Every DeerFlow table's rows through DeerFlow's own models (to_dict), PK order."""
    from deerflow.persistence.base import Base
    from deerflow.persistence.engine import close_engine, get_session_factory, init_engine_from_config
    import deerflow.persistence.models  # noqa: F401
    from sqlalchemy import select, text

    await init_engine_from_config(db_config)  # versioned branch: upgrade head is a no-op
    try:
        sf = get_session_factory()
        out: dict[str, Any] = {}
        mappers = sorted(Base.registry.mappers, key=lambda m: m.local_table.name)
        async with sf() as session:
            for mapper in mappers:
                cls = mapper.class_
                pk = list(mapper.local_table.primary_key.columns)
                rows = (await session.execute(select(cls).order_by(*pk))).scalars().all()
                out[mapper.local_table.name] = [_jsonable(r.to_dict()) for r in rows]
            out["alembic_version"] = [{"version_num": v} for (v,) in (await session.execute(text("SELECT version_num FROM alembic_version"))).all()]
        return dict(sorted(out.items()))
    finally:
        await close_engine()


async def _write_0007(path: Path, uuids: UuidPlan) -> dict:
    """Older schema: DeerFlow's own alembic migrations base -> 0007 on an empty file, a few rows."""
    import asyncio

    import time_machine
    from alembic import command as alembic_command
    from app.gateway.auth.models import User
    from app.gateway.auth.password import hash_password
    from app.gateway.auth.repositories.sqlite import SQLiteUserRepository
    from deerflow.persistence.bootstrap import _get_alembic_config
    from deerflow.persistence.thread_meta import ThreadMetaRepository
    from deerflow.runtime.events.store.db import DbRunEventStore
    from sqlalchemy import MetaData, insert
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    uuids.reset()
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
    try:
        cfg = _get_alembic_config(engine)
        await asyncio.to_thread(alembic_command.upgrade, cfg, "0007_scheduled_run_active_index")
        sf = async_sessionmaker(engine, expire_on_commit=False)
        t = S.T0 - timedelta(days=30)
        with time_machine.travel(t, tick=False) as tm:
            with DetUrandom("bcrypt:old-admin"):
                pw = hash_password("old-admin-fixture-pw")
            await SQLiteUserRepository(sf).create_user(User(id=S.U_ADMIN, email="admin@example.com", password_hash=pw, system_role="admin"))
            threads = ThreadMetaRepository(sf)
            old_a, old_b = "0d0a0000-0000-4000-8000-000000000001", "0d0a0000-0000-4000-8000-000000000002"
            tm.move_to(t + timedelta(minutes=1))
            await threads.create(old_a, assistant_id="lead_agent", user_id=S.U_ADMIN, display_name="Old thread", metadata={})
            await threads.create(old_b, assistant_id="lead_agent", user_id=S.U_ADMIN, metadata={})
            # runs at 0007 has no operation_kind / cancel_* / idempotency_key columns, so the
            # head RunRow model cannot insert here: write the columns RunRepository.put wrote
            # at that revision through SQLAlchemy Core on the reflected table.
            md = MetaData()
            async with engine.begin() as conn:
                await conn.run_sync(lambda c: md.reflect(c, only=["runs"]))
            runs = md.tables["runs"]
            now = datetime.now(UTC)
            base = {"assistant_id": "lead_agent", "user_id": S.U_ADMIN, "model_name": S.MODEL_MAIN, "multitask_strategy": "reject",
                    "metadata_json": {}, "message_count": 0, "total_input_tokens": 0, "total_output_tokens": 0, "total_tokens": 0,
                    "llm_call_count": 0, "lead_agent_tokens": 0, "subagent_tokens": 0, "middleware_tokens": 0,
                    "token_usage_by_model": {}, "created_at": now, "updated_at": now, "first_human_message": None,
                    "last_ai_message": None, "error": None, "stop_reason": None, "follow_up_to_run_id": None}
            rows = [
                dict(base, run_id="0d5a0000-0000-4000-8000-000000000001", thread_id=old_a, status="success",
                     kwargs_json={"input": {"messages": [{"role": "user", "content": "hello"}]}}, message_count=2,
                     first_human_message="hello", last_ai_message="df echo (1): hello", total_input_tokens=160,
                     total_output_tokens=12, total_tokens=172, llm_call_count=1, lead_agent_tokens=172,
                     token_usage_by_model={S.MODEL_MAIN: {"input_tokens": 160, "output_tokens": 12, "total_tokens": 172}},
                     owner_worker_id=S.WORKER_SINGLE, lease_expires_at=None),
                dict(base, run_id="0d5a0000-0000-4000-8000-000000000002", thread_id=old_b, status="running",
                     kwargs_json={"input": {"messages": [{"role": "user", "content": "still running?"}]}},
                     owner_worker_id=S.WORKER_DEAD, lease_expires_at=now + timedelta(seconds=30)),
            ]
            async with engine.begin() as conn:
                await conn.execute(insert(runs), rows)
            tm.move_to(t + timedelta(minutes=1, seconds=5))
            await DbRunEventStore(sf).put_batch([
                {"thread_id": old_a, "run_id": rows[0]["run_id"], "event_type": "llm.human.input", "category": "message",
                 "content": {"type": "human", "content": "hello", "id": "old-h-0"}, "metadata": {"caller": "lead_agent"},
                 "user_id": S.U_ADMIN},
                {"thread_id": old_a, "run_id": rows[0]["run_id"], "event_type": "llm.ai.response", "category": "message",
                 "content": {"type": "ai", "content": "df echo (1): hello", "id": "old-ai-1"}, "metadata": {"caller": "lead_agent"},
                 "user_id": S.U_ADMIN},
            ])
    finally:
        await engine.dispose()
    # DeerFlow's engine leaves every database in WAL mode (PRAGMA journal_mode=WAL per connection)
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA journal_mode=WAL")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with sqlite3.connect(path) as c:
        tables = {
            t: [dict(zip([d[0] for d in c.execute(f'SELECT * FROM "{t}"').description], r)) for r in c.execute(f'SELECT * FROM "{t}" ORDER BY 1')]
            for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        }
    return tables


def cmd_app(args: argparse.Namespace) -> int:
    import asyncio
    import uuid

    _dfenv.add_deerflow_to_path(args.deerflow_src)
    uuids = UuidPlan()
    uuid.uuid4 = uuids  # before DeerFlow binds `from uuid import uuid4` anywhere

    from deerflow.config.database_config import DatabaseConfig
    from deerflow.persistence.bootstrap import _get_head_revision

    work = Path(args.work)
    out = Path(args.out)
    manifest = json.loads((work / "manifest.json").read_text(encoding="utf-8"))
    with sqlite3.connect(work / "sqlite" / "deerflow.db") as c:
        if c.execute("SELECT 1 FROM sqlite_master WHERE name='alembic_version'").fetchone():
            raise SystemExit(f"{work}: step B already ran on this work dir; rerun step A first (or use `all`)")
    configs = {"sqlite": DatabaseConfig(backend="sqlite", sqlite_dir=str(work / "sqlite"), checkpoint_channel_mode="delta")}
    if not args.skip_postgres:
        configs["postgres"] = DatabaseConfig(backend="postgres", postgres_url=_dfenv.url_with_db(args.pg_url, "dfckgen_" + S.PG_STEM),
                                             checkpoint_channel_mode="delta")
    result: dict[str, Any] = {
        "about": "Rows of every DeerFlow table as DeerFlow's SQLAlchemy models read them back (Base.to_dict(), "
                 "primary-key order), per backend; datetimes as isoformat() of the value the driver returned "
                 "(SQLite: naive UTC, PostgreSQL: aware +00:00). Generated by scripts/deerflow/gen_app_fixtures.py; "
                 "see fixtures/deerflow-schema/README.md.",
        "deerflow_commit": args.commit,
        "alembic_head": _get_head_revision(),
        "generation_clock_t0": S.T0.isoformat(),
        "secret_columns": {"users": ["password_hash"],
                           "channel_credentials": ["encrypted_access_token", "encrypted_refresh_token", "encrypted_extra_json"],
                           "channel_oauth_states": ["code_verifier_encrypted", "state_hash", "nonce_hash"]},
        "volatile": {"postgres": {"webhook_deliveries": ["first_seen"]}},
        "facts": {},
        "checkpoint_cache_key_prefix_examples": _cache_prefix_examples(),
    }
    for backend, cfg in configs.items():
        facts = asyncio.run(_write_backend(backend, cfg, manifest, work, uuids))
        result["facts"][backend] = facts
        result[backend] = asyncio.run(_read_back(cfg))
        n = {t: len(r) for t, r in result[backend].items()}
        print(f"step B ({backend}): rows {n}; {facts}", file=sys.stderr)
    old = Path(out) / "sqlite" / "deerflow_app_0007.db"
    old.parent.mkdir(parents=True, exist_ok=True)
    result["sqlite_0007"] = _jsonable(asyncio.run(_write_0007(old, uuids)))
    print(f"{old}: {old.stat().st_size} bytes", file=sys.stderr)
    dest = out / "deerflow-schema" / "app_rows.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{dest}: {dest.stat().st_size} bytes", file=sys.stderr)
    return 0


# =======================================================================================
# Step C: finish (.venv)
# =======================================================================================


def cmd_finish(args: argparse.Namespace) -> int:
    work = Path(args.work)
    out = Path(args.out)
    src = work / "sqlite" / "deerflow.db"
    conn = sqlite3.connect(src)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for suffix in ("-wal", "-shm"):
        if Path(str(src) + suffix).exists():
            raise SystemExit(f"sidecar left behind: {src}{suffix}")
    dest = out / "sqlite" / "deerflow_app.db"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    print(f"{dest}: {dest.stat().st_size} bytes", file=sys.stderr)
    if not args.skip_postgres:
        import gen_pg_fixtures as gpf

        sql_dest = out / "postgres" / f"{S.PG_STEM}.sql"
        sql_dest.parent.mkdir(parents=True, exist_ok=True)
        size = gpf.dump_db(gpf.db_conninfo(args.pg_url, gpf.DB_PREFIX + S.PG_STEM), sql_dest)
        if not args.keep:
            gpf.drop_db(args.pg_url, gpf.DB_PREFIX + S.PG_STEM)
        print(f"{sql_dest}: {size} bytes", file=sys.stderr)
    return 0


def cmd_all(args: argparse.Namespace) -> int:
    repo = _dfenv.REPO_ROOT
    lg_py = args.venv or str(repo / ".venv" / "bin" / "python")
    df_py = args.deerflow_venv or str(repo / ".venv-deerflow" / "bin" / "python")
    me = str(Path(__file__).resolve())
    common = ["--work", args.work] + (["--skip-postgres"] if args.skip_postgres else ["--pg-url", args.pg_url])
    work = Path(args.work)
    if work.exists():
        shutil.rmtree(work)
    steps = [
        [lg_py, me, "checkpoints", *common],
        [df_py, me, "app", *common, "--deerflow-src", args.deerflow_src, "--commit", args.commit, "--out", args.out],
        [lg_py, me, "finish", *common, "--out", args.out] + (["--keep"] if args.keep else []),
    ]
    for argv in steps:
        print("+ " + " ".join(a if "://" not in a else "$TEST_POSTGRES_URI" for a in argv), file=sys.stderr)
        subprocess.run(argv, check=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--work", default=DEFAULT_WORK, help=f"scratch directory (default {DEFAULT_WORK})")
        p.add_argument("--pg-url", default=os.environ.get("TEST_POSTGRES_URI"),
                       help="PostgreSQL server URL (default $TEST_POSTGRES_URI); the role must CREATE/DROP DATABASE")
        p.add_argument("--skip-postgres", action="store_true", help="SQLite outputs only")

    p = sub.add_parser("checkpoints", help="step A (.venv)")
    common(p)
    p = sub.add_parser("app", help="step B (.venv-deerflow)")
    common(p)
    p.add_argument("--deerflow-src", required=True)
    p.add_argument("--commit", default=_dfenv.PINNED_COMMIT)
    p.add_argument("--out", default="fixtures")
    p = sub.add_parser("finish", help="step C (.venv)")
    common(p)
    p.add_argument("--out", default="fixtures")
    p.add_argument("--keep", action="store_true", help="keep the dfckgen_deerflow_app database")
    p = sub.add_parser("all", help="A, B, C with the right interpreters")
    common(p)
    p.add_argument("--deerflow-src", required=True)
    p.add_argument("--commit", default=_dfenv.PINNED_COMMIT)
    p.add_argument("--out", default="fixtures")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--venv", help="LangGraph venv python (default .venv/bin/python)")
    p.add_argument("--deerflow-venv", help="DeerFlow venv python (default .venv-deerflow/bin/python)")
    args = ap.parse_args()
    if not getattr(args, "skip_postgres", False) and not args.pg_url:
        ap.error("--pg-url (or TEST_POSTGRES_URI) is required unless --skip-postgres")
    return {"checkpoints": cmd_checkpoints, "app": cmd_app, "finish": cmd_finish, "all": cmd_all}[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
