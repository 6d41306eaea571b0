//! Live stores: a real LangGraph writer (scripts/live_writer.py, a fresh connection per turn, as
//! a DeerFlow gateway does) appends turns while dfck reads the store, converts other threads,
//! prunes every thread, the writer's too, and deletes a DeerFlow user's threads.
//! Every read must succeed and see a consistent prefix of what the writer wrote; the writer's
//! turns all survive dfck's writes.

use crate::common::{dfck, require_postgres, require_python, sqlite_fixture, temp_copy, with_db};
use serde_json::Value as Json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn start_writer(python: &Path, store_args: &[&str], seconds: u32) -> Child {
    Command::new(python)
        .arg(crate::common::root().join("scripts/live_writer.py"))
        .args(store_args)
        .args([
            "--threads",
            "t-live-0,t-live-1",
            "--seconds",
            &seconds.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the live writer")
}

/// What the writer reports when it ends: messages per thread.
fn finish_writer(child: Child) -> Json {
    let out = child.wait_with_output().expect("writer");
    assert!(
        out.status.success(),
        "live writer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("writer JSON")
}

/// The message ids the writer's thread holds after `n` messages.
fn expected_ids(thread: &str, n: usize) -> Vec<String> {
    (0..n / 2)
        .flat_map(|i| [format!("h-{thread}-{i}"), format!("ai-{thread}-{i}")])
        .collect()
}

fn message_ids(state: &Json) -> Vec<String> {
    state["values"]["messages"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| m["id"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the live store over and over while the writer runs; converts `convert` once midway,
/// and with `prune` then prunes every thread's branches once, the writer's threads too.
/// Returns (reads, states checked).
fn read_while_writing(
    target: &str,
    writer: &mut Child,
    convert: &[&str],
    prune: bool,
) -> (usize, usize) {
    let start = Instant::now();
    let (mut reads, mut states, mut converted, mut pruned) = (0, 0, false, !prune);
    while writer.try_wait().expect("writer status").is_none() {
        assert!(start.elapsed() < Duration::from_secs(120), "writer hangs");
        let o = dfck(target, &["inspect", "--format", "json"]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(0),
            "inspect beside a live writer: {e}"
        );
        let summary: Json = serde_json::from_slice(&o.stdout).expect("inspect JSON");
        reads += 1;
        let live: Vec<String> = summary["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["thread_id"].as_str())
            .filter(|t| t.starts_with("t-live-"))
            .map(str::to_owned)
            .collect();
        for t in &live {
            let o = dfck(target, &["inspect", t, "--state", "--format", "json"]);
            let e = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                o.status.code(),
                Some(0),
                "state of {t} beside a live writer: {e}"
            );
            let state: Json = serde_json::from_slice(&o.stdout).expect("state JSON");
            let ids = message_ids(&state);
            assert_eq!(
                ids,
                expected_ids(t, ids.len()),
                "{t}: a torn or foreign list"
            );
            states += 1;
        }
        let o = dfck(target, &["verify", "--format", "json"]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(2), "verify beside a live writer: {e}");
        reads += 1;
        // A dry run reads its batches while its second thread plans them.
        let o = dfck(
            target,
            &["prune", "--all", "--branches", "--format", "json"],
        );
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(0),
            "prune dry run beside a live writer: {e}"
        );
        let j: Json = serde_json::from_slice(&o.stdout).expect("prune dry-run JSON");
        let planned: Vec<&str> = j["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["thread_id"].as_str())
            .collect();
        assert!(
            j["dry_run"] == true && live.iter().all(|t| planned.contains(&t.as_str())),
            "{j}"
        );
        if !converted && reads > 6 {
            let mut args = vec!["migrate", "delta-to-full", "--apply", "--format", "json"];
            args.extend_from_slice(convert);
            let o = dfck(target, &args);
            let e = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                o.status.code(),
                Some(0),
                "migrate beside a live writer: {e}"
            );
            let j: Json = serde_json::from_slice(&o.stdout).expect("migrate JSON");
            assert_eq!(j["converted"], convert.len(), "{j}");
            converted = true;
        } else if converted && !pruned && reads > 10 {
            let o = dfck(
                target,
                &[
                    "prune",
                    "--all",
                    "--branches",
                    "--apply",
                    "--format",
                    "json",
                ],
            );
            let e = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "prune beside a live writer: {e}");
            let j: Json = serde_json::from_slice(&o.stdout).expect("prune JSON");
            // The fixture's branched threads (t-exit, t-fork, t-interrupt, t-resume-old-update).
            assert_eq!(
                (j["pruned"].as_u64(), j["refused"].as_u64()),
                (Some(4), Some(0)),
                "{j}"
            );
            pruned = true;
        }
    }
    assert!(converted, "the writer ended before the conversion ran");
    assert!(pruned, "the writer ended before the prune ran");
    (reads, states)
}

/// After the writer: every thread it wrote holds exactly its messages, and the converted
/// threads verify clean.
fn check_after(target: &str, report: &Json) {
    for (t, n) in report["threads"].as_object().expect("threads") {
        let n = n.as_u64().unwrap() as usize;
        let state: Json =
            crate::common::dfck_json(target, &["inspect", t, "--state", "--format", "json"]);
        assert_eq!(message_ids(&state), expected_ids(t, n), "{t} after the run");
    }
    let o = dfck(target, &["verify", "--format", "json"]);
    let j: Json = serde_json::from_slice(&o.stdout).expect("verify JSON");
    let errors: Vec<&Json> = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        // The fixture's one thread that the real library contaminates (tests/twins.rs).
        .filter(|f| f["thread_id"] != "t-resume-old-update")
        .collect();
    assert!(errors.is_empty(), "errors after the live run: {errors:?}");
}

#[test]
fn sqlite_reads_and_migrate_beside_a_live_langgraph_writer() {
    let Some(python) = require_python("live SQLite writer test") else {
        return;
    };
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let target = db.to_str().unwrap().to_owned();
    let mut writer = start_writer(&python, &["--db", &target], 12);
    let (reads, states) = read_while_writing(&target, &mut writer, &["t-linear", "t-fork"], true);
    let report = finish_writer(writer);
    check_after(&target, &report);
    eprintln!(
        "live sqlite: {reads} reads and {states} states beside {} writer turns, 0 errors",
        report["turns"]
    );
}

#[test]
fn postgres_reads_and_migrate_beside_a_live_langgraph_writer() {
    let Some(python) = require_python("live Postgres writer test") else {
        return;
    };
    let Some(server) = require_postgres("live Postgres writer test") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let name = "dfck_live_writer";
    rt.block_on(async {
        let (admin, conn) = tokio_postgres::connect(&server, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
            .await
            .unwrap();
        admin
            .batch_execute(&format!(
                "CREATE DATABASE \"{name}\" TEMPLATE \"dfck_delta_k3\""
            ))
            .await
            .unwrap();
    });
    let target = with_db(&server, name);
    let mut writer = start_writer(&python, &["--pg-url", &target], 15);
    let (reads, states) = read_while_writing(&target, &mut writer, &["t-linear", "t-fork"], true);
    let report = finish_writer(writer);
    check_after(&target, &report);
    eprintln!(
        "live postgres: {reads} reads and {states} states beside {} writer turns, 0 errors",
        report["turns"]
    );
}

/// `delete --apply` beside a live writer, on DeerFlow's database: one user's threads go the
/// way DeerFlow deletes them (the threads with work in flight refused), midway through the
/// writer's turns; the writer's threads keep every turn, and the store verifies clean.
#[test]
fn sqlite_delete_beside_a_live_langgraph_writer() {
    let Some(python) = require_python("live SQLite writer delete test") else {
        return;
    };
    let (_dir, db) = temp_copy(&sqlite_fixture("deerflow_app"));
    let target = db.to_str().unwrap().to_owned();
    let user = "a0000000-0000-4000-8000-000000000002";
    let deleted = [
        "df0a0000-0000-4000-8000-000000000001",
        "df0a0000-0000-4000-8000-000000000002",
        "df0a0000-0000-4000-8000-000000000009",
    ];
    let mut writer = start_writer(&python, &["--db", &target], 8);
    let start = Instant::now();
    let (mut reads, mut done) = (0, false);
    while writer.try_wait().expect("writer status").is_none() {
        assert!(start.elapsed() < Duration::from_secs(120), "writer hangs");
        let summary = crate::common::dfck_json(&target, &["inspect", "--format", "json"]);
        reads += 1;
        let threads: Vec<&str> = summary["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["thread_id"].as_str())
            .collect();
        if done {
            assert!(
                deleted.iter().all(|t| !threads.contains(t)),
                "a deleted thread is back: {threads:?}"
            );
        } else if reads > 2 && threads.iter().any(|t| t.starts_with("t-live-")) {
            let o = dfck(
                &target,
                &["delete", "--user", user, "--apply", "--format", "json"],
            );
            let e = String::from_utf8_lossy(&o.stderr);
            // Exit 1: the threads with work in flight are refused.
            assert_eq!(o.status.code(), Some(1), "delete beside a live writer: {e}");
            let j: Json = serde_json::from_slice(&o.stdout).expect("delete JSON");
            assert_eq!(
                (
                    j["deleted"].as_u64(),
                    j["refused"].as_u64(),
                    j["checkpoints"].as_u64()
                ),
                (Some(3), Some(2), Some(38)),
                "{j}"
            );
            done = true;
        }
    }
    assert!(done, "the writer ended before the delete ran");
    let report = finish_writer(writer);
    check_after(&target, &report);
    let summary = crate::common::dfck_json(&target, &["inspect", "--format", "json"]);
    let left = summary["threads"].to_string();
    assert!(deleted.iter().all(|t| !left.contains(t)), "{left}");
    eprintln!(
        "live sqlite delete: {reads} reads beside {} writer turns, 3 threads deleted",
        report["turns"]
    );
}
