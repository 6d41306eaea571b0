"""The DeerFlow application fixture scenario (shared by both steps of gen_app_fixtures.py).

Plain data only (stdlib), importable from the LangGraph venv (Python 3.11, step A) and
from the DeerFlow venv (Python 3.12, step B). Every id and every instant the generator
controls is fixed here. See fixtures/deerflow-schema/README.md for the story of each
thread.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# The generator clock (time-machine, tick=False) starts here; every timestamp written by
# LangGraph or DeerFlow during generation is a fixed offset from it.
T0 = datetime(2026, 8, 20, 8, 0, 0, tzinfo=UTC)

# DeerFlow's default delta cadence (DEFAULT_CHECKPOINT_SNAPSHOT_FREQUENCY,
# deerflow/config/database_config.py); the store is in checkpoint_channel_mode: delta.
SNAPSHOT_FREQUENCY = 10

PG_STEM = "deerflow_app"  # PostgreSQL database dfckgen_<stem> while generating
RANDOM_SEED = 20260820

# ---------------------------------------------------------------------------------------
# users (ids are UUID strings, as DeerFlow's User model makes them)
# ---------------------------------------------------------------------------------------

U_ADMIN = "a0000000-0000-4000-8000-000000000001"
U_ALICE = "a0000000-0000-4000-8000-000000000002"
U_BOB = "a0000000-0000-4000-8000-000000000003"

USERS = [
    # id, email, password (test-only), system_role
    {"id": U_ADMIN, "email": "admin@example.com", "password": "admin-fixture-pw-1", "system_role": "admin"},
    {"id": U_ALICE, "email": "Alice@Example.com", "password": "alice-fixture-pw-1", "system_role": "user",
     "new_password": "alice-fixture-pw-2"},
    {"id": U_BOB, "email": "bob@example.com", "password": None, "system_role": "user",
     "oauth_provider": "github", "oauth_id": "gh-424242"},
]

# ---------------------------------------------------------------------------------------
# threads
# ---------------------------------------------------------------------------------------


def tid(n: int) -> str:
    return f"df0a0000-0000-4000-8000-{n:012x}"


def rid(thread_no: int, run_no: int) -> str:
    return f"5a0000{thread_no:02x}-0000-4000-8000-{run_no:012x}"


T_A = tid(1)   # alice, pinned, the full DeerFlow conversation
T_B = tid(2)   # alice, last run error
T_C = tid(3)   # admin, running run with a live lease
T_D = tid(4)   # admin, running run whose lease expired (dead worker)
T_E = tid(5)   # alice, leftover delete reservation (operation_kind='delete')
T_F = tid(6)   # bob (OAuth), IM-channel thread: interrupted + timeout runs
T_G = tid(7)   # checkpoints only: no threads_meta, no runs
T_H = "legacy.thread.0001"  # checkpoints only; fails DeerFlow's thread id rule
T_I = tid(9)   # alice, branch of T_A
T_J = tid(10)  # admin, scheduled-task execution thread (run_events without user_id)
T_K = tid(11)  # alice, threads_meta only + pending run with NULL lease (never started)
T_L = tid(12)  # threads_meta only, user_id NULL (pre-auth row)
T_M = tid(13)  # alice, deleted through DeerFlow's delete flow: runs/run_events/feedback left behind

THREAD_NO = {T_A: 1, T_B: 2, T_C: 3, T_D: 4, T_E: 5, T_F: 6, T_G: 7, T_H: 8, T_I: 9, T_J: 10, T_K: 11, T_L: 12, T_M: 13}

OWNER = {T_A: U_ALICE, T_B: U_ALICE, T_C: U_ADMIN, T_D: U_ADMIN, T_E: U_ALICE, T_F: U_BOB,
         T_G: None, T_H: None, T_I: U_ALICE, T_J: U_ADMIN, T_K: U_ALICE, T_L: None, T_M: U_ALICE}


def thread_start(thread: str) -> datetime:
    return T0 + timedelta(minutes=10 * THREAD_NO[thread])


# Steps written by step A (LangGraph). kinds:
#   run       g.invoke({"messages": [Human(text, id)]})                    -> one DeerFlow run
#   inflight  the same with interrupt_before=["lead_agent"]: the run's input checkpoint
#             exists but the agent never finished (the run is pending/running in `runs`)
#   state     g.update_state(values, as_node="lead_agent") (DeerFlow POST /threads/{id}/state)
#   branch    T_I only: copy T_A's state at its plan turn with Overwrite (DeerFlow branch)
# Each run step names its run id (written into checkpoint metadata as run_id).
CHECKPOINT_THREADS: dict[str, list[dict]] = {
    T_A: [
        {"kind": "run", "run": rid(1, 1), "text": "setup the sandbox", "id": "df-h-0"},
        {"kind": "run", "run": rid(1, 2), "text": "plan the work 计划", "id": "df-h-1"},
        {"kind": "run", "run": rid(1, 3), "text": "write the report", "id": "df-h-2"},
        {"kind": "run", "run": rid(1, 4), "text": "fix the plan", "id": "df-h-3"},
        {"kind": "state", "values": {"messages": [("human", "note added via POST /state", "df-upd-1")]}},
        {"kind": "state", "values": {"messages": [("remove", "df-upd-1")]}},
        {"kind": "run", "run": rid(1, 5), "text": "summarize please", "id": "df-h-4"},
        {"kind": "run", "run": rid(1, 6), "text": "one more question 🙂", "id": "df-h-5"},
        {"kind": "run", "run": rid(1, 7), "text": "write again", "id": "df-h-6"},
    ],
    T_B: [
        {"kind": "run", "run": rid(2, 1), "text": "hello, can you help me plan a trip?", "id": "b-h-0"},
        {"kind": "state", "values": {"title": "Kyoto trip 京都"}},
        {"kind": "run", "run": rid(2, 2), "text": "plan a 3-day trip to Kyoto", "id": "b-h-1"},
    ],
    T_C: [
        {"kind": "run", "run": rid(3, 1), "text": "setup the sandbox", "id": "c-h-0"},
        {"kind": "inflight", "run": rid(3, 2), "text": "write the quarterly report", "id": "c-h-1"},
    ],
    T_D: [
        {"kind": "run", "run": rid(4, 1), "text": "hello from the ops team", "id": "d-h-0"},
        {"kind": "state", "values": {"title": "Migration plan"}},
        {"kind": "inflight", "run": rid(4, 2), "text": "plan the database migration", "id": "d-h-1"},
    ],
    T_E: [
        {"kind": "run", "run": rid(5, 1), "text": "hello, notes please", "id": "e-h-0"},
        {"kind": "state", "values": {"title": "Meeting notes"}},
        {"kind": "run", "run": rid(5, 2), "text": "write the meeting notes", "id": "e-h-1"},
    ],
    T_F: [
        {"kind": "run", "run": rid(6, 1), "text": "hi from Slack 👋", "id": "f-h-0"},
        {"kind": "state", "values": {"title": "Sprint planning"}},
        {"kind": "inflight", "run": rid(6, 2), "text": "plan the sprint", "id": "f-h-1"},
        {"kind": "run", "run": rid(6, 3), "text": "write the sprint summary instead", "id": "f-h-2"},
    ],
    T_G: [
        {"kind": "run", "run": rid(7, 1), "text": "a thread nobody registered", "id": "g-h-0"},
    ],
    T_H: [
        {"kind": "run", "run": rid(8, 1), "text": "legacy hello", "id": "h-h-0"},
    ],
    T_I: [
        {"kind": "branch", "source": T_A, "source_last_message": "df-ai-3"},
        {"kind": "run", "run": rid(9, 1), "text": "continue on the branch 分支", "id": "i-h-0"},
    ],
    T_J: [
        {"kind": "run", "run": rid(10, 1), "text": "Daily digest of yesterday's activity", "id": "j-h-0"},
        {"kind": "state", "values": {"title": "Daily digest"}},
    ],
    T_M: [
        {"kind": "run", "run": rid(13, 1), "text": "hello, this thread will be deleted", "id": "m-h-0"},
    ],
}

# Step B: how each run ends (default: success). Runs not listed in CHECKPOINT_THREADS
# (K's pending run) are listed here too.
RUN_OUTCOME = {
    rid(2, 2): {"status": "error", "error": "LLM provider failed after retries"},
    rid(3, 2): {"status": "running", "lease": "live"},
    rid(4, 2): {"status": "running", "lease": "expired"},
    rid(6, 2): {"status": "interrupted"},  # claimed by rid(6, 3) (multitask_strategy=interrupt)
    rid(6, 3): {"status": "timeout", "error": "Run exceeded the configured timeout", "strategy": "interrupt"},
    rid(11, 1): {"status": "pending", "lease": None},
}
K_RUN = rid(11, 1)
K_TEXT = "are you there?"

# worker ids, in DeerFlow's format f"{socket.gethostname()}:{uuid.uuid4().hex}"
WORKER_LIVE = "deerflow-gateway-0:0b1e0000000040008000000000000001"
WORKER_DEAD = "deerflow-gateway-1:0b1e0000000040008000000000000002"
WORKER_CRASHED_DELETE = "deerflow-gateway-2:0b1e0000000040008000000000000003"
WORKER_SINGLE = "deerflow-gateway-3:0b1e0000000040008000000000000004"
LIVE_LEASE = "2099-01-01T00:00:00+00:00"  # renewed through RunRepository.renew_lease

# ids DeerFlow would mint with uuid4; fixed so reruns differ as little as possible
DELETE_RESERVATION_RUN = "de1e0000-0000-4000-8000-000000000005"
DELETE_FLOW_RUN = "de1e0000-0000-4000-8000-00000000000d"
MODEL_MAIN = "deepseek-v3"
MODEL_ALT = "gpt-4o-mini"
CHANNEL_KEY = "dfck-fixture-channel-key"  # ChannelCredentialCipher.from_key(...) (test key)


def after_all() -> datetime:
    """Instant of the last writes (delete flow, reservation, password change)."""
    return T0 + timedelta(hours=3)
