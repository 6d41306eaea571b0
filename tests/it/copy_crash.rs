//! `dfck copy` killed at a failpoint (`copy-abort-after:N`: the process aborts after the N-th
//! row it inserted, as a SIGKILL would) leaves every target thread absent or complete, on
//! both target backends: a dry run then finds no thread that differs from the source, a
//! rerun completes the copy and a third run copies nothing. (The crash matrix in
//! `tests/write_crash.rs` rewrites its `--db` store; a copy writes another store, so its
//! crash test lives here.)

use crate::common::*;
use serde_json::Value as Json;
use std::path::Path;
use std::process::{Command, Output};

const THREADS: &[&str] = &["t-error", "t-exit", "t-linear"];

/// Runs a copy; `failpoint`: abort after that many rows; `streamed`: every thread copied row
/// by row (`whole-bytes:0`).
fn copy(source: &Path, to: &str, apply: bool, failpoint: Option<usize>, streamed: bool) -> Output {
    let mut c = crate::common::dfck_command();
    c.arg("--db")
        .arg(source)
        .args(["copy", "--format", "json", "--to", to])
        .args(THREADS)
        .env_remove("DFCK_DB")
        .env_remove("DFCK_FAILPOINT");
    if apply {
        c.arg("--apply");
    }
    let mut points: Vec<String> = failpoint
        .map(|n| format!("copy-abort-after:{n}"))
        .into_iter()
        .collect();
    if streamed {
        points.push("whole-bytes:0".into());
    }
    if !points.is_empty() {
        c.env("DFCK_FAILPOINT", points.join(","));
    }
    c.output().expect("run dfck")
}

fn report(out: &Output) -> Json {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

/// Kills a copy after `n` rows, then checks the target and finishes the job.
fn crash_and_resume(source: &Path, to: &str, n: usize, streamed: bool) -> bool {
    let copy = |to: &str, apply: bool, failpoint: Option<usize>| {
        copy(source, to, apply, failpoint, streamed)
    };
    let out = copy(to, true, Some(n));
    let killed = out.status.code().is_none();
    if !killed {
        assert_eq!(out.status.code(), Some(0), "after {n}: {:?}", out);
    }
    let plan = copy(to, false, None);
    assert_eq!(
        plan.status.code(),
        Some(0),
        "after {n}: {:?}",
        report(&plan)
    );
    for t in report(&plan)["threads"].as_array().unwrap() {
        assert!(
            t["status"] == "would" || t["status"] == "skipped",
            "after a crash at row {n} every thread is absent or complete: {t}"
        );
    }
    let rerun = copy(to, true, None);
    assert_eq!(rerun.status.code(), Some(0), "rerun after {n}");
    let third = report(&copy(to, true, None));
    assert_eq!(third["copied"], 0, "third run after {n}: {third}");
    assert_eq!(third["skipped"], THREADS.len());
    killed
}

#[test]
fn a_killed_copy_leaves_threads_absent_or_complete_and_resumes() {
    let (_d, source) = temp_copy(&sqlite_fixture("delta_k3"));
    let dir = tempfile::tempdir().unwrap();
    let points = [1, 9, 31, 58, 1000];
    let mut kills = 0;
    for n in points {
        let to = dir.path().join(format!("crash-{n}.db"));
        kills += usize::from(crash_and_resume(&source, to.to_str().unwrap(), n, false));
    }
    // The same with every thread streamed row by row (docs/copy.md, "Big threads").
    let mut streamed_kills = 0;
    for n in points {
        let to = dir.path().join(format!("crash-streamed-{n}.db"));
        streamed_kills += usize::from(crash_and_resume(&source, to.to_str().unwrap(), n, true));
    }
    assert_eq!(
        streamed_kills,
        points.len() - 1,
        "every streamed failpoint fired"
    );
    let uri = require_postgres("copy crash test (postgres target)");
    if let Some(uri) = &uri {
        let rt = crate::common::pg::runtime();
        let client = crate::common::pg::connect(&rt, uri);
        for n in points {
            let db = format!("dfck_copy_crash_{n}");
            rt.block_on(
                client.batch_execute(&format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)")),
            )
            .unwrap();
            rt.block_on(client.batch_execute(&format!("CREATE DATABASE \"{db}\"")))
                .unwrap();
            kills += usize::from(crash_and_resume(&source, &with_db(uri, &db), n, false));
        }
    }
    let runs = if uri.is_some() { 2 } else { 1 } * points.len();
    println!(
        "copy crash: {kills} aborted runs of {runs}, every thread absent or complete, resumed"
    );
    assert_eq!(
        kills,
        runs - runs / points.len(),
        "every failpoint inside the run fired"
    );
}

/// A copy while a real LangGraph writer appends turns to the source: every copy is one
/// consistent snapshot (held or streamed), so every copied thread verifies clean, and a copy taken after the
/// writer stopped holds every turn.
#[test]
fn a_copy_beside_a_live_writer_yields_threads_that_verify_clean() {
    let Some(python) = require_python("copy beside a live writer") else {
        return;
    };
    let (_d, source) = temp_copy(&sqlite_fixture("delta_k3"));
    let dir = tempfile::tempdir().unwrap();
    let mut writer = Command::new(&python)
        .arg(root().join("scripts/live_writer.py"))
        .arg("--db")
        .arg(&source)
        .args(["--threads", "t-live-0,t-live-1", "--seconds", "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the live writer");
    let mut copies = 0;
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(3) {
        let to = dir.path().join(format!("live-{copies}.db"));
        let to = to.to_str().unwrap();
        // Every other copy streams each thread row by row (docs/copy.md, "Big threads"):
        // the plan and the insert read the live source twice, inside one snapshot.
        let mut cmd = crate::common::dfck_command();
        if copies % 2 == 1 {
            cmd.env("DFCK_FAILPOINT", "whole-bytes:0");
        }
        let out = cmd
            .arg("--db")
            .arg(&source)
            .args(["copy", "--to", to, "--all", "--apply"])
            .output()
            .expect("run dfck");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let live: Vec<&str> = ["t-live-0", "t-live-1"]
            .into_iter()
            .filter(|t| dfck(to, &["inspect", t]).status.success())
            .collect();
        if !live.is_empty() {
            let v = dfck(to, &[&["verify"][..], &live].concat());
            assert_eq!(
                v.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&v.stdout)
            );
        }
        copies += 1;
    }
    let out = writer.wait().expect("writer");
    assert!(out.success(), "live writer failed");
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut writer.stdout.take().unwrap(), &mut stdout).unwrap();
    let turns: Json = serde_json::from_str(stdout.trim()).expect("writer JSON");
    let last = dir.path().join("last.db");
    let out = dfck(
        source.to_str().unwrap(),
        &["copy", "--to", last.to_str().unwrap(), "--all", "--apply"],
    );
    assert_eq!(out.status.code(), Some(0));
    for (tid, n) in turns["threads"].as_object().unwrap() {
        let state = dfck_json(
            last.to_str().unwrap(),
            &["inspect", tid, "--state", "--format", "json"],
        );
        let got = state["values"]["messages"].as_array().map_or(0, Vec::len);
        assert_eq!(got as u64, n.as_u64().unwrap(), "{tid}: every turn copied");
    }
    assert!(copies >= 2, "a held and a streamed copy ran: {copies}");
    println!(
        "copy beside a live writer: {copies} copies (every other streamed), every live thread verified clean"
    );
}

/// A copy puts several threads in one transaction of the target, each in a savepoint
/// (docs/copy.md, "One transaction per thread"): killed inside the second thread, the copy
/// leaves the first rolled back with its group, and a rerun copies every thread.
#[test]
fn a_copy_killed_inside_a_group_rolls_the_whole_group_back() {
    let (_d, source) = temp_copy(&sqlite_fixture("delta_k3"));
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("new.db");
    let to = to.to_str().unwrap();
    let plan = report(&copy(&source, to, false, None, false));
    let first = &plan["threads"][0];
    let rows = first["checkpoints"].as_u64().unwrap() + first["writes"].as_u64().unwrap();
    let out = copy(&source, to, true, Some(rows as usize + 1), false);
    assert_eq!(out.status.code(), None, "killed inside the second thread");
    let again = report(&copy(&source, to, false, None, false));
    for t in again["threads"].as_array().unwrap() {
        assert_eq!(t["status"], "would", "the group rolled back whole: {t}");
    }
    let done = copy(&source, to, true, None, false);
    assert_eq!(done.status.code(), Some(0));
    assert_eq!(report(&done)["copied"], THREADS.len());
}
