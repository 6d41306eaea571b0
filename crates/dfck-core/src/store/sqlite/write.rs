//! The SQLite side of [`WriteStore`]: a checkpoint rewritten in place; `BEGIN IMMEDIATE` per thread, retried with backoff for
//! a bounded time; `VACUUM INTO` backups; a batch mode in which a spare connection copies
//! WAL frames in the background, the WAL is checkpointed and truncated whenever it grows
//! past a bound, and the end of the batch makes everything durable even when a reader
//! keeps the WAL from being truncated.

use super::SqliteStore;
use crate::error::StoreError;
use crate::store::{BackupPlan, BatchTuning, PlanStore, Store, ThreadLock, WalLeft, WriteStore};
use rusqlite::{ErrorCode, OptionalExtension, params};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The busy timeout of a read-write connection's statements other than taking the write
/// lock (a rollback-journal commit waits for readers to finish), as the connection opens.
const WRITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a thread waits, in total, for another writer to release the write lock before
/// it is refused.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// How long SQLite itself waits on each attempt (the lock is retried with backoff).
const LOCK_STEP: Duration = Duration::from_millis(50);

/// The WAL is checkpointed and truncated between threads once it is larger than this.
const WAL_BOUND: u64 = 16 << 20;

/// How long the end of a batch retries the final checkpoint while a reader blocks it.
const FINAL_CHECKPOINT_WAIT: Duration = Duration::from_secs(5);

pub(super) fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

fn q(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Query {
        what: what.to_owned(),
        reason: e.to_string(),
    }
}

impl SqliteStore {
    fn wal_path(&self) -> PathBuf {
        PathBuf::from(format!("{}-wal", self.info().location))
    }

    /// The WAL's size in bytes (0 when there is none).
    pub fn wal_bytes(&self) -> u64 {
        std::fs::metadata(self.wal_path()).map_or(0, |m| m.len())
    }

    /// `wal_checkpoint(TRUNCATE)`, retried with backoff for up to `wait` while another
    /// connection (a reader, or a concurrent checkpoint) blocks it. `Ok(true)`: the WAL is
    /// copied into the file and emptied.
    pub(super) fn checkpoint_truncate(&self, wait: Duration) -> Result<bool, StoreError> {
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(10);
        let _ = self.conn.busy_timeout(LOCK_STEP);
        let result = loop {
            let r = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    r.get::<_, i64>(0)
                });
            match r {
                Ok(0) => break Ok(true),
                Ok(_) => {}
                Err(e) if busy(&e) => {}
                Err(e) => break Err(q("checkpointing the WAL")(e)),
            }
            if Instant::now() + pause > deadline {
                break Ok(false);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(500));
        };
        let _ = self.conn.busy_timeout(WRITE_BUSY_TIMEOUT);
        result
    }

    /// Makes every committed WAL frame durable, whatever `synchronous` the commits ran with,
    /// through SQLite alone: one more commit at `synchronous = FULL` (which fsyncs the whole
    /// WAL) that rewrites the header's `user_version` with the value it already has, so no
    /// byte of the store changes. The WAL is never opened beside SQLite's own descriptors
    /// (docs/reliability.md). When another writer holds the write lock for the whole wait,
    /// its own commit syncs the WAL (LangGraph and DeerFlow commit at SQLite's default,
    /// `FULL`), so nothing is lost by not waiting longer.
    fn sync_wal(&self) -> Result<(), StoreError> {
        if self.wal_bytes() == 0 {
            return Ok(());
        }
        if !matches!(self.lock_thread("")?, ThreadLock::Held) {
            return Ok(());
        }
        let r = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
            .and_then(|v| self.conn.pragma_update(None, "user_version", v))
            .map_err(q("making the WAL durable"));
        match r {
            Ok(()) => self.conn.execute_batch("COMMIT").map_err(q("committing")),
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

impl SqliteStore {
    /// Replaces one checkpoint's body and metadata (ids and parent stay). `body` is the
    /// plaintext msgpack; a checkpoint stored encrypted (`msgpack+aes`) is encrypted again
    /// with a fresh nonce, a plaintext one stays plaintext unless `--encrypt-all`.
    pub fn update_checkpoint(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        body: &[u8],
        metadata: &[u8],
    ) -> Result<(), StoreError> {
        let not_found = || StoreError::CheckpointNotFound {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: ns.to_owned(),
            checkpoint_id: checkpoint_id.to_owned(),
        };
        // Without a key no encrypted checkpoint was decoded, so none is rewritten: the row is
        // plaintext `msgpack` and needs no lookup.
        let stored: Option<String> = if crate::codec::aes::key().is_none() {
            Some("msgpack".to_owned())
        } else {
            self.conn
                .prepare_cached(
                    "SELECT type FROM checkpoints \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3",
                )
                .and_then(|mut st| {
                    st.query_row(params![thread_id, ns, checkpoint_id], |r| r.get(0))
                        .optional()
                })
                .map_err(q("reading a checkpoint's serializer"))?
                .ok_or_else(not_found)?
        };
        let protection = crate::codec::aes::Protection::of_tag(stored.as_deref()).for_write();
        let (type_tag, body) =
            protection
                .seal("msgpack", body.to_vec())
                .map_err(|e| StoreError::Query {
                    what: "encrypting a checkpoint".into(),
                    reason: e.to_string(),
                })?;
        let n = self
            .conn
            .prepare_cached(
                "UPDATE checkpoints SET checkpoint = ?1, metadata = ?2, type = ?6 \
                 WHERE thread_id = ?3 AND checkpoint_ns = ?4 AND checkpoint_id = ?5",
            )
            .and_then(|mut st| {
                st.execute(params![
                    body,
                    metadata,
                    thread_id,
                    ns,
                    checkpoint_id,
                    type_tag
                ])
            })
            .map_err(q("rewriting a checkpoint"))?;
        if n != 1 {
            return Err(not_found());
        }
        Ok(())
    }
}

impl PlanStore for SqliteStore {
    fn store(&self) -> &dyn Store {
        self
    }

    /// Inside the read transaction of a batch read ahead, a no-op (and so is `end_read`).
    fn begin_read(&self) -> Result<(), StoreError> {
        if self.ahead_reading.get() {
            return Ok(());
        }
        self.conn
            .execute_batch("BEGIN")
            .map_err(q("starting a read transaction"))
    }

    fn end_read(&self) -> Result<(), StoreError> {
        if self.ahead_reading.get() {
            return Ok(());
        }
        SqliteStore::rollback(self)
    }
}

impl WriteStore for SqliteStore {
    /// SQLite locks the whole database: the thread is "held" once the write lock is taken.
    /// `BEGIN IMMEDIATE` is retried with backoff for up to [`LOCK_WAIT`]; another writer
    /// holding the lock longer gets the thread refused, not the run failed.
    fn lock_thread(&self, _thread_id: &str) -> Result<ThreadLock, StoreError> {
        let deadline = Instant::now() + LOCK_WAIT;
        let mut pause = Duration::from_millis(20);
        let _ = self.conn.busy_timeout(LOCK_STEP);
        let result = loop {
            match self.conn.execute_batch("BEGIN IMMEDIATE") {
                Ok(()) => break Ok(ThreadLock::Held),
                Err(e) if busy(&e) => {}
                Err(e) => break Err(q("starting a write transaction")(e)),
            }
            if Instant::now() + pause > deadline {
                break Ok(ThreadLock::Contended(format!(
                    "another writer (DeerFlow, or another dfck) held the store's write lock for {} s; re-run when it is done",
                    LOCK_WAIT.as_secs()
                )));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(500));
        };
        let _ = self.conn.busy_timeout(WRITE_BUSY_TIMEOUT);
        result
    }

    fn commit(&self) -> Result<(), StoreError> {
        SqliteStore::commit(self)
    }

    /// SQLite has one writer at a time: a group shares the write lock, and a thread's
    /// savepoint takes nothing more.
    fn groups_threads(&self) -> bool {
        true
    }

    fn open_group(&self, _ids: &[String]) -> Result<ThreadLock, StoreError> {
        self.lock_thread("")
    }

    fn lock_in_group(&self, _thread_id: &str) -> Result<ThreadLock, StoreError> {
        self.conn
            .execute_batch("SAVEPOINT dfck_thread")
            .map_err(q("opening the thread's savepoint"))?;
        Ok(ThreadLock::Held)
    }

    fn end_in_group(&self, keep: bool) -> Result<(), StoreError> {
        let sql = if keep {
            "RELEASE dfck_thread"
        } else {
            "ROLLBACK TO dfck_thread; RELEASE dfck_thread"
        };
        self.conn
            .execute_batch(sql)
            .map_err(q("closing the thread's savepoint"))
    }

    fn rollback(&self) -> Result<(), StoreError> {
        SqliteStore::rollback(self)
    }

    fn free_space(&self) -> Option<u64> {
        self.available_space()
    }

    fn backup_to(&self, dest: &std::path::Path) -> Result<(), StoreError> {
        SqliteStore::backup_to(self, dest)
    }

    fn backup_plan(&self, dest: &std::path::Path) -> Result<BackupPlan, StoreError> {
        let store = std::path::Path::new(&self.info().location);
        if let Some(which) = crate::store::files::store_file_named(store, dest) {
            return Err(StoreError::Target(format!(
                "--backup {} is {which}: SQLite would take a copy there for its own file; back up to another name",
                dest.display()
            )));
        }
        // The copy is written (and then opened to be made durable) under a temporary name
        // first: that name must not be a file of the store either.
        let partial = crate::store::files::partial_backup_path(dest);
        if let Some(which) = crate::store::files::store_file_named(store, &partial) {
            return Err(StoreError::Target(format!(
                "--backup {}: its temporary name {} is {which}; back up to another name",
                dest.display(),
                partial.display()
            )));
        }
        if dest.exists() || dest.symlink_metadata().is_ok() {
            return Err(StoreError::Target(format!(
                "backup target {} already exists",
                dest.display()
            )));
        }
        let dir = crate::store::files::parent_dir(dest);
        let there = crate::store::files::dir_space(&dir);
        let here = crate::store::files::dir_space(&crate::store::files::parent_dir(store));
        Ok(BackupPlan {
            bytes: self.space_facts()?.used_bytes,
            free: there.map(|t| t.0),
            shares_store_space: matches!((there, here), (Some(a), Some(b)) if a.1 == b.1),
        })
    }

    /// A WAL left over is checkpointed and truncated first (a short try). Then, only in WAL
    /// mode: commits need not wait for the disk (a crash of dfck loses
    /// nothing committed, the WAL is in the OS; a power cut can only roll whole threads
    /// back) and everything is made durable at the end of the batch. A rollback-journal
    /// file keeps SQLite's defaults (NORMAL could corrupt it on power loss).
    fn begin_batch(&self, background: bool) -> BatchTuning {
        // A WAL left by an earlier run (killed, or blocked by a reader) gives its space back
        // first.
        if self.wal_bytes() > 0 {
            let _ = self.checkpoint_truncate(Duration::from_millis(200));
        }
        let background = background && self.is_wal() && self.set_wal_autocheckpoint(0).is_ok();
        let relaxed = background && self.set_synchronous_normal(true).is_ok();
        BatchTuning {
            background,
            relaxed,
        }
    }

    /// `wal_checkpoint(PASSIVE)`, which never blocks other connections; a busy file only
    /// delays the copy (the final checkpoint retries).
    fn background_step(&self) {
        let _ = self.wal_checkpoint(false);
    }

    /// Keeps the WAL bounded: past [`WAL_BOUND`], or past half the free space, it is
    /// checkpointed and truncated (a short try; a reader or the background copy only delays
    /// it to the next thread).
    fn between_threads(&self) {
        let wal = self.wal_bytes();
        let tight = || {
            self.available_space()
                .is_some_and(|free| wal.saturating_mul(2) > free)
        };
        if wal > WAL_BOUND || (wal > 0 && tight()) {
            let _ = self.checkpoint_truncate(Duration::from_millis(200));
        }
    }

    /// Back to the default autocheckpoint and durability; the WAL is checkpointed and
    /// truncated, retrying for a bounded time while a reader blocks it. When the reader
    /// still blocks it, the WAL is fsync'd (everything committed is durable) and its size
    /// is reported.
    fn end_batch(&self, tuning: BatchTuning) -> Result<Option<WalLeft>, StoreError> {
        if !tuning.background {
            return Ok(None);
        }
        let _ = self.set_wal_autocheckpoint(1000);
        if tuning.relaxed {
            let _ = self.set_synchronous_normal(false);
        }
        if self.checkpoint_truncate(FINAL_CHECKPOINT_WAIT)? {
            return Ok(None);
        }
        self.sync_wal()?;
        let bytes = self.wal_bytes();
        Ok((bytes > 0).then_some(WalLeft {
            bytes,
            of_target: false,
        }))
    }
}
