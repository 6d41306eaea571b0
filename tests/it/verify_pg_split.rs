//! `verify --jobs N` on PostgreSQL when there are fewer threads than connections: the spare
//! connections split one thread's scan into checkpoint-id ranges read ahead by helper
//! connections (docs/storage-format.md, "Reading a thread"). The report must be
//! byte-identical to one connection's, findings included. The fixtures are far below the
//! size where a split starts, so the `scan-chunk-rows` failpoint forces ranges of a
//! checkpoint or two.

use crate::common::*;
use serde_json::Value as Json;
use std::process::Output;

fn run(target: &str, args: &[&str], failpoint: Option<&str>) -> Output {
    let mut c = crate::common::dfck_command();
    c.arg("--db")
        .arg(target)
        .arg("verify")
        .args(["--format", "json"])
        .args(args)
        .env_remove("DFCK_DB");
    match failpoint {
        Some(f) => c.env("DFCK_FAILPOINT", f),
        None => c.env_remove("DFCK_FAILPOINT"),
    };
    c.output().expect("run dfck")
}

/// (code, count) of a report's findings, sorted.
fn code_counts(stdout: &[u8]) -> Vec<(String, usize)> {
    let report: Json = serde_json::from_slice(stdout).expect("JSON report");
    let mut counts = std::collections::BTreeMap::new();
    for f in report["findings"].as_array().expect("findings") {
        *counts
            .entry(f["code"].as_str().unwrap_or("").to_owned())
            .or_insert(0) += 1;
    }
    counts.into_iter().collect()
}

/// A database, a thread of it, and the findings (code, count) it must have.
type Case<'a> = (&'a str, &'a str, &'a [(&'a str, usize)]);

#[test]
fn a_split_thread_scan_reports_exactly_what_one_connection_reports() {
    let Some(uri) = require_postgres("verify with a split thread scan") else {
        return;
    };
    // (database, thread, findings it must have): forks whose replay picks up a sibling's
    // writes, a blob that does not decode, a literal Overwrite, a message without an id.
    let cases: [Case; 5] = [
        (
            "dfck_delta_k10",
            "t-resume-old-update",
            &[("delta.fork_contaminated", 4)],
        ),
        (
            "dfck_forks_delta_k4",
            "f-resume-update-thrice",
            &[("delta.fork_contaminated", 3)],
        ),
        (
            "dfck_defect_truncated_blob",
            "t-linear",
            &[("value.undecodable", 1)],
        ),
        (
            "dfck_defect_literal_overwrite",
            "t-deerflow-full",
            &[("value.literal_overwrite", 1)],
        ),
        (
            "dfck_defect_missing_message_id",
            "t-update",
            &[("message.missing_id", 1)],
        ),
    ];
    for (db, thread, expect) in cases {
        let target = with_db(&uri, db);
        let one = run(&target, &[thread], None);
        let expect: Vec<(String, usize)> =
            expect.iter().map(|(c, n)| (c.to_string(), *n)).collect();
        assert_eq!(code_counts(&one.stdout), expect, "{db} {thread}");
        for (jobs, rows) in [("2", "2"), ("3", "1")] {
            let split = run(
                &target,
                &[thread, "--jobs", jobs],
                Some(&format!("scan-chunk-rows:{rows}")),
            );
            assert_eq!(
                split.status.code(),
                one.status.code(),
                "{db} {thread} --jobs {jobs}: {}",
                String::from_utf8_lossy(&split.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&split.stdout),
                String::from_utf8_lossy(&one.stdout),
                "{db} {thread} --jobs {jobs}, ranges of {rows}"
            );
        }
    }
    // A whole store with more connections than threads: each thread's scan gets five.
    let target = with_db(&uri, "dfck_delta_k10");
    let one = run(&target, &[], None);
    let split = run(&target, &["--jobs", "40"], Some("scan-chunk-rows:3"));
    assert_eq!(split.status.code(), one.status.code());
    assert_eq!(
        String::from_utf8_lossy(&split.stdout),
        String::from_utf8_lossy(&one.stdout)
    );
}

#[test]
fn helper_connections_read_their_ranges_and_their_errors_surface() {
    let Some(uri) = require_postgres("verify with failing helper connections") else {
        return;
    };
    let target = with_db(&uri, "dfck_delta_k10");
    // One connection: no helper, so the helpers' failpoint changes nothing.
    let one = run(&target, &["t-fork"], Some("scan-helper-fail:2"));
    assert_eq!(
        one.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    // Two connections on one thread: the helper reads every other range, and its failure
    // is the command's, cleanly (no hang, no panic).
    let split = run(
        &target,
        &["t-fork", "--jobs", "2"],
        Some("scan-helper-fail:2"),
    );
    let stderr = String::from_utf8_lossy(&split.stderr);
    assert_ne!(split.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("injected failure"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Two threads on two connections: no connection is spare, nothing is split.
    let both = run(
        &target,
        &["t-fork", "t-linear", "--jobs", "2"],
        Some("scan-helper-fail:2"),
    );
    assert_eq!(
        both.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&both.stderr)
    );
}
