//! The write engine's group transaction on PostgreSQL: one `REPEATABLE READ` transaction
//! for a group of threads, whose locks are all taken when it opens (three statements, not
//! three per thread) and released together when it ends; each thread then works inside a
//! savepoint of its own, opened and ended by statements that wait for no answer
//! (`deferred`).

use super::PostgresStore;
use super::batch::{IN_BATCH, json_list};
use super::write::BEGIN_WRITE;
use crate::error::StoreError;
use crate::store::ThreadLock;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

/// Thread savepoints opened by this process (the `savepoint-fail` failpoint counts them).
static SAVEPOINTS: AtomicU64 = AtomicU64::new(0);

impl PostgresStore {
    /// Opens the group's transaction and locks its threads: each thread's advisory lock
    /// (a thread another dfck holds is remembered, and refused when its turn comes), then
    /// the row locks of every other thread, `NOWAIT`. A row a live writer holds (or changed
    /// since the snapshot) rolls the whole attempt back: [`ThreadLock::Contended`], and the
    /// engine gives the group's first thread a transaction of its own, which waits.
    pub(super) fn lock_group(&self, ids: &[String]) -> Result<ThreadLock, StoreError> {
        self.rt
            .block_on(self.client.batch_execute(BEGIN_WRITE))
            .map_err(|e| self.err("starting a write transaction", e))?;
        self.write_began();
        match self.lock_threads(ids) {
            Ok(Some(busy)) => {
                *self.group_busy.borrow_mut() = busy;
                Ok(ThreadLock::Held)
            }
            Ok(None) => {
                self.end_transaction(false)?;
                Ok(ThreadLock::Contended(
                    "a live writer holds some of the group's rows".into(),
                ))
            }
            Err(e) => {
                let _ = self.end_transaction(false);
                Err(e)
            }
        }
    }

    /// The locks of [`Self::lock_group`]: the threads another dfck holds, or `None` when a
    /// row lock was not free at once.
    fn lock_threads(&self, ids: &[String]) -> Result<Option<HashSet<String>>, StoreError> {
        let rows = self.query(
            "taking the threads' advisory locks",
            "SELECT t, pg_try_advisory_xact_lock(hashtextextended('dfck migrate ' || t, 0)) \
             FROM json_array_elements_text($1::text::json) AS t",
            &[&json_list(ids.iter())],
        )?;
        let mut busy = HashSet::new();
        for r in &rows {
            let id: String = r.try_get(0).map_err(|e| self.err("reading a lock", e))?;
            if !r.try_get::<_, bool>(1).unwrap_or(false) {
                busy.insert(id);
            }
        }
        let list = json_list(ids.iter().filter(|id| !busy.contains(*id)));
        for (what, table) in [
            ("locking the threads' checkpoints", "checkpoints"),
            ("locking the threads' blobs", "checkpoint_blobs"),
        ] {
            let sql = format!("SELECT 1 FROM {table} WHERE {IN_BATCH} FOR UPDATE NOWAIT");
            let r = self
                .rt
                .block_on(self.client.query_typed(&sql, &[(&list, Type::TEXT)]));
            if let Err(e) = r {
                let code = e.code();
                if code == Some(&SqlState::LOCK_NOT_AVAILABLE)
                    || code == Some(&SqlState::T_R_SERIALIZATION_FAILURE)
                {
                    return Ok(None);
                }
                return Err(self.err(what, e));
            }
        }
        Ok(Some(busy))
    }

    /// A thread's turn in the group, written together with others (no savepoint), or
    /// [`ThreadLock::Busy`] when another dfck holds it.
    pub(super) fn join_in_group(&self, thread_id: &str) -> Result<ThreadLock, StoreError> {
        if self.group_busy.borrow().contains(thread_id) {
            return Ok(ThreadLock::Busy(self.lock_holder(thread_id)));
        }
        Ok(ThreadLock::Held)
    }

    /// A thread's turn in the group: its savepoint, or [`ThreadLock::Busy`] (nothing open)
    /// when another dfck holds it.
    pub(super) fn savepoint_in_group(&self, thread_id: &str) -> Result<ThreadLock, StoreError> {
        if let lock @ ThreadLock::Busy(_) = self.join_in_group(thread_id)? {
            return Ok(lock);
        }
        // Answered before the thread's first statement is: no round trip of its own.
        let n = SAVEPOINTS.fetch_add(1, Ordering::Relaxed) + 1;
        let sql = if crate::failpoint::Failpoints::from_env("write").savepoint_fails(n) {
            "SAVEPOINT dfck thread"
        } else {
            "SAVEPOINT dfck_thread"
        };
        self.send_deferred("opening the thread's savepoint", sql.into());
        Ok(ThreadLock::Held)
    }
}
