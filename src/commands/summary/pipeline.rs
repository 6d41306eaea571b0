//! The store summary's two stages. The scan hands each batch of threads over with its rows
//! not yet counted in; a worker thread counts them (metadata, the facts of every row,
//! `whole::add_row`) while the scan reads the next batch; the counted batches come back in
//! order to be finished (the point reads, `finish_batch`) on the scan's connection. The rows
//! a batch keeps uncounted are bounded (`PENDING_BYTES`): past it they are counted there and
//! then, on the scan's thread. Without a worker thread every batch is counted on the scan's.

use super::{ThreadAcc, whole};
use dfck_core::error::Error;
use dfck_core::store::{CheckpointMetaRow, FactsRow};
use std::sync::mpsc::{Receiver, SyncSender};
use std::thread::Scope;

/// Bytes of rows a batch keeps before they are counted.
pub(super) const PENDING_BYTES: u64 = 8 << 20;

/// A row handed over: its metadata, and the row's facts when the scan read them.
pub(super) type Pending = (CheckpointMetaRow, Option<FactsRow>);

/// What a pending row weighs against [`PENDING_BYTES`].
pub(super) fn weight(meta: &CheckpointMetaRow, row: Option<&FactsRow>) -> u64 {
    let ids = meta.thread_id.len() + meta.checkpoint_ns.len() + meta.checkpoint_id.len();
    (meta.metadata.len() + ids + 128) as u64 + row.map_or(0, |r| r.row.read_bytes())
}

/// Counts one row into its thread; a row the scan did not read whole makes the thread take
/// the point reads.
fn count_in(acc: &mut ThreadAcc, (meta, row): Pending, wait: u64) {
    let delta = acc.add(&meta, row.as_ref());
    if let Some(totals) = row.as_ref().and_then(|r| r.thread_writes) {
        acc.writes = Some(totals);
    }
    if let Some(totals) = row.as_ref().and_then(|r| r.thread_blobs) {
        acc.blobs = Some(totals);
    }
    match row {
        Some(row) if acc.whole => whole::add_row(acc, row, delta, wait),
        _ => {
            acc.whole = false;
            acc.rows = Vec::new();
            acc.last_row = None;
            acc.undecided = Vec::new();
        }
    }
}

/// Counts the thread's pending rows, in order.
pub(super) fn count_pending(acc: &mut ThreadAcc, wait: u64) {
    for p in std::mem::take(&mut acc.pending) {
        count_in(acc, p, wait);
    }
}

/// Counts every pending row of a batch whose threads are over, and ends each thread.
fn count_batch(batch: &mut [ThreadAcc], wait: u64) {
    for acc in batch {
        count_pending(acc, wait);
        whole::end(acc);
    }
}

/// The way to the counting thread and back.
type Worker = (SyncSender<Vec<ThreadAcc>>, Receiver<Vec<ThreadAcc>>);

/// The counting stage: a worker thread, or the scan's own when none could be started.
pub(super) struct Counting {
    worker: Option<Worker>,
    in_flight: usize,
    wait: u64,
}

fn stopped() -> Error {
    Error::Io(std::io::Error::other(
        "the summary's counting thread stopped",
    ))
}

impl Counting {
    /// Starts the worker in `scope`.
    pub(super) fn start<'scope>(scope: &'scope Scope<'scope, '_>, wait: u64) -> Self {
        let (to_worker, inbox) = std::sync::mpsc::sync_channel::<Vec<ThreadAcc>>(1);
        let (outbox, from_worker) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("dfck-summary".into())
            .spawn_scoped(scope, move || {
                for mut batch in inbox {
                    count_batch(&mut batch, wait);
                    if outbox.send(batch).is_err() {
                        return;
                    }
                }
            });
        Counting {
            worker: spawned.ok().map(|_| (to_worker, from_worker)),
            in_flight: 0,
            wait,
        }
    }

    /// Hands over a batch whose threads are over; the batches counted since, in order
    /// (the one before it, once the worker has it counted).
    pub(super) fn hand_over(
        &mut self,
        mut batch: Vec<ThreadAcc>,
    ) -> Result<Option<Vec<ThreadAcc>>, Error> {
        let Some((to_worker, from_worker)) = &self.worker else {
            count_batch(&mut batch, self.wait);
            return Ok(Some(batch));
        };
        to_worker.send(batch).map_err(|_| stopped())?;
        self.in_flight += 1;
        if self.in_flight < 2 {
            return Ok(None);
        }
        self.in_flight -= 1;
        from_worker.recv().map(Some).map_err(|_| stopped())
    }

    /// The batches still being counted, in order; the worker then stops.
    pub(super) fn finish(self) -> Result<Vec<Vec<ThreadAcc>>, Error> {
        let Some((to_worker, from_worker)) = self.worker else {
            return Ok(Vec::new());
        };
        drop(to_worker);
        (0..self.in_flight)
            .map(|_| from_worker.recv().map_err(|_| stopped()))
            .collect()
    }
}
