//! Whole-store runs read their threads a page at a time as they go, never all listed
//! (docs/write-engine.md, "Threads"). With pages of one, two and three thread ids
//! (`thread-page:N`), so that a fixture's few threads span several pages, every command
//! that works on every thread reports and writes exactly what it does with one page, on
//! every SQLite and PostgreSQL fixture and defect store. The dry runs of `prune` and
//! `migrate` with `--jobs N` (N read-only connections, on either backend) report exactly what
//! one connection reports.

use crate::common::*;
use std::process::Output;

/// The whole-store runs compared.
const RUNS: [&[&str]; 10] = [
    &["verify", "--format", "ndjson"],
    &["verify", "--format", "json"],
    &["verify", "--jobs", "2", "--format", "json"],
    &["prune", "--all", "--branches", "--format", "json"],
    &[
        "prune",
        "--all",
        "--keep-last-turns",
        "1",
        "--format",
        "ndjson",
    ],
    &["prune", "--all", "--branches", "--jobs", "2"],
    &["migrate", "delta-to-full", "--all", "--format", "json"],
    &["migrate", "full-to-delta", "--all"],
    &["audit", "--format", "json"],
    &["inspect", "--format", "json"],
];

const PAGES: [&str; 3] = ["thread-page:1", "thread-page:2", "thread-page:3"];

fn run(target: &str, args: &[&str], failpoint: &str) -> Output {
    crate::common::dfck_command()
        .arg("--db")
        .arg(target)
        .args(args)
        .env_remove("DFCK_DB")
        .env_remove("COLUMNS")
        .env("DFCK_FAILPOINT", failpoint)
        .output()
        .expect("run dfck")
}

/// The dry runs compared over several connections (`--jobs` is added).
const DRY_RUNS: [&[&str]; 5] = [
    &["prune", "--all", "--branches", "--format", "json"],
    &[
        "prune",
        "--all",
        "--keep-last-turns",
        "1",
        "--format",
        "ndjson",
    ],
    &["prune", "--all", "--branches", "--format", "csv"],
    &["migrate", "delta-to-full", "--all", "--format", "json"],
    &["migrate", "full-to-delta", "--all", "--format", "json"],
];

/// Compares the dry runs of `target` over 2 and 3 connections with one; how many worked.
fn compare_jobs(target: &str) -> usize {
    let mut worked = 0;
    for args in DRY_RUNS {
        let one = run(target, args, "");
        worked += usize::from(matches!(one.status.code(), Some(0 | 1)));
        for (jobs, failpoint) in [("2", ""), ("3", "thread-page:2"), ("2", "batch-bytes:0")] {
            let mut with = args.to_vec();
            with.extend(["--jobs", jobs]);
            let out = run(target, &with, failpoint);
            assert_eq!(
                (out.status.code(), String::from_utf8_lossy(&out.stdout)),
                (one.status.code(), String::from_utf8_lossy(&one.stdout)),
                "{target} {with:?} {failpoint}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    worked
}

#[test]
fn dry_runs_over_several_connections_are_the_one_connection_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut targets: Vec<String> = crate::sqlite_batch_reads::stores(dir.path())
        .iter()
        .map(|p| p.to_str().unwrap().to_owned())
        .collect();
    let sqlite = targets.len();
    if let Some(uri) = require_postgres("dry runs over several connections") {
        targets.extend(
            crate::pg_batch_reads::databases()
                .iter()
                .map(|db| with_db(&uri, db)),
        );
    }
    let worked: usize = targets.iter().map(|t| compare_jobs(t)).sum();
    assert!(worked >= sqlite * 3, "{worked} dry runs worked");
}

/// Compares the paged runs of `target` with one page; how many threads the store has, and
/// how many runs compared worked (exit 0, or 1 for findings or refused threads).
fn compare(target: &str) -> (usize, usize) {
    let mut worked = 0;
    for args in RUNS {
        let whole = run(target, args, "");
        worked += usize::from(matches!(whole.status.code(), Some(0 | 1)));
        for failpoint in PAGES {
            let out = run(target, args, failpoint);
            assert_eq!(
                (out.status.code(), String::from_utf8_lossy(&out.stdout)),
                (whole.status.code(), String::from_utf8_lossy(&whole.stdout)),
                "{target} {args:?} {failpoint}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let out = run(target, &["inspect", "--format", "json"], "");
    let threads = serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .ok()
        .and_then(|v| v["threads"].as_array().map(Vec::len))
        .unwrap_or(0);
    (threads, worked)
}

#[test]
fn paged_runs_are_the_one_page_runs_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let (mut spanned, mut worked) = (0, 0);
    for db in crate::sqlite_batch_reads::stores(dir.path()) {
        let (threads, ok) = compare(db.to_str().unwrap());
        spanned += usize::from(threads > 3);
        worked += ok;
    }
    // Stores of more threads than the largest page: every size splits them.
    assert!(spanned >= 3, "{spanned} stores of more than 3 threads");
    // The runs compared are runs that worked, not the same error.
    assert!(worked >= 250, "{worked} runs worked");
}

#[test]
fn paged_runs_are_the_one_page_runs_on_postgres() {
    let Some(uri) = require_postgres("the paged runs") else {
        return;
    };
    let (mut spanned, mut worked) = (0, 0);
    for db in crate::pg_batch_reads::databases() {
        let (threads, ok) = compare(&with_db(&uri, &db));
        spanned += usize::from(threads > 3);
        worked += ok;
    }
    assert!(spanned >= 3, "{spanned} databases of more than 3 threads");
    assert!(worked >= 200, "{worked} runs worked");
}

/// `--apply` over pages writes the same rows and reports the same as over one page, with
/// and without `--backup` (its space check plans every page first).
#[test]
fn applied_runs_over_pages_write_what_one_page_writes() {
    let commands: [&[&str]; 3] = [
        &[
            "prune",
            "--all",
            "--branches",
            "--apply",
            "--format",
            "json",
        ],
        &[
            "migrate",
            "delta-to-full",
            "--all",
            "--apply",
            "--format",
            "json",
        ],
        &[
            "prune",
            "--all",
            "--keep-last-turns",
            "1",
            "--apply",
            "--backup",
        ],
    ];
    let failpoints = ["", "thread-page:1", "thread-page:2,group-threads:2"];
    let wrote = crate::streamed_reports::applied_alike(&commands, &failpoints);
    assert_eq!(wrote, [true; 3], "each command changed rows on some store");
}
