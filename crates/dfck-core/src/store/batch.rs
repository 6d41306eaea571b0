//! Whole threads read together ([`crate::store::Store::read_threads`]): on a backend where
//! every query is a round trip, a batch of short threads costs two queries instead of a
//! few per thread. The rows are those the per-thread reads give, grouped by thread and
//! namespace; a batch holds about a byte budget, and the threads past it are read one by
//! one as before.

use super::{CheckpointRow, WriteRow};
use std::collections::HashMap;

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

/// Adds to `read` every thread of `ids` it lacks, gone (no namespaces): for a batch that
/// reached every thread, a thread without a row no longer exists.
pub fn add_gone(read: &mut Vec<ThreadRows>, ids: &[String]) {
    let seen: std::collections::HashSet<&str> = read.iter().map(|t| t.thread_id.as_str()).collect();
    let gone: Vec<ThreadRows> = ids
        .iter()
        .filter(|id| !seen.contains(id.as_str()))
        .map(|id| ThreadRows {
            thread_id: id.clone(),
            namespaces: Vec::new(),
        })
        .collect();
    read.extend(gone);
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

/// Hands the checkpoint rows of (thread, ns) read ahead with `values` to `f`, once; `None`
/// when none are held there (the store reads them itself).
pub fn serve_checkpoints(
    ahead: &std::cell::RefCell<ReadAhead>,
    thread_id: &str,
    ns: &str,
    values: bool,
    f: &mut dyn FnMut(CheckpointRow) -> Result<(), crate::error::StoreError>,
) -> Option<Result<(), crate::error::StoreError>> {
    let rows = ahead.borrow_mut().take_checkpoints(thread_id, ns, values)?;
    Some(rows.into_iter().try_for_each(f))
}

/// Threads read ahead ([`crate::store::Store::read_ahead`]), each namespace's rows handed
/// out once.
#[derive(Debug, Default)]
pub struct ReadAhead {
    /// `None`: the thread was read ahead and is forgotten ([`ReadAhead::forget`]).
    threads: HashMap<String, Option<Vec<AheadNamespace>>>,
    values: bool,
    /// Test builds (`batch-required:N`): a thread not read ahead is an error.
    required: bool,
}

#[derive(Debug)]
struct AheadNamespace {
    checkpoint_ns: String,
    checkpoints: Option<Vec<CheckpointRow>>,
    writes: Option<Vec<WriteRow>>,
}

impl ReadAhead {
    /// What [`crate::store::Store::read_threads`] read, read with `values` or not, for a
    /// batch of threads (`batch`; none: nothing is read ahead any more).
    pub fn new(read: Vec<ThreadRows>, values: bool, batch: bool) -> Self {
        let required =
            batch && crate::failpoint::Failpoints::from_env("read-ahead").batch_required();
        let threads = read
            .into_iter()
            .map(|t| {
                let namespaces = t
                    .namespaces
                    .into_iter()
                    .map(|n| AheadNamespace {
                        checkpoint_ns: n.checkpoint_ns,
                        checkpoints: Some(n.checkpoints),
                        writes: Some(n.writes),
                    })
                    .collect();
                (t.thread_id, Some(namespaces))
            })
            .collect();
        ReadAhead {
            threads,
            values,
            required,
        }
    }

    /// Test builds: the error of reading on its own a thread the batch left out.
    pub fn missed(&self, thread_id: &str) -> Result<(), crate::error::StoreError> {
        if self.required && !self.threads.contains_key(thread_id) {
            return Err(crate::error::StoreError::Query {
                what: format!("reading thread {thread_id}"),
                reason: "failpoint batch-required: read on its own, not with its batch".into(),
            });
        }
        Ok(())
    }

    /// The namespaces of a thread read ahead (none: it is gone).
    pub fn namespaces(&self, thread_id: &str) -> Option<Vec<String>> {
        self.threads
            .get(thread_id)?
            .as_ref()
            .map(|ns| ns.iter().map(|n| n.checkpoint_ns.clone()).collect())
    }

    /// Forgets what was read ahead of a thread (it is about to change): it is read from the
    /// store from now on, and is no thread the batch left out.
    pub fn forget(&mut self, thread_id: &str) {
        if let Some(t) = self.threads.get_mut(thread_id) {
            *t = None;
        }
    }

    /// The checkpoint rows of (thread, ns), once, if they were read ahead with `values`.
    pub fn take_checkpoints(
        &mut self,
        thread_id: &str,
        ns: &str,
        values: bool,
    ) -> Option<Vec<CheckpointRow>> {
        if values != self.values {
            return None;
        }
        self.namespace(thread_id, ns)?.checkpoints.take()
    }

    /// The writes of (thread, ns), once, if they were read ahead.
    pub fn take_writes(&mut self, thread_id: &str, ns: &str) -> Option<Vec<WriteRow>> {
        self.namespace(thread_id, ns)?.writes.take()
    }

    fn namespace(&mut self, thread_id: &str, ns: &str) -> Option<&mut AheadNamespace> {
        self.threads
            .get_mut(thread_id)?
            .as_mut()?
            .iter_mut()
            .find(|n| n.checkpoint_ns == ns)
    }
}
