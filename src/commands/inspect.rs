//! `inspect`: the store summary, one thread's checkpoints, and the materialized state at a
//! checkpoint. Returns plain report values; rendering lives in `render`.

use crate::commands::space::SortKey;
pub use crate::commands::space::SummaryOptions;
use dfck_core::codec::RenderedMap;
use dfck_core::error::{Error, MaterializeError, StoreError};
use dfck_core::materialize::{self, Reducer, StoreSource, View};
use dfck_core::model::{
    ChannelMode, Checkpoint, MessagesEncoding, ThreadMode, has_marker, is_internal_channel,
    metadata_is_delta, parse_metadata,
};
use dfck_core::progress::Progress;
use dfck_core::store::Store;
use dfck_core::store::space::StoreSpace;
use serde::Serialize;
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
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
    pub deerflow: Option<Box<crate::commands::deerflow_view::ThreadApp>>,
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

impl StoreSummary {
    /// Adds DeerFlow's view (docs/deerflow-database.md): its threads as listed and run, its
    /// tables; nothing on a store without DeerFlow's tables.
    pub fn attach_deerflow(&mut self, store: &dyn Store) -> Result<(), Error> {
        let ids: Vec<&str> = self.threads.iter().map(|t| t.thread_id.as_str()).collect();
        let Some((summary, per_thread)) = crate::commands::deerflow_view::view(store, &ids)? else {
            return Ok(());
        };
        for (t, d) in self.threads.iter_mut().zip(per_thread) {
            t.deerflow = Some(Box::new(d));
        }
        self.deerflow = Some(summary);
        Ok(())
    }
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
