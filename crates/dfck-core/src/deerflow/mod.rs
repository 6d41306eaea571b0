//! DeerFlow's own tables, beside LangGraph's in the same database (docs/deerflow-database.md):
//! which of them a store holds and at which alembic revision, the thread list DeerFlow
//! shows (`threads_meta`), its runs and their leases, and DeerFlow's rules dfck follows — what
//! makes a run active or its lease expired, which tables hold a thread's rows, the thread-id
//! and user-id rules of its file layout ([`files`]), and its checkpoint history cache
//! ([`cache`]). The SQL is the store layer's (`crate::store::app`).

pub mod cache;
pub mod files;

use serde::Serialize;

/// Every table DeerFlow's bootstrap creates (alembic head `0013_mcp_task_notifications`), in
/// the order a copy fills them (a referenced table before the one that references it).
pub const TABLES: [&str; 15] = [
    "users",
    "threads_meta",
    "runs",
    "run_events",
    "feedback",
    "agents",
    "scheduled_tasks",
    "scheduled_task_runs",
    "channel_connections",
    "channel_credentials",
    "channel_oauth_states",
    "channel_conversations",
    "mcp_tasks",
    "webhook_deliveries",
    "alembic_version",
];

/// The tables holding rows of one thread, and the column that names it. DeerFlow's own thread
/// delete removes only the `threads_meta` row; `dfck delete --erase` removes them all.
pub const THREAD_TABLES: [(&str, &str); 8] = [
    ("threads_meta", "thread_id"),
    ("runs", "thread_id"),
    ("run_events", "thread_id"),
    ("feedback", "thread_id"),
    ("mcp_tasks", "thread_id"),
    ("channel_conversations", "thread_id"),
    ("scheduled_tasks", "thread_id"),
    ("scheduled_task_runs", "thread_id"),
];

/// The revision that brought `runs.operation_kind`, which DeerFlow's thread-operation
/// reservation (and so `dfck delete`) needs.
pub const DELETE_REVISION: &str = "0008_thread_operation_kind";

/// A lease counts as expired this long after its time (DeerFlow's `grace_seconds` default).
pub const LEASE_GRACE_SECS: i64 = 10;

/// How long dfck's own reservation lease runs before it is renewed (DeerFlow's
/// `lease_seconds` default).
pub const LEASE_SECS: i64 = 30;

/// What a store holds of DeerFlow's schema.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AppSchema {
    /// `alembic_version.version_num`, when there is one.
    pub revision: Option<String>,
    /// The DeerFlow tables present, in [`TABLES`] order.
    pub tables: Vec<String>,
}

impl AppSchema {
    /// Whether the store holds `table`.
    pub fn has(&self, table: &str) -> bool {
        self.tables.iter().any(|t| t == table)
    }

    /// Whether DeerFlow lists its threads here (`threads_meta` exists).
    pub fn lists_threads(&self) -> bool {
        self.has("threads_meta")
    }

    /// Whether the schema is at `revision` or later (revisions are numbered `NNNN_name`).
    pub fn at_least(&self, revision: &str) -> bool {
        let number = |r: &str| r.split('_').next().and_then(|n| n.parse::<u32>().ok());
        matches!(
            (self.revision.as_deref().and_then(number), number(revision)),
            (Some(have), Some(want)) if have >= want
        )
    }
}

/// One thread as DeerFlow lists it (`threads_meta`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ThreadMeta {
    /// Thread id.
    pub thread_id: String,
    /// Owner (`None`: a shared or pre-authentication row).
    pub user_id: Option<String>,
    /// The title DeerFlow shows.
    pub display_name: Option<String>,
    /// `idle`, `running`, `error`, `interrupted`, `timeout`.
    pub status: Option<String>,
    /// Last update (ISO 8601, UTC).
    pub updated_at: Option<String>,
    /// Pinned by its owner (`metadata_json.deerflow_pinned`).
    pub pinned: bool,
    /// Keys of `metadata_json` set to anything but `null` or `false` (policy exemptions).
    #[serde(skip)]
    pub metadata_keys: Vec<String>,
}

/// A thread's runs (`operation_kind = 'run'` only: reservations are not runs).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunSummary {
    /// Runs.
    pub runs: u64,
    /// The newest run's status.
    pub last_status: Option<String>,
    /// The newest run's creation time (ISO 8601, UTC).
    pub last_at: Option<String>,
    /// Tokens over every run (`total_tokens`).
    pub tokens: u64,
}

/// A `runs` row DeerFlow counts as active (`pending` or `running`), of any operation kind.
#[derive(Debug, Clone, Serialize)]
pub struct ActiveRun {
    /// Run id.
    pub run_id: String,
    /// Thread id.
    pub thread_id: String,
    /// `pending` or `running`.
    pub status: String,
    /// `run`, `delete`, `checkpoint_write`, `artifact_write`.
    pub operation_kind: String,
    /// The worker holding it.
    pub owner_worker_id: Option<String>,
    /// Its lease (ISO 8601, UTC; `None`: never set).
    pub lease_expires_at: Option<String>,
}

impl ActiveRun {
    /// Whether its lease is NULL or passed more than the grace ago, as DeerFlow decides it
    /// (`now` in Unix seconds): then no live worker can be proven to hold it.
    pub fn lease_expired(&self, now: i64) -> bool {
        match self
            .lease_expires_at
            .as_deref()
            .and_then(crate::time::unix_seconds)
        {
            Some(t) => t < now - LEASE_GRACE_SECS,
            None => true,
        }
    }

    /// Whether dfck wrote it (a `dfck delete` reservation: owner `dfck:HOST:PID`).
    pub fn is_dfcks(&self) -> bool {
        self.operation_kind == "delete"
            && self
                .owner_worker_id
                .as_deref()
                .is_some_and(|o| o.starts_with(OWNER_PREFIX))
    }

    /// What holds the thread, worded for a refusal.
    pub fn describe(&self) -> String {
        let what = match self.operation_kind.as_str() {
            "run" => format!("a {} run", self.status),
            other => format!("a {} {other} operation", self.status),
        };
        match &self.owner_worker_id {
            Some(o) => format!("{what} (run {}, worker {o})", self.run_id),
            None => format!("{what} (run {})", self.run_id),
        }
    }
}

/// The prefix of the worker id dfck's reservations carry.
pub const OWNER_PREFIX: &str = "dfck:";

/// The worker id of this dfck process: `dfck:HOST:PID`.
pub fn owner_worker_id() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    format!("{OWNER_PREFIX}{host}:{}", std::process::id())
}

/// Rows and bytes of one DeerFlow table.
#[derive(Debug, Clone, Serialize)]
pub struct TableSpace {
    /// Table name.
    pub table: String,
    /// Rows.
    pub rows: u64,
    /// Bytes on disk (PostgreSQL: with TOAST and indexes; SQLite: its pages, when the
    /// `dbstat` table is compiled in, else the bytes of its values).
    pub bytes: u64,
}

/// Rows one thread has in each thread-scoped table.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ThreadRows {
    /// (table, rows), in [`THREAD_TABLES`] order, tables with no row left out.
    pub tables: Vec<(String, u64)>,
}

impl ThreadRows {
    /// Rows over every table.
    pub fn total(&self) -> u64 {
        self.tables.iter().map(|(_, n)| n).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_compare_by_number() {
        let s = AppSchema {
            revision: Some("0013_mcp_task_notifications".into()),
            tables: vec![],
        };
        assert!(s.at_least(DELETE_REVISION));
        let old = AppSchema {
            revision: Some("0007_scheduled_run_active_index".into()),
            tables: vec![],
        };
        assert!(!old.at_least(DELETE_REVISION));
        assert!(!AppSchema::default().at_least(DELETE_REVISION));
    }

    #[test]
    fn leases_expire_as_deerflow_decides() {
        let mut r = ActiveRun {
            run_id: "r".into(),
            thread_id: "t".into(),
            status: "running".into(),
            operation_kind: "run".into(),
            owner_worker_id: None,
            lease_expires_at: None,
        };
        let now = crate::time::unix_seconds("2026-08-20T08:00:00Z").unwrap();
        assert!(r.lease_expired(now), "NULL is expired");
        r.lease_expires_at = Some("2026-08-20T07:59:55+00:00".into());
        assert!(!r.lease_expired(now), "within the grace");
        r.lease_expires_at = Some("2026-08-20T07:59:40+00:00".into());
        assert!(r.lease_expired(now));
    }
}
