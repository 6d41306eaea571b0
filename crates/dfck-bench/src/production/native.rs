//! The native production engine: drives dfck's LangGraph-format writer
//! ([`crate::native::writer::GraphState`]) with the DeerFlow-shaped turns of
//! [`super::workload`] — per turn an `input` checkpoint, one `loop` checkpoint per node that
//! ran (the middleware-heavy graph: before_agent, model, tools, model, after_model,
//! after_agent) and a final one, every ThreadState channel stored whole, `messages` as the
//! whole list (full) or as `DeltaChannel` snapshots every K updates (delta) — into SQLite or
//! PostgreSQL, then measures DeerFlow's production metrics (docs/bench-rows.md):
//! run-turn and checkpoint-write latencies (first 2 turns discarded), seed digest, state and
//! history reads cold and warm through [`super::reader::Reader`], the wire digests, online
//! sizes.

use super::reader::Reader;
use super::workload::{Step, Turn, generated_turn, replay_turns, written_messages};
use super::{ProductionCase, WARMUP_TURNS};
use crate::case::{Backend, ChannelMode, WorkerContext};
use crate::digest::combined_sha256;
use crate::error::BenchError;
use crate::native::writer::{
    ChannelKind, CheckpointRecord, Clock, GraphState, Stored, WriteRecord, encode_list,
    pull_task_path, task_id,
};
use crate::native::{Latency, Saver, digest_of, postgres, sqlite};
use crate::rows::{HistoryTiming, HistoryTimings, ProductionMetrics};
use crate::stats::merged_busy;
use dfck_core::codec::{Value, encode};
use dfck_core::materialize::Reducer;
use dfck_core::materialize::reducers::DeerflowMessages;
use dfck_core::model::{MESSAGES, MODE_MARKER};
use dfck_core::store::Store;
use std::time::Instant;

const START: &str = "__start__";
const NO_WRITES: &str = "__no_writes__";
/// The nodes a turn can run, in graph order (their `branch:to:` trigger channels follow).
const NODES: [&str; 5] = [
    "before_agent",
    "model",
    "tools",
    "after_model",
    "after_agent",
];
/// ThreadState channels besides `messages`, in channel-table order.
const STATE_CHANNELS: [&str; 9] = [
    "thread_data",
    "uploaded_files",
    "sandbox",
    "skill_context",
    "artifacts",
    "todos",
    "delegations",
    "viewed_images",
    "title",
];

fn branch(node: &str) -> String {
    format!("branch:to:{node}")
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// The reducer of a non-`messages` channel: list unions for `artifacts`, upsert by `id` for
/// `delegations`, dict merge for `viewed_images`, last value for the rest.
fn reduce_channel(channel: &str, old: Option<Value>, new: Value) -> Value {
    match (channel, old, new) {
        ("artifacts", Some(Value::Array(mut a)), Value::Array(b)) => {
            for x in b {
                if !a.contains(&x) {
                    a.push(x);
                }
            }
            Value::Array(a)
        }
        ("delegations", Some(Value::Array(mut a)), Value::Array(b)) => {
            for x in b {
                let id = x.get("id").cloned();
                match a
                    .iter()
                    .position(|y| id.is_some() && y.get("id").cloned() == id)
                {
                    Some(i) => a[i] = x,
                    None => a.push(x),
                }
            }
            Value::Array(a)
        }
        ("viewed_images", Some(Value::Map(mut a)), Value::Map(b)) => {
            for (k, v) in b {
                match a.iter().position(|(x, _)| *x == k) {
                    Some(i) => a[i].1 = v,
                    None => a.push((k, v)),
                }
            }
            Value::Map(a)
        }
        (_, _, new) => new,
    }
}

/// One persisted call, in order: `put` of a checkpoint or `put_writes` on one.
pub enum Row {
    /// `put`.
    Put(Box<CheckpointRecord>),
    /// `put_writes(checkpoint_id, writes)`.
    Writes(String, Vec<WriteRecord>),
}

/// The saver-visible state of the production graph for one thread.
pub struct ProductionGraph {
    mode: ChannelMode,
    state: GraphState,
    /// The live list under DeerFlow's reducer, kept open so a turn's appends cost only
    /// themselves.
    messages: DeerflowMessages,
    /// The other channels in update order, each with its encoding (made once per update,
    /// not once per checkpoint).
    values: Vec<(String, Value, Vec<u8>)>,
}

impl ProductionGraph {
    /// A fresh thread (delta: `DeltaChannel` at `snapshot_frequency` and DeerFlow's marker).
    pub fn new(mode: ChannelMode, snapshot_frequency: Option<u64>, clock: Clock) -> Self {
        let kind = match (mode, snapshot_frequency) {
            (ChannelMode::Delta, Some(f)) => ChannelKind::Delta {
                snapshot_frequency: f,
            },
            _ => ChannelKind::Plain,
        };
        let mut channels = vec![(MESSAGES.to_owned(), kind)];
        channels.extend(
            STATE_CHANNELS
                .iter()
                .map(|c| ((*c).to_owned(), ChannelKind::Plain)),
        );
        channels.push((START.to_owned(), ChannelKind::Plain));
        channels.extend(NODES.iter().map(|n| (branch(n), ChannelKind::Plain)));
        let extra = match mode {
            ChannelMode::Full => Vec::new(),
            ChannelMode::Delta => vec![(MODE_MARKER.to_owned(), "delta".to_owned())],
        };
        ProductionGraph {
            mode,
            state: GraphState::new(channels, extra, clock),
            messages: DeerflowMessages::default(),
            values: Vec::new(),
        }
    }

    /// The live message list.
    pub fn messages(&self) -> &[Value] {
        self.messages.messages()
    }

    fn stored(&self, updated: &[&str]) -> Vec<(String, Stored)> {
        let mut out = Vec::with_capacity(self.values.len() + 2);
        let versioned = self.state.version(MESSAGES).is_some() || updated.contains(&MESSAGES);
        if versioned {
            let v = match self.mode {
                ChannelMode::Full => Some(Stored::Encoded(encode_list(self.messages.messages()))),
                ChannelMode::Delta => self
                    .state
                    .snapshot_due(MESSAGES, updated)
                    .then(|| Stored::snapshot_of(&encode_list(self.messages.messages()))),
            };
            if let Some(v) = v {
                out.push((MESSAGES.to_owned(), v));
            }
        }
        for (k, _, encoded) in &self.values {
            out.push((k.clone(), Stored::Encoded(encoded.clone())));
        }
        out
    }

    fn apply(&mut self, writes: &[(&'static str, Value)]) -> Result<(), BenchError> {
        for (ch, v) in writes {
            if *ch == MESSAGES {
                self.messages.apply(&[v])?;
            } else {
                let old = self
                    .values
                    .iter()
                    .position(|(k, _, _)| k == ch)
                    .map(|i| self.values.remove(i).1);
                let new = reduce_channel(ch, old, v.clone());
                let encoded = encode(&new);
                self.values.push(((*ch).to_owned(), new, encoded));
            }
        }
        Ok(())
    }

    fn task_writes(
        ck: &CheckpointRecord,
        node: &str,
        writes: &[(&'static str, Value)],
        next: Option<&str>,
    ) -> Vec<WriteRecord> {
        let task = task_id(&ck.id, ck.step, node);
        let path = pull_task_path(node);
        let mut out: Vec<WriteRecord> = writes
            .iter()
            .enumerate()
            .map(|(i, (ch, v))| WriteRecord {
                task_id: task.clone(),
                task_path: path.clone(),
                idx: i as i64,
                channel: (*ch).to_owned(),
                type_tag: "msgpack",
                value: encode(v),
            })
            .collect();
        if let Some(n) = next {
            out.push(WriteRecord {
                task_id: task.clone(),
                task_path: path.clone(),
                idx: out.len() as i64,
                channel: branch(n),
                type_tag: "null",
                value: Vec::new(),
            });
        }
        if out.is_empty() {
            out.push(WriteRecord {
                task_id: task,
                task_path: path,
                idx: 0,
                channel: NO_WRITES.to_owned(),
                type_tag: "null",
                value: Vec::new(),
            });
        }
        out
    }

    /// One turn (`graph.invoke` of its input): the rows to persist, in save order.
    pub fn turn(&mut self, steps: &[Step]) -> Result<Vec<Row>, BenchError> {
        let Some((input, nodes)) = steps.split_first() else {
            return Ok(Vec::new());
        };
        let mut rows = Vec::with_capacity(2 * steps.len() + 1);
        // The input checkpoint: the input sits in `__start__`.
        let mut values = self.stored(&[START]);
        let start_value = Value::Map(
            input
                .writes
                .iter()
                .map(|(k, v)| (Value::Str((*k).to_owned()), v.clone()))
                .collect(),
        );
        values.push((START.to_owned(), Stored::Encoded(encode(&start_value))));
        let ck = self.state.save("input", &[START], &[START], values);
        let next = nodes.first().map(|s| s.node);
        let writes = Self::task_writes(&ck, START, &input.writes, next);
        let id = ck.id.clone();
        rows.push(Row::Put(Box::new(ck)));
        rows.push(Row::Writes(id, writes));
        let mut pending: &[(&'static str, Value)] = &input.writes;
        let mut ran = START;
        let mut trigger = START.to_owned();
        let mut i = 0;
        loop {
            self.apply(pending)?;
            self.state.mark_seen(ran, &trigger);
            let next = nodes.get(i).map(|s| s.node);
            let next_branch = next.map(branch);
            let mut updated: Vec<&str> = pending.iter().map(|(c, _)| *c).collect();
            if let Some(b) = &next_branch {
                updated.push(b);
            }
            updated.dedup();
            let mut bump: Vec<&str> = vec![&trigger];
            bump.extend(updated.iter().copied());
            let mut values = self.stored(&updated);
            if let Some(b) = &next_branch {
                values.push((b.clone(), Stored::Nil));
            }
            let ck = self.state.save("loop", &updated, &bump, values);
            let Some(step) = nodes.get(i) else {
                rows.push(Row::Put(Box::new(ck)));
                return Ok(rows);
            };
            let after = nodes.get(i + 1).map(|s| s.node);
            let writes = Self::task_writes(&ck, step.node, &step.writes, after);
            let id = ck.id.clone();
            rows.push(Row::Put(Box::new(ck)));
            rows.push(Row::Writes(id, writes));
            pending = &step.writes;
            ran = step.node;
            trigger = branch(step.node);
            i += 1;
        }
    }
}

/// Where the rows go.
enum Sink {
    Sqlite(sqlite::SqliteSaver),
    Postgres(postgres::PgSaver),
}

impl Sink {
    fn persist(&mut self, thread: &str, row: &Row) -> Result<(), BenchError> {
        let saver: &mut dyn Saver = match self {
            Sink::Sqlite(s) => s,
            Sink::Postgres(s) => s,
        };
        match row {
            Row::Put(c) => saver.put(thread, c),
            Row::Writes(id, w) => saver.put_writes(thread, id, w),
        }
    }
}

/// The turns a case runs: generated, or the replayed thread's messages.
pub fn case_turns(case: &ProductionCase) -> Result<Vec<Turn>, BenchError> {
    match &case.replay {
        None => Ok((0..case.turns)
            .map(|t| generated_turn(t, case.payload_bytes))
            .collect()),
        Some(r) => {
            let bytes = std::fs::read(&r.messages_file)
                .map_err(|e| format!("cannot read the replayed thread's messages: {e}"))?;
            let list = dfck_core::codec::decode(&bytes)
                .map_err(|e| format!("the replayed thread's messages are corrupt: {e}"))?;
            let Value::Array(items) = list else {
                return Err("the replayed thread's messages are not a list".into());
            };
            Ok(replay_turns(items))
        }
    }
}

fn p(l: &Latency, q: &str) -> f64 {
    match q {
        "p50" => l.p50,
        "p95" => l.p95,
        _ => l.p99,
    }
}

/// Runs one production case natively; returns its measured fields in row order.
pub fn run_production_case(
    case: &ProductionCase,
    ctx: &WorkerContext,
) -> Result<ProductionMetrics, BenchError> {
    let turns = case_turns(case)?;
    let expected = written_messages(&turns);
    let expected_digest = digest_of(&expected)?;
    let thread = match case.backend {
        Backend::Postgres => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            format!("{}-{}-{nanos}", case.thread_id(), std::process::id())
        }
        _ => case.thread_id(),
    };
    let path = ctx.work_dir.join("production-benchmark.sqlite");
    let url = ctx.pg_url.clone();
    let mut sink = match case.backend {
        Backend::Sqlite => Sink::Sqlite(sqlite::SqliteSaver::open(&path)?),
        Backend::Postgres => Sink::Postgres(postgres::PgSaver::open(
            url.as_deref()
                .ok_or("backend postgres needs a server (--pg-url)")?,
        )?),
        Backend::Memory => return Err("bench production runs on sqlite or postgres".into()),
    };
    let result = measure(
        case,
        &turns,
        &expected,
        &expected_digest,
        &thread,
        &mut sink,
        ctx,
    );
    if let Sink::Postgres(s) = &sink {
        let cleanup = s.delete_thread(&thread);
        let fields = result?;
        cleanup?;
        return Ok(fields);
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn measure(
    case: &ProductionCase,
    turns: &[Turn],
    expected: &[Value],
    expected_digest: &str,
    thread: &str,
    sink: &mut Sink,
    ctx: &WorkerContext,
) -> Result<ProductionMetrics, BenchError> {
    // Run phase.
    let mut graph = ProductionGraph::new(case.mode, case.snapshot_frequency, Clock::default());
    let mut turn_ms = Vec::with_capacity(turns.len());
    let mut write_ms = Vec::with_capacity(turns.len());
    let mut checkpoints = 0u64;
    let run0 = Instant::now();
    for steps in turns {
        let t = Instant::now();
        let rows = graph.turn(steps)?;
        let mut intervals = Vec::with_capacity(rows.len());
        for row in &rows {
            let a = ms(t);
            sink.persist(thread, row)?;
            intervals.push((a, ms(t)));
            checkpoints += u64::from(matches!(row, Row::Put(_)));
        }
        turn_ms.push(ms(t));
        write_ms.push(merged_busy(&intervals));
    }
    let run_total_ms = ms(run0);
    let skip = (WARMUP_TURNS as usize).min(turn_ms.len());
    let run_lat = Latency::of(&turn_ms[skip..])?;
    let write_lat = Latency::of(&write_ms[skip..])?;

    // Readers: a fresh store handle per cold read (its open time is the counterpart of
    // DeerFlow's accessor-graph build).
    let open = || -> Result<Box<dyn Store>, BenchError> {
        match case.backend {
            Backend::Postgres => Ok(Box::new(
                dfck_core::store::postgres::PostgresStore::open_read_only(
                    ctx.pg_url.as_deref().unwrap_or_default(),
                    None,
                )
                .map_err(|e| e.to_string())?,
            )),
            _ => Ok(Box::new(
                dfck_core::store::sqlite::SqliteStore::open_read_only(
                    &ctx.work_dir.join("production-benchmark.sqlite"),
                )
                .map_err(|e| e.to_string())?,
            )),
        }
    };
    // Seed correctness: the accessor with the raw saver.
    let seed_store = open()?;
    let mut seed_reader = Reader::new(seed_store.as_ref(), thread, Reducer::Deerflow, false);
    let seed_messages = seed_reader.state_messages()?;
    let seed_digest = digest_of(&seed_messages)?;
    if seed_messages.len() != expected.len() || seed_digest != expected_digest {
        return Err(format!(
            "materialized {} messages that differ from the {} the turns wrote",
            seed_messages.len(),
            expected.len()
        )
        .into());
    }
    drop(seed_reader);
    drop(seed_store);

    // State: cold (fresh handle + reader), then warm through the same cached reader.
    let t = Instant::now();
    let store = open()?;
    let build_ms = ms(t);
    let mut reader = Reader::new(store.as_ref(), thread, Reducer::Deerflow, true);
    let state = reader.state()?;
    let state_cold_ms = ms(t);
    let mut warm = Vec::with_capacity(case.read_repetitions as usize);
    for _ in 0..case.read_repetitions {
        let t = Instant::now();
        let again = reader.state()?;
        warm.push(ms(t));
        if again.wire_sha256 != state.wire_sha256 {
            return Err("warm state read differs from the cold one".into());
        }
    }
    let state_warm = Latency::of(&warm)?;
    let state_cache = reader.stats();
    drop(reader);
    drop(store);

    // History per effective limit: cold with an empty cache, then warm.
    let mut history = Vec::new();
    let mut digests = Vec::new();
    let mut history_cache = super::reader::CacheStats::default();
    for limit in case.effective_history_limits() {
        let t = Instant::now();
        let store = open()?;
        let mut reader = Reader::new(store.as_ref(), thread, Reducer::Deerflow, true);
        let cold = reader.history(limit)?;
        let cold_ms = ms(t);
        let mut warm = Vec::with_capacity(case.read_repetitions as usize);
        for _ in 0..case.read_repetitions {
            let t = Instant::now();
            reader.history(limit)?;
            warm.push(ms(t));
        }
        let w = Latency::of(&warm)?;
        let s = reader.stats();
        history_cache.hits += s.hits;
        history_cache.misses += s.misses;
        history.push(HistoryTiming {
            limit,
            cold_ms,
            cold_saver_ms: 0.0,
            warm_p50_ms: w.p50,
            warm_p95_ms: w.p95,
        });
        digests.push(cold.wire_sha256);
    }

    // Online sizes while the writer is still open, then the durable ones.
    let mut durable = None;
    let mut pg_tables = None;
    let (files, st) = match sink {
        Sink::Sqlite(s) => {
            let path = ctx.work_dir.join("production-benchmark.sqlite");
            let side = |suffix: &str| {
                let mut p = path.clone().into_os_string();
                p.push(suffix);
                sqlite::file_size(std::path::Path::new(&p))
            };
            let st = s.stats(thread)?;
            let online = (sqlite::file_size(&path), side("-wal"), side("-shm"));
            // Durable size: the WAL copied into the main file and emptied.
            s.checkpoint_truncate()?;
            durable = Some(sqlite::file_size(&path));
            (
                Some(online),
                (
                    st.checkpoint_rows,
                    st.checkpoint_bytes,
                    None,
                    None,
                    st.write_rows,
                    st.write_bytes,
                ),
            )
        }
        Sink::Postgres(s) => {
            let st = s.stats(thread)?;
            pg_tables = Some(s.table_totals()?);
            (
                None,
                (
                    st.checkpoint_rows,
                    st.checkpoint_bytes,
                    Some(st.blob_rows),
                    Some(st.blob_bytes),
                    st.write_rows,
                    st.write_bytes,
                ),
            )
        }
    };
    let (checkpoint_rows, checkpoint_bytes, blob_rows, blob_bytes, write_rows, write_bytes) = st;
    Ok(ProductionMetrics {
        run_turn_p50_ms: run_lat.p50,
        run_turn_p95_ms: run_lat.p95,
        checkpoint_write_p50_ms: p(&write_lat, "p50"),
        checkpoint_write_p95_ms: p(&write_lat, "p95"),
        checkpoint_write_p99_ms: p(&write_lat, "p99"),
        message_count: seed_messages.len() as u64,
        seed_content_sha256: seed_digest,
        db_bytes: files.map(|f| f.0),
        wal_bytes: files.map(|f| f.1),
        shm_bytes: files.map(|f| f.2),
        state_cold_ms,
        state_cold_saver_ms: 0.0,
        state_cold_graph_build_ms: build_ms,
        state_warm_p50_ms: state_warm.p50,
        state_warm_p95_ms: state_warm.p95,
        state_wire_sha256: state.wire_sha256,
        history_wire_sha256: combined_sha256(&digests),
        saver_read_attribution: false,
        history: HistoryTimings(history),
        run_turn_p99_ms: run_lat.p99,
        run_total_ms,
        checkpoints_per_turn: checkpoints as f64 / turns.len().max(1) as f64,
        checkpoint_rows,
        checkpoint_bytes,
        blob_rows,
        blob_bytes,
        write_rows,
        write_bytes,
        state_response_bytes: state.response_bytes as u64,
        state_cache_hits: state_cache.hits,
        state_cache_misses: state_cache.misses,
        history_cache_hits: history_cache.hits,
        history_cache_misses: history_cache.misses,
        durable_db_bytes: durable,
        pg_checkpoints_total_bytes: pg_tables.map(|t: postgres::PgTableTotals| t.checkpoints),
        pg_checkpoint_blobs_total_bytes: pg_tables.map(|t| t.checkpoint_blobs),
        pg_checkpoint_writes_total_bytes: pg_tables.map(|t| t.checkpoint_writes),
    })
}
