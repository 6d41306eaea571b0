//! On PostgreSQL, `verify` and the dry runs of `prune` and `migrate` read short threads in
//! batches, a few threads per statement (`Store::read_threads`, `Store::read_ahead`),
//! instead of a few statements per thread. Each report must be byte-identical to the one
//! reading every thread on its own (`batch-bytes:0`), on every PostgreSQL fixture database
//! and defect database, whatever the batch budget cuts (between threads or inside one);
//! and `batch-required:N` (a thread of a batch read on its own fails the run) shows that
//! the batch took every thread. Under `--apply`, the write engine's group transactions read
//! their threads ahead the same way, under the group's locks.

use crate::common::*;
use std::process::Output;

/// The commands compared, each with `--format json` (also on SQLite: sqlite_batch_reads.rs).
pub(crate) const COMMANDS: [&[&str]; 6] = [
    &["verify"],
    &["prune", "--all"],
    &["prune", "--all", "--branches"],
    &["prune", "--all", "--branches", "--keep-last-turns", "1"],
    &["migrate", "delta-to-full", "--all"],
    &["migrate", "full-to-delta", "--all"],
];

/// `dfck --db TARGET ARGS --format json` under the failpoint `failpoint`.
pub(crate) fn run(target: &str, args: &[&str], failpoint: &str) -> Output {
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

/// Every database the test server loads from a fixture dump, with the threads it has.
pub(crate) fn databases() -> Vec<String> {
    let mut out = Vec::new();
    for (dir, prefix) in [("postgres", "dfck_"), ("defects-pg", "dfck_defect_")] {
        for e in std::fs::read_dir(root().join("fixtures").join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "sql") {
                let stem = p.file_stem().unwrap().to_string_lossy().to_lowercase();
                out.push(format!("{prefix}{stem}"));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn batched_reads_report_exactly_what_per_thread_reads_report() {
    let Some(uri) = require_postgres("verify with batched thread reads") else {
        return;
    };
    let (mut compared, mut batched) = (0, 0);
    for db in databases() {
        let target = with_db(&uri, &db);
        for command in COMMANDS {
            let alone = run(&target, command, "batch-bytes:0");
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
                let out = run(&target, command, failpoint);
                assert_eq!(
                    out.status.code(),
                    alone.status.code(),
                    "{db} {command:?} {failpoint}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&alone.stdout),
                    "{db} {command:?} {failpoint}"
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
        compared >= 150 && batched >= 90,
        "{compared} runs compared, {batched} with batches"
    );
}

#[test]
fn a_thread_left_out_of_its_batch_fails_under_batch_required() {
    let Some(uri) = require_postgres("the batch-required failpoint") else {
        return;
    };
    // Budget 1 leaves every thread after the first of a batch to a read of its own.
    let target = with_db(&uri, "dfck_delta_k3");
    for command in [COMMANDS[0], COMMANDS[2]] {
        let out = run(&target, command, "batch-required:1");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("not with its batch"),
            "{command:?} {:?}: {stderr}",
            out.status
        );
    }
}

/// The write commands whose `--apply` reads each group's threads ahead, under its locks.
pub(crate) const APPLIED: [&[&str]; 3] = [
    &["prune", "--all", "--branches", "--apply"],
    &["migrate", "delta-to-full", "--all", "--apply"],
    &["migrate", "full-to-delta", "--all", "--apply"],
];

#[test]
fn applied_groups_read_their_threads_ahead_and_write_what_threads_alone_write() {
    let Some(uri) = require_postgres("group transactions reading ahead") else {
        return;
    };
    let mut compared = 0;
    for (n, template) in [
        "dfck_delta_k3",
        "dfck_retention",
        "dfck_full",
        "dfck_deerflow",
    ]
    .into_iter()
    .enumerate()
    {
        for (k, command) in APPLIED.into_iter().enumerate() {
            // One transaction per thread, reading each on its own: the reference.
            let alone = crate::common::pg::clone_db(&uri, template, &format!("dfck_grp_a{n}_{k}"));
            let expect = run(&alone, command, "group-threads:1,batch-bytes:0");
            if expect.status.code() == Some(2) {
                continue;
            }
            // Groups whose plans must all be served by the group's read-ahead.
            let grouped =
                crate::common::pg::clone_db(&uri, template, &format!("dfck_grp_b{n}_{k}"));
            let got = run(&grouped, command, "batch-required:1000000000");
            assert_eq!(
                (got.status.code(), String::from_utf8_lossy(&got.stdout)),
                (
                    expect.status.code(),
                    String::from_utf8_lossy(&expect.stdout)
                ),
                "{template} {command:?}: {}",
                String::from_utf8_lossy(&got.stderr)
            );
            // The stores agree afterwards (verify's report, the database's name aside).
            let after = |target: &str, name: &str| {
                String::from_utf8_lossy(&run(target, &["verify"], "").stdout).replace(name, "DB")
            };
            assert_eq!(
                after(&grouped, &format!("dfck_grp_b{n}_{k}")),
                after(&alone, &format!("dfck_grp_a{n}_{k}")),
                "{template} {command:?}: verify after"
            );
            compared += 1;
            // A budget of one byte holds no thread whole: each is read on its own, which
            // the failpoint turns into a failure, so the group did read ahead above.
            let starved =
                crate::common::pg::clone_db(&uri, template, &format!("dfck_grp_c{n}_{k}"));
            let out = run(&starved, command, "batch-required:1");
            let threads = serde_json::from_slice::<serde_json::Value>(&expect.stdout)
                .ok()
                .and_then(|r| r["threads"].as_array().map(Vec::len))
                .unwrap_or(0);
            if threads > 1 {
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains("not with its batch"),
                    "{template} {command:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
    assert!(compared >= 8, "{compared} runs compared");
}

/// The summary reads each row's facts in its scan (the checkpoint JSON in part, blobs by
/// their first bytes, joined by dfck; pending-write bytes per thread): it must equal the
/// summary from point reads (`scan-body-bytes:0` leaves every row to them), on every
/// fixture and defect database, with rows read both ways in one thread and full rows decided
/// at once.
#[test]
fn the_summary_from_scanned_facts_equals_the_summary_from_point_reads() {
    let Some(uri) = require_postgres("the summary from scanned facts") else {
        return;
    };
    let mut compared = 0;
    for db in databases() {
        let target = with_db(&uri, &db);
        let points = run(&target, &["inspect"], "scan-body-bytes:0");
        if points.status.code() == Some(2) {
            continue;
        }
        // Threads cut across fetches of one and three rows: each thread's totals are given
        // once, with its first row that has facts (with bodies left unread too).
        for failpoint in [
            "",
            "scan-body-bytes:700",
            "summary-wait-bytes:0",
            "summary-fetch-rows:1",
            "summary-fetch-rows:3",
            "summary-fetch-rows:1,scan-body-bytes:700",
        ] {
            let out = run(&target, &["inspect"], failpoint);
            assert_eq!(
                (out.status.code(), String::from_utf8_lossy(&out.stdout)),
                (
                    points.status.code(),
                    String::from_utf8_lossy(&points.stdout)
                ),
                "{db} {failpoint}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        compared += 1;
    }
    assert!(compared >= 25, "{compared} databases compared");
}

/// A channel version that is neither a string nor `null` has its text form given by the
/// server (`1.50` stays `1.50`, where a client's float would print `1.5`): its thread takes
/// the point reads, which match it in SQL, and the summary is the same as from point reads.
#[test]
fn a_version_that_is_not_a_string_is_matched_by_the_server() {
    let Some(uri) = require_postgres("a numeric channel version") else {
        return;
    };
    let target = crate::common::pg::clone_db(&uri, "dfck_delta_k3", "dfck_numeric_version");
    let rt = crate::common::pg::runtime();
    let c = crate::common::pg::connect(&rt, &target);
    // The head of one thread gets `messages` at the JSON number 1.50, and a blob at version
    // "1.50" (a copy of one of its `messages` blobs).
    rt.block_on(c.batch_execute(
        "CREATE TEMP TABLE head AS SELECT thread_id, checkpoint_ns, checkpoint_id \
         FROM checkpoints WHERE checkpoint_ns = '' ORDER BY thread_id, checkpoint_id DESC LIMIT 1; \
         INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
         SELECT b.thread_id, b.checkpoint_ns, b.channel, '1.50', b.type, b.blob \
         FROM checkpoint_blobs b JOIN head h USING (thread_id, checkpoint_ns) \
         WHERE b.channel = 'messages' AND b.type <> 'empty' \
         ORDER BY octet_length(b.blob) DESC LIMIT 1; \
         UPDATE checkpoints c SET checkpoint = jsonb_set(c.checkpoint, \
         '{channel_versions,messages}', '1.50'::jsonb) \
         FROM head h WHERE (c.thread_id, c.checkpoint_ns, c.checkpoint_id) = \
         (h.thread_id, h.checkpoint_ns, h.checkpoint_id)",
    ))
    .unwrap();
    let points = run(&target, &["inspect"], "scan-body-bytes:0");
    let scan = run(&target, &["inspect"], "");
    assert_eq!(points.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&scan.stdout),
        String::from_utf8_lossy(&points.stdout)
    );
}
