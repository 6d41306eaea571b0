//! One (thread, namespace) loaded whole: every checkpoint (decoded where possible), its
//! pending writes, and the parent/child structure. Analyses that look at a whole thread
//! (verify, lineage trees) read from this; memory follows the largest thread.

use super::{Checkpoint, parse_metadata};
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
    /// Metadata (empty when unreadable).
    pub metadata: Map<String, Json>,
    /// The decoded checkpoint, or why it could not be decoded.
    pub checkpoint: Result<Checkpoint, ModelError>,
    /// Pending writes stored on this checkpoint, canonical order.
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
        let mut nodes = Vec::new();
        store.scan_thread(thread_id, ns, &mut |row| {
            let what = format!(
                "thread '{}' checkpoint {}",
                row.thread_id, row.checkpoint_id
            );
            // Metadata is plain JSON even when the body is encrypted or pickled.
            let metadata = parse_metadata(&row.metadata, &what).unwrap_or_default();
            let id = row.checkpoint_id.clone();
            let parent = row.parent_checkpoint_id.clone();
            let checkpoint = Checkpoint::from_row(row);
            nodes.push(Node {
                id,
                parent,
                metadata,
                checkpoint,
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
        for w in writes {
            if let Some(&i) = index.get(&w.checkpoint_id) {
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
