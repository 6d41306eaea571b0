//! The SQL side of `dfck maintain`'s table ([`crate::maintenance`]): taking, renewing and
//! releasing the sweeper lease in single statements (safe behind a transaction-pooling
//! proxy: no session state, no advisory lock), and reading what the table holds. Both
//! backends implement [`MaintenanceTable`]; times are the database's clock in Unix seconds.

use crate::error::StoreError;
use crate::maintenance::{Acquired, Holder, LastRun, MaintenanceState};

/// `dfck_maintenance`'s columns, the same on both backends.
pub(crate) const COLUMNS: &str = "name TEXT PRIMARY KEY, token TEXT, holder_host TEXT, \
     holder_pid BIGINT, holder_version TEXT, acquired_at BIGINT, expires_at BIGINT NOT NULL DEFAULT 0, \
     cursor_thread TEXT, last_run TEXT";

/// dfck's own lease table.
pub trait MaintenanceTable {
    /// What the table holds; `None` when the store has no such table (nothing was ever
    /// maintained). Read-only.
    fn maintenance_state(&self) -> Result<Option<MaintenanceState>, StoreError>;

    /// Creates the table when missing and takes the lease for `ttl_secs` unless another
    /// holder's lease is still running, in one committed transaction.
    fn acquire_lease(
        &self,
        holder: &Holder,
        token: &str,
        ttl_secs: i64,
    ) -> Result<Acquired, StoreError>;

    /// Extends this run's lease (`token`) by `ttl_secs` from now and records the cursor;
    /// `false` when the lease is no longer this run's.
    fn renew_lease(
        &self,
        token: &str,
        ttl_secs: i64,
        cursor: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Frees the lease, recording the cursor and the run.
    fn release_lease(
        &self,
        token: &str,
        cursor: Option<&str>,
        last_run: Option<&LastRun>,
    ) -> Result<(), StoreError>;
}

/// The state from a row's columns (a `last_run` that does not parse is left out).
pub(crate) fn state_of(
    token: Option<String>,
    holder: (Option<String>, Option<i64>, Option<String>, Option<i64>),
    cursor: Option<String>,
    last_run: Option<String>,
) -> MaintenanceState {
    let (host, pid, version, expires) = holder;
    MaintenanceState {
        holder: token.and(Some(Holder {
            host: host.unwrap_or_default(),
            pid: pid.and_then(|p| u32::try_from(p).ok()).unwrap_or(0),
            version: version.unwrap_or_default(),
            expires_at: expires.unwrap_or(0),
        })),
        cursor,
        last_run: last_run.and_then(|j| serde_json::from_str(&j).ok()),
    }
}

/// A run's record as the column stores it.
pub(crate) fn run_json(run: Option<&LastRun>) -> Option<String> {
    run.and_then(|r| serde_json::to_string(r).ok())
}
