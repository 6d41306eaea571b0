//! `dfck prune`: deleting what no resume, regenerate or branch needs (`docs/prune.md`) —
//! trailing duration-only leaves always, leaf branches with `--branches`, and whole threads
//! older or idler than a limit — through the write engine ([`dfck_core::write`]): one
//! transaction per thread that deletes, removes the orphans it leaves, and verifies before
//! commit that every kept checkpoint shows the state it showed and none lost its parent.
//!
//! Submodules: `select` (the protected set and the shapes), `job` (planning a thread and the
//! engine job); durations and timestamps are `dfck_core::time`.

mod job;
pub mod select;

pub use job::{Prune, plan_thread};

use crate::commands::delete::{CacheReport, DeleteOptions, DeleteReport};
use crate::commands::wiring::WriteRequest;
use dfck_core::error::Error;
use dfck_core::store::Store;
use dfck_core::store::delete::DeleteRows;
use dfck_core::write::{Connections, RunOptions};
use serde::Serialize;
use std::collections::HashSet;

/// What to prune.
#[derive(Debug, Clone, Default)]
pub struct PruneOptions {
    /// Also delete leaf branches off the kept lineage (E2).
    pub branches: bool,
    /// Delete whole threads whose first checkpoint is older than this many seconds.
    pub older_than: Option<u64>,
    /// Delete whole threads whose last checkpoint is older than this many seconds.
    pub idle: Option<u64>,
    /// Checkpoints that are never deleted (nor their ancestors): as given (an id or a
    /// unique prefix of one), resolved to whole ids before any work.
    pub protect: HashSet<String>,
    /// Keep only the last N turns of each thread's resume lineage (history trimming).
    pub keep_turns: Option<usize>,
    /// "Now", in Unix seconds.
    pub now: i64,
}

/// What happens (or happened) to one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PruneStatus {
    /// Pruned.
    Done,
    /// Would be pruned (dry run).
    Would,
    /// Refused: left untouched, with a reason.
    Refused,
    /// Nothing to prune.
    Skipped,
}

impl PruneStatus {
    /// The status as reports show it.
    pub fn as_str(self) -> &'static str {
        match self {
            PruneStatus::Done => "done",
            PruneStatus::Would => "would",
            PruneStatus::Refused => "refused",
            PruneStatus::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for PruneStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thread of a prune.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadPrune {
    /// Thread id.
    pub thread_id: String,
    /// Done, would, refused or skipped.
    pub status: PruneStatus,
    /// Why the thread is refused or skipped.
    pub reason: Option<String>,
    /// Why a checkpoint that looked deletable is kept (the protected head).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The whole thread goes (`--older-than` / `--idle`).
    pub whole_thread: bool,
    /// Checkpoints deleted (would be).
    pub checkpoints: u64,
    /// Write rows deleted (would be), orphans included once applied.
    pub writes: u64,
    /// Blob rows deleted (PostgreSQL; counted once applied).
    pub blobs: u64,
    /// Logical bytes freed (would be): stored values of the deleted rows.
    pub bytes_freed: u64,
    /// Of the deleted checkpoints: trailing duration-only leaves.
    pub duration_leaves: u64,
    /// Of the deleted checkpoints: leaf-branch checkpoints (`--branches`).
    pub branch_checkpoints: u64,
    /// Of the deleted checkpoints: before the oldest kept turn (`--keep-last-turns`).
    pub cut_checkpoints: u64,
    /// Turns cut (`--keep-last-turns`): nobody can branch from or regenerate them any more.
    pub turns_cut: u64,
    /// The checkpoint that starts the oldest kept turn, which becomes the root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_kept: Option<String>,
    /// Checkpoints kept.
    pub kept: u64,
    /// Orphan rows (writes on no checkpoint, unreferenced blobs) before the prune; applied
    /// runs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub orphans_before: Option<u64>,
    /// Orphan rows after it (always 0 when committed); applied runs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub orphans_after: Option<u64>,
}

impl ThreadPrune {
    fn new(thread_id: &str, status: PruneStatus) -> Self {
        ThreadPrune {
            thread_id: thread_id.to_owned(),
            status,
            reason: None,
            note: None,
            whole_thread: false,
            checkpoints: 0,
            writes: 0,
            blobs: 0,
            bytes_freed: 0,
            duration_leaves: 0,
            branch_checkpoints: 0,
            cut_checkpoints: 0,
            turns_cut: 0,
            oldest_kept: None,
            kept: 0,
            orphans_before: None,
            orphans_after: None,
        }
    }

    fn refused(mut self, reason: impl Into<String>) -> Self {
        self.status = PruneStatus::Refused;
        self.reason = Some(reason.into());
        self
    }

    fn skipped(thread_id: &str, reason: &str) -> Self {
        let mut r = ThreadPrune::new(thread_id, PruneStatus::Skipped);
        r.reason = Some(reason.to_owned());
        r
    }
}

/// `dfck prune`'s report.
#[derive(Debug, Clone, Serialize)]
pub struct PruneReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// Per thread.
    pub threads: Vec<ThreadPrune>,
    /// Threads pruned (would be).
    pub pruned: usize,
    /// Threads refused.
    pub refused: usize,
    /// Threads with nothing to prune.
    pub skipped: usize,
    /// Checkpoints deleted (would be), over every thread.
    pub checkpoints: u64,
    /// Logical bytes freed (would be), over every thread.
    pub bytes_freed: u64,
    /// On a DeerFlow database, the whole threads `--older-than`/`--idle` selected, deleted
    /// the way `dfck delete` deletes them (its report); `threads` holds the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deerflow_delete: Option<DeleteReport>,
}

impl PruneReport {
    fn new(dry_run: bool, threads: Vec<ThreadPrune>) -> Self {
        let mut r = PruneReport::empty(dry_run);
        threads.iter().for_each(|p| r.count(p));
        r.threads = threads;
        r
    }

    /// A report of no threads, its totals counted in by [`PruneReport::count`].
    fn empty(dry_run: bool) -> Self {
        PruneReport {
            dry_run,
            threads: Vec::new(),
            pruned: 0,
            refused: 0,
            skipped: 0,
            checkpoints: 0,
            bytes_freed: 0,
            deerflow_delete: None,
        }
    }

    /// Counts one thread into the totals (not into `threads`).
    fn count(&mut self, p: &ThreadPrune) {
        match p.status {
            PruneStatus::Done | PruneStatus::Would => {
                self.pruned += 1;
                self.checkpoints += p.checkpoints;
                self.bytes_freed += p.bytes_freed;
            }
            PruneStatus::Refused => self.refused += 1,
            PruneStatus::Skipped => self.skipped += 1,
        }
    }
}

/// `opts` with every `--protect` value resolved to the one checkpoint it names (a usage
/// error when it names none or several).
fn resolve_protect(
    store: &dyn Store,
    threads: &[String],
    all: bool,
    opts: &PruneOptions,
) -> Result<PruneOptions, Error> {
    if opts.protect.is_empty() {
        return Ok(opts.clone());
    }
    let selected = if all { &[][..] } else { threads };
    let protect = dfck_core::address::protected_checkpoints(
        store,
        selected,
        opts.protect.iter().map(String::as_str),
    )?;
    Ok(PruneOptions {
        protect,
        ..opts.clone()
    })
}

/// The dry run: what a prune of the given threads (every thread with `all`) would delete,
/// planned by the engine ([`dfck_core::write::dry_run`]) inside a read transaction.
pub fn plan(
    store: &dyn Store,
    req: &WriteRequest<'_>,
    opts: &PruneOptions,
) -> Result<PruneReport, Error> {
    let out = dfck_core::write::collect(|sink| plan_each(store, req, opts, sink))?;
    Ok(PruneReport::new(true, out))
}

/// [`plan`], each thread's report to `sink` as it is planned (`--jobs N`: over N read-only
/// connections).
fn plan_each(
    store: &dyn Store,
    req: &WriteRequest<'_>,
    opts: &PruneOptions,
    sink: &mut (dyn FnMut(ThreadPrune) -> Result<(), Error> + Send),
) -> Result<(), Error> {
    let opts = &resolve_protect(store, req.threads, req.all, opts)?;
    let job = Prune { opts };
    let open = || req.target.open_read_only();
    let jobs = usize::from(req.jobs);
    dfck_core::write::dry_run_jobs(&job, store, &open, jobs, req.selected(), req.progress, sink)
}

/// `prune --apply`: one engine transaction per thread (see [`dfck_core::write::run`]).
pub fn apply<C: DeleteRows + Send>(
    conns: Connections<'_, C>,
    threads: &[String],
    all: bool,
    opts: &PruneOptions,
    run: &RunOptions<'_>,
) -> Result<PruneReport, Error> {
    let out = dfck_core::write::collect(|sink| apply_each(conns, threads, all, opts, run, sink))?;
    Ok(PruneReport::new(false, out))
}

/// [`apply`], each thread's report to `sink` in thread order as it is done.
fn apply_each<C: DeleteRows + Send>(
    conns: Connections<'_, C>,
    threads: &[String],
    all: bool,
    opts: &PruneOptions,
    run: &RunOptions<'_>,
    sink: &mut (dyn FnMut(ThreadPrune) -> Result<(), Error> + Send),
) -> Result<(), Error> {
    let opts = &resolve_protect(conns.first.store(), threads, all, opts)?;
    let job = Prune { opts };
    let selected = if all { &[] } else { threads };
    dfck_core::write::run_each(&job, conns, selected, run, sink)
}

/// [`run`] for a prune that deletes no thread whole (no `--older-than` or `--idle`), each
/// thread's report handed to `sink` in thread order as it is done, so that the caller holds
/// none: the report returned has the totals and no threads.
pub fn run_each(
    req: &WriteRequest<'_>,
    opts: &PruneOptions,
    sink: &mut (dyn FnMut(ThreadPrune) -> Result<(), Error> + Send),
) -> Result<PruneReport, Error> {
    if opts.older_than.is_some() || opts.idle.is_some() {
        return Err(Error::Usage(
            "internal: a prune by age is reported whole, not streamed".into(),
        ));
    }
    let mut report = PruneReport::empty(!req.apply);
    let mut counted = |p: ThreadPrune| {
        report.count(&p);
        sink(p)
    };
    req.dry_or_apply_each(
        "pruning threads",
        &mut counted,
        |store, sink| plan_each(store, req, opts, sink),
        |c, run, sink| apply_each(c, req.threads, req.all, opts, run, sink),
        |c, run, sink| apply_each(c, req.threads, req.all, opts, run, sink),
    )?;
    Ok(report)
}

/// `dfck prune`: the dry run, or with `req.apply` the deletion (see [`WriteRequest`]). On a
/// DeerFlow database (`threads_meta` present), the whole threads an age selects are deleted
/// by `dfck delete` (`whole`: its options, the age taken from `opts`; `cache`: the report's
/// account of DeerFlow's history cache), the other threads pruned as on any store.
pub fn run(
    req: &WriteRequest<'_>,
    opts: &PruneOptions,
    whole: &DeleteOptions,
    cache: CacheReport,
) -> Result<PruneReport, Error> {
    if opts.older_than.is_none() && opts.idle.is_none() {
        return prune_threads(req, opts);
    }
    let probe = req.target.open_read_only()?;
    let lists = match probe.app() {
        Some(a) => a.app_schema()?.lists_threads(),
        None => false,
    };
    if !lists {
        return prune_threads(req, opts);
    }
    let opts = &resolve_protect(probe.as_ref(), req.threads, req.all, opts)?;
    let selected: Vec<String> = if req.all {
        let mut ids = Vec::new();
        probe.scan_thread_ids(&mut |t| {
            ids.push(t);
            Ok(())
        })?;
        ids
    } else {
        req.threads.to_vec()
    };
    drop(probe);
    let del_opts = DeleteOptions {
        erase: false,
        older_than: opts.older_than,
        idle: opts.idle,
        now: opts.now,
        protect: opts.protect.clone(),
        ..whole.clone()
    };
    let del_req = WriteRequest {
        threads: &selected,
        all: false,
        ..*req
    };
    let deleted = crate::commands::delete::run(&del_req, None, &del_opts, cache)?.due_only();
    let handled: HashSet<&str> = deleted
        .threads
        .iter()
        .map(|t| t.thread_id.as_str())
        .collect();
    let rest: Vec<String> = selected
        .iter()
        .filter(|t| !handled.contains(t.as_str()))
        .cloned()
        .collect();
    let rest_opts = PruneOptions {
        older_than: None,
        idle: None,
        ..opts.clone()
    };
    let mut report = if rest.is_empty() {
        PruneReport::new(!req.apply, Vec::new())
    } else {
        prune_threads(
            &WriteRequest {
                threads: &rest,
                all: false,
                ..*req
            },
            &rest_opts,
        )?
    };
    report.deerflow_delete = Some(deleted);
    Ok(report)
}

/// The prune of `req`'s threads as on any store.
fn prune_threads(req: &WriteRequest<'_>, opts: &PruneOptions) -> Result<PruneReport, Error> {
    req.dry_or_apply(
        "pruning threads",
        |store| plan(store, req, opts),
        |c, run| apply(c, req.threads, req.all, opts, run),
        |c, run| apply(c, req.threads, req.all, opts, run),
    )
}
