//! A stop asked of the whole process (`dfck maintain` on SIGTERM or SIGINT): once
//! requested, the worker pool starts no new item (a thread's transaction under way
//! finishes), and a `VACUUM` under way is interrupted and rolled back. Nothing sets it but
//! the command line.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Asks every running step to stop at its next safe point.
pub fn request() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked.
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The flag itself, for a signal handler to set.
pub fn flag() -> Arc<AtomicBool> {
    Arc::clone(&STOP)
}
