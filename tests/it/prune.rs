//! `dfck prune` on the retention fixture (written by the real LangGraph, with DeerFlow's
//! duration-only checkpoints; see fixtures/README.md), SQLite and PostgreSQL: the deletion
//! shapes, the protected set, whole-thread deletion, and that every kept checkpoint shows
//! exactly the state it showed. The real library's own reading of pruned stores is
//! `scripts/check_pruned.py`; the crash matrix is in tests/write_crash.rs.

use crate::common::pg::{connect, runtime};
use crate::common::*;
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// Every checkpoint of every thread → its `inspect --state` JSON.
fn all_states(target: &str) -> BTreeMap<(String, String), Json> {
    let summary = dfck_json(target, &["inspect", "--format", "json"]);
    let mut out = BTreeMap::new();
    for t in summary["threads"].as_array().unwrap() {
        let tid = t["thread_id"].as_str().unwrap();
        let listing = dfck_json(target, &["inspect", tid, "--format", "json"]);
        for c in listing["checkpoints"].as_array().unwrap() {
            let id = c["checkpoint_id"].as_str().unwrap();
            let state = dfck_json(
                target,
                &[
                    "inspect",
                    tid,
                    "--state",
                    "--checkpoint",
                    id,
                    "--format",
                    "json",
                ],
            );
            out.insert((tid.to_owned(), id.to_owned()), state["values"].clone());
        }
    }
    out
}

fn prune(target: &str, args: &[&str]) -> (Json, i32) {
    let mut all = vec!["prune"];
    all.extend_from_slice(args);
    all.extend(["--format", "json"]);
    let out = dfck(target, &all);
    let code = out.status.code().unwrap_or(-1);
    (
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "prune {args:?}: no JSON: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        }),
        code,
    )
}

fn thread<'a>(report: &'a Json, tid: &str) -> &'a Json {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == tid)
        .unwrap_or_else(|| panic!("{tid} in {report}"))
}

/// The shapes on one store: E1 alone, then E1 + E2; kept states never change, pending
/// writes and the resume lineage stay, a rerun deletes nothing.
fn shapes(target: &str) -> Json {
    let before = all_states(target);
    let (dry, code) = prune(target, &["--all"]);
    assert_eq!(code, 0, "{dry}");
    assert_eq!(dry["dry_run"], true);
    for mode in ["full", "delta"] {
        // E1: each thread's last run left one trailing duration-only checkpoint (r-branch
        // two: one per line).
        let want = |t: &str| if t == "r-branch" { 2 } else { 1 };
        for t in ["r-linear", "r-branch", "r-interrupt", "r-cut"] {
            let p = thread(&dry, &format!("{t}-{mode}"));
            assert_eq!(p["status"], "would", "{p}");
            assert_eq!(p["duration_leaves"], want(t), "{p}");
            assert_eq!(p["branch_checkpoints"], 0, "{p}");
        }
    }
    assert_eq!(before, all_states(target), "a dry run changed a state");

    let (done, code) = prune(target, &["--all", "--branches", "--apply"]);
    assert_eq!(code, 0, "{done}");
    for mode in ["full", "delta"] {
        let p = thread(&done, &format!("r-branch-{mode}"));
        assert_eq!(p["status"], "done", "{p}");
        // The superseded turn-2 line: its input, loop and final checkpoints.
        assert_eq!(p["branch_checkpoints"], 3, "{p}");
        assert_eq!(p["checkpoints"], 5, "{p}");
        assert_eq!(p["orphans_after"], 0, "{p}");
        // The interrupted branch owns pending writes: only the trailing leaf goes.
        let p = thread(&done, &format!("r-interrupt-{mode}"));
        assert_eq!(
            (p["checkpoints"].as_u64(), p["branch_checkpoints"].as_u64()),
            (Some(1), Some(0)),
            "{p}"
        );
    }
    let after = all_states(target);
    assert_eq!(
        before.len() - after.len(),
        done["checkpoints"].as_u64().unwrap() as usize
    );
    for (k, v) in &after {
        assert_eq!(Some(v), before.get(k), "state of {k:?} changed");
    }
    let verify = dfck(target, &["verify"]);
    assert_eq!(verify.status.code(), Some(0), "verify after prune");
    let (again, code) = prune(target, &["--all", "--branches", "--apply"]);
    assert_eq!(code, 0);
    assert_eq!(again["pruned"], 0, "a rerun deleted more: {again}");
    assert_eq!(again["skipped"], 8, "{again}");
    done
}

#[test]
fn sqlite_shapes_keep_every_kept_state() {
    let (_dir, db) = temp_copy(&sqlite_fixture("retention"));
    shapes(&db.to_string_lossy());
}

/// An explicit resume target (`--protect`) on the superseded line keeps that line whole.
fn protect(target: &str) {
    let target = target.to_owned();
    let tree = dfck_json(
        &target,
        &["lineage", "r-branch-delta", "--tree", "--format", "json"],
    );
    // The old line's last answer: of the two loop checkpoints followed by a trailing
    // duration-only leaf (one per line), the older.
    let entries = tree["checkpoints"].as_array().unwrap();
    let by_id = |id: &Json| entries.iter().find(|e| e["checkpoint_id"] == *id).unwrap();
    let old = entries
        .iter()
        .filter(|e| e["source"] == "loop")
        .filter(|e| {
            e["children"].as_array().unwrap().iter().any(|k| {
                let k = by_id(k);
                k["duration_only"] == true && k["children"].as_array().unwrap().is_empty()
            })
        })
        .map(|e| e["checkpoint_id"].as_str().unwrap().to_owned())
        .min()
        .unwrap();
    // A prefix of the id names it as well as the whole id.
    let (report, code) = prune(
        &target,
        &["r-branch-delta", "--branches", "--protect", &old[..24]],
    );
    assert_eq!(code, 0, "{report}");
    let p = thread(&report, "r-branch-delta");
    // Only the two duration-only leaves go; the protected line stays whole.
    assert_eq!(p["checkpoints"], 2, "{p}");
    assert_eq!(p["branch_checkpoints"], 0, "{p}");
}

#[test]
fn sqlite_protect_keeps_an_explicit_resume_target_and_its_ancestors() {
    let (_dir, db) = temp_copy(&sqlite_fixture("retention"));
    protect(&db.to_string_lossy());
}

#[test]
fn postgres_protect_keeps_an_explicit_resume_target_and_its_ancestors() {
    let Some(server) = require_postgres("postgres prune --protect") else {
        return;
    };
    protect(&fresh_pg(&server, "dfck_prune_protect"));
}

/// DeerFlow's growth baseline: each run adds its checkpoints and one duration-only
/// checkpoint, so a thread grows by turns; the default prune takes only the trailing
/// duration-only leaf, and nothing on a second run.
fn growth_baseline(target: &str) {
    for mode in ["full", "delta"] {
        let tid = format!("r-cut-{mode}");
        let listing = dfck_json(target, &["inspect", &tid, "--format", "json"]);
        let cks = listing["checkpoints"].as_array().unwrap();
        let durations = cks.iter().filter(|c| c["source"] == "update").count();
        assert_eq!(durations, 5, "one duration-only checkpoint per run");
        let (r, code) = prune(target, &[&tid, "--apply"]);
        assert_eq!(code, 0, "{r}");
        let p = thread(&r, &tid);
        assert_eq!(
            (p["checkpoints"].as_u64(), p["duration_leaves"].as_u64()),
            (Some(1), Some(1)),
            "{p}"
        );
        assert_eq!(p["kept"].as_u64(), Some(cks.len() as u64 - 1), "{p}");
        let (r, _) = prune(target, &[&tid, "--apply"]);
        assert_eq!(thread(&r, &tid)["status"], "skipped", "{r}");
    }
}

#[test]
fn sqlite_growth_baseline() {
    let (_dir, db) = temp_copy(&sqlite_fixture("retention"));
    growth_baseline(&db.to_string_lossy());
}

#[test]
fn postgres_growth_baseline() {
    let Some(server) = require_postgres("postgres prune growth baseline") else {
        return;
    };
    growth_baseline(&fresh_pg(&server, "dfck_prune_growth"));
}

#[test]
fn whole_threads_by_age_and_protection_refuses() {
    let (_dir, db) = temp_copy(&sqlite_fixture("retention"));
    let target = db.to_string_lossy().into_owned();
    // Nothing is a century old.
    let (r, code) = prune(&target, &["--all", "--older-than", "36500d"]);
    assert_eq!(code, 0);
    assert!(
        r["threads"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["whole_thread"] == false)
    );
    // Every fixture thread has been idle for more than a second.
    let listing = dfck_json(&target, &["inspect", "r-cut-full", "--format", "json"]);
    let some_id = listing["checkpoints"][0]["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (r, code) = prune(
        &target,
        &["--all", "--idle", "1s", "--protect", &some_id, "--apply"],
    );
    assert_eq!(code, 1, "a protected thread is refused: {r}");
    let p = thread(&r, "r-cut-full");
    assert_eq!(p["status"], "refused");
    assert!(p["reason"].as_str().unwrap().contains(&some_id), "{p}");
    assert_eq!(r["pruned"], 7, "{r}");
    let summary = dfck_json(&target, &["inspect", "--format", "json"]);
    let left: Vec<&str> = summary["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert_eq!(left, vec!["r-cut-full"]);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let writes: i64 = conn
        .query_row(
            "SELECT count(*) FROM writes WHERE thread_id <> 'r-cut-full'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(writes, 0, "writes of deleted threads are left");
}

#[test]
fn bad_durations_are_usage_errors() {
    let db = sqlite_fixture("retention");
    let out = dfck(&db.to_string_lossy(), &["prune", "--all", "--idle", "3y"]);
    assert_clean_failure(&out, "--idle");
    let out = dfck(&db.to_string_lossy(), &["prune"]);
    assert_clean_failure(&out, "--all");
}

/// A private copy of the retention database.
fn fresh_pg(server: &str, name: &str) -> String {
    let rt = runtime();
    let admin = connect(&rt, server);
    for sql in [
        format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        format!("CREATE DATABASE \"{name}\" TEMPLATE \"dfck_retention\""),
    ] {
        rt.block_on(admin.batch_execute(&sql)).unwrap();
    }
    with_db(server, name)
}

fn pg_count(uri: &str, sql: &str) -> i64 {
    let rt = runtime();
    let client = connect(&rt, uri);
    rt.block_on(client.query_one(sql, &[])).unwrap().get(0)
}

#[test]
fn postgres_shapes_keep_shared_blobs_and_leave_no_orphans() {
    let Some(server) = require_postgres("postgres prune") else {
        return;
    };
    let uri = fresh_pg(&server, "dfck_prune_shapes");
    let blobs_before = pg_count(&uri, "SELECT count(*) FROM checkpoint_blobs");
    let done = shapes(&uri);
    // A duration-only checkpoint shares its parent's blobs (same channel versions):
    // deleting it must delete no blob.
    for t in [
        "r-linear-full",
        "r-cut-full",
        "r-linear-delta",
        "r-cut-delta",
    ] {
        let p = thread(&done, t);
        assert_eq!(
            (p["checkpoints"].as_u64(), p["blobs"].as_u64()),
            (Some(1), Some(0)),
            "{p}"
        );
    }
    let blobs_deleted: u64 = done["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["blobs"].as_u64().unwrap())
        .sum();
    assert!(blobs_deleted > 0, "the branches' own blobs go");
    assert_eq!(
        pg_count(&uri, "SELECT count(*) FROM checkpoint_blobs"),
        blobs_before - blobs_deleted as i64
    );
    let orphans = pg_count(
        &uri,
        "SELECT count(*) FROM checkpoint_blobs b WHERE NOT EXISTS (SELECT 1 FROM checkpoints c \
         WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns \
         AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)",
    );
    assert_eq!(orphans, 0);
}

/// `--keep-last-turns` on one store: refusals where the cut would take a branch's or a
/// pending write's ancestors, and a trimmed delta thread whose new root stores a snapshot.
fn keep_last_turns(target: &str) {
    let before = all_states(target);
    // Applied: the refused threads are left exactly as they were.
    let refusing = [
        "r-branch-full",
        "r-branch-delta",
        "r-interrupt-full",
        "r-interrupt-delta",
    ];
    let mut args = refusing.to_vec();
    args.extend(["--keep-last-turns", "1", "--apply"]);
    let (r, code) = prune(target, &args);
    assert_eq!(code, 1, "{r}");
    assert_eq!(r["refused"], 4, "{r}");
    for mode in ["full", "delta"] {
        let p = thread(&r, &format!("r-branch-{mode}"));
        assert_eq!(p["status"], "refused", "{p}");
        assert!(p["reason"].as_str().unwrap().contains("--branches"), "{p}");
        let p = thread(&r, &format!("r-interrupt-{mode}"));
        assert_eq!(p["status"], "refused", "{p}");
        assert!(
            p["reason"]
                .as_str()
                .unwrap()
                .contains("owns pending writes"),
            "{p}"
        );
    }
    assert_eq!(before, all_states(target), "a refused thread changed");
    let (r, code) = prune(
        target,
        &["r-cut-delta", "--keep-last-turns", "2", "--apply"],
    );
    assert_eq!(code, 0, "{r}");
    let p = thread(&r, "r-cut-delta");
    assert_eq!(p["turns_cut"], 3, "{p}");
    let root = p["oldest_kept"].as_str().unwrap().to_owned();
    let listing = dfck_json(target, &["inspect", "r-cut-delta", "--format", "json"]);
    let cks = listing["checkpoints"].as_array().unwrap();
    assert_eq!(cks.len() as u64, p["kept"].as_u64().unwrap());
    let r0 = cks
        .iter()
        .find(|c| c["checkpoint_id"] == root.as_str())
        .unwrap();
    assert!(r0["parent_checkpoint_id"].is_null(), "{r0}");
    assert_eq!(r0["messages_encoding"], "snapshot", "{r0}");
    let after = all_states(target);
    for (k, v) in &after {
        assert_eq!(Some(v), before.get(k), "state of {k:?} changed");
    }
    assert_eq!(dfck(target, &["verify"]).status.code(), Some(0));
}

#[test]
fn sqlite_keep_last_turns() {
    let (_dir, db) = temp_copy(&sqlite_fixture("retention"));
    keep_last_turns(&db.to_string_lossy());
}

#[test]
fn postgres_keep_last_turns() {
    let Some(server) = require_postgres("postgres prune --keep-last-turns") else {
        return;
    };
    keep_last_turns(&fresh_pg(&server, "dfck_prune_turns"));
}

#[test]
fn postgres_whole_threads_by_age_from_timestamps_alone() {
    let Some(server) = require_postgres("postgres prune --idle") else {
        return;
    };
    let uri = fresh_pg(&server, "dfck_prune_idle");
    let listing = dfck_json(&uri, &["inspect", "r-cut-full", "--format", "json"]);
    let some_id = listing["checkpoints"][0]["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (r, code) = prune(
        &uri,
        &["--all", "--idle", "1s", "--protect", &some_id, "--apply"],
    );
    assert_eq!(code, 1, "{r}");
    assert_eq!(thread(&r, "r-cut-full")["status"], "refused");
    assert_eq!(r["pruned"], 7, "{r}");
    let p = thread(&r, "r-linear-full");
    assert_eq!(p["whole_thread"], true, "{p}");
    assert!(p["blobs"].as_u64().unwrap() > 0, "{p}");
    for table in ["checkpoints", "checkpoint_writes", "checkpoint_blobs"] {
        let left = pg_count(
            &uri,
            &format!("SELECT count(*) FROM {table} WHERE thread_id <> 'r-cut-full'"),
        );
        assert_eq!(left, 0, "{table} rows of deleted threads are left");
    }
    assert!(pg_count(&uri, "SELECT count(*) FROM checkpoints") > 0);
}
