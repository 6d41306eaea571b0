//! The native engine: dfck's own writer and reader of the LangGraph 1.2 on-disk format, running
//! the channel workload of docs/bench-rows.md#workloads against memory, SQLite and PostgreSQL.
//!
//! Layout: [`writer`] (the format: ids, versions, checkpoint dicts, metadata, writes, delta
//! counters and snapshots), [`channels`] (the workload's messages and one-node graph),
//! [`memory`], [`sqlite`] and [`postgres`] (savers laid out like LangGraph's). This module runs a
//! case: the timed write phase (docs/bench-rows.md#measured-fields), warm read through dfck's materializer, storage stats
//! (docs/bench-rows.md#measured-fields), reopen and cold read, the reducer diagnostic and the checks (docs/bench-rows.md#measured-fields), and returns the
//! measured fields as [`crate::rows::ChannelMetrics`].

pub mod channels;
pub mod memory;
pub mod writer;

pub use crate::savers::{postgres, sqlite};

use super::case::{Backend, ChannelCase, WorkerContext};
use super::rows::ChannelMetrics;
use super::stats::{Window, window_median};
use crate::error::BenchError;
use channels::{ChannelWorkload, UpdateRows, workload_messages};
use dfck_core::codec::{Value, to_json};
use dfck_core::materialize::{Reducer, Source, StoreSource, View, fixed, materialize};
use dfck_core::model::MESSAGES;
use dfck_core::store::Store;
use serde_json::Value as Json;
use std::time::Instant;
use writer::Clock;

/// Storage sizes of one case's thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Storage {
    /// Checkpoint rows.
    pub checkpoint_rows: u64,
    /// Σ serialized checkpoint + metadata bytes (Postgres: their JSONB text).
    pub checkpoint_bytes: u64,
    /// Write rows.
    pub write_rows: u64,
    /// Σ write value bytes.
    pub write_bytes: u64,
    /// Blob rows (`None` when the backend has no blob table).
    pub blob_rows: Option<u64>,
    /// Blob bytes (`None` when the backend has no blob table).
    pub blob_bytes: Option<u64>,
}

/// Per-update latency statistics (ms).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// p50 / p90 / p95 / p99 / p99.9 / max from an HdrHistogram at microsecond resolution.
    pub p50: f64,
    /// p90.
    pub p90: f64,
    /// p95.
    pub p95: f64,
    /// p99.
    pub p99: f64,
    /// p99.9.
    pub p999: f64,
    /// Maximum.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// DeerFlow's chronological window medians (exact).
    pub first_window: f64,
    /// Middle window median.
    pub middle_window: f64,
    /// Last window median.
    pub last_window: f64,
}

impl Latency {
    /// Statistics of per-update latencies given in ms, in chronological order.
    pub fn of(ms: &[f64]) -> Result<Latency, BenchError> {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)
            .map_err(|e| format!("histogram: {e}"))?;
        for &v in ms {
            let us = (v * 1000.0).round().clamp(1.0, 3_600_000_000.0) as u64;
            h.record(us).map_err(|e| format!("histogram: {e}"))?;
        }
        let q = |p: f64| h.value_at_quantile(p) as f64 / 1000.0;
        Ok(Latency {
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            max: h.max() as f64 / 1000.0,
            mean: h.mean() / 1000.0,
            stddev: h.stdev() / 1000.0,
            first_window: window_median(ms, Window::First),
            middle_window: window_median(ms, Window::Middle),
            last_window: window_median(ms, Window::Last),
        })
    }
}

/// Everything a case measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Wall time of the whole write loop.
    pub write_total_ms: f64,
    /// Per-update statistics.
    pub latency: Latency,
    /// Warm read.
    pub warm_read_ms: f64,
    /// Storage sizes, or the error that prevented collecting them.
    pub storage: Result<Storage, BenchError>,
    /// Cold read.
    pub cold_read_ms: f64,
    /// Reopening the saver (0 for memory).
    pub saver_reopen_ms: f64,
    /// Online file sizes `(db, wal, shm)` (SQLite only).
    pub files: Option<(u64, u64, u64)>,
    /// Main file size after close (SQLite only).
    pub durable_db_bytes: Option<u64>,
    /// N.
    pub expected_message_count: u64,
    /// Messages materialized by the cold read.
    pub actual_message_count: u64,
    /// Digest of the cold read.
    pub content_sha256: String,
    /// The standalone reducer fold.
    pub reducer_replay_ms: f64,
}

impl Storage {
    /// DeerFlow's `logical_checkpoint_bytes`: checkpoint + metadata bytes plus blob bytes.
    pub fn logical_checkpoint_bytes(&self) -> u64 {
        self.checkpoint_bytes + self.blob_bytes.unwrap_or(0)
    }
}

impl Measured {
    /// The row fields of the measurements.
    pub fn to_metrics(&self) -> ChannelMetrics {
        let st = self.storage.as_ref().ok();
        let l = &self.latency;
        ChannelMetrics {
            write_total_ms: self.write_total_ms,
            write_p50_ms: l.p50,
            write_p90_ms: l.p90,
            write_p95_ms: l.p95,
            write_p99_ms: l.p99,
            write_p999_ms: l.p999,
            write_max_ms: l.max,
            write_mean_ms: l.mean,
            write_stddev_ms: l.stddev,
            write_first_window_ms: l.first_window,
            write_middle_window_ms: l.middle_window,
            write_last_window_ms: l.last_window,
            warm_read_ms: self.warm_read_ms,
            logical_checkpoint_bytes: st.map(Storage::logical_checkpoint_bytes),
            logical_write_bytes: st.map(|s| s.write_bytes),
            checkpoint_rows: st.map(|s| s.checkpoint_rows),
            write_rows: st.map(|s| s.write_rows),
            checkpoint_bytes: st.map(|s| s.checkpoint_bytes),
            blob_rows: st.and_then(|s| s.blob_rows),
            blob_bytes: st.and_then(|s| s.blob_bytes),
            write_bytes: st.map(|s| s.write_bytes),
            storage_stats_error: self.storage.as_ref().err().map(ToString::to_string),
            cold_read_ms: self.cold_read_ms,
            saver_reopen_ms: self.saver_reopen_ms,
            db_bytes: self.files.map(|f| f.0),
            wal_bytes: self.files.map(|f| f.1),
            shm_bytes: self.files.map(|f| f.2),
            durable_db_bytes: self.durable_db_bytes,
            expected_message_count: self.expected_message_count,
            actual_message_count: self.actual_message_count,
            content_sha256: self.content_sha256.clone(),
            reducer_replay_ms: self.reducer_replay_ms,
        }
    }
}

impl Default for Measured {
    fn default() -> Self {
        Measured {
            write_total_ms: 0.0,
            latency: Latency::default(),
            warm_read_ms: 0.0,
            storage: Ok(Storage::default()),
            cold_read_ms: 0.0,
            saver_reopen_ms: 0.0,
            files: None,
            durable_db_bytes: None,
            expected_message_count: 0,
            actual_message_count: 0,
            content_sha256: String::new(),
            reducer_replay_ms: 0.0,
        }
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// The canonical digest (docs/bench-rows.md#digests) of materialized messages.
pub fn digest_of(messages: &[Value]) -> Result<String, BenchError> {
    let mut owned: Vec<(String, String, Json)> = Vec::with_capacity(messages.len());
    for m in messages {
        let fields = m
            .model_fields()
            .ok_or("a materialized message is not a LangChain message")?;
        let kind = fields.get("type").and_then(Value::as_str).unwrap_or("");
        let id = fields.get("id").and_then(Value::as_str).unwrap_or("");
        let content = fields.get("content").map(to_json).unwrap_or(Json::Null);
        owned.push((kind.to_owned(), id.to_owned(), content));
    }
    Ok(super::digest::content_sha256(owned.iter().map(
        |(k, i, c)| super::digest::DigestMessage {
            kind: k,
            id: i,
            content: c,
        },
    )))
}

/// Materializes `messages` at `head` (the state view, DeerFlow's reducer) through dfck's
/// materializer.
fn read_messages(src: &mut dyn Source, head: &str) -> Result<Vec<Value>, BenchError> {
    let m = materialize(src, head, View::State, &fixed(Reducer::Deerflow))
        .map_err(|e| e.to_string())?;
    Ok(m.values
        .into_iter()
        .find(|(k, _)| k == MESSAGES)
        .map(|(_, v)| match v {
            Value::Array(items) => items,
            Value::Nil => Vec::new(),
            other => vec![other],
        })
        .unwrap_or_default())
}

/// Reads the head of (thread, "") of a store.
fn read_store(store: &dyn Store, thread_id: &str) -> Result<Vec<Value>, BenchError> {
    let head = store
        .head_id(thread_id, "")
        .map_err(|e| e.to_string())?
        .ok_or("the benchmark thread has no checkpoints")?;
    let mut src = StoreSource::new(store, thread_id, "");
    read_messages(&mut src, &head)
}

/// The timed write phase: per update, the reducer and record building plus `persist`.
fn write_phase(
    case: &ChannelCase,
    msgs: &[Value],
    mut persist: impl FnMut(&UpdateRows) -> Result<(), BenchError>,
) -> Result<(f64, Vec<f64>), BenchError> {
    let mut wl = ChannelWorkload::new(case.mode, case.snapshot_frequency, Clock::default());
    let mut lat = Vec::with_capacity(msgs.len());
    let t0 = Instant::now();
    for m in msgs {
        let t = Instant::now();
        let rows = wl.update(m)?;
        persist(&rows)?;
        lat.push(ms(t));
    }
    Ok((ms(t0), lat))
}

fn run_memory(case: &ChannelCase, msgs: &[Value]) -> Result<Measured, BenchError> {
    let thread = case.thread_id();
    let mut saver = memory::MemorySaver::new(&thread);
    let (write_total_ms, lat) = write_phase(case, msgs, |rows| {
        let [a, b, c] = &rows.checkpoints;
        saver.put(a);
        saver.put_writes(&a.id, &rows.input_writes);
        saver.put(b);
        saver.put_writes(&b.id, &rows.loop_writes);
        saver.put(c);
        Ok(())
    })?;
    let head = saver
        .head()
        .ok_or("the benchmark thread has no checkpoints")?;
    let t = Instant::now();
    let warm = read_messages(&mut saver, &head)?;
    let warm_read_ms = ms(t);
    let s = saver.stats();
    let storage = Ok(Storage {
        checkpoint_rows: s.checkpoint_rows,
        checkpoint_bytes: s.checkpoint_bytes,
        write_rows: s.write_rows,
        write_bytes: s.write_bytes,
        blob_rows: Some(s.blob_rows),
        blob_bytes: Some(s.blob_bytes),
    });
    let t = Instant::now();
    let cold = read_messages(&mut saver, &head)?;
    let cold_read_ms = ms(t);
    finish(
        case,
        msgs,
        Measured {
            write_total_ms,
            latency: Latency::of(&lat)?,
            warm_read_ms,
            storage,
            cold_read_ms,
            saver_reopen_ms: 0.0,
            ..Measured::default()
        },
        &warm,
        &cold,
    )
}

fn run_sqlite(
    case: &ChannelCase,
    msgs: &[Value],
    ctx: &WorkerContext,
) -> Result<Measured, BenchError> {
    let thread = case.thread_id();
    let path = ctx.work_dir.join("checkpoint-benchmark.sqlite");
    sqlite::remove_db(&path)?;
    let mut saver = sqlite::SqliteSaver::open(&path)?;
    let (write_total_ms, lat) = write_phase(case, msgs, |rows| persist(&mut saver, &thread, rows))?;
    let open_store =
        || dfck_core::store::sqlite::SqliteStore::open_read_only(&path).map_err(|e| e.to_string());
    let (warm, warm_read_ms) = timed_read(&open_store()?, &thread)?;
    let storage = saver.stats(&thread).map(|s| Storage {
        checkpoint_rows: s.checkpoint_rows,
        checkpoint_bytes: s.checkpoint_bytes,
        write_rows: s.write_rows,
        write_bytes: s.write_bytes,
        blob_rows: None,
        blob_bytes: None,
    });
    let side = |suffix: &str| {
        let mut p = path.clone().into_os_string();
        p.push(suffix);
        sqlite::file_size(std::path::Path::new(&p))
    };
    let files = Some((sqlite::file_size(&path), side("-wal"), side("-shm")));
    saver.close()?;
    let durable_db_bytes = Some(sqlite::file_size(&path));
    let t = Instant::now();
    let reopened = sqlite::SqliteSaver::open(&path)?;
    let saver_reopen_ms = ms(t);
    let (cold, cold_read_ms) = timed_read(&open_store()?, &thread)?;
    reopened.close()?;
    finish(
        case,
        msgs,
        Measured {
            write_total_ms,
            latency: Latency::of(&lat)?,
            warm_read_ms,
            storage: storage.map_err(BenchError::from),
            cold_read_ms,
            saver_reopen_ms,
            files,
            durable_db_bytes,
            ..Measured::default()
        },
        &warm,
        &cold,
    )
}

/// A saver the write phase persists through: LangGraph's `put` and `put_writes`.
pub trait Saver {
    /// `put` of one checkpoint.
    fn put(&mut self, thread_id: &str, rec: &writer::CheckpointRecord) -> Result<(), BenchError>;
    /// `put_writes` of one task's writes on a checkpoint.
    fn put_writes(
        &mut self,
        thread_id: &str,
        checkpoint_id: &str,
        writes: &[writer::WriteRecord],
    ) -> Result<(), BenchError>;
}

impl Saver for sqlite::SqliteSaver {
    fn put(&mut self, thread_id: &str, rec: &writer::CheckpointRecord) -> Result<(), BenchError> {
        let checkpoint = rec.encode(true);
        let metadata = rec.metadata_text();
        let row = sqlite::SqliteCheckpoint {
            id: &rec.id,
            parent: rec.parent.as_deref(),
            checkpoint: &checkpoint,
            metadata: &metadata,
        };
        Ok(self.put_checkpoint(thread_id, &row)?)
    }
    fn put_writes(
        &mut self,
        thread_id: &str,
        checkpoint_id: &str,
        writes: &[writer::WriteRecord],
    ) -> Result<(), BenchError> {
        Ok(self.insert_writes(thread_id, checkpoint_id, writes)?)
    }
}

impl Saver for postgres::PgSaver {
    fn put(&mut self, thread_id: &str, rec: &writer::CheckpointRecord) -> Result<(), BenchError> {
        let row = postgres::PgCheckpoint {
            id: &rec.id,
            parent: rec.parent.as_deref(),
            checkpoint: rec.pg_checkpoint(),
            metadata: Json::Object(rec.metadata_json()),
            blobs: rec.pg_blobs(),
        };
        Ok(self.put_checkpoint(thread_id, &row)?)
    }
    fn put_writes(
        &mut self,
        thread_id: &str,
        checkpoint_id: &str,
        writes: &[writer::WriteRecord],
    ) -> Result<(), BenchError> {
        Ok(self.insert_writes(thread_id, checkpoint_id, writes)?)
    }
}

/// One update's rows, in LangGraph's save order.
fn persist(saver: &mut dyn Saver, thread: &str, rows: &UpdateRows) -> Result<(), BenchError> {
    let [a, b, c] = &rows.checkpoints;
    saver.put(thread, a)?;
    saver.put_writes(thread, &a.id, &rows.input_writes)?;
    saver.put(thread, b)?;
    saver.put_writes(thread, &b.id, &rows.loop_writes)?;
    saver.put(thread, c)
}

/// Reads the thread's head messages through a store handle; returns them and the time taken.
fn timed_read(store: &dyn Store, thread: &str) -> Result<(Vec<Value>, f64), BenchError> {
    let t = Instant::now();
    let messages = read_store(store, thread)?;
    Ok((messages, ms(t)))
}

/// A thread id no other case shares: Postgres servers outlive cases.
fn unique_thread_id(case: &ChannelCase) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{}-{}", case.thread_id(), std::process::id(), nanos)
}

fn run_postgres(case: &ChannelCase, msgs: &[Value], url: &str) -> Result<Measured, BenchError> {
    let thread = unique_thread_id(case);
    let mut slot = Some(postgres::PgSaver::open(url)?);
    let res = postgres_phases(case, msgs, url, &thread, &mut slot);
    let cleanup = match slot.as_ref() {
        Some(s) => s.delete_thread(&thread),
        None => postgres::PgSaver::open(url).and_then(|s| s.delete_thread(&thread)),
    };
    let m = res?;
    cleanup?;
    Ok(m)
}

fn postgres_phases(
    case: &ChannelCase,
    msgs: &[Value],
    url: &str,
    thread: &str,
    slot: &mut Option<postgres::PgSaver>,
) -> Result<Measured, BenchError> {
    let saver = slot.as_mut().ok_or("postgres saver missing")?;
    let (write_total_ms, lat) = write_phase(case, msgs, |rows| persist(saver, thread, rows))?;
    let open_store = || {
        dfck_core::store::postgres::PostgresStore::open_read_only(url, None)
            .map_err(|e| e.to_string())
    };
    let (warm, warm_read_ms) = timed_read(&open_store()?, thread)?;
    let storage = saver.stats(thread).map(|s| Storage {
        checkpoint_rows: s.checkpoint_rows,
        checkpoint_bytes: s.checkpoint_bytes,
        write_rows: s.write_rows,
        write_bytes: s.write_bytes,
        blob_rows: Some(s.blob_rows),
        blob_bytes: Some(s.blob_bytes),
    });
    drop(slot.take());
    let t = Instant::now();
    *slot = Some(postgres::PgSaver::open(url)?);
    let saver_reopen_ms = ms(t);
    let (cold, cold_read_ms) = timed_read(&open_store()?, thread)?;
    finish(
        case,
        msgs,
        Measured {
            write_total_ms,
            latency: Latency::of(&lat)?,
            warm_read_ms,
            storage: storage.map_err(BenchError::from),
            cold_read_ms,
            saver_reopen_ms,
            ..Measured::default()
        },
        &warm,
        &cold,
    )
}

/// The checks and the cold-read fields (docs/bench-rows.md#measured-fields).
fn finish(
    case: &ChannelCase,
    msgs: &[Value],
    mut m: Measured,
    warm: &[Value],
    cold: &[Value],
) -> Result<Measured, BenchError> {
    let n = case.update_count;
    if warm.len() as u64 != n || cold.len() as u64 != n {
        return Err(format!(
            "expected {n} messages, materialized warm={} cold={}",
            warm.len(),
            cold.len()
        )
        .into());
    }
    let expected = digest_of(msgs)?;
    let cold_digest = digest_of(cold)?;
    if digest_of(warm)? != expected || cold_digest != expected {
        return Err(
            "materialized message content or ordering differs from deterministic input".into(),
        );
    }
    m.expected_message_count = n;
    m.actual_message_count = cold.len() as u64;
    m.content_sha256 = cold_digest;
    Ok(m)
}

/// DeerFlow's reducer diagnostic: fold N single-message writes from empty.
fn reducer_replay(msgs: &[Value]) -> Result<f64, BenchError> {
    let writes: Vec<Value> = msgs.iter().map(|m| Value::Array(vec![m.clone()])).collect();
    let refs: Vec<&Value> = writes.iter().collect();
    let t = Instant::now();
    let out = Reducer::Deerflow.apply(Vec::new(), &refs)?;
    let took = ms(t);
    if digest_of(&out)? != digest_of(msgs)? {
        return Err("standalone reducer diagnostic produced incorrect state".into());
    }
    Ok(took)
}

/// An error text for a row: one line, the PostgreSQL URL as `<pg-url>`, then the shared
/// redaction ([`crate::env::safe_error`]: work dir, home, passwords, 2000 characters).
fn row_error(msg: impl std::fmt::Display, ctx: &WorkerContext) -> BenchError {
    let mut s = msg.to_string().replace(['\n', '\r'], " ");
    if let Some(url) = &ctx.pg_url {
        s = s.replace(url.as_str(), "<pg-url>");
    }
    BenchError::Engine(crate::env::safe_error(&s, Some(&ctx.work_dir), &[]))
}

/// Runs one channel case natively and returns its measured fields, or the error text for a
/// failure row.
pub fn run_channel_case(
    case: &ChannelCase,
    ctx: &WorkerContext,
) -> Result<ChannelMetrics, BenchError> {
    run_case(case, ctx)
        .map(|mut m| {
            if let Err(e) = &m.storage {
                m.storage = Err(row_error(e, ctx));
            }
            m.to_metrics()
        })
        .map_err(|e| row_error(e, ctx))
}

fn run_case(case: &ChannelCase, ctx: &WorkerContext) -> Result<Measured, BenchError> {
    case.validate()?;
    let msgs = workload_messages(case.update_count, case.payload_bytes);
    let mut m = match case.backend {
        Backend::Memory => run_memory(case, &msgs)?,
        Backend::Sqlite => run_sqlite(case, &msgs, ctx)?,
        Backend::Postgres => {
            let url = ctx
                .pg_url
                .as_deref()
                .ok_or("the postgres backend needs a server (--pg-url or TEST_POSTGRES_URI)")?;
            run_postgres(case, &msgs, url)?
        }
    };
    m.reducer_replay_ms = reducer_replay(&msgs)?;
    Ok(m)
}

/// Writes a case's workload and leaves it in place (no timing, no cleanup): the SQLite file
/// `<work_dir>/checkpoint-benchmark.sqlite`, or a fresh unique thread on the Postgres server.
/// Returns the thread id. For tests and for opening native stores with other tools.
pub fn write_store(case: &ChannelCase, ctx: &WorkerContext) -> Result<String, BenchError> {
    let run = || -> Result<String, BenchError> {
        case.validate()?;
        let msgs = workload_messages(case.update_count, case.payload_bytes);
        match case.backend {
            Backend::Memory => Err("the memory backend keeps nothing to open".into()),
            Backend::Sqlite => {
                let thread = case.thread_id();
                let path = ctx.work_dir.join("checkpoint-benchmark.sqlite");
                sqlite::remove_db(&path)?;
                let mut saver = sqlite::SqliteSaver::open(&path)?;
                write_phase(case, &msgs, |rows| {
                    let [a, b, c] = &rows.checkpoints;
                    saver.put(&thread, a)?;
                    saver.put_writes(&thread, &a.id, &rows.input_writes)?;
                    saver.put(&thread, b)?;
                    saver.put_writes(&thread, &b.id, &rows.loop_writes)?;
                    saver.put(&thread, c)
                })?;
                saver.close()?;
                Ok(thread)
            }
            Backend::Postgres => {
                let url = ctx.pg_url.as_deref().ok_or("no PostgreSQL server given")?;
                let thread = unique_thread_id(case);
                let mut saver = postgres::PgSaver::open(url)?;
                write_phase(case, &msgs, |rows| {
                    let [a, b, c] = &rows.checkpoints;
                    saver.put(&thread, a)?;
                    saver.put_writes(&thread, &a.id, &rows.input_writes)?;
                    saver.put(&thread, b)?;
                    saver.put_writes(&thread, &b.id, &rows.loop_writes)?;
                    saver.put(&thread, c)
                })?;
                Ok(thread)
            }
        }
    };
    run().map_err(|e| row_error(e, ctx))
}
