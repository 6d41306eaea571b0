//! A stop asked of the whole process (`dfck maintain --watch` on SIGTERM): once requested,
//! the worker pool starts no new item (a thread's transaction under way finishes), and a
//! `VACUUM` under way is interrupted and rolled back. Nothing sets it but the command line.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Asks every running step to stop at its next safe point.
pub fn request() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked.
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}
