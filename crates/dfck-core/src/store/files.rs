//! Files outside SQLite: the only ones dfck opens (new files it wrote itself, a `--backup`
//! copy before it gets its name, and directories, to make them durable), which paths name a
//! store's own files, and the file-system facts (directory, free space) the write guards use.
//!
//! A store's own files (the database, `-wal`, `-shm`, `-journal`) are never opened here or
//! anywhere else outside SQLite: on Linux, closing any descriptor of a file drops every POSIX
//! lock the process holds on it, those of dfck's SQLite connections included, and a live
//! DeerFlow may then checkpoint and delete the WAL under them (docs/reliability.md, "No file
//! handles beside SQLite's"). [`sync_new_file`] refuses a path that names one.

use std::io;
use std::path::Path;

/// Whether `path` is named like a SQLite sidecar (`-wal`, `-shm`, `-journal`).
pub fn is_sidecar_name(path: &Path) -> bool {
    let name = path.as_os_str().as_encoded_bytes();
    [&b"-wal"[..], b"-shm", b"-journal"]
        .iter()
        .any(|s| name.ends_with(s))
}

/// fsyncs a file dfck has just written and nobody else has open (refuses a sidecar name):
/// a `--backup` copy under its temporary name, whose SQLite handle (`VACUUM INTO`) is closed
/// when this runs, so no connection of this process holds a lock that closing it could drop.
pub fn sync_new_file(path: &Path) -> io::Result<()> {
    if is_sidecar_name(path) {
        return Err(io::Error::other(format!(
            "{} is named like a SQLite sidecar; dfck never opens one",
            path.display()
        )));
    }
    std::fs::File::open(path)?.sync_all()
}

/// Where a `--backup` is written before it gets its name: the same directory (so the final
/// rename is atomic), a name of its own. The store's `backup_plan` refuses one that would be
/// a file of the store, as it refuses such a destination.
pub fn partial_backup_path(dest: &Path) -> std::path::PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "backup".into());
    dest.with_file_name(format!(".{name}.dfck-partial"))
}

/// fsyncs a directory (a rename in it becomes durable); errors are ignored, as some file
/// systems cannot sync a directory. A directory descriptor holds no lock of SQLite's: POSIX
/// locks belong to the files themselves, so closing it drops none.
pub fn sync_dir(dir: &Path) {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Why [`replace_with_new_file`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    /// The path names a file of the store (`the store's -wal file`).
    #[error("that is {0}")]
    StoreFile(&'static str),
    /// The directory is missing, or writing, syncing or renaming failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Puts `bytes` at `path` whole or not at all: written to a new, hidden file beside it
/// (created exclusively, so never a file anyone else has open, and not ending like the
/// target), made durable, then renamed over `path`. A `path` that is a file of the SQLite
/// store `store` (by name or inode, see [`store_file_named`]) is refused before anything is
/// created. The one writer of dfck's own output files (plans, metrics).
pub fn replace_with_new_file(
    path: &Path,
    bytes: &[u8],
    store: Option<&Path>,
) -> Result<(), ReplaceError> {
    if let Some(which) = store.and_then(|s| store_file_named(s, path)) {
        return Err(ReplaceError::StoreFile(which));
    }
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".dfck-tmp")
        .tempfile_in(&dir)?;
    io::Write::write_all(&mut tmp, bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(&dir);
    Ok(())
}

/// Which file of the SQLite store at `store` the path `p` would write: the store itself or
/// one of its sidecars (`-wal`, `-shm`, `-journal`), by name in the same directory (the
/// directories compared by inode, so another spelling of the path is caught), or by the
/// file's own inode when `p` exists, or through a symbolic link. A copy written there would
/// be taken by SQLite for the store's own file (a `-journal` is rolled back into the store
/// and deleted).
pub fn store_file_named(store: &Path, p: &Path) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let files = [
        (store.to_path_buf(), "the store itself"),
        (with_suffix(store, "-wal"), "the store's -wal file"),
        (with_suffix(store, "-shm"), "the store's -shm file"),
        (with_suffix(store, "-journal"), "the store's -journal file"),
    ];
    let inode = |q: &Path| std::fs::metadata(q).ok().map(|m| (m.dev(), m.ino()));
    let mut candidates = vec![p.to_path_buf()];
    if let Ok(target) = std::fs::read_link(p) {
        candidates.push(parent_dir(p).join(target));
    }
    for c in &candidates {
        let dir = inode(&parent_dir(c));
        for (f, label) in &files {
            if c.file_name() == f.file_name() && dir.is_some() && dir == inode(&parent_dir(f)) {
                return Some(label);
            }
            if inode(c).is_some() && inode(c) == inode(f) {
                return Some(label);
            }
        }
    }
    None
}

fn with_suffix(p: &Path, suffix: &str) -> std::path::PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    s.into()
}

/// The directory holding `path` (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> std::path::PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}

/// Free bytes on the file system holding `dir`, and its device id.
pub fn dir_space(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let free = fs4::available_space(dir).ok()?;
    let dev = std::fs::metadata(dir).ok()?.dev();
    Some((free, dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sidecar_is_recognised_by_name_spelling_and_inode() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.db");
        std::fs::write(&store, b"x").unwrap();
        assert_eq!(
            store_file_named(&store, &dir.path().join("s.db-journal")),
            Some("the store's -journal file")
        );
        let other_spelling = dir.path().join(".").join("s.db-wal");
        assert_eq!(
            store_file_named(&store, &other_spelling),
            Some("the store's -wal file")
        );
        let link = dir.path().join("hard.db");
        std::fs::hard_link(&store, &link).unwrap();
        assert_eq!(store_file_named(&store, &link), Some("the store itself"));
        let sym = dir.path().join("sym");
        std::os::unix::fs::symlink(dir.path().join("s.db-shm"), &sym).unwrap();
        assert_eq!(
            store_file_named(&store, &sym),
            Some("the store's -shm file")
        );
        assert_eq!(store_file_named(&store, &dir.path().join("b.db")), None);
    }
}
