//! `migrate full-to-delta`: rewrites full-mode threads into the form a delta-mode process
//! would have written (docs/full-to-delta.md) — `messages` stored only at snapshots, every
//! write, version, id and other channel kept — as a job of the write engine
//! ([`dfck_core::write`]): per thread one transaction that locks, plans under the lock,
//! rewrites, verifies every checkpoint's state against the state before, and commits, or
//! rolls back and refuses.
//!
//! Submodules: `decide` (where snapshots go, the counters), `job` (the engine job and the
//! backends' row changes).

mod decide;
mod job;

pub use decide::{Form, MessagesAction, NodeChange};
pub use job::{DeltaStore, FullToDelta};

use super::checks::digest;
use super::state::StateFingerprints;
use crate::commands::wiring::{CountsThreads, Sink, WriteRequest};
use dfck_core::error::Error;
use dfck_core::materialize::Reducer;
use dfck_core::model::thread::{LoadedThread, Metadata};
use dfck_core::progress::Progress;
use dfck_core::store::Store;
use dfck_core::write::Refusal;
use dfck_core::write::preamble::{self, Preamble};
use serde::Serialize;

/// Why a snapshot is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotReason {
    /// K updates since the last snapshot (the cadence a delta-mode process keeps).
    Cadence,
    /// The first checkpoint of a new branch from a checkpoint with pending `messages`
    /// writes (LangGraph 1.2 snapshots there).
    Fork,
    /// Replaying the kept writes would not give the stored list.
    ReplayMismatch,
    /// The checkpoint consumed an `Overwrite` of `messages` (LangGraph snapshots there).
    Overwrite,
    /// Postgres: the version's blob is also read by a checkpoint left as it is (the delta
    /// part of a mixed thread), so it keeps its value.
    SharedVersion,
}

/// Which metadata form the converted thread carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeltaForm {
    /// DeerFlow's: the mode marker on every checkpoint, DeerFlow's reducer.
    Deerflow,
    /// LangGraph's own: no marker, LangGraph's delta reducer.
    Langgraph,
}

/// Options of a full→delta conversion.
#[derive(Debug, Clone, Copy)]
pub struct ToDeltaOptions {
    /// Snapshot cadence K (`--snapshot-frequency`).
    pub frequency: u64,
    /// The form; `None`: DeerFlow's when the thread already carries DeerFlow's marker.
    pub form: Option<DeltaForm>,
}

impl ToDeltaOptions {
    fn form_for(&self, threads: &[LoadedThread]) -> DeltaForm {
        self.form.unwrap_or_else(|| {
            let marked = threads
                .iter()
                .flat_map(|t| &t.nodes)
                .any(|n| n.facts.marker.is_some());
            if marked {
                DeltaForm::Deerflow
            } else {
                DeltaForm::Langgraph
            }
        })
    }
}

/// What happens (or happened) to one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToDeltaStatus {
    /// Converted.
    Done,
    /// Would be converted (dry run).
    Would,
    /// Left untouched, with a reason.
    Refused,
    /// Nothing to convert.
    Skipped,
}

impl ToDeltaStatus {
    /// As reports show it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToDeltaStatus::Done => "done",
            ToDeltaStatus::Would => "would",
            ToDeltaStatus::Refused => "refused",
            ToDeltaStatus::Skipped => "skipped",
        }
    }
}

/// Snapshots placed, by reason.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SnapshotCounts {
    /// By cadence.
    pub cadence: usize,
    /// At fork children.
    pub fork: usize,
    /// Where the replay would differ.
    pub replay_mismatch: usize,
    /// After an `Overwrite`.
    pub overwrite: usize,
    /// Where a Postgres blob is shared with a checkpoint left as it is.
    pub shared_version: usize,
}

/// One thread of the report.
#[derive(Debug, Clone, Serialize)]
pub struct ToDeltaThread {
    /// Thread id.
    pub thread_id: String,
    /// done / would / refused / skipped.
    pub status: ToDeltaStatus,
    /// Why refused or skipped.
    pub reason: Option<String>,
    /// The form written.
    pub form: Option<DeltaForm>,
    /// Checkpoints rewritten (would be).
    pub checkpoints_rewritten: usize,
    /// Snapshots placed, by reason.
    pub snapshots: SnapshotCounts,
    /// Bytes of the thread's checkpoints before.
    pub bytes_before: u64,
    /// Estimated bytes after.
    pub bytes_after: u64,
}

impl ToDeltaThread {
    fn new(thread_id: &str) -> Self {
        ToDeltaThread {
            thread_id: thread_id.to_owned(),
            status: ToDeltaStatus::Skipped,
            reason: None,
            form: None,
            checkpoints_rewritten: 0,
            snapshots: SnapshotCounts::default(),
            bytes_before: 0,
            bytes_after: 0,
        }
    }

    fn refused(mut self, reason: String) -> Self {
        self.status = ToDeltaStatus::Refused;
        self.reason = Some(reason);
        self.checkpoints_rewritten = 0;
        self.snapshots = SnapshotCounts::default();
        self.bytes_after = self.bytes_before;
        self
    }
}

/// `dfck migrate full-to-delta`.
#[derive(Debug, Clone, Serialize)]
pub struct ToDeltaReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// Snapshot cadence K.
    pub snapshot_frequency: u64,
    /// Per thread.
    pub threads: Vec<ToDeltaThread>,
    /// Threads converted.
    pub done: usize,
    /// Threads that would be converted (dry run).
    pub would: usize,
    /// Threads refused.
    pub refused: usize,
    /// Threads with nothing to convert.
    pub skipped: usize,
}

impl ToDeltaReport {
    fn new(dry_run: bool, frequency: u64, threads: Vec<ToDeltaThread>) -> Self {
        let mut r = ToDeltaReport::empty(dry_run, frequency);
        threads.iter().for_each(|p| r.count(p));
        r.threads = threads;
        r
    }

    /// A report of no threads, its totals counted in by [`CountsThreads::count`].
    fn empty(dry_run: bool, frequency: u64) -> Self {
        ToDeltaReport {
            dry_run,
            snapshot_frequency: frequency,
            threads: Vec::new(),
            done: 0,
            would: 0,
            refused: 0,
            skipped: 0,
        }
    }
}

impl CountsThreads<ToDeltaThread> for ToDeltaReport {
    fn count(&mut self, p: &ToDeltaThread) {
        match p.status {
            ToDeltaStatus::Done => self.done += 1,
            ToDeltaStatus::Would => self.would += 1,
            ToDeltaStatus::Refused => self.refused += 1,
            ToDeltaStatus::Skipped => self.skipped += 1,
        }
    }
}

/// A planned thread: its report and, when convertible, what to write.
pub(super) struct ThreadWork {
    report: ToDeltaThread,
    /// Per namespace: the loaded rows, the changes, and every checkpoint's state before.
    changes: Vec<(LoadedThread, Vec<NodeChange>, StateFingerprints)>,
    reducer: Reducer,
}

/// Plans one thread (every namespace), reading it as it is now.
fn plan_one(
    store: &dyn Store,
    thread_id: &str,
    opts: &ToDeltaOptions,
) -> Result<ThreadWork, Error> {
    let mut report = ToDeltaThread::new(thread_id);
    let done = |report: ToDeltaThread| ThreadWork {
        report,
        changes: Vec::new(),
        reducer: Reducer::Langgraph,
    };
    // Values held up to a budget; a larger thread is read back a checkpoint at a time.
    let threads = match preamble::load_bounded(store, thread_id, Metadata::Whole)? {
        Preamble::Gone => {
            report.reason = Some(preamble::THREAD_GONE.into());
            return Ok(done(report));
        }
        Preamble::Loaded(threads) => threads,
    };
    report.bytes_before = threads.iter().flat_map(|t| &t.nodes).map(|n| n.bytes).sum();
    report.bytes_after = report.bytes_before;
    if let Some(e) = preamble::unreadable(&threads) {
        return Ok(done(report.refused(format!("unreadable checkpoint: {e}"))));
    }
    let versioned_full = |t: &LoadedThread| {
        t.nodes.iter().any(|n| {
            !decide::delta_encoded(n)
                && n.checkpoint
                    .as_ref()
                    .is_ok_and(|c| c.version(dfck_core::model::MESSAGES).is_some())
        })
    };
    if !threads.iter().any(versioned_full) {
        report.reason = Some(
            if threads
                .iter()
                .flat_map(|t| &t.nodes)
                .any(decide::delta_encoded)
            {
                "already delta"
            } else {
                "no messages channel to convert"
            }
            .into(),
        );
        return Ok(done(report));
    }
    let form = opts.form_for(&threads);
    let reducer = match form {
        DeltaForm::Deerflow => Reducer::Deerflow,
        DeltaForm::Langgraph => Reducer::Langgraph,
    };
    let shared = store.values_shared_by_version();
    let mut changes = Vec::new();
    let mut after = report.bytes_before as i64;
    for t in threads {
        if !versioned_full(&t) {
            continue;
        }
        if let Some(f) = preamble::broken_lineage(&t).into_iter().next() {
            return Ok(done(report.refused(format!(
                "{} at {}: {}",
                f.code,
                f.checkpoint_id.unwrap_or_default(),
                f.message
            ))));
        }
        for n in &t.nodes {
            for w in &n.writes {
                if let Err(e) =
                    dfck_core::codec::decode_typed(w.type_tag.as_deref(), w.value.clone())
                {
                    return Ok(done(
                        report.refused(format!("unreadable write on {}: {e}", n.id)),
                    ));
                }
            }
        }
        let f = Form {
            deerflow_marker: form == DeltaForm::Deerflow,
            frequency: opts.frequency,
            reducer,
        };
        let (list, state) = match decide::decide(store, &t, f, shared) {
            Ok(l) => l,
            Err(Refusal(r)) => return Ok(done(report.refused(r))),
        };
        let mut seen_versions = std::collections::HashSet::new();
        for c in &list {
            let old_meta = c.metadata_bytes as i64;
            let new_meta = serde_json::to_vec(&c.metadata).map_or(0, |v| v.len()) as i64;
            after += new_meta - old_meta;
            let first = !shared
                || c.version
                    .as_ref()
                    .is_some_and(|v| seen_versions.insert(v.clone()));
            match c.action {
                MessagesAction::Snapshot(r) => {
                    match r {
                        SnapshotReason::Cadence => report.snapshots.cadence += 1,
                        SnapshotReason::Fork => report.snapshots.fork += 1,
                        SnapshotReason::ReplayMismatch => report.snapshots.replay_mismatch += 1,
                        SnapshotReason::Overwrite => report.snapshots.overwrite += 1,
                        SnapshotReason::SharedVersion => report.snapshots.shared_version += 1,
                    }
                    if first {
                        after += 3;
                    }
                }
                MessagesAction::Drop if first => after -= c.list_bytes as i64,
                _ => {}
            }
        }
        report.checkpoints_rewritten += list.len();
        changes.push((t, list, state));
    }
    report.status = ToDeltaStatus::Would;
    report.form = Some(form);
    report.bytes_after = after.max(0) as u64;
    Ok(ThreadWork {
        report,
        changes,
        reducer,
    })
}

/// The dry run: every given thread (or every thread with `all`) planned by the engine
/// ([`dfck_core::write::dry_run`]) inside a read transaction, nothing written.
pub fn plan(
    store: &dyn Store,
    threads: &[String],
    all: bool,
    opts: &ToDeltaOptions,
    progress: &dyn Progress,
) -> Result<ToDeltaReport, Error> {
    let job = FullToDelta { opts };
    let conn = dfck_core::store::ReadOnly(store);
    let out = dfck_core::write::dry_run(&job, &conn, if all { &[] } else { threads }, progress)?;
    Ok(ToDeltaReport::new(true, opts.frequency, out))
}

/// `dfck migrate full-to-delta`: the dry run, or with `req.apply` the conversion (see
/// [`WriteRequest`]).
pub fn run(req: &WriteRequest<'_>, opts: &ToDeltaOptions) -> Result<ToDeltaReport, Error> {
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
    opts: &ToDeltaOptions,
    sink: Sink<'_, ToDeltaThread>,
) -> Result<ToDeltaReport, Error> {
    req.run_counted(
        "converting threads",
        &FullToDelta { opts },
        ToDeltaReport::empty(!req.apply, opts.frequency),
        sink,
    )
}
