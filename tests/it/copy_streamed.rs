//! A thread past the write engine's in-memory budget is copied between stores of one backend
//! row by row (`whole-bytes:0` forces that on every thread) and verified by its stored rows:
//! the same report and the same target rows as a copy that holds each thread whole, and a
//! rerun finds every thread already there, identical.

use crate::common::pg::{clone_db, connect, runtime};
use crate::common::store_rows::{pg_rows, sqlite_rows};
use crate::common::*;
use rusqlite::Connection;
use serde_json::Value as Json;

/// Runs `copy --to TARGET ARGS --format json` from `source`, streamed when `streamed`; the
/// report without its `target`.
fn copy(source: &str, target: &str, args: &[&str], streamed: bool) -> (Json, i32) {
    copy_within(source, target, args, streamed.then_some(0))
}

/// The same, namespaces over `budget` stored bytes streamed (`None`: the default budget).
fn copy_within(source: &str, target: &str, args: &[&str], budget: Option<u64>) -> (Json, i32) {
    let mut cmd = dfck_command();
    if let Some(b) = budget {
        cmd.env("DFCK_FAILPOINT", format!("whole-bytes:{b}"));
    }
    let out = cmd
        .args(["--db", source, "copy", "--to", target])
        .args(args)
        .args(["--format", "json"])
        .output()
        .expect("run dfck");
    let mut j: Json = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
    if let Some(m) = j.as_object_mut() {
        m.remove("target");
    }
    (j, out.status.code().unwrap_or(-1))
}

/// Checkpoints a report says were copied.
fn copied(report: &Json) -> u64 {
    report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .filter(|t| t["status"] == "done")
        .filter_map(|t| t["checkpoints"].as_u64())
        .sum()
}

/// Every thread of `report` skipped as already in the target.
fn all_identical(report: &Json) -> bool {
    report["threads"].as_array().is_some_and(|ts| {
        ts.iter()
            .all(|t| t["reason"] == "already in the target, identical")
    })
}

#[test]
fn sqlite_copy_of_a_thread_streamed_row_by_row_equals_one_held_whole() {
    let mut total = 0;
    for stem in [
        "retention",
        "full",
        "forks_full",
        "delta_k3",
        "mixed",
        "subgraph",
        "exit",
        "encrypted",
        "pickle",
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let source = sqlite_fixture(stem);
        let source = source.to_string_lossy();
        let a = dir.path().join("held.db").to_string_lossy().into_owned();
        let b = dir
            .path()
            .join("streamed.db")
            .to_string_lossy()
            .into_owned();
        let args = ["--all", "--checkpoints-only", "--apply"];
        let (held, code_a) = copy(&source, &a, &args, false);
        let (streamed, code_b) = copy(&source, &b, &args, true);
        assert_eq!((code_a, &held), (code_b, &streamed), "{stem}");
        assert_eq!(code_a, 0, "{stem}: {held}");
        assert_eq!(sqlite_rows(&a), sqlite_rows(&b), "{stem}: rows differ");
        assert_eq!(
            sqlite_rows(&a),
            sqlite_rows(&source),
            "{stem}: not as stored"
        );
        total += copied(&held);
        // A rerun compares the stored rows first: every thread is already there.
        let (again, code) = copy(&source, &b, &args, true);
        assert_eq!(code, 0, "{stem}: {again}");
        assert!(all_identical(&again), "{stem}: {again}");
        // A budget some namespaces pass and others do not: a thread partly streamed.
        let c = dir.path().join("mixed.db").to_string_lossy().into_owned();
        let (mixed, code_c) = copy_within(&source, &c, &args, Some(5000));
        assert_eq!((code_a, &held), (code_c, &mixed), "{stem} partly streamed");
        assert_eq!(
            sqlite_rows(&a),
            sqlite_rows(&c),
            "{stem}: partly streamed rows"
        );
    }
    println!("{total} checkpoints copied alike, streamed or held whole");
    assert!(total > 200, "{total}");
}

#[test]
fn a_streamed_copy_onto_a_different_thread_is_refused_or_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = sqlite_fixture("retention").to_string_lossy().into_owned();
    let target = dir.path().join("t.db").to_string_lossy().into_owned();
    let args = ["--all", "--checkpoints-only", "--apply"];
    assert_eq!(copy(&source, &target, &args, true).1, 0);
    let c = Connection::open(&target).expect("open");
    let changed = c
        .execute(
            "UPDATE checkpoints SET metadata = CAST('{\"source\": \"loop\", \"step\": 99}' AS BLOB) \
             WHERE rowid = (SELECT min(rowid) FROM checkpoints)",
            [],
        )
        .expect("change a row");
    assert_eq!(changed, 1);
    drop(c);
    let (refused, code) = copy(&source, &target, &args, true);
    assert_eq!(code, 1, "{refused}");
    let why = refused["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .find(|t| t["status"] == "refused")
        .expect("one refused");
    assert!(
        why["reason"]
            .as_str()
            .unwrap_or("")
            .contains("pass --replace"),
        "{why}"
    );
    let replace = ["--all", "--checkpoints-only", "--apply", "--replace"];
    let (replaced, code) = copy(&source, &target, &replace, true);
    assert_eq!(code, 0, "{replaced}");
    assert_eq!(sqlite_rows(&target), sqlite_rows(&source));
}

#[test]
fn postgres_copy_of_a_thread_streamed_row_by_row_equals_one_held_whole() {
    let Some(server) = require_postgres("streamed copy on PostgreSQL") else {
        return;
    };
    let fresh = |name: &str| clone_db(&server, "template0", name);
    let names = ["dfck_streamed_held", "dfck_streamed_rows"];
    for stem in ["delta_k3", "full", "mixed", "subgraph"] {
        let source = with_db(&server, &format!("dfck_{stem}"));
        let (a, b) = (fresh(names[0]), fresh(names[1]));
        let args = ["--all", "--checkpoints-only", "--apply"];
        let (held, code_a) = copy(&source, &a, &args, false);
        let (streamed, code_b) = copy(&source, &b, &args, true);
        assert_eq!((code_a, &held), (code_b, &streamed), "{stem}");
        assert_eq!(code_a, 0, "{stem}: {held}");
        assert!(copied(&held) > 0, "{stem}: {held}");
        assert_eq!(pg_rows(&a), pg_rows(&b), "{stem}: rows differ");
        let (again, code) = copy(&source, &b, &args, true);
        assert_eq!(code, 0, "{stem}: {again}");
        assert!(all_identical(&again), "{stem}: {again}");
    }
    let rt = runtime();
    let admin = connect(&rt, &server);
    for name in names {
        let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        let _ = rt.block_on(admin.batch_execute(&sql));
    }
}
