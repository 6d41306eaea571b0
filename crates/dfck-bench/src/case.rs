//! Case models of `dfck bench channels` (docs/bench-rows.md#workloads) and the identity fields every row
//! starts with (docs/bench-rows.md#channel-rows, schema v2 per docs/bench-rows.md). Shared by the controller (failure rows) and workers.

use crate::error::BenchError;
use serde::{Deserialize, Serialize};

/// The row schema dfck writes (docs/bench-rows.md).
pub const SCHEMA_VERSION: u64 = 2;
/// The measured workload's version (unchanged from DeerFlow's harness).
pub const BENCHMARK_VERSION: u64 = 1;

pub use dfck_core::model::ChannelMode;
pub use dfck_core::store::Backend;

/// Which system under test runs the case (docs/bench-rows.md#engines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// dfck's own writer and reader of the LangGraph 1.2 format.
    Native,
    /// The real Python LangGraph, through `scripts/bench_worker_langgraph.py`.
    Langgraph,
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Engine {
    type Err = crate::error::BenchError;
    fn from_str(s: &str) -> Result<Engine, Self::Err> {
        match s {
            "native" => Ok(Engine::Native),
            "langgraph" => Ok(Engine::Langgraph),
            other => Err(crate::error::BenchError::UnknownEngine(other.into())),
        }
    }
}

impl Engine {
    /// The engine's name in rows and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Native => "native",
            Engine::Langgraph => "langgraph",
        }
    }
}

/// One channel benchmark case: the eight fields DeerFlow's worker receives plus the engine.
/// Serialized as the compact JSON handed to a worker child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelCase {
    /// full or delta.
    pub mode: ChannelMode,
    /// memory, sqlite or postgres.
    pub backend: Backend,
    /// N: single-message updates.
    pub update_count: u64,
    /// Exact content size of every message.
    pub payload_bytes: u64,
    /// 0-based pass over the matrix.
    pub repetition: u64,
    /// Only used in the thread id.
    pub seed: i64,
    /// Always `append`.
    #[serde(default = "default_scenario")]
    pub scenario: String,
    /// DeltaChannel cadence; full rows carry 10.
    #[serde(default = "default_frequency")]
    pub snapshot_frequency: u64,
    /// The system under test.
    #[serde(default = "default_engine")]
    pub engine: Engine,
}

fn default_scenario() -> String {
    "append".to_string()
}
fn default_frequency() -> u64 {
    10
}
fn default_engine() -> Engine {
    Engine::Native
}

impl ChannelCase {
    /// Checks the case like DeerFlow's `BenchmarkCase.__post_init__`.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.update_count == 0 {
            return Err(BenchError::InvalidCase(
                "update_count must be positive".into(),
            ));
        }
        if self.payload_bytes == 0 {
            return Err(BenchError::InvalidCase(
                "payload_bytes must be positive".into(),
            ));
        }
        if self.snapshot_frequency == 0 {
            return Err(BenchError::InvalidCase(
                "snapshot_frequency must be positive".into(),
            ));
        }
        if self.scenario != "append" {
            return Err(BenchError::InvalidCase(format!(
                "unsupported scenario: '{}'",
                self.scenario
            )));
        }
        Ok(())
    }

    /// The thread the workload writes: `checkpoint-bench-{seed}-{repetition}` (docs/bench-rows.md#workloads).
    pub fn thread_id(&self) -> String {
        format!("checkpoint-bench-{}-{}", self.seed, self.repetition)
    }

    /// DeerFlow's lower bound of full-mode bytes (docs/bench-rows.md#matrix-and-gate): `P × N × (N+1) / 2`.
    pub fn estimated_full_bytes(&self) -> u128 {
        let n = u128::from(self.update_count);
        u128::from(self.payload_bytes) * n * (n + 1) / 2
    }
}

/// Who ran a row: engine name/version and runtime, plus the DeerFlow-compatible fields.
#[derive(Debug, Clone, Default)]
pub struct RowEnv {
    /// `git rev-parse HEAD` of the project, or `unknown`.
    pub git_sha: String,
    /// DeerFlow's `python_version`: the Python running the case, `null` for the native engine.
    pub python_version: Option<String>,
    /// DeerFlow's `langgraph_version`: the LangGraph package, `null` for the native engine.
    pub langgraph_version: Option<String>,
    /// e.g. `Linux-6.18.44-x86_64`.
    pub platform: String,
    /// `dfck 0.1.0` or `langgraph 1.2.22`.
    pub engine_version: String,
    /// `rustc …` or `CPython 3.11.7`.
    pub runtime_version: String,
}

/// What a worker child gets besides its case.
#[derive(Debug, Clone)]
pub struct WorkerContext {
    /// A fresh temporary directory for this case, deleted after it (never named in rows).
    pub work_dir: std::path::PathBuf,
    /// The PostgreSQL server for `backend: postgres` (from `DFCK_BENCH_PG_URL`; never in argv
    /// or rows).
    pub pg_url: Option<String>,
    /// Identity of the engine and machine.
    pub env: RowEnv,
}

/// DeerFlow discards the first turns from the latency statistics (`WARMUP_TURNS`).
pub const WARMUP_TURNS: u64 = 2;
/// The Gateway's history route caps `limit` at 100 (`ThreadHistoryRequest.limit le=100`).
pub const HISTORY_LIMIT_CAP: u64 = 100;
/// `benchmark` of production rows.
pub const BENCHMARK: &str = "checkpoint_production";

/// Where a replayed case's messages come from (`--replay-from`): never in rows but as hashes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplaySource {
    /// A file (in the controller's temp dir) holding the source thread's messages, one
    /// msgpack document per message; the worker reads it.
    pub messages_file: String,
    /// SHA-256 of the source thread id: what rows say about the source.
    pub source_thread_sha256: String,
}

/// One production case: DeerFlow's eight fields plus engine, backend and an optional replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProductionCase {
    /// full or delta.
    pub mode: ChannelMode,
    /// Conversation turns.
    pub turns: u64,
    /// Exact content size of generated messages.
    pub payload_bytes: u64,
    /// DeltaChannel cadence; `null` for full.
    pub snapshot_frequency: Option<u64>,
    /// Configured history limits (effective = min(limit, 100), deduplicated).
    pub history_limits: Vec<u64>,
    /// Warm samples per read.
    pub read_repetitions: u64,
    /// 0-based pass.
    pub repetition: u64,
    /// Only used in the thread id.
    pub seed: i64,
    /// The system under test.
    #[serde(default = "native")]
    pub engine: Engine,
    /// sqlite or postgres.
    #[serde(default = "sqlite")]
    pub backend: Backend,
    /// Replay an operator's thread instead of the generated workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySource>,
}

fn native() -> Engine {
    Engine::Native
}
fn sqlite() -> Backend {
    Backend::Sqlite
}

impl ProductionCase {
    /// Checks the case like DeerFlow's `ProductionCase.__post_init__`.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.turns <= WARMUP_TURNS {
            return Err(BenchError::InvalidCase(
                "turns must exceed the 2-turn warm-up".into(),
            ));
        }
        if self.payload_bytes == 0 {
            return Err(BenchError::InvalidCase(
                "payload_bytes must be positive".into(),
            ));
        }
        match (self.mode, self.snapshot_frequency) {
            (ChannelMode::Full, Some(_)) => {
                return Err(BenchError::InvalidCase(
                    "snapshot_frequency is a delta-only axis".into(),
                ));
            }
            (ChannelMode::Delta, None | Some(0)) => {
                return Err(BenchError::InvalidCase(
                    "delta cases need a positive snapshot_frequency".into(),
                ));
            }
            _ => {}
        }
        if self.history_limits.contains(&0) {
            return Err(BenchError::InvalidCase(
                "history limits must be positive".into(),
            ));
        }
        if self.read_repetitions == 0 {
            return Err(BenchError::InvalidCase(
                "read_repetitions must be positive".into(),
            ));
        }
        if self.backend == Backend::Memory {
            return Err(BenchError::InvalidCase(
                "bench production runs on sqlite or postgres".into(),
            ));
        }
        Ok(())
    }

    /// `checkpoint-production-{seed}-{repetition}` (docs/bench-rows.md#workloads).
    pub fn thread_id(&self) -> String {
        format!("checkpoint-production-{}-{}", self.seed, self.repetition)
    }

    /// The effective history limits: `min(l, 100)`, duplicates dropped, order kept.
    pub fn effective_history_limits(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for l in &self.history_limits {
            let e = (*l).min(HISTORY_LIMIT_CAP);
            if !out.contains(&e) {
                out.push(e);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_json_round_trip_and_identity_order() {
        let c: ChannelCase = serde_json::from_str(
            r#"{"mode":"delta","backend":"sqlite","update_count":10,"payload_bytes":128,"repetition":0,"seed":1,"scenario":"append","snapshot_frequency":10}"#,
        )
        .unwrap();
        assert_eq!(c.engine, Engine::Native);
        assert_eq!(c.thread_id(), "checkpoint-bench-1-0");
        let row = crate::rows::to_map(&crate::rows::ChannelRow::new(&c, &RowEnv::default()));
        let keys: Vec<&str> = row.keys().map(String::as_str).collect();
        assert_eq!(keys[0], "schema_version");
        assert_eq!(keys.last(), Some(&"seed"));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn cap_boundary() {
        let mut c: ChannelCase = serde_json::from_str(
            r#"{"mode":"full","backend":"sqlite","update_count":4095,"payload_bytes":128,"repetition":0,"seed":1}"#,
        )
        .unwrap();
        assert_eq!(c.estimated_full_bytes(), 1_073_479_680);
        c.update_count = 4096;
        assert!(c.estimated_full_bytes() > 1 << 30);
    }
}
