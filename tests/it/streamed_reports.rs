//! The store summary, `prune`, `migrate` and `verify` are written as their threads come, in
//! thread id order (a plain table, compact JSON or CSV; each row waits in a spool, in memory
//! up to a budget and then in a temporary file, until the totals or columns above the rows
//! are known), so that their memory does not grow with the number of threads or findings. Each must be byte-identical to the
//! report held whole (`report-held:1`) on every SQLite and PostgreSQL fixture and defect
//! store, with its rows in memory or in the file (`spool-bytes:0`), cut by `--top` or not,
//! dry run or `--apply`. A temporary directory that does not exist fails the streamed run
//! (with its rows in the file), which shows that the stream was taken.

use crate::common::*;
use std::process::Output;

/// The reports compared (the other formats and options hold every thread).
const VARIANTS: [&[&str]; 26] = [
    &["inspect"],
    &["inspect", "--format", "ndjson"],
    &["inspect", "--format", "ndjson", "--top", "1"],
    &["prune", "--all", "--branches", "--format", "ndjson"],
    &["inspect", "--format", "json"],
    &["inspect", "--top", "1"],
    &["inspect", "--format", "json", "--top", "2"],
    &["inspect", "--top", "0"],
    &["inspect", "--format", "json", "--top", "0"],
    &["prune", "--all"],
    &["prune", "--all", "--branches", "--format", "json"],
    &["prune", "--all", "--branches", "--keep-last-turns", "1"],
    &[
        "prune",
        "--all",
        "--keep-last-turns",
        "2",
        "--format",
        "json",
    ],
    &["prune", "--all", "--branches", "--jobs", "2"],
    &["migrate", "delta-to-full", "--all"],
    &["migrate", "delta-to-full", "--all", "--format", "json"],
    &["migrate", "full-to-delta", "--all"],
    &["migrate", "full-to-delta", "--all", "--format", "ndjson"],
    &["inspect", "--format", "csv"],
    &["inspect", "--format", "csv", "--top", "1"],
    &["prune", "--all", "--branches", "--format", "csv"],
    &["migrate", "delta-to-full", "--all", "--format", "csv"],
    &["verify"],
    &["verify", "--format", "json", "--jobs", "2"],
    &["verify", "--format", "csv"],
    &["verify", "--format", "ndjson"],
];

/// `dfck --db TARGET ARGS…` with `failpoint` (and `TMPDIR` at `tmp`), plain (no `COLUMNS`).
pub(crate) fn run(target: &str, args: &[&str], failpoint: &str, tmp: Option<&str>) -> Output {
    let mut c = crate::common::dfck_command();
    c.arg("--db")
        .arg(target)
        .args(args)
        .env_remove("DFCK_DB")
        .env_remove("COLUMNS")
        .env("DFCK_FAILPOINT", failpoint);
    if let Some(t) = tmp {
        c.env("TMPDIR", t);
    }
    c.output().expect("run dfck")
}

/// Compares the streamed reports of `target` with the held ones; how many were compared.
fn compare(target: &str) -> usize {
    let mut compared = 0;
    for args in VARIANTS {
        let held = run(target, args, "report-held:1", None);
        // Not a LangGraph store, a schema dfck refuses, or --jobs on SQLite: nothing to
        // compare (exit 1 is a refused thread: its report is compared).
        if !matches!(held.status.code(), Some(0 | 1)) {
            continue;
        }
        compared += 1;
        for failpoint in ["", "spool-bytes:0", "spool-bytes:100"] {
            let out = run(target, args, failpoint, None);
            assert_eq!(
                (out.status.code(), String::from_utf8_lossy(&out.stdout)),
                (held.status.code(), String::from_utf8_lossy(&held.stdout)),
                "{target} {args:?} {failpoint}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The stream was taken: its rows cannot reach a temporary directory that is not
        // there, and the run says so (the held summary needs none).
        let text = String::from_utf8_lossy(&held.stdout);
        let empty = text.is_empty()
            || text.contains("(no threads)")
            || text.contains(r#""threads":[]"#)
            || text.contains(r#""findings":[]"#)
            || text.contains("findings: 0 error(s), 0 warning(s), 0 info")
            || (text.contains("threads: 0 to ") && text.contains(" 0 refused, 0 skipped"));
        // (NDJSON has no spool: each row is written as it comes.)
        if !empty && !args.contains(&"ndjson") {
            let missing = "/nonexistent-dfck-tmp";
            let out = run(target, args, "spool-bytes:0", Some(missing));
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{target} {args:?}: {err}");
            assert!(
                err.contains("temporary file") && err.contains(missing) && err.lines().count() == 1,
                "{target} {args:?}: {err}"
            );
            let again = run(target, args, "report-held:1,spool-bytes:0", Some(missing));
            assert_eq!(again.status.code(), held.status.code(), "{target} {args:?}");
        }
    }
    compared
}

#[test]
fn streamed_reports_are_the_held_ones_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for db in crate::sqlite_batch_reads::stores(dir.path()) {
        compared += compare(db.to_str().unwrap());
    }
    assert!(compared >= 300, "{compared} reports compared");
}

#[test]
fn streamed_reports_are_the_held_ones_on_postgres() {
    let Some(uri) = require_postgres("the streamed reports") else {
        return;
    };
    let mut compared = 0;
    for db in crate::pg_batch_reads::databases() {
        compared += compare(&with_db(&uri, &db));
    }
    assert!(compared >= 250, "{compared} reports compared");
}

/// `prune --apply` and `migrate --apply` report the same, streamed or held, and write the
/// same rows.
#[test]
fn applied_reports_stream_what_they_would_hold() {
    let commands: [&[&str]; 5] = [
        &["prune", "--all", "--branches", "--apply"],
        &["prune", "--all", "--branches", "--apply", "--format", "csv"],
        &[
            "prune",
            "--all",
            "--keep-last-turns",
            "1",
            "--apply",
            "--format",
            "json",
        ],
        &["migrate", "delta-to-full", "--all", "--apply"],
        &[
            "migrate",
            "full-to-delta",
            "--all",
            "--apply",
            "--format",
            "json",
        ],
    ];
    let failpoints = ["report-held:1", "", "spool-bytes:0,group-threads:2"];
    // Each command changed rows on some store: the reports compared are of real writes.
    assert_eq!(applied_alike(&commands, &failpoints), [true; 5]);
}

/// Runs each of `commands` on fresh copies of four fixtures, once per failpoint, and asserts
/// that every failpoint gives the first one's exit code, report and rows; which commands
/// changed rows on some store. A command ending in `--backup` gets a path beside its copy
/// (`B` in the report).
pub(crate) fn applied_alike(commands: &[&[&str]], failpoints: &[&str]) -> Vec<bool> {
    let dir = tempfile::tempdir().unwrap();
    let (mut n, mut wrote) = (0, vec![false; commands.len()]);
    for stem in ["delta_k3", "retention", "deerflow", "full"] {
        for (c, given) in commands.iter().enumerate() {
            let (mut results, mut before) = (Vec::new(), Vec::new());
            for failpoint in failpoints {
                n += 1;
                let into = dir.path().join(n.to_string());
                std::fs::create_dir_all(&into).unwrap();
                let db = crate::sqlite_batch_reads::copy_store("sqlite", stem, &into);
                let db = db.to_str().unwrap();
                before = crate::common::store_rows::sqlite_rows(db);
                let backup = into.join("backup.db");
                let backup = backup.to_str().unwrap();
                let mut args = given.to_vec();
                if args.last() == Some(&"--backup") {
                    args.push(backup);
                }
                let out = run(db, &args, failpoint, None);
                assert!(
                    matches!(out.status.code(), Some(0 | 1)),
                    "{stem} {args:?} {failpoint}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let report = String::from_utf8(out.stdout).unwrap().replace(backup, "B");
                let rows = crate::common::store_rows::sqlite_rows(db);
                results.push((out.status.code(), report, rows));
            }
            wrote[c] |= results[0].2 != before;
            for r in &results[1..] {
                assert_eq!(r, &results[0], "{stem} {given:?}");
            }
        }
    }
    wrote
}

/// The store's bytes count the writes of threads without checkpoints (they occupy the
/// store), streamed or held, with the rows of other threads summed a batch at a time.
#[test]
fn writes_without_checkpoints_count_in_the_stores_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("orphans.db");
    std::fs::copy(root().join("fixtures/sqlite/delta_k3.db"), &db).unwrap();
    let target = db.to_str().unwrap().to_owned();
    let bytes = |failpoint: &str| -> (u64, u64) {
        let out = run(&target, &["inspect", "--format", "json"], failpoint, None);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["bytes"].as_u64().unwrap(),
            v["counts"]["writes"].as_u64().unwrap(),
        )
    };
    let (before, writes) = bytes("");
    let conn = rusqlite::Connection::open(&db).unwrap();
    for (thread, len) in [("zz-no-checkpoints", 1000usize), ("0-no-checkpoints", 337)] {
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, \
             type, value) VALUES (?1, '', 'c', 't', 0, 'messages', 'msgpack', ?2)",
            rusqlite::params![thread, vec![0x90u8; len]],
        )
        .unwrap();
    }
    drop(conn);
    for failpoint in ["", "report-held:1", "spool-bytes:0"] {
        assert_eq!(bytes(failpoint), (before + 1337, writes + 2), "{failpoint}");
    }
}

/// The store summary counts its rows on a second thread while the scan reads on; rows past
/// a budget are counted on the scan's own thread. Either way the summary is the same.
#[test]
fn the_summary_is_the_same_whichever_thread_counts_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut targets: Vec<String> = crate::sqlite_batch_reads::stores(dir.path())
        .iter()
        .map(|p| p.to_str().unwrap().to_owned())
        .collect();
    if let Some(uri) = require_postgres("the summary's counting thread") {
        targets.extend(
            crate::pg_batch_reads::databases()
                .iter()
                .map(|db| with_db(&uri, db)),
        );
    }
    let mut compared = 0;
    for target in &targets {
        for args in [
            &["inspect", "--format", "json"][..],
            &["inspect", "--top", "2"],
        ] {
            let given = run(target, args, "", None);
            if given.status.code() != Some(0) {
                continue;
            }
            compared += 1;
            for failpoint in ["summary-pending-bytes:0", "summary-pending-bytes:3000"] {
                let out = run(target, args, failpoint, None);
                assert_eq!(
                    (out.status.code(), String::from_utf8_lossy(&out.stdout)),
                    (given.status.code(), String::from_utf8_lossy(&given.stdout)),
                    "{target} {args:?} {failpoint}"
                );
            }
        }
    }
    assert!(compared >= 60, "{compared} summaries compared");
}
