//! A thread's files under DeerFlow's base directory (`DEER_FLOW_HOME`, else
//! `{project root}/.deer-flow`): the owner's `users/{user_id}/threads/{thread_id}/` and the
//! legacy `threads/{thread_id}/`, removed the way DeerFlow's delete does — only for ids that
//! pass DeerFlow's rules, and never following a link out of the base directory.

use std::path::{Path, PathBuf};

/// DeerFlow's thread-id rule (`utils/thread_id.py`): 1 to 64 of `[A-Za-z0-9_-]`. A legacy id
/// that fails it has its files left alone (DeerFlow skips them too).
pub fn valid_thread_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// DeerFlow's user-id rule for paths (`config/paths.py`): one or more of `[A-Za-z0-9_-]`.
pub fn valid_user_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The directories of one thread that exist under `base` (the owner's and the legacy one),
/// or why none are looked at.
pub fn thread_dirs(
    base: &Path,
    thread_id: &str,
    user_id: Option<&str>,
) -> Result<Vec<PathBuf>, String> {
    if !valid_thread_id(thread_id) {
        return Err(format!(
            "thread id '{thread_id}' fails DeerFlow's rule ^[A-Za-z0-9_-]{{1,64}}$: its files are left alone, as DeerFlow leaves them"
        ));
    }
    let mut out = Vec::new();
    if let Some(u) = user_id {
        if valid_user_id(u) {
            out.push(base.join("users").join(u).join("threads").join(thread_id));
        }
    }
    out.push(base.join("threads").join(thread_id));
    Ok(out
        .into_iter()
        .filter(|d| d.symlink_metadata().is_ok())
        .collect())
}

/// Removes `dir` and everything in it, without following a symbolic link anywhere: a link is
/// removed as a link, so nothing outside `base` is ever touched. Refuses a `dir` that is not
/// inside `base` after resolving its parents.
pub fn remove_thread_dir(base: &Path, dir: &Path) -> std::io::Result<()> {
    let real_base = std::fs::canonicalize(base)?;
    let parent = dir.parent().unwrap_or(base);
    let real_parent = std::fs::canonicalize(parent)?;
    if !real_parent.starts_with(&real_base) {
        return Err(std::io::Error::other(format!(
            "{} is outside DeerFlow's base directory {}",
            dir.display(),
            base.display()
        )));
    }
    let meta = dir.symlink_metadata()?;
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return std::fs::remove_file(dir);
    }
    // remove_dir_all does not follow symbolic links inside the tree (it unlinks them).
    std::fs::remove_dir_all(dir)
}

/// The JSONL event files of one thread (`{root}/threads/{thread_id}/runs/*.jsonl`, DeerFlow's
/// `jsonl` run-events backend): regular files only, a link never followed. An invalid thread
/// id has none (DeerFlow never writes one).
pub fn thread_event_files(root: &Path, thread_id: &str) -> Vec<PathBuf> {
    if !valid_thread_id(thread_id) {
        return Vec::new();
    }
    let runs = root.join("threads").join(thread_id).join("runs");
    let is_dir = runs
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_dir());
    if !is_dir {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(&runs) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_deerflows_rules() {
        assert!(valid_thread_id("df0a0000-0000-4000-8000-000000000001"));
        assert!(!valid_thread_id("legacy.thread.0001"));
        assert!(!valid_thread_id(""));
        assert!(!valid_thread_id(&"a".repeat(65)));
        assert!(valid_user_id("a0000000-0000-4000-8000-000000000002"));
        assert!(!valid_user_id("../etc"));
    }

    #[test]
    fn a_link_out_of_the_base_is_removed_not_followed() {
        let base = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep.txt"), b"x").unwrap();
        let threads = base.path().join("threads");
        std::fs::create_dir_all(threads.join("t1").join("user-data")).unwrap();
        std::os::unix::fs::symlink(outside.path(), threads.join("t1").join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), threads.join("t2")).unwrap();
        let dirs = thread_dirs(base.path(), "t1", None).unwrap();
        assert_eq!(dirs, vec![threads.join("t1")]);
        remove_thread_dir(base.path(), &dirs[0]).unwrap();
        remove_thread_dir(base.path(), &threads.join("t2")).unwrap();
        assert!(outside.path().join("keep.txt").exists());
        assert!(!threads.join("t1").exists() && threads.join("t2").symlink_metadata().is_err());
        assert!(thread_dirs(base.path(), "bad.id", None).is_err());
    }
}
