//! The SQL side of DeerFlow's own tables (`crate::deerflow`): what the read commands show of
//! them and what `dfck delete` changes — the thread-operation reservation DeerFlow itself
//! takes, and the thread's rows. Both backends implement [`AppTables`].

use crate::deerflow::{ActiveRun, AppSchema, RunSummary, TableSpace, ThreadMeta, ThreadRows};
use crate::error::StoreError;

/// Reading (and, on a read-write connection, changing) DeerFlow's tables.
pub trait AppTables {
    /// Which DeerFlow tables the store holds, and its alembic revision.
    fn app_schema(&self) -> Result<AppSchema, StoreError>;

    /// The threads `threads_meta` lists that have no checkpoints, with their titles
    /// (`display_name`), in byte order of their ids; streamed, none held.
    fn listed_without_checkpoints(
        &self,
        f: &mut dyn FnMut(String, Option<String>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// The threads with checkpoints that `threads_meta` does not list, in byte order of
    /// their ids; streamed, none held.
    fn unlisted_threads(
        &self,
        f: &mut dyn FnMut(String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// The `threads_meta` rows of `ids` (every row when `None`), by thread id.
    fn thread_metas(&self, ids: Option<&[String]>) -> Result<Vec<ThreadMeta>, StoreError>;

    /// The runs (`operation_kind = 'run'`) of each thread of `ids` (every thread when
    /// `None`), by thread id.
    fn run_summaries(
        &self,
        schema: &AppSchema,
        ids: Option<&[String]>,
    ) -> Result<Vec<(String, RunSummary)>, StoreError>;

    /// Every active `runs` row (`pending` or `running`), of any operation kind, by thread id.
    fn active_runs(&self, schema: &AppSchema) -> Result<Vec<ActiveRun>, StoreError>;

    /// Rows and bytes of each DeerFlow table present.
    fn app_space(&self, schema: &AppSchema) -> Result<Vec<TableSpace>, StoreError>;

    /// The threads `user_id` owns (`threads_meta.user_id`), sorted.
    fn user_thread_ids(&self, user_id: &str) -> Result<Vec<String>, StoreError>;

    /// One thread's rows in each thread-scoped table present.
    fn thread_rows(&self, thread_id: &str, schema: &AppSchema) -> Result<ThreadRows, StoreError>;

    /// Takes DeerFlow's thread-operation reservation for a delete, in a committed
    /// transaction of its own: a `pending` `runs` row with `operation_kind = 'delete'`,
    /// owner `owner`, a lease of [`crate::deerflow::LEASE_SECS`]. DeerFlow's partial unique
    /// index (one active row per thread) makes the insert fail while work is in flight: then
    /// `Ok(false)`, nothing written.
    fn reserve_delete(
        &self,
        run_id: &str,
        thread_id: &str,
        user_id: Option<&str>,
        owner: &str,
    ) -> Result<bool, StoreError>;

    /// Takes over `run_id` (a reservation an earlier dfck left behind), renewing its lease
    /// under `owner`, in a committed transaction of its own.
    fn take_over(&self, run_id: &str, owner: &str) -> Result<(), StoreError>;

    /// Renews the lease of dfck's reservation `run_id` (committed at once).
    fn renew(&self, run_id: &str, owner: &str) -> Result<(), StoreError>;

    /// Releases the reservation (deletes its row; committed at once).
    fn release(&self, run_id: &str) -> Result<(), StoreError>;

    /// Inside the thread's transaction: deletes its `threads_meta` row and, with `erase`,
    /// its rows in every other thread-scoped table (the rows whose thread column names it),
    /// except the reservation `keep_run`. Returns the rows deleted per table.
    fn delete_thread_app_rows(
        &self,
        thread_id: &str,
        schema: &AppSchema,
        erase: bool,
        keep_run: Option<&str>,
    ) -> Result<ThreadRows, StoreError>;
}

/// An ISO 8601 UTC time from DeerFlow's stored text (`2026-08-20 08:12:01.250000` →
/// `2026-08-20T08:12:01.250000+00:00`).
pub(crate) fn iso_utc(text: &str) -> String {
    let t = text.trim();
    if t.len() >= 19 && (t.ends_with("+00:00") || t.ends_with('Z')) {
        return t.replacen(' ', "T", 1);
    }
    format!("{}+00:00", t.replacen(' ', "T", 1))
}

/// What dfck reads of `metadata_json`: whether the owner pinned the thread
/// (`deerflow_pinned`), and the keys set to anything but `null` or `false`.
pub(crate) fn metadata_flags(metadata: Option<&str>) -> (bool, Vec<String>) {
    let Some(serde_json::Value::Object(map)) =
        metadata.and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
    else {
        return (false, Vec::new());
    };
    let pinned = map
        .get("deerflow_pinned")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let keys = map
        .iter()
        .filter(|(_, v)| !matches!(v, serde_json::Value::Null | serde_json::Value::Bool(false)))
        .map(|(k, _)| k.clone())
        .collect();
    (pinned, keys)
}

/// The tables of [`crate::deerflow::TABLES`] among `present`, in that order.
pub(crate) fn known(present: &[String]) -> Vec<String> {
    crate::deerflow::TABLES
        .iter()
        .filter(|t| present.iter().any(|p| p == *t))
        .map(|t| (*t).to_owned())
        .collect()
}
