//! What a write command supplies to the engine: its plan of one thread ([`ThreadPlan`]), the
//! row changes and their postcondition ([`ThreadJob`]), and what the engine hands back
//! ([`Planned`], [`Refusal`], [`ApplyContext`]).

use crate::error::Error;
use crate::failpoint::Failpoints;
use crate::store::ReadOnly;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Why a thread is left untouched: the reason a report shows. Not an error — the run goes
/// on with the next thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What planning one thread (under its lock) decided.
#[derive(Debug)]
pub enum Planned<R, W> {
    /// Nothing to write (skipped, or refused by the plan): the transaction rolls back and
    /// the report stands as it is.
    Done(R),
    /// Write `work`; `written` and `growth` size it for the free-space guard.
    Write {
        /// The thread's report so far.
        report: R,
        /// What [`ThreadJob::apply`] needs (e.g. the rows the plan loaded).
        work: W,
        /// Estimated growth of the store in bytes (0 when the store shrinks).
        growth: u64,
        /// Estimated bytes of the rows the transaction writes: the write-ahead log holds
        /// all of them before they reach the file.
        written: u64,
    },
}

/// What one store-changing command decides about a thread, over connections of type `C`:
/// the half of a command a dry run needs ([`super::dry_run`]), planned inside a read
/// transaction (or, before a write, under the thread's lock).
pub trait ThreadPlan<C: ?Sized>: Sync {
    /// The per-thread line of the command's report.
    type Report: Send;
    /// What the plan hands to apply.
    type Work: Send;

    /// The command's name: in the busy-lock refusal and the crash failpoint
    /// (`DFCK_FAILPOINT=<name>-abort-after:N`).
    fn name(&self) -> &'static str;
    /// What the command does, as in "not enough disk space: converting needs …".
    fn verb(&self) -> &'static str;
    /// The report of a thread nothing was done to (before any plan).
    fn untouched(&self, thread_id: &str) -> Self::Report;
    /// `report` turned into a refusal for `reason`.
    fn refuse(&self, report: Self::Report, reason: Refusal) -> Self::Report;
    /// Reads the thread and decides. `Err` aborts the whole run (the transaction is rolled
    /// back first); refusals are `Planned::Done`.
    fn plan(&self, conn: &C, thread_id: &str) -> Result<Planned<Self::Report, Self::Work>, Error>;
    /// Whether a planned write is refused while DeerFlow runs the thread (a `pending` or
    /// `running` row of its `runs` table): the engine checks it, once for every command
    /// that says so, after the plan (a thread with nothing to do is never refused for it).
    fn guards_active_runs(&self) -> bool {
        true
    }
    /// A dry run's report of a thread the command would write (by default the planned
    /// report as it is).
    fn would(&self, report: Self::Report) -> Self::Report {
        report
    }
    /// How [`ThreadPlan::plan`] reads a thread, for a dry run to read threads ahead in
    /// batches ([`crate::store::Store::read_ahead`]): `Some(values)` when it reads every
    /// namespace's checkpoints (with every value, or as a thread scan gives them) and
    /// writes; `None` (the default) when it reads otherwise.
    fn reads_whole_threads(&self) -> Option<bool> {
        None
    }
}

/// [`ThreadJob::plans_held`] and [`ThreadJob::plan_held`] for a job whose [`ThreadPlan`] is
/// implemented for every [`crate::store::PlanStore`]: its plan, over the rows held. Takes the
/// job's report and work types.
#[macro_export]
macro_rules! plans_held {
    ($report:ty, $work:ty) => {
        fn plans_held(&self) -> bool {
            true
        }

        fn plan_held(
            &self,
            held: &$crate::store::ReadOnly<'_>,
            thread_id: &str,
        ) -> Result<$crate::write::Planned<$report, $work>, $crate::error::Error> {
            $crate::write::ThreadPlan::<$crate::store::ReadOnly<'_>>::plan(self, held, thread_id)
        }
    };
}

/// One store-changing command, per thread, over connections of type `C`: its plan
/// ([`ThreadPlan`]), then the row changes and their postcondition.
pub trait ThreadJob<C: ?Sized>: ThreadPlan<C> {
    /// What apply hands to verify: the postcondition to check.
    type Expect;

    /// Changes the rows inside the transaction; `Err` rolls back and refuses.
    fn apply(
        &self,
        conn: &C,
        thread_id: &str,
        work: Self::Work,
        cx: &ApplyContext,
    ) -> Result<Self::Expect, Refusal>;
    /// Checks the postcondition by reading back inside the transaction; `Err` rolls back
    /// and refuses.
    fn verify(&self, conn: &C, thread_id: &str, expect: &Self::Expect) -> Result<(), Refusal>;
    /// The report of a committed thread.
    fn committed(&self, report: Self::Report, expect: Self::Expect) -> Self::Report;

    /// Whether [`ThreadJob::verify`] of `expect` reads nothing back from the store (it checks
    /// what apply returned and what the plan held): a group written together then skips
    /// its read-back when every thread's does. `false` by default.
    fn verifies_from_memory(&self, _expect: &Self::Expect) -> bool {
        false
    }

    /// Whether the job writes threads together where the store can
    /// ([`ThreadJob::together`]); its groups then take more threads. `false` by default.
    fn writes_together(&self) -> bool {
        false
    }

    /// Whether `work` may be applied together with other threads' work of the group
    /// ([`ThreadJob::apply_together`]): no savepoint of its own, and the group's changes
    /// made in a few statements for all of them. `Some(bytes)`: it may, holding about that
    /// many bytes until it is applied; `None` (the default): it is worked on its own.
    fn together(&self, _work: &Self::Work) -> Option<usize> {
        None
    }

    /// Applies the work of several threads at once (each `together`), calling
    /// [`ApplyContext::row_written`] after each change; what each thread's verify checks,
    /// in order. `Err` (the store refused, or a thread's changes are not what the plan
    /// said) rolls the whole group back, and the engine works its threads one at a time.
    fn apply_together(
        &self,
        _conn: &C,
        _items: Vec<(&str, Self::Work)>,
        _cx: &ApplyContext,
    ) -> Result<Vec<Self::Expect>, Refusal> {
        Err(Refusal("this command writes threads one at a time".into()))
    }

    /// Whether a group's threads may be planned by [`ThreadJob::plan_held`] on a second
    /// thread while the connection writes the threads before them (`write/held_plans.rs`).
    /// `false` by default; [`plans_held!`](crate::plans_held) says `true` and plans.
    fn plans_held(&self) -> bool {
        false
    }

    /// How many plans made by [`ThreadJob::plan_held`] may wait for the connection
    /// (`write/held_plans.rs`): 16 by default; a job whose plans hold little may let the
    /// second thread plan a whole group ahead.
    fn plans_waiting(&self) -> usize {
        16
    }

    /// [`ThreadPlan::plan`] made from rows held in memory (`held`: the group's threads read
    /// whole under its locks, as [`ThreadPlan::reads_whole_threads`] says). A job that
    /// [`ThreadJob::plans_held`] implements it as its plan over `held` (which may also do
    /// there what the plan's verification will need, as `prune` checks what its deletions
    /// leave); an error ends the run, as the plan's does.
    fn plan_held(
        &self,
        _held: &ReadOnly<'_>,
        _thread_id: &str,
    ) -> Result<Planned<Self::Report, Self::Work>, Error> {
        Err(Error::Io(std::io::Error::other(
            "this command plans on the connection only",
        )))
    }

    /// Whether the engine may write several of this job's threads in one transaction,
    /// each in a savepoint of its own. A job that acts outside the thread's transaction
    /// ([`ThreadJob::before`], [`ThreadJob::after`]) says `false`.
    fn groups(&self) -> bool {
        true
    }

    /// Before the thread's transaction, outside it (e.g. DeerFlow's thread-operation
    /// reservation, committed on its own): `Err` refuses the thread, untouched.
    fn before(&self, _conn: &C, _thread_id: &str) -> Result<(), Refusal> {
        Ok(())
    }

    /// After the thread's transaction ended, outside it — `committed` or not — with the keys
    /// the cache purge removed (`None`: no cache to purge): the steps that are not rows (a
    /// thread's files) and releasing what [`ThreadJob::before`] took.
    fn after(
        &self,
        _conn: &C,
        _thread_id: &str,
        report: Self::Report,
        _committed: bool,
        _cache_keys: Option<u64>,
    ) -> Result<Self::Report, Error> {
        Ok(report)
    }
}

/// Shared state of one run that apply steps report to.
#[derive(Debug)]
pub struct ApplyContext {
    rows: AtomicUsize,
    pub(crate) failpoints: Failpoints,
    pub(crate) held: AtomicBool,
}

impl ApplyContext {
    pub(crate) fn new(command: &str) -> Self {
        ApplyContext {
            rows: AtomicUsize::new(0),
            failpoints: Failpoints::from_env(command),
            held: AtomicBool::new(false),
        }
    }

    /// A context without failpoints, for driving a job's apply and verify steps outside
    /// [`run`] (a command's unit tests).
    pub fn without_failpoints() -> Self {
        ApplyContext {
            rows: AtomicUsize::new(0),
            failpoints: Failpoints::default(),
            held: AtomicBool::new(false),
        }
    }

    /// Call after each row change: counts it over the whole run, and (test builds only)
    /// aborts the process at the crash failpoint.
    pub fn row_written(&self) {
        let done = self.rows.fetch_add(1, Ordering::SeqCst) + 1;
        self.failpoints.after_row(done);
    }
}
