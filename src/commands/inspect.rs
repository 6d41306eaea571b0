//! `inspect`: the store summary, one thread's checkpoints, and the materialized state at a
//! checkpoint. Returns plain report values; rendering lives in `render`.

pub use crate::commands::space::SummaryOptions;
use crate::commands::space::{SortKey, ThreadRef};
use dfck_core::codec::{self, RenderedMap};
use dfck_core::error::{Error, MaterializeError, StoreError};
use dfck_core::materialize::{self, Reducer, StoreSource, View};
use dfck_core::model::{
    ChannelMode, Checkpoint, MessagesEncoding, ThreadMode, has_marker, is_internal_channel,
    metadata_is_delta, parse_metadata, thread_mode,
};
use dfck_core::progress::Progress;
use dfck_core::store::space::StoreSpace;
use dfck_core::store::{CheckpointBody, CheckpointMetaRow, CheckpointRow, Store};
use serde::Serialize;
use serde_json::{Map, Value as Json};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// Which messages reducer to use for delta replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReducerChoice {
    /// DeerFlow's when a checkpoint carries the marker, else LangGraph's.
    Auto,
    /// Always a specific one.
    Fixed(Reducer),
}

/// The head of a thread in the summary.
#[derive(Debug, Clone, Serialize)]
pub struct HeadInfo {
    /// Head checkpoint id.
    pub checkpoint_id: String,
    /// Namespace of the head.
    pub checkpoint_ns: String,
    /// `metadata.step`.
    pub step: Option<i64>,
    /// `metadata.source`.
    pub source: Option<String>,
    /// The checkpoint's `ts` (absent when its blob cannot be decoded).
    pub ts: Option<String>,
}

/// One thread in the store summary.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadSummary {
    /// Thread id.
    pub thread_id: String,
    /// Namespaces holding checkpoints, sorted.
    pub namespaces: Vec<String>,
    /// Checkpoints over all namespaces.
    pub checkpoints: u64,
    /// Pending-write rows.
    pub writes: u64,
    /// Bytes: checkpoints, metadata and write values.
    pub bytes: u64,
    /// `full`, `delta` or `mixed`.
    pub mode: ThreadMode,
    /// The head (greatest id in the root namespace, else in any namespace).
    pub head: HeadInfo,
    /// The `ts` of the thread's oldest checkpoint (least id, any namespace).
    pub first_activity: Option<String>,
    /// The `ts` of the thread's newest checkpoint (greatest id, any namespace).
    pub last_activity: Option<String>,
    /// Bytes no head's state needs (`bytes` minus what rebuilding the head of every
    /// namespace reads): what pruning history could free at most.
    pub history_bytes: u64,
    /// Bytes per channel, largest first (`--channels`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels: Option<Vec<crate::commands::space::ChannelBytes>>,
    /// The thread as DeerFlow lists and runs it (stores with DeerFlow's tables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deerflow: Option<crate::commands::deerflow_view::ThreadApp>,
}

/// Row counts of the store.
#[derive(Debug, Clone, Serialize)]
pub struct Counts {
    /// Distinct threads.
    pub threads: u64,
    /// Checkpoint rows.
    pub checkpoints: u64,
    /// Write rows.
    pub writes: u64,
    /// Blob rows (Postgres only).
    pub blobs: Option<u64>,
}

/// What the DeerFlow config says about the store (when it was found through the config).
#[derive(Debug, Clone, Serialize)]
pub struct ConfiguredMode {
    /// The config file.
    pub path: String,
    /// `database.checkpoint_channel_mode`.
    pub checkpoint_channel_mode: dfck_core::model::ChannelMode,
    /// `database.checkpoint_delta.snapshot_frequency`.
    pub snapshot_frequency: u64,
}

/// `dfck inspect`.
#[derive(Debug, Clone, Serialize)]
pub struct StoreSummary {
    /// `sqlite` or `postgres`.
    pub backend: dfck_core::store::Backend,
    /// Path or redacted URL.
    pub location: String,
    /// Schema shape.
    pub schema: String,
    /// Row counts.
    pub counts: Counts,
    /// Total bytes.
    pub bytes: u64,
    /// `bytes` per table: checkpoints, writes, blobs (PostgreSQL).
    pub table_bytes: crate::commands::space::TableBytes,
    /// The DeerFlow config's mode, shown next to what the data holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfiguredMode>,
    /// Where the store's bytes sit on disk: file, free pages and WAL (SQLite); tables with
    /// TOAST, indexes and dead rows (PostgreSQL).
    pub space: Option<StoreSpace>,
    /// The order of `threads`.
    pub sort: SortKey,
    /// `--top N`: only the first N threads (in `sort` order) are listed; counts and bytes
    /// stay the whole store's.
    pub top: Option<u64>,
    /// Bytes per channel over the threads listed (`--channels`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel_totals: Option<Vec<crate::commands::space::ChannelBytes>>,
    /// What prune and full-to-delta would give back (`--savings`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub savings: Option<crate::commands::savings::Savings>,
    /// DeerFlow's tables and thread list (stores with DeerFlow's tables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deerflow: Option<crate::commands::deerflow_view::AppSummary>,
    /// Threads, in `sort` order (by thread id unless asked otherwise).
    pub threads: Vec<ThreadSummary>,
}

type HeadEntry = (String, String, Option<i64>, Option<String>);

/// (ns, id, `ts` when the scan read it) of a checkpoint.
type Activity = (String, String, Option<String>);

struct ThreadAcc {
    thread_id: String,
    namespaces: Vec<String>,
    checkpoints: u64,
    bytes: u64,
    any_delta: bool,
    /// Full-by-metadata checkpoints (ns, id): candidates for `mixed`.
    full_ids: Vec<(String, String)>,
    /// (ns, id, step, source) of the greatest id in the root namespace.
    root_head: Option<HeadEntry>,
    /// The same over the other namespaces.
    any_head: Option<HeadEntry>,
    /// (ns, id) of the least and the greatest id over every namespace.
    first: Option<Activity>,
    last: Option<Activity>,
    /// (ns, greatest id) of every namespace, in scan order.
    heads: Vec<(String, String)>,
}

impl ThreadAcc {
    fn new(thread_id: String) -> Self {
        ThreadAcc {
            thread_id,
            namespaces: Vec::new(),
            checkpoints: 0,
            bytes: 0,
            any_delta: false,
            full_ids: Vec::new(),
            root_head: None,
            any_head: None,
            first: None,
            last: None,
            heads: Vec::new(),
        }
    }

    fn add(&mut self, row: CheckpointMetaRow) -> Result<(), StoreError> {
        let what = format!(
            "thread '{}' checkpoint {}",
            row.thread_id, row.checkpoint_id
        );
        let meta = parse_metadata(&row.metadata, &what).unwrap_or_default();
        if !self.namespaces.contains(&row.checkpoint_ns) {
            self.namespaces.push(row.checkpoint_ns.clone());
        }
        self.checkpoints += 1;
        self.bytes += row.bytes;
        if metadata_is_delta(&meta) {
            self.any_delta = true;
        } else {
            self.full_ids
                .push((row.checkpoint_ns.clone(), row.checkpoint_id.clone()));
        }
        match self.heads.last_mut() {
            Some((ns, id)) if *ns == row.checkpoint_ns => {
                if row.checkpoint_id > *id {
                    id.clone_from(&row.checkpoint_id);
                }
            }
            _ => self
                .heads
                .push((row.checkpoint_ns.clone(), row.checkpoint_id.clone())),
        }
        // Updated in place (`clone_from` reuses the buffers): rows come in id order, so the
        // latest changes on almost every row.
        let set = |slot: &mut Option<Activity>| match slot {
            Some((ns, id, ts)) => {
                ns.clone_from(&row.checkpoint_ns);
                id.clone_from(&row.checkpoint_id);
                ts.clone_from(&row.ts);
            }
            None => {
                *slot = Some((
                    row.checkpoint_ns.clone(),
                    row.checkpoint_id.clone(),
                    row.ts.clone(),
                ))
            }
        };
        if self.first.as_ref().is_none_or(|f| row.checkpoint_id < f.1) {
            set(&mut self.first);
        }
        if self.last.as_ref().is_none_or(|l| row.checkpoint_id > l.1) {
            set(&mut self.last);
        }
        // The head is the greatest id (byte order) of the root namespace, else of any.
        let entry = (
            row.checkpoint_ns,
            row.checkpoint_id,
            meta.get("step").and_then(Json::as_i64),
            meta.get("source").and_then(Json::as_str).map(str::to_owned),
        );
        let slot = if entry.0.is_empty() {
            &mut self.root_head
        } else {
            &mut self.any_head
        };
        if slot.as_ref().is_none_or(|h| h.1 < entry.1) {
            *slot = Some(entry);
        }
        Ok(())
    }
}

/// The `ts` of a stored checkpoint, without decoding its channel values where avoidable.
fn checkpoint_ts(row: &CheckpointRow) -> Option<String> {
    match &row.body {
        CheckpointBody::Serialized { type_tag, bytes } => {
            codec::decode_typed(type_tag.as_deref(), bytes.clone())
                .ok()?
                .get("ts")
                .and_then(codec::Value::as_str)
                .map(str::to_owned)
        }
        CheckpointBody::Postgres { checkpoint, .. } => checkpoint
            .get("ts")
            .and_then(Json::as_str)
            .map(str::to_owned),
    }
}

type Totals = HashMap<String, (u64, u64)>;

fn finish_thread(
    store: &dyn Store,
    acc: ThreadAcc,
    writes: &Totals,
    blobs: &Totals,
) -> Result<ThreadSummary, Error> {
    let mut any_full_plain = false;
    if acc.any_delta {
        for (ns, id) in &acc.full_ids {
            if let Some(row) = store.checkpoint(&acc.thread_id, ns, id)? {
                // Undecodable checkpoints are verify's business; they do not make a thread mixed.
                if let Ok(ck) = Checkpoint::from_row(row) {
                    if ck.messages_encoding() == MessagesEncoding::Plain {
                        any_full_plain = true;
                        break;
                    }
                }
            }
        }
    }
    let (hns, hid, step, source) = acc.root_head.or(acc.any_head).unwrap_or_default();
    let mut head_row = store.checkpoint(&acc.thread_id, &hns, &hid)?;
    let ts = head_row.as_ref().and_then(checkpoint_ts);
    let ts_of = |at: &Option<Activity>| -> Result<Option<String>, Error> {
        match at {
            Some((_, _, Some(ts))) => Ok(Some(ts.clone())),
            Some((ns, id, None)) if *ns == hns && *id == hid => Ok(ts.clone()),
            Some((ns, id, None)) => Ok(store
                .checkpoint(&acc.thread_id, ns, id)?
                .and_then(|row| checkpoint_ts(&row))),
            None => Ok(None),
        }
    };
    let mut needed = 0;
    for (ns, id) in &acc.heads {
        // The summary's head row is read once.
        let preloaded = if *ns == hns && *id == hid {
            head_row.take()
        } else {
            None
        };
        needed += crate::commands::space::head_needs(
            store,
            &acc.thread_id,
            ns,
            id,
            acc.any_delta,
            preloaded,
        )?;
    }
    let first_activity = ts_of(&acc.first)?;
    let last_activity = ts_of(&acc.last)?;
    let (wn, wb) = writes.get(&acc.thread_id).copied().unwrap_or((0, 0));
    let (_, bb) = blobs.get(&acc.thread_id).copied().unwrap_or((0, 0));
    let mut namespaces = acc.namespaces;
    namespaces.sort();
    let bytes = acc.bytes + wb + bb;
    Ok(ThreadSummary {
        thread_id: acc.thread_id,
        namespaces,
        checkpoints: acc.checkpoints,
        writes: wn,
        bytes,
        history_bytes: bytes.saturating_sub(needed),
        mode: thread_mode(acc.any_delta, any_full_plain),
        head: HeadInfo {
            checkpoint_id: hid,
            checkpoint_ns: hns,
            step,
            source,
            ts,
        },
        first_activity,
        last_activity,
        channels: None,
        deerflow: None,
    })
}

/// Orders the threads by `key` (ties by thread id).
fn sort_threads(threads: &mut [ThreadSummary], key: SortKey) {
    crate::commands::space::sort_by(threads, key, |t| crate::commands::space::SortFields {
        name: &t.thread_id,
        bytes: t.bytes,
        checkpoints: t.checkpoints,
        last_activity: t.last_activity.as_deref(),
    });
}

impl StoreSummary {
    /// Adds DeerFlow's view (docs/deerflow-database.md): its threads as listed and run, its
    /// tables; nothing on a store without DeerFlow's tables.
    pub fn attach_deerflow(&mut self, store: &dyn Store) -> Result<(), Error> {
        let ids: Vec<&str> = self.threads.iter().map(|t| t.thread_id.as_str()).collect();
        let Some((summary, per_thread)) = crate::commands::deerflow_view::view(store, &ids)? else {
            return Ok(());
        };
        for (t, d) in self.threads.iter_mut().zip(per_thread) {
            t.deerflow = Some(d);
        }
        self.deerflow = Some(summary);
        Ok(())
    }
}

/// Summarizes the whole store, streaming thread by thread; threads by thread id.
pub fn summarize(store: &dyn Store, progress: &dyn Progress) -> Result<StoreSummary, Error> {
    summarize_with(store, &SummaryOptions::default(), progress)
}

/// Summarizes the whole store: threads in `opts.sort` order, cut to `opts.top`, with
/// per-channel bytes when `opts.channels`.
pub fn summarize_with(
    store: &dyn Store,
    opts: &SummaryOptions,
    progress: &dyn Progress,
) -> Result<StoreSummary, Error> {
    let mut writes: Totals = HashMap::new();
    let (mut total_writes, mut write_bytes) = (0, 0);
    store.scan_write_totals(&mut |t| {
        total_writes += t.writes;
        write_bytes += t.bytes;
        writes.insert(t.thread_id, (t.writes, t.bytes));
        Ok(())
    })?;
    let mut blobs: Totals = HashMap::new();
    let (mut total_blobs, mut blob_bytes) = (0, 0);
    store.scan_blob_totals(&mut |t| {
        total_blobs += t.writes;
        blob_bytes += t.bytes;
        blobs.insert(t.thread_id, (t.writes, t.bytes));
        Ok(())
    })?;
    let mut threads = Vec::new();
    let mut acc: Option<ThreadAcc> = None;
    let mut failure: Option<Error> = None;
    progress.start("scanning checkpoints", None);
    store
        .scan_checkpoint_meta(&mut |row| {
            progress.inc(1);
            if acc.as_ref().is_some_and(|a| a.thread_id != row.thread_id) {
                if let Some(done) = acc.take() {
                    match finish_thread(store, done, &writes, &blobs) {
                        Ok(t) => threads.push(t),
                        Err(e) => {
                            failure = Some(e);
                            return Err(StoreError::Query {
                                what: "summarizing".into(),
                                reason: "aborted".into(),
                            });
                        }
                    }
                }
            }
            acc.get_or_insert_with(|| ThreadAcc::new(row.thread_id.clone()))
                .add(row)
        })
        .map_err(|e| failure.take().unwrap_or(Error::Store(e)))?;
    if let Some(done) = acc.take() {
        threads.push(finish_thread(store, done, &writes, &blobs)?);
    }
    progress.finish();
    threads.sort_by(|a, b| a.thread_id.cmp(&b.thread_id));
    let thread_count = threads.len() as u64;
    let checkpoints = threads.iter().map(|t| t.checkpoints).sum();
    // Writes and blobs of threads without checkpoints still occupy the store.
    let known: HashSet<&str> = threads.iter().map(|t| t.thread_id.as_str()).collect();
    let bytes = threads.iter().map(|t| t.bytes).sum::<u64>()
        + writes
            .iter()
            .chain(blobs.iter())
            .filter(|(t, _)| !known.contains(t.as_str()))
            .map(|(_, (_, b))| b)
            .sum::<u64>();
    let space = Some(store.space()?);
    sort_threads(&mut threads, opts.sort);
    if let Some(n) = opts.top {
        threads.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    let channel_totals = if opts.channels {
        let refs: Vec<ThreadRef<'_>> = threads
            .iter()
            .map(|t| ThreadRef {
                thread_id: &t.thread_id,
                namespaces: &t.namespaces,
                checkpoints: t.checkpoints,
            })
            .collect();
        let (mut per, totals) = crate::commands::space::channel_bytes(store, &refs, progress)?;
        for t in &mut threads {
            t.channels = Some(per.remove(&t.thread_id).unwrap_or_default());
        }
        Some(totals)
    } else {
        None
    };
    let info = store.info();
    let pg = info.backend == dfck_core::store::Backend::Postgres;
    Ok(StoreSummary {
        backend: info.backend,
        location: info.location.clone(),
        schema: info.schema.clone(),
        counts: Counts {
            threads: thread_count,
            checkpoints,
            writes: total_writes,
            blobs: pg.then_some(total_blobs),
        },
        bytes,
        table_bytes: crate::commands::space::TableBytes {
            checkpoints: bytes.saturating_sub(write_bytes + blob_bytes),
            writes: write_bytes,
            blobs: pg.then_some(blob_bytes),
        },
        config: None,
        space,
        sort: opts.sort,
        top: opts.top,
        channel_totals,
        savings: None,
        deerflow: None,
        threads,
    })
}

/// One checkpoint in `inspect THREAD`.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointSummary {
    /// Checkpoint id.
    pub checkpoint_id: String,
    /// Parent id.
    pub parent_checkpoint_id: Option<String>,
    /// `metadata.source`.
    pub source: Option<String>,
    /// `metadata.step`.
    pub step: Option<i64>,
    /// `full` or `delta` (DeerFlow's metadata rule).
    pub mode: ChannelMode,
    /// How `messages` is stored.
    pub messages_encoding: Option<MessagesEncoding>,
    /// Pending-write rows stored on this checkpoint.
    pub writes: u64,
    /// Bytes: checkpoint, metadata and its write values.
    pub bytes: u64,
    /// Why the checkpoint could not be decoded, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `dfck inspect THREAD`.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadReport {
    /// Thread id.
    pub thread_id: String,
    /// Namespace shown.
    pub checkpoint_ns: String,
    /// Checkpoints, newest first.
    pub checkpoints: Vec<CheckpointSummary>,
}

/// Lists one (thread, ns), newest first.
pub fn thread_report(
    store: &dyn Store,
    thread_id: &str,
    ns: &str,
    progress: &dyn Progress,
) -> Result<ThreadReport, Error> {
    let totals: HashMap<String, (u64, u64)> = store
        .write_totals_by_checkpoint(thread_id, ns)?
        .into_iter()
        .map(|t| (t.checkpoint_id, (t.writes, t.bytes)))
        .collect();
    let mut out = Vec::new();
    progress.start("reading checkpoints", None);
    store.scan_thread(thread_id, ns, &mut |row| {
        progress.inc(1);
        let (wn, wb) = totals.get(&row.checkpoint_id).copied().unwrap_or((0, 0));
        let what = format!(
            "thread '{}' checkpoint {}",
            row.thread_id, row.checkpoint_id
        );
        let meta = parse_metadata(&row.metadata, &what).unwrap_or_default();
        let id = row.checkpoint_id.clone();
        let parent = row.parent_checkpoint_id.clone();
        let bytes = row.bytes + wb;
        let (encoding, error) = match Checkpoint::from_row(row) {
            Ok(ck) => (Some(ck.messages_encoding()), None),
            Err(e) => (None, Some(e.to_string())),
        };
        out.push(CheckpointSummary {
            checkpoint_id: id,
            parent_checkpoint_id: parent,
            source: meta.get("source").and_then(Json::as_str).map(str::to_owned),
            step: meta.get("step").and_then(Json::as_i64),
            mode: if metadata_is_delta(&meta) {
                ChannelMode::Delta
            } else {
                ChannelMode::Full
            },
            messages_encoding: encoding,
            writes: wn,
            bytes,
            error,
        });
        Ok(())
    })?;
    progress.finish();
    if out.is_empty() {
        return Err(StoreError::ThreadNotFound {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: ns.to_owned(),
        }
        .into());
    }
    out.sort_by(|a, b| b.checkpoint_id.cmp(&a.checkpoint_id));
    Ok(ThreadReport {
        thread_id: thread_id.to_owned(),
        checkpoint_ns: ns.to_owned(),
        checkpoints: out,
    })
}

/// `dfck inspect THREAD --state`.
#[derive(Debug, Clone, Serialize)]
pub struct StateReport {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// Checkpoint id.
    pub checkpoint_id: String,
    /// Parent id.
    pub parent_checkpoint_id: Option<String>,
    /// `full` or `delta`.
    pub mode: ChannelMode,
    /// Metadata as stored.
    pub metadata: Map<String, Json>,
    /// Channel values (internal channels left out), rendered when serialized.
    pub values: RenderedMap,
    /// `state` or `stored`.
    pub view: &'static str,
    /// `langgraph` or `deerflow`.
    pub reducer: &'static str,
    /// Ancestors walked to rebuild `messages` (0 when stored).
    pub replay_depth: usize,
    /// When only some messages are shown (`--last`, `--message`): the index of the first one
    /// shown and how many the state holds (human output only).
    #[serde(skip)]
    pub messages_shown: Option<(usize, usize)>,
}

/// Materializes one checkpoint (default: the head of the namespace).
pub fn state_report(
    store: &dyn Store,
    thread_id: &str,
    ns: &str,
    checkpoint_id: Option<&str>,
    view: View,
    reducer: ReducerChoice,
) -> Result<StateReport, Error> {
    store.prefer_point_reads();
    let head = store.head_id(thread_id, ns)?;
    let Some(head) = head else {
        return Err(StoreError::ThreadNotFound {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: ns.to_owned(),
        }
        .into());
    };
    let id = checkpoint_id.unwrap_or(&head).to_owned();
    let mut src = StoreSource::new(store, thread_id, ns);
    let not_found = || StoreError::CheckpointNotFound {
        thread_id: thread_id.to_owned(),
        checkpoint_ns: ns.to_owned(),
        checkpoint_id: id.clone(),
    };
    // `auto`: the marker on the target, the head, or any checkpoint the replay walks.
    let head_marked = if id != head {
        store
            .metadata(thread_id, ns, &head)?
            .map(|m| has_marker(&parse_metadata(&m, "head").unwrap_or_default()))
            .unwrap_or(false)
    } else {
        false
    };
    let choose = |target: &Checkpoint, chain: &[Rc<Checkpoint>]| match reducer {
        ReducerChoice::Fixed(r) => r,
        ReducerChoice::Auto => {
            if head_marked
                || has_marker(&target.metadata)
                || chain.iter().any(|c| has_marker(&c.metadata))
            {
                Reducer::Deerflow
            } else {
                Reducer::Langgraph
            }
        }
    };
    let m = materialize::materialize(&mut src, &id, view, &choose).map_err(|e| match e {
        MaterializeError::Store(StoreError::CheckpointNotFound { .. }) => Error::from(not_found()),
        other => Error::from(other),
    })?;
    let reducer_used = m.reducer;
    let replay_depth = m.replay_depth;
    let ck = m.checkpoint;
    let values = RenderedMap(
        m.values
            .into_iter()
            .filter(|(k, _)| !is_internal_channel(k))
            .collect(),
    );
    Ok(StateReport {
        thread_id: thread_id.to_owned(),
        checkpoint_ns: ns.to_owned(),
        checkpoint_id: ck.checkpoint_id.clone(),
        parent_checkpoint_id: ck.parent_checkpoint_id.clone(),
        mode: ck.mode(),
        metadata: (*ck.metadata).clone(),
        values,
        view: match view {
            View::State => "state",
            View::Stored => "stored",
            View::Raw => "raw",
        },
        reducer: match reducer_used {
            Reducer::Langgraph => "langgraph",
            Reducer::Deerflow => "deerflow",
        },
        replay_depth,
        messages_shown: None,
    })
}
