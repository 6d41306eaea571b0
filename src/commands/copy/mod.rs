//! `dfck copy`: moves threads from one store to another — SQLite to PostgreSQL and back, or
//! within a backend — rows laid out in the target's own format, one verified transaction
//! per thread through the write engine ([`dfck_core::write`]). docs/copy.md describes it.
//!
//! Submodules: `convert` (laying a thread's rows out for the target), `stream` (reading a
//! thread from the source: held whole, or a big one streamed row by row),
//! `digest` (the fingerprints an identical copy must share), `job` (the engine job and the
//! connection pairing the read-only source with the target), `app` (DeerFlow's own tables:
//! the schema check, the thread list, one thread's rows), `shared` (DeerFlow's rows outside
//! threads, their own engine job), `cache` (the target's history cache, purged of replaced
//! threads), `run` (the command as a whole: the request checked, the dry run, the
//! connections of `--apply`).

mod app;
mod cache;
mod convert;
mod digest;
mod job;
mod run;
mod shared;
mod stream;

pub use app::{AppCopy, AppSetup};
pub use cache::PurgeReplaced;
pub use convert::{LaidNs, NsRows, lay_out};
pub use digest::{ThreadDigest, difference, digest_thread};
pub use job::{Copy, CopyConn, Sides, TargetConn, decide};
pub use run::{Prepared, prepare};
pub use shared::SharedReport;

use dfck_core::error::Error;
use dfck_core::progress::Progress;
use dfck_core::store::Backend;
use dfck_core::store::app_copy::AppRows;
use dfck_core::write::{Connections, RunOptions};
use serde::Serialize;

/// Where each thread's report goes as the copy is done with it, in thread order.
pub type ThreadSink<'a> = &'a mut (dyn FnMut(CopyThread) -> Result<(), Error> + Send);

/// What happens (or happened) to one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyStatus {
    /// Copied.
    Done,
    /// Would be copied (dry run).
    Would,
    /// Refused, with a reason; the target is untouched.
    Refused,
    /// Nothing to do (already in the target, identical; or gone from the source).
    Skipped,
}

impl CopyStatus {
    /// The status as reports show it.
    pub fn as_str(self) -> &'static str {
        match self {
            CopyStatus::Done => "done",
            CopyStatus::Would => "would",
            CopyStatus::Refused => "refused",
            CopyStatus::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for CopyStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thread of a copy.
#[derive(Debug, Clone, Serialize)]
pub struct CopyThread {
    /// Thread id.
    pub thread_id: String,
    /// Done, would, refused or skipped.
    pub status: CopyStatus,
    /// Why refused or skipped; for a copy over an existing thread, that it was replaced.
    pub reason: Option<String>,
    /// Namespaces.
    pub namespaces: usize,
    /// Checkpoints.
    pub checkpoints: usize,
    /// Pending writes.
    pub writes: usize,
    /// Bytes of the rows written in the target's layout.
    pub bytes: u64,
    /// DeerFlow's rows of the thread copied (would be), per table.
    #[serde(serialize_with = "app::table_counts")]
    pub deerflow_rows: Vec<(String, u64)>,
}

impl CopyThread {
    /// A thread nothing was done to yet.
    pub fn new(thread_id: &str) -> Self {
        CopyThread {
            thread_id: thread_id.to_owned(),
            status: CopyStatus::Skipped,
            reason: None,
            namespaces: 0,
            checkpoints: 0,
            writes: 0,
            bytes: 0,
            deerflow_rows: Vec::new(),
        }
    }

    /// With a status and reason.
    pub fn with(mut self, status: CopyStatus, reason: Option<String>) -> Self {
        self.status = status;
        self.reason = reason;
        self
    }
}

/// What a copy did (would do) with DeerFlow's own tables.
#[derive(Debug, Clone, Serialize)]
pub struct DeerflowCopy {
    /// The alembic revision source and target hold.
    pub revision: Option<String>,
    /// The rows outside threads (`--all` only; `None` for named threads).
    pub shared: Option<SharedReport>,
    /// Rows copied (would be) per table, over the threads and the shared rows.
    #[serde(serialize_with = "app::table_counts")]
    pub rows: Vec<(String, u64)>,
}

/// `dfck copy` (plan or result).
#[derive(Debug, Clone, Serialize)]
pub struct CopyReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// The source store (passwords redacted).
    pub source: String,
    /// The target store (passwords redacted).
    pub target: String,
    /// The target's backend.
    pub target_backend: Backend,
    /// Whether the target was (or would be) set up as an empty LangGraph store first.
    pub target_created: bool,
    /// Per thread.
    pub threads: Vec<CopyThread>,
    /// Threads copied (would be, in a dry run).
    pub copied: usize,
    /// Threads refused.
    pub refused: usize,
    /// Threads skipped.
    pub skipped: usize,
    /// Checkpoints copied (would be).
    pub checkpoints: usize,
    /// Writes copied (would be).
    pub writes: usize,
    /// Bytes copied (would be).
    pub bytes: u64,
    /// DeerFlow's own tables: `None` when the source has none, or with `--checkpoints-only`.
    pub deerflow: Option<DeerflowCopy>,
    /// DeerFlow's tables the copy left behind (`--checkpoints-only`).
    pub not_copied: Vec<String>,
}

/// Where a copy went and what it found there, besides the threads.
pub struct CopyPlace {
    /// The source store (passwords redacted).
    pub source: String,
    /// The target store (passwords redacted).
    pub target: String,
    /// The target's backend.
    pub target_backend: Backend,
    /// Whether the target was (or would be) set up as a LangGraph store first.
    pub target_created: bool,
}

/// The totals of a copy's threads, added up as they come.
#[derive(Debug, Default)]
pub struct CopyTotals {
    copied: usize,
    refused: usize,
    skipped: usize,
    checkpoints: usize,
    writes: usize,
    bytes: u64,
    /// DeerFlow's rows copied (would be) per table, in first-seen order.
    rows: Vec<(String, u64)>,
}

/// Adds `counts` to the per-table `rows`, a new table at the end.
fn add_rows(rows: &mut Vec<(String, u64)>, counts: &[(String, u64)]) {
    for (t, n) in counts {
        match rows.iter_mut().find(|(r, _)| r == t) {
            Some(r) => r.1 += n,
            None => rows.push((t.clone(), *n)),
        }
    }
}

impl CopyTotals {
    /// Counts one thread.
    pub fn add(&mut self, t: &CopyThread) {
        match t.status {
            CopyStatus::Done | CopyStatus::Would => {
                self.copied += 1;
                self.checkpoints += t.checkpoints;
                self.writes += t.writes;
                self.bytes += t.bytes;
                add_rows(&mut self.rows, &t.deerflow_rows);
            }
            CopyStatus::Refused => self.refused += 1,
            CopyStatus::Skipped => self.skipped += 1,
        }
    }
}

impl CopyReport {
    /// The report of threads counted in `totals` (and DeerFlow's shared rows), its list of
    /// threads empty: they were handed over as they came.
    pub fn of(
        dry_run: bool,
        place: CopyPlace,
        totals: CopyTotals,
        app: &AppSetup,
        shared: Option<SharedReport>,
    ) -> Self {
        let CopyPlace {
            source,
            target,
            target_backend,
            target_created,
        } = place;
        // The shared rows' tables first, then the threads' in the order they came.
        let mut rows: Vec<(String, u64)> = Vec::new();
        if let Some(s) = shared
            .as_ref()
            .filter(|s| matches!(s.status, CopyStatus::Done | CopyStatus::Would))
        {
            add_rows(&mut rows, &s.rows);
        }
        add_rows(&mut rows, &totals.rows);
        let (deerflow, not_copied) = match app {
            AppSetup::Absent => (None, Vec::new()),
            AppSetup::Left(tables) => (None, tables.clone()),
            AppSetup::Copy(a) => {
                let order = |t: &(String, u64)| {
                    a.maps
                        .iter()
                        .position(|m| m.name() == t.0)
                        .unwrap_or(usize::MAX)
                };
                rows.sort_by_key(order);
                let deerflow = DeerflowCopy {
                    revision: a.revision.clone(),
                    shared,
                    rows,
                };
                (Some(deerflow), Vec::new())
            }
        };
        CopyReport {
            dry_run,
            source,
            target,
            target_backend,
            target_created,
            copied: totals.copied,
            refused: totals.refused,
            skipped: totals.skipped,
            checkpoints: totals.checkpoints,
            writes: totals.writes,
            bytes: totals.bytes,
            threads: Vec::new(),
            deerflow,
            not_copied,
        }
    }

    /// Whether anything was refused: a thread, or DeerFlow's shared rows.
    pub fn any_refused(&self) -> bool {
        self.refused > 0
            || self
                .deerflow
                .as_ref()
                .and_then(|d| d.shared.as_ref())
                .is_some_and(|s| s.status == CopyStatus::Refused)
    }
}

/// Options of a copy.
#[derive(Debug, Clone, Copy)]
pub struct CopyOptions {
    /// Replace a thread the target holds with different content.
    pub replace: bool,
    /// The target's backend (its layout).
    pub target: Backend,
}

/// The stores a dry run reads: the source, the target's LangGraph tables (`None` when the
/// target does not exist yet or holds none) and its DeerFlow tables.
pub struct PlanSides<'a> {
    /// The source, inside its snapshot.
    pub source: &'a dyn dfck_core::store::Store,
    /// The target's LangGraph store.
    pub target: Option<&'a dyn dfck_core::store::Store>,
    /// The target's DeerFlow tables.
    pub app_target: Option<&'a dyn AppRows>,
}

/// The dry run: DeerFlow's shared rows (with `app` and `all`), then every thread of `ids`,
/// what a copy would do, planned by the engine ([`dfck_core::write::plan_each_into`]) and
/// handed to `sink`.
pub fn plan(
    sides: &PlanSides<'_>,
    ids: &[String],
    app: Option<&AppCopy>,
    all: bool,
    opts: &CopyOptions,
    progress: &dyn Progress,
    sink: ThreadSink<'_>,
) -> Result<Option<SharedReport>, Error> {
    let conn = job::CopyPlanConn {
        source: sides.source,
        target: sides.target,
        app_target: sides.app_target,
    };
    let shared = match app.filter(|_| all) {
        Some(app) => {
            let job = shared::Shared {
                app,
                replace: opts.replace,
            };
            let key = [shared::KEY.to_owned()];
            dfck_core::write::plan_each(&job, &conn, &key, progress)?.pop()
        }
        None => None,
    };
    let job = Copy {
        opts,
        app,
        cache: None,
    };
    dfck_core::write::plan_each_into(&job, &conn, ids, progress, sink)?;
    Ok(shared)
}

/// `copy --apply`: DeerFlow's shared rows in one engine transaction (with `app` and `all`),
/// then one per thread of `ids` on the target (see [`dfck_core::write::run_each`]), each
/// thread's report handed to `sink`.
pub fn apply(
    conns: Connections<'_, CopyConn>,
    ids: &[String],
    app: Option<&AppCopy>,
    all: bool,
    opts: &CopyOptions,
    run: &RunOptions<'_>,
    sink: ThreadSink<'_>,
) -> Result<Option<SharedReport>, Error> {
    let shared = match app.filter(|_| all) {
        Some(app) => {
            let job = shared::Shared {
                app,
                replace: opts.replace,
            };
            let once = RunOptions {
                jobs: 1,
                backup: None,
                phase: "copying DeerFlow's shared rows",
                progress: run.progress,
                events: run.events,
                cache: None,
                exact_threads: true,
            };
            let c = Connections {
                first: conns.first,
                open: conns.open,
                spare: None,
            };
            dfck_core::write::run(&job, c, &[shared::KEY.to_owned()], &once)?.pop()
        }
        None => None,
    };
    let purge = run.cache.map(PurgeReplaced::new);
    let job = Copy {
        opts,
        app,
        cache: purge.as_ref(),
    };
    let threads_run = RunOptions {
        jobs: run.jobs,
        backup: None,
        phase: run.phase,
        progress: run.progress,
        events: run.events,
        cache: purge
            .as_ref()
            .map(|p| p as &(dyn dfck_core::write::ThreadCache + Sync)),
        exact_threads: true,
    };
    dfck_core::write::run_each(&job, conns, ids, &threads_run, sink)?;
    Ok(shared)
}
