//! What `prune` (each shape) and `migrate full-to-delta` would give back, thread by thread:
//! `dfck inspect --savings`. Each figure is the dry run of that command on the thread
//! (`docs/space.md#savings`), so it reads every checkpoint of the listed threads.

use crate::commands::migrate::to_delta::{ToDeltaOptions, plan as plan_to_delta};
use crate::commands::prune::{PruneOptions, PruneStatus, plan_thread};
use dfck_core::error::Error;
use dfck_core::progress::Progress;
use dfck_core::store::Store;
use serde::Serialize;

/// One thread's projected savings, in logical bytes (stored values and pending writes).
#[derive(Debug, Clone, Serialize)]
pub struct ThreadSavings {
    /// Thread id.
    pub thread_id: String,
    /// `prune` (trailing duration-only leaves).
    pub duration_leaves: u64,
    /// `prune --branches`, beyond the duration-only leaves.
    pub branches: u64,
    /// `migrate full-to-delta` (the default cadence): full threads' bytes minus their delta
    /// form's.
    pub full_to_delta: u64,
}

/// The projection for the listed threads, and its totals.
#[derive(Debug, Clone, Serialize)]
pub struct Savings {
    /// Snapshot cadence of the full-to-delta projection.
    pub snapshot_frequency: u64,
    /// Per thread.
    pub threads: Vec<ThreadSavings>,
    /// Sum of `duration_leaves`.
    pub duration_leaves: u64,
    /// Sum of `branches`.
    pub branches: u64,
    /// Sum of `full_to_delta`.
    pub full_to_delta: u64,
}

fn pruned(store: &dyn Store, thread: &str, branches: bool) -> Result<u64, Error> {
    let opts = PruneOptions {
        branches,
        ..PruneOptions::default()
    };
    let (r, _) = plan_thread(store, thread, &opts)?;
    Ok(if r.status == PruneStatus::Would {
        r.bytes_freed
    } else {
        0
    })
}

/// Projects the savings of `threads` (cadence `frequency` for full-to-delta).
pub fn project(
    store: &dyn Store,
    threads: &[String],
    frequency: u64,
    progress: &dyn Progress,
) -> Result<Savings, Error> {
    progress.start("projecting savings", Some(threads.len() as u64));
    let quiet = dfck_core::progress::NoProgress;
    let to_delta = ToDeltaOptions {
        frequency,
        form: None,
    };
    let mut out = Vec::with_capacity(threads.len());
    for id in threads {
        let duration_leaves = pruned(store, id, false)?;
        let branches = pruned(store, id, true)?.saturating_sub(duration_leaves);
        let plan = plan_to_delta(store, std::slice::from_ref(id), false, &to_delta, &quiet)?;
        let full_to_delta = plan
            .threads
            .iter()
            .map(|t| t.bytes_before.saturating_sub(t.bytes_after))
            .sum();
        out.push(ThreadSavings {
            thread_id: id.clone(),
            duration_leaves,
            branches,
            full_to_delta,
        });
        progress.inc(1);
    }
    progress.finish();
    Ok(Savings {
        snapshot_frequency: frequency,
        duration_leaves: out.iter().map(|t| t.duration_leaves).sum(),
        branches: out.iter().map(|t| t.branches).sum(),
        full_to_delta: out.iter().map(|t| t.full_to_delta).sum(),
        threads: out,
    })
}
