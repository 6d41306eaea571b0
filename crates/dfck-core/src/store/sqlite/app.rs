//! DeerFlow's tables in a SQLite store ([`AppTables`]): times are stored as UTC text
//! (`2026-08-20 08:12:01.250000`), JSON as text, booleans as 0/1.

use super::SqliteStore;
use crate::deerflow::{
    self, ActiveRun, AppSchema, RunSummary, THREAD_TABLES, TableSpace, ThreadMeta, ThreadRows,
};
use crate::error::StoreError;
use crate::store::app::{AppTables, iso_utc, known, metadata_flags};
use rusqlite::{OptionalExtension, params};

fn q(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Query {
        what: what.to_owned(),
        reason: e.to_string(),
    }
}

impl SqliteStore {
    fn has_column(&self, table: &str, column: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT count(*) > 0 FROM pragma_table_info(?1) WHERE name = ?2",
                params![table, column],
                |r| r.get(0),
            )
            .map_err(q("reading DeerFlow's schema"))
    }

    /// `BEGIN IMMEDIATE`, `f`, `COMMIT` (or `ROLLBACK` on an error), waiting for the write
    /// lock as a write transaction does.
    pub(super) fn committed<T>(
        &self,
        f: impl FnOnce() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match crate::store::WriteStore::lock_thread(self, "")? {
            crate::store::ThreadLock::Held => {}
            crate::store::ThreadLock::Busy(h) => {
                return Err(StoreError::Query {
                    what: "DeerFlow's thread-operation reservation".into(),
                    reason: h.unwrap_or_else(|| "the store is locked".into()),
                });
            }
            crate::store::ThreadLock::Contended(h) => {
                return Err(StoreError::Query {
                    what: "DeerFlow's thread-operation reservation".into(),
                    reason: h,
                });
            }
        }
        match f() {
            Ok(v) => {
                self.commit()?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.rollback();
                Err(e)
            }
        }
    }
}

/// Now as DeerFlow's SQLite stores a time, `secs` from now.
fn at(secs: i64) -> String {
    crate::time::deerflow_text(crate::time::now_micros() + secs * 1_000_000)
}

impl AppTables for SqliteStore {
    fn app_schema(&self) -> Result<AppSchema, StoreError> {
        let what = "reading DeerFlow's schema";
        let mut st = self
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .map_err(q(what))?;
        let names: Vec<String> = st
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(q(what))?;
        let tables = known(&names);
        let revision = if tables.iter().any(|t| t == "alembic_version") {
            self.conn
                .query_row("SELECT version_num FROM alembic_version LIMIT 1", [], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(q(what))?
        } else {
            None
        };
        Ok(AppSchema { revision, tables })
    }

    fn thread_metas(&self, ids: Option<&[String]>) -> Result<Vec<ThreadMeta>, StoreError> {
        let what = "reading DeerFlow's thread list";
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT thread_id, user_id, display_name, status, CAST(updated_at AS TEXT), \
                 CAST(metadata_json AS TEXT) FROM threads_meta {} ORDER BY thread_id",
                of_ids(ids, "thread_id")
            ))
            .map_err(q(what))?;
        let rows = st
            .query_map(rusqlite::params_from_iter(ids_param(ids)), |r| {
                let (pinned, metadata_keys) =
                    metadata_flags(r.get::<_, Option<String>>(5)?.as_deref());
                Ok(ThreadMeta {
                    pinned,
                    metadata_keys,
                    thread_id: r.get(0)?,
                    user_id: r.get(1)?,
                    display_name: r.get(2)?,
                    status: r.get(3)?,
                    updated_at: r.get::<_, Option<String>>(4)?.map(|t| iso_utc(&t)),
                })
            })
            .and_then(|rows| rows.collect())
            .map_err(q(what))?;
        Ok(rows)
    }

    fn run_summaries(
        &self,
        schema: &AppSchema,
        ids: Option<&[String]>,
    ) -> Result<Vec<(String, RunSummary)>, StoreError> {
        if !schema.has("runs") {
            return Ok(Vec::new());
        }
        let what = "reading DeerFlow's runs";
        // Reservations are runs rows too: only operation_kind 'run' counts (before revision
        // 0008 every row is a run).
        let runs = if self.has_column("runs", "operation_kind")? {
            "(SELECT * FROM runs WHERE operation_kind = 'run')"
        } else {
            "runs"
        };
        let sql = format!(
            "SELECT r.thread_id, count(*), sum(r.total_tokens),              (SELECT l.status FROM {runs} l WHERE l.thread_id = r.thread_id               ORDER BY l.created_at DESC, l.run_id DESC LIMIT 1),              CAST(max(r.created_at) AS TEXT) FROM {runs} r {} GROUP BY r.thread_id ORDER BY r.thread_id",
            of_ids(ids, "r.thread_id")
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(q(what))?;
        let rows = st
            .query_map(rusqlite::params_from_iter(ids_param(ids)), |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    RunSummary {
                        runs: r.get::<_, i64>(1)?.max(0) as u64,
                        tokens: r.get::<_, Option<i64>>(2)?.unwrap_or(0).max(0) as u64,
                        last_status: r.get(3)?,
                        last_at: r.get::<_, Option<String>>(4)?.map(|t| iso_utc(&t)),
                    },
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(q(what))?;
        Ok(rows)
    }

    fn active_runs(&self, schema: &AppSchema) -> Result<Vec<ActiveRun>, StoreError> {
        if !schema.has("runs") {
            return Ok(Vec::new());
        }
        let what = "reading DeerFlow's active runs";
        let kind = if self.has_column("runs", "operation_kind")? {
            "operation_kind"
        } else {
            "'run'"
        };
        let lease = if self.has_column("runs", "lease_expires_at")? {
            "CAST(lease_expires_at AS TEXT)"
        } else {
            "NULL"
        };
        let owner = if self.has_column("runs", "owner_worker_id")? {
            "owner_worker_id"
        } else {
            "NULL"
        };
        let sql = format!(
            "SELECT run_id, thread_id, status, {kind}, {owner}, {lease} FROM runs \
             WHERE status IN ('pending', 'running') ORDER BY thread_id, run_id"
        );
        let mut st = self.conn.prepare(&sql).map_err(q(what))?;
        let rows = st
            .query_map([], |r| {
                Ok(ActiveRun {
                    run_id: r.get(0)?,
                    thread_id: r.get(1)?,
                    status: r.get(2)?,
                    operation_kind: r.get(3)?,
                    owner_worker_id: r.get(4)?,
                    lease_expires_at: r.get::<_, Option<String>>(5)?.map(|t| iso_utc(&t)),
                })
            })
            .and_then(|rows| rows.collect())
            .map_err(q(what))?;
        Ok(rows)
    }

    fn app_space(&self, schema: &AppSchema) -> Result<Vec<TableSpace>, StoreError> {
        let what = "measuring DeerFlow's tables";
        let mut out = Vec::new();
        for table in &schema.tables {
            let mut st = self
                .conn
                .prepare("SELECT name FROM pragma_table_info(?1)")
                .map_err(q(what))?;
            let columns: Vec<String> = st
                .query_map([table], |r| r.get(0))
                .and_then(|rows| rows.collect())
                .map_err(q(what))?;
            let bytes: Vec<String> = columns
                .iter()
                .map(|c| format!("coalesce(length(CAST(\"{c}\" AS BLOB)), 0)"))
                .collect();
            // Table and column names come from DeerFlow's schema, never from input.
            let sql = format!(
                "SELECT count(*), coalesce(sum({}), 0) FROM \"{table}\"",
                if bytes.is_empty() {
                    "0".into()
                } else {
                    bytes.join(" + ")
                }
            );
            let (rows, size): (i64, i64) = self
                .conn
                .query_row(&sql, [], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(q(what))?;
            out.push(TableSpace {
                table: table.clone(),
                rows: rows.max(0) as u64,
                bytes: size.max(0) as u64,
            });
        }
        Ok(out)
    }

    fn listed_without_checkpoints(
        &self,
        f: &mut dyn FnMut(String, Option<String>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "matching DeerFlow's thread list with the checkpoints";
        let mut st = self
            .conn
            .prepare(
                "SELECT m.thread_id, m.display_name FROM threads_meta m WHERE NOT EXISTS \
                 (SELECT 1 FROM checkpoints c WHERE c.thread_id = m.thread_id) \
                 ORDER BY m.thread_id",
            )
            .map_err(q(what))?;
        let mut rows = st.query([]).map_err(q(what))?;
        while let Some(r) = rows.next().map_err(q(what))? {
            f(r.get(0).map_err(q(what))?, r.get(1).map_err(q(what))?)?;
        }
        Ok(())
    }

    fn unlisted_threads(
        &self,
        f: &mut dyn FnMut(String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "matching the checkpoints with DeerFlow's thread list";
        let mut st = self
            .conn
            .prepare(
                "SELECT DISTINCT c.thread_id FROM checkpoints c WHERE NOT EXISTS \
                 (SELECT 1 FROM threads_meta m WHERE m.thread_id = c.thread_id) \
                 ORDER BY c.thread_id",
            )
            .map_err(q(what))?;
        let mut rows = st.query([]).map_err(q(what))?;
        while let Some(r) = rows.next().map_err(q(what))? {
            f(super::rows::text_col(r, 0).map_err(q(what))?)?;
        }
        Ok(())
    }

    fn user_thread_ids(&self, user_id: &str) -> Result<Vec<String>, StoreError> {
        let what = "reading a user's threads";
        let mut st = self
            .conn
            .prepare("SELECT thread_id FROM threads_meta WHERE user_id = ?1 ORDER BY thread_id")
            .map_err(q(what))?;
        let ids = st
            .query_map([user_id], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(q(what))?;
        Ok(ids)
    }

    fn thread_rows(&self, thread_id: &str, schema: &AppSchema) -> Result<ThreadRows, StoreError> {
        let what = "counting a thread's DeerFlow rows";
        let mut out = ThreadRows::default();
        for (table, column) in THREAD_TABLES {
            if !schema.has(table) {
                continue;
            }
            let n: i64 = self
                .conn
                .query_row(
                    &format!("SELECT count(*) FROM \"{table}\" WHERE \"{column}\" = ?1"),
                    [thread_id],
                    |r| r.get(0),
                )
                .map_err(q(what))?;
            if n > 0 {
                out.tables.push((table.to_owned(), n as u64));
            }
        }
        Ok(out)
    }

    fn reserve_delete(
        &self,
        run_id: &str,
        thread_id: &str,
        user_id: Option<&str>,
        owner: &str,
    ) -> Result<bool, StoreError> {
        let now = at(0);
        let lease = at(deerflow::LEASE_SECS);
        self.committed(|| {
            let r = self.conn.execute(
                "INSERT INTO runs (run_id, thread_id, assistant_id, user_id, status, operation_kind, \
                 model_name, multitask_strategy, metadata_json, kwargs_json, message_count, \
                 total_input_tokens, total_output_tokens, total_tokens, llm_call_count, \
                 lead_agent_tokens, subagent_tokens, middleware_tokens, token_usage_by_model, \
                 owner_worker_id, lease_expires_at, created_at, updated_at) \
                 VALUES (?1, ?2, NULL, ?3, 'pending', 'delete', NULL, 'reject', '{}', '{}', \
                 0, 0, 0, 0, 0, 0, 0, 0, '{}', ?4, ?5, ?6, ?6)",
                params![run_id, thread_id, user_id, owner, lease, now],
            );
            match r {
                Ok(_) => Ok(true),
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) =>
                {
                    Ok(false)
                }
                Err(e) => Err(q("taking DeerFlow's thread-operation reservation")(e)),
            }
        })
    }

    fn take_over(&self, run_id: &str, owner: &str) -> Result<(), StoreError> {
        self.renew(run_id, owner)
    }

    fn renew(&self, run_id: &str, owner: &str) -> Result<(), StoreError> {
        let (now, lease) = (at(0), at(deerflow::LEASE_SECS));
        self.committed(|| {
            self.conn
                .execute(
                    "UPDATE runs SET owner_worker_id = ?2, lease_expires_at = ?3, updated_at = ?4 \
                     WHERE run_id = ?1",
                    params![run_id, owner, lease, now],
                )
                .map(|_| ())
                .map_err(q("renewing the reservation's lease"))
        })
    }

    fn release(&self, run_id: &str) -> Result<(), StoreError> {
        self.committed(|| {
            self.conn
                .execute("DELETE FROM runs WHERE run_id = ?1", [run_id])
                .map(|_| ())
                .map_err(q("releasing DeerFlow's thread-operation reservation"))
        })
    }

    fn delete_thread_app_rows(
        &self,
        thread_id: &str,
        schema: &AppSchema,
        erase: bool,
        keep_run: Option<&str>,
    ) -> Result<ThreadRows, StoreError> {
        let what = "deleting a thread's DeerFlow rows";
        let mut out = ThreadRows::default();
        for (table, column) in THREAD_TABLES {
            if !schema.has(table) || (!erase && table != "threads_meta") {
                continue;
            }
            let n = if table == "runs" {
                self.conn.execute(
                    "DELETE FROM runs WHERE thread_id = ?1 AND run_id IS NOT ?2",
                    params![thread_id, keep_run],
                )
            } else {
                self.conn.execute(
                    &format!("DELETE FROM \"{table}\" WHERE \"{column}\" = ?1"),
                    [thread_id],
                )
            }
            .map_err(q(what))?;
            if n > 0 {
                out.tables.push((table.to_owned(), n as u64));
            }
        }
        Ok(out)
    }
}

/// The `WHERE` clause keeping the rows of `ids` ([`ids_param`]), none for every row.
fn of_ids(ids: Option<&[String]>, column: &str) -> String {
    match ids {
        Some(_) => format!("WHERE {column} IN (SELECT value FROM json_each(?1))"),
        None => String::new(),
    }
}

/// The parameter of [`of_ids`]: `ids` as a JSON array.
fn ids_param(ids: Option<&[String]>) -> Vec<String> {
    ids.map(|ids| serde_json::Value::from(ids.to_vec()).to_string())
        .into_iter()
        .collect()
}
