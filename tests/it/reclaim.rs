//! `dfck reclaim`: on SQLite it shrinks a file holding deleted rows (measured), refuses while
//! another connection holds the store (and that connection's view stays consistent), refuses
//! when the disk is too small, writes a compacted copy with `--into` leaving the original
//! byte-identical, and a dry run changes no byte; on PostgreSQL it vacuums a copy of a fixture
//! database and reports the tables' sizes.

use crate::common::*;
use rusqlite::Connection;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Output;

fn run(cwd: Option<&Path>, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = crate::common::dfck_command();
    c.args(args)
        .env_remove("DFCK_DB")
        .env_remove("DFCK_FAILPOINT")
        .env("COLUMNS", "200");
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run dfck")
}

fn json(out: &Output) -> Json {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A copy of `stem` with every row of `thread` deleted (the connection closed, so the WAL
/// is folded into the file and removed).
fn copy_without(stem: &str, thread: &str) -> (tempfile::TempDir, PathBuf) {
    let (dir, db) = temp_copy(&sqlite_fixture(stem));
    let c = Connection::open(&db).unwrap();
    let n = c
        .execute("DELETE FROM checkpoints WHERE thread_id = ?1", [thread])
        .unwrap();
    assert!(n > 0, "{thread} has checkpoints in {stem}");
    c.execute("DELETE FROM writes WHERE thread_id = ?1", [thread])
        .unwrap();
    drop(c);
    (dir, db)
}

fn pages(db: &Path) -> (u64, u64) {
    let c = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let count: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    let free: i64 = c
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    (count as u64, free as u64)
}

fn thread_count(db: &Path) -> i64 {
    let c = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    c.query_row(
        "SELECT count(DISTINCT thread_id) FROM checkpoints",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn reclaim_shrinks_the_file() {
    let (_dir, db) = copy_without("long_threads", "t-100-turns");
    let size_before = std::fs::metadata(&db).unwrap().len();
    let (count_before, free_before) = pages(&db);
    assert!(
        free_before > 100,
        "the deletion left free pages: {free_before}"
    );
    let d = db.to_str().unwrap();
    let out = run(
        None,
        &[],
        &["--db", d, "reclaim", "--apply", "--format", "json"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    assert_eq!(r["status"], "done");
    assert_eq!(r["dry_run"], false);
    assert_eq!(r["action"], "vacuum");
    assert_eq!(r["before"]["freelist_pages"], free_before);
    assert_eq!(r["before"]["page_count"], count_before);
    assert_eq!(r["after"]["freelist_pages"], 0);
    let size_after = std::fs::metadata(&db).unwrap().len();
    assert!(
        size_after + free_before * 4096 <= size_before + 4096,
        "the file shrank by its free pages: {size_before} -> {size_after}"
    );
    assert_eq!(r["after"]["file_bytes"], size_after);
    assert_eq!(r["before"]["file_bytes"], size_before);
    let freed = r["bytes_freed"].as_i64().unwrap();
    assert_eq!(
        freed,
        r["bytes_before"].as_i64().unwrap() - r["bytes_after"].as_i64().unwrap()
    );
    assert!(freed >= (free_before * 4096) as i64 - 4096, "freed {freed}");
    assert_eq!(pages(&db).1, 0);
    // The remaining thread is intact.
    assert_eq!(thread_count(&db), 1);
    let s = dfck_json(d, &["inspect", "--format", "json"]);
    assert_eq!(s["threads"][0]["thread_id"], "t-long-turn");
    assert_eq!(s["threads"][0]["checkpoints"], 428);
    // Nothing left to give back: a second run frees nothing.
    let again = json(&run(
        None,
        &[],
        &["--db", d, "reclaim", "--apply", "--format", "json"],
    ));
    assert_eq!(again["status"], "done");
    assert_eq!(again["after"]["file_bytes"], size_after);
}

#[test]
fn dry_run_changes_no_byte() {
    let (dir, db) = copy_without("deerflow", "t-deerflow-full");
    let bytes = std::fs::read(&db).unwrap();
    let d = db.to_str().unwrap();
    let into = dir.path().join("copy.db");
    for args in [
        vec!["--db", d, "reclaim", "--format", "json"],
        vec![
            "--db",
            d,
            "reclaim",
            "--into",
            into.to_str().unwrap(),
            "--format",
            "json",
        ],
    ] {
        let out = run(None, &[], &args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let r = json(&out);
        assert_eq!(r["status"], "would");
        assert_eq!(r["dry_run"], true);
        assert!(r["after"].is_null() && r["bytes_freed"].is_null());
        assert!(r["before"]["freelist_pages"].as_u64().unwrap() > 0);
        assert!(r["needed_bytes"].as_u64().unwrap() > 0);
    }
    assert_eq!(
        std::fs::read(&db).unwrap(),
        bytes,
        "a dry run changed the store"
    );
    assert!(!into.exists(), "a dry run wrote the copy");
}

#[test]
fn into_writes_a_compacted_copy_and_leaves_the_original() {
    let (dir, db) = copy_without("deerflow", "t-deerflow-full");
    let bytes = std::fs::read(&db).unwrap();
    let d = db.to_str().unwrap();
    let into = dir.path().join("compact.db");
    let i = into.to_str().unwrap();
    let out = run(
        None,
        &[],
        &[
            "--db", d, "reclaim", "--into", i, "--apply", "--format", "json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    assert_eq!(r["status"], "done");
    assert_eq!(r["action"], "vacuum_into");
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "the original changed");
    let copy_len = std::fs::metadata(&into).unwrap().len();
    assert!(
        copy_len < bytes.len() as u64,
        "{copy_len} vs {}",
        bytes.len()
    );
    assert_eq!(r["after"]["file_bytes"], copy_len);
    assert_eq!(r["after"]["freelist_pages"], 0);
    assert_eq!(pages(&into).1, 0);
    // The copy is a clean store with the same thread.
    let v = run(None, &[], &["--db", i, "verify", "--format", "json"]);
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );
    let a = dfck_json(d, &["inspect", "t-deerflow", "--state", "--format", "json"]);
    let b = dfck_json(i, &["inspect", "t-deerflow", "--state", "--format", "json"]);
    assert_eq!(a["values"], b["values"]);
    // An existing PATH is refused and left alone.
    let before = std::fs::read(&into).unwrap();
    let out = run(
        None,
        &[],
        &[
            "--db", d, "reclaim", "--into", i, "--apply", "--format", "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let r = json(&out);
    assert_eq!(r["status"], "refused");
    assert!(r["reason"].as_str().unwrap().contains("already exists"));
    assert_eq!(std::fs::read(&into).unwrap(), before);
    // No temporary file is left next to it.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with(".dfck-reclaim-")),
        "{names:?}"
    );
}

#[test]
fn a_reader_keeps_its_view_and_reclaim_refuses() {
    let (_dir, db) = temp_copy(&sqlite_fixture("long_threads"));
    // A writer deletes a thread and stays connected without checkpointing: the deletion
    // sits in the WAL.
    let writer = Connection::open(&db).unwrap();
    writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    writer
        .execute(
            "DELETE FROM checkpoints WHERE thread_id = 't-100-turns'",
            [],
        )
        .unwrap();
    // A reader opens a read transaction on the WAL.
    let reader =
        Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let count = |c: &Connection| -> i64 {
        c.query_row("SELECT count(*) FROM checkpoints", [], |r| r.get(0))
            .unwrap()
    };
    let seen = count(&reader);
    assert_eq!(seen, 428);
    let d = db.to_str().unwrap();
    let out = run(
        None,
        &[],
        &["--db", d, "reclaim", "--apply", "--format", "json"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = json(&out);
    assert_eq!(r["status"], "refused");
    let reason = r["reason"].as_str().unwrap();
    assert!(reason.contains("read transaction"), "{reason}");
    assert!(r["after"].is_null());
    // The reader's view is unchanged, and so is the store.
    assert_eq!(count(&reader), seen);
    reader.execute_batch("COMMIT").unwrap();
    drop(reader);
    // A writer holding the lock: refused, naming the lock.
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let out = run(
        None,
        &[],
        &["--db", d, "reclaim", "--apply", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let r = json(&out);
    assert!(
        r["reason"].as_str().unwrap().contains("database lock"),
        "{}",
        r["reason"]
    );
    writer.execute_batch("ROLLBACK").unwrap();
    drop(writer);
    // Once both are gone it runs.
    let size_before = std::fs::metadata(&db).unwrap().len();
    let out = run(
        None,
        &[],
        &["--db", d, "reclaim", "--apply", "--format", "json"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(std::fs::metadata(&db).unwrap().len() < size_before);
    assert_eq!(thread_count(&db), 1);
}

/// A crash (an abort, as a SIGKILL would) before and after the VACUUM leaves an intact store
/// with every row; a rerun finishes the job.
#[test]
fn a_crash_leaves_the_store_intact() {
    for n in ["1", "2"] {
        let (_dir, db) = copy_without("long_threads", "t-100-turns");
        let size_before = std::fs::metadata(&db).unwrap().len();
        let d = db.to_str().unwrap();
        let fp = format!("reclaim-abort-after:{n}");
        let out = run(
            None,
            &[("DFCK_FAILPOINT", &fp)],
            &["--db", d, "reclaim", "--apply"],
        );
        assert_eq!(out.status.code(), None, "aborted at {fp}");
        let c = Connection::open(&db).unwrap();
        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "{fp}");
        let rows: i64 = c
            .query_row("SELECT count(*) FROM checkpoints", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 428, "{fp}");
        drop(c);
        let r = json(&run(
            None,
            &[],
            &["--db", d, "reclaim", "--apply", "--format", "json"],
        ));
        assert_eq!(r["status"], "done", "{fp}");
        assert_eq!(r["after"]["freelist_pages"], 0);
        assert!(std::fs::metadata(&db).unwrap().len() < size_before, "{fp}");
    }
}

#[test]
fn too_little_disk_is_refused() {
    let (dir, db) = copy_without("deerflow", "t-deerflow-full");
    let bytes = std::fs::read(&db).unwrap();
    let d = db.to_str().unwrap();
    let into = dir.path().join("c.db");
    for args in [
        vec!["--db", d, "reclaim", "--apply", "--format", "json"],
        vec![
            "--db",
            d,
            "reclaim",
            "--into",
            into.to_str().unwrap(),
            "--apply",
            "--format",
            "json",
        ],
    ] {
        let out = run(None, &[("DFCK_FAILPOINT", "free-bytes:1000")], &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let r = json(&out);
        assert_eq!(r["status"], "refused");
        assert!(
            r["reason"]
                .as_str()
                .unwrap()
                .contains("not enough disk space")
        );
        assert_eq!(r["available_bytes"], 1000);
    }
    assert_eq!(std::fs::read(&db).unwrap(), bytes);
    assert!(!into.exists());
}

/// The human output; the room line (free space and the temporary directory's file system
/// vary by machine) is redacted.
#[test]
fn human_output() {
    let (dir, _db) = copy_without("deerflow", "t-deerflow-full");
    let text = |args: &[&str]| {
        let out = run(Some(dir.path()), &[], args);
        let stdout = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                if l.starts_with("room:") {
                    "room:    [redacted]".to_owned()
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        format!("exit: {:?}\n{stdout}\n", out.status.code())
    };
    let dry = text(&["--db", "deerflow.db", "reclaim"]);
    let done = text(&["--db", "deerflow.db", "reclaim", "--apply"]);
    insta::assert_snapshot!("reclaim_sqlite", format!("{dry}---\n{done}"));
}

#[test]
fn postgres_reclaim_reports_sizes() {
    let Some(uri) = require_postgres("postgres reclaim") else {
        return;
    };
    let rt = crate::common::pg::runtime();
    let admin = crate::common::pg::connect(&rt, &uri);
    let name = "dfck_reclaim_x";
    rt.block_on(admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")))
        .unwrap();
    // Another test may be connected to the template for a moment: retry.
    let mut tries = 0;
    loop {
        let r = rt.block_on(
            admin.batch_execute(&format!("CREATE DATABASE {name} TEMPLATE dfck_delta_k3")),
        );
        match r {
            Ok(()) => break,
            Err(e) if tries < 50 => {
                tries += 1;
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) => panic!("creating {name}: {e}"),
        }
    }
    let url = with_db(&uri, name);
    let c = crate::common::pg::connect(&rt, &url);
    rt.block_on(c.batch_execute(
        "DELETE FROM checkpoint_blobs WHERE thread_id = 't-linear'; \
         DELETE FROM checkpoint_writes WHERE thread_id = 't-linear'; \
         DELETE FROM checkpoints WHERE thread_id = 't-linear'",
    ))
    .unwrap();
    let dry = json(&run(
        None,
        &[],
        &["--db", &url, "reclaim", "--format", "json"],
    ));
    assert_eq!(dry["status"], "would");
    assert_eq!(dry["action"], "vacuum_analyze");
    let tables: Vec<&str> = dry["before"]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(
        tables,
        ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
    );
    // Another session holding a lock VACUUM needs (as another VACUUM would): refused after
    // the lock timeout (VACUUM changes no row either way).
    let holder = crate::common::pg::connect(&rt, &url);
    rt.block_on(
        holder.batch_execute("BEGIN; LOCK TABLE checkpoint_blobs IN SHARE UPDATE EXCLUSIVE MODE"),
    )
    .unwrap();
    let out = run(
        None,
        &[],
        &["--db", &url, "reclaim", "--apply", "--format", "json"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    assert_eq!(r["status"], "refused");
    assert!(
        r["reason"].as_str().unwrap().contains("table lock"),
        "{}",
        r["reason"]
    );
    rt.block_on(holder.batch_execute("ROLLBACK")).unwrap();
    drop(holder);
    let out = run(
        None,
        &[],
        &["--db", &url, "reclaim", "--apply", "--format", "json"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    assert_eq!(r["status"], "done");
    assert!(r["advice"].as_str().unwrap().contains("pg_repack"));
    let size = |t: &str| -> i64 {
        let row = rt
            .block_on(c.query_one("SELECT pg_total_relation_size($1::text::regclass)", &[&t]))
            .unwrap();
        row.get(0)
    };
    let mut sum = 0;
    for (i, t) in tables.iter().enumerate() {
        let after = &r["after"]["tables"][i];
        assert_eq!(after["total_bytes"], size(t), "{t}");
        assert_eq!(after["dead_tuples"], 0, "{t} vacuumed");
        sum += after["total_bytes"].as_i64().unwrap();
    }
    assert_eq!(r["bytes_after"], sum);
    assert_eq!(
        r["bytes_freed"].as_i64().unwrap(),
        r["bytes_before"].as_i64().unwrap() - sum
    );
    // --into is for SQLite.
    let out = run(None, &[], &["--db", &url, "reclaim", "--into", "/tmp/x.db"]);
    assert_clean_failure(&out, "--into");
    drop(c);
    rt.block_on(admin.batch_execute(&format!("DROP DATABASE {name}")))
        .unwrap();
}
