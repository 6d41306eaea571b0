//! On PostgreSQL, the threads of a write group whose work can go together (a `prune`
//! deleting checkpoints or whole threads) are written without a savepoint each: the
//! group's deletions and orphan counts take four statements for all of them, and one
//! batch read-back verifies them. Each run must report and leave exactly what one
//! transaction per thread does; a refused statement must roll the group back and work its
//! threads again one savepoint each, never commit part of it.

use crate::common::*;
use crate::pg_batch_reads::run;
use std::process::Output;

const PRUNE: [&str; 4] = ["prune", "--all", "--branches", "--apply"];

fn report(out: &Output, what: &str) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{what}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// What `verify` says of the store, its name taken out.
fn verified(target: &str, name: &str) -> String {
    String::from_utf8_lossy(&run(target, &["verify"], "").stdout).replace(name, "DB")
}

/// The reference: one transaction per thread, on a clone named `name`.
fn alone(uri: &str, template: &str, name: &str) -> (serde_json::Value, String) {
    let target = pg::clone_db(uri, template, name);
    let r = report(&run(&target, &PRUNE, "group-threads:1"), "threads alone");
    (r, verified(&target, name))
}

#[test]
fn threads_written_together_open_no_savepoint_and_prune_what_threads_alone_prune() {
    let Some(uri) = require_postgres("threads written together") else {
        return;
    };
    for (n, template) in ["dfck_retention", "dfck_delta_k3", "dfck_deerflow"]
        .into_iter()
        .enumerate()
    {
        let (expect, expect_after) = alone(&uri, template, &format!("dfck_tog_a{n}"));
        // The first savepoint the run opens is refused by the server: the group's threads
        // take none, so the run succeeds.
        let name = format!("dfck_tog_b{n}");
        let target = pg::clone_db(&uri, template, &name);
        let got = report(&run(&target, &PRUNE, "savepoint-fail:1"), template);
        assert_eq!(got, expect, "{template}");
        assert_eq!(
            verified(&target, &name),
            expect_after,
            "{template}: verify after"
        );
    }
}

#[test]
fn a_refused_together_deletion_rolls_the_group_back_and_works_it_in_savepoints() {
    let Some(uri) = require_postgres("a refused deletion of threads written together") else {
        return;
    };
    let (expect, expect_after) = alone(&uri, "dfck_retention", "dfck_tog_fa");
    let pruned = expect["pruned"].as_u64().unwrap_or(0);
    assert!(pruned >= 2, "{pruned} threads pruned");
    // The first group's deletion is refused: the same threads are worked again, each in a
    // savepoint, and the run ends as threads alone end.
    let name = "dfck_tog_fb";
    let target = pg::clone_db(&uri, "dfck_retention", name);
    let got = report(&run(&target, &PRUNE, "together-fail:1"), "together-fail:1");
    assert_eq!(got, expect);
    assert_eq!(verified(&target, name), expect_after, "verify after");
    // Refused again in savepoints, the group fails and commits nothing:
    // `pg_short_reads::a_refused_savepoint_fails_its_group_and_commits_none_of_it`.
}

#[test]
fn a_group_failing_its_verification_is_rolled_back_before_it_is_worked_again() {
    let Some(uri) = require_postgres("a group of threads written together failing verification")
    else {
        return;
    };
    let (expect, expect_after) = alone(&uri, "dfck_retention", "dfck_tog_va");
    // The first group's deletions were made, then its check failed: they are rolled back
    // before the threads are worked again in savepoints (else the second pass finds its
    // rows gone and reports other counts).
    let name = "dfck_tog_vb";
    let target = pg::clone_db(&uri, "dfck_retention", name);
    let got = report(
        &run(&target, &PRUNE, "together-unverified:1"),
        "together-unverified:1",
    );
    assert_eq!(got, expect);
    assert_eq!(verified(&target, name), expect_after, "verify after");
    // And when the second pass fails too, nothing of either pass is committed.
    let target = pg::clone_db(&uri, "dfck_retention", "dfck_tog_vc");
    let dry = ["prune", "--all", "--branches"];
    let before = run(&target, &dry, "");
    let out = run(&target, &PRUNE, "together-unverified:1,savepoint-fail:2");
    assert!(!out.status.success(), "{:?}", out.status);
    assert_eq!(
        String::from_utf8_lossy(&run(&target, &dry, "").stdout),
        String::from_utf8_lossy(&before.stdout),
        "the dry run after"
    );
}

/// The group counts each thread's orphans before its deletions run and after, as a thread
/// alone does: the rows a branch deletion leaves unnamed are not among those before.
#[test]
fn threads_written_together_count_their_orphans_as_threads_alone_do() {
    let Some(uri) = require_postgres("orphans of threads written together") else {
        return;
    };
    let orphans = "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, \
         task_id, idx, channel, type, blob) VALUES ('r-branch-delta', '', 'no-such-checkpoint', \
         't', 0, 'x', 'msgpack', '\\x90'::bytea); \
         INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
         VALUES ('r-branch-delta', '', 'x', '99.0', 'msgpack', '\\x90'::bytea)";
    let rt = pg::runtime();
    let mut reports = Vec::new();
    for (name, failpoint) in [("dfck_tog_oa", "group-threads:1"), ("dfck_tog_ob", "")] {
        let target = pg::clone_db(&uri, "dfck_retention", name);
        rt.block_on(pg::connect(&rt, &target).batch_execute(orphans))
            .unwrap();
        reports.push(report(&run(&target, &PRUNE, failpoint), failpoint));
    }
    let thread = |r: &serde_json::Value| {
        r["threads"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["thread_id"] == "r-branch-delta"))
            .cloned()
            .unwrap_or_default()
    };
    let t = thread(&reports[1]);
    assert!(t["blobs"].as_u64().unwrap_or(0) > 1, "{t}");
    assert_eq!(
        (
            t["status"].as_str(),
            t["orphans_before"].as_u64(),
            t["orphans_after"].as_u64()
        ),
        (Some("done"), Some(2), Some(0)),
        "{t}"
    );
    assert_eq!(reports[1], reports[0]);
}
