//! The rows `dfck copy` reads and writes on SQLite (docs/copy.md): a new store set up as
//! `SqliteSaver.setup()` sets it up, the source's read snapshot, and one thread's rows
//! inserted (or deleted, for `--replace`) inside the engine's transaction.

use super::SqliteStore;
use crate::error::StoreError;
use crate::store::{Store, WriteRow};
use rusqlite::params;
use std::path::Path;

fn q(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Query {
        what: what.to_owned(),
        reason: e.to_string(),
    }
}

impl SqliteStore {
    /// Creates a store at `path` (which must not exist) exactly as `SqliteSaver.setup()`
    /// does: WAL mode, the two tables with their primary keys, `writes.task_path`.
    pub fn create_langgraph(path: &Path) -> Result<(), StoreError> {
        if path.exists() {
            return Err(StoreError::Target(format!(
                "{} already exists",
                path.display()
            )));
        }
        let fail = |e: rusqlite::Error| StoreError::Open {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        let conn = rusqlite::Connection::open(path).map_err(fail)?;
        conn.execute_batch(crate::store::schema::SQLITE_SETUP)
            .map_err(fail)?;
        // A fresh store has `task_path` already: the migration's error is the expected one.
        let _ = conn.execute_batch(crate::store::schema::SQLITE_TASK_PATH);
        conn.close().map_err(|(_, e)| fail(e))
    }

    /// Readies a copy target at `path`: `true` when it is (with `setup`: was) set up as a
    /// LangGraph store — a missing file is created by [`SqliteStore::create_langgraph`], a
    /// file holding DeerFlow's tables (`alembic_version`) and none of LangGraph's gets them
    /// beside DeerFlow's, as `SqliteSaver.setup()` adds them at DeerFlow's start. `false`
    /// for anything else, which opening it then checks.
    pub fn prepare_copy_target(path: &Path, setup: bool) -> Result<bool, StoreError> {
        if !path.exists() {
            if setup {
                Self::create_langgraph(path)?;
            }
            return Ok(true);
        }
        let probe = || -> rusqlite::Result<bool> {
            let conn = rusqlite::Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            conn.query_row(
                "SELECT count(*) FILTER (WHERE name = 'alembic_version') > 0 \
                 AND count(*) FILTER (WHERE name IN ('checkpoints', 'writes')) = 0 \
                 FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
        };
        if !probe().unwrap_or(false) {
            return Ok(false);
        }
        if setup {
            let fail = |e: rusqlite::Error| StoreError::Open {
                path: path.display().to_string(),
                reason: e.to_string(),
            };
            let conn = rusqlite::Connection::open(path).map_err(fail)?;
            conn.busy_timeout(std::time::Duration::from_secs(30))
                .map_err(fail)?;
            conn.execute_batch(crate::store::schema::SQLITE_SETUP)
                .map_err(fail)?;
            conn.close().map_err(|(_, e)| fail(e))?;
        }
        Ok(true)
    }

    /// Starts one read transaction that every later read of this connection sees: a
    /// consistent snapshot of the whole store while a live writer goes on.
    pub fn begin_snapshot(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("BEGIN DEFERRED")
            .map_err(q("starting a read transaction"))?;
        self.conn
            .query_row("SELECT count(*) FROM checkpoints WHERE 0", [], |_| Ok(()))
            .map_err(q("starting a read transaction"))
    }

    /// Inserts one checkpoint row as given.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_checkpoint_row(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        parent: Option<&str>,
        type_tag: Option<&str>,
        body: &[u8],
        metadata: &[u8],
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, \
                 parent_checkpoint_id, type, checkpoint, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    thread_id,
                    ns,
                    checkpoint_id,
                    parent,
                    type_tag,
                    body,
                    metadata
                ])
            })
            .map(|_| ())
            .map_err(q("inserting a checkpoint"))
    }

    /// Inserts one pending write as given (without `task_path` on a store that predates it).
    pub fn insert_write_row(
        &self,
        thread_id: &str,
        ns: &str,
        w: &WriteRow,
    ) -> Result<(), StoreError> {
        let sql = if self.info().has_task_path {
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, \
             type, value, task_path) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        } else {
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, \
             type, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        };
        let mut st = self
            .conn
            .prepare_cached(sql)
            .map_err(q("inserting a write"))?;
        let r = if self.info().has_task_path {
            st.execute(params![
                thread_id,
                ns,
                w.checkpoint_id,
                w.task_id,
                w.idx,
                w.channel,
                w.type_tag,
                w.value,
                w.task_path
            ])
        } else {
            st.execute(params![
                thread_id,
                ns,
                w.checkpoint_id,
                w.task_id,
                w.idx,
                w.channel,
                w.type_tag,
                w.value
            ])
        };
        r.map(|_| ()).map_err(q("inserting a write"))
    }

    /// Deletes every checkpoint and write of a thread (all namespaces).
    pub fn delete_thread_rows(&self, thread_id: &str) -> Result<(), StoreError> {
        for sql in [
            "DELETE FROM writes WHERE thread_id = ?1",
            "DELETE FROM checkpoints WHERE thread_id = ?1",
        ] {
            self.conn
                .execute(sql, [thread_id])
                .map_err(q("deleting a thread"))?;
        }
        Ok(())
    }
}
