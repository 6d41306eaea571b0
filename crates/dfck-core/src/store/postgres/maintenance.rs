//! `dfck_maintenance` in a PostgreSQL store ([`MaintenanceTable`]): each change one
//! statement in a transaction of its own (nothing kept in the session, so a
//! transaction-pooling proxy is fine), times from the server's clock. The table is in the
//! session's `search_path`, beside the store's.

use super::PostgresStore;
use crate::error::StoreError;
use crate::maintenance::{Acquired, Holder, LastRun, MaintenanceState, SWEEPER, TABLE};
use crate::store::maintenance::{COLUMNS, MaintenanceTable, run_json, state_of};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

/// The server's clock in Unix seconds.
const NOW: &str = "extract(epoch FROM clock_timestamp())::bigint";

impl PostgresStore {
    /// `BEGIN`, `before` (plain SQL), `sql` with text parameters, `COMMIT`; its rows.
    fn committed_rows(
        &self,
        what: &str,
        before: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let typed: Vec<(&(dyn ToSql + Sync), Type)> =
            params.iter().map(|p| (*p, Type::TEXT)).collect();
        let run = || {
            self.rt.block_on(async {
                self.client.batch_execute("BEGIN").await?;
                let out = async {
                    if !before.is_empty() {
                        self.client.batch_execute(before).await?;
                    }
                    self.client.query_typed(sql, &typed).await
                }
                .await;
                match out {
                    Ok(rows) => {
                        self.client.batch_execute("COMMIT").await?;
                        Ok(rows)
                    }
                    Err(e) => {
                        let _ = self.client.batch_execute("ROLLBACK").await;
                        Err(e)
                    }
                }
            })
        };
        // Two first runs creating the table at once: one of them meets the other's catalog
        // row (a unique violation while the other's transaction is open, "type … already
        // exists" once it committed) and is simply tried again.
        let raced = [
            SqlState::UNIQUE_VIOLATION,
            SqlState::DUPLICATE_OBJECT,
            SqlState::DUPLICATE_TABLE,
        ];
        match run() {
            Err(e) if e.code().is_some_and(|c| raced.contains(c)) => run(),
            other => other,
        }
        .map_err(|e| self.err(what, e))
    }

    fn read_state(&self) -> Result<Option<MaintenanceState>, StoreError> {
        let what = "reading dfck_maintenance";
        let exists = self.query(what, "SELECT to_regclass($1) IS NOT NULL", &[&TABLE])?;
        if !exists
            .first()
            .and_then(|r| r.try_get::<_, bool>(0).ok())
            .unwrap_or(false)
        {
            return Ok(None);
        }
        let rows = self.query(
            what,
            &format!(
                "SELECT token, holder_host, holder_pid, holder_version, expires_at, \
                 cursor_thread, last_run, expires_at > {NOW} FROM {TABLE} WHERE name = $1"
            ),
            &[&SWEEPER],
        )?;
        Ok(Some(rows.first().map(state_from).unwrap_or_default()))
    }
}

fn state_from(r: &Row) -> MaintenanceState {
    let live: bool = r.try_get(7).unwrap_or(false);
    state_of(
        r.try_get::<_, Option<String>>(0)
            .ok()
            .flatten()
            .filter(|_| live),
        (
            r.try_get(1).ok().flatten(),
            r.try_get(2).ok().flatten(),
            r.try_get(3).ok().flatten(),
            r.try_get(4).ok().flatten(),
        ),
        r.try_get(5).ok().flatten(),
        r.try_get(6).ok().flatten(),
    )
}

impl MaintenanceTable for PostgresStore {
    fn maintenance_state(&self) -> Result<Option<MaintenanceState>, StoreError> {
        self.read_state()
    }

    fn acquire_lease(
        &self,
        holder: &Holder,
        token: &str,
        ttl_secs: i64,
    ) -> Result<Acquired, StoreError> {
        let pid = holder.pid.to_string();
        let ttl = ttl_secs.to_string();
        let rows = self.committed_rows(
            "taking the maintenance lease",
            &format!("CREATE TABLE IF NOT EXISTS {TABLE} ({COLUMNS})"),
            &format!(
                "INSERT INTO {TABLE} (name, token, holder_host, holder_pid, holder_version, \
                 acquired_at, expires_at) VALUES ($1, $2, $3, $4::bigint, $5, {NOW}, {NOW} + $6::bigint) \
                 ON CONFLICT (name) DO UPDATE SET token = excluded.token, \
                 holder_host = excluded.holder_host, holder_pid = excluded.holder_pid, \
                 holder_version = excluded.holder_version, acquired_at = excluded.acquired_at, \
                 expires_at = excluded.expires_at \
                 WHERE {TABLE}.token IS NULL OR {TABLE}.expires_at <= excluded.acquired_at \
                 RETURNING cursor_thread"
            ),
            &[&SWEEPER, &token, &holder.host, &pid, &holder.version, &ttl],
        )?;
        if let Some(r) = rows.first() {
            return Ok(Acquired::Granted {
                cursor: r.try_get(0).ok().flatten(),
            });
        }
        let state = self.read_state()?.unwrap_or_default();
        Ok(Acquired::Held(state.holder.unwrap_or(Holder {
            host: String::new(),
            pid: 0,
            version: String::new(),
            expires_at: 0,
        })))
    }

    fn renew_lease(
        &self,
        token: &str,
        ttl_secs: i64,
        cursor: Option<&str>,
    ) -> Result<bool, StoreError> {
        let ttl = ttl_secs.to_string();
        let rows = self.committed_rows(
            "renewing the maintenance lease",
            "",
            &format!(
                "UPDATE {TABLE} SET expires_at = {NOW} + $1::bigint, cursor_thread = $2 \
                 WHERE name = $3 AND token = $4 RETURNING name"
            ),
            &[&ttl, &cursor, &SWEEPER, &token],
        )?;
        Ok(rows.len() == 1)
    }

    fn release_lease(
        &self,
        token: &str,
        cursor: Option<&str>,
        last_run: Option<&LastRun>,
    ) -> Result<(), StoreError> {
        let run = run_json(last_run);
        self.committed_rows(
            "releasing the maintenance lease",
            "",
            &format!(
                "UPDATE {TABLE} SET token = NULL, expires_at = 0, cursor_thread = $1, \
                 last_run = coalesce($2, last_run) WHERE name = $3 AND token = $4 RETURNING name"
            ),
            &[&cursor, &run, &SWEEPER, &token],
        )?;
        Ok(())
    }
}
