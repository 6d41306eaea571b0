//! Group transactions: small threads written several to one transaction, each inside a
//! savepoint of its own, so a store of many short threads does not pay a transaction (and a
//! commit) per thread. Every thread stays all-or-nothing: a refusal rolls back its own
//! savepoint only, and a crash rolls the whole open group back (each of its threads old).
//! A group commits after 64 threads (256 written together), [`GROUP_HOLD`] or
//! [`GROUP_WRITTEN`] bytes, whichever comes first (`super::limits`). A thread whose locks are not free at once, or that does
//! not fit the free space beside the group's rows, gets a transaction of its own after the
//! group commits. Where the store can, the threads are first tried written together, without
//! a savepoint each ([`super::together`]). The contract is in `docs/write-engine.md`.

use super::dry_run::{AHEAD_BYTES, ahead_of, forget_ahead};
use super::limits::{GROUP_HOLD, GROUP_WRITTEN, Turn, most_threads, turn, writes_together};
use super::together::Together;
use super::{
    ApplyContext, Locked, RunOptions, Sizes, ThreadJob, finish_thread, run_thread, work_locked,
};
use crate::error::Error;
use crate::store::{ThreadLock, WriteStore};
use std::time::Instant;

/// Works one worker's share of threads in groups, in order; one report per thread.
pub(super) fn run_groups<C, J>(
    job: &J,
    conn: &C,
    ids: &[String],
    cx: &ApplyContext,
    opts: &RunOptions<'_>,
) -> Result<Vec<J::Report>, Error>
where
    C: WriteStore,
    J: ThreadJob<C>,
{
    let most = most_threads(job, conn, cx, false);
    let in_savepoints = most_threads(job, conn, cx, true);
    // Written together until a group's statements fail: then every group takes savepoints.
    let mut together_ok = writes_together(job, conn);
    let mut reports = Vec::with_capacity(ids.len());
    // A stop asked of the process starts no new thread; the group under way commits the
    // threads it finished.
    while reports.len() < ids.len() && !crate::stop::requested() {
        let rest = &ids[reports.len()..];
        // Threads written together where the job and the store can (a group of one gains
        // nothing); a group that could not be is worked again one savepoint per thread.
        let take = &rest[..rest.len().min(most)];
        let together = if take.len() > 1 && together_ok {
            super::together::together(job, conn, take, cx)?
        } else {
            Together::Again { applied: true }
        };
        let (done, alone) = match together {
            Together::Worked(done, alone) => (done, alone),
            Together::Again { applied } => {
                together_ok &= applied;
                group(job, conn, &take[..take.len().min(in_savepoints)], cx)?
            }
        };
        for ((report, committed), id) in done.into_iter().zip(rest) {
            reports.push(finish_thread(job, conn, id, report, committed, opts)?);
            opts.progress.inc(1);
        }
        conn.between_threads();
        if alone && !crate::stop::requested() {
            let id = &ids[reports.len()];
            reports.push(run_thread(job, conn, id, cx, opts)?);
            opts.progress.inc(1);
            conn.between_threads();
        }
    }
    Ok(reports)
}

/// One group transaction over the first of `ids`: each thread's report and whether it
/// committed, in order, and whether the next thread must go alone (its locks were not free
/// at once, or it did not fit beside the group's rows). A store error rolls the whole group
/// back.
#[allow(clippy::type_complexity)]
fn group<C, J>(
    job: &J,
    conn: &C,
    ids: &[String],
    cx: &ApplyContext,
) -> Result<(Vec<(J::Report, bool)>, bool), Error>
where
    C: WriteStore,
    J: ThreadJob<C>,
{
    if conn.open_group(ids)? != ThreadLock::Held {
        // The thread's own transaction waits for the lock, or says why not.
        return Ok((Vec::new(), true));
    }
    let started = Instant::now();
    // Read under the group's locks, where the store reads threads in batches.
    let budget = cx.failpoints.batch_bytes(AHEAD_BYTES);
    let ahead = ahead_of(job, ids.len(), budget);
    let mut done = Vec::with_capacity(ids.len());
    let mut sizes = Sizes::default();
    let mut kept = false;
    let mut alone = false;
    let worked = std::thread::scope(|scope| -> Result<(), Error> {
        // Planned on a second thread from the rows read, where the job can; otherwise read
        // ahead for the plans on the connection.
        let plans = match ahead {
            Some(values) => super::held_plans::start(scope, job, conn, ids, budget, values)?,
            None => None,
        };
        if let (Some(values), None) = (ahead, &plans) {
            conn.store().read_ahead(ids, budget, values)?;
        }
        for id in ids {
            if crate::stop::requested()
                || (!done.is_empty()
                    && (started.elapsed() >= GROUP_HOLD || sizes.written >= GROUP_WRITTEN))
            {
                break;
            }
            // Taken in turn whatever the thread's turn gives: the plans come in order.
            let made = plans.as_ref().map_or(Ok(None), |p| p.next());
            match turn(job, id, conn.lock_in_group(id)?) {
                Turn::Go => {}
                Turn::EndGroup => {
                    alone = true;
                    break;
                }
                Turn::Refused(report) => {
                    done.push((report, false));
                    continue;
                }
            }
            match work_locked(job, conn, id, cx, sizes, made?)? {
                Locked::Keep(report, expect, after) => {
                    conn.end_in_group(true)?;
                    sizes = after;
                    kept = true;
                    done.push((job.committed(report, expect), true));
                }
                Locked::Drop(report) => {
                    conn.end_in_group(false)?;
                    done.push((report, false));
                }
                Locked::NoRoom(report, refusal) => {
                    conn.end_in_group(false)?;
                    if kept {
                        alone = true;
                        break;
                    }
                    done.push((job.refuse(report, refusal), false));
                }
            }
        }
        Ok(())
    });
    // Nothing read ahead outlives the group.
    let forgotten = forget_ahead(conn.store(), ahead);
    if let Err(e) = worked.and_then(|()| forgotten.map_err(Error::from)) {
        let _ = conn.rollback();
        return Err(e);
    }
    if kept {
        conn.commit()?;
    } else {
        conn.rollback()?;
    }
    Ok((done, alone))
}
