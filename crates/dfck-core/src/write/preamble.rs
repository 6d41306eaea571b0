//! The preamble every write command's plan shares: the thread still exists (it may have
//! been deleted since the thread list was read), every namespace loaded, and what makes a
//! thread impossible to plan — an unreadable checkpoint, a lineage with a cycle or a dangling
//! parent. Each command words its refusals itself; the facts come from here.

use crate::error::{ModelError, StoreError};
use crate::finding::{Finding, FindingCode};
use crate::lineage::integrity;
use crate::model::thread::LoadedThread;
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
    let namespaces = store.namespaces(thread_id)?;
    if namespaces.is_empty() {
        return Ok(Preamble::Gone);
    }
    let mut loaded = Vec::with_capacity(namespaces.len());
    for ns in &namespaces {
        let t = if full {
            LoadedThread::load_full(store, thread_id, ns)
        } else {
            LoadedThread::load(store, thread_id, ns)
        };
        match t {
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
