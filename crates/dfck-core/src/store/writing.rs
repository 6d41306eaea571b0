//! The write side of the store layer: the per-thread transaction the write engine
//! (`crate::write`) drives ([`WriteStore`]), and the read access a plan needs ([`PlanStore`]).

use super::{Store, select_threads};
use crate::error::StoreError;

/// Whether a thread's write lock was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadLock {
    /// The thread is locked inside a fresh transaction.
    Held,
    /// Another dfck holds the thread; no transaction is open. The text names the holder as
    /// far as the server says (its command and process), `None` when it cannot be read.
    Busy(Option<String>),
    /// Another writer kept the lock for the whole bounded wait; no transaction is open.
    /// The text names that writer, as far as the backend can tell.
    Contended(String),
}

/// A write-ahead log a batch could not empty: a reader kept it in use. Everything committed
/// is durable in it; the database engine folds it in once the reader is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalLeft {
    /// The log's size in bytes.
    pub bytes: u64,
    /// The log is a copy target's, not the `--db` store's.
    pub of_target: bool,
}

/// What a `--backup` needs (see [`WriteStore::backup_plan`]).
#[derive(Debug, Clone, Copy)]
pub struct BackupPlan {
    /// The size of the copy: the store's pages in use.
    pub bytes: u64,
    /// Free bytes where the copy goes, when known.
    pub free: Option<u64>,
    /// The copy goes to the file system the store grows on: the copy and the work share
    /// its free space.
    pub shares_store_space: bool,
}

/// What [`WriteStore::begin_batch`] changed on the connection, undone by
/// [`WriteStore::end_batch`].
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchTuning {
    /// A spare connection copies committed data in the background
    /// ([`WriteStore::background_step`]).
    pub background: bool,
    /// Commits no longer wait for the disk; the end of the batch makes everything durable.
    pub relaxed: bool,
}

/// What a command plans on: the store, its thread list and a read transaction. Every
/// [`WriteStore`] is one; a dry run plans on a read-only store through [`ReadOnly`].
pub trait PlanStore {
    /// The store as read inside the open transaction.
    fn store(&self) -> &dyn Store;

    /// The threads a command works on (see [`select_threads`]), read outside any write
    /// transaction.
    fn list_threads(&self, given: &[String]) -> Result<Vec<String>, StoreError> {
        select_threads(self.store(), given)
    }

    /// One page of every thread of the store ([`Store::thread_ids_after`]), read outside
    /// any write transaction.
    fn thread_page(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>, StoreError> {
        self.store().thread_ids_after(after, limit)
    }

    /// Opens a read transaction (one snapshot, no write lock) for planning without writing.
    fn begin_read(&self) -> Result<(), StoreError>;

    /// Closes it (nothing was written).
    fn end_read(&self) -> Result<(), StoreError>;
}

/// A read-only store to plan on (a dry run): each thread is read inside a read transaction
/// of its own ([`Store::begin_read_transaction`]).
pub struct ReadOnly<'a>(pub &'a dyn Store);

impl PlanStore for ReadOnly<'_> {
    fn store(&self) -> &dyn Store {
        self.0
    }

    fn begin_read(&self) -> Result<(), StoreError> {
        self.0.begin_read_transaction()
    }

    fn end_read(&self) -> Result<(), StoreError> {
        self.0.end_read_transaction()
    }
}

/// Write access to a store: one transaction per thread, as the write engine
/// (`crate::write`) drives it. Command-specific row changes are inherent methods of the
/// backends; this trait carries only what every store-changing command shares.
pub trait WriteStore: PlanStore {
    /// Opens the thread's write transaction and takes its locks (SQLite: the database write
    /// lock, `BEGIN IMMEDIATE`; Postgres: the thread's advisory lock, then row locks with a
    /// lock timeout). [`ThreadLock::Busy`]: another dfck holds it; nothing is open then.
    fn lock_thread(&self, thread_id: &str) -> Result<ThreadLock, StoreError>;

    /// Commits the thread's transaction.
    fn commit(&self) -> Result<(), StoreError>;

    /// Rolls the thread's transaction back (nothing of it stays).
    fn rollback(&self) -> Result<(), StoreError>;

    /// Free bytes where the store grows, when known.
    fn free_space(&self) -> Option<u64> {
        None
    }

    /// Writes a consistent copy of the store to `dest` before anything changes.
    fn backup_to(&self, dest: &std::path::Path) -> Result<(), StoreError>;

    /// What a `--backup` to `dest` needs, checked before anything is written: an error when
    /// `dest` cannot be a backup (it exists, or names the store or one of its files).
    fn backup_plan(&self, dest: &std::path::Path) -> Result<BackupPlan, StoreError> {
        let _ = dest;
        Err(StoreError::Target(
            "--backup is for SQLite stores; back a PostgreSQL store up with pg_dump first".into(),
        ))
    }

    /// Prepares the connection for a batch of thread transactions; `background`: a spare
    /// connection will call [`WriteStore::background_step`] while the batch runs.
    fn begin_batch(&self, _background: bool) -> BatchTuning {
        BatchTuning::default()
    }

    /// One step of background work on a spare connection (SQLite: copy WAL frames into the
    /// file); errors only delay the work until [`WriteStore::end_batch`].
    fn background_step(&self) {}

    /// Between two threads of a batch, outside any transaction: keeps the write-ahead log
    /// bounded (SQLite: checkpoints and truncates it once it grows past a bound). Errors
    /// only delay the work.
    fn between_threads(&self) {}

    /// Undoes [`WriteStore::begin_batch`] and makes the batch durable; `Some` when a reader
    /// kept the write-ahead log from being emptied.
    fn end_batch(&self, _tuning: BatchTuning) -> Result<Option<WalLeft>, StoreError> {
        Ok(None)
    }

    /// Whether several threads may share one transaction, each inside a savepoint of its
    /// own ([`WriteStore::open_group`]); `false`: one transaction per thread.
    fn groups_threads(&self) -> bool {
        false
    }

    /// Opens a transaction for the group `ids` and takes what its threads need (SQLite: the
    /// database write lock, waited for as [`WriteStore::lock_thread`] does; PostgreSQL:
    /// every thread's locks, `NOWAIT`). Not `Held`: nothing is open. Closed by
    /// [`WriteStore::commit`] or [`WriteStore::rollback`].
    fn open_group(&self, _ids: &[String]) -> Result<ThreadLock, StoreError> {
        Err(StoreError::Target(
            "this store writes one thread per transaction".into(),
        ))
    }

    /// Inside the group: the thread's turn, in a savepoint of its own.
    /// [`ThreadLock::Busy`] (another dfck holds the thread) leaves nothing of it open.
    fn lock_in_group(&self, _thread_id: &str) -> Result<ThreadLock, StoreError> {
        Ok(ThreadLock::Contended(
            "this store writes one thread per transaction".into(),
        ))
    }

    /// Ends the thread's savepoint: `keep` releases it into the group's transaction,
    /// otherwise everything the thread changed is rolled back.
    fn end_in_group(&self, _keep: bool) -> Result<(), StoreError> {
        Ok(())
    }

    /// Whether the threads of a group may also be written together, without a savepoint
    /// each ([`WriteStore::join_group`]; the write engine's `together`).
    fn writes_together(&self) -> bool {
        false
    }

    /// Inside the group: the thread's turn without a savepoint of its own, its changes
    /// made together with other threads'. [`ThreadLock::Busy`]: another dfck holds it.
    fn join_group(&self, _thread_id: &str) -> Result<ThreadLock, StoreError> {
        Ok(ThreadLock::Contended(
            "this store writes threads one at a time".into(),
        ))
    }
}
