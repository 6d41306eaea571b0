//! `dfck_maintenance` in a SQLite store ([`MaintenanceTable`]): every change in a
//! `BEGIN IMMEDIATE` transaction of its own, times from `unixepoch()`.

use super::SqliteStore;
use crate::error::StoreError;
use crate::maintenance::{Acquired, Holder, LastRun, MaintenanceState, SWEEPER, TABLE};
use crate::store::maintenance::{COLUMNS, MaintenanceTable, run_json, state_of};
use rusqlite::{OptionalExtension, params};

fn q(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Query {
        what: what.to_owned(),
        reason: e.to_string(),
    }
}

impl SqliteStore {
    fn read_state(&self) -> Result<Option<MaintenanceState>, StoreError> {
        let what = "reading dfck_maintenance";
        let exists: bool = self
            .conn
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                params![TABLE],
                |r| r.get(0),
            )
            .map_err(q(what))?;
        if !exists {
            return Ok(None);
        }
        let row = self
            .conn
            .query_row(
                "SELECT token, holder_host, holder_pid, holder_version, expires_at, \
                 cursor_thread, last_run, expires_at > unixepoch() FROM dfck_maintenance WHERE name = ?1",
                params![SWEEPER],
                |r| {
                    let live: bool = r.get(7)?;
                    Ok(state_of(
                        r.get::<_, Option<String>>(0)?.filter(|_| live),
                        (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?),
                        r.get(5)?,
                        r.get(6)?,
                    ))
                },
            )
            .optional()
            .map_err(q(what))?;
        Ok(Some(row.unwrap_or_default()))
    }
}

impl MaintenanceTable for SqliteStore {
    fn maintenance_state(&self) -> Result<Option<MaintenanceState>, StoreError> {
        self.read_state()
    }

    fn acquire_lease(
        &self,
        holder: &Holder,
        token: &str,
        ttl_secs: i64,
    ) -> Result<Acquired, StoreError> {
        let what = "taking the maintenance lease";
        self.committed(|| {
            self.conn
                .execute_batch(&format!("CREATE TABLE IF NOT EXISTS {TABLE} ({COLUMNS})"))
                .map_err(q(what))?;
            let granted: Option<Option<String>> = self
                .conn
                .query_row(
                    "INSERT INTO dfck_maintenance (name, token, holder_host, holder_pid, \
                     holder_version, acquired_at, expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, unixepoch(), unixepoch() + ?6) \
                     ON CONFLICT (name) DO UPDATE SET token = excluded.token, \
                     holder_host = excluded.holder_host, holder_pid = excluded.holder_pid, \
                     holder_version = excluded.holder_version, acquired_at = excluded.acquired_at, \
                     expires_at = excluded.expires_at \
                     WHERE dfck_maintenance.token IS NULL \
                     OR dfck_maintenance.expires_at <= excluded.acquired_at \
                     RETURNING cursor_thread",
                    params![
                        SWEEPER,
                        token,
                        holder.host,
                        i64::from(holder.pid),
                        holder.version,
                        ttl_secs
                    ],
                    |r| r.get(0),
                )
                .optional()
                .map_err(q(what))?;
            match granted {
                Some(cursor) => Ok(Acquired::Granted { cursor }),
                None => {
                    let state = self.read_state()?.unwrap_or_default();
                    Ok(Acquired::Held(state.holder.unwrap_or(Holder {
                        host: String::new(),
                        pid: 0,
                        version: String::new(),
                        expires_at: 0,
                    })))
                }
            }
        })
    }

    fn renew_lease(
        &self,
        token: &str,
        ttl_secs: i64,
        cursor: Option<&str>,
    ) -> Result<bool, StoreError> {
        let what = "renewing the maintenance lease";
        self.committed(|| {
            self.conn
                .execute(
                    "UPDATE dfck_maintenance SET expires_at = unixepoch() + ?1, cursor_thread = ?2 \
                     WHERE name = ?3 AND token = ?4",
                    params![ttl_secs, cursor, SWEEPER, token],
                )
                .map(|n| n == 1)
                .map_err(q(what))
        })
    }

    fn release_lease(
        &self,
        token: &str,
        cursor: Option<&str>,
        last_run: Option<&LastRun>,
    ) -> Result<(), StoreError> {
        let what = "releasing the maintenance lease";
        let run = run_json(last_run);
        self.committed(|| {
            self.conn
                .execute(
                    "UPDATE dfck_maintenance SET token = NULL, expires_at = 0, cursor_thread = ?1, \
                     last_run = coalesce(?2, last_run) WHERE name = ?3 AND token = ?4",
                    params![cursor, run, SWEEPER, token],
                )
                .map(|_| ())
                .map_err(q(what))
        })
    }
}
