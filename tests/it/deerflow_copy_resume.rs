//! `dfck copy` of a DeerFlow database, interrupted or partial: a copy killed at any row
//! (`copy-abort-after:N`) leaves DeerFlow's shared rows and every thread — its checkpoints
//! and its DeerFlow rows together — absent or complete, and a rerun finishes it; a target that
//! got the checkpoints alone (`--checkpoints-only`) gets the DeerFlow rows on the next copy;
//! `--replace` overwrites a shared row in place on PostgreSQL, so the foreign keys'
//! `ON DELETE CASCADE` never removes the rows that reference it.

use crate::common::*;
use crate::deerflow_copy::{T_A, T_K, copy, head, json, pg_schema, rows, s, sqlite_schema, thread};
use rusqlite::Connection;
use rusqlite::types::Value;
use std::path::Path;

/// The rows of one thread in LangGraph's tables and DeerFlow's thread-scoped tables.
fn of_thread(db: &Path, thread: &str) -> Vec<(String, Vec<Vec<Value>>)> {
    let c = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut out = Vec::new();
    for (table, _) in dfck_core::deerflow::THREAD_TABLES
        .iter()
        .chain(&[("checkpoints", "thread_id"), ("writes", "thread_id")])
    {
        let rows = match c.prepare(&format!("SELECT * FROM \"{table}\" WHERE thread_id = ?1")) {
            Ok(mut st) => {
                let n = st.column_count();
                let mut v: Vec<Vec<Value>> = st
                    .query_map([thread], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                v.sort_by_key(|r| format!("{r:?}"));
                v
            }
            Err(_) => Vec::new(),
        };
        out.push(((*table).to_owned(), rows));
    }
    out
}

#[test]
fn a_killed_copy_leaves_shared_rows_and_threads_absent_or_complete() {
    let (_d, src) = temp_copy(&sqlite_fixture("deerflow_app"));
    let want = rows(&sqlite_fixture("deerflow_app"));
    let threads: Vec<String> = {
        let c = Connection::open(&src).unwrap();
        let mut st = c
            .prepare("SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM threads_meta UNION SELECT thread_id FROM runs")
            .unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert!(threads.len() > 10);
    let mut seen = (0, 0);
    // Inside the shared rows (8 of them), inside thread A's rows, later threads; groups of
    // two threads, so that a crash finds some groups committed (a group's threads go
    // together, docs/write-engine.md).
    for n in [3, 40, 110, 260] {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t.db");
        sqlite_schema(&target, &head());
        let out = dfck_command()
            .args([
                "--db",
                s(&src),
                "copy",
                "--all",
                "--apply",
                "--to",
                s(&target),
            ])
            .env(
                "DFCK_FAILPOINT",
                format!("copy-abort-after:{n},group-threads:2"),
            )
            .output()
            .unwrap();
        assert_eq!(out.status.code(), None, "killed at row {n}");
        // Every thread all or nothing: its checkpoints and DeerFlow rows together.
        let (mut absent, mut complete) = (0, 0);
        for t in &threads {
            let (got, orig) = (of_thread(&target, t), of_thread(&src, t));
            if got.iter().all(|(_, r)| r.is_empty()) {
                absent += 1;
            } else {
                assert!(
                    got == orig,
                    "after a crash at row {n}, thread {t} is half copied"
                );
                complete += 1;
            }
        }
        assert_eq!(absent + complete, threads.len());
        seen.0 += absent;
        seen.1 += complete;
        // Nothing half-written: a dry run finds nothing that differs from the source.
        let plan = json(&copy(
            s(&src),
            &["--to", s(&target), "--all", "--format", "json"],
        ));
        assert_eq!(plan["refused"], 0, "after a crash at row {n}: {plan}");
        let shared = &plan["deerflow"]["shared"]["status"];
        assert!(shared == "would" || shared == "skipped", "{plan}");
        let out = copy(s(&src), &["--to", s(&target), "--all", "--apply"]);
        assert_eq!(out.status.code(), Some(0), "rerun after {n}");
        let got = rows(&target);
        for (t, r) in &want {
            assert!(
                got[t] == *r,
                "{t}: rows after the crash at {n} and the rerun"
            );
        }
    }
    assert!(
        seen.0 > 0 && seen.1 > 0,
        "crashes left threads absent and complete: {seen:?}"
    );
}

#[test]
fn checkpoints_copied_alone_get_their_deerflow_rows_later() {
    let (_d, src) = temp_copy(&sqlite_fixture("deerflow_app"));
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.db");
    sqlite_schema(&target, &head());
    let out = copy(
        s(&src),
        &["--to", s(&target), "--all", "--apply", "--checkpoints-only"],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(rows(&target)["threads_meta"].is_empty());
    let out = copy(
        s(&src),
        &["--to", s(&target), "--all", "--apply", "--format", "json"],
    );
    let r = json(&out);
    assert_eq!(out.status.code(), Some(0), "{r}");
    let a = thread(&r, T_A);
    assert_eq!(a["status"], "done", "{a}");
    assert_eq!(a["checkpoints"], 0, "{a}");
    assert_eq!(a["deerflow_rows"]["runs"], 7, "{a}");
    assert_eq!(
        a["reason"], "checkpoints already in the target, identical",
        "{a}"
    );
    assert_eq!(
        thread(&r, T_K)["reason"],
        "no checkpoints: DeerFlow's rows only"
    );
    assert_eq!(r["checkpoints"], 0);
    let want = rows(&sqlite_fixture("deerflow_app"));
    let got = rows(&target);
    for (t, w) in &want {
        assert!(got[t] == *w, "{t}");
    }
}

#[test]
fn replace_overwrites_a_shared_row_in_place_on_postgres() {
    let Some(uri) = require_postgres("DeerFlow copy --replace on PostgreSQL") else {
        return;
    };
    let (_d, src) = temp_copy(&sqlite_fixture("deerflow_app"));
    let pg = pg_schema(&uri, "replace");
    assert_eq!(
        copy(s(&src), &["--to", &pg, "--all", "--apply"])
            .status
            .code(),
        Some(0)
    );
    let rt = pg::runtime();
    let client = pg::connect(&rt, &pg);
    let count = |sql: &str| -> i64 { rt.block_on(client.query_one(sql, &[])).unwrap().get(0) };
    rt.block_on(client.batch_execute("UPDATE channel_connections SET workspace_name = 'renamed'"))
        .unwrap();
    let (conversations, credentials) = (
        count("SELECT count(*) FROM channel_conversations"),
        count("SELECT count(*) FROM channel_credentials"),
    );
    assert!(conversations > 0 && credentials > 0);
    let out = copy(
        s(&src),
        &["--to", &pg, "--all", "--apply", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let r = json(&out);
    assert_eq!(r["deerflow"]["shared"]["status"], "refused", "{r}");
    assert_eq!(
        count("SELECT count(*) FROM channel_connections WHERE workspace_name = 'renamed'"),
        1
    );
    let out = copy(
        s(&src),
        &[
            "--to",
            &pg,
            "--all",
            "--apply",
            "--replace",
            "--format",
            "json",
        ],
    );
    let r = json(&out);
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(r["deerflow"]["shared"]["replaced"], 1, "{r}");
    assert_eq!(
        count("SELECT count(*) FROM channel_connections WHERE workspace_name = 'renamed'"),
        0
    );
    assert_eq!(
        count("SELECT count(*) FROM channel_conversations"),
        conversations
    );
    assert_eq!(
        count("SELECT count(*) FROM channel_credentials"),
        credentials
    );
    let again = json(&copy(
        s(&src),
        &["--to", &pg, "--all", "--apply", "--format", "json"],
    ));
    assert_eq!(again["copied"], 0);
    assert_eq!(again["deerflow"]["shared"]["status"], "skipped");
}
