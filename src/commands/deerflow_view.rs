//! DeerFlow's view of a store beside its checkpoints (docs/deerflow-database.md): its tables
//! in the space report, its thread list and runs per thread in the summary, and what does not
//! match — listed threads without checkpoints, checkpoint threads DeerFlow cannot list, active
//! runs whose lease expired.

use dfck_core::deerflow::{ActiveRun, AppSchema, RunSummary, TableSpace, ThreadMeta};
use dfck_core::error::Error;
use dfck_core::store::Store;
use serde::Serialize;
use std::collections::HashMap;

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

/// What the store holds of DeerFlow's: its schema, threads and runs (`None` when DeerFlow
/// lists no threads here).
pub struct AppData {
    /// The schema.
    pub schema: AppSchema,
    /// `threads_meta` by thread id.
    pub metas: HashMap<String, ThreadMeta>,
    /// Runs by thread id.
    pub runs: HashMap<String, RunSummary>,
    /// Active runs.
    pub active: Vec<ActiveRun>,
}

/// Reads DeerFlow's tables, when the store has its thread list.
pub fn load(store: &dyn Store) -> Result<Option<AppData>, Error> {
    let Some(app) = store.app() else {
        return Ok(None);
    };
    let schema = app.app_schema()?;
    if !schema.lists_threads() {
        return Ok(None);
    }
    let metas = app
        .thread_metas()?
        .into_iter()
        .map(|m| (m.thread_id.clone(), m))
        .collect();
    let runs = app.run_summaries(&schema)?.into_iter().collect();
    let active = app.active_runs(&schema)?;
    Ok(Some(AppData {
        schema,
        metas,
        runs,
        active,
    }))
}

impl AppData {
    /// One checkpoint thread as DeerFlow shows it.
    pub fn thread(&self, thread_id: &str) -> ThreadApp {
        let meta = self.metas.get(thread_id);
        let runs = self.runs.get(thread_id).cloned().unwrap_or_default();
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
}

/// DeerFlow's view of a store (`None`: no DeerFlow tables): the summary's part, and each of
/// `threads` as DeerFlow lists and runs it, in that order.
pub fn view(
    store: &dyn Store,
    threads: &[&str],
) -> Result<Option<(AppSummary, Vec<ThreadApp>)>, Error> {
    Ok(view_each(store)?.map(|(summary, data)| {
        let per_thread = threads.iter().map(|t| data.thread(t)).collect();
        (summary, per_thread)
    }))
}

/// DeerFlow's view of a store (`None`: no DeerFlow tables): the summary's part, and the
/// data each thread's part is read from ([`AppData::thread`]) as a report takes them.
pub fn view_each(store: &dyn Store) -> Result<Option<(AppSummary, AppData)>, Error> {
    let Some(mut data) = load(store)? else {
        return Ok(None);
    };
    let tables = match store.app() {
        Some(app) => app.app_space(&data.schema)?,
        None => Vec::new(),
    };
    let checkpointed = store_thread_ids(store)?;
    let mut listed_without: Vec<String> = data
        .metas
        .keys()
        .filter(|t| !checkpointed.contains(t.as_str()))
        .cloned()
        .collect();
    listed_without.sort();
    let mut unlisted: Vec<String> = checkpointed
        .iter()
        .filter(|t| !data.metas.contains_key(t.as_str()))
        .cloned()
        .collect();
    unlisted.sort();
    let summary = AppSummary {
        revision: data.schema.revision.clone(),
        tables,
        listed_threads: data.metas.len() as u64,
        listed_without_checkpoints: listed_without,
        unlisted_threads: unlisted,
        active_runs: std::mem::take(&mut data.active),
    };
    Ok(Some((summary, data)))
}

/// Every thread id with checkpoints.
fn store_thread_ids(store: &dyn Store) -> Result<std::collections::BTreeSet<String>, Error> {
    let mut out = std::collections::BTreeSet::new();
    store.scan_thread_ids(&mut |t| {
        out.insert(t);
        Ok(())
    })?;
    Ok(out)
}

/// `verify`'s findings about DeerFlow's tables for the given threads (every thread with
/// `all`): listed threads without checkpoints (whole-store runs only), checkpoint threads
/// DeerFlow does not list, active runs whose lease is NULL or expired. `now` in Unix seconds.
pub fn findings(
    store: &dyn Store,
    threads: &[String],
    all: bool,
    now: i64,
) -> Result<Vec<dfck_core::finding::Finding>, Error> {
    use dfck_core::finding::{Finding, FindingCode};
    let Some(data) = load(store)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let checkpointed = store_thread_ids(store)?;
    if all {
        let mut listed: Vec<&ThreadMeta> = data
            .metas
            .values()
            .filter(|m| !checkpointed.contains(&m.thread_id))
            .collect();
        listed.sort_by(|a, b| a.thread_id.cmp(&b.thread_id));
        for m in listed {
            out.push(Finding::new(
                FindingCode::DeerflowListedWithoutCheckpoints,
                &m.thread_id,
                "",
                None,
                format!(
                    "DeerFlow lists this thread{} but it has no checkpoints: opening it shows an empty conversation",
                    m.display_name
                        .as_deref()
                        .map(|t| format!(" (\"{t}\")"))
                        .unwrap_or_default()
                ),
            ));
        }
    }
    let wanted = |t: &str| all || threads.iter().any(|x| x == t);
    for t in checkpointed.iter().filter(|t| wanted(t)) {
        if !data.metas.contains_key(t) {
            out.push(Finding::new(
                FindingCode::DeerflowUnlistedThread,
                t,
                "",
                None,
                "checkpoints without a threads_meta row: DeerFlow's thread list cannot show this thread and its API cannot delete it (`dfck delete` can)".into(),
            ));
        }
    }
    for r in data.active.iter().filter(|r| wanted(&r.thread_id)) {
        if r.lease_expired(now) {
            out.push(Finding::new(
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
            ));
        }
    }
    Ok(out)
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
    let checkpointed = store_thread_ids(store)?;
    let ids: Vec<String> = owned
        .into_iter()
        .filter(|t| checkpointed.contains(t))
        .collect();
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
