//! One (thread, namespace) loaded whole for structural analysis: every checkpoint's
//! lineage, metadata, versions and how it stores `messages`, and its pending writes' keys.
//! Channel values and write values are shown to a [`LoadVisitor`] as they stream past and
//! then dropped, so memory follows the number of checkpoints of the largest thread, not
//! its bytes.

use super::{Checkpoint, MessagesEncoding, parse_metadata};
use crate::codec::Value;
use crate::error::{ModelError, StoreError};
use crate::store::{Store, WriteRow};
use serde_json::{Map, Value as Json};
use std::collections::HashMap;

/// One checkpoint of a loaded thread. Lineage works even when the body is unreadable.
#[derive(Debug)]
pub struct Node {
    /// Checkpoint id.
    pub id: String,
    /// Parent id as stored.
    pub parent: Option<String>,
    /// Stored bytes (checkpoint + metadata).
    pub bytes: u64,
    /// Metadata (empty when unreadable).
    pub metadata: Map<String, Json>,
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
        self.metadata.get("source").and_then(Json::as_str)
    }

    /// `metadata.step`.
    pub fn step(&self) -> Option<i64> {
        self.metadata.get("step").and_then(Json::as_i64)
    }
}

/// Sees every checkpoint and write while a thread loads, before values are dropped.
pub trait LoadVisitor {
    /// A decoded checkpoint, values intact.
    fn checkpoint(&mut self, _ck: &Checkpoint) {}
    /// A write row, value intact.
    fn write(&mut self, _w: &WriteRow) {}
}

/// A visitor that looks at nothing.
pub struct NoVisitor;

impl LoadVisitor for NoVisitor {}

/// Keeps what structural analysis reads: trigger channels (nil) and queued `Send`s; every
/// other value becomes nil (the key stays, so "stores a value" still holds).
fn compact(ck: &mut Checkpoint) {
    for (name, v) in ck.channel_values.iter_mut() {
        if name != "__pregel_tasks" {
            *v = Value::Nil;
        }
    }
}

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
        Self::load_inner(store, thread_id, ns, visitor, false)
    }

    /// Reads every checkpoint and write of (thread, ns) and keeps every value (for
    /// whole-thread materialization; memory follows the thread's bytes).
    pub fn load_full(store: &dyn Store, thread_id: &str, ns: &str) -> Result<Self, StoreError> {
        Self::load_inner(store, thread_id, ns, &mut NoVisitor, true)
    }

    fn load_inner(
        store: &dyn Store,
        thread_id: &str,
        ns: &str,
        visitor: &mut dyn LoadVisitor,
        keep_values: bool,
    ) -> Result<Self, StoreError> {
        let mut nodes = Vec::new();
        let scan = if keep_values {
            Store::scan_thread_values
        } else {
            Store::scan_thread
        };
        scan(store, thread_id, ns, &mut |row| {
            let what = format!(
                "thread '{}' checkpoint {}",
                row.thread_id, row.checkpoint_id
            );
            // Metadata is plain JSON even when the body is encrypted or pickled.
            let metadata = parse_metadata(&row.metadata, &what).unwrap_or_default();
            let id = row.checkpoint_id.clone();
            let parent = row.parent_checkpoint_id.clone();
            let bytes = row.bytes;
            let mut checkpoint = Checkpoint::from_row(row);
            let messages_encoding = checkpoint.as_ref().ok().map(Checkpoint::messages_encoding);
            if let Ok(ck) = &mut checkpoint {
                visitor.checkpoint(ck);
                if !keep_values {
                    compact(ck);
                }
            }
            nodes.push(Node {
                id,
                parent,
                bytes,
                metadata,
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
        let mut writes = store.thread_writes(thread_id, ns)?;
        crate::store::sort_writes(&mut writes);
        for mut w in writes {
            if let Some(&i) = index.get(&w.checkpoint_id) {
                visitor.write(&w);
                if !keep_values {
                    w.value = Vec::new();
                }
                nodes[i].writes.push(w);
            }
        }
        Ok(LoadedThread {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: ns.to_owned(),
            nodes,
            index,
        })
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
