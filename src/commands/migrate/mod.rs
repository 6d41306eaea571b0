//! `migrate delta-to-full`: the plan — which threads a conversion rewrites, which it must
//! refuse and why (`docs/replay-and-forks.md`), the bytes before and after — and the
//! conversion itself, a job of the write engine ([`dfck_core::write`]): per thread one
//! transaction that locks the thread, plans under the lock, rewrites every delta checkpoint
//! to full form, verifies and commits, or rolls back and refuses.
//!
//! Submodules: `plan` (what a thread needs), `apply` (the engine job and the backends' row
//! changes), `checks` (the postcondition verified before commit), `state` (every checkpoint's
//! state, compared before and after the rewrite).

mod apply;
mod checks;
mod plan;
pub(crate) mod state;
pub mod to_delta;

pub use apply::{ConvertStore, Converted, DeltaToFull, Work};
pub use plan::plan_thread;
/// Every checkpoint's state fingerprint, shared with the other write commands' checks.
pub(crate) use state::{StateFingerprints, compare as compare_states, fingerprints};

use crate::commands::wiring::{CountsThreads, Sink, WriteRequest};
use dfck_core::error::Error;
use dfck_core::materialize::Reducer;
use dfck_core::model::thread::LoadedThread;
use serde::Serialize;

/// Options of a migration plan.
#[derive(Debug, Clone, Default)]
pub struct MigrateOptions {
    /// Convert contaminated or ambiguous delta forks to exactly what delta mode shows.
    pub accept_delta_view: bool,
    /// The messages reducer replay uses; `None` (`--reducer auto`): DeerFlow's on threads
    /// that carry DeerFlow's mode marker, LangGraph's otherwise.
    pub reducer: Option<Reducer>,
}

impl MigrateOptions {
    /// The reducer for one loaded namespace.
    pub fn reducer_for(&self, t: &LoadedThread) -> Reducer {
        self.reducer.unwrap_or_else(|| {
            if t.nodes.iter().any(|n| n.facts.marker.is_some()) {
                Reducer::Deerflow
            } else {
                Reducer::Langgraph
            }
        })
    }
}

/// What happens (or happened) to one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanStatus {
    /// Converted (would be, in a dry run).
    Converted,
    /// Refused: left untouched, with a reason.
    Refused,
    /// Nothing to do (no delta checkpoint).
    Skipped,
}

impl PlanStatus {
    /// The status as reports show it.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Converted => "converted",
            PlanStatus::Refused => "refused",
            PlanStatus::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for PlanStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thread of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadPlan {
    /// Thread id.
    pub thread_id: String,
    /// Converted (would be, in a dry run), refused or skipped (no delta checkpoint).
    pub status: PlanStatus,
    /// Checkpoints that would be rewritten.
    pub checkpoints_rewritten: usize,
    /// Why the thread is refused or skipped.
    pub reason: Option<String>,
    /// Bytes of the thread's checkpoints now.
    pub bytes_before: u64,
    /// Estimated bytes after conversion (every versioned checkpoint holds its full list).
    pub bytes_after: u64,
    /// Checkpoints whose delta view includes a sibling branch's writes (converted as
    /// delta mode shows them, with `--accept-delta-view`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accepted_delta_view: Vec<String>,
}

/// `dfck migrate delta-to-full` (plan).
#[derive(Debug, Clone, Serialize)]
pub struct MigrateReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// Per thread.
    pub threads: Vec<ThreadPlan>,
    /// Threads converted (would be, in a dry run).
    pub converted: usize,
    /// Threads refused.
    pub refused: usize,
    /// Threads without delta checkpoints.
    pub skipped: usize,
}

impl MigrateReport {
    /// A report of no threads, its totals counted in by [`CountsThreads::count`].
    fn empty(dry_run: bool) -> Self {
        MigrateReport {
            dry_run,
            threads: Vec::new(),
            converted: 0,
            refused: 0,
            skipped: 0,
        }
    }
}

impl CountsThreads<ThreadPlan> for MigrateReport {
    fn count(&mut self, p: &ThreadPlan) {
        match p.status {
            PlanStatus::Converted => self.converted += 1,
            PlanStatus::Refused => self.refused += 1,
            PlanStatus::Skipped => self.skipped += 1,
        }
    }
}

/// `dfck migrate delta-to-full`: the dry run, or with `req.apply` the conversion (see
/// [`WriteRequest`]).
pub fn run(req: &WriteRequest<'_>, opts: &MigrateOptions) -> Result<MigrateReport, Error> {
    let mut threads = Vec::new();
    let mut report = run_each(req, opts, &mut |p| {
        threads.push(p);
        Ok(())
    })?;
    report.threads = threads;
    Ok(report)
}

/// [`run`], each thread's report handed to `sink` in thread order as it is done, so that
/// the caller holds none: the report returned has the totals and no threads.
pub fn run_each(
    req: &WriteRequest<'_>,
    opts: &MigrateOptions,
    sink: Sink<'_, ThreadPlan>,
) -> Result<MigrateReport, Error> {
    req.run_counted(
        "converting threads",
        &DeltaToFull { opts },
        MigrateReport::empty(!req.apply),
        sink,
    )
}
