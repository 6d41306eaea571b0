//! On PostgreSQL, a thread read on its own takes one statement when its rows fit one cursor
//! fetch (`query_short`: prepared once per write transaction, a longer thread read again
//! through the cursor), and a group thread's savepoint is opened and ended by statements
//! whose answers are checked later (`deferred`). Each report must be byte-identical to the
//! one reading every thread through cursors (`short-rows:0`), with the limit low enough
//! (`short-rows:2`) that the fixtures' threads take both paths; and a savepoint the server
//! refuses must fail its group, never pass for a commit.

use crate::common::*;
use crate::pg_batch_reads::{APPLIED, COMMANDS, databases};
use std::process::Output;

fn run(target: &str, args: &[&str], failpoint: &str) -> Output {
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

fn same(a: &Output, b: &Output, what: &str) {
    assert_eq!(
        (a.status.code(), String::from_utf8_lossy(&a.stdout)),
        (b.status.code(), String::from_utf8_lossy(&b.stdout)),
        "{what}: {}",
        String::from_utf8_lossy(&a.stderr)
    );
}

#[test]
fn short_reads_report_exactly_what_cursor_reads_report() {
    let Some(uri) = require_postgres("one-statement thread reads") else {
        return;
    };
    let mut compared = 0;
    for db in databases() {
        let target = with_db(&uri, &db);
        for command in COMMANDS.iter().chain([&["inspect"][..]].iter()) {
            // Every thread read on its own (no batches), through cursors: the reference.
            let cursors = run(&target, command, "batch-bytes:0,short-rows:0");
            if cursors.status.code() == Some(2) {
                continue;
            }
            for short in ["batch-bytes:0", "batch-bytes:0,short-rows:2"] {
                same(
                    &run(&target, command, short),
                    &cursors,
                    &format!("{db} {command:?} {short}"),
                );
            }
            compared += 1;
        }
    }
    assert!(compared >= 150, "{compared} runs compared");
}

#[test]
fn applied_groups_with_short_reads_write_what_threads_alone_write() {
    let Some(uri) = require_postgres("group transactions with short reads") else {
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
            // One transaction per thread (no savepoint), every read through a cursor.
            let alone = pg::clone_db(&uri, template, &format!("dfck_short_a{n}_{k}"));
            let expect = run(
                &alone,
                command,
                "group-threads:1,batch-bytes:0,short-rows:0",
            );
            if expect.status.code() == Some(2) {
                continue;
            }
            // Groups (deferred savepoints), each thread planned and checked by short reads.
            for (j, fp) in ["batch-bytes:0", "batch-bytes:0,short-rows:2"]
                .into_iter()
                .enumerate()
            {
                let name = format!("dfck_short_b{n}_{k}_{j}");
                let grouped = pg::clone_db(&uri, template, &name);
                same(
                    &run(&grouped, command, fp),
                    &expect,
                    &format!("{template} {command:?} {fp}"),
                );
                let after = |target: &str, name: &str| {
                    String::from_utf8_lossy(&run(target, &["verify"], "").stdout)
                        .replace(name, "DB")
                };
                assert_eq!(
                    after(&grouped, &name),
                    after(&alone, &format!("dfck_short_a{n}_{k}")),
                    "{template} {command:?} {fp}: verify after"
                );
                compared += 1;
            }
        }
    }
    assert!(compared >= 16, "{compared} runs compared");
}

#[test]
fn a_refused_savepoint_fails_its_group_and_commits_none_of_it() {
    let Some(uri) = require_postgres("a refused deferred savepoint") else {
        return;
    };
    let target = pg::clone_db(&uri, "dfck_retention", "dfck_short_savepoint");
    let prune = ["prune", "--all", "--branches"];
    let before = run(&target, &prune, "");
    let threads = serde_json::from_slice::<serde_json::Value>(&before.stdout).unwrap()["threads"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert!(threads >= 3, "{threads} threads");
    // The second thread's savepoint is refused by the server; nobody waits for its answer.
    let mut args = prune.to_vec();
    args.push("--apply");
    let out = run(&target, &args, "savepoint-fail:2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("opening the thread's savepoint"),
        "{:?}: {stderr}",
        out.status
    );
    // The group, the first thread with it, was rolled back: the plan is unchanged.
    same(&run(&target, &prune, ""), &before, "the dry run after");
}
