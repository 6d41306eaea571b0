//! The SQLite side of space accounting and `reclaim`: page and sidecar sizes, per-channel
//! write totals, the lock probe, `VACUUM` in place and `VACUUM INTO` a compacted copy or a
//! backup (docs/space.md).

use super::SqliteStore;
use super::open::sidecar;
use super::write::busy;
use crate::error::StoreError;
use crate::store::Store;
use crate::store::space::{ChannelTotals, SqliteSpace};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn q(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Query {
        what: what.to_owned(),
        reason: e.to_string(),
    }
}

/// Who holds a SQLite store, as far as a probe can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// Nobody: the probe took the lock (and released it).
    Nobody,
    /// Another connection kept the database lock for the whole wait (a writer; in
    /// rollback-journal mode a reader as well).
    Lock,
    /// Another connection keeps a read transaction open on the WAL: a `TRUNCATE` checkpoint
    /// could not complete.
    WalReader,
}

/// Page cache while vacuuming, in KiB.
const VACUUM_CACHE_KIB: i64 = 16 * 1024;

/// How a `VACUUM` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VacuumEnd {
    /// Done and committed.
    Done,
    /// Another connection held a lock: nothing changed (a `VACUUM` is one transaction).
    Busy(String),
    /// A stop was asked ([`crate::stop`]): interrupted and rolled back, nothing changed.
    Interrupted,
}

/// The directory SQLite puts its temporary files in (where `VACUUM` builds its copy): the
/// first writable one of `SQLITE_TMPDIR`, `TMPDIR`, `/var/tmp`, `/usr/tmp`, `/tmp`, `.`.
pub fn sqlite_temp_dir() -> PathBuf {
    let env = ["SQLITE_TMPDIR", "TMPDIR"]
        .iter()
        .filter_map(|k| std::env::var_os(k).map(PathBuf::from));
    let fixed = ["/var/tmp", "/usr/tmp", "/tmp", "."]
        .iter()
        .map(PathBuf::from);
    env.chain(fixed)
        .find(|d| {
            d.is_dir()
                && nix::unistd::access(
                    d.as_path(),
                    nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
                )
                .is_ok()
        })
        .unwrap_or_else(|| PathBuf::from("."))
}

pub use crate::store::files::{dir_space, parent_dir};

impl SqliteStore {
    /// Writes a consistent copy of the store to `dest` (`VACUUM INTO`).
    pub fn backup_to(&self, dest: &Path) -> Result<(), StoreError> {
        if dest.exists() {
            return Err(StoreError::Target(format!(
                "backup target {} already exists",
                dest.display()
            )));
        }
        self.conn
            .execute("VACUUM INTO ?1", [dest.to_string_lossy()])
            .map(|_| ())
            .map_err(super::q("writing the backup"))
    }

    fn pragma_u64(&self, name: &'static str) -> Result<u64, StoreError> {
        self.conn
            .query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0))
            .map(|v| v.max(0) as u64)
            .map_err(q("reading the page counts"))
    }

    /// The file, its sidecars and its pages, as this connection sees them now.
    pub fn space_facts(&self) -> Result<SqliteSpace, StoreError> {
        let path = Path::new(&self.info().location);
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let page_size = self.pragma_u64("page_size")?;
        let page_count = self.pragma_u64("page_count")?;
        let freelist_pages = self.pragma_u64("freelist_count")?;
        let file_bytes = size(path);
        let wal_bytes = size(&sidecar(path, "-wal"));
        let shm_bytes = size(&sidecar(path, "-shm"));
        Ok(SqliteSpace {
            file_bytes,
            wal_bytes,
            shm_bytes,
            total_bytes: file_bytes + wal_bytes + shm_bytes,
            page_size,
            page_count,
            freelist_pages,
            free_page_bytes: freelist_pages * page_size,
            used_bytes: page_count.saturating_sub(freelist_pages) * page_size,
        })
    }

    /// Streams the bytes of pending writes per (thread, channel), ordered by thread id.
    pub fn scan_write_channels(
        &self,
        f: &mut dyn FnMut(ChannelTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "summing pending writes by channel";
        let mut st = self
            .conn
            .prepare(
                "SELECT thread_id, channel, coalesce(sum(length(value)), 0) FROM writes \
                 GROUP BY thread_id, channel ORDER BY thread_id, channel",
            )
            .map_err(q(what))?;
        let mut rows = st.query([]).map_err(q(what))?;
        while let Some(r) = rows.next().map_err(q(what))? {
            let text = |i: usize| -> Result<String, StoreError> {
                use rusqlite::types::ValueRef;
                Ok(match r.get_ref(i).map_err(q(what))? {
                    ValueRef::Text(b) | ValueRef::Blob(b) => {
                        String::from_utf8_lossy(b).into_owned()
                    }
                    ValueRef::Integer(n) => n.to_string(),
                    ValueRef::Real(x) => x.to_string(),
                    ValueRef::Null => String::new(),
                })
            };
            let bytes: Option<i64> = r.get(2).map_err(q(what))?;
            f(ChannelTotals {
                thread_id: text(0)?,
                channel: text(1)?,
                values_bytes: 0,
                writes_bytes: bytes.unwrap_or(0).max(0) as u64,
            })?;
        }
        Ok(())
    }

    /// Whether another connection holds the store: `BEGIN EXCLUSIVE` (which a reader also
    /// blocks in rollback-journal mode) retried with backoff for up to `wait`, released at
    /// once; then, in WAL mode, a `TRUNCATE` checkpoint retried for up to `wait` (a reader's
    /// open transaction keeps it from completing). A completed checkpoint leaves the WAL empty.
    pub fn probe_holder(&self, wait: Duration) -> Result<Holder, StoreError> {
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(10);
        let _ = self.conn.busy_timeout(Duration::from_millis(50));
        let taken = loop {
            match self.conn.execute_batch("BEGIN EXCLUSIVE") {
                Ok(()) => break Ok(true),
                Err(e) if busy(&e) => {}
                Err(e) => break Err(q("probing the database lock")(e)),
            }
            if Instant::now() + pause > deadline {
                break Ok(false);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(250));
        };
        let _ = self.conn.busy_timeout(Duration::from_secs(30));
        if !taken? {
            return Ok(Holder::Lock);
        }
        self.conn
            .execute_batch("ROLLBACK")
            .map_err(q("releasing the probe lock"))?;
        if self.is_wal() && !self.checkpoint_truncate(wait)? {
            return Ok(Holder::WalReader);
        }
        Ok(Holder::Nobody)
    }

    /// `VACUUM` in place, waiting at most `wait` for a lock.
    pub fn vacuum(&self, wait: Duration) -> Result<VacuumEnd, StoreError> {
        // VACUUM streams every page once: a small cache is as fast, and keeps memory flat
        // whatever the store's size (the read-write connection's cache is for conversions).
        let _ = self
            .conn
            .pragma_update(None, "cache_size", -VACUUM_CACHE_KIB);
        let _ = self.conn.busy_timeout(wait);
        // A stop asked of the process interrupts the VACUUM (SQLite rolls it back).
        let slow = crate::failpoint::Failpoints::from_env("reclaim").slow_vacuum();
        let mut first = true;
        self.conn.progress_handler(
            1000,
            Some(move || {
                if let Some(path) = &slow {
                    crate::failpoint::Failpoints::slow_vacuum_step(path, &mut first);
                }
                crate::stop::requested()
            }),
        );
        let r = self.conn.execute_batch("VACUUM");
        self.conn.progress_handler(0, None::<fn() -> bool>);
        let _ = self.conn.busy_timeout(Duration::from_secs(30));
        match r {
            Ok(()) => Ok(VacuumEnd::Done),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) => {
                Ok(VacuumEnd::Interrupted)
            }
            Err(e) if busy(&e) => Ok(VacuumEnd::Busy(e.to_string())),
            Err(e) => Err(q("vacuuming the database")(e)),
        }
    }

    /// `TRUNCATE` checkpoint after a `VACUUM`, retried for up to `wait`: `Ok(false)` when a
    /// reader kept the WAL (which then holds the compacted pages) from being emptied.
    pub fn truncate_wal(&self, wait: Duration) -> Result<bool, StoreError> {
        if !self.is_wal() {
            return Ok(true);
        }
        self.checkpoint_truncate(wait)
    }

    /// `VACUUM INTO dest`: a compacted, consistent copy (the store is only read).
    pub fn vacuum_into(&self, dest: &Path) -> Result<(), StoreError> {
        self.conn
            .execute("VACUUM INTO ?1", [dest.to_string_lossy()])
            .map(|_| ())
            .map_err(q("writing the compacted copy"))
    }
}

/// The space facts of a SQLite file dfck has just written and nobody else has open (a
/// `reclaim --into` copy), read through SQLite with `immutable=1`, so no sidecars appear
/// next to it.
pub fn file_space(path: &Path) -> Result<SqliteSpace, StoreError> {
    let measuring = |e: String| StoreError::Query {
        what: format!("measuring {}", path.display()),
        reason: e,
    };
    let file_bytes = std::fs::metadata(path)
        .map_err(|e| measuring(e.to_string()))?
        .len();
    let conn = rusqlite::Connection::open_with_flags(
        super::open::file_uri(path, true),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_URI
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| measuring(e.to_string()))?;
    let pragma = |name: &str| -> Result<u64, StoreError> {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0))
            .map(|v| v.max(0) as u64)
            .map_err(|e| measuring(e.to_string()))
    };
    let page_size = pragma("page_size")?;
    let page_count = pragma("page_count")?;
    let freelist_pages = pragma("freelist_count")?;
    Ok(SqliteSpace {
        file_bytes,
        wal_bytes: 0,
        shm_bytes: 0,
        total_bytes: file_bytes,
        page_size,
        page_count,
        freelist_pages,
        free_page_bytes: freelist_pages * page_size,
        used_bytes: page_count.saturating_sub(freelist_pages) * page_size,
    })
}
