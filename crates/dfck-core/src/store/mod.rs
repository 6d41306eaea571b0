//! Store access: the backend-neutral row types, the [`Store`] trait (reads) and the
//! [`WriteStore`] trait (the per-thread transaction the write engine, `crate::write`,
//! drives). This is the only layer that speaks SQL; everything above it works on rows.

pub mod app;
pub mod app_copy;
pub mod batch;
pub mod delete;
pub mod files;
pub mod held;
pub mod maintenance;
pub mod postgres;
mod rows;
pub mod schema;
pub mod space;
pub mod sqlite;
mod threads;
pub(crate) mod tls;
mod writing;
mod x509;

use crate::error::StoreError;
pub use rows::*;
pub use threads::{THREAD_PAGE, for_each_page, select_threads, thread_not_found};
pub use writing::{BackupPlan, BatchTuning, PlanStore, ReadOnly, ThreadLock, WalLeft, WriteStore};

/// Where checkpoints live: LangGraph's three savers. Stores dfck reads are SQLite or
/// PostgreSQL; `Memory` exists for DeerFlow's in-process checkpointer and benchmark cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// In-process maps (LangGraph's `InMemorySaver`): nothing on disk.
    Memory,
    /// A SQLite file (`SqliteSaver`).
    Sqlite,
    /// A PostgreSQL database (`PostgresSaver`).
    Postgres,
}

impl Backend {
    /// The backend's name in flags, rows, configs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }

    /// Parses `memory` / `sqlite` / `postgres`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "memory" => Some(Backend::Memory),
            "sqlite" => Some(Backend::Sqlite),
            "postgres" => Some(Backend::Postgres),
            _ => None,
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Facts about the store itself.
#[derive(Debug, Clone)]
pub struct StoreInfo {
    /// Which backend holds the store.
    pub backend: Backend,
    /// Path or URL (passwords redacted).
    pub location: String,
    /// Schema shape, e.g. `"sqlite"` with `task_path` or without.
    pub schema: String,
    /// Whether the writes table has `task_path`.
    pub has_task_path: bool,
}

/// Pending writes sent for and not yet read ([`Store::thread_writes_later`]).
pub type LaterWrites<'a> = Box<dyn FnOnce() -> Result<Vec<WriteRow>, StoreError> + 'a>;

/// Read access to a LangGraph checkpoint store. Every scan streams: a callback sees rows
/// one at a time, so memory follows the largest thread, not the store.
pub trait Store {
    /// What this store is.
    fn info(&self) -> &StoreInfo;

    /// A hint that the caller reads a few (possibly large) checkpoints rather than scanning
    /// the store (SQLite maps the file into memory).
    fn prefer_point_reads(&self) {}

    /// [`Store::scan_checkpoint_meta`] with each row's facts as well, where one pass reads
    /// them cheaply: SQLite the whole row, PostgreSQL the row with its blobs' lengths and
    /// first bytes (as [`Store::checkpoint_facts_at`] reads them, every channel's) and its
    /// pending-write bytes ([`Store::scan_reads_write_bytes`]). `None` for a row whose body
    /// is over `max_body` bytes, or that the scan cannot read as the point reads do (it is
    /// not read); [`WholeScan::Unsupported`], having read nothing, where the backend does
    /// not. Where a row's facts are given, its keys and metadata are theirs: the meta row's
    /// may be left empty ([`CheckpointMetaRow::keys_of`]).
    fn scan_checkpoints_whole(
        &self,
        _max_body: u64,
        _f: &mut dyn FnMut(CheckpointMetaRow, Option<FactsRow>) -> Result<(), StoreError>,
    ) -> Result<WholeScan, StoreError> {
        Ok(WholeScan::Unsupported)
    }

    /// Whether the rows [`Store::scan_checkpoints_whole`] gives carry their pending-write
    /// bytes ([`FactsRow::write_bytes`]; both backends); else those are read with
    /// [`Store::write_bytes_at`].
    fn scan_reads_write_bytes(&self) -> bool {
        false
    }

    /// Whether [`Store::scan_checkpoints_whole`] may count the store's write totals on the
    /// way ([`WholeScan::Read`]; SQLite's writes merge); where it never does, a summary
    /// reads them before the scan.
    fn scan_counts_write_totals(&self) -> bool {
        false
    }

    /// Whether the checkpoint scans give threads in byte order of their ids (SQLite's
    /// `BINARY`; a PostgreSQL database whose collation is `C`), so that a report can be
    /// written as they come.
    fn scans_bytewise(&self) -> bool {
        false
    }

    /// Streams metadata facts of every checkpoint; the rows of one thread come together.
    fn scan_checkpoint_meta(
        &self,
        f: &mut dyn FnMut(CheckpointMetaRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// (rows, value bytes) of every pending write in the store, counted as
    /// [`Store::write_totals_of`] counts a thread's.
    fn write_totals(&self) -> Result<(u64, u64), StoreError>;

    /// Write totals (rows, value bytes) per thread of `threads` only, in any order (a thread
    /// without writes left out).
    fn write_totals_of(
        &self,
        threads: &[String],
        f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// [`Store::write_totals_of`] for PostgreSQL's `checkpoint_blobs` (nothing for SQLite).
    fn blob_totals_of(
        &self,
        _threads: &[String],
        _f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    /// [`Store::write_totals`] for PostgreSQL's `checkpoint_blobs` (nothing for SQLite).
    fn blob_totals(&self) -> Result<(u64, u64), StoreError> {
        Ok((0, 0))
    }

    /// Where the store's bytes sit on disk (file, free pages and WAL; or tables).
    fn space(&self) -> Result<space::StoreSpace, StoreError>;

    /// Streams pending-write bytes per (thread, channel), ordered by thread id.
    fn scan_write_channels(
        &self,
        f: &mut dyn FnMut(space::ChannelTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Streams stored-value bytes per (thread, channel) when SQL can sum them (Postgres:
    /// blobs and inline values) and returns `true`; `false` when values live inside the
    /// checkpoint documents and must be decoded (SQLite).
    fn scan_value_channels(
        &self,
        _f: &mut dyn FnMut(space::ChannelTotals) -> Result<(), StoreError>,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// Streams the distinct thread ids that have checkpoints.
    fn scan_thread_ids(
        &self,
        f: &mut dyn FnMut(String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Up to `limit` thread ids with checkpoints after `after` (from the first with `None`),
    /// in the store's order: one page of [`for_each_page`].
    fn thread_ids_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError>;

    /// Every pending write of (thread, ns), in no particular order.
    fn thread_writes(&self, thread_id: &str, ns: &str) -> Result<Vec<WriteRow>, StoreError>;

    /// [`Store::thread_writes`], read when the returned closure is called. PostgreSQL sends
    /// the read at once (the writes as they are then), so that the thread's scan between
    /// costs no round trip more; elsewhere they are read by the closure.
    fn thread_writes_later(
        &self,
        thread_id: &str,
        ns: &str,
    ) -> Result<LaterWrites<'_>, StoreError> {
        let (t, n) = (thread_id.to_owned(), ns.to_owned());
        Ok(Box::new(move || self.thread_writes(&t, &n)))
    }

    /// The namespaces of a thread, sorted.
    fn namespaces(&self, thread_id: &str) -> Result<Vec<String>, StoreError>;

    /// Up to `limit` checkpoint ids of (thread, ns) that start with `prefix`, sorted (for
    /// unique-prefix addressing, see [`crate::address`]).
    fn checkpoint_ids_with_prefix(
        &self,
        thread_id: &str,
        ns: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError>;

    /// Up to `limit` checkpoints anywhere in the store whose id starts with `prefix`, as
    /// (thread, namespace, id), sorted by id (`prune --all --protect`).
    fn checkpoints_with_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String, String)>, StoreError>;

    /// DeerFlow's own tables in the same database ([`app::AppTables`]); `None` where the
    /// backend has none to offer.
    fn app(&self) -> Option<&dyn app::AppTables> {
        None
    }

    /// dfck's own maintenance table ([`maintenance::MaintenanceTable`]).
    fn maintenance(&self) -> Option<&dyn maintenance::MaintenanceTable> {
        None
    }

    /// DeerFlow's tables row by row, for `copy` ([`app_copy::AppRows`]).
    fn app_rows(&self) -> Option<&dyn app_copy::AppRows> {
        None
    }

    /// Starts a read transaction for a run of reads that must see one state of the store
    /// (a dry run's plan of one thread); a no-op where the whole connection already reads
    /// one snapshot.
    fn begin_read_transaction(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Ends what [`Store::begin_read_transaction`] started.
    fn end_read_transaction(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// The greatest checkpoint id in (thread, ns): LangGraph's "latest".
    fn head_id(&self, thread_id: &str, ns: &str) -> Result<Option<String>, StoreError>;

    /// One checkpoint row.
    fn checkpoint(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
    ) -> Result<Option<CheckpointRow>, StoreError>;

    /// Whether [`Store::checkpoints_in_window`] reads several checkpoints for about the cost
    /// of one (PostgreSQL: one round trip); a walk then reads ahead of itself
    /// ([`crate::model::read_back`]).
    fn reads_several_at_once(&self) -> bool {
        false
    }

    /// [`Store::checkpoints_at`] of keys whose rows the caller knows to fit in memory
    /// together (a read-back window, [`crate::model::read_back::AHEAD_BYTES`]): PostgreSQL
    /// reads them in one statement, without a cursor.
    fn checkpoints_in_window(
        &self,
        keys: &[CheckpointKey],
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.checkpoints_at(keys, f)
    }

    /// Several point reads at once: `f` sees each checkpoint of `keys` that exists, in no
    /// particular order. One round trip per call where the backend has round trips.
    fn checkpoints_at(
        &self,
        keys: &[CheckpointKey],
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        for k in keys {
            if let Some(row) = self.checkpoint(&k.thread_id, &k.checkpoint_ns, &k.checkpoint_id)? {
                f(row)?;
            }
        }
        Ok(())
    }

    /// The bytes of the pending-write values stored on each checkpoint of `keys`, in order.
    fn write_bytes_at(&self, keys: &[CheckpointKey]) -> Result<Vec<u64>, StoreError> {
        keys.iter()
            .map(|k| {
                let rows = self.writes(&k.thread_id, &k.checkpoint_ns, &k.checkpoint_id, None)?;
                Ok(rows.iter().map(|w| w.value.len() as u64).sum())
            })
            .collect()
    }

    /// What a store summary needs of each checkpoint of `keys` that exists (in no
    /// particular order), with the optional facts `want` names:
    /// [`Store::checkpoints_at`] and [`Store::write_bytes_at`] made into facts, or the facts
    /// read directly where that reads less.
    fn checkpoint_facts_at(
        &self,
        keys: &[CheckpointKey],
        want: FactsWanted,
        f: &mut dyn FnMut(FactsRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let writes = if want.writes {
            self.write_bytes_at(keys)?
        } else {
            vec![0; keys.len()]
        };
        let at: std::collections::HashMap<&CheckpointKey, u64> = keys.iter().zip(writes).collect();
        self.checkpoints_at(keys, &mut |row| {
            let key = CheckpointKey {
                thread_id: row.thread_id.clone(),
                checkpoint_ns: row.checkpoint_ns.clone(),
                checkpoint_id: row.checkpoint_id.clone(),
            };
            let w = at.get(&key).copied().unwrap_or(0);
            f(FactsRow {
                row,
                write_bytes: w,
                blob_lengths: None,
                whole: true,
                thread_writes: None,
                thread_blobs: None,
            })
        })
    }

    /// Like [`Store::scan_thread`], but every channel value complete (no placeholders).
    fn scan_thread_values(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.scan_thread(thread_id, ns, f)
    }

    /// Whether channel values live apart from checkpoints, shared by every checkpoint at
    /// the same channel version (Postgres `checkpoint_blobs`); SQLite stores each
    /// checkpoint's values inside it.
    fn values_shared_by_version(&self) -> bool {
        false
    }

    /// Every checkpoint of a thread (all namespaces) with its `ts`, size and write count,
    /// when the backend can read them without the channel values (PostgreSQL: `ts` is
    /// inline); `None` when it cannot (SQLite keeps `ts` inside the serialized checkpoint).
    fn checkpoint_times(
        &self,
        _thread_id: &str,
    ) -> Result<Option<Vec<CheckpointTime>>, StoreError> {
        Ok(None)
    }

    /// Whether DeerFlow's `runs` table (when the store has one) holds a `pending` or
    /// `running` row for the thread: a run may be writing it right now.
    fn active_run(&self, _thread_id: &str) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// The metadata JSON bytes of one checkpoint, without its channel values.
    fn metadata(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError>;

    /// Streams every checkpoint row of (thread, ns), in no particular order. On Postgres a
    /// value whose version the parent shares may come as a placeholder (see
    /// [`BlobRow::complete`]); read values through [`Store::checkpoint`].
    fn scan_thread(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Streams every serialized value of (thread, ns) once, in no particular order: SQLite
    /// checkpoint rows and writes; PostgreSQL blobs (with the checkpoints naming their
    /// version) and writes. The PostgreSQL checkpoint JSONB holds only inline primitives and
    /// is not a serialized value.
    fn scan_stored_values(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(StoredValue) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        stored_values_of(self, thread_id, ns, f)
    }

    /// Reads the threads `ids` whole, every namespace, in as few queries as the backend
    /// can (`values`: every channel value complete, as [`Store::scan_thread_values`] gives
    /// them), holding about `budget` bytes of rows at most: the threads read in full come
    /// back (in no particular order; a thread without rows, gone, with no namespaces), the
    /// others are left to per-thread reads. `None`: this backend reads thread by thread.
    fn read_threads(
        &self,
        _ids: &[String],
        _budget: usize,
        _values: bool,
    ) -> Result<Option<Vec<batch::ThreadRows>>, StoreError> {
        Ok(None)
    }

    /// Reads the threads `ids` ahead as [`Store::read_threads`] does, so that the reads of
    /// each that follow ([`Store::namespaces`], then [`Store::scan_thread`] — with `values`,
    /// [`Store::scan_thread_values`] — and [`Store::thread_writes`] of each namespace) come
    /// from memory, each once; replaces what an earlier call read (none: forgets it). For
    /// planning on a read-only snapshot: nothing read ahead sees a later write. A no-op
    /// where threads are read one by one.
    fn read_ahead(&self, _ids: &[String], _budget: usize, _values: bool) -> Result<(), StoreError> {
        Ok(())
    }

    /// Forgets what [`Store::read_ahead`] read of one thread: a write is about to change it,
    /// and every later read must see the store.
    fn forget_ahead(&self, _thread_id: &str) {}

    /// Lets one [`Store::scan_thread`] read over up to `jobs` connections (PostgreSQL: helper
    /// connections inside this transaction's snapshot, for large threads); rows still come
    /// in the same order. One by default; backends that cannot split ignore it.
    fn split_scans(&self, _jobs: usize) {}

    /// The pending writes stored on one checkpoint, in canonical order; `channel`
    /// restricts them to one channel.
    fn writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        channel: Option<&str>,
    ) -> Result<Vec<WriteRow>, StoreError>;

    /// Write counts and bytes per checkpoint of (thread, ns).
    fn write_totals_by_checkpoint(
        &self,
        thread_id: &str,
        ns: &str,
    ) -> Result<Vec<CheckpointWriteTotals>, StoreError>;
}

/// [`Store::scan_stored_values`] from a thread scan and its writes, where checkpoints hold
/// their values (SQLite, and a batch held in memory: [`held::HeldStore`]).
pub(crate) fn stored_values_of<S: Store + ?Sized>(
    store: &S,
    thread_id: &str,
    ns: &str,
    f: &mut dyn FnMut(StoredValue) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    store.scan_thread(thread_id, ns, &mut |row| match row.body {
        CheckpointBody::Serialized { type_tag, bytes } => f(StoredValue {
            row: ValueRow::Checkpoint,
            channel: None,
            type_tag,
            bytes: Some(bytes),
            checkpoint_ids: vec![row.checkpoint_id],
        }),
        CheckpointBody::Postgres { .. } => Err(StoreError::Query {
            what: "reading a thread's stored values".into(),
            reason: "this backend reads its values by blob".into(),
        }),
    })?;
    for w in store.thread_writes(thread_id, ns)? {
        f(StoredValue {
            row: ValueRow::Write,
            channel: Some(w.channel),
            type_tag: w.type_tag,
            bytes: Some(w.value),
            checkpoint_ids: vec![w.checkpoint_id],
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
