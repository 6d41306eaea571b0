//! The dry run of a write command: every thread planned exactly as [`super::run`] plans it,
//! inside a read transaction of its own — no write lock, no advisory lock, no byte changed.

use super::dry_ahead::AHEAD_THREADS;
use super::{Planned, ThreadPlan, active_run_refusal};
use crate::error::Error;
use crate::error::StoreError;
use crate::progress::Progress;
use crate::store::{PlanStore, ReadOnly, Store};

/// Plans `job` on the given threads (every thread of the store when none are given) and
/// returns each thread's report in thread order: a thread the command would write shows as
/// [`ThreadPlan::would`] makes it, the rest as planned (skipped or refused with the reason).
pub fn dry_run<C, J>(
    job: &J,
    conn: &C,
    threads: &[String],
    progress: &dyn Progress,
) -> Result<Vec<J::Report>, Error>
where
    C: PlanStore + ?Sized,
    J: ThreadPlan<C>,
{
    super::collect(|sink| dry_run_each(job, conn, threads, progress, sink))
}

/// [`dry_run`] handing each thread's report to `sink` as it is planned, so that a caller
/// streaming them holds none (a sink error stops the run).
pub fn dry_run_each<C, J>(
    job: &J,
    conn: &C,
    threads: &[String],
    progress: &dyn Progress,
    sink: &mut dyn FnMut(J::Report) -> Result<(), Error>,
) -> Result<(), Error>
where
    C: PlanStore + ?Sized,
    J: ThreadPlan<C>,
{
    let selection = super::Selection::of(conn, threads, false)?;
    let total = selection.total(conn, progress)?;
    progress.start("planning threads", total);
    selection.each(conn, &mut |ids| plan_into(job, conn, ids, progress, sink))?;
    progress.finish();
    Ok(())
}

/// [`dry_run_each`] on a read-only store over `jobs` connections (`open` makes each one
/// past the first): each page of threads in chunks, a chunk to a worker at a time, the
/// reports handed to `sink` in thread order.
pub fn dry_run_jobs<'s, J, R>(
    job: &J,
    store: &'s (dyn Store + 's),
    open: &(dyn Fn() -> Result<Box<dyn Store + 's>, StoreError> + Sync),
    jobs: usize,
    threads: &[String],
    progress: &(dyn Progress + Sync),
    sink: &mut (dyn FnMut(R) -> Result<(), Error> + Send),
) -> Result<(), Error>
where
    J: for<'a> ThreadPlan<ReadOnly<'a>, Report = R> + Sync,
    R: Send,
{
    let first = ReadOnly(store);
    if jobs <= 1 {
        // One connection: it reads while a second thread plans ([`super::dry_ahead`]).
        let budget = crate::failpoint::Failpoints::from_env("plan").batch_bytes(AHEAD_BYTES);
        let selection = super::Selection::of(&first, threads, false)?;
        progress.start("planning threads", selection.total(&first, progress)?);
        selection.each(&first, &mut |ids| match ahead_of(job, ids.len(), budget) {
            Some(values) => {
                super::dry_ahead::plan_ahead(job, store, ids, values, budget, progress, sink)
            }
            None => plan_into(job, &first, ids, progress, sink),
        })?;
        progress.finish();
        return Ok(());
    }
    let selection = super::Selection::of(&first, threads, false)?;
    progress.start("planning threads", selection.total(&first, progress)?);
    let open = || open().map_err(Error::from);
    selection.each(&first, &mut |ids| {
        // Chunks small enough to keep every worker busy.
        let chunk = (ids.len() / (jobs * 8)).clamp(1, AHEAD_THREADS);
        let chunks: Vec<&[String]> = ids.chunks(chunk).collect();
        crate::pool::run_ordered(
            chunks.len(),
            jobs,
            store,
            &open,
            &|s: &(dyn Store + 's), k| {
                super::collect(|out| plan_into(job, &ReadOnly(s), chunks[k], progress, out))
            },
            &mut |_, reports| reports.into_iter().try_for_each(&mut *sink),
        )
    })?;
    progress.finish();
    Ok(())
}

/// [`dry_run`] on exactly `ids`, without the check that each has checkpoints.
pub fn plan_each<C, J>(
    job: &J,
    conn: &C,
    ids: &[String],
    progress: &dyn Progress,
) -> Result<Vec<J::Report>, Error>
where
    C: PlanStore + ?Sized,
    J: ThreadPlan<C>,
{
    super::collect(|sink| plan_each_into(job, conn, ids, progress, sink))
}

/// [`plan_each`], each report handed to `sink` as it is planned.
pub fn plan_each_into<C, J>(
    job: &J,
    conn: &C,
    ids: &[String],
    progress: &dyn Progress,
    sink: &mut (dyn FnMut(J::Report) -> Result<(), Error> + Send),
) -> Result<(), Error>
where
    C: PlanStore + ?Sized,
    J: ThreadPlan<C>,
{
    progress.start("planning threads", Some(ids.len() as u64));
    plan_into(job, conn, ids, progress, sink)?;
    progress.finish();
    Ok(())
}

/// [`plan_each`], each report to `sink`.
fn plan_into<C, J>(
    job: &J,
    conn: &C,
    ids: &[String],
    progress: &dyn Progress,
    sink: &mut dyn FnMut(J::Report) -> Result<(), Error>,
) -> Result<(), Error>
where
    C: PlanStore + ?Sized,
    J: ThreadPlan<C>,
{
    let budget = crate::failpoint::Failpoints::from_env("plan").batch_bytes(AHEAD_BYTES);
    let ahead = ahead_of(job, ids.len(), budget);
    let planned = (|| -> Result<(), Error> {
        for chunk in ids.chunks(AHEAD_THREADS) {
            if let Some(values) = ahead {
                conn.store().read_ahead(chunk, budget, values)?;
            }
            for id in chunk {
                conn.begin_read()?;
                let planned = job
                    .plan(conn, id)
                    .and_then(|p| active_run_refusal(job, conn.store(), id, p));
                conn.end_read()?;
                sink(match planned? {
                    Planned::Done(report) => report,
                    Planned::Write { report, .. } => job.would(report),
                })?;
                progress.inc(1);
            }
        }
        Ok(())
    })();
    // Nothing read ahead outlives the dry run, whether it finished or failed (a
    // long-running caller reuses the connection).
    let forgotten = forget_ahead(conn.store(), ahead);
    planned?;
    forgotten?;
    Ok(())
}

/// Bytes of rows a batch read ahead holds, about.
pub(super) const AHEAD_BYTES: usize = 16 << 20;

/// How `job` reads `count` threads ahead (`Some(values)`, see
/// [`ThreadPlan::reads_whole_threads`]), a batch holding `budget` bytes: only when it reads
/// whole threads and there is more than one.
pub(super) fn ahead_of<C: ?Sized, J: ThreadPlan<C>>(
    job: &J,
    count: usize,
    budget: usize,
) -> Option<bool> {
    job.reads_whole_threads()
        .filter(|_| count > 1 && budget > 0)
}

/// Forgets what was read ahead, when anything was.
pub(super) fn forget_ahead(store: &dyn Store, ahead: Option<bool>) -> Result<(), StoreError> {
    match ahead {
        Some(_) => store.read_ahead(&[], 0, false),
        None => Ok(()),
    }
}
