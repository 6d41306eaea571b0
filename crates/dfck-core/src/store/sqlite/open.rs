//! Opening a SQLite store: how it is opened (read-only with SQLite's normal locking, or
//! immutable when nobody can be writing it), what its schema is, and what an open failure
//! means (a hot journal, a full disk, a lock, or a file that is not a LangGraph store).

use crate::error::StoreError;
use rusqlite::Connection;
use std::path::{Path, PathBuf};

/// `path` with `suffix` appended (`-wal`, `-shm`, `-journal`).
pub(super) fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Whether this process may create files in `path`'s directory (where SQLite puts -wal/-shm).
pub(super) fn dir_writable(path: &Path) -> bool {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok()
}

pub(super) fn file_uri(path: &Path, immutable: bool) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file:");
    for b in abs.to_string_lossy().bytes() {
        match b {
            b'?' | b'#' | b'%' => uri.push_str(&format!("%{b:02X}")),
            _ => uri.push(b as char),
        }
    }
    uri.push_str("?mode=ro");
    if immutable {
        uri.push_str("&immutable=1");
    }
    uri
}

/// Why the schema could not be read: the store's state (a hot journal, a full disk, a lock)
/// when SQLite says so, else "not a LangGraph store".
pub(super) fn schema_error(e: &rusqlite::Error, shown: &str) -> StoreError {
    use rusqlite::ErrorCode as C;
    let open = |reason: String| StoreError::Open {
        path: shown.to_owned(),
        reason,
    };
    let journal = sidecar(Path::new(shown), "-journal");
    match e.sqlite_error_code() {
        Some(C::ReadOnly | C::CannotOpen)
            if std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0) =>
        {
            open(format!(
                "a hot journal ({}) left by a writer that stopped mid-transaction must be rolled back first, which needs write access: let DeerFlow (or any SQLite client that may write) open the store once; dfck reads stores read-only",
                journal.display()
            ))
        }
        Some(C::NotADatabase) => StoreError::NotLangGraph {
            path: shown.to_owned(),
            reason: "not a SQLite database".into(),
        },
        Some(C::DiskFull) => open(format!("the disk is full ({e})")),
        Some(C::DatabaseBusy | C::DatabaseLocked) => {
            open(format!("the store is locked by another process ({e})"))
        }
        Some(C::SystemIoFailure) if disk_full(Path::new(shown)) => open(format!(
            "the disk is full: no space left on the store's filesystem for SQLite's -shm/-wal files ({e})"
        )),
        Some(C::SystemIoFailure | C::PermissionDenied | C::CannotOpen | C::ReadOnly) => {
            open(e.to_string())
        }
        _ => StoreError::NotLangGraph {
            path: shown.to_owned(),
            reason: format!("cannot read the schema ({e})"),
        },
    }
}

/// Whether the filesystem holding `path` has (next to) no space left.
pub(super) fn disk_full(path: &Path) -> bool {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs4::available_space(dir).is_ok_and(|free| free < 64 * 1024)
}

/// Checks tables and columns; returns whether `writes.task_path` exists.
pub(super) fn detect_schema(conn: &Connection, shown: &str) -> Result<bool, StoreError> {
    let not_lg = |reason: String| StoreError::NotLangGraph {
        path: shown.to_owned(),
        reason,
    };
    let columns = |table: &str| -> Result<Vec<String>, StoreError> {
        let mut st = conn
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .map_err(|e| schema_error(&e, shown))?;
        let cols = st
            .query_map([table], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| schema_error(&e, shown))?;
        Ok(cols)
    };
    let ck = columns("checkpoints")?;
    if ck.is_empty() {
        return Err(not_lg("no 'checkpoints' table".into()));
    }
    for c in [
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "type",
        "checkpoint",
        "metadata",
    ] {
        if !ck.iter().any(|x| x == c) {
            return Err(not_lg(format!("table 'checkpoints' has no column '{c}'")));
        }
    }
    let wr = columns("writes")?;
    if wr.is_empty() {
        return Err(not_lg("no 'writes' table".into()));
    }
    for c in [
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "task_id",
        "idx",
        "channel",
        "type",
        "value",
    ] {
        if !wr.iter().any(|x| x == c) {
            return Err(not_lg(format!("table 'writes' has no column '{c}'")));
        }
    }
    Ok(wr.iter().any(|x| x == "task_path"))
}
