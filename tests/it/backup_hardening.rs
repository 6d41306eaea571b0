//! `--backup` (and `reclaim --into`, `copy --to`) never writes over a file of the store:
//! a path that is the store or one of its sidecars (`-wal`, `-shm`, `-journal`) — by name,
//! by another spelling or by inode — is refused before anything is written, since SQLite
//! would take a copy there for its own file. And the backup is sized with the work before
//! either is written: a disk that holds the backup but not the work is not filled by it.

use crate::common::*;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn rollback_journal_copy(stem: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, db) = temp_copy(&sqlite_fixture(stem));
    let c = rusqlite::Connection::open(&db).unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    (dir, db)
}

#[test]
fn a_backup_onto_the_store_or_a_sidecar_is_refused_before_anything_is_written() {
    for journal_mode in ["wal", "delete"] {
        let (dir, db) = if journal_mode == "wal" {
            temp_copy(&sqlite_fixture("retention"))
        } else {
            rollback_journal_copy("retention")
        };
        let bytes = std::fs::read(&db).unwrap();
        let hard = dir.path().join("hard.db");
        std::fs::hard_link(&db, &hard).unwrap();
        let targets = [
            (format!("{}-journal", s(&db)), "-journal"),
            (format!("{}-wal", s(&db)), "-wal"),
            (format!("{}-shm", s(&db)), "-shm"),
            (
                dir.path()
                    .join(".")
                    .join("retention.db-journal")
                    .display()
                    .to_string(),
                "-journal",
            ),
            (s(&hard).to_owned(), "the store itself"),
        ];
        for (target, needle) in &targets {
            for cmd in [
                &["prune", "--all", "--apply", "--backup", target][..],
                &[
                    "migrate",
                    "delta-to-full",
                    "--all",
                    "--apply",
                    "--backup",
                    target,
                ],
            ] {
                let out = dfck(s(&db), cmd);
                assert_clean_failure(&out, needle);
                assert_eq!(std::fs::read(&db).unwrap(), bytes, "{cmd:?} wrote");
            }
            // A WAL store's -wal and -shm exist only while a connection is open: after the
            // refusal nothing is left there.
            if !target.ends_with("hard.db") {
                assert!(
                    !Path::new(target).exists(),
                    "{journal_mode}: {target} written"
                );
            }
            let out = dfck(
                s(&db),
                &["reclaim", "--into", target, "--apply", "--format", "json"],
            );
            assert_eq!(out.status.code(), Some(1), "reclaim --into {target}");
            let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert!(r["reason"].as_str().unwrap().contains("the store"), "{r}");
            if !target.ends_with("hard.db") {
                let existed = Path::new(target).exists();
                let out = dfck(s(&db), &["copy", "--all", "--to", target, "--apply"]);
                assert_clean_failure(&out, needle);
                assert!(
                    existed || !Path::new(target).exists(),
                    "copy wrote {target}"
                );
            }
        }
        assert_eq!(std::fs::read(&db).unwrap(), bytes);
    }
}

/// The backup is first written under a temporary name beside its destination and then
/// opened to be made durable: a destination whose temporary name is the store itself is
/// refused before anything is written (the store is neither removed nor opened).
#[test]
fn a_backup_whose_temporary_name_is_the_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".b.db.dfck-partial");
    std::fs::copy(sqlite_fixture("retention"), &db).unwrap();
    let bytes = std::fs::read(&db).unwrap();
    let dest = dir.path().join("b.db");
    let out = dfck(s(&db), &["prune", "--all", "--apply", "--backup", s(&dest)]);
    let line = assert_clean_failure(&out, "its temporary name");
    assert!(line.contains("the store itself"), "{line}");
    assert_eq!(std::fs::read(&db).unwrap(), bytes);
    assert!(!dest.exists());
}

/// The failpoint's free space holds the backup alone: the whole run is refused, no backup
/// is written; with room for both, both happen.
#[test]
fn backup_and_work_are_sized_together_before_either_is_written() {
    let (dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let backup = dir.path().join("backup.db");
    let used = std::fs::metadata(&db).unwrap().len();
    let run = |free: u64| {
        crate::common::dfck_command()
            .args([
                "--db",
                s(&db),
                "migrate",
                "delta-to-full",
                "--all",
                "--apply",
            ])
            .args([
                "--accept-delta-view",
                "--format",
                "json",
                "--backup",
                s(&backup),
            ])
            .env("DFCK_FAILPOINT", format!("free-bytes:{free}"))
            .output()
            .unwrap()
    };
    let bytes = std::fs::read(&db).unwrap();
    let out = run(used + (1 << 20));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for t in r["threads"].as_array().unwrap() {
        assert_eq!(t["status"], "refused", "{t}");
        assert!(
            t["reason"]
                .as_str()
                .unwrap()
                .contains("backup and the work"),
            "{t}"
        );
    }
    assert!(!backup.exists(), "the backup was written");
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "the store changed");
    let out = run(1 << 40);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(backup.exists());
}

/// On a real, nearly full tmpfs (root only): room for the store and its backup, not for
/// the work as well. The run writes neither and leaves the disk as free as it found it.
#[test]
fn a_nearly_full_disk_is_not_filled_by_the_backup() {
    let src = sqlite_fixture("deerflow");
    let size = std::fs::metadata(&src).unwrap().len();
    let Some(fs) = Tmpfs::mount(2 * size + 64 * 1024) else {
        println!("nearly full disk case skipped: needs root and a tmpfs mount");
        return;
    };
    let db = fs.0.path().join("deerflow.db");
    std::fs::copy(&src, &db).unwrap();
    let backup = fs.0.path().join("backup.db");
    let free_before = free_bytes(fs.0.path());
    let out = dfck(
        s(&db),
        &[
            "migrate",
            "delta-to-full",
            "--all",
            "--apply",
            "--format",
            "json",
            "--backup",
            s(&backup),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!backup.exists(), "the backup was written");
    let free_after = free_bytes(fs.0.path());
    assert!(
        free_after + 8192 >= free_before,
        "the disk was filled: {free_after} bytes free, {free_before} before"
    );
}
