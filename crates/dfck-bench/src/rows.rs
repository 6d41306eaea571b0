//! The typed JSONL rows dfck's benchmarks write (schema v2): [`ChannelRow`] (`bench channels`),
//! [`ProductionRow`] (`bench production`) and [`BadCaseRow`] (a worker that cannot use its
//! case). The field order of each struct IS the row schema; docs/bench-rows.md describes every
//! field. Worker rows, the controller's own failure rows (timeout, no result, malformed JSON)
//! and the minimal bad-case rows all come from these types. Rows a child prints are relayed by
//! the controller as parsed JSON objects (a langgraph worker writes them), so the controller's
//! additions (`child_process_ms`, parent RSS, `stderr_tail`) to those rows stay map edits.

use crate::case::{
    BENCHMARK, BENCHMARK_VERSION, Backend, ChannelCase, ChannelMode, Engine, ProductionCase,
    RowEnv, SCHEMA_VERSION,
};

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};

/// A row a benchmark worker builds: identity fields first, the measured fields on success.
pub trait BenchRow: Serialize + Clone {
    /// The measured fields of a successful case.
    type Metrics;
    /// Marks the row failed with a (redacted) error text.
    fn set_failure(&mut self, error: String);
    /// Adds the measured fields and the worker's own peak RSS.
    fn set_metrics(&mut self, metrics: Self::Metrics, rss: PeakRss);
    /// Adds the controller's `stderr_tail` (controller-built failure rows).
    fn set_stderr_tail(&mut self, tail: String);
}

/// A row as a JSON object (the controller's working form).
pub fn to_map<R: Serialize>(row: &R) -> Map<String, Value> {
    match serde_json::to_value(row) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// The worker's own peak RSS, appended to successful rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PeakRss {
    /// Peak RSS in bytes, `null` when unknown.
    pub peak_rss_bytes: Option<u64>,
    /// `VmHWM` (from `/proc/self/status`), `getrusage`, or `null`.
    pub rss_source: Option<&'static str>,
}

/// How a case went and what ran it: the fields every row carries right after its versions,
/// in this order (flattened into the row).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFields {
    /// Whether the case ran and passed its checks.
    pub success: bool,
    /// The redacted error of a failed case, else `null`.
    pub error: Option<String>,
    /// Always false (dfck never profiles).
    pub profiled: bool,
    /// The project's git revision, or `unknown`.
    pub git_sha: String,
    /// The Python running the case (`null` for the native engine).
    pub python_version: Option<String>,
    /// The LangGraph package version (`null` for the native engine).
    pub langgraph_version: Option<String>,
    /// e.g. `Linux-6.18.44-x86_64`.
    pub platform: String,
    /// The system under test.
    pub engine: Engine,
    /// `dfck 0.1.0` or the langgraph package version.
    pub engine_version: String,
    /// `rustc 1.x.y` / `rust` or `CPython 3.11.7`.
    pub runtime_version: String,
}

impl RunFields {
    /// A successful run of `engine` in the environment `env`.
    pub fn new(engine: Engine, env: &RowEnv) -> RunFields {
        RunFields {
            success: true,
            error: None,
            profiled: false,
            git_sha: env.git_sha.clone(),
            python_version: env.python_version.clone(),
            langgraph_version: env.langgraph_version.clone(),
            platform: env.platform.clone(),
            engine,
            engine_version: env.engine_version.clone(),
            runtime_version: env.runtime_version.clone(),
        }
    }

    /// Marks the run failed with `error`.
    pub fn fail(&mut self, error: String) {
        self.success = false;
        self.error = Some(error);
    }
}

/// A `bench channels` row (schema v2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelRow {
    /// Always 2.
    pub schema_version: u64,
    /// The measured workload's version (1, DeerFlow's).
    pub benchmark_version: u64,
    /// How the case went and what ran it.
    #[serde(flatten)]
    pub run: RunFields,
    /// full or delta.
    pub mode: ChannelMode,
    /// memory, sqlite or postgres.
    pub backend: Backend,
    /// Always `append`.
    pub scenario: String,
    /// DeltaChannel cadence (full rows carry 10).
    pub snapshot_frequency: u64,
    /// N: single-message updates.
    pub update_count: u64,
    /// Content size of every message.
    pub payload_bytes: u64,
    /// 0-based pass over the matrix.
    pub repetition: u64,
    /// Only used in the thread id.
    pub seed: i64,
    /// The measured fields (successful rows only).
    #[serde(flatten)]
    pub metrics: Option<ChannelMetrics>,
    /// The worker's peak RSS (successful rows only).
    #[serde(flatten)]
    pub rss: Option<PeakRss>,
    /// The child's redacted stderr tail (controller-built failure rows only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
}

impl ChannelRow {
    /// The identity part of a case's row: `success: true`, `error: null`, nothing measured.
    pub fn new(case: &ChannelCase, env: &RowEnv) -> ChannelRow {
        ChannelRow {
            schema_version: SCHEMA_VERSION,
            benchmark_version: BENCHMARK_VERSION,
            run: RunFields::new(case.engine, env),
            mode: case.mode,
            backend: case.backend,
            scenario: case.scenario.clone(),
            snapshot_frequency: case.snapshot_frequency,
            update_count: case.update_count,
            payload_bytes: case.payload_bytes,
            repetition: case.repetition,
            seed: case.seed,
            metrics: None,
            rss: None,
            stderr_tail: None,
        }
    }
}

impl BenchRow for ChannelRow {
    type Metrics = ChannelMetrics;
    fn set_failure(&mut self, error: String) {
        self.run.fail(error);
    }
    fn set_metrics(&mut self, metrics: ChannelMetrics, rss: PeakRss) {
        self.metrics = Some(metrics);
        self.rss = Some(rss);
    }
    fn set_stderr_tail(&mut self, tail: String) {
        self.stderr_tail = Some(tail);
    }
}

/// The measured fields of a channel case, in row order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelMetrics {
    /// Wall time of the whole N-update loop.
    pub write_total_ms: f64,
    /// Per-update latency p50 (HdrHistogram nearest rank).
    pub write_p50_ms: f64,
    /// Per-update latency p90.
    pub write_p90_ms: f64,
    /// Per-update latency p95.
    pub write_p95_ms: f64,
    /// Per-update latency p99.
    pub write_p99_ms: f64,
    /// Per-update latency p99.9.
    pub write_p999_ms: f64,
    /// Slowest update.
    pub write_max_ms: f64,
    /// Mean update latency.
    pub write_mean_ms: f64,
    /// Population standard deviation of the update latency.
    pub write_stddev_ms: f64,
    /// Median of the first chronological window.
    pub write_first_window_ms: f64,
    /// Median of the middle chronological window.
    pub write_middle_window_ms: f64,
    /// Median of the last chronological window.
    pub write_last_window_ms: f64,
    /// Warm read of the thread's state.
    pub warm_read_ms: f64,
    /// `checkpoint_bytes` + (`blob_bytes` or 0).
    pub logical_checkpoint_bytes: Option<u64>,
    /// `write_bytes`.
    pub logical_write_bytes: Option<u64>,
    /// Stored checkpoints of the thread.
    pub checkpoint_rows: Option<u64>,
    /// Stored pending writes of the thread.
    pub write_rows: Option<u64>,
    /// Σ serialized checkpoint + metadata bytes.
    pub checkpoint_bytes: Option<u64>,
    /// Channel-value blobs (`null` for sqlite).
    pub blob_rows: Option<u64>,
    /// Σ blob bytes (`null` for sqlite).
    pub blob_bytes: Option<u64>,
    /// Σ write value bytes.
    pub write_bytes: Option<u64>,
    /// Why the storage fields are null, else `null`.
    pub storage_stats_error: Option<String>,
    /// Read through a freshly opened saver.
    pub cold_read_ms: f64,
    /// Opening a new saver and running its setup (memory: 0).
    pub saver_reopen_ms: f64,
    /// SQLite main file size while open (else `null`).
    pub db_bytes: Option<u64>,
    /// SQLite `-wal` size while open (else `null`).
    pub wal_bytes: Option<u64>,
    /// SQLite `-shm` size while open (else `null`).
    pub shm_bytes: Option<u64>,
    /// SQLite main file size after close (else `null`).
    pub durable_db_bytes: Option<u64>,
    /// N.
    pub expected_message_count: u64,
    /// Messages the cold read materialized.
    pub actual_message_count: u64,
    /// Digest of the materialized messages.
    pub content_sha256: String,
    /// The standalone reducer fold over the workload.
    pub reducer_replay_ms: f64,
}

/// A `bench production` row (schema v2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProductionRow {
    /// Always 2.
    pub schema_version: u64,
    /// The measured workload's version (1, DeerFlow's).
    pub benchmark_version: u64,
    /// Always `checkpoint_production`.
    pub benchmark: &'static str,
    /// How the case went and what ran it.
    #[serde(flatten)]
    pub run: RunFields,
    /// sqlite or postgres.
    pub backend: Backend,
    /// full or delta.
    pub mode: ChannelMode,
    /// DeltaChannel cadence; `null` for full.
    pub snapshot_frequency: Option<u64>,
    /// Conversation turns.
    pub turns: u64,
    /// Content size of generated messages.
    pub payload_bytes: u64,
    /// Configured history limits.
    pub history_limits: Vec<u64>,
    /// Warm samples per read.
    pub read_repetitions: u64,
    /// 0-based pass over the matrix.
    pub repetition: u64,
    /// Only used in the thread id.
    pub seed: i64,
    /// SHA-256 of a replayed source thread's id (replays only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_thread_sha256: Option<String>,
    /// The measured fields (successful rows only).
    #[serde(flatten)]
    pub metrics: Option<ProductionMetrics>,
    /// The worker's peak RSS (successful rows only).
    #[serde(flatten)]
    pub rss: Option<PeakRss>,
    /// The child's redacted stderr tail (controller-built failure rows only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
}

impl ProductionRow {
    /// The identity part of a case's row: `success: true`, `error: null`, nothing measured.
    pub fn new(case: &ProductionCase, env: &RowEnv) -> ProductionRow {
        ProductionRow {
            schema_version: SCHEMA_VERSION,
            benchmark_version: BENCHMARK_VERSION,
            benchmark: BENCHMARK,
            run: RunFields::new(case.engine, env),
            backend: case.backend,
            mode: case.mode,
            snapshot_frequency: case.snapshot_frequency,
            turns: case.turns,
            payload_bytes: case.payload_bytes,
            history_limits: case.history_limits.clone(),
            read_repetitions: case.read_repetitions,
            repetition: case.repetition,
            seed: case.seed,
            source_thread_sha256: case.replay.as_ref().map(|r| r.source_thread_sha256.clone()),
            metrics: None,
            rss: None,
            stderr_tail: None,
        }
    }
}

impl BenchRow for ProductionRow {
    type Metrics = ProductionMetrics;
    fn set_failure(&mut self, error: String) {
        self.run.fail(error);
    }
    fn set_metrics(&mut self, metrics: ProductionMetrics, rss: PeakRss) {
        self.metrics = Some(metrics);
        self.rss = Some(rss);
    }
    fn set_stderr_tail(&mut self, tail: String) {
        self.stderr_tail = Some(tail);
    }
}

/// The measured fields of a production case, in row order (DeerFlow's, then the v2 ones).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProductionMetrics {
    /// Turn latency p50 (warm-up turns excluded).
    pub run_turn_p50_ms: f64,
    /// Turn latency p95.
    pub run_turn_p95_ms: f64,
    /// Busy checkpoint-write time per turn, p50.
    pub checkpoint_write_p50_ms: f64,
    /// Busy checkpoint-write time per turn, p95.
    pub checkpoint_write_p95_ms: f64,
    /// Busy checkpoint-write time per turn, p99.
    pub checkpoint_write_p99_ms: f64,
    /// Messages of the materialized state.
    pub message_count: u64,
    /// Digest of the seed read's messages.
    pub seed_content_sha256: String,
    /// SQLite main file size (else `null`).
    pub db_bytes: Option<u64>,
    /// SQLite `-wal` size (else `null`).
    pub wal_bytes: Option<u64>,
    /// SQLite `-shm` size (else `null`).
    pub shm_bytes: Option<u64>,
    /// Cold state read (fresh store handle and reader).
    pub state_cold_ms: f64,
    /// The saver's share of the cold state read (always 0: not attributed).
    pub state_cold_saver_ms: f64,
    /// Opening the store handle (DeerFlow's accessor-graph build).
    pub state_cold_graph_build_ms: f64,
    /// Warm state read p50.
    pub state_warm_p50_ms: f64,
    /// Warm state read p95.
    pub state_warm_p95_ms: f64,
    /// Digest of the state response.
    pub state_wire_sha256: String,
    /// Combined digest of the cold history responses.
    pub history_wire_sha256: String,
    /// Always false: saver time is not attributed.
    pub saver_read_attribution: bool,
    /// `history_limit_{L}_cold_ms`, `…_cold_saver_ms`, `…_warm_p50_ms`, `…_warm_p95_ms` per
    /// effective limit.
    #[serde(flatten)]
    pub history: HistoryTimings,
    /// Turn latency p99 (v2).
    pub run_turn_p99_ms: f64,
    /// Wall time of all turns (v2).
    pub run_total_ms: f64,
    /// Checkpoints written per turn (v2).
    pub checkpoints_per_turn: f64,
    /// Stored checkpoints of the thread (v2).
    pub checkpoint_rows: u64,
    /// Σ checkpoint + metadata bytes (v2).
    pub checkpoint_bytes: u64,
    /// Blob rows (`null` for sqlite) (v2).
    pub blob_rows: Option<u64>,
    /// Σ blob bytes (`null` for sqlite) (v2).
    pub blob_bytes: Option<u64>,
    /// Stored pending writes (v2).
    pub write_rows: u64,
    /// Σ write value bytes (v2).
    pub write_bytes: u64,
    /// Bytes of the state response (v2).
    pub state_response_bytes: u64,
    /// Reader cache hits during state reads (v2).
    pub state_cache_hits: u64,
    /// Reader cache misses during state reads (v2).
    pub state_cache_misses: u64,
    /// Reader cache hits during history reads (v2).
    pub history_cache_hits: u64,
    /// Reader cache misses during history reads (v2).
    pub history_cache_misses: u64,
    /// SQLite main file size after `wal_checkpoint(TRUNCATE)`: the size the full/delta
    /// decision rests on (else `null`) (v2).
    pub durable_db_bytes: Option<u64>,
    /// PostgreSQL `pg_total_relation_size('checkpoints')` (else `null`) (v2).
    pub pg_checkpoints_total_bytes: Option<u64>,
    /// PostgreSQL `pg_total_relation_size('checkpoint_blobs')` (else `null`) (v2).
    pub pg_checkpoint_blobs_total_bytes: Option<u64>,
    /// PostgreSQL `pg_total_relation_size('checkpoint_writes')` (else `null`) (v2).
    pub pg_checkpoint_writes_total_bytes: Option<u64>,
}

/// The timings of one effective history limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoryTiming {
    /// The effective limit (min(limit, 100)).
    pub limit: u64,
    /// Cold read with an empty cache.
    pub cold_ms: f64,
    /// The saver's share of it (always 0).
    pub cold_saver_ms: f64,
    /// Warm read p50.
    pub warm_p50_ms: f64,
    /// Warm read p95.
    pub warm_p95_ms: f64,
}

/// The per-limit history fields, serialized as `history_limit_{L}_…` keys in limit order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryTimings(pub Vec<HistoryTiming>);

impl Serialize for HistoryTimings {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len() * 4))?;
        for h in &self.0 {
            let l = h.limit;
            m.serialize_entry(&format!("history_limit_{l}_cold_ms"), &h.cold_ms)?;
            m.serialize_entry(
                &format!("history_limit_{l}_cold_saver_ms"),
                &h.cold_saver_ms,
            )?;
            m.serialize_entry(&format!("history_limit_{l}_warm_p50_ms"), &h.warm_p50_ms)?;
            m.serialize_entry(&format!("history_limit_{l}_warm_p95_ms"), &h.warm_p95_ms)?;
        }
        m.end()
    }
}

/// The minimal row of a worker that cannot decode or validate its case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BadCaseRow {
    /// Always 2.
    pub schema_version: u64,
    /// Always 1.
    pub benchmark_version: u64,
    /// Always false.
    pub success: bool,
    /// Why the case is unusable (redacted).
    pub error: String,
    /// `checkpoint_production` for production workers; absent for channel workers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<&'static str>,
}

impl BadCaseRow {
    /// A bad-case row; `benchmark` is set by production workers.
    pub fn new(error: String, benchmark: Option<&'static str>) -> BadCaseRow {
        BadCaseRow {
            schema_version: SCHEMA_VERSION,
            benchmark_version: BENCHMARK_VERSION,
            success: false,
            error,
            benchmark,
        }
    }
}

/// What the controller builds its own failure rows (timeout, no result, malformed JSON) from:
/// a case's identity row.
pub trait FailureRowSource {
    /// The identity row with `success: false`, `error` and `stderr_tail` set.
    fn failure_row(&self, error: String, stderr_tail: String) -> Map<String, Value>;
}

impl<R: BenchRow> FailureRowSource for R {
    fn failure_row(&self, error: String, stderr_tail: String) -> Map<String, Value> {
        let mut row = self.clone();
        row.set_failure(error);
        row.set_stderr_tail(stderr_tail);
        to_map(&row)
    }
}

/// An untyped identity row (controller tests): the same edits as on a typed row.
impl FailureRowSource for Map<String, Value> {
    fn failure_row(&self, error: String, stderr_tail: String) -> Map<String, Value> {
        let mut row = self.clone();
        row.insert("success".into(), Value::Bool(false));
        row.insert("error".into(), Value::String(error));
        row.insert("stderr_tail".into(), Value::String(stderr_tail));
        row
    }
}
