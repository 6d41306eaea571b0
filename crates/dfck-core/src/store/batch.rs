//! Whole threads read together ([`crate::store::Store::read_threads`]): on a backend where
//! every query is a round trip, a batch of short threads costs two queries instead of a
//! few per thread. The rows are those the per-thread reads give, grouped by thread and
//! namespace; a batch holds about a byte budget, and the threads past it are read one by
//! one as before.

use super::{CheckpointRow, WriteRow};

/// One namespace of a thread, read whole.
#[derive(Debug, Default)]
pub struct NamespaceRows {
    /// The namespace.
    pub checkpoint_ns: String,
    /// Its checkpoint rows, as [`crate::store::Store::scan_thread`] gives them.
    pub checkpoints: Vec<CheckpointRow>,
    /// Its pending writes, as [`crate::store::Store::thread_writes`] gives them.
    pub writes: Vec<WriteRow>,
}

/// One thread, read whole: its namespaces in order (none: the thread is gone).
#[derive(Debug, Default)]
pub struct ThreadRows {
    /// The thread.
    pub thread_id: String,
    /// Its namespaces, sorted as [`crate::store::Store::namespaces`] gives them.
    pub namespaces: Vec<NamespaceRows>,
}

impl ThreadRows {
    /// The bytes its rows hold, about.
    pub fn held_bytes(&self) -> usize {
        self.namespaces
            .iter()
            .map(|ns| {
                ns.checkpoints.iter().map(row_bytes).sum::<usize>()
                    + ns.writes.iter().map(|w| w.value.len() + 64).sum::<usize>()
            })
            .sum()
    }
}

/// The bytes one checkpoint row holds, about.
pub fn row_bytes(row: &CheckpointRow) -> usize {
    let body = match &row.body {
        super::CheckpointBody::Serialized { bytes, .. } => bytes.len(),
        // The JSONB as a tree takes a few times its stored size.
        super::CheckpointBody::Postgres { blobs, .. } => {
            usize::try_from(row.bytes)
                .unwrap_or(usize::MAX)
                .saturating_mul(4)
                + blobs
                    .iter()
                    .map(|b| b.blob.as_ref().map_or(0, Vec::len) + 32)
                    .sum::<usize>()
        }
    };
    body + row.metadata.len() + 128
}
