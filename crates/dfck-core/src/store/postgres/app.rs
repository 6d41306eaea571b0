//! DeerFlow's tables in a PostgreSQL store ([`AppTables`]): `timestamp with time zone`
//! (shown in UTC), `json`, `boolean`; the schema is the session's `search_path`.

use super::PostgresStore;
use super::batch::{IN_BATCH, json_list};
use super::read::get;
use crate::deerflow::{
    self, ActiveRun, AppSchema, RunSummary, THREAD_TABLES, TableSpace, ThreadMeta, ThreadRows,
};
use crate::error::StoreError;
use crate::store::app::{AppTables, known, metadata_flags};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

/// A timestamptz column as ISO 8601 UTC text, in SQL.
fn iso(col: &str) -> String {
    format!("to_char({col} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')")
}

impl PostgresStore {
    fn has_column(&self, table: &str, column: &str) -> Result<bool, StoreError> {
        let rows = self.query(
            "reading DeerFlow's schema",
            "SELECT count(*) > 0 FROM pg_attribute WHERE attrelid = to_regclass($1) \
             AND attname = $2 AND NOT attisdropped",
            &[&table, &column],
        )?;
        Ok(rows
            .first()
            .and_then(|r| r.try_get::<_, bool>(0).ok())
            .unwrap_or(false))
    }

    /// Runs `sql` in a committed transaction of its own (outside any thread transaction);
    /// returns the rows it affected, or `None` on a unique violation (rolled back).
    fn execute_committed(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Option<u64>, StoreError> {
        let typed: Vec<(
            &(dyn tokio_postgres::types::ToSql + Sync),
            tokio_postgres::types::Type,
        )> = params
            .iter()
            .map(|p| (*p, tokio_postgres::types::Type::TEXT))
            .collect();
        let rows = self.rt.block_on(async {
            self.client.batch_execute("BEGIN").await?;
            match self.client.query_typed(sql, &typed).await {
                Ok(r) => {
                    self.client.batch_execute("COMMIT").await?;
                    Ok(Some(r.len() as u64))
                }
                Err(e) => {
                    let _ = self.client.batch_execute("ROLLBACK").await;
                    if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                        Ok(None)
                    } else {
                        Err(e)
                    }
                }
            }
        });
        rows.map_err(|e| self.err(what, e))
    }
}

impl PostgresStore {
    /// [`crate::store::Store::active_run`]: whether DeerFlow has an active run on the thread.
    pub(super) fn active_run_of(&self, thread_id: &str) -> Result<bool, StoreError> {
        let what = "checking DeerFlow's runs table";
        // Asked once per transaction (a whole-store run asks for every thread).
        let has_runs = match self.has_runs.get() {
            Some(has) => has,
            None => {
                let rows = self.query(
                    what,
                    "SELECT count(*) = 2 FROM pg_attribute \
                     WHERE attrelid = to_regclass('runs') AND attname IN ('thread_id', 'status') AND NOT attisdropped",
                    &[],
                )?;
                let has = rows
                    .first()
                    .and_then(|r| r.try_get::<_, bool>(0).ok())
                    .unwrap_or(false);
                self.has_runs.set(Some(has));
                has
            }
        };
        if !has_runs {
            return Ok(false);
        }
        let rows = self.query_reused(
            what,
            "SELECT EXISTS (SELECT 1 FROM runs WHERE thread_id = $1 AND status IN ('pending', 'running'))",
            &[(&thread_id, Type::TEXT)],
        )?;
        Ok(rows
            .first()
            .and_then(|r| r.try_get::<_, bool>(0).ok())
            .unwrap_or(false))
    }
}

impl AppTables for PostgresStore {
    fn app_schema(&self) -> Result<AppSchema, StoreError> {
        let what = "reading DeerFlow's schema";
        let names: Vec<String> = self
            .query(
                what,
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()",
                &[],
            )?
            .iter()
            .map(|r| get(r, 0, what))
            .collect::<Result<_, _>>()?;
        let tables = known(&names);
        let revision = if tables.iter().any(|t| t == "alembic_version") {
            self.query(what, "SELECT version_num FROM alembic_version LIMIT 1", &[])?
                .first()
                .map(|r| get(r, 0, what))
                .transpose()?
        } else {
            None
        };
        Ok(AppSchema { revision, tables })
    }

    fn thread_metas(&self, ids: Option<&[String]>) -> Result<Vec<ThreadMeta>, StoreError> {
        let what = "reading DeerFlow's thread list";
        let list = ids.map(|ids| json_list(ids.iter()));
        let sql = format!(
            "SELECT thread_id, user_id, display_name, status, {}, metadata_json::text \
             FROM threads_meta {} ORDER BY thread_id",
            iso("updated_at"),
            if list.is_some() { "WHERE " } else { "" }.to_owned()
                + list.as_ref().map_or("", |_| IN_BATCH)
        );
        self.query(what, &sql, &params_of(&list))?
            .iter()
            .map(|r| {
                let (pinned, metadata_keys) =
                    metadata_flags(get::<Option<String>>(r, 5, what)?.as_deref());
                Ok(ThreadMeta {
                    pinned,
                    metadata_keys,
                    thread_id: get(r, 0, what)?,
                    user_id: get(r, 1, what)?,
                    display_name: get(r, 2, what)?,
                    status: get(r, 3, what)?,
                    updated_at: get(r, 4, what)?,
                })
            })
            .collect()
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
        let list = ids.map(|ids| json_list(ids.iter()));
        let mut filter: Vec<&str> = list.iter().map(|_| IN_BATCH).collect();
        if self.has_column("runs", "operation_kind")? {
            filter.push("operation_kind = 'run'");
        }
        let filter = match filter.is_empty() {
            true => String::new(),
            false => format!("WHERE {}", filter.join(" AND ")),
        };
        let sql = format!(
            "SELECT thread_id, count(*)::bigint, coalesce(sum(total_tokens), 0)::bigint, \
             (array_agg(status ORDER BY created_at DESC, run_id DESC))[1], {} \
             FROM runs {filter} GROUP BY thread_id ORDER BY thread_id",
            iso("max(created_at)")
        );
        self.query(what, &sql, &params_of(&list))?
            .iter()
            .map(|r| {
                Ok((
                    get(r, 0, what)?,
                    RunSummary {
                        runs: get::<i64>(r, 1, what)?.max(0) as u64,
                        tokens: get::<i64>(r, 2, what)?.max(0) as u64,
                        last_status: get(r, 3, what)?,
                        last_at: get(r, 4, what)?,
                    },
                ))
            })
            .collect()
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
            iso("lease_expires_at")
        } else {
            "NULL::text".into()
        };
        let owner = if self.has_column("runs", "owner_worker_id")? {
            "owner_worker_id"
        } else {
            "NULL::text"
        };
        let sql = format!(
            "SELECT run_id, thread_id, status, {kind}, {owner}, {lease} FROM runs \
             WHERE status IN ('pending', 'running') ORDER BY thread_id, run_id"
        );
        self.query(what, &sql, &[])?
            .iter()
            .map(|r| {
                Ok(ActiveRun {
                    run_id: get(r, 0, what)?,
                    thread_id: get(r, 1, what)?,
                    status: get(r, 2, what)?,
                    operation_kind: get(r, 3, what)?,
                    owner_worker_id: get(r, 4, what)?,
                    lease_expires_at: get(r, 5, what)?,
                })
            })
            .collect()
    }

    fn app_space(&self, schema: &AppSchema) -> Result<Vec<TableSpace>, StoreError> {
        let what = "measuring DeerFlow's tables";
        let mut out = Vec::new();
        for table in &schema.tables {
            // Table names come from DeerFlow's schema, never from input.
            let sql = format!(
                "SELECT count(*)::bigint, pg_total_relation_size(to_regclass($1))::bigint FROM \"{table}\""
            );
            let rows = self.query(what, &sql, &[table])?;
            let r = rows.first().ok_or_else(|| StoreError::Query {
                what: what.into(),
                reason: format!("no count of {table}"),
            })?;
            out.push(TableSpace {
                table: table.clone(),
                rows: get::<i64>(r, 0, what)?.max(0) as u64,
                bytes: get::<i64>(r, 1, what)?.max(0) as u64,
            });
        }
        Ok(out)
    }

    fn listed_without_checkpoints(
        &self,
        f: &mut dyn FnMut(String, Option<String>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "matching DeerFlow's thread list with the checkpoints";
        // Byte order of the ids (`COLLATE "C"`), whatever the database's collation.
        self.cursor(
            what,
            "SELECT m.thread_id::text, m.display_name FROM threads_meta m WHERE NOT EXISTS \
             (SELECT 1 FROM checkpoints c WHERE c.thread_id = m.thread_id) \
             ORDER BY m.thread_id COLLATE \"C\"",
            &[],
            2000,
            &mut |r| f(get(r, 0, what)?, get(r, 1, what)?),
        )
    }

    fn unlisted_threads(
        &self,
        f: &mut dyn FnMut(String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "matching the checkpoints with DeerFlow's thread list";
        self.cursor(
            what,
            "SELECT t.thread_id FROM (SELECT DISTINCT thread_id FROM checkpoints) t \
             WHERE NOT EXISTS (SELECT 1 FROM threads_meta m WHERE m.thread_id = t.thread_id) \
             ORDER BY t.thread_id COLLATE \"C\"",
            &[],
            2000,
            &mut |r| f(get(r, 0, what)?),
        )
    }

    fn user_thread_ids(&self, user_id: &str) -> Result<Vec<String>, StoreError> {
        let what = "reading a user's threads";
        self.query(
            what,
            "SELECT thread_id FROM threads_meta WHERE user_id = $1 ORDER BY thread_id",
            &[&user_id],
        )?
        .iter()
        .map(|r| get(r, 0, what))
        .collect()
    }

    fn thread_rows(&self, thread_id: &str, schema: &AppSchema) -> Result<ThreadRows, StoreError> {
        let what = "counting a thread's DeerFlow rows";
        let mut out = ThreadRows::default();
        for (table, column) in THREAD_TABLES {
            if !schema.has(table) {
                continue;
            }
            let sql = format!("SELECT count(*)::bigint FROM \"{table}\" WHERE \"{column}\" = $1");
            let n: i64 = self
                .query(what, &sql, &[&thread_id])?
                .first()
                .map(|r| get(r, 0, what))
                .transpose()?
                .unwrap_or(0);
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
        let lease = deerflow::LEASE_SECS.to_string();
        let inserted = self.execute_committed(
            "taking DeerFlow's thread-operation reservation",
            "INSERT INTO runs (run_id, thread_id, assistant_id, user_id, status, operation_kind, \
             model_name, multitask_strategy, metadata_json, kwargs_json, message_count, \
             total_input_tokens, total_output_tokens, total_tokens, llm_call_count, \
             lead_agent_tokens, subagent_tokens, middleware_tokens, token_usage_by_model, \
             owner_worker_id, lease_expires_at, created_at, updated_at) \
             VALUES ($1, $2, NULL, $3, 'pending', 'delete', NULL, 'reject', '{}'::json, '{}'::json, \
             0, 0, 0, 0, 0, 0, 0, 0, '{}'::json, $4, now() + ($5 || ' seconds')::interval, now(), now()) \
             RETURNING run_id",
            &[&run_id, &thread_id, &user_id, &owner, &lease],
        )?;
        Ok(inserted.is_some())
    }

    fn take_over(&self, run_id: &str, owner: &str) -> Result<(), StoreError> {
        self.renew(run_id, owner)
    }

    fn renew(&self, run_id: &str, owner: &str) -> Result<(), StoreError> {
        let lease = deerflow::LEASE_SECS.to_string();
        self.execute_committed(
            "renewing the reservation's lease",
            "UPDATE runs SET owner_worker_id = $2, \
             lease_expires_at = now() + ($3 || ' seconds')::interval, updated_at = now() \
             WHERE run_id = $1 RETURNING run_id",
            &[&run_id, &owner, &lease],
        )?;
        Ok(())
    }

    fn release(&self, run_id: &str) -> Result<(), StoreError> {
        self.execute_committed(
            "releasing DeerFlow's thread-operation reservation",
            "DELETE FROM runs WHERE run_id = $1 RETURNING run_id",
            &[&run_id],
        )?;
        Ok(())
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
        let keep = keep_run.unwrap_or("");
        for (table, column) in THREAD_TABLES {
            if !schema.has(table) || (!erase && table != "threads_meta") {
                continue;
            }
            let rows = if table == "runs" {
                self.query(
                    what,
                    "DELETE FROM runs WHERE thread_id = $1 AND run_id <> $2 RETURNING 1",
                    &[&thread_id, &keep],
                )?
            } else {
                let sql = format!("DELETE FROM \"{table}\" WHERE \"{column}\" = $1 RETURNING 1");
                self.query(what, &sql, &[&thread_id])?
            };
            if !rows.is_empty() {
                out.tables.push((table.to_owned(), rows.len() as u64));
            }
        }
        Ok(out)
    }
}

/// The parameters of a query filtered by [`IN_BATCH`] when `list` is given.
fn params_of(list: &Option<String>) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
    list.iter()
        .map(|l| l as &(dyn tokio_postgres::types::ToSql + Sync))
        .collect()
}
