//! Path resolution for discovery: lexical normalization (no symlinks), display, file reads,
//! and SQLite connection strings (`:memory:`, `file:` URIs).

use crate::error::ConfigError;
use std::path::{Component, Path, PathBuf};

/// `base.join(p)`, with `.` and `..` removed lexically (no symlink resolution).
pub(super) fn absolute(base: &Path, p: &Path) -> PathBuf {
    normalize(&base.join(p))
}

/// `p` with `.` and `..` removed lexically.
pub(super) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(c);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// A path as shown in messages.
pub(super) fn show(p: &Path) -> String {
    p.display().to_string()
}

/// A file's text; the error names the file.
pub(super) fn read(p: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(p).map_err(|e| ConfigError::Read {
        path: show(p),
        reason: e.to_string(),
    })
}

/// Whether a SQLite connection string opens an in-memory database.
pub(super) fn is_sqlite_memory(conn: &str) -> bool {
    conn == ":memory:"
        || conn.starts_with("file::memory:")
        || (conn.starts_with("file:") && conn.contains("mode=memory"))
}

/// The path of a `file:` SQLite URI (after `file:`): `///abs` → `/abs`, `//localhost/abs` →
/// `/abs`, query and fragment dropped, `%XX` decoded.
pub(super) fn sqlite_uri_path(uri: &str) -> String {
    let uri = uri.split(['?', '#']).next().unwrap_or("");
    let path = match uri.strip_prefix("//") {
        Some(rest) => match rest.find('/') {
            Some(i) => &rest[i..],
            None => "",
        },
        None => uri,
    };
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_uris() {
        assert_eq!(sqlite_uri_path("///a/b%20c.db?mode=ro"), "/a/b c.db");
        assert_eq!(sqlite_uri_path("//localhost/x.db#f"), "/x.db");
        assert_eq!(sqlite_uri_path("rel.db"), "rel.db");
        assert_eq!(sqlite_uri_path("a%2"), "a%2");
        assert_eq!(sqlite_uri_path("%41%zz"), "A%zz");
        assert!(is_sqlite_memory(":memory:") && is_sqlite_memory("file:x?mode=memory"));
        assert!(!is_sqlite_memory("file:x.db"));
        assert_eq!(
            absolute(Path::new("/a/b"), Path::new("../c/./d")),
            PathBuf::from("/a/c/d")
        );
    }
}
