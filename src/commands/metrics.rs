//! The store's metrics, for node_exporter's textfile collector: [`collect`] turns the store
//! summary of `dfck inspect` and the record `dfck maintain` keeps in its table into a plain
//! [`StoreMetrics`] value (`render::openmetrics` writes it as OpenMetrics text), and
//! [`write_file`] puts such a text in place atomically — a temporary file beside it, renamed
//! over it — never over one of the store's own files. Reading the metrics changes nothing:
//! the maintenance table is only read, and only where it exists.

use crate::commands::inspect::StoreSummary;
use dfck_core::error::Error;
use dfck_core::maintenance::{LastRun, MaintenanceState};
use dfck_core::model::ThreadMode;
use dfck_core::store::space::StoreSpace;
use dfck_core::store::{Backend, Store};
use std::path::Path;

/// How many of the largest threads get a series of their own (`dfck_thread_bytes`).
pub const LARGEST_THREADS: usize = 10;

/// Everything `inspect --format openmetrics` exposes, as plain values. Each list is a gauge
/// family's series in output order: (label value, value).
#[derive(Debug, Clone, PartialEq)]
pub struct StoreMetrics {
    /// The backend (it decides the labels of the on-disk families).
    pub backend: Backend,
    /// Bytes per LangGraph table, by the backend's table name (`checkpoints`, `writes`;
    /// PostgreSQL: `checkpoints`, `checkpoint_blobs`, `checkpoint_writes`): the summary's
    /// `table_bytes`.
    pub table_bytes: Vec<(String, u64)>,
    /// Rows per table, the same tables: the summary's `counts`.
    pub table_rows: Vec<(String, u64)>,
    /// Bytes on disk: SQLite per file (`db`, `wal`); PostgreSQL per table (heap, TOAST and
    /// indexes).
    pub disk_bytes: Vec<(String, u64)>,
    /// SQLite: the bytes of the file's free pages; `None` on PostgreSQL.
    pub free_bytes: Option<u64>,
    /// PostgreSQL: dead rows per table (empty on SQLite).
    pub dead_tuples: Vec<(String, u64)>,
    /// Threads per mode: `full`, `delta`, `mixed`, always all three.
    pub threads_by_mode: Vec<(String, u64)>,
    /// Checkpoint rows.
    pub checkpoints: u64,
    /// Pending-write rows.
    pub writes: u64,
    /// The threads' history bytes over the store's bytes (0 for an empty store), 0 to 1.
    pub history_ratio: f64,
    /// The [`LARGEST_THREADS`] largest threads by bytes (ties by thread id).
    pub largest_threads: Vec<(String, u64)>,
    /// Whether a `dfck maintain` run holds the sweeper lease, unexpired.
    pub lease_held: bool,
    /// The record of the last finished `dfck maintain` run, when there is one.
    pub last_run: Option<LastRun>,
}

/// The metrics of a store from its summary (a whole one: not cut by `--top`). `maintenance`
/// is the state of `dfck maintain`'s table when the caller has it; when `None` the table is
/// read — only read, and only when it exists (`maintenance_state` looks the table up first
/// and creates nothing).
pub fn collect(
    store: &dyn Store,
    summary: &StoreSummary,
    maintenance: Option<&MaintenanceState>,
) -> Result<StoreMetrics, Error> {
    if summary.top.is_some_and(|n| n < summary.counts.threads) {
        return Err(Error::Usage(
            "metrics need the whole store's summary, not the first threads of --top".into(),
        ));
    }
    let read;
    let state = match maintenance {
        Some(s) => Some(s),
        None => {
            read = match store.maintenance() {
                Some(table) => table.maintenance_state()?,
                None => None,
            };
            read.as_ref()
        }
    };
    // The tables by their own names, in the order `space` lists PostgreSQL's.
    let (tb, counts) = (&summary.table_bytes, &summary.counts);
    let tables: Vec<(&str, u64, u64)> = match (tb.blobs, counts.blobs) {
        (Some(bytes), Some(rows)) => vec![
            ("checkpoints", tb.checkpoints, counts.checkpoints),
            ("checkpoint_blobs", bytes, rows),
            ("checkpoint_writes", tb.writes, counts.writes),
        ],
        _ => vec![
            ("checkpoints", tb.checkpoints, counts.checkpoints),
            ("writes", tb.writes, counts.writes),
        ],
    };
    let table_bytes = tables.iter().map(|t| (t.0.to_owned(), t.1)).collect();
    let table_rows = tables.iter().map(|t| (t.0.to_owned(), t.2)).collect();
    let (mut disk_bytes, mut free_bytes, mut dead_tuples) = (Vec::new(), None, Vec::new());
    match &summary.space {
        Some(StoreSpace::Sqlite(s)) => {
            disk_bytes = vec![("db".to_owned(), s.file_bytes), ("wal".into(), s.wal_bytes)];
            free_bytes = Some(s.free_page_bytes);
        }
        Some(StoreSpace::Postgres(p)) => {
            for t in &p.tables {
                disk_bytes.push((t.table.clone(), t.total_bytes));
                dead_tuples.push((t.table.clone(), t.dead_tuples));
            }
        }
        None => {}
    }
    let threads_by_mode = [ThreadMode::Full, ThreadMode::Delta, ThreadMode::Mixed]
        .into_iter()
        .map(|m| {
            let n = summary.threads.iter().filter(|t| t.mode == m).count();
            (m.as_str().to_owned(), n as u64)
        })
        .collect();
    let history: u64 = summary.threads.iter().map(|t| t.history_bytes).sum();
    let history_ratio = if summary.bytes == 0 {
        0.0
    } else {
        (history as f64 / summary.bytes as f64).clamp(0.0, 1.0)
    };
    let mut largest: Vec<(String, u64)> = summary
        .threads
        .iter()
        .map(|t| (t.thread_id.clone(), t.bytes))
        .collect();
    largest.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    largest.truncate(LARGEST_THREADS);
    Ok(StoreMetrics {
        backend: summary.backend,
        table_bytes,
        table_rows,
        disk_bytes,
        free_bytes,
        dead_tuples,
        threads_by_mode,
        checkpoints: summary.counts.checkpoints,
        writes: summary.counts.writes,
        history_ratio,
        largest_threads: largest,
        lease_held: state.is_some_and(lease_held),
        last_run: state.and_then(|s| s.last_run.clone()),
    })
}

/// A holder is recorded and its lease has not expired (the store already leaves out a
/// holder its own clock finds expired; a state handed in is checked against this clock).
fn lease_held(state: &MaintenanceState) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    state.holder.as_ref().is_some_and(|h| h.expires_at > now)
}

/// Why a metrics file was not written.
#[derive(Debug, thiserror::Error)]
pub enum MetricsFileError {
    /// The path names a file of the store.
    #[error("metrics file {path}: it is {which}; write the metrics to another file")]
    StoreFile {
        /// The path as given.
        path: String,
        /// Which file of the store (`the store's -wal file`).
        which: &'static str,
    },
    /// Writing the temporary file or renaming it failed.
    #[error("metrics file {path}: {reason}")]
    Io {
        /// The path as given.
        path: String,
        /// What failed, with the OS's reason.
        reason: String,
    },
}

impl From<MetricsFileError> for crate::error::Error {
    fn from(e: MetricsFileError) -> Self {
        match e {
            MetricsFileError::StoreFile { .. } => crate::error::Error::usage(e.to_string()),
            MetricsFileError::Io { .. } => {
                crate::error::Error::Core(Error::Io(std::io::Error::other(e.to_string())))
            }
        }
    }
}

/// Writes `text` to `path` atomically ([`dfck_core::store::files::replace_with_new_file`]:
/// a new file beside it, made durable, renamed over it), so the textfile collector never reads
/// half a file; its temporary name does not end in `.prom`, which the collector skips. A
/// `path` that is a file of the SQLite store `store` is refused before anything is written.
pub fn write_file(path: &Path, text: &str, store: Option<&Path>) -> Result<(), MetricsFileError> {
    use dfck_core::store::files::{ReplaceError, replace_with_new_file};
    let shown = path.display().to_string();
    replace_with_new_file(path, text.as_bytes(), store).map_err(|e| match e {
        ReplaceError::StoreFile(which) => MetricsFileError::StoreFile { path: shown, which },
        ReplaceError::Io(e) => MetricsFileError::Io {
            path: shown,
            reason: e.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_file_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("deerflow.db");
        std::fs::write(&db, b"not really a store").unwrap();
        for name in [
            "deerflow.db",
            "deerflow.db-wal",
            "deerflow.db-shm",
            "deerflow.db-journal",
        ] {
            let p = dir.path().join(name);
            let e = write_file(&p, "# EOF\n", Some(&db)).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, MetricsFileError::StoreFile { .. }), "{msg}");
            assert!(msg.contains(&p.display().to_string()), "{msg}");
            assert_eq!(msg.lines().count(), 1, "{msg}");
        }
        // Another spelling of the same file is the same file.
        let other = dir.path().join(".").join("deerflow.db");
        assert!(write_file(&other, "x", Some(&db)).is_err());
        assert_eq!(std::fs::read(&db).unwrap(), b"not really a store");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the store is there: {left:?}");
    }

    #[test]
    fn the_file_is_replaced_whole_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dfck.prom");
        std::fs::write(&p, "old\n").unwrap();
        write_file(&p, "new\n# EOF\n", Some(&dir.path().join("deerflow.db"))).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n# EOF\n");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["dfck.prom".to_owned()]);
    }

    #[test]
    fn a_missing_directory_is_one_line_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("no/such/dir/dfck.prom");
        let msg = write_file(&p, "# EOF\n", None).unwrap_err().to_string();
        assert!(
            msg.starts_with(&format!("metrics file {}:", p.display())),
            "{msg}"
        );
        assert_eq!(msg.lines().count(), 1, "{msg}");
    }
}
