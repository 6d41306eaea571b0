//! One (thread, namespace) loaded whole for structural analysis: every checkpoint's
//! lineage, metadata, versions and how it stores `messages`, and its pending writes' keys.
//! Channel values and write values are shown to a [`LoadVisitor`] as they stream past and
//! then dropped, so memory follows the number of checkpoints of the largest thread, not
//! its bytes.

use super::{Checkpoint, MODE_MARKER, MessagesEncoding, metadata_is_delta};
use crate::codec::{Depth, Value};
use crate::error::{Error, ModelError, StoreError};
use crate::store::batch::NamespaceRows;
use crate::store::{CheckpointBody, CheckpointRow, Store, WriteRow};
use serde_json::{Map, Value as Json};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a thread's checkpoint rows go as they are read.
type RowSink<'a> = &'a mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>;

/// One checkpoint of a loaded thread. Lineage works even when the body is unreadable.
#[derive(Debug)]
pub struct Node {
    /// Checkpoint id.
    pub id: String,
    /// Parent id as stored.
    pub parent: Option<String>,
    /// Stored bytes (checkpoint + metadata).
    pub bytes: u64,
    /// Bytes the row held as read ([`CheckpointRow::read_bytes`]: on PostgreSQL with its
    /// blobs): what reading it back brings into memory.
    pub read_bytes: u64,
    /// Metadata (empty when unreadable), the same allocation as the checkpoint's. Complete
    /// only in a thread loaded with [`LoadedThread::load_full`]: a structural load keeps
    /// just the [`MetaFacts`] (a metadata object costs about 1.5 KiB in memory, more than
    /// everything else a node holds).
    pub metadata: Arc<Map<String, Json>>,
    /// What structural analysis reads from the metadata, in every load.
    pub facts: MetaFacts,
    /// The decoded checkpoint (channel values reduced to their keys, except small
    /// bookkeeping channels), or why it could not be decoded.
    pub checkpoint: Result<Checkpoint, ModelError>,
    /// How `messages` was stored (before the values were dropped).
    pub messages_encoding: Option<MessagesEncoding>,
    /// Pending writes stored on this checkpoint, canonical order, values dropped.
    pub writes: Vec<WriteRow>,
    /// Indexes of the children (checkpoints naming this one as parent), by id.
    pub children: Vec<usize>,
    /// Index of the parent, when it exists in this namespace.
    pub parent_index: Option<usize>,
}

impl Node {
    /// `metadata.source`.
    pub fn source(&self) -> Option<&str> {
        self.facts.source.as_deref()
    }

    /// `metadata.step`.
    pub fn step(&self) -> Option<i64> {
        self.facts.step
    }
}

/// The metadata facts structural analysis (verify, lineage, prune) reads, kept per node in
/// a few bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetaFacts {
    /// `source`, when a string.
    pub source: Option<Box<str>>,
    /// `step`, when an integer.
    pub step: Option<i64>,
    /// DeerFlow's mode marker, any value (see [`MODE_MARKER`]).
    pub marker: Option<Box<Json>>,
    /// Delta by DeerFlow's metadata rule ([`metadata_is_delta`]).
    pub delta: bool,
    /// Has `run_durations` (DeerFlow's run-duration writer on Postgres).
    pub run_durations: bool,
    /// Has `writes.runtime_run_duration` (the same writer on SQLite).
    pub duration_write: bool,
}

impl MetaFacts {
    /// The facts of one metadata object.
    pub fn of(meta: &Map<String, Json>) -> Self {
        MetaFacts {
            source: meta.get("source").and_then(Json::as_str).map(Into::into),
            step: meta.get("step").and_then(Json::as_i64),
            marker: meta.get(MODE_MARKER).cloned().map(Box::new),
            delta: metadata_is_delta(meta),
            run_durations: meta.contains_key("run_durations"),
            duration_write: meta
                .get("writes")
                .and_then(Json::as_object)
                .is_some_and(|w| w.contains_key("runtime_run_duration")),
        }
    }

    /// The marker is the string `"delta"`.
    pub fn marked_delta(&self) -> bool {
        self.marker.as_deref().and_then(Json::as_str) == Some("delta")
    }
}

/// Sees every checkpoint and write while a thread loads, before values are dropped.
pub trait LoadVisitor {
    /// A decoded checkpoint, values intact (a shallow load's metadata map is empty: its
    /// facts are on the node).
    fn checkpoint(&mut self, _ck: &Checkpoint) {}
    /// A write row, value intact.
    fn write(&mut self, _w: &WriteRow) {}
}

/// A visitor that looks at nothing.
pub struct NoVisitor;

impl LoadVisitor for NoVisitor {}

/// Keeps what structural analysis reads: trigger channels (nil) and queued `Send`s; every
/// other value becomes nil (the key stays, so "stores a value" still holds). Of
/// `versions_seen` only what pending-task detection compares is kept: what each node has
/// seen of its own trigger channel, when that channel stores a value here
/// (docs/storage-format.md#versions-seen).
fn compact(ck: &mut Checkpoint) {
    for (name, v) in ck.channel_values.iter_mut() {
        if name != PREGEL_TASKS {
            *v = Value::Nil;
        }
    }
    let stored = |ch: &str| ck.channel_values.iter().any(|(name, _)| name == ch);
    let mut seen = std::mem::take(&mut ck.versions_seen);
    seen.retain_mut(|(node, channels)| {
        channels.retain(|(ch, _)| {
            let trigger = ch.strip_prefix("branch:to:") == Some(node.as_str())
                || (ch == "__start__" && node == "__start__");
            trigger && stored(ch)
        });
        channels.shrink_to_fit();
        !channels.is_empty()
    });
    seen.shrink_to_fit();
    ck.versions_seen = seen;
}

/// Reduces a node loaded with its values to what a structural load keeps.
fn shed(n: &mut Node, empty: &Arc<Map<String, Json>>) {
    if let Ok(ck) = &mut n.checkpoint {
        compact(ck);
        ck.metadata = Arc::clone(empty);
    }
    n.metadata = Arc::clone(empty);
}

/// The channel of queued `Send`s, kept whole by [`compact`].
const PREGEL_TASKS: &str = "__pregel_tasks";

/// A whole (thread, ns).
#[derive(Debug)]
pub struct LoadedThread {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// Checkpoints sorted by id (ascending).
    pub nodes: Vec<Node>,
    /// Checkpoint id → index in `nodes`.
    pub index: HashMap<String, usize>,
    /// Every checkpoint holds its values and metadata (see [`LoadedThread::load_bounded`];
    /// [`Metadata::Facts`] keeps only the metadata's facts).
    pub values: bool,
}

/// The stored bytes up to which a write command holds a thread whole, values included
/// ([`LoadedThread::load_bounded`]); a larger thread is read back as its walks reach its
/// checkpoints ([`super::read_back`]).
pub const WHOLE_THREAD_BYTES: u64 = 32 << 20;

/// What a bounded load keeps of each checkpoint's metadata with its values
/// ([`LoadedThread::load_bounded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metadata {
    /// The whole JSON map, and its facts.
    Whole,
    /// Its [`MetaFacts`] only (refused where the whole parse refuses it).
    Facts,
}

/// What a load keeps of each checkpoint and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Structure only (every value dropped).
    Structure,
    /// Every value.
    Values,
    /// Every value while the stored bytes read stay within `budget`; past it, the
    /// structure of every checkpoint and every write's value. `metadata`: kept values keep
    /// the metadata map too (otherwise only its [`MetaFacts`]).
    UpTo { budget: u64, metadata: bool },
}

impl LoadedThread {
    /// Reads every checkpoint and write of (thread, ns).
    pub fn load(store: &dyn Store, thread_id: &str, ns: &str) -> Result<Self, StoreError> {
        Self::load_with(store, thread_id, ns, &mut NoVisitor)
    }

    /// Reads every checkpoint and write of (thread, ns), showing each to `visitor` first.
    pub fn load_with(
        store: &dyn Store,
        thread_id: &str,
        ns: &str,
        visitor: &mut dyn LoadVisitor,
    ) -> Result<Self, StoreError> {
        Self::load_inner(store, thread_id, ns, visitor, Keep::Structure)
    }

    /// Reads every checkpoint and write of (thread, ns) and keeps every value (for
    /// whole-thread materialization; memory follows the thread's bytes).
    pub fn load_full(store: &dyn Store, thread_id: &str, ns: &str) -> Result<Self, StoreError> {
        Self::load_inner(store, thread_id, ns, &mut NoVisitor, Keep::Values)
    }

    /// Reads every checkpoint and write of (thread, ns) in one pass, keeping every value
    /// while the thread's stored bytes stay within `budget` ([`LoadedThread::values`] is
    /// then true). A larger thread keeps its structure (as [`LoadedThread::load`], except that
    /// each `messages` value is hopped over by its lengths, not validated: the walks that read
    /// checkpoints back validate it) and every write's value;
    /// [`LoadedThread::checkpoint_values`] and [`LoadedThread::checkpoint_lazy_messages`] read
    /// its checkpoints back one at a time, and a walk's [`super::read_back::ReadBack`] in
    /// windows, so memory follows the largest checkpoint (or window), not the thread.
    /// `metadata`: [`Metadata::Facts`] reads each checkpoint's metadata as its [`MetaFacts`]
    /// only (the node's and the checkpoint's maps stay empty), for walks that read no other.
    pub fn load_bounded(
        store: &dyn Store,
        thread_id: &str,
        ns: &str,
        budget: u64,
        metadata: Metadata,
    ) -> Result<Self, StoreError> {
        let metadata = metadata == Metadata::Whole;
        let keep = Keep::UpTo { budget, metadata };
        Self::load_inner(store, thread_id, ns, &mut NoVisitor, keep)
    }

    /// Checkpoint `i` with every value: the loaded one when the thread holds its values,
    /// else read back from `store` and decoded whole.
    pub fn checkpoint_values(
        &self,
        store: &dyn Store,
        i: usize,
    ) -> Result<Cow<'_, Checkpoint>, Error> {
        let n = &self.nodes[i];
        let ck = n.checkpoint.as_ref().map_err(ModelError::restated)?;
        if self.values {
            return Ok(Cow::Borrowed(ck));
        }
        Ok(Cow::Owned(Checkpoint::from_row(self.read_back(store, i)?)?))
    }

    /// The stored row of checkpoint `i`, read again.
    pub(super) fn read_back(
        &self,
        store: &dyn Store,
        i: usize,
    ) -> Result<CheckpointRow, StoreError> {
        store
            .checkpoint(&self.thread_id, &self.checkpoint_ns, &self.nodes[i].id)?
            .ok_or_else(|| self.gone(i))
    }

    /// Checkpoint `i` not found where it was loaded from.
    pub(super) fn gone(&self, i: usize) -> StoreError {
        StoreError::CheckpointNotFound {
            thread_id: self.thread_id.clone(),
            checkpoint_ns: self.checkpoint_ns.clone(),
            checkpoint_id: self.nodes[i].id.clone(),
        }
    }

    /// A namespace read beforehand ([`Store::read_threads`]), as [`Self::load_with`]
    /// builds it.
    pub fn from_rows(
        thread_id: &str,
        rows: NamespaceRows,
        visitor: &mut dyn LoadVisitor,
    ) -> Result<Self, StoreError> {
        let NamespaceRows {
            checkpoint_ns,
            checkpoints,
            writes,
        } = rows;
        let mut checkpoints = Some(checkpoints);
        let mut writes = Some(writes);
        crate::codec::validated_once(|| {
            Self::build(
                thread_id,
                &checkpoint_ns,
                visitor,
                Keep::Structure,
                &mut |f| checkpoints.take().into_iter().flatten().try_for_each(f),
                &mut || Ok(writes.take().unwrap_or_default()),
            )
        })
    }

    fn load_inner(
        store: &dyn Store,
        thread_id: &str,
        ns: &str,
        visitor: &mut dyn LoadVisitor,
        keep: Keep,
    ) -> Result<Self, StoreError> {
        let scan = if keep != Keep::Structure {
            Store::scan_thread_values
        } else {
            Store::scan_thread
        };
        // Sent before the scan, read after it (PostgreSQL: no round trip of its own).
        let mut writes = Some(store.thread_writes_later(thread_id, ns)?);
        crate::codec::validated_once(|| {
            Self::build(
                thread_id,
                ns,
                visitor,
                keep,
                &mut |f| scan(store, thread_id, ns, f),
                &mut || match writes.take() {
                    Some(later) => later(),
                    None => store.thread_writes(thread_id, ns),
                },
            )
        })
    }

    /// Checkpoint `i` for a walk that compares `messages` lists by their bytes: from memory
    /// when the thread holds its values (no bytes: read its `messages` value), else read back
    /// with every value but `messages`, which stands in unvalidated ([`Depth::Lazy`]),
    /// alongside its stored bytes when they are plain msgpack (when they are not, the value
    /// is decoded whole and no bytes come). The caller validates those bytes: it decodes
    /// them unless they are a list's encoding it already holds.
    pub fn checkpoint_lazy_messages(
        &self,
        store: &dyn Store,
        i: usize,
    ) -> Result<(Cow<'_, Checkpoint>, Option<Vec<u8>>), Error> {
        if self.values {
            return Ok((self.checkpoint_values(store, i)?, None));
        }
        self.lazy_messages_of(self.read_back(store, i)?)
    }

    /// [`Self::checkpoint_lazy_messages`] of a stored `row`, read back.
    pub(super) fn lazy_messages_of(
        &self,
        row: CheckpointRow,
    ) -> Result<(Cow<'_, Checkpoint>, Option<Vec<u8>>), Error> {
        let raw = match &row.body {
            CheckpointBody::Serialized {
                type_tag: Some(tag),
                bytes,
            } if tag == "msgpack" => crate::codec::checkpoint_messages_slice(bytes)
                .ok()
                .and_then(|(slice, _)| slice.map(<[u8]>::to_vec)),
            CheckpointBody::Postgres { blobs, .. } => blobs
                .iter()
                .find(|b| b.channel == super::MESSAGES && b.type_tag == "msgpack" && b.complete)
                .and_then(|b| b.blob.clone()),
            _ => None,
        };
        let depth = match raw {
            Some(_) => Depth::Lazy {
                raw: &[super::MESSAGES],
            },
            None => Depth::Full,
        };
        Ok((Cow::Owned(Checkpoint::from_row_at(row, depth)?), raw))
    }

    /// Builds the thread from its checkpoint rows (`scan` hands them to its argument) and
    /// then its writes. Its callers build inside [`crate::codec::validated_once`]: each
    /// message payload the checkpoints repeat is validated once.
    fn build(
        thread_id: &str,
        ns: &str,
        visitor: &mut dyn LoadVisitor,
        keep: Keep,
        scan: &mut dyn FnMut(RowSink<'_>) -> Result<(), StoreError>,
        read_writes: &mut dyn FnMut() -> Result<Vec<WriteRow>, StoreError>,
    ) -> Result<Self, StoreError> {
        let mut nodes = Vec::new();
        let empty = Arc::new(Map::new());
        let mut keep_values = keep != Keep::Structure;
        let mut read = 0u64;
        scan(&mut |row| {
            let read_bytes = row.read_bytes();
            read += read_bytes;
            if let Keep::UpTo { budget, .. } = keep
                && keep_values
                && read > budget
            {
                // Past the budget: what was kept so far is reduced to its structure.
                keep_values = false;
                for n in nodes.iter_mut() {
                    shed(n, &empty);
                }
            }
            let id = row.checkpoint_id.clone();
            let parent = row.parent_checkpoint_id.clone();
            let bytes = row.bytes;
            // Metadata is plain JSON even when the body is encrypted or pickled; unreadable
            // metadata leaves the node's empty and the checkpoint unreadable.
            // Kept values keep the metadata map (only its facts under `Metadata::Facts`); a
            // shallow load reads only its facts.
            let parsed = if keep_values
                && !matches!(
                    keep,
                    Keep::UpTo {
                        metadata: false,
                        ..
                    }
                ) {
                super::parse_row_metadata(&row).map(|m| {
                    let facts = MetaFacts::of(&m);
                    (Arc::new(m), facts)
                })
            } else if keep_values {
                // Values without the map: the metadata is still refused exactly where the
                // full parse refuses it (what `MetaFacts::parse` lets through included),
                // checked in the pass that reads the facts.
                match MetaFacts::parse_checked(&row.metadata) {
                    Some(facts) => Ok(facts),
                    None => super::parse_row_metadata(&row).map(|m| MetaFacts::of(&m)),
                }
                .map(|facts| (Arc::clone(&empty), facts))
            } else {
                MetaFacts::parse(&row.metadata, "")
                    .map(|facts| (Arc::clone(&empty), facts))
                    .map_err(|e| super::naming(e, &row))
            };
            let (mut metadata, facts, mut checkpoint) = match parsed {
                Ok((m, facts)) => {
                    let depth = if keep_values {
                        Depth::Full
                    } else if matches!(keep, Keep::UpTo { .. }) {
                        // A thread over the budget: its walks read every checkpoint back and
                        // validate `messages` then (decoding it unless its bytes are the
                        // replayed list's), so the load only hops over it.
                        Depth::ShallowUnchecked {
                            keep: &[PREGEL_TASKS],
                            unchecked: &[super::MESSAGES],
                        }
                    } else {
                        Depth::Shallow {
                            keep: &[PREGEL_TASKS],
                        }
                    };
                    let ck = Checkpoint::from_row_parsed(row, Arc::clone(&m), depth);
                    (m, facts, ck)
                }
                Err(e) => (Arc::clone(&empty), MetaFacts::default(), Err(e)),
            };
            let messages_encoding = checkpoint.as_ref().ok().map(Checkpoint::messages_encoding);
            if let Ok(ck) = &mut checkpoint {
                visitor.checkpoint(ck);
                if !keep_values {
                    compact(ck);
                    ck.metadata = Arc::clone(&empty);
                }
            }
            if !keep_values {
                metadata = Arc::clone(&empty);
            }
            nodes.push(Node {
                id,
                parent,
                bytes,
                read_bytes,
                metadata,
                facts,
                checkpoint,
                messages_encoding,
                writes: Vec::new(),
                children: Vec::new(),
                parent_index: None,
            });
            Ok(())
        })?;
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        let index: HashMap<String, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.clone(), i))
            .collect();
        for i in 0..nodes.len() {
            if let Some(p) = nodes[i].parent.as_ref().and_then(|p| index.get(p)).copied() {
                nodes[i].parent_index = Some(p);
                nodes[p].children.push(i);
            }
        }
        let mut writes = read_writes()?;
        crate::store::sort_writes(&mut writes);
        // Each node's writes are sized exactly (most nodes hold one or two), and the read
        // buffer shrinks as it empties, so the thread's writes are never held twice.
        let mut per_node = vec![0usize; nodes.len()];
        for w in &writes {
            if let Some(&i) = index.get(&w.checkpoint_id) {
                per_node[i] += 1;
            }
        }
        for (n, k) in nodes.iter_mut().zip(per_node) {
            n.writes.reserve_exact(k);
        }
        writes.reverse();
        while let Some(mut w) = writes.pop() {
            if let Some(&i) = index.get(&w.checkpoint_id) {
                visitor.write(&w);
                if keep == Keep::Structure {
                    w.value = Vec::new();
                }
                nodes[i].writes.push(w);
            }
            if writes.len() < writes.capacity() / 4 {
                writes.shrink_to_fit();
            }
        }
        nodes.shrink_to_fit();
        Ok(LoadedThread {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: ns.to_owned(),
            nodes,
            index,
            values: keep_values,
        })
    }

    /// The thread without the checkpoints `gone` names, linked again as a load of the rows
    /// left would link it (each write stays on its checkpoint).
    pub fn without(self, gone: &std::collections::HashSet<&str>) -> Self {
        let mut nodes: Vec<Node> = self
            .nodes
            .into_iter()
            .filter(|n| !gone.contains(n.id.as_str()))
            .collect();
        let index: HashMap<String, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.clone(), i))
            .collect();
        for n in nodes.iter_mut() {
            n.children.clear();
            n.parent_index = None;
        }
        for i in 0..nodes.len() {
            if let Some(p) = nodes[i].parent.as_ref().and_then(|p| index.get(p)).copied() {
                nodes[i].parent_index = Some(p);
                nodes[p].children.push(i);
            }
        }
        LoadedThread {
            nodes,
            index,
            ..self
        }
    }

    /// The head: LangGraph's "latest", the greatest checkpoint id.
    pub fn head(&self) -> Option<usize> {
        self.nodes.len().checked_sub(1)
    }

    /// The decoded checkpoint at `i`, if readable.
    pub fn checkpoint(&self, i: usize) -> Option<&Checkpoint> {
        self.nodes[i].checkpoint.as_ref().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteStore;

    /// A load that reads metadata as its facts only refuses the checkpoints whose metadata
    /// the whole parse refuses (a lone surrogate and an out-of-range number, which the facts'
    /// own parse lets through), with the same error, and keeps the same values and facts.
    #[test]
    fn a_load_of_facts_refuses_the_metadata_the_whole_load_refuses() {
        let (_dir, db) = crate::model::fixture_copy("full.db");
        let conn = rusqlite::Connection::open(&db).unwrap();
        let ids: Vec<String> = conn
            .prepare(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 't-fork' \
                 ORDER BY checkpoint_id LIMIT 3",
            )
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let odd: [&[u8]; 3] = [
            br#"{"step": 1, "x": "\ud800"}"#,
            br#"{"step": 2, "x": 1e400}"#,
            br#"{"step": 3, "source": "loop", "y": NaN}"#,
        ];
        for (id, meta) in ids.iter().zip(odd) {
            conn.execute(
                "UPDATE checkpoints SET metadata = ?1 WHERE thread_id = 't-fork' AND checkpoint_id = ?2",
                (meta, id),
            )
            .unwrap();
        }
        drop(conn);
        let store = SqliteStore::open_read_only(&db).unwrap();
        let load = |m| LoadedThread::load_bounded(&store, "t-fork", "", WHOLE_THREAD_BYTES, m);
        let (whole, facts) = (
            load(Metadata::Whole).unwrap(),
            load(Metadata::Facts).unwrap(),
        );
        assert!(whole.values && facts.values);
        assert_eq!(whole.nodes.len(), facts.nodes.len());
        for (w, f) in whole.nodes.iter().zip(&facts.nodes) {
            assert_eq!(w.facts, f.facts, "{}", w.id);
            match (&w.checkpoint, &f.checkpoint) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.channel_values, b.channel_values, "{}", w.id);
                    assert!(b.metadata.is_empty() && f.metadata.is_empty());
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                _ => panic!("{}: one load refused it, the other did not", w.id),
            }
        }
        let refused = |i: usize| facts.nodes[facts.index[&ids[i]]].checkpoint.is_err();
        assert!(refused(0) && refused(1) && !refused(2));
    }
}
