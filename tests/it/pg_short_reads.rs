//! On PostgreSQL, a thread read on its own takes one statement when its rows fit one cursor
//! fetch (`query_short`: prepared once per write transaction, a longer thread read again
//! through the cursor), and a group thread's savepoint is opened and ended by statements
//! whose answers are checked later (`deferred`). Each report must be byte-identical to the
//! one reading every thread through cursors (`short-rows:0`), with the limit low enough
//! (`short-rows:2`) that the fixtures' threads take both paths; and a savepoint the server
//! refuses must fail its group, never pass for a commit. Queries sent ahead are tracked
//! only while they run.

use crate::common::*;
use crate::pg_batch_reads::{APPLIED, COMMANDS, databases, run};
use std::process::Output;

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
            // `later-most:2`: the queries sent ahead of threads read on their own are not
            // kept once answered (a kept list would grow with the threads and fail it).
            for short in [
                "batch-bytes:0",
                "batch-bytes:0,short-rows:2",
                "batch-bytes:0,later-most:2",
            ] {
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
    // The threads written together are refused (`together-fail:1`), so the group is worked
    // again one savepoint per thread, and the second thread's savepoint is refused by the
    // server; nobody waits for its answer.
    let mut args = prune.to_vec();
    args.push("--apply");
    let out = run(&target, &args, "together-fail:1,savepoint-fail:2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("opening the thread's savepoint"),
        "{:?}: {stderr}",
        out.status
    );
    // The group, the first thread with it, was rolled back: the plan is unchanged.
    same(&run(&target, &prune, ""), &before, "the dry run after");
}

/// A thread's orphans are counted before its deletions run, though the count is read after
/// them (`count_orphans_later`): the rows its branch deletion leaves unnamed are not among
/// them, and none is left after.
#[test]
fn orphans_are_counted_before_the_deletions_that_make_more() {
    let Some(uri) = require_postgres("orphans counted before the deletions") else {
        return;
    };
    let target = pg::clone_db(&uri, "dfck_retention", "dfck_short_orphans");
    let rt = pg::runtime();
    let client = pg::connect(&rt, &target);
    let count = |sql: &str| -> i64 { rt.block_on(client.query_one(sql, &[])).unwrap().get(0) };
    // One write on no checkpoint and one blob at a version no checkpoint names.
    rt.block_on(client.batch_execute(
        "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, \
         channel, type, blob) VALUES ('r-branch-delta', '', 'no-such-checkpoint', 't', 0, \
         'x', 'msgpack', '\\x90'::bytea); \
         INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
         VALUES ('r-branch-delta', '', 'x', '99.0', 'msgpack', '\\x90'::bytea)",
    ))
    .unwrap();
    let orphan_blobs = "SELECT count(*) FROM checkpoint_blobs b WHERE NOT EXISTS (SELECT 1 \
         FROM checkpoints c WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = \
         b.checkpoint_ns AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)";
    assert_eq!(count(orphan_blobs), 1);
    let out = run(
        &target,
        &["prune", "r-branch-delta", "--branches", "--apply"],
        "",
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    let t = &report["threads"][0];
    // The branch's own blobs go too (orphaned by its deletion), but were not orphans before.
    assert!(t["blobs"].as_u64().unwrap() > 1, "{t}");
    assert_eq!(
        (
            t["status"].as_str(),
            t["orphans_before"].as_u64(),
            t["orphans_after"].as_u64()
        ),
        (Some("done"), Some(2), Some(0)),
        "{t}"
    );
    assert_eq!(count(orphan_blobs), 0);
}
