//! The SQLite backend: a native `SqliteSaver` — the same DDL and `PRAGMA journal_mode=WAL` as
//! `SqliteSaver.setup()`, `INSERT OR REPLACE` of one checkpoint per `put` and `INSERT OR IGNORE`
//! of a task's writes per `put_writes`, each call its own committed transaction (Python's
//! `sqlite3` commits after every saver call), default `synchronous`.

use super::{SaverError, WriteRecord};
use rusqlite::{Connection, params};
use std::path::Path;

/// Logical sizes of one thread (the storage fields of docs/bench-rows.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SqliteStats {
    /// `COUNT(*)` of the thread's checkpoints.
    pub checkpoint_rows: u64,
    /// `SUM(length(checkpoint) + length(metadata))`.
    pub checkpoint_bytes: u64,
    /// `COUNT(*)` of the thread's writes.
    pub write_rows: u64,
    /// `SUM(length(value))`.
    pub write_bytes: u64,
}

/// A native SQLite saver on one file.
pub struct SqliteSaver {
    conn: Connection,
}

fn err(what: &str) -> impl Fn(rusqlite::Error) -> SaverError + '_ {
    move |e| SaverError(format!("sqlite {what}: {e}"))
}

/// One checkpoint row: ids, the msgpack body and the `json.dumps` metadata text.
#[derive(Debug, Clone, Copy)]
pub struct SqliteCheckpoint<'a> {
    /// Checkpoint id.
    pub id: &'a str,
    /// Parent checkpoint id.
    pub parent: Option<&'a str>,
    /// The msgpack checkpoint (with its channel values).
    pub checkpoint: &'a [u8],
    /// The metadata as Python's `json.dumps` writes it.
    pub metadata: &'a [u8],
}

impl SqliteSaver {
    /// `SqliteSaver.from_conn_string(path)` + `setup()`.
    pub fn open(path: &Path) -> Result<Self, SaverError> {
        let conn = Connection::open(path).map_err(err("open"))?;
        conn.execute_batch(dfck_core::store::schema::SQLITE_SETUP)
            .map_err(err("setup"))?;
        // The one migration; "duplicate column name" is expected and swallowed.
        let _ = conn.execute_batch(dfck_core::store::schema::SQLITE_TASK_PATH);
        Ok(SqliteSaver { conn })
    }

    /// `put`: one committed `INSERT OR REPLACE`.
    pub fn put_checkpoint(
        &mut self,
        thread_id: &str,
        rec: &SqliteCheckpoint<'_>,
    ) -> Result<(), SaverError> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, \
                 parent_checkpoint_id, type, checkpoint, metadata) VALUES (?1, '', ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    thread_id,
                    rec.id,
                    rec.parent,
                    "msgpack",
                    rec.checkpoint,
                    rec.metadata
                ])
            })
            .map_err(err("put"))?;
        Ok(())
    }

    /// `put_writes`: the task's rows in one committed transaction (`INSERT OR IGNORE`, as
    /// none of the workload's writes is a special channel).
    pub fn insert_writes(
        &mut self,
        thread_id: &str,
        checkpoint_id: &str,
        writes: &[WriteRecord],
    ) -> Result<(), SaverError> {
        let tx = self.conn.transaction().map_err(err("put_writes"))?;
        {
            let mut st = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
                     task_path, idx, channel, type, value) VALUES (?1, '', ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(err("put_writes"))?;
            for w in writes {
                st.execute(params![
                    thread_id,
                    checkpoint_id,
                    w.task_id,
                    w.task_path,
                    w.idx,
                    w.channel,
                    w.type_tag,
                    w.value
                ])
                .map_err(err("put_writes"))?;
            }
        }
        tx.commit().map_err(err("put_writes"))
    }

    /// The logical sizes of one thread (docs/bench-rows.md).
    pub fn stats(&self, thread_id: &str) -> Result<SqliteStats, SaverError> {
        let (cr, cb): (i64, i64) = self
            .conn
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(length(checkpoint)+length(metadata)),0) \
                 FROM checkpoints WHERE thread_id = ?1",
                [thread_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(err("checkpoint stats"))?;
        let (wr, wb): (i64, i64) = self
            .conn
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(length(value)),0) FROM writes WHERE thread_id = ?1",
                [thread_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(err("write stats"))?;
        Ok(SqliteStats {
            checkpoint_rows: cr.max(0) as u64,
            checkpoint_bytes: cb.max(0) as u64,
            write_rows: wr.max(0) as u64,
            write_bytes: wb.max(0) as u64,
        })
    }

    /// `PRAGMA wal_checkpoint(TRUNCATE)`: copies the WAL into the main file and empties it, so
    /// the main file's size is the store's durable size.
    pub fn checkpoint_truncate(&self) -> Result<(), SaverError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(err("wal_checkpoint"))
    }

    /// Closes the connection (the last close checkpoints the WAL into the main file).
    pub fn close(self) -> Result<(), SaverError> {
        self.conn
            .close()
            .map_err(|(_, e)| SaverError(format!("sqlite close: {e}")))
    }
}

/// `st_size` of a file, 0 when it does not exist.
pub fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Removes a database file and its `-wal` / `-shm` sidecars, so a case starts from a fresh file.
pub fn remove_db(path: &Path) -> Result<(), SaverError> {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(SaverError(format!(
                    "cannot remove an old benchmark database: {e}"
                )));
            }
        }
    }
    Ok(())
}
