//! The SQLite side of [`WriteStore`]: `BEGIN IMMEDIATE` per thread, `VACUUM INTO` backups,
//! and a batch mode in which a spare connection copies WAL frames in the background.

use super::sqlite::SqliteStore;
use super::{BatchTuning, Store, ThreadLock, WriteStore};
use crate::error::StoreError;

impl WriteStore for SqliteStore {
    fn store(&self) -> &dyn Store {
        self
    }

    /// SQLite locks the whole database: the thread is always "held" once the write lock is
    /// taken (waiting up to the busy timeout).
    fn lock_thread(&self, _thread_id: &str) -> Result<ThreadLock, StoreError> {
        self.begin_immediate()?;
        Ok(ThreadLock::Held)
    }

    fn commit(&self) -> Result<(), StoreError> {
        SqliteStore::commit(self)
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

    /// Only in WAL mode: there, commits need not wait for the disk (a crash of dfck loses
    /// nothing committed, the WAL is in the OS; a power cut can only roll whole threads
    /// back) and everything is made durable by the final checkpoint. A rollback-journal file
    /// keeps SQLite's defaults (NORMAL could corrupt it on power loss).
    fn begin_batch(&self, background: bool) -> BatchTuning {
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

    /// Back to the default autocheckpoint and durability; the WAL is checkpointed and
    /// truncated once.
    fn end_batch(&self, tuning: BatchTuning) -> Result<(), StoreError> {
        if tuning.background {
            let _ = self.set_wal_autocheckpoint(1000);
            if tuning.relaxed {
                let _ = self.set_synchronous_normal(false);
            }
            self.wal_checkpoint(true)?;
        }
        Ok(())
    }
}
