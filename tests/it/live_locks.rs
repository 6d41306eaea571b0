//! A live SQLite store keeps dfck's locks: with every connection of a write command open and
//! dfck held at the `hold:PATH` failpoint, another process's `fcntl(F_GETLK)` still sees
//! dfck's shared lock on the database file and on the `-shm` file. Before the fix, opening a
//! second connection read the file header through a plain file handle; closing it dropped
//! every POSIX lock the process held on the database (docs/reliability.md, "No file handles
//! beside SQLite's"), so a live DeerFlow could checkpoint and delete the WAL under dfck.

use crate::common::{sqlite_fixture, temp_copy};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// SQLite's lock bytes (os_unix.c): the shared range of the database file, and the
/// "dead man switch" byte of the `-shm` file that every connection holds shared.
const PENDING_BYTE: i64 = 0x4000_0000;
const SHARED_FIRST: i64 = PENDING_BYTE + 2;
const SHARED_SIZE: i64 = 510;
const SHM_DMS: i64 = (22 + 8) * 4 + 8;

/// The process holding a lock that conflicts with a write lock on `[start, start+len)` of
/// `path`, as another process sees it (`None`: no lock there).
fn lock_holder(path: &Path, start: i64, len: i64) -> Option<i32> {
    let f = std::fs::File::open(path).expect("open for F_GETLK");
    // SAFETY: flock is a plain C struct; all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    fl.l_start = start;
    fl.l_len = len;
    nix::fcntl::fcntl(f.as_fd(), nix::fcntl::FcntlArg::F_GETLK(&mut fl)).expect("F_GETLK");
    (i32::from(fl.l_type) != libc::F_UNLCK).then_some(fl.l_pid)
}

fn sidecar(p: &Path, s: &str) -> PathBuf {
    PathBuf::from(format!("{}{s}", p.display()))
}

/// Starts `dfck ARGS` held at the failpoint; returns the child once it holds.
fn start_held(args: &[&str], hold: &Path) -> Child {
    let mut child = crate::common::dfck_command()
        .args(args)
        .env("DFCK_FAILPOINT", format!("hold:{}", hold.display()))
        .env_remove("DFCK_DB")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start dfck");
    let start = Instant::now();
    while !hold.exists() {
        if let Some(status) = child.try_wait().expect("dfck status") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!("dfck {args:?} ended ({status}) before the hold failpoint: {err}");
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never held");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// Runs `args` held at the failpoint and checks, while it holds, that every store in `live`
/// shows dfck's shared locks on its database and `-shm` to another process; returns what
/// was missing.
fn check_locks(what: &str, args: &[&str], live: &[&Path]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let hold = dir.path().join("hold");
    let child = start_held(args, &hold);
    let pid = i32::try_from(child.id()).unwrap();
    let mut missing = Vec::new();
    for db in live {
        if lock_holder(db, SHARED_FIRST, SHARED_SIZE) != Some(pid) {
            missing.push(format!(
                "{what}: {}: shared lock on the database",
                db.display()
            ));
        }
        let shm = sidecar(db, "-shm");
        if lock_holder(&shm, SHM_DMS, 1) != Some(pid) {
            missing.push(format!("{what}: {}: shared lock on -shm", db.display()));
        }
    }
    std::fs::remove_file(&hold).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    missing
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn every_sqlite_write_command_keeps_its_locks_while_its_connections_are_open() {
    let mut lost = Vec::new();
    let (_d1, deerflow) = temp_copy(&sqlite_fixture("retention"));
    lost.extend(check_locks(
        "prune --all --branches --apply",
        &[
            "--db",
            s(&deerflow),
            "prune",
            "--all",
            "--branches",
            "--apply",
        ],
        &[&deerflow],
    ));
    let (_d2, delta) = temp_copy(&sqlite_fixture("delta_k3"));
    lost.extend(check_locks(
        "migrate delta-to-full --all --apply",
        &[
            "--db",
            s(&delta),
            "migrate",
            "delta-to-full",
            "--all",
            "--apply",
        ],
        &[&delta],
    ));
    let (_d3, full) = temp_copy(&sqlite_fixture("full"));
    let backup = _d3.path().join("backup.db");
    lost.extend(check_locks(
        "migrate full-to-delta --all --apply --backup",
        &[
            "--db",
            s(&full),
            "migrate",
            "full-to-delta",
            "--all",
            "--apply",
            "--backup",
            s(&backup),
        ],
        &[&full],
    ));
    let (d4, source) = temp_copy(&sqlite_fixture("delta_k10"));
    let new = d4.path().join("new.db");
    lost.extend(check_locks(
        "copy from the store",
        &[
            "--db",
            s(&source),
            "copy",
            "--all",
            "--to",
            s(&new),
            "--apply",
        ],
        &[&source],
    ));
    let (_d5, into) = temp_copy(&sqlite_fixture("deerflow"));
    lost.extend(check_locks(
        "copy into the store",
        &[
            "--db",
            s(&source),
            "copy",
            "--all",
            "--to",
            s(&into),
            "--apply",
        ],
        &[&source, &into],
    ));
    let (_d7, app) = temp_copy(&sqlite_fixture("deerflow_app"));
    lost.extend(check_locks(
        "delete --apply (DeerFlow's reservation, then the thread)",
        &[
            "--db",
            s(&app),
            "delete",
            "df0a0000-0000-4000-8000-000000000001",
            "--apply",
        ],
        &[&app],
    ));
    let (d7, maintained) = temp_copy(&sqlite_fixture("retention"));
    let policy = d7.path().join("policy.yaml");
    std::fs::write(&policy, "prune:\n  branches: true\n").unwrap();
    lost.extend(check_locks(
        "maintain --apply",
        &[
            "--db",
            s(&maintained),
            "maintain",
            "--policy",
            s(&policy),
            "--apply",
        ],
        &[&maintained],
    ));
    let (d6, vacuumed) = temp_copy(&sqlite_fixture("mixed"));
    lost.extend(check_locks(
        "reclaim --apply",
        &["--db", s(&vacuumed), "reclaim", "--apply"],
        &[&vacuumed],
    ));
    let compact = d6.path().join("compact.db");
    lost.extend(check_locks(
        "reclaim --into --apply",
        &[
            "--db",
            s(&vacuumed),
            "reclaim",
            "--into",
            s(&compact),
            "--apply",
        ],
        &[&vacuumed],
    ));
    assert!(lost.is_empty(), "dfck lost its locks: {lost:#?}");
}
