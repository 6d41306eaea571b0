//! The write engine: the per-thread transaction of every store-changing command, on every
//! backend (small threads share a transaction, each in a savepoint: [`group`]). For each
//! thread it locks ([`WriteStore::lock_thread`]), plans under the lock,
//! checks free space, applies, verifies before commit and commits — or rolls back and
//! refuses, leaving the thread untouched. It also owns `--jobs` (threads over N connections,
//! [`crate::pool`]), `--backup`, progress and the test-only failpoints ([`failpoint`]).
//! The contract is described in `docs/write-engine.md`.
//!
//! A new command plugs in by implementing [`ThreadJob`] for the connection type it writes
//! through (any [`WriteStore`]; a command reading another store, like a copy, uses a
//! connection type holding both the source and the target): [`ThreadJob::plan`] reads
//! the thread under the lock and says what to write ([`Planned`]), [`ThreadJob::apply`]
//! changes the rows (calling [`ApplyContext::row_written`] after each), and
//! [`ThreadJob::verify`] checks the postcondition. Then call [`run`].

mod dry_ahead;
mod dry_run;
mod group;
mod held_plans;
mod job;
mod limits;
pub mod preamble;
mod select;
mod together;

pub use dry_run::{dry_run, dry_run_each, dry_run_jobs, plan_each, plan_each_into};
pub use job::{ApplyContext, Planned, Refusal, ThreadJob, ThreadPlan};
pub use select::Selection;

use crate::error::{Error, StoreError};
use crate::failpoint::Failpoints;
use crate::progress::Progress;
use crate::store::{BackupPlan, ThreadLock, WalLeft, WriteStore};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Where a run writes.
pub struct Connections<'a, C> {
    /// The caller's connection: the backup, the thread list and the first worker use it.
    pub first: &'a C,
    /// Opens one more connection for each extra job (`--jobs`).
    pub open: &'a (dyn Fn() -> Result<C, StoreError> + Sync),
    /// A spare connection for background work while the batch runs
    /// ([`WriteStore::background_step`]), when the backend has any.
    pub spare: Option<C>,
}

/// Something the user should hear about, as it happens.
#[derive(Debug, Clone, Copy)]
pub enum WriteEvent<'a> {
    /// The `--backup` copy is written.
    BackupWritten(&'a Path),
    /// The run is done, but a reader kept the write-ahead log from being checkpointed and
    /// truncated: what was committed is durable in it, and it stays this large until the
    /// reader is gone.
    WalLeft(WalLeft),
    /// A committed thread's cached history could not be purged (thread, why): DeerFlow may
    /// serve the old history until the keys expire.
    CacheNotPurged(&'a str, &'a str),
}

/// How a run goes.
pub struct RunOptions<'a> {
    /// Threads written at once, each over its own connection.
    pub jobs: usize,
    /// Write a consistent copy of the store here first.
    pub backup: Option<&'a Path>,
    /// The progress phase's message, e.g. "converting threads".
    pub phase: &'a str,
    /// Progress: one unit per finished thread.
    pub progress: &'a (dyn Progress + Sync),
    /// Receives [`WriteEvent`]s.
    pub events: &'a (dyn Fn(WriteEvent<'_>) + Sync),
    /// DeerFlow's history cache: a committed thread's keys are purged (DeerFlow assumes
    /// checkpoints never change).
    pub cache: Option<&'a (dyn ThreadCache + Sync)>,
    /// The threads given are worked on as they are, without the check that each has
    /// checkpoints (`dfck delete`: DeerFlow may list a thread that has none).
    pub exact_threads: bool,
}

/// Where a committed thread's cached history is purged (DeerFlow's Redis cache).
pub trait ThreadCache {
    /// Removes every cached key of `thread_id`; how many.
    fn purge(&self, thread_id: &str) -> Result<u64, String>;
}

/// Runs `job` on the given threads (every thread of the store when none are given): one
/// transaction per thread, or several threads to a transaction each in a savepoint
/// ([`group`]) when the job and the store allow it, `opts.jobs` at a time. Reports come back in thread order. An
/// `Err` (a store failure, not a refusal) stops the run; committed threads stay committed.
pub fn run<C, J>(
    job: &J,
    conns: Connections<'_, C>,
    threads: &[String],
    opts: &RunOptions<'_>,
) -> Result<Vec<J::Report>, Error>
where
    C: WriteStore + Send,
    J: ThreadJob<C>,
    J::Report: Send,
{
    collect(|sink| run_each(job, conns, threads, opts, sink))
}

/// The reports a streaming run (`run_each`, `dry_run_each`) hands its sink, collected.
pub fn collect<R, E>(
    run: impl FnOnce(&mut (dyn FnMut(R) -> Result<(), E> + Send)) -> Result<(), E>,
) -> Result<Vec<R>, E>
where
    R: Send,
{
    let mut out = Vec::new();
    run(&mut |r| {
        out.push(r);
        Ok(())
    })?;
    Ok(out)
}

/// [`run`] handing each thread's report to `sink` in thread order as soon as it and every
/// earlier one are done, so that a caller streaming them holds none (a sink error stops
/// the run like a store failure).
pub fn run_each<C, J>(
    job: &J,
    conns: Connections<'_, C>,
    threads: &[String],
    opts: &RunOptions<'_>,
    sink: &mut (dyn FnMut(J::Report) -> Result<(), Error> + Send),
) -> Result<(), Error>
where
    C: WriteStore + Send,
    J: ThreadJob<C>,
    J::Report: Send,
{
    let first = conns.first;
    let cx = ApplyContext::new(job.name());
    let selection = Selection::of(first, threads, opts.exact_threads)?;
    if let Some(dest) = opts.backup {
        let plan = first.backup_plan(dest)?;
        if let Some(reason) = backup_space(job, first, &selection, &plan, &cx)? {
            return selection.each(first, &mut |ids| {
                ids.iter()
                    .try_for_each(|id| sink(job.refuse(job.untouched(id), Refusal(reason.clone()))))
            });
        }
        backup(first, dest, &cx.failpoints)?;
        (opts.events)(WriteEvent::BackupWritten(dest));
    }
    let total = selection.total(first, opts.progress)?;
    opts.progress.start(opts.phase, total);
    let tuning = first.begin_batch(conns.spare.is_some());
    let done = AtomicBool::new(false);
    let open = || (conns.open)().map_err(Error::from);
    let result = std::thread::scope(|scope| {
        if let Some(spare) = conns.spare.filter(|_| tuning.background) {
            let done = &done;
            scope.spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    spare.background_step();
                    std::thread::park_timeout(std::time::Duration::from_millis(20));
                }
            });
        }
        // A page of threads at a time, each over the worker pool.
        let r = selection.each(first, &mut |ids| {
            if job.groups() && first.groups_threads() {
                // Each worker takes a share of at most a group's threads at a time.
                let share = ids
                    .len()
                    .div_ceil(opts.jobs.max(1))
                    .clamp(1, limits::most_threads(job, first, &cx, false));
                let shares: Vec<&[String]> = ids.chunks(share).collect();
                crate::pool::run_ordered(
                    shares.len(),
                    opts.jobs,
                    first,
                    &open,
                    &|conn: &C, i| group::run_groups(job, conn, shares[i], &cx, opts),
                    &mut |_, reports| reports.into_iter().try_for_each(&mut *sink),
                )
            } else {
                crate::pool::run_ordered(
                    ids.len(),
                    opts.jobs,
                    first,
                    &open,
                    &|conn: &C, i| {
                        let report = run_thread(job, conn, &ids[i], &cx, opts)?;
                        conn.between_threads();
                        opts.progress.inc(1);
                        Ok(report)
                    },
                    &mut |_, report| sink(report),
                )
            }
        });
        done.store(true, Ordering::SeqCst);
        r
    });
    if let Some(left) = first.end_batch(tuning)? {
        (opts.events)(WriteEvent::WalLeft(left));
    }
    result?;
    opts.progress.finish();
    Ok(())
}

/// Why a thread DeerFlow is running is refused (see [`ThreadPlan::guards_active_runs`]).
pub const ACTIVE_RUN: &str = "DeerFlow's runs table has a pending or running run for this thread: stop DeerFlow (or let the run finish) first";

/// The one check every command shares after its plan: a write planned on a thread
/// DeerFlow is running (a `pending` or `running` row of its `runs` table) is refused.
fn active_run_refusal<C, J, W>(
    job: &J,
    store: &dyn crate::store::Store,
    thread_id: &str,
    planned: Planned<J::Report, W>,
) -> Result<Planned<J::Report, W>, Error>
where
    C: ?Sized,
    J: ThreadPlan<C>,
{
    match planned {
        Planned::Write { report, .. }
            if job.guards_active_runs() && store.active_run(thread_id)? =>
        {
            Ok(Planned::Done(
                job.refuse(report, Refusal(ACTIVE_RUN.into())),
            ))
        }
        other => Ok(other),
    }
}

/// Free space kept in reserve by the guard, so that a run never leaves the disk full.
const SPACE_RESERVE: u64 = 4 << 20;

/// The free space one thread's transaction needs: its rows in the write-ahead log (with a
/// quarter more for page and frame overhead), the growth of the file once the log is
/// copied into it, and a reserve.
fn space_needed(growth: u64, written: u64) -> u64 {
    let log = written.saturating_add(written / 4);
    log.saturating_add(growth).saturating_add(SPACE_RESERVE)
}

/// Checks, before writing either, that the disk holds the backup and the work: the work is
/// sized by planning every thread in a read transaction (no lock, nothing written): the
/// growth of all of them and the largest transaction's log. `Some(reason)` when it does not
/// fit: the run then refuses every thread and writes nothing.
fn backup_space<C, J>(
    job: &J,
    conn: &C,
    selection: &Selection,
    plan: &BackupPlan,
    cx: &ApplyContext,
) -> Result<Option<String>, Error>
where
    C: WriteStore,
    J: ThreadJob<C>,
{
    let (mut growth, mut written) = (0u64, 0u64);
    selection.each(conn, &mut |ids| {
        for id in ids {
            conn.begin_read()?;
            let planned = job.plan(conn, id);
            conn.end_read()?;
            if let Planned::Write {
                growth: g,
                written: w,
                ..
            } = planned?
            {
                growth = growth.saturating_add(g);
                written = written.max(w);
            }
        }
        Ok(())
    })?;
    let work = space_needed(growth, written);
    let mib = |b: u64| b.div_ceil(1 << 20);
    let store_free = cx.failpoints.free_space(conn.free_space());
    let backup_free = cx.failpoints.free_space(plan.free);
    let short = |need: u64, free: Option<u64>| free.is_some_and(|f| need > f);
    let reason = if plan.shares_store_space {
        let need = plan.bytes.saturating_add(work);
        short(need, store_free).then(|| {
            format!(
                "not enough disk space for the backup and the work: the backup needs about {} MiB and {} about {} MiB, {} MiB are free; back up to another file system or free space first",
                mib(plan.bytes),
                job.verb(),
                mib(work),
                store_free.map_or(0, |f| f >> 20)
            )
        })
    } else if short(plan.bytes.saturating_add(SPACE_RESERVE), backup_free) {
        Some(format!(
            "not enough disk space for the backup: it needs about {} MiB, {} MiB are free where it goes",
            mib(plan.bytes.saturating_add(SPACE_RESERVE)),
            backup_free.map_or(0, |f| f >> 20)
        ))
    } else {
        short(work, store_free).then(|| {
            format!(
                "not enough disk space: {} needs about {} MiB, {} MiB are free; nothing was backed up or written",
                job.verb(),
                mib(work),
                store_free.map_or(0, |f| f >> 20)
            )
        })
    };
    Ok(reason)
}

/// `--backup`: a consistent copy written under a temporary name, made durable, then renamed
/// into place; a killed or failed run leaves no file at `dest` (a re-run replaces the
/// leftover temporary file).
fn backup<C: WriteStore>(conn: &C, dest: &Path, failpoints: &Failpoints) -> Result<(), Error> {
    let io = |e: std::io::Error| {
        Error::from(crate::error::StoreError::Target(format!(
            "writing the backup {}: {e}",
            dest.display()
        )))
    };
    let partial = crate::store::files::partial_backup_path(dest);
    match std::fs::remove_file(&partial) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    if let Err(e) = conn.backup_to(&partial) {
        let _ = std::fs::remove_file(&partial);
        return Err(e.into());
    }
    failpoints.after_backup();
    crate::store::files::sync_new_file(&partial).map_err(io)?;
    std::fs::rename(&partial, dest).map_err(io)?;
    crate::store::files::sync_dir(dest.parent().unwrap_or(Path::new(".")));
    Ok(())
}

/// One thread's transaction: lock, plan, guard, apply, verify, commit — or roll back.
fn run_thread<C, J>(
    job: &J,
    conn: &C,
    thread_id: &str,
    cx: &ApplyContext,
    opts: &RunOptions<'_>,
) -> Result<J::Report, Error>
where
    C: WriteStore,
    J: ThreadJob<C>,
{
    if let Err(reason) = job.before(conn, thread_id) {
        return Ok(job.refuse(job.untouched(thread_id), reason));
    }
    let (report, committed) = thread_transaction(job, conn, thread_id, cx)?;
    finish_thread(job, conn, thread_id, report, committed, opts)
}

/// After a thread's transaction ended (`committed` or not): its cached history is purged
/// when it committed, then the job's [`ThreadJob::after`] runs.
fn finish_thread<C, J>(
    job: &J,
    conn: &C,
    thread_id: &str,
    report: J::Report,
    committed: bool,
    opts: &RunOptions<'_>,
) -> Result<J::Report, Error>
where
    C: WriteStore,
    J: ThreadJob<C>,
{
    let keys = match opts.cache.filter(|_| committed) {
        Some(cache) => match cache.purge(thread_id) {
            Ok(n) => Some(n),
            Err(why) => {
                (opts.events)(WriteEvent::CacheNotPurged(thread_id, &why));
                None
            }
        },
        None => None,
    };
    job.after(conn, thread_id, report, committed, keys)
}

/// The thread's transaction: lock, plan, guard, apply, verify, commit — or roll back. The
/// report, and whether it committed.
fn thread_transaction<C, J>(
    job: &J,
    conn: &C,
    thread_id: &str,
    cx: &ApplyContext,
) -> Result<(J::Report, bool), Error>
where
    C: WriteStore,
    J: ThreadJob<C>,
{
    let lock = conn.lock_thread(thread_id)?;
    if let Some(refusal) = lock_refusal(lock) {
        return Ok((job.refuse(job.untouched(thread_id), refusal), false));
    }
    match work_locked(job, conn, thread_id, cx, Sizes::default(), None) {
        Ok(Locked::Keep(report, expect, _)) => {
            conn.commit()?;
            Ok((job.committed(report, expect), true))
        }
        Ok(Locked::Drop(report)) => {
            conn.rollback()?;
            Ok((report, false))
        }
        Ok(Locked::NoRoom(report, reason)) => {
            conn.rollback()?;
            Ok((job.refuse(report, reason), false))
        }
        Err(e) => {
            conn.rollback()?;
            Err(e)
        }
    }
}

/// Why a thread whose lock was not had is refused; `None` when it is held.
fn lock_refusal(lock: ThreadLock) -> Option<Refusal> {
    match lock {
        ThreadLock::Held => None,
        ThreadLock::Busy(holder) => Some(busy_refusal(holder.as_deref())),
        ThreadLock::Contended(reason) => Some(Refusal(reason)),
    }
}

/// Why a thread another dfck holds is refused.
fn busy_refusal(holder: Option<&str>) -> Refusal {
    Refusal(format!(
        "{} holds this thread's lock; re-run when it is done",
        holder.unwrap_or("another session")
    ))
}

/// What the rows of an open transaction amount to, for the free-space guard.
#[derive(Debug, Clone, Copy, Default)]
struct Sizes {
    /// The store's growth.
    growth: u64,
    /// The rows written: the WAL (or the transaction log) holds them until the commit.
    written: u64,
}

impl Sizes {
    fn plus(self, growth: u64, written: u64) -> Sizes {
        Sizes {
            growth: self.growth.saturating_add(growth),
            written: self.written.saturating_add(written),
        }
    }
}

/// What one locked thread came to; the caller ends its transaction (or savepoint). `X` is
/// what apply returned, or (planned, not yet applied: [`plan_locked`]) the work to apply.
enum Locked<R, X> {
    /// Applied and verified (or planned to write): keep it, with what its rows add to the
    /// transaction's.
    Keep(R, X, Sizes),
    /// Nothing to keep (skipped, or refused with the report saying why): roll back.
    Drop(R),
    /// It does not fit the free space beside what the transaction already holds: roll
    /// back; alone, it is refused for this reason.
    NoRoom(R, Refusal),
}

/// Plans, guards, applies and verifies one thread whose locks are held, inside a
/// transaction that already holds `before`. `Err` (a store failure) leaves the rollback to
/// the caller.
fn work_locked<C, J>(
    job: &J,
    conn: &C,
    thread_id: &str,
    cx: &ApplyContext,
    before: Sizes,
    made: Option<Planned<J::Report, J::Work>>,
) -> Result<Locked<J::Report, J::Expect>, Error>
where
    C: WriteStore,
    J: ThreadJob<C>,
{
    Ok(match plan_locked(job, conn, thread_id, cx, before, made)? {
        Locked::Keep(report, work, after) => {
            apply_locked(job, conn, thread_id, cx, report, work, after)
        }
        Locked::Drop(report) => Locked::Drop(report),
        Locked::NoRoom(report, refusal) => Locked::NoRoom(report, refusal),
    })
}

/// Plans one thread whose locks are held (or takes the plan `made` under them from rows read
/// under them: `held_plans`) and guards its write: the active-run refusal and the free
/// space beside the `before` the transaction already holds.
fn plan_locked<C, J>(
    job: &J,
    conn: &C,
    thread_id: &str,
    cx: &ApplyContext,
    before: Sizes,
    made: Option<Planned<J::Report, J::Work>>,
) -> Result<Locked<J::Report, J::Work>, Error>
where
    C: WriteStore,
    J: ThreadJob<C>,
{
    let planned = match made {
        Some(planned) => Ok(planned),
        None => job.plan(conn, thread_id),
    };
    // What was read ahead of the thread is spent: from now on it changes.
    conn.store().forget_ahead(thread_id);
    let planned = planned.and_then(|p| active_run_refusal(job, conn.store(), thread_id, p))?;
    let (report, work, growth, written) = match planned {
        Planned::Write {
            report,
            work,
            growth,
            written,
        } => (report, work, growth, written),
        Planned::Done(report) => return Ok(Locked::Drop(report)),
    };
    // Test builds: the `hold:PATH` failpoint, once per run, inside the first transaction
    // that writes (every connection open, the thread's locks held).
    if !cx.held.swap(true, Ordering::SeqCst) {
        cx.failpoints.hold();
    }
    // The WAL (or the transaction log) holds every row the transaction writes before the
    // file grows: refuse rather than fill the disk.
    let after = before.plus(growth, written);
    if let Some(free) = cx.failpoints.free_space(conn.free_space()) {
        let need = space_needed(after.growth, after.written);
        if need > free {
            let reason = format!(
                "not enough disk space: {} needs about {} MiB (the rewritten rows in the WAL, the growth of the file and a reserve) and {} MiB are free",
                job.verb(),
                space_needed(growth, written).div_ceil(1 << 20),
                free / (1 << 20)
            );
            return Ok(Locked::NoRoom(report, Refusal(reason)));
        }
    }
    Ok(Locked::Keep(report, work, after))
}

/// Applies and verifies one planned thread; the transaction then holds `after`.
fn apply_locked<C, J>(
    job: &J,
    conn: &C,
    thread_id: &str,
    cx: &ApplyContext,
    report: J::Report,
    work: J::Work,
    after: Sizes,
) -> Locked<J::Report, J::Expect>
where
    C: WriteStore,
    J: ThreadJob<C>,
{
    let applied = job
        .apply(conn, thread_id, work, cx)
        .and_then(|expect| job.verify(conn, thread_id, &expect).map(|()| expect));
    match applied {
        Ok(expect) => Locked::Keep(report, expect, after),
        Err(reason) => Locked::Drop(job.refuse(report, reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;
    use crate::store::Store;
    use crate::store::sqlite::SqliteStore;

    /// Rewrites the head's metadata, then fails verification when `fail` is set.
    struct Touch {
        fail: bool,
    }

    const META: &[u8] = br#"{"touched": true}"#;

    impl ThreadPlan<SqliteStore> for Touch {
        type Report = (String, Option<String>);
        type Work = String;
        fn name(&self) -> &'static str {
            "touch"
        }
        fn verb(&self) -> &'static str {
            "touching"
        }
        fn untouched(&self, thread_id: &str) -> Self::Report {
            (thread_id.to_owned(), None)
        }
        fn refuse(&self, report: Self::Report, reason: Refusal) -> Self::Report {
            (report.0, Some(reason.0))
        }
        fn plan(
            &self,
            conn: &SqliteStore,
            thread_id: &str,
        ) -> Result<Planned<Self::Report, String>, Error> {
            let head = conn.head_id(thread_id, "")?.unwrap_or_default();
            Ok(Planned::Write {
                report: self.untouched(thread_id),
                work: head,
                growth: 0,
                written: 0,
            })
        }
    }

    impl ThreadJob<SqliteStore> for Touch {
        type Expect = ();

        fn apply(
            &self,
            conn: &SqliteStore,
            thread_id: &str,
            head: String,
            cx: &ApplyContext,
        ) -> Result<(), Refusal> {
            let row = conn.checkpoint(thread_id, "", &head).unwrap().unwrap();
            let crate::store::CheckpointBody::Serialized { bytes, .. } = &row.body else {
                return Err(Refusal("not sqlite".into()));
            };
            conn.update_checkpoint(thread_id, "", &head, bytes, META)
                .map_err(|e| Refusal(e.to_string()))?;
            cx.row_written();
            Ok(())
        }
        fn verify(&self, _: &SqliteStore, _: &str, _: &()) -> Result<(), Refusal> {
            if self.fail {
                Err(Refusal("postcondition fails".into()))
            } else {
                Ok(())
            }
        }
        fn committed(&self, report: Self::Report, _: ()) -> Self::Report {
            report
        }
    }

    fn head_meta(store: &SqliteStore, thread: &str) -> Vec<u8> {
        let head = store.head_id(thread, "").unwrap().unwrap();
        store.metadata(thread, "", &head).unwrap().unwrap()
    }

    #[test]
    fn a_failed_postcondition_rolls_back_and_refuses_and_a_passing_one_commits() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        std::fs::copy(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/sqlite/delta_k3.db"),
            &db,
        )
        .unwrap();
        let store = SqliteStore::open_read_write(&db).unwrap();
        let before = head_meta(&store, "t-linear");
        let open = || SqliteStore::open_read_write(&db);
        let opts = RunOptions {
            jobs: 1,
            cache: None,
            exact_threads: false,
            backup: None,
            phase: "touching threads",
            progress: &NoProgress,
            events: &|_| {},
        };
        let conns = || Connections {
            first: &store,
            open: &open,
            spare: None,
        };
        let threads = ["t-linear".to_string(), "t-fork".to_string()];
        let out = run(&Touch { fail: true }, conns(), &threads, &opts).unwrap();
        assert_eq!(out[0].0, "t-linear");
        assert_eq!(out[1].1.as_deref(), Some("postcondition fails"));
        assert_eq!(head_meta(&store, "t-linear"), before, "rolled back");

        let out = run(&Touch { fail: false }, conns(), &threads, &opts).unwrap();
        assert_eq!(out[0].1, None);
        assert_eq!(head_meta(&store, "t-linear"), META, "committed");
    }
}
