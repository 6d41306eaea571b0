//! Hardening of the write engine and `migrate delta-to-full --apply` against what a red team
//! found: a conversion that changes the state of a checkpoint it did not rewrite is refused
//! and rolled back; the WAL stays bounded and the free-space guard counts it; a reader
//! holding the WAL open gets an honest warning; a failed backup leaves no partial file; a
//! busy write lock refuses a thread instead of failing the run; repeated thread arguments
//! count once; a thread deleted meanwhile is skipped and named.

use crate::common::*;
use dfck_core::codec::{self, Value};
use rusqlite::{Connection, params};
use serde_json::Value as Json;
use std::path::Path;
use std::process::{Command, Output};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn migrate(db: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = crate::common::dfck_command();
    cmd.arg("--db")
        .arg(db)
        .args(["migrate", "delta-to-full", "--format", "json"])
        .args(extra)
        .env_remove("DFCK_DB")
        .env_remove("DFCK_FAILPOINT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run dfck")
}

fn report(out: &Output) -> Json {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "stdout is not JSON; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every checkpoint and write of a thread, bytes included.
fn thread_rows(db: &Path, thread: &str) -> Vec<Vec<u8>> {
    let conn = Connection::open(db).unwrap();
    let mut out = Vec::new();
    for sql in [
        "SELECT checkpoint_id || '|' || coalesce(type, ''), checkpoint, metadata FROM checkpoints WHERE thread_id = ?1 ORDER BY checkpoint_ns, checkpoint_id",
        "SELECT checkpoint_id || '|' || task_id || '|' || idx, value, channel FROM writes WHERE thread_id = ?1 ORDER BY checkpoint_ns, checkpoint_id, task_id, idx",
    ] {
        let mut st = conn.prepare(sql).unwrap();
        let rows = st
            .query_map([thread], |r| {
                let mut k = r.get::<_, String>(0)?.into_bytes();
                for i in 1..3 {
                    k.extend_from_slice(
                        r.get_ref(i)?
                            .as_bytes_or_null()
                            .ok()
                            .flatten()
                            .unwrap_or_default(),
                    );
                }
                Ok(k)
            })
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

/// Rewrites one checkpoint's msgpack body through dfck's codec.
fn mutate_checkpoint(db: &Path, id: &str, f: impl FnOnce(&mut Vec<(Value, Value)>)) {
    let conn = Connection::open(db).unwrap();
    let blob: Vec<u8> = conn
        .query_row(
            "SELECT checkpoint FROM checkpoints WHERE checkpoint_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    let Value::Map(mut entries) = codec::decode(&blob).unwrap() else {
        panic!("checkpoint body is a map");
    };
    f(&mut entries);
    let n = conn
        .execute(
            "UPDATE checkpoints SET checkpoint = ?1 WHERE checkpoint_id = ?2",
            params![codec::encode(&Value::Map(entries)), id],
        )
        .unwrap();
    assert_eq!(n, 1);
}

fn entry<'a>(entries: &'a mut [(Value, Value)], key: &str) -> &'a mut Value {
    &mut entries
        .iter_mut()
        .find(|(k, _)| k.as_str() == Some(key))
        .unwrap_or_else(|| panic!("no {key}"))
        .1
}

fn thread_status(j: &Json, thread: &str) -> (String, String) {
    let t = j["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == thread)
        .unwrap_or_else(|| panic!("{thread} in {j}"));
    (
        t["status"].as_str().unwrap().to_owned(),
        t["reason"].as_str().unwrap_or_default().to_owned(),
    )
}

/// Converts `thread` and asserts it is refused (exit 1) and byte-for-byte untouched.
fn assert_refused_untouched(db: &Path, thread: &str, needle: &str) {
    let before = thread_rows(db, thread);
    let out = migrate(db, &[thread, "--apply"], &[]);
    let j = report(&out);
    assert_eq!(out.status.code(), Some(1), "{j}");
    let (status, reason) = thread_status(&j, thread);
    assert_eq!(status, "refused", "{j}");
    assert!(
        reason.contains(needle),
        "reason {reason:?} names {needle:?}"
    );
    assert_eq!(thread_rows(db, thread), before, "rolled back");
}

#[test]
fn a_conversion_changing_an_unrewritten_checkpoints_state_is_refused() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    // The parent of 1f1ee3a8-fb20-… loses its channel versions: LangGraph's delta walk
    // still replays the root's `h-0` into fb20's `messages`; a rewrite that stored only
    // the parent's writes would change fb20's state (`[h-0, ai-1]` → `[ai-1]`).
    mutate_checkpoint(&db, "1f1ee3a8-fb1c-61f2-8000-58d5a2124d7d", |e| {
        *entry(e, "channel_versions") = Value::Map(Vec::new());
    });
    assert_refused_untouched(
        &db,
        "t-error",
        "would change the state shown at 1f1ee3a8-fb20-6964-8001-193ec77d4036",
    );
}

#[test]
fn a_nested_delta_snapshot_is_refused_and_left_untouched() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    // t-linear's head stores a snapshot: wrapped in a second one.
    mutate_checkpoint(&db, "1f1ee3a8-f90c-62c7-800e-e9767d11ecea", |e| {
        let Value::Map(cv) = entry(e, "channel_values") else {
            panic!("channel_values is a map");
        };
        let m = entry(cv, "messages");
        let inner = std::mem::replace(m, Value::Nil);
        *m = Value::new_ext(codec::EXT_DELTA_SNAPSHOT, inner);
    });
    assert_refused_untouched(&db, "t-linear", "_DeltaSnapshot inside another");
}

#[test]
fn a_reader_blocking_the_final_checkpoint_gets_a_warning_and_the_data_is_durable() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let reader = Connection::open(&db).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let n: i64 = reader
        .query_row("SELECT count(*) FROM checkpoints", [], |r| r.get(0))
        .unwrap();
    assert!(n > 0);
    let started = std::time::Instant::now();
    let out = migrate(&db, &["t-linear", "--apply"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "bounded wait"
    );
    assert_eq!(
        thread_status(&report(&out), "t-linear").0,
        "converted",
        "{stderr}"
    );
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "one warning: {stderr}");
    assert!(
        warnings[0].contains("read transaction") && warnings[0].contains("MiB of WAL are left"),
        "{stderr}"
    );
    drop(reader);
    // What was committed is there for a new connection.
    let out = migrate(&db, &["t-linear"], &[]);
    assert_eq!(thread_status(&report(&out), "t-linear").0, "skipped");
}

#[test]
fn a_failed_backup_leaves_no_file_and_a_rerun_writes_it() {
    let (dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let backup = dir.path().join("before.db");
    let before = thread_rows(&db, "t-linear");
    let b = backup.to_string_lossy().into_owned();
    let out = migrate(
        &db,
        &["t-linear", "--apply", "--backup", &b],
        &[("DFCK_FAILPOINT", "backup-abort")],
    );
    assert!(!out.status.success(), "the failpoint aborts the run");
    assert!(!backup.exists(), "no partial file under the backup's name");
    let out = migrate(&db, &["t-linear", "--apply", "--backup", &b], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(backup.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "temporary file removed");
    // The backup is the store before the conversion.
    assert_eq!(thread_rows(&backup, "t-linear"), before);
    assert_ne!(thread_rows(&db, "t-linear"), before);
}

#[test]
fn a_busy_write_lock_refuses_the_thread_naming_the_other_writer() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let before = thread_rows(&db, "t-linear");
    let writer = Connection::open(&db).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let out = migrate(&db, &["t-linear", "--apply"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "refused, not failed: {stderr}");
    let (status, reason) = thread_status(&report(&out), "t-linear");
    assert_eq!(status, "refused");
    assert!(reason.contains("another writer"), "{reason}");
    writer.execute_batch("ROLLBACK").unwrap();
    drop(writer);
    assert_eq!(thread_rows(&db, "t-linear"), before);
}

#[test]
fn a_thread_named_twice_counts_once() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let out = migrate(&db, &["t-linear", "t-linear"], &[]);
    let j = report(&out);
    assert_eq!(j["threads"].as_array().unwrap().len(), 1, "{j}");
    let out = migrate(&db, &["t-linear", "t-fork", "t-linear", "--apply"], &[]);
    let j = report(&out);
    let ids: Vec<&str> = j["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["t-linear", "t-fork"], "{j}");
    let v = dfck_json(
        &s(&db),
        &["verify", "t-linear", "t-linear", "--format", "json"],
    );
    assert_eq!(v["threads_checked"], 1, "{v}");
}

#[test]
fn a_thread_gone_before_its_transaction_is_skipped_and_named() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    // Another writer holds the write lock while dfck lists the threads (both exist then),
    // deletes t-fork as DeerFlow's thread delete would, and lets go: dfck converts t-linear
    // and skips t-fork by name.
    let writer = Connection::open(&db).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let child = crate::common::dfck_command()
        .arg("--db")
        .arg(&db)
        .args(["migrate", "delta-to-full", "--format", "json"])
        .args(["t-linear", "t-fork", "--apply"])
        .env_remove("DFCK_DB")
        .env_remove("DFCK_FAILPOINT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run dfck");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    writer
        .execute_batch(
            "DELETE FROM writes WHERE thread_id = 't-fork'; DELETE FROM checkpoints WHERE thread_id = 't-fork'; COMMIT",
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let j = report(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(thread_status(&j, "t-linear").0, "converted");
    assert_eq!(
        thread_status(&j, "t-fork"),
        ("skipped".into(), "thread no longer exists".into())
    );
}

#[test]
fn a_thread_that_never_existed_is_an_error() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let before = thread_rows(&db, "t-linear");
    for extra in [
        &["t-linear", "t-typo"][..],
        &["t-linear", "t-typo", "--apply"][..],
    ] {
        let out = migrate(&db, extra, &[]);
        assert_clean_failure(&out, "t-typo");
    }
    assert_eq!(thread_rows(&db, "t-linear"), before, "nothing converted");
}

/// A tmpfs mounted on a fresh directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(bytes: u64) -> Option<Tmpfs> {
        let root = Command::new("id").arg("-u").output().ok()?;
        if String::from_utf8_lossy(&root.stdout).trim() != "0" {
            println!("note: not root, skipping the small-tmpfs disk-full test");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!("note: cannot mount a tmpfs, skipping the small-tmpfs disk-full test");
            return None;
        }
        Some(Tmpfs { dir })
    }

    fn resize(&self, bytes: u64) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={bytes}")])
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// A store holding `copies` copies of delta_k3's `t-linear` (threads `c-0`, `c-1`, …).
fn many_threads(dir: &Path, copies: usize) -> std::path::PathBuf {
    let db = dir.join("many.db");
    std::fs::copy(sqlite_fixture("delta_k3"), &db).unwrap();
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("BEGIN").unwrap();
    for table in ["checkpoints", "writes"] {
        let cols: Vec<String> = conn
            .prepare(&format!("PRAGMA table_info({table})"))
            .unwrap()
            .query_map([], |r| r.get::<_, String>(1))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let select: Vec<String> = cols
            .iter()
            .map(|c| {
                if c == "thread_id" {
                    "'c-' || n.i".to_owned()
                } else {
                    c.clone()
                }
            })
            .collect();
        conn.execute(
            &format!(
                "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1) \
                 INSERT INTO {table} ({}) SELECT {} FROM {table}, n WHERE thread_id = 't-linear'",
                cols.join(", "),
                select.join(", ")
            ),
            [copies as i64],
        )
        .unwrap();
    }
    conn.execute_batch("DELETE FROM writes WHERE thread_id NOT LIKE 'c-%'; DELETE FROM checkpoints WHERE thread_id NOT LIKE 'c-%'; COMMIT; VACUUM")
        .unwrap();
    drop(conn);
    db
}

#[test]
fn a_small_disk_converts_what_fits_refuses_the_rest_and_a_rerun_finishes() {
    let work = tempfile::tempdir().unwrap();
    let src = many_threads(work.path(), 400);
    let size = std::fs::metadata(&src).unwrap().len();
    // Room for the store and about half of what the conversion adds.
    let Some(fs) = Tmpfs::mount(size + (8 << 20)) else {
        return;
    };
    let db = fs.dir.path().join("many.db");
    std::fs::copy(&src, &db).unwrap();
    let out = migrate(&db, &["--all", "--apply"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "refusals, not an error: {stderr}"
    );
    let j = report(&out);
    let converted = j["converted"].as_u64().unwrap();
    let refused = j["refused"].as_u64().unwrap();
    assert!(
        converted > 0 && refused > 0,
        "{converted} converted, {refused} refused"
    );
    for t in j["threads"].as_array().unwrap() {
        if t["status"] == "refused" {
            assert!(
                t["reason"]
                    .as_str()
                    .unwrap()
                    .contains("not enough disk space"),
                "{t}"
            );
        }
    }
    let free = crate::common::free_bytes(fs.dir.path());
    assert!(free >= 1 << 20, "the disk is not full: {free} bytes free");
    let wal = std::fs::metadata(fs.dir.path().join("many.db-wal")).map_or(0, |m| m.len());
    assert!(
        wal < 1 << 20,
        "the WAL is truncated at the end: {wal} bytes"
    );

    fs.resize(size * 4 + (64 << 20));
    let out = migrate(&db, &["--all", "--apply"], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = report(&out);
    assert_eq!(j["converted"].as_u64().unwrap(), refused, "{j}");
    assert_eq!(j["refused"], 0);
}
