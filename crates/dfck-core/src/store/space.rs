//! Where a store's bytes sit on disk: the file, its free pages and its WAL (SQLite), or each
//! table with its TOAST data, indexes and dead tuples (PostgreSQL). `inspect` shows these
//! facts, `reclaim` measures them before and after (docs/space.md).

use serde::Serialize;

/// The on-disk facts of a SQLite store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SqliteSpace {
    /// Size of the database file.
    pub file_bytes: u64,
    /// Size of the `-wal` file (0 when there is none).
    pub wal_bytes: u64,
    /// Size of the `-shm` file (0 when there is none).
    pub shm_bytes: u64,
    /// File + WAL + SHM.
    pub total_bytes: u64,
    /// `PRAGMA page_size`.
    pub page_size: u64,
    /// `PRAGMA page_count` (pages of the database as the connection sees it).
    pub page_count: u64,
    /// `PRAGMA freelist_count`: pages that hold nothing.
    pub freelist_pages: u64,
    /// `freelist_pages × page_size`: what `VACUUM` gives back at least.
    pub free_page_bytes: u64,
    /// Bytes of pages in use (`(page_count − freelist_pages) × page_size`): about the size
    /// of a compacted copy.
    pub used_bytes: u64,
}

/// One table of a PostgreSQL store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PgTableSpace {
    /// Table name (in the store's schema).
    pub table: String,
    /// `pg_total_relation_size`: heap, TOAST and indexes.
    pub total_bytes: u64,
    /// The main heap (`pg_relation_size`).
    pub heap_bytes: u64,
    /// The TOAST table and its index (large values live there).
    pub toast_bytes: u64,
    /// Every index of the table.
    pub index_bytes: u64,
    /// `pg_stat_user_tables.n_live_tup` (an estimate).
    pub live_tuples: u64,
    /// `pg_stat_user_tables.n_dead_tup`: rows deleted or updated and not yet vacuumed.
    pub dead_tuples: u64,
}

/// The on-disk facts of a PostgreSQL store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PgSpace {
    /// The sum of the tables' totals.
    pub total_bytes: u64,
    /// `checkpoints`, `checkpoint_blobs`, `checkpoint_writes` (those that exist).
    pub tables: Vec<PgTableSpace>,
}

/// The on-disk facts of a store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum StoreSpace {
    /// A SQLite file.
    Sqlite(SqliteSpace),
    /// PostgreSQL tables.
    Postgres(PgSpace),
}

impl StoreSpace {
    /// Bytes on disk: file + WAL + SHM, or the tables' totals.
    pub fn total_bytes(&self) -> u64 {
        match self {
            StoreSpace::Sqlite(s) => s.total_bytes,
            StoreSpace::Postgres(p) => p.total_bytes,
        }
    }
}

/// The tables a PostgreSQL store's bytes live in (the migrations table is negligible).
pub const PG_TABLES: [&str; 3] = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"];

/// Bytes of one channel of one thread: its stored values and its pending writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelTotals {
    /// Thread id.
    pub thread_id: String,
    /// Channel name.
    pub channel: String,
    /// Bytes of stored values (SQLite: inside checkpoints; Postgres: blobs and inline JSONB).
    pub values_bytes: u64,
    /// Bytes of pending-write values.
    pub writes_bytes: u64,
}
