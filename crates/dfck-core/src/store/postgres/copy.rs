//! The rows `dfck copy` writes on PostgreSQL (docs/copy.md): an empty database or schema set
//! up as `PostgresSaver.setup()` sets it up (migrations v0–v9, recorded), and one thread's
//! rows inserted (or deleted, for `--replace`) inside the engine's transaction.

use super::{PostgresStore, quote_ident};
use crate::error::StoreError;
use crate::store::WriteRow;
use crate::store::schema::POSTGRES_MIGRATIONS as MIGRATIONS;
use serde_json::Value as Json;
use tokio_postgres::types::{Json as PgJson, Type};

/// What a copy target holds before anything is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetState {
    /// None of LangGraph's four tables exists (nothing else does, or only DeerFlow's own
    /// tables): setup creates them.
    Empty,
    /// Some exist: the schema check decides whether dfck can write there.
    Present,
}

const TABLES: [&str; 4] = [
    "checkpoint_migrations",
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
];

impl PostgresStore {
    /// Connects to a copy target and says whether LangGraph's tables are there (a schema
    /// with other tables only is refused, unless they are DeerFlow's: `alembic_version`);
    /// with `setup`, an empty database (or schema) gets them, exactly as
    /// `PostgresSaver.setup()` creates them: every migration in order, each recorded in
    /// `checkpoint_migrations`.
    pub fn prepare_copy_target(
        url: &str,
        schema: Option<&str>,
        setup: bool,
    ) -> Result<TargetState, StoreError> {
        let store = Self::connect(url, schema)?;
        store.set_session_limits()?;
        if setup {
            store.check_writable()?;
        }
        if let Some(s) = schema {
            let rows = store.query(
                "checking the schema",
                "SELECT 1 FROM pg_namespace WHERE nspname = $1",
                &[&s],
            )?;
            if rows.is_empty() {
                return Err(StoreError::NotLangGraph {
                    path: store.info.location.clone(),
                    reason: format!("schema '{s}' does not exist (create it first)"),
                });
            }
            store
                .rt
                .block_on(
                    store
                        .client
                        .batch_execute(&format!("SET search_path TO {}", quote_ident(s))),
                )
                .map_err(|e| store.err("starting a session", e))?;
        }
        let rows = store.query(
            "reading the schema",
            "SELECT (to_regclass($1) IS NOT NULL OR to_regclass($2) IS NOT NULL \
             OR to_regclass($3) IS NOT NULL OR to_regclass($4) IS NOT NULL)",
            &[&TABLES[0], &TABLES[1], &TABLES[2], &TABLES[3]],
        )?;
        let present = rows
            .first()
            .and_then(|r| r.try_get::<_, bool>(0).ok())
            .unwrap_or(true);
        if present {
            if setup {
                store.finish_migrations()?;
            }
            return Ok(TargetState::Present);
        }
        let tables: i64 = store
            .query(
                "reading the schema",
                "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()",
                &[],
            )?
            .first()
            .and_then(|r| r.try_get(0).ok())
            .unwrap_or(0);
        // DeerFlow's own tables without LangGraph's (a database its bootstrap set up before
        // the checkpointer's first start): LangGraph's tables are set up beside them.
        let deerflow: bool = store
            .query(
                "reading the schema",
                "SELECT count(*) > 0 FROM pg_tables WHERE schemaname = current_schema() \
                 AND tablename = 'alembic_version'",
                &[],
            )?
            .first()
            .and_then(|r| r.try_get(0).ok())
            .unwrap_or(false);
        if tables > 0 && !deerflow {
            return Err(StoreError::NotLangGraph {
                path: store.info.location.clone(),
                reason: format!(
                    "it holds {tables} other table(s) and none of LangGraph's; copy into an empty database or schema, or into one whose checkpointer is set up"
                ),
            });
        }
        if setup {
            store.run_migrations(0)?;
        }
        Ok(TargetState::Empty)
    }

    /// Runs the migrations from `first` on, in order, each recorded, as `setup()` does.
    fn run_migrations(&self, first: usize) -> Result<(), StoreError> {
        for (v, stmt) in MIGRATIONS.iter().enumerate().skip(first) {
            self.rt
                .block_on(self.client.batch_execute(stmt))
                .map_err(|e| self.err("setting up the target", e))?;
            self.rt
                .block_on(self.client.execute(
                    "INSERT INTO checkpoint_migrations (v) VALUES ($1) ON CONFLICT DO NOTHING",
                    &[&(v as i32)],
                ))
                .map_err(|e| self.err("setting up the target", e))?;
        }
        Ok(())
    }

    /// A target whose `checkpoint_migrations` stops short of the last known version (a
    /// setup that was interrupted, or an older saver) gets the missing migrations, as the
    /// saver's own `setup()` would run them at its next start. A newer version or no
    /// record at all is left to the schema check.
    fn finish_migrations(&self) -> Result<(), StoreError> {
        let exists = self
            .query(
                "reading the schema",
                "SELECT to_regclass($1) IS NOT NULL",
                &[&TABLES[0]],
            )?
            .first()
            .and_then(|r| r.try_get::<_, bool>(0).ok())
            .unwrap_or(false);
        if !exists {
            return Ok(());
        }
        let done: Option<i32> = self
            .query(
                "reading checkpoint_migrations",
                "SELECT max(v) FROM checkpoint_migrations",
                &[],
            )?
            .first()
            .and_then(|r| r.try_get(0).ok().flatten());
        match done {
            Some(v) if (0..super::MAX_KNOWN_MIGRATION).contains(&v) => {
                self.run_migrations(v as usize + 1)
            }
            _ => Ok(()),
        }
    }

    /// The id of this read-only transaction's snapshot, for other connections to read the
    /// very same data ([`PostgresStore::open_read_only_at`]); valid while it stays open.
    pub fn export_snapshot(&self) -> Result<String, StoreError> {
        let rows = self.query("exporting the snapshot", "SELECT pg_export_snapshot()", &[])?;
        rows.first()
            .and_then(|r| r.try_get::<_, String>(0).ok())
            .ok_or_else(|| StoreError::Query {
                what: "exporting the snapshot".into(),
                reason: "no snapshot id returned".into(),
            })
    }

    /// Like [`PostgresStore::open_read_only`], reading inside the snapshot another
    /// connection exported ([`PostgresStore::export_snapshot`]).
    pub fn open_read_only_at(
        url: &str,
        schema: Option<&str>,
        snapshot: &str,
    ) -> Result<Self, StoreError> {
        // SET TRANSACTION SNAPSHOT takes no parameters: the id (hex digits and dashes, as
        // pg_export_snapshot prints it) is checked before it is written into the statement.
        if snapshot.is_empty() || !snapshot.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(StoreError::Target(format!(
                "invalid snapshot id '{snapshot}'"
            )));
        }
        let mut store = Self::connect(url, schema)?;
        store.set_session_limits()?;
        let mut sql = format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{snapshot}';"
        );
        if let Some(s) = schema {
            sql.push_str(&format!(" SET LOCAL search_path TO {};", quote_ident(s)));
        }
        store
            .rt
            .block_on(store.client.batch_execute(&sql))
            .map_err(|e| store.err("starting a read-only transaction in the shared snapshot", e))?;
        let (version, has_task_path) = store.detect_schema(schema)?;
        store.info.schema = format!("postgres (checkpoint_migrations v{version})");
        store.info.has_task_path = has_task_path;
        Ok(store)
    }

    /// Inserts one checkpoint row: the JSONB checkpoint and metadata as given, `type` NULL
    /// as `PostgresSaver` leaves it.
    pub fn insert_checkpoint_json(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        parent: Option<&str>,
        checkpoint: &Json,
        metadata: &Json,
    ) -> Result<(), StoreError> {
        let sql = "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, \
             parent_checkpoint_id, checkpoint, metadata) VALUES ($1, $2, $3, $4, $5, $6)";
        self.rt
            .block_on(self.client.execute_typed(
                sql,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&checkpoint_id, Type::TEXT),
                    (&parent, Type::TEXT),
                    (&PgJson(checkpoint), Type::JSONB),
                    (&PgJson(metadata), Type::JSONB),
                ],
            ))
            .map(|_| ())
            .map_err(|e| self.err("inserting a checkpoint", e))
    }

    /// Inserts one `checkpoint_blobs` row unless (thread, ns, channel, version) already has
    /// one (blobs are shared by version).
    pub fn insert_blob_row(
        &self,
        thread_id: &str,
        ns: &str,
        channel: &str,
        version: &str,
        type_tag: &str,
        blob: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        let sql = "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
            VALUES ($1, $2, $3, $4, $5, $6) \
            ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING";
        self.rt
            .block_on(self.client.execute_typed(
                sql,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&channel, Type::TEXT),
                    (&version, Type::TEXT),
                    (&type_tag, Type::TEXT),
                    (&blob, Type::BYTEA),
                ],
            ))
            .map(|_| ())
            .map_err(|e| self.err("inserting a blob", e))
    }

    /// Inserts one pending write as given.
    pub fn insert_write_json(
        &self,
        thread_id: &str,
        ns: &str,
        w: &WriteRow,
    ) -> Result<(), StoreError> {
        let (sql, with_path) = if self.info.has_task_path {
            (
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
                 idx, channel, type, blob, task_path) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                true,
            )
        } else {
            (
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
                 idx, channel, type, blob) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                false,
            )
        };
        let idx = i32::try_from(w.idx).map_err(|_| StoreError::Query {
            what: "inserting a write".into(),
            reason: format!("idx {} does not fit PostgreSQL's INTEGER", w.idx),
        })?;
        let value: &[u8] = &w.value;
        let mut params: Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> = vec![
            (&thread_id, Type::TEXT),
            (&ns, Type::TEXT),
            (&w.checkpoint_id, Type::TEXT),
            (&w.task_id, Type::TEXT),
            (&idx, Type::INT4),
            (&w.channel, Type::TEXT),
            (&w.type_tag, Type::TEXT),
            (&value, Type::BYTEA),
        ];
        if with_path {
            params.push((&w.task_path, Type::TEXT));
        }
        self.rt
            .block_on(self.client.execute_typed(sql, &params))
            .map(|_| ())
            .map_err(|e| self.err("inserting a write", e))
    }

    /// Deletes every checkpoint, blob and write of a thread (all namespaces).
    pub fn delete_thread_rows(&self, thread_id: &str) -> Result<(), StoreError> {
        for sql in [
            "DELETE FROM checkpoint_writes WHERE thread_id = $1",
            "DELETE FROM checkpoint_blobs WHERE thread_id = $1",
            "DELETE FROM checkpoints WHERE thread_id = $1",
        ] {
            self.rt
                .block_on(self.client.execute_typed(sql, &[(&thread_id, Type::TEXT)]))
                .map_err(|e| self.err("deleting a thread", e))?;
        }
        Ok(())
    }
}
