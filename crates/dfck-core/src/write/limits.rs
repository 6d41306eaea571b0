//! What a group transaction's two ways of working ([`super::group`], [`super::together`])
//! share: its bounds (how many threads it takes, how long it holds its locks and how many
//! bytes it writes before it commits) and a thread's turn in it.

use super::{ApplyContext, ThreadJob, ThreadPlan, busy_refusal};
use crate::store::{ThreadLock, WriteStore};
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

/// A thread's turn in a group, from what its lock came to.
pub(super) enum Turn<R> {
    /// Work it.
    Go,
    /// Its locks are not free at once: the group ends, and it goes alone.
    EndGroup,
    /// Another dfck holds it: refused, untouched.
    Refused(R),
}

/// The [`Turn`] of `thread_id` whose lock in the group came to `lock`.
pub(super) fn turn<C: ?Sized, J: ThreadPlan<C>>(
    job: &J,
    thread_id: &str,
    lock: ThreadLock,
) -> Turn<J::Report> {
    match lock {
        ThreadLock::Held => Turn::Go,
        ThreadLock::Contended(_) => Turn::EndGroup,
        ThreadLock::Busy(holder) => {
            Turn::Refused(job.refuse(job.untouched(thread_id), busy_refusal(holder.as_deref())))
        }
    }
}
