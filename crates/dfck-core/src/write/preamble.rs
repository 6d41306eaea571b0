//! The preamble every write command's plan shares: the thread still exists (it may have
//! been deleted since the thread list was read), every namespace loaded, and what makes a
//! thread impossible to plan — an unreadable checkpoint, a lineage with a cycle or a dangling
//! parent. Each command words its refusals itself; the facts come from here.

use crate::error::{ModelError, StoreError};
use crate::finding::{Finding, FindingCode};
use crate::lineage::integrity;
use crate::model::thread::{LoadedThread, Metadata, WHOLE_THREAD_BYTES};
use crate::store::Store;

/// What a plan reports for a thread deleted between the listing and the plan.
pub const THREAD_GONE: &str = "thread no longer exists";

/// A thread read for planning.
pub enum Preamble {
    /// The thread has no checkpoints any more.
    Gone,
    /// Every namespace of the thread, loaded (with values when asked).
    Loaded(Vec<LoadedThread>),
}

/// Loads every namespace of `thread_id` (with values when `full`, structure only otherwise);
/// [`Preamble::Gone`] when the thread no longer exists.
pub fn load(store: &dyn Store, thread_id: &str, full: bool) -> Result<Preamble, StoreError> {
    load_each(store, thread_id, &mut |ns| {
        if full {
            LoadedThread::load_full(store, thread_id, ns)
        } else {
            LoadedThread::load(store, thread_id, ns)
        }
    })
}

/// Loads every namespace of `thread_id` with [`LoadedThread::load_bounded`]: values held
/// up to [`WHOLE_THREAD_BYTES`] stored bytes a namespace (the `whole-bytes` failpoint
/// changes the budget), a larger namespace read back as its walks reach its checkpoints;
/// `metadata` as that load says.
pub fn load_bounded(
    store: &dyn Store,
    thread_id: &str,
    metadata: Metadata,
) -> Result<Preamble, StoreError> {
    let budget = whole_thread_bytes();
    load_each(store, thread_id, &mut |ns| {
        LoadedThread::load_bounded(store, thread_id, ns, budget, metadata)
    })
}

/// The budget of [`load_bounded`].
pub fn whole_thread_bytes() -> u64 {
    crate::failpoint::Failpoints::from_env("plan").whole_thread_bytes(WHOLE_THREAD_BYTES)
}

fn load_each(
    store: &dyn Store,
    thread_id: &str,
    load: &mut dyn FnMut(&str) -> Result<LoadedThread, StoreError>,
) -> Result<Preamble, StoreError> {
    let namespaces = store.namespaces(thread_id)?;
    if namespaces.is_empty() {
        return Ok(Preamble::Gone);
    }
    let mut loaded = Vec::with_capacity(namespaces.len());
    for ns in &namespaces {
        match load(ns) {
            Ok(t) => loaded.push(t),
            Err(StoreError::ThreadNotFound { .. }) => return Ok(Preamble::Gone),
            Err(e) => return Err(e),
        }
    }
    Ok(Preamble::Loaded(loaded))
}

/// The first checkpoint of the loaded namespaces that cannot be read, with why: it hides the
/// thread's mode and state, so no command may plan over it.
pub fn unreadable(threads: &[LoadedThread]) -> Option<&ModelError> {
    threads
        .iter()
        .flat_map(|t| &t.nodes)
        .find_map(|n| n.checkpoint.as_ref().err())
}

/// The findings that make one namespace's lineage unusable for planning: cycles and
/// dangling parents (which checkpoints to keep, or replay through, cannot be told).
pub fn broken_lineage(t: &LoadedThread) -> Vec<Finding> {
    integrity(t, None)
        .into_iter()
        .filter(|f| {
            matches!(
                f.code,
                FindingCode::LineageCycle | FindingCode::LineageDanglingParent
            )
        })
        .collect()
}
