//! On SQLite too, `verify` and the dry runs of `prune` and `migrate` read short threads in
//! batches, two statements for a batch instead of three per thread (`Store::read_threads`,
//! `Store::read_ahead`; a dry run's batch inside one read transaction). Each report must be
//! byte-identical to the one reading every thread on its own (`batch-bytes:0`), on every
//! SQLite fixture and defect store, whatever the batch budget cuts; `batch-required:N`
//! (a thread of a batch read on its own fails the run) shows that the batch took every
//! thread. Under `--apply`, a group transaction reads its threads ahead under its lock. The
//! store summary reads whole rows in its scan, and equals the one made of point reads.

use crate::common::*;
use crate::pg_batch_reads::{APPLIED, COMMANDS};
use std::path::{Path, PathBuf};
use std::process::Output;

fn run(target: &Path, args: &[&str], failpoint: &str) -> Output {
    crate::common::dfck_command()
        .arg("--db")
        .arg(target)
        .args(args)
        .args(["--format", "json"])
        .env_remove("DFCK_DB")
        .env("DFCK_FAILPOINT", failpoint)
        .output()
        .expect("run dfck")
}

/// A copy of `fixtures/<dir>/<stem>.db` and its WAL in `into`.
pub(crate) fn copy_store(dir: &str, stem: &str, into: &Path) -> PathBuf {
    let src = root().join("fixtures").join(dir).join(format!("{stem}.db"));
    let dst = into.join(format!("{dir}-{stem}.db"));
    std::fs::copy(&src, &dst).expect("copy fixture");
    let wal = src.with_extension("db-wal");
    if wal.exists() {
        std::fs::copy(&wal, dst.with_extension("db-wal")).expect("copy WAL");
    }
    dst
}

/// Every SQLite fixture and defect store, copied into `into`.
pub(crate) fn stores(into: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["sqlite", "defects"] {
        let mut stems: Vec<String> = std::fs::read_dir(root().join("fixtures").join(dir))
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path();
                (p.extension()? == "db").then(|| p.file_stem().unwrap().to_string_lossy().into())
            })
            .collect();
        stems.sort();
        out.extend(stems.iter().map(|s| copy_store(dir, s, into)));
    }
    out
}

#[test]
fn batched_reads_report_exactly_what_per_thread_reads_report() {
    let dir = tempfile::tempdir().unwrap();
    let (mut compared, mut batched) = (0, 0);
    for db in stores(dir.path()) {
        for command in COMMANDS {
            let alone = run(&db, command, "batch-bytes:0");
            // Not a LangGraph store, or a schema dfck refuses: nothing to compare.
            if alone.status.code() == Some(2) {
                continue;
            }
            compared += 1;
            for failpoint in [
                "",
                "batch-bytes:1",
                "batch-bytes:3000",
                "batch-required:1000000000",
            ] {
                let out = run(&db, command, failpoint);
                assert_eq!(
                    (out.status.code(), String::from_utf8_lossy(&out.stdout)),
                    (alone.status.code(), String::from_utf8_lossy(&alone.stdout)),
                    "{db:?} {command:?} {failpoint}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let report: serde_json::Value = serde_json::from_slice(&alone.stdout).unwrap();
            let threads = report["threads_checked"]
                .as_u64()
                .or_else(|| report["threads"].as_array().map(|t| t.len() as u64));
            if threads.unwrap_or(0) > 1 {
                batched += 1;
            }
        }
    }
    assert!(
        compared >= 200 && batched >= 120,
        "{compared} runs compared, {batched} with batches"
    );
}

#[test]
fn a_thread_left_out_of_its_batch_fails_under_batch_required() {
    let dir = tempfile::tempdir().unwrap();
    let db = copy_store("sqlite", "delta_k3", dir.path());
    // Budget 1 leaves every thread after the first of a batch to a read of its own.
    for command in [COMMANDS[0], COMMANDS[2]] {
        let out = run(&db, command, "batch-required:1");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("not with its batch"),
            "{command:?} {:?}: {stderr}",
            out.status
        );
    }
}

#[test]
fn applied_groups_read_their_threads_ahead_and_write_what_threads_alone_write() {
    let mut compared = 0;
    for stem in ["delta_k3", "retention", "full", "deerflow"] {
        for command in APPLIED {
            // One transaction per thread, reading each on its own: the reference.
            let a = tempfile::tempdir().unwrap();
            let alone = copy_store("sqlite", stem, a.path());
            let expect = run(&alone, command, "group-threads:1,batch-bytes:0");
            if expect.status.code() == Some(2) {
                continue;
            }
            // Groups whose plans must all be served by the group's read-ahead.
            let b = tempfile::tempdir().unwrap();
            let grouped = copy_store("sqlite", stem, b.path());
            let got = run(&grouped, command, "batch-required:1000000000");
            let path_free = |o: &Output, p: &Path| {
                String::from_utf8_lossy(&o.stdout).replace(&p.display().to_string(), "DB")
            };
            assert_eq!(
                (got.status.code(), path_free(&got, &grouped)),
                (expect.status.code(), path_free(&expect, &alone)),
                "{stem} {command:?}: {}",
                String::from_utf8_lossy(&got.stderr)
            );
            // The stores agree afterwards.
            let after = |p: &Path| path_free(&run(p, &["verify"], ""), p);
            assert_eq!(after(&grouped), after(&alone), "{stem} {command:?}");
            compared += 1;
            // A budget of one byte holds no thread whole: each is read on its own, which
            // the failpoint turns into a failure, so the group did read ahead above.
            let c = tempfile::tempdir().unwrap();
            let starved = copy_store("sqlite", stem, c.path());
            let out = run(&starved, command, "batch-required:1");
            let threads = serde_json::from_slice::<serde_json::Value>(&expect.stdout)
                .ok()
                .and_then(|r| r["threads"].as_array().map(Vec::len))
                .unwrap_or(0);
            if threads > 1 {
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains("not with its batch"),
                    "{stem} {command:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
    assert!(compared >= 8, "{compared} runs compared");
}

/// The store summary on SQLite takes each thread's facts from the rows its scan reads whole,
/// and a thread with a body over the scan's limit from point reads: the same summary
/// either way, and with batches holding threads of both kinds.
#[test]
fn the_summary_from_whole_rows_equals_the_summary_from_point_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for db in stores(dir.path()) {
        let points = run(&db, &["inspect"], "scan-body-bytes:0");
        if points.status.code() == Some(2) {
            continue;
        }
        // `summary-wait-bytes:0`: a full row before a thread's first delta row is decoded at
        // once, not kept waiting.
        for failpoint in [
            "",
            "scan-body-bytes:600",
            "scan-body-bytes:5000",
            "summary-wait-bytes:0",
        ] {
            let out = run(&db, &["inspect"], failpoint);
            assert_eq!(
                (out.status.code(), String::from_utf8_lossy(&out.stdout)),
                (
                    points.status.code(),
                    String::from_utf8_lossy(&points.stdout)
                ),
                "{db:?} {failpoint}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        compared += 1;
    }
    assert!(compared >= 35, "{compared} stores compared");
}

/// A thread whose id is stored once as text and once as a blob reads as two threads of one
/// batch with the same id: the text one's writes merged in the scan, the blob one's not. The
/// writes are counted once, on the first, as the point reads count them.
#[test]
fn a_thread_id_stored_as_text_and_as_a_blob_counts_its_writes_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = copy_store("sqlite", "full", dir.path());
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "INSERT INTO checkpoints SELECT CAST(thread_id AS BLOB), checkpoint_ns, checkpoint_id, \
         parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints \
         WHERE thread_id = 't-linear'",
    )
    .unwrap();
    drop(c);
    for failpoint in ["", "scan-body-bytes:0"] {
        let out = run(&db, &["inspect"], failpoint);
        assert_eq!(out.status.code(), Some(0), "{failpoint}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let writes: Vec<u64> = v["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["thread_id"] == "t-linear")
            .map(|t| t["writes"].as_u64().unwrap())
            .collect();
        assert_eq!(writes, [20, 0], "{failpoint}");
        let tables = &v["table_bytes"];
        assert_eq!(
            v["bytes"].as_u64(),
            Some(tables["checkpoints"].as_u64().unwrap() + tables["writes"].as_u64().unwrap()),
            "{failpoint}"
        );
    }
}
