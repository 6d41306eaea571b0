//! Writes: the per-thread write transaction (advisory lock, row locks taken with a short
//! lock timeout and retried with backoff for a bounded time) and
//! the row changes of `migrate delta-to-full`.

use super::PostgresStore;
use crate::error::StoreError;
use crate::store::{PlanStore, Store, ThreadLock, WriteStore};
use std::time::{Duration, Instant};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

/// How long a thread waits, in total, for a live writer's row locks before it is refused.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Opens a write transaction (a thread's or a group's): `REPEATABLE READ`, a short lock
/// timeout, and (PostgreSQL 12 and later) generic plans for the statements it prepares: a
/// statement runs once per thread with the same shape of arguments, and a custom plan made
/// at every run was most of the server's time in binding them. Servers before 12 have no
/// `plan_cache_mode`; the `WHERE` leaves it unset there.
pub(super) const BEGIN_WRITE: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ; \
    SET LOCAL lock_timeout = '1s'; \
    SELECT set_config('plan_cache_mode', 'force_generic_plan', true) \
    WHERE current_setting('server_version_num')::int >= 120000";

impl PostgresStore {
    /// Opens a short read-only transaction (listing threads on a read-write session).
    pub fn begin_read(&self) -> Result<(), StoreError> {
        self.has_runs.set(None);
        self.rt
            .block_on(
                self.client
                    .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
            )
            .map_err(|e| self.err("starting a read-only transaction", e))
    }

    /// Starts the write transaction of one thread: `REPEATABLE READ`, a transaction
    /// advisory lock on the thread (another dfck holding it makes this return
    /// [`ThreadLock::Busy`] at once), then row locks on every checkpoint and blob row of the
    /// thread. A live writer holding those rows makes each attempt give up after a short
    /// `lock_timeout`; attempts are retried with backoff for [`LOCK_WAIT`], then the thread
    /// is [`ThreadLock::Contended`]. Unless `Held`, the transaction is rolled back.
    pub fn begin_thread(&self, thread_id: &str) -> Result<ThreadLock, StoreError> {
        let deadline = Instant::now() + LOCK_WAIT;
        let mut pause = Duration::from_millis(50);
        loop {
            match self.try_begin_thread(thread_id)? {
                Some(lock) => return Ok(lock),
                None if Instant::now() + pause > deadline => {
                    return Ok(ThreadLock::Contended(format!(
                        "another writer (DeerFlow) kept this thread's rows locked for {} s; re-run when it is done",
                        LOCK_WAIT.as_secs()
                    )));
                }
                None => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// One attempt of [`PostgresStore::begin_thread`]; `None`: a row lock timed out (the
    /// transaction is rolled back).
    fn try_begin_thread(&self, thread_id: &str) -> Result<Option<ThreadLock>, StoreError> {
        self.rt
            .block_on(self.client.batch_execute(BEGIN_WRITE))
            .map_err(|e| self.err("starting a write transaction", e))?;
        self.write_began();
        let locked = self
            .query(
                "taking the thread's advisory lock",
                "SELECT pg_try_advisory_xact_lock(hashtextextended('dfck migrate ' || $1, 0))",
                &[&thread_id],
            )
            .map(|rows| {
                rows.first()
                    .and_then(|r| r.try_get::<_, bool>(0).ok())
                    .unwrap_or(false)
            });
        let locked = match locked {
            Ok(l) => l,
            Err(e) => {
                let _ = self.end_transaction(false);
                return Err(e);
            }
        };
        if !locked {
            self.end_transaction(false)?;
            return Ok(Some(ThreadLock::Busy(self.lock_holder(thread_id))));
        }
        for (what, sql) in [
            (
                "locking the thread's checkpoints",
                "SELECT 1 FROM checkpoints WHERE thread_id = $1 FOR UPDATE",
            ),
            (
                "locking the thread's blobs",
                "SELECT 1 FROM checkpoint_blobs WHERE thread_id = $1 FOR UPDATE",
            ),
        ] {
            let r = self
                .rt
                .block_on(self.client.query_typed(sql, &[(&thread_id, Type::TEXT)]));
            if let Err(e) = r {
                let _ = self.end_transaction(false);
                if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) {
                    return Ok(None);
                }
                return Err(self.err(&format!("{what} (thread '{thread_id}')"), e));
            }
        }
        Ok(Some(ThreadLock::Held))
    }

    /// Ends the thread's savepoint inside a group: released into the group's transaction
    /// (`keep`), or rolled back first. The thread's cursors are closed by the same
    /// statement (a rollback closes them), which waits for no answer: it is answered before
    /// the next thread's first statement, or checked before the group ends. The answers
    /// already in are checked here, so a failed savepoint fails the thread's group.
    pub(super) fn end_savepoint(&self, keep: bool) -> Result<(), StoreError> {
        self.settle_deferred(false)?;
        let cursors = std::mem::take(&mut *self.to_close.borrow_mut());
        let sql = if keep {
            let mut sql: String = cursors.iter().map(|c| format!("CLOSE {c}; ")).collect();
            sql.push_str("RELEASE SAVEPOINT dfck_thread");
            sql
        } else {
            "ROLLBACK TO SAVEPOINT dfck_thread; RELEASE SAVEPOINT dfck_thread".to_owned()
        };
        self.send_deferred("closing the thread's savepoint", sql);
        Ok(())
    }

    /// Who holds the thread's advisory lock (only dfck takes it), from `pg_locks` joined to
    /// `pg_stat_activity`: "another dfck prune (server process 4242)" from its
    /// `application_name`; `None` when the server does not say (the session ended, or its
    /// row is not visible to this role).
    pub(super) fn lock_holder(&self, thread_id: &str) -> Option<String> {
        let rows = self
            .query(
                "finding the holder of the thread's lock",
                "SELECT a.application_name, a.pid FROM pg_locks l \
                 JOIN pg_stat_activity a ON a.pid = l.pid \
                 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
                 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                 AND ((l.classid::bigint << 32) | l.objid::bigint) \
                     = hashtextextended('dfck migrate ' || $1, 0) \
                 LIMIT 1",
                &[&thread_id],
            )
            .ok()?;
        let row = rows.first()?;
        let app: Option<String> = row.try_get(0).ok()?;
        let pid: i32 = row.try_get(1).ok()?;
        Some(match app.filter(|a| !a.is_empty()) {
            Some(a) if a == "dfck" || a.starts_with("dfck ") => {
                format!("another {a} (server process {pid})")
            }
            Some(a) => format!("another dfck (application '{a}', server process {pid})"),
            None => format!("another dfck (server process {pid})"),
        })
    }

    /// Ends the open transaction: `COMMIT` (`commit`) or `ROLLBACK`.
    pub fn end_transaction(&self, commit: bool) -> Result<(), StoreError> {
        // `SELECT 1` fails in a transaction some statement aborted unseen (one sent ahead
        // whose answer nobody read), where `COMMIT` would roll back without an error.
        let (sql, what) = if commit {
            ("SELECT 1; COMMIT", "commit the transaction")
        } else {
            ("ROLLBACK", "rollback the transaction")
        };
        self.write_ended();
        // Every statement sent without waiting is answered first: one that failed aborted
        // the transaction, and its `COMMIT` would roll it back without an error.
        let settled = self.settle_deferred(true);
        if let Err(e) = settled {
            let _ = self.rt.block_on(self.client.batch_execute("ROLLBACK"));
            return Err(e);
        }
        let ended = self.rt.block_on(self.client.batch_execute(sql));
        if ended.is_err() && commit {
            let _ = self.rt.block_on(self.client.batch_execute("ROLLBACK"));
        }
        ended.map_err(|e| self.err(what, e))
    }

    /// Turns one checkpoint into its full-mode form, in SQL so every other JSONB byte stays
    /// as stored: the inline `messages: true` snapshot marker goes, and the metadata loses
    /// DeerFlow's mode marker and the `messages` delta counter (the counters key when it
    /// becomes empty).
    pub fn rewrite_checkpoint_full(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
    ) -> Result<(), StoreError> {
        let what = "rewriting a checkpoint";
        let sql = "UPDATE checkpoints SET \
            checkpoint = CASE WHEN checkpoint -> 'channel_values' -> 'messages' = 'true'::jsonb \
                THEN checkpoint #- '{channel_values,messages}' ELSE checkpoint END, \
            metadata = (SELECT CASE WHEN m -> 'counters_since_delta_snapshot' = '{}'::jsonb \
                THEN m - 'counters_since_delta_snapshot' ELSE m END \
                FROM (SELECT (metadata - 'deerflow_checkpoint_channel_mode') \
                    #- '{counters_since_delta_snapshot,messages}' AS m) s) \
            WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3";
        let n = self
            .rt
            .block_on(self.client.execute_typed(
                sql,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&checkpoint_id, Type::TEXT),
                ],
            ))
            .map_err(|e| self.err(what, e))?;
        if n != 1 {
            return Err(StoreError::Query {
                what: what.into(),
                reason: format!("checkpoint {checkpoint_id} vanished"),
            });
        }
        Ok(())
    }

    /// Turns one checkpoint into its delta-mode form, in SQL so every other JSONB byte stays
    /// as stored: `inline` `Some(true)` sets LangGraph's inline `messages: true` snapshot
    /// marker, `Some(false)` removes any inline `messages` value, `None` leaves the body; the
    /// metadata is replaced.
    pub fn rewrite_checkpoint_delta(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        inline: Option<bool>,
        metadata: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let what = "rewriting a checkpoint";
        let mode: i32 = match inline {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        };
        let sql = "UPDATE checkpoints SET \
            checkpoint = CASE $4::int \
                WHEN 1 THEN checkpoint #- '{channel_values,messages}' \
                WHEN 2 THEN jsonb_set(checkpoint, '{channel_values,messages}', 'true'::jsonb, true) \
                ELSE checkpoint END, \
            metadata = $5 \
            WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3";
        let n = self
            .rt
            .block_on(self.client.execute_typed(
                sql,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&checkpoint_id, Type::TEXT),
                    (&mode, Type::INT4),
                    (metadata, Type::JSONB),
                ],
            ))
            .map_err(|e| self.err(what, e))?;
        if n != 1 {
            return Err(StoreError::Query {
                what: what.into(),
                reason: format!("checkpoint {checkpoint_id} vanished"),
            });
        }
        Ok(())
    }

    /// Removes the `messages` blob at `version` (a delta-mode version that stores nothing).
    pub fn delete_messages_blob(
        &self,
        thread_id: &str,
        ns: &str,
        version: &str,
    ) -> Result<(), StoreError> {
        let sql = "DELETE FROM checkpoint_blobs WHERE thread_id = $1 AND checkpoint_ns = $2 \
            AND channel = 'messages' AND version = $3";
        self.rt
            .block_on(self.client.execute_typed(
                sql,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&version, Type::TEXT),
                ],
            ))
            .map(|_| ())
            .map_err(|e| self.err("removing a messages blob", e))
    }

    /// Stores `messages` at `version` as a `msgpack` blob (`blob` is the plaintext),
    /// overwriting a snapshot. The blob is encrypted when the one it replaces was, or, for a
    /// new version, when the thread already holds an encrypted blob (the application writing
    /// it has encryption on), and under `--encrypt-all`.
    pub fn upsert_messages_blob(
        &self,
        thread_id: &str,
        ns: &str,
        version: &str,
        blob: &[u8],
    ) -> Result<(), StoreError> {
        use crate::codec::aes::Protection;
        // Without a key no encrypted value was decoded, so none is rewritten: no lookup.
        let encrypted = crate::codec::aes::key().is_some()
            && self
                .rt
                .block_on(self.client.query_typed(
                    "SELECT COALESCE( \
                    (SELECT type LIKE '%+aes' FROM checkpoint_blobs WHERE thread_id = $1 \
                        AND checkpoint_ns = $2 AND channel = 'messages' AND version = $3), \
                    EXISTS (SELECT 1 FROM checkpoint_blobs WHERE thread_id = $1 \
                        AND type LIKE '%+aes'))",
                    &[
                        (&thread_id, Type::TEXT),
                        (&ns, Type::TEXT),
                        (&version, Type::TEXT),
                    ],
                ))
                .map_err(|e| self.err("reading a messages blob's serializer", e))?
                .first()
                .and_then(|r| r.get::<_, Option<bool>>(0))
                .unwrap_or(false);
        let protection = if encrypted {
            Protection::Aes
        } else {
            Protection::Plain
        };
        let (type_tag, blob) = protection
            .for_write()
            .seal("msgpack", blob.to_vec())
            .map_err(|e| StoreError::Query {
                what: "encrypting a messages blob".into(),
                reason: e.to_string(),
            })?;
        let sql = "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
            VALUES ($1, $2, 'messages', $3, $5, $4) \
            ON CONFLICT (thread_id, checkpoint_ns, channel, version) \
            DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob";
        self.rt
            .block_on(self.client.execute_typed(
                sql,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&version, Type::TEXT),
                    (&blob, Type::BYTEA),
                    (&type_tag, Type::TEXT),
                ],
            ))
            .map(|_| ())
            .map_err(|e| self.err("writing a messages blob", e))
    }
}

impl PlanStore for PostgresStore {
    fn store(&self) -> &dyn Store {
        self
    }

    fn list_threads(&self, given: &[String]) -> Result<Vec<String>, StoreError> {
        PostgresStore::begin_read(self)?;
        let ids = crate::store::select_threads(self, given);
        self.end_transaction(false)?;
        ids
    }

    fn thread_page(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>, StoreError> {
        PostgresStore::begin_read(self)?;
        let ids = self.thread_ids_page(after, limit);
        self.end_transaction(false)?;
        ids
    }

    fn begin_read(&self) -> Result<(), StoreError> {
        PostgresStore::begin_read(self)
    }

    fn end_read(&self) -> Result<(), StoreError> {
        self.end_transaction(false)
    }
}

impl WriteStore for PostgresStore {
    fn lock_thread(&self, thread_id: &str) -> Result<ThreadLock, StoreError> {
        self.begin_thread(thread_id)
    }

    fn commit(&self) -> Result<(), StoreError> {
        self.end_transaction(true)
    }

    fn rollback(&self) -> Result<(), StoreError> {
        self.end_transaction(false)
    }

    fn groups_threads(&self) -> bool {
        true
    }

    fn open_group(&self, ids: &[String]) -> Result<ThreadLock, StoreError> {
        self.lock_group(ids)
    }

    fn lock_in_group(&self, thread_id: &str) -> Result<ThreadLock, StoreError> {
        self.savepoint_in_group(thread_id)
    }

    fn end_in_group(&self, keep: bool) -> Result<(), StoreError> {
        self.end_savepoint(keep)
    }

    fn writes_together(&self) -> bool {
        true
    }

    fn join_group(&self, thread_id: &str) -> Result<ThreadLock, StoreError> {
        self.join_in_group(thread_id)
    }

    fn backup_to(&self, _dest: &std::path::Path) -> Result<(), StoreError> {
        Err(StoreError::Target(
            "--backup is for SQLite stores; back a PostgreSQL store up with pg_dump first".into(),
        ))
    }
}
