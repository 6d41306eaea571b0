//! The bounds of a group transaction ([`super::group`], [`super::together`]): how many
//! threads it takes, how long it holds its locks and how many bytes it writes before it
//! commits.

use super::{ApplyContext, ThreadJob};
use crate::store::WriteStore;
use std::time::Duration;

/// The most threads one group takes.
const GROUP_THREADS: usize = 64;

/// The most threads one group takes where they are written together
/// ([`super::together`]): its statements and read-back cost per group, not per thread.
const TOGETHER_THREADS: usize = 256;

/// How long a group keeps its transaction open (on SQLite, the store's write lock) before
/// it commits: far below DeerFlow's busy timeout (5 s). A single thread may take longer.
pub(super) const GROUP_HOLD: Duration = Duration::from_millis(200);

/// The rows a group writes before it commits (as the WAL bound between threads).
pub(super) const GROUP_WRITTEN: u64 = 16 << 20;

/// Whether `job`'s threads are written together on `conn` ([`super::together`]).
pub(super) fn writes_together<C: WriteStore, J: ThreadJob<C>>(job: &J, conn: &C) -> bool {
    job.writes_together() && conn.writes_together()
}

/// The most threads one group of `job` takes on `conn`; `savepoints`: the most that may
/// each take a savepoint (PostgreSQL keeps 64 subtransactions of a session in memory).
pub(super) fn most_threads<C: WriteStore, J: ThreadJob<C>>(
    job: &J,
    conn: &C,
    cx: &ApplyContext,
    savepoints: bool,
) -> usize {
    let most = if writes_together(job, conn) && !savepoints {
        TOGETHER_THREADS
    } else {
        GROUP_THREADS
    };
    cx.failpoints.group_threads(most)
}
