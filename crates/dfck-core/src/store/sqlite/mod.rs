//! The SQLite backend (`SqliteSaver` layout): read-only open, schema detection, streamed scans
//! (this file); how a file is opened and what a failed open means (`open`), space and VACUUM
//! (`space`), the write transaction and batches (`write`), copies into a SQLite target
//! (`copy`), reading columns whatever their storage class (`rows`), the summary's scan (`scan`).

mod app;
mod app_copy;
mod batch;
mod copy;
mod maintenance;
mod open;
mod rows;
mod scan;
pub mod space;
mod write;

use rows::{Blob, bytes_col, checkpoint_row, len_col, text_col, write_row};

use crate::error::StoreError;
use crate::store::{
    CheckpointMetaRow, CheckpointRow, CheckpointWriteTotals, Store, StoreInfo, WriteRow,
    WriteTotals, sort_writes,
};
use open::{detect_schema, dir_writable, file_uri, schema_error, sidecar};
use rusqlite::{Connection, OpenFlags, params};
use std::path::Path;

/// Page cache of a read-write connection, in KiB (SQLite's negative `cache_size`).
pub const WRITE_CACHE_KIB: i64 = 32 * 1024;

/// A LangGraph SQLite checkpoint store (read-only, or read-write for conversions).
pub struct SqliteStore {
    pub(super) conn: Connection,
    info: StoreInfo,
    /// A read transaction [`Store::begin_read_transaction`] opened and has not ended.
    reading: std::cell::Cell<bool>,
    /// Threads read ahead ([`Store::read_ahead`]), and whether their read transaction is open.
    ahead: std::cell::RefCell<crate::store::batch::ReadAhead>,
    ahead_reading: std::cell::Cell<bool>,
    /// Whether DeerFlow's `runs` table can be asked for a thread's active run, at the
    /// schema version it was asked at ([`Store::active_run`]).
    has_runs: std::cell::Cell<Option<(i64, bool)>>,
}

fn q(what: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::Query {
        what: what.to_owned(),
        reason: e.to_string(),
    }
}

impl SqliteStore {
    /// Opens `path` read-only and checks that it is a LangGraph checkpoint store.
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        Self::open(path, false)
    }

    /// Opens `path` for writing (`migrate --apply`): WAL as LangGraph leaves it, a busy
    /// timeout for concurrent writers, same schema checks.
    pub fn open_read_write(path: &Path) -> Result<Self, StoreError> {
        Self::open(path, true)
    }

    fn open(path: &Path, writable: bool) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let open_err = |reason: String| StoreError::Open {
            path: shown.clone(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| open_err(e.to_string()))?;
        if meta.is_dir() {
            return Err(open_err("is a directory".into()));
        }
        if !meta.is_file() {
            return Err(open_err("not a regular file".into()));
        }
        if meta.len() == 0 {
            return Err(StoreError::NotLangGraph {
                path: shown,
                reason: "the file is empty".into(),
            });
        }
        // The header is checked by SQLite itself (SQLITE_NOTADB at the first read), never by
        // reading the file here: on Linux, closing any descriptor of the file drops every POSIX
        // lock this process holds on it, including those of dfck's other open connections, and
        // a live DeerFlow may then checkpoint and delete the WAL under them
        // (docs/reliability.md, "No file handles beside SQLite's").
        // Read-only opens use SQLite's normal locking (`mode=ro`), so a live writer (DeerFlow
        // opens and closes connections all the time) can never tear what dfck reads. Only a
        // store nobody else can be writing is opened `immutable`: one whose directory dfck
        // cannot write (no writer could create the -wal/-shm there either) and that has no
        // -wal with frames. A WAL-mode file read with `mode=ro` gets (empty) -wal/-shm
        // sidecars when it had none, as with any SQLite reader; docs/reliability.md.
        let wal_has_frames = std::fs::metadata(sidecar(path, "-wal")).is_ok_and(|m| m.len() > 32);
        let (uri, flags) = if writable {
            (
                path.to_string_lossy().into_owned(),
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
        } else {
            (
                file_uri(path, !wal_has_frames && !dir_writable(path)),
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
        };
        let conn = Connection::open_with_flags(&uri, flags).map_err(|e| {
            match schema_error(&e, &shown) {
                StoreError::NotLangGraph { .. }
                    if e.sqlite_error_code() != Some(rusqlite::ErrorCode::NotADatabase) =>
                {
                    open_err(e.to_string())
                }
                other => other,
            }
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(if writable {
            30
        } else {
            5
        }))
        .map_err(|e| open_err(e.to_string()))?;
        // Plain reads by default: scans over the whole store keep a small resident set
        // (memory-mapped pages would count towards RSS up to the store's size).
        let _ = conn.pragma_update(None, "mmap_size", 0i64);
        if writable {
            // A conversion rewrites a whole thread in one transaction: a page cache that
            // holds it avoids spilling dirty pages to the WAL mid-transaction and serves
            // the verification read-back (pages are allocated only as used).
            let _ = conn.pragma_update(None, "cache_size", -WRITE_CACHE_KIB);
        }
        // Whole-store commands run a few dozen distinct statements per thread.
        conn.set_prepared_statement_cache_capacity(64);
        let has_task_path = detect_schema(&conn, &shown)?;
        let schema = if has_task_path {
            "sqlite (writes.task_path)"
        } else {
            "sqlite (writes without task_path)"
        };
        Ok(SqliteStore::with_conn(conn, shown, schema, has_task_path))
    }

    /// A store over an open connection, nothing read ahead, no transaction open.
    fn with_conn(conn: Connection, location: String, schema: &str, has_task_path: bool) -> Self {
        SqliteStore {
            conn,
            reading: std::cell::Cell::new(false),
            ahead: Default::default(),
            ahead_reading: std::cell::Cell::new(false),
            has_runs: std::cell::Cell::new(None),
            info: StoreInfo {
                backend: crate::store::Backend::Sqlite,
                location,
                schema: schema.into(),
                has_task_path,
            },
        }
    }

    /// Whether the file is in WAL mode (`PRAGMA journal_mode`).
    pub fn is_wal(&self) -> bool {
        self.conn
            .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
            .map(|m| m.eq_ignore_ascii_case("wal"))
            .unwrap_or(false)
    }

    /// Sets `PRAGMA wal_autocheckpoint` on this connection (0: never checkpoint on commit).
    pub fn set_wal_autocheckpoint(&self, pages: i64) -> Result<(), StoreError> {
        self.conn
            .pragma_update(None, "wal_autocheckpoint", pages)
            .map_err(q("setting wal_autocheckpoint"))
    }

    /// `PRAGMA synchronous = NORMAL` (commits do not fsync the WAL; checkpoints do) or back to
    /// `FULL`.
    pub fn set_synchronous_normal(&self, normal: bool) -> Result<(), StoreError> {
        self.conn
            .pragma_update(None, "synchronous", if normal { "NORMAL" } else { "FULL" })
            .map_err(q("setting synchronous"))
    }

    /// Runs `PRAGMA wal_checkpoint(PASSIVE|TRUNCATE)`: copies committed WAL frames into the
    /// database file (PASSIVE never waits for, nor blocks, other connections; TRUNCATE also
    /// empties the WAL when nothing else is using it).
    pub fn wal_checkpoint(&self, truncate: bool) -> Result<(), StoreError> {
        let sql = if truncate {
            "PRAGMA wal_checkpoint(TRUNCATE)"
        } else {
            "PRAGMA wal_checkpoint(PASSIVE)"
        };
        self.conn
            .query_row(sql, [], |_| Ok(()))
            .map_err(q("checkpointing the WAL"))
    }

    /// `BEGIN IMMEDIATE`: takes the write lock now (waiting up to the busy timeout), so a
    /// concurrent writer cannot interleave with one thread's conversion.
    pub fn begin_immediate(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(q("starting a write transaction"))
    }

    /// Commits the open transaction.
    pub fn commit(&self) -> Result<(), StoreError> {
        self.conn.execute_batch("COMMIT").map_err(q("committing"))?;
        self.release_cache();
        Ok(())
    }

    /// Returns the page cache's memory (one converted thread's pages) to the system.
    fn release_cache(&self) {
        let _ = self.conn.execute_batch("PRAGMA shrink_memory");
    }

    /// Rolls the open transaction back (nothing of it stays).
    pub fn rollback(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("ROLLBACK")
            .map_err(q("rolling back"))?;
        self.release_cache();
        Ok(())
    }

    /// Free bytes on the file system holding the store (`None` when unknown).
    pub fn available_space(&self) -> Option<u64> {
        let dir = std::path::Path::new(&self.info.location)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        fs4::available_space(dir).ok()
    }

    fn task_path_expr(&self) -> &'static str {
        if self.info.has_task_path {
            "task_path"
        } else {
            "''"
        }
    }
}

/// Memory-mapped reads for large point lookups (`--state`), up to SQLite's compile-time cap.
const MMAP_SIZE: i64 = 1 << 40;

const CHECKPOINT_COLS: &str =
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata";

impl Store for SqliteStore {
    fn maintenance(&self) -> Option<&dyn crate::store::maintenance::MaintenanceTable> {
        Some(self)
    }

    fn app(&self) -> Option<&dyn crate::store::app::AppTables> {
        Some(self)
    }

    fn app_rows(&self) -> Option<&dyn crate::store::app_copy::AppRows> {
        Some(self)
    }

    /// `BEGIN` (deferred: the first read takes the snapshot), unless a transaction is
    /// already open on this connection (a copy source's snapshot).
    fn begin_read_transaction(&self) -> Result<(), StoreError> {
        if self.conn.is_autocommit() {
            self.conn
                .execute_batch("BEGIN")
                .map_err(q("starting a read transaction"))?;
            self.reading.set(true);
        }
        Ok(())
    }

    fn end_read_transaction(&self) -> Result<(), StoreError> {
        if self.reading.replace(false) {
            self.conn
                .execute_batch("ROLLBACK")
                .map_err(q("ending a read transaction"))?;
        }
        Ok(())
    }

    fn scans_bytewise(&self) -> bool {
        true
    }

    fn info(&self) -> &StoreInfo {
        &self.info
    }

    fn read_threads(
        &self,
        ids: &[String],
        budget: usize,
        _values: bool,
    ) -> Result<Option<Vec<crate::store::batch::ThreadRows>>, StoreError> {
        self.read_thread_batch(ids, budget).map(Some)
    }

    fn read_ahead(&self, ids: &[String], budget: usize, _values: bool) -> Result<(), StoreError> {
        self.read_batch_ahead(ids, budget)
    }

    fn write_bytes_at(&self, keys: &[crate::store::CheckpointKey]) -> Result<Vec<u64>, StoreError> {
        self.write_bytes_each(keys)
    }

    fn forget_ahead(&self, thread_id: &str) {
        self.ahead.borrow_mut().forget(thread_id);
    }

    fn prefer_point_reads(&self) {
        // Large blobs then come straight from the page cache instead of one pread per
        // 4 KiB overflow page.
        let _ = self.conn.pragma_update(None, "mmap_size", MMAP_SIZE);
    }

    fn scan_checkpoints_whole(
        &self,
        max_body: u64,
        f: &mut dyn FnMut(
            CheckpointMetaRow,
            Option<crate::store::FactsRow>,
        ) -> Result<(), StoreError>,
    ) -> Result<crate::store::WholeScan, StoreError> {
        self.scan_whole(max_body, f)
    }

    fn scan_reads_write_bytes(&self) -> bool {
        true
    }

    fn scan_counts_write_totals(&self) -> bool {
        true
    }

    fn scan_checkpoint_meta(
        &self,
        f: &mut dyn FnMut(CheckpointMetaRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "scanning checkpoints";
        let mut st = self
            .conn
            .prepare(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, \
                 coalesce(length(checkpoint), 0) + coalesce(length(metadata), 0), metadata \
                 FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id",
            )
            .map_err(q(what))?;
        let mut rows = st.query([]).map_err(q(what))?;
        while let Some(r) = rows.next().map_err(q(what))? {
            let row = CheckpointMetaRow {
                thread_id: text_col(r, 0).map_err(q(what))?,
                checkpoint_ns: text_col(r, 1).map_err(q(what))?,
                checkpoint_id: text_col(r, 2).map_err(q(what))?,
                bytes: len_col(r, 3).map_err(q(what))?,
                metadata: bytes_col(r, 4, Blob::Json).map_err(q(what))?,
                ts: None,
            };
            f(row)?;
        }
        Ok(())
    }

    fn write_totals(&self) -> Result<(u64, u64), StoreError> {
        self.write_totals_all()
    }

    fn write_totals_of(
        &self,
        threads: &[String],
        f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.write_totals_in(threads, f)
    }

    fn space(&self) -> Result<crate::store::space::StoreSpace, StoreError> {
        self.space_facts()
            .map(crate::store::space::StoreSpace::Sqlite)
    }

    fn scan_write_channels(
        &self,
        f: &mut dyn FnMut(crate::store::space::ChannelTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        SqliteStore::scan_write_channels(self, f)
    }

    fn active_run(&self, thread_id: &str) -> Result<bool, StoreError> {
        let what = "checking DeerFlow's runs table";
        // The statements stay prepared: a whole-store plan asks for every thread. The
        // table's columns are asked again only when the schema changed (its version, in
        // the file's header, is cheaper to read than the columns).
        let version: i64 = self
            .conn
            .prepare_cached("PRAGMA schema_version")
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .map_err(q(what))?;
        let has = match self.has_runs.get() {
            Some((v, has)) if v == version => has,
            _ => {
                let has: bool = self
                    .conn
                    .prepare_cached(
                        "SELECT count(*) = 2 FROM pragma_table_info('runs') WHERE name IN ('thread_id', 'status')",
                    )
                    .and_then(|mut st| st.query_row([], |r| r.get(0)))
                    .map_err(q(what))?;
                self.has_runs.set(Some((version, has)));
                has
            }
        };
        if !has {
            return Ok(false);
        }
        self.conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM runs WHERE thread_id = ?1 AND status IN ('pending', 'running'))",
            )
            .and_then(|mut st| st.query_row([thread_id], |r| r.get(0)))
            .map_err(q(what))
    }

    fn scan_thread_ids(
        &self,
        f: &mut dyn FnMut(String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "listing threads";
        let mut st = self
            .conn
            .prepare("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id")
            .map_err(q(what))?;
        let mut rows = st.query([]).map_err(q(what))?;
        while let Some(r) = rows.next().map_err(q(what))? {
            f(text_col(r, 0).map_err(q(what))?)?;
        }
        Ok(())
    }

    fn thread_ids_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let what = "listing threads";
        // Two statements, so that the page seeks the index from `after`.
        let sql = match after {
            None => {
                "SELECT DISTINCT thread_id FROM checkpoints WHERE ?1 IS NULL ORDER BY thread_id LIMIT ?2"
            }
            Some(_) => {
                "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > ?1 ORDER BY thread_id LIMIT ?2"
            }
        };
        let mut st = self.conn.prepare_cached(sql).map_err(q(what))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = st.query(params![after, limit]).map_err(q(what))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(q(what))? {
            out.push(text_col(r, 0).map_err(q(what))?);
        }
        Ok(out)
    }

    fn thread_writes(&self, thread_id: &str, ns: &str) -> Result<Vec<WriteRow>, StoreError> {
        if let Some(rows) = self.ahead.borrow_mut().take_writes(thread_id, ns) {
            return Ok(rows);
        }
        let what = "reading a thread's pending writes";
        let sql = format!(
            "SELECT checkpoint_id, task_id, {tp}, idx, channel, type, value FROM writes \
             WHERE thread_id = ?1 AND checkpoint_ns = ?2",
            tp = self.task_path_expr()
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(q(what))?;
        st.query_map(params![thread_id, ns], write_row)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(q(what))
    }

    fn namespaces(&self, thread_id: &str) -> Result<Vec<String>, StoreError> {
        let ahead = self.ahead.borrow();
        if let Some(ns) = ahead.namespaces(thread_id) {
            return Ok(ns);
        }
        ahead.missed(thread_id)?;
        drop(ahead);
        let what = "listing namespaces";
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?1 ORDER BY checkpoint_ns",
            )
            .map_err(q(what))?;
        st.query_map([thread_id], |r| text_col(r, 0))
            .and_then(|rows| rows.collect())
            .map_err(q(what))
    }

    fn checkpoint_ids_with_prefix(
        &self,
        thread_id: &str,
        ns: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let what = "finding checkpoints by id prefix";
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                 AND substr(checkpoint_id, 1, length(?3)) = ?3 ORDER BY checkpoint_id LIMIT ?4",
            )
            .map_err(q(what))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = st
            .query(params![thread_id, ns, prefix, limit])
            .map_err(q(what))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(q(what))? {
            out.push(text_col(r, 0).map_err(q(what))?);
        }
        Ok(out)
    }

    fn checkpoints_with_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        let what = "finding checkpoints by id prefix";
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints \
                 WHERE substr(checkpoint_id, 1, length(?1)) = ?1 ORDER BY checkpoint_id LIMIT ?2",
            )
            .map_err(q(what))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = st.query(params![prefix, limit]).map_err(q(what))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(q(what))? {
            out.push((
                text_col(r, 0).map_err(q(what))?,
                text_col(r, 1).map_err(q(what))?,
                text_col(r, 2).map_err(q(what))?,
            ));
        }
        Ok(out)
    }

    fn head_id(&self, thread_id: &str, ns: &str) -> Result<Option<String>, StoreError> {
        let what = "finding the head checkpoint";
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
                 ORDER BY checkpoint_id DESC LIMIT 1",
            )
            .map_err(q(what))?;
        let mut rows = st.query(params![thread_id, ns]).map_err(q(what))?;
        match rows.next().map_err(q(what))? {
            Some(r) => Ok(Some(text_col(r, 0).map_err(q(what))?)),
            None => Ok(None),
        }
    }

    fn checkpoint(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
    ) -> Result<Option<CheckpointRow>, StoreError> {
        let what = "reading a checkpoint";
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT {CHECKPOINT_COLS} FROM checkpoints \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
            ))
            .map_err(q(what))?;
        let mut rows = st
            .query(params![thread_id, ns, checkpoint_id])
            .map_err(q(what))?;
        match rows.next().map_err(q(what))? {
            Some(r) => Ok(Some(checkpoint_row(r).map_err(q(what))?)),
            None => Ok(None),
        }
    }

    fn metadata(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let what = "reading checkpoint metadata";
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT metadata FROM checkpoints \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3",
            )
            .map_err(q(what))?;
        let mut rows = st
            .query(params![thread_id, ns, checkpoint_id])
            .map_err(q(what))?;
        match rows.next().map_err(q(what))? {
            Some(r) => Ok(Some(bytes_col(r, 0, Blob::Json).map_err(q(what))?)),
            None => Ok(None),
        }
    }

    fn scan_thread(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        if let Some(served) =
            crate::store::batch::serve_checkpoints(&self.ahead, thread_id, ns, false, f)
        {
            return served;
        }
        let what = "reading a thread's checkpoints";
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT {CHECKPOINT_COLS} FROM checkpoints \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 ORDER BY checkpoint_id"
            ))
            .map_err(q(what))?;
        let mut rows = st.query(params![thread_id, ns]).map_err(q(what))?;
        while let Some(r) = rows.next().map_err(q(what))? {
            f(checkpoint_row(r).map_err(q(what))?)?;
        }
        Ok(())
    }

    fn writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        channel: Option<&str>,
    ) -> Result<Vec<WriteRow>, StoreError> {
        let what = "reading pending writes";
        let sql = format!(
            "SELECT checkpoint_id, task_id, {tp}, idx, channel, type, value FROM writes \
             WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3 \
             AND (?4 IS NULL OR channel = ?4)",
            tp = self.task_path_expr()
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(q(what))?;
        let mut out = st
            .query_map(params![thread_id, ns, checkpoint_id, channel], write_row)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(q(what))?;
        sort_writes(&mut out);
        Ok(out)
    }

    fn write_totals_by_checkpoint(
        &self,
        thread_id: &str,
        ns: &str,
    ) -> Result<Vec<CheckpointWriteTotals>, StoreError> {
        let what = "counting pending writes";
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT checkpoint_id, count(*), coalesce(sum(length(value)), 0) FROM writes \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 GROUP BY checkpoint_id",
            )
            .map_err(q(what))?;
        st.query_map(params![thread_id, ns], |r| {
            Ok(CheckpointWriteTotals {
                checkpoint_id: text_col(r, 0)?,
                writes: len_col(r, 1)?,
                bytes: len_col(r, 2)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(q(what))
    }
}
