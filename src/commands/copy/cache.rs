//! DeerFlow's history cache on a copy's target: it assumes a thread's checkpoints never
//! change, so the keys of a thread `copy --replace` overwrote are purged after its commit; a
//! thread new to the target has none to purge.

use dfck_core::write::ThreadCache;
use std::collections::HashSet;
use std::sync::Mutex;

/// The cache, purged of the threads a copy replaced only.
pub struct PurgeReplaced<'a> {
    inner: &'a (dyn ThreadCache + Sync),
    replaced: Mutex<HashSet<String>>,
}

impl<'a> PurgeReplaced<'a> {
    /// Wraps the target's cache.
    pub fn new(inner: &'a (dyn ThreadCache + Sync)) -> Self {
        PurgeReplaced {
            inner,
            replaced: Mutex::new(HashSet::new()),
        }
    }

    /// Inside the thread's transaction: the thread's rows in the target were replaced.
    pub fn replaced(&self, thread_id: &str) {
        if let Ok(mut set) = self.replaced.lock() {
            set.insert(thread_id.to_owned());
        }
    }
}

impl ThreadCache for PurgeReplaced<'_> {
    /// After a thread's commit: its keys, when the copy replaced it.
    fn purge(&self, thread_id: &str) -> Result<u64, String> {
        let was = self
            .replaced
            .lock()
            .map_err(|_| "the cache's bookkeeping is unusable".to_owned())?
            .remove(thread_id);
        if was {
            self.inner.purge(thread_id)
        } else {
            Ok(0)
        }
    }
}
