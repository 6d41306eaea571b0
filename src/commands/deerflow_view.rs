//! DeerFlow's view of a store beside its checkpoints (docs/deerflow-database.md): its tables
//! in the space report, its thread list and runs per thread in the summary, and what does not
//! match — listed threads without checkpoints, checkpoint threads DeerFlow cannot list, active
//! runs whose lease expired.

use dfck_core::deerflow::{ActiveRun, AppSchema, RunSummary, TableSpace, ThreadMeta};
use dfck_core::error::{Error, StoreError};
use dfck_core::store::Store;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// DeerFlow's tables and thread list, summed up.
#[derive(Debug, Clone, Serialize)]
pub struct AppSummary {
    /// The alembic revision of DeerFlow's schema.
    pub revision: Option<String>,
    /// Rows and bytes of each DeerFlow table.
    pub tables: Vec<TableSpace>,
    /// Threads DeerFlow lists (`threads_meta` rows).
    pub listed_threads: u64,
    /// Listed threads that have no checkpoints.
    pub listed_without_checkpoints: Vec<String>,
    /// Checkpoint threads with no `threads_meta` row: no DeerFlow user can see or delete them.
    pub unlisted_threads: Vec<String>,
    /// Active `runs` rows (`pending`/`running`, any operation kind).
    pub active_runs: Vec<ActiveRun>,
}

/// One thread as DeerFlow shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadApp {
    /// Whether `threads_meta` lists it.
    pub listed: bool,
    /// Its title (`display_name`).
    pub title: Option<String>,
    /// Its owner (`user_id`).
    pub user_id: Option<String>,
    /// DeerFlow's status of the thread.
    pub status: Option<String>,
    /// Pinned by its owner.
    pub pinned: bool,
    /// Runs (`operation_kind = 'run'`).
    pub runs: u64,
    /// The newest run's status.
    pub last_run_status: Option<String>,
    /// The newest run's time.
    pub last_run_at: Option<String>,
    /// Tokens over every run.
    pub tokens: u64,
}

/// What the store holds of DeerFlow's beside its threads: its schema and active runs
/// (`None` when DeerFlow lists no threads here). Threads are read a few at a time
/// ([`AppData::threads`]), never all held.
pub struct AppData {
    /// The schema.
    pub schema: AppSchema,
    /// Active runs.
    pub active: Vec<ActiveRun>,
}

/// Threads whose DeerFlow rows one read takes.
const THREADS_PER_READ: usize = 512;

/// Reads DeerFlow's schema and active runs, when the store has its thread list.
pub fn load(store: &dyn Store) -> Result<Option<AppData>, Error> {
    let Some(app) = store.app() else {
        return Ok(None);
    };
    let schema = app.app_schema()?;
    if !schema.lists_threads() {
        return Ok(None);
    }
    let active = app.active_runs(&schema)?;
    Ok(Some(AppData { schema, active }))
}

impl AppData {
    /// Each of `threads` as DeerFlow lists and runs it, in that order; their rows read a
    /// few hundred threads at a time.
    pub fn threads(&self, store: &dyn Store, threads: &[&str]) -> Result<Vec<ThreadApp>, Error> {
        let Some(app) = store.app() else {
            return Ok(threads.iter().map(|_| thread_app(None, None)).collect());
        };
        let mut out = Vec::with_capacity(threads.len());
        for chunk in threads.chunks(THREADS_PER_READ) {
            let ids: Vec<String> = chunk.iter().map(|t| (*t).to_owned()).collect();
            let metas: HashMap<String, ThreadMeta> = app
                .thread_metas(Some(&ids))?
                .into_iter()
                .map(|m| (m.thread_id.clone(), m))
                .collect();
            let runs: HashMap<String, RunSummary> = app
                .run_summaries(&self.schema, Some(&ids))?
                .into_iter()
                .collect();
            out.extend(
                chunk
                    .iter()
                    .map(|t| thread_app(metas.get(*t), runs.get(*t))),
            );
        }
        Ok(out)
    }
}

/// One checkpoint thread as DeerFlow shows it, from its `threads_meta` row and runs.
fn thread_app(meta: Option<&ThreadMeta>, runs: Option<&RunSummary>) -> ThreadApp {
    let runs = runs.cloned().unwrap_or_default();
    ThreadApp {
        listed: meta.is_some(),
        title: meta.and_then(|m| m.display_name.clone()),
        user_id: meta.and_then(|m| m.user_id.clone()),
        status: meta.and_then(|m| m.status.clone()),
        pinned: meta.is_some_and(|m| m.pinned),
        runs: runs.runs,
        last_run_status: runs.last_status,
        last_run_at: runs.last_at,
        tokens: runs.tokens,
    }
}

/// DeerFlow's view of a store (`None`: no DeerFlow tables): the summary's part, and each of
/// `threads` as DeerFlow lists and runs it, in that order.
pub fn view(
    store: &dyn Store,
    threads: &[&str],
) -> Result<Option<(AppSummary, Vec<ThreadApp>)>, Error> {
    let Some((summary, data)) = view_each(store)? else {
        return Ok(None);
    };
    let per_thread = data.threads(store, threads)?;
    Ok(Some((summary, per_thread)))
}

/// DeerFlow's view of a store (`None`: no DeerFlow tables): the summary's part, and the
/// data each thread's part is read from ([`AppData::threads`]) as a report takes them.
pub fn view_each(store: &dyn Store) -> Result<Option<(AppSummary, AppData)>, Error> {
    let Some(mut data) = load(store)? else {
        return Ok(None);
    };
    let tables = match store.app() {
        Some(app) => app.app_space(&data.schema)?,
        None => Vec::new(),
    };
    let listed_threads = tables
        .iter()
        .find(|t| t.table == "threads_meta")
        .map_or(0, |t| t.rows);
    let (mut listed_without, mut unlisted) = (Vec::new(), Vec::new());
    if let Some(app) = store.app() {
        app.listed_without_checkpoints(&mut |t, _| {
            listed_without.push(t);
            Ok(())
        })?;
        app.unlisted_threads(&mut |t| {
            unlisted.push(t);
            Ok(())
        })?;
    }
    let summary = AppSummary {
        revision: data.schema.revision.clone(),
        tables,
        listed_threads,
        listed_without_checkpoints: listed_without,
        unlisted_threads: unlisted,
        active_runs: std::mem::take(&mut data.active),
    };
    Ok(Some((summary, data)))
}

/// `verify`'s findings about DeerFlow's tables for the given threads (every thread with
/// `all`), each to `take` as the store gives it (none held): listed threads without
/// checkpoints (whole-store runs only), checkpoint threads DeerFlow does not list, active
/// runs whose lease is NULL or expired. `now` in Unix seconds.
pub fn findings(
    store: &dyn Store,
    threads: &[String],
    all: bool,
    now: i64,
    take: &mut dyn FnMut(dfck_core::finding::Finding) -> Result<(), Error>,
) -> Result<(), Error> {
    use dfck_core::finding::{Finding, FindingCode};
    let Some(app) = store.app() else {
        return Ok(());
    };
    let schema = app.app_schema()?;
    if !schema.lists_threads() {
        return Ok(());
    }
    let wanted: HashSet<&str> = threads.iter().map(String::as_str).collect();
    let wanted = |t: &str| all || wanted.contains(t);
    // A finding `take` refused ends the stream; its error is the one returned.
    let mut failure = None;
    let mut give = |f: Finding| {
        take(f).map_err(|e| {
            failure = Some(e);
            StoreError::Query {
                what: "writing findings".into(),
                reason: "aborted".into(),
            }
        })
    };
    let mut streamed = || -> Result<(), StoreError> {
        if all {
            app.listed_without_checkpoints(&mut |thread_id, title| {
                give(Finding::new(
                    FindingCode::DeerflowListedWithoutCheckpoints,
                    &thread_id,
                    "",
                    None,
                    format!(
                        "DeerFlow lists this thread{} but it has no checkpoints: opening it shows an empty conversation",
                        title.map(|t| format!(" (\"{t}\")")).unwrap_or_default()
                    ),
                ))
            })?;
        }
        app.unlisted_threads(&mut |t| {
            if !wanted(&t) {
                return Ok(());
            }
            give(Finding::new(
                FindingCode::DeerflowUnlistedThread,
                &t,
                "",
                None,
                "checkpoints without a threads_meta row: DeerFlow's thread list cannot show this thread and its API cannot delete it (`dfck delete` can)".into(),
            ))
        })?;
        for r in app.active_runs(&schema)? {
            if !wanted(&r.thread_id) || !r.lease_expired(now) {
                continue;
            }
            give(Finding::new(
                FindingCode::DeerflowStaleRunLease,
                &r.thread_id,
                "",
                None,
                format!(
                    "{} holds the thread with {}: until a DeerFlow gateway restarts or its heartbeat recovery claims it, new runs and deletes of this thread are refused (HTTP 409)",
                    r.describe(),
                    match &r.lease_expires_at {
                        Some(l) => format!("a lease that expired at {l}"),
                        None => "no lease".into(),
                    }
                ),
            ))?;
        }
        Ok(())
    };
    let result = streamed();
    result.map_err(|e| failure.take().unwrap_or(Error::Store(e)))
}

/// The threads `user_id` owns (DeerFlow's `threads_meta.user_id`) that have checkpoints, for
/// `--user`: a usage error when the store has no DeerFlow thread list or the user owns no
/// thread with checkpoints.
pub fn user_threads(store: &dyn Store, user_id: &str) -> Result<Vec<String>, Error> {
    let app = store.app().ok_or_else(|| no_thread_list(user_id))?;
    let schema = app.app_schema()?;
    if !schema.lists_threads() {
        return Err(no_thread_list(user_id));
    }
    let owned = app.user_thread_ids(user_id)?;
    // The user's threads without checkpoints (the store's threads are not held).
    let mut empty = HashSet::new();
    {
        let mine: HashSet<&str> = owned.iter().map(String::as_str).collect();
        app.listed_without_checkpoints(&mut |t, _| {
            if mine.contains(t.as_str()) {
                empty.insert(t);
            }
            Ok(())
        })?;
    }
    let ids: Vec<String> = owned.into_iter().filter(|t| !empty.contains(t)).collect();
    if ids.is_empty() {
        return Err(Error::Usage(format!(
            "--user {user_id}: the user owns no thread with checkpoints in DeerFlow's thread list"
        )));
    }
    Ok(ids)
}

fn no_thread_list(user_id: &str) -> Error {
    Error::Usage(format!(
        "--user {user_id}: the store has no DeerFlow thread list (threads_meta) to find the user's threads in"
    ))
}
