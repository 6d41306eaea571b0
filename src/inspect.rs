//! `inspect`: the store summary, one thread's checkpoints, and the materialized state at a
//! checkpoint. Returns plain report values; rendering lives in `render`.

use crate::codec::{self, RenderedMap};
use crate::error::{Error, MaterializeError, StoreError};
use crate::materialize::{self, Reducer, StoreSource, View};
use crate::model::{
    ChannelMode, Checkpoint, MessagesEncoding, ThreadMode, has_marker, is_internal_channel,
    metadata_is_delta, parse_metadata, thread_mode,
};
use crate::progress::Progress;
use crate::store::{CheckpointBody, CheckpointMetaRow, CheckpointRow, Store};
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
    pub checkpoint_channel_mode: crate::model::ChannelMode,
    /// `database.checkpoint_delta.snapshot_frequency`.
    pub snapshot_frequency: u64,
}

/// `dfck inspect`.
#[derive(Debug, Clone, Serialize)]
pub struct StoreSummary {
    /// `sqlite` or `postgres`.
    pub backend: crate::store::Backend,
    /// Path or redacted URL.
    pub location: String,
    /// Schema shape.
    pub schema: String,
    /// Row counts.
    pub counts: Counts,
    /// Total bytes.
    pub bytes: u64,
    /// The DeerFlow config's mode, shown next to what the data holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfiguredMode>,
    /// Threads, by thread id.
    pub threads: Vec<ThreadSummary>,
}

type HeadEntry = (String, String, Option<i64>, Option<String>);

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
    let ts = store
        .checkpoint(&acc.thread_id, &hns, &hid)?
        .and_then(|row| checkpoint_ts(&row));
    let (wn, wb) = writes.get(&acc.thread_id).copied().unwrap_or((0, 0));
    let (_, bb) = blobs.get(&acc.thread_id).copied().unwrap_or((0, 0));
    let mut namespaces = acc.namespaces;
    namespaces.sort();
    Ok(ThreadSummary {
        thread_id: acc.thread_id,
        namespaces,
        checkpoints: acc.checkpoints,
        writes: wn,
        bytes: acc.bytes + wb + bb,
        mode: thread_mode(acc.any_delta, any_full_plain),
        head: HeadInfo {
            checkpoint_id: hid,
            checkpoint_ns: hns,
            step,
            source,
            ts,
        },
    })
}

/// Summarizes the whole store, streaming thread by thread.
pub fn summarize(store: &dyn Store, progress: &dyn Progress) -> Result<StoreSummary, Error> {
    let mut writes: Totals = HashMap::new();
    let mut total_writes = 0;
    store.scan_write_totals(&mut |t| {
        total_writes += t.writes;
        writes.insert(t.thread_id, (t.writes, t.bytes));
        Ok(())
    })?;
    let mut blobs: Totals = HashMap::new();
    let mut total_blobs = 0;
    store.scan_blob_totals(&mut |t| {
        total_blobs += t.writes;
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
    let info = store.info();
    threads.sort_by(|a, b| a.thread_id.cmp(&b.thread_id));
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
    Ok(StoreSummary {
        backend: info.backend,
        location: info.location.clone(),
        schema: info.schema.clone(),
        counts: Counts {
            threads: threads.len() as u64,
            checkpoints,
            writes: total_writes,
            blobs: (info.backend == crate::store::Backend::Postgres).then_some(total_blobs),
        },
        bytes,
        config: None,
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
        metadata: ck.metadata.clone(),
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
