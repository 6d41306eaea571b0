//! Threads written together: in a group transaction on a store that can
//! ([`WriteStore::writes_together`]), the threads whose work the job can apply together
//! ([`ThreadJob::together`]) take no savepoint of their own. The group's threads are
//! planned one by one; then their changes go to the store in a few statements for all of
//! them, the store reads them back in one batch, and each thread is verified from it. A
//! thread whose work cannot go together is worked in its savepoint as in any group. Planning
//! stops at half the group's hold, at [`AHEAD_BYTES`] of work held, or once as many threads
//! took a savepoint as a group of them takes.
//!
//! Every thread stays all-or-nothing: anything but every thread verified (a statement the
//! store refused, a verification that failed) rolls the whole group back, and the caller
//! works the same threads again one savepoint each ([`super::group`]), where a refusal is
//! the thread's own; once the store refused a group's changes, the worker's later groups
//! take savepoints too. The contract is in `docs/write-engine.md`.

use super::dry_run::{AHEAD_BYTES, ahead_of, forget_ahead};
use super::limits::{GROUP_HOLD, GROUP_WRITTEN, Turn, most_threads, turn};
use super::{ApplyContext, Locked, Sizes, ThreadJob, apply_locked, plan_locked};
use crate::error::Error;
use crate::store::{ThreadLock, WriteStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Groups written together that reached their verification in this process (the
/// `together-unverified` failpoint counts them).
static VERIFIED: AtomicU64 = AtomicU64::new(0);

/// One thread of the group, as it stands before the threads written together are.
enum Slot<R> {
    /// Its report; whether it committed (worked in its savepoint) or not.
    Done(R, bool),
    /// Planned, its work the `usize`-th of those written together.
    Together(R, usize),
}

/// What working a group together came to.
pub(super) enum Together<R> {
    /// As [`super::group::group`]: each thread's report and whether it committed, and
    /// whether the next thread must go alone.
    Worked(Vec<(R, bool)>, bool),
    /// Rolled back: work the same threads one savepoint each. `applied`: the group's
    /// changes were made (a verification failed); otherwise the store refused them.
    Again {
        /// Whether the store made the group's changes.
        applied: bool,
    },
}

/// The group's threads written in one go, or rolled back to be worked again.
pub(super) fn together<C, J>(
    job: &J,
    conn: &C,
    ids: &[String],
    cx: &ApplyContext,
) -> Result<Together<J::Report>, Error>
where
    C: WriteStore,
    J: ThreadJob<C>,
{
    if conn.open_group(ids)? != ThreadLock::Held {
        return Ok(Together::Worked(Vec::new(), true));
    }
    let started = Instant::now();
    let budget = cx.failpoints.batch_bytes(AHEAD_BYTES);
    let ahead = ahead_of(job, ids.len(), budget);
    let mut slots: Vec<Slot<J::Report>> = Vec::with_capacity(ids.len());
    let mut alone = false;
    // Threads worked in savepoints of their own, at most as many as a group of them takes.
    let savepoints = most_threads(job, conn, cx, true);
    let worked = (|| -> Result<Result<Vec<J::Expect>, bool>, Error> {
        if let Some(values) = ahead {
            conn.store().read_ahead(ids, budget, values)?;
        }
        let mut batch: Vec<(&str, J::Work)> = Vec::new();
        let (mut sizes, mut held, mut in_savepoints) = (Sizes::default(), 0usize, 0usize);
        let mut kept = false;
        for id in ids {
            // Planning stops at half the hold: applying and verifying take the rest.
            if crate::stop::requested()
                || (!slots.is_empty()
                    && (started.elapsed() >= GROUP_HOLD / 2
                        || sizes.written >= GROUP_WRITTEN
                        || held >= AHEAD_BYTES
                        || in_savepoints >= savepoints))
            {
                break;
            }
            match turn(job, id, conn.join_group(id)?) {
                Turn::Go => {}
                Turn::EndGroup => {
                    alone = true;
                    break;
                }
                Turn::Refused(report) => {
                    slots.push(Slot::Done(report, false));
                    continue;
                }
            }
            let (report, work, after) = match plan_locked(job, conn, id, cx, sizes, None)? {
                Locked::Keep(report, work, after) => (report, work, after),
                Locked::Drop(report) => {
                    slots.push(Slot::Done(report, false));
                    continue;
                }
                Locked::NoRoom(report, refusal) => {
                    if kept {
                        alone = true;
                        break;
                    }
                    slots.push(Slot::Done(job.refuse(report, refusal), false));
                    continue;
                }
            };
            if let Some(bytes) = job.together(&work) {
                slots.push(Slot::Together(report, batch.len()));
                batch.push((id, work));
                sizes = after;
                held = held.saturating_add(bytes);
                kept = true;
                continue;
            }
            // Its own savepoint, as in any group.
            in_savepoints += 1;
            if conn.lock_in_group(id)? != ThreadLock::Held {
                return Ok(Err(true));
            }
            match apply_locked(job, conn, id, cx, report, work, after) {
                Locked::Keep(report, expect, after) => {
                    conn.end_in_group(true)?;
                    sizes = after;
                    kept = true;
                    slots.push(Slot::Done(job.committed(report, expect), true));
                }
                Locked::Drop(report) => {
                    conn.end_in_group(false)?;
                    slots.push(Slot::Done(report, false));
                }
                Locked::NoRoom(report, refusal) => {
                    conn.end_in_group(false)?;
                    slots.push(Slot::Done(job.refuse(report, refusal), false));
                }
            }
        }
        if batch.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let written: Vec<String> = batch.iter().map(|(id, _)| (*id).to_owned()).collect();
        let count = batch.len();
        let Ok(expects) = job.apply_together(conn, batch, cx) else {
            return Ok(Err(false));
        };
        if expects.len() != count {
            return Ok(Err(true));
        }
        // The read-back: every thread written together read in one batch, where the store
        // reads threads in batches (none where every thread is verified from memory).
        let read_back: Vec<String> = written
            .iter()
            .zip(&expects)
            .filter(|(_, e)| !job.verifies_from_memory(e))
            .map(|(id, _)| id.clone())
            .collect();
        if let Some(values) = ahead.filter(|_| !read_back.is_empty()) {
            conn.store().read_ahead(&read_back, budget, values)?;
        }
        // Test builds: the `together-unverified:N` failpoint fails the N-th group's check.
        let n = VERIFIED.fetch_add(1, Ordering::Relaxed) + 1;
        if cx.failpoints.together_unverified(n) {
            return Ok(Err(true));
        }
        for (id, expect) in written.iter().zip(&expects) {
            let verified = job.verify(conn, id, expect);
            conn.store().forget_ahead(id);
            if verified.is_err() {
                return Ok(Err(true));
            }
        }
        Ok(Ok(expects))
    })();
    // Nothing read ahead outlives the group.
    let forgotten = forget_ahead(conn.store(), ahead);
    let expects = match worked.and_then(|e| forgotten.map(|()| e).map_err(Error::from)) {
        Ok(Ok(expects)) => expects,
        Ok(Err(applied)) => {
            conn.rollback()?;
            return Ok(Together::Again { applied });
        }
        Err(e) => {
            let _ = conn.rollback();
            return Err(e);
        }
    };
    let mut expects: Vec<Option<J::Expect>> = expects.into_iter().map(Some).collect();
    let mut done = Vec::with_capacity(slots.len());
    for slot in slots {
        done.push(match slot {
            Slot::Done(report, committed) => (report, committed),
            Slot::Together(report, i) => match expects.get_mut(i).and_then(Option::take) {
                Some(expect) => (job.committed(report, expect), true),
                None => {
                    conn.rollback()?;
                    return Ok(Together::Again { applied: true });
                }
            },
        });
    }
    if done.iter().any(|(_, committed)| *committed) {
        conn.commit()?;
    } else {
        conn.rollback()?;
    }
    Ok(Together::Worked(done, alone))
}
