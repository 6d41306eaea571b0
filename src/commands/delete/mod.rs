//! `dfck delete`: deletes threads the way DeerFlow does (docs/deerflow-database.md) — its
//! thread-operation reservation first, then one transaction per thread that deletes the
//! checkpoints, writes, blobs and the `threads_meta` row (with `--erase`, the thread's rows
//! in every thread-scoped table), then DeerFlow's history cache keys and the thread's files,
//! then the reservation released. A dry run unless `--apply`.
//!
//! Submodules: `operation` (the reservation and the file step, shared with `prune`), `job`
//! (the engine job).

mod job;
pub mod operation;
pub mod receipt;

pub use job::{Delete, NOT_DUE};

use crate::commands::wiring::{OneSink, Sink, WriteRequest};
use dfck_core::deerflow::AppSchema;
use dfck_core::error::Error;
use dfck_core::store::Store;
use operation::ThreadOperation;
use serde::Serialize;
use std::path::PathBuf;

/// What to delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Also remove the thread's rows in every thread-scoped table (`--erase`).
    pub erase: bool,
    /// Only threads whose first checkpoint is older than this many seconds.
    pub older_than: Option<u64>,
    /// Only threads whose last checkpoint is older than this many seconds.
    pub idle: Option<u64>,
    /// "Now", in Unix seconds.
    pub now: i64,
    /// The base directory of thread files (`None`: files are left alone).
    pub base_dir: Option<PathBuf>,
    /// With `erase`: the root of DeerFlow's JSONL event files (its `jsonl` run-events backend).
    pub events_dir: Option<PathBuf>,
    /// Checkpoints never deleted (whole ids): a thread holding one is refused (`prune
    /// --protect`).
    pub protect: std::collections::HashSet<String>,
}

impl DeleteOptions {
    /// Whether a thread with these checkpoint times is due (always, without an age).
    pub fn due<'a>(&self, ts: impl Iterator<Item = &'a str>) -> bool {
        if self.older_than.is_none() && self.idle.is_none() {
            return true;
        }
        let ts: Vec<i64> = ts.filter_map(dfck_core::time::unix_seconds).collect();
        let (Some(first), Some(last)) = (ts.iter().min(), ts.iter().max()) else {
            return false;
        };
        let before = |limit: u64| {
            self.now
                .saturating_sub(i64::try_from(limit).unwrap_or(i64::MAX))
        };
        self.older_than.is_some_and(|d| *first < before(d))
            || self.idle.is_some_and(|d| *last < before(d))
    }
}

/// What happens (or happened) to one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeleteStatus {
    /// Deleted.
    Done,
    /// Would be deleted (dry run).
    Would,
    /// Refused: left untouched, with a reason.
    Refused,
    /// Nothing to do.
    Skipped,
}

impl DeleteStatus {
    /// The status as reports show it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteStatus::Done => "done",
            DeleteStatus::Would => "would",
            DeleteStatus::Refused => "refused",
            DeleteStatus::Skipped => "skipped",
        }
    }
}

/// One thread of a delete.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadDelete {
    /// Thread id.
    pub thread_id: String,
    /// Done, would, refused or skipped.
    pub status: DeleteStatus,
    /// Why the thread is refused or skipped.
    pub reason: Option<String>,
    /// Its owner in DeerFlow's thread list.
    pub user_id: Option<String>,
    /// Whether DeerFlow listed it (`threads_meta`).
    pub listed: bool,
    /// Checkpoints deleted (would be).
    pub checkpoints: u64,
    /// Write rows deleted (would be).
    pub writes: u64,
    /// Blob rows deleted (PostgreSQL; counted once applied).
    pub blobs: u64,
    /// Bytes of the deleted values.
    pub bytes: u64,
    /// DeerFlow rows deleted (would be), per table.
    #[serde(serialize_with = "table_counts")]
    pub app_rows: Vec<(String, u64)>,
    /// DeerFlow history cache keys purged (`None`: no cache reached).
    pub cache_keys: Option<u64>,
    /// The thread's directories removed (would be).
    pub files: Vec<String>,
    /// What the file step could not do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ThreadDelete {
    fn new(thread_id: &str, status: DeleteStatus) -> Self {
        ThreadDelete {
            thread_id: thread_id.to_owned(),
            status,
            reason: None,
            user_id: None,
            listed: false,
            checkpoints: 0,
            writes: 0,
            blobs: 0,
            bytes: 0,
            app_rows: Vec::new(),
            cache_keys: None,
            files: Vec::new(),
            note: None,
        }
    }
}

/// (table, rows) pairs as one JSON object.
fn table_counts<S: serde::Serializer>(rows: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(rows.len()))?;
    for (t, n) in rows {
        m.serialize_entry(t, n)?;
    }
    m.end()
}

/// Where DeerFlow's history cache was, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct CacheReport {
    /// `redis`, `memory` or `off`.
    pub kind: &'static str,
    /// The key prefix (Redis).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// Where the prefix came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_from: Option<&'static str>,
    /// What the operator should know (a memory cache cannot be purged from outside).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `dfck delete`'s report.
#[derive(Debug, Clone, Serialize)]
pub struct DeleteReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// `--erase`.
    pub erase: bool,
    /// DeerFlow's alembic revision.
    pub revision: Option<String>,
    /// DeerFlow's history cache.
    pub cache: CacheReport,
    /// Per thread.
    pub threads: Vec<ThreadDelete>,
    /// Threads deleted (would be).
    pub deleted: usize,
    /// Threads refused.
    pub refused: usize,
    /// Threads with nothing to delete.
    pub skipped: usize,
    /// Checkpoints deleted (would be), over every thread.
    pub checkpoints: u64,
}

impl DeleteReport {
    /// The report without the threads an age left alone (for `prune`, which prunes those).
    pub fn due_only(self) -> Self {
        let threads = self
            .threads
            .into_iter()
            .filter(|t| t.reason.as_deref() != Some(NOT_DUE))
            .collect();
        DeleteReport::new(self.dry_run, self.erase, self.revision, self.cache, threads)
    }

    fn new(
        dry_run: bool,
        erase: bool,
        revision: Option<String>,
        cache: CacheReport,
        threads: Vec<ThreadDelete>,
    ) -> Self {
        let mut totals = DeleteTotals::default();
        threads.iter().for_each(|t| totals.add(t));
        let mut report = DeleteReport::of(dry_run, erase, revision, cache, totals);
        report.threads = threads;
        report
    }

    /// The report of threads counted in `totals`, its list of threads empty: they were
    /// handed over as they came.
    fn of(
        dry_run: bool,
        erase: bool,
        revision: Option<String>,
        cache: CacheReport,
        totals: DeleteTotals,
    ) -> Self {
        DeleteReport {
            dry_run,
            erase,
            revision,
            cache,
            deleted: totals.deleted,
            refused: totals.refused,
            skipped: totals.skipped,
            checkpoints: totals.checkpoints,
            threads: Vec::new(),
        }
    }
}

/// The totals of a delete's threads, added up as they come.
#[derive(Debug, Default)]
struct DeleteTotals {
    deleted: usize,
    refused: usize,
    skipped: usize,
    checkpoints: u64,
}

impl DeleteTotals {
    fn add(&mut self, t: &ThreadDelete) {
        match t.status {
            DeleteStatus::Done | DeleteStatus::Would => {
                self.deleted += 1;
                self.checkpoints += t.checkpoints;
            }
            DeleteStatus::Refused => self.refused += 1,
            DeleteStatus::Skipped => self.skipped += 1,
        }
    }
}

/// The threads a delete works on: the named ones, or `user`'s (every thread DeerFlow lists
/// for them), or with an age alone every thread with checkpoints.
fn selection(
    store: &dyn Store,
    req: &WriteRequest<'_>,
    user: Option<&str>,
) -> Result<Vec<String>, Error> {
    if let Some(u) = user {
        let app = store
            .app()
            .ok_or_else(|| Error::Usage("--user needs DeerFlow's tables".into()))?;
        let ids = app.user_thread_ids(u)?;
        if ids.is_empty() {
            return Err(Error::Usage(format!(
                "--user {u}: DeerFlow's thread list holds no thread of this user"
            )));
        }
        return Ok(ids);
    }
    if !req.threads.is_empty() {
        let mut out = Vec::new();
        for t in req.threads {
            if !out.contains(t) {
                out.push(t.clone());
            }
        }
        return Ok(out);
    }
    let mut out = Vec::new();
    store.scan_thread_ids(&mut |t| {
        out.push(t);
        Ok(())
    })?;
    Ok(out)
}

/// Checks the store holds DeerFlow's schema at the revision `delete` needs.
fn schema_of(store: &dyn Store) -> Result<AppSchema, Error> {
    let schema = match store.app() {
        Some(a) => a.app_schema()?,
        None => AppSchema::default(),
    };
    if !schema.lists_threads() || !schema.has("runs") {
        return Err(Error::Usage(
            "dfck delete deletes threads the way DeerFlow does and needs DeerFlow's tables (threads_meta, runs); this store has none: delete LangGraph threads with prune --older-than or --idle".into(),
        ));
    }
    if !schema.at_least(dfck_core::deerflow::DELETE_REVISION) {
        return Err(Error::Usage(format!(
            "dfck delete needs DeerFlow's schema at alembic revision {} or later (its thread-operation reservation); this store is at {}: start DeerFlow once to upgrade it",
            dfck_core::deerflow::DELETE_REVISION,
            schema.revision.as_deref().unwrap_or("no recorded revision")
        )));
    }
    Ok(schema)
}

/// Runs `dfck delete`: the dry run, or with `req.apply` the deletion; the report holds every
/// thread.
pub fn run(
    req: &WriteRequest<'_>,
    user: Option<&str>,
    opts: &DeleteOptions,
    cache: CacheReport,
) -> Result<DeleteReport, Error> {
    let mut threads = Vec::new();
    let mut report = run_each(req, user, opts, cache, &mut |t| {
        threads.push(t);
        Ok(())
    })?;
    report.threads = threads;
    Ok(report)
}

/// [`run`], each thread's report handed to `sink` in thread order; the report returned holds
/// the totals, not the threads.
pub fn run_each(
    req: &WriteRequest<'_>,
    user: Option<&str>,
    opts: &DeleteOptions,
    cache: CacheReport,
    sink: Sink<'_, ThreadDelete>,
) -> Result<DeleteReport, Error> {
    let probe = req.target.open_read_only()?;
    let schema = schema_of(probe.as_ref())?;
    let ids = selection(probe.as_ref(), req, user)?;
    drop(probe);
    let revision = schema.revision.clone();
    let op = ThreadOperation::new(
        schema,
        opts.base_dir.clone(),
        opts.events_dir.clone().filter(|_| opts.erase),
    );
    let job = Delete { opts, op: &op };
    let mut totals = DeleteTotals::default();
    let mut counted = |t: ThreadDelete| {
        totals.add(&t);
        sink(t)
    };
    if req.apply {
        let run = dfck_core::write::RunOptions {
            jobs: usize::from(req.jobs),
            backup: req.backup,
            phase: "deleting threads",
            progress: req.progress,
            events: req.events,
            cache: req.cache,
            exact_threads: true,
        };
        // Only one backend runs; it takes the sink.
        let sink = OneSink::new(&mut counted);
        crate::commands::wiring::with_connections(
            req.target,
            req.jobs,
            req.backup.is_some(),
            |c| dfck_core::write::run_each(&job, c, &ids, &run, &mut **sink.take()?),
            |c| dfck_core::write::run_each(&job, c, &ids, &run, &mut **sink.take()?),
        )?;
    } else {
        if req.backup.is_some() {
            return Err(Error::Usage("--backup goes with --apply".into()));
        }
        let store = req.target.open_read_only()?;
        let conn = dfck_core::store::ReadOnly(store.as_ref());
        dfck_core::write::plan_each_into(&job, &conn, &ids, req.progress, &mut counted)?;
    }
    Ok(DeleteReport::of(
        !req.apply, opts.erase, revision, cache, totals,
    ))
}
