//! Every write command beside a live LangGraph writer on one SQLite store: the real library
//! (`scripts/live_writer.py`, a fresh connection per turn, DeerFlow's 5 s busy timeout)
//! appends turns the whole time while dfck runs, several times over, prune in each shape,
//! `migrate delta-to-full`, `migrate full-to-delta`, `copy` from and into the store and
//! `reclaim` (in place and `--into`). After every run `PRAGMA integrity_check` says `ok`;
//! the writer never meets a corruption error (a busy error beside `reclaim`'s VACUUM is
//! expected and retried); at the end every turn the writer made is there.
//! docs/reliability.md, "No file handles beside SQLite's".

use crate::common::{require_python, sqlite_fixture, temp_copy};
use serde_json::Value as Json;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn run(db: &Path, args: &[&str]) -> Output {
    crate::common::dfck_command()
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("DFCK_DB")
        .output()
        .expect("run dfck")
}

fn integrity(db: &Path) -> String {
    let c = rusqlite::Connection::open(db).expect("open for integrity_check");
    let _ = c.busy_timeout(Duration::from_secs(30));
    let rows = c.prepare("PRAGMA integrity_check").and_then(|mut st| {
        st.query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()
    });
    match rows {
        Ok(rows) => rows.join("; "),
        Err(e) => format!("integrity_check failed: {e}"),
    }
}

fn message_count(db: &Path, thread: &str) -> usize {
    let o = run(db, &["inspect", thread, "--state", "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Json = serde_json::from_slice(&o.stdout).unwrap();
    j["values"]["messages"].as_array().map_or(0, Vec::len)
}

fn start_writer(python: &Path, db: &Path, stop: &Path) -> Child {
    Command::new(python)
        .arg(crate::common::root().join("scripts/live_writer.py"))
        .arg("--db")
        .arg(db)
        .args(["--threads", "t-live-0,t-live-1,t-live-2"])
        .args(["--seconds", "600", "--busy-timeout", "5", "--tolerate-busy"])
        .arg("--stop-file")
        .arg(stop)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the live writer")
}

#[test]
fn every_write_command_beside_a_live_writer_leaves_an_intact_store() {
    let Some(python) = require_python("live-writer test of every write command") else {
        return;
    };
    let (dir, db) = temp_copy(&sqlite_fixture("retention"));
    let sources = ["delta_k1", "delta_k3", "delta_k10"].map(|s| temp_copy(&sqlite_fixture(s)));
    let stop = dir.path().join("stop");
    let mut writer = start_writer(&python, &db, &stop);
    // Let the writer create its threads first.
    let start = Instant::now();
    while message_count_quiet(&db, "t-live-2") == 0 {
        assert!(
            writer.try_wait().unwrap().is_none(),
            "the writer ended early"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the writer never wrote"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let deltas = ["r-linear-delta", "r-branch-delta", "r-cut-delta"];
    // maintain's whole policy: prune, the lease table, reclaim, verify, a metrics file.
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "prune:\n  branches: true\nreclaim:\n  free_over: 0%\nsweep:\n  limit: 3\n",
    )
    .unwrap();
    let metrics = dir.path().join("dfck.prom");
    let mut runs = 0;
    for round in 0..3 {
        let copy_out = dir.path().join(format!("copy-{round}.db"));
        let compact = dir.path().join(format!("compact-{round}.db"));
        let (_, source) = &sources[round];
        let s = |p: &Path| p.to_str().unwrap().to_owned();
        let idle = ["r-interrupt-full", "r-interrupt-delta", "r-linear-full"][round];
        let mut to_full = vec!["migrate", "delta-to-full", "--apply"];
        to_full.extend(deltas);
        let (copy_out, compact, into) = (s(&copy_out), s(&compact), s(&db));
        let (policy, metrics) = (s(&policy), s(&metrics));
        let steps: Vec<(&str, Vec<&str>, &Path)> = vec![
            ("prune", vec!["prune", "--all", "--apply"], &db),
            (
                "prune --branches",
                vec!["prune", "--all", "--branches", "--apply"],
                &db,
            ),
            (
                "prune --keep-last-turns",
                vec!["prune", "--all", "--keep-last-turns", "2", "--apply"],
                &db,
            ),
            (
                "prune --idle",
                vec!["prune", idle, "--idle", "1s", "--apply"],
                &db,
            ),
            ("migrate delta-to-full", to_full, &db),
            (
                "migrate full-to-delta",
                vec!["migrate", "full-to-delta", "--all", "--apply"],
                &db,
            ),
            (
                "copy from the store",
                vec!["copy", "--all", "--to", &copy_out, "--apply"],
                &db,
            ),
            (
                "copy into the store",
                vec!["copy", "--all", "--to", &into, "--apply", "--replace"],
                source,
            ),
            ("reclaim", vec!["reclaim", "--apply"], &db),
            (
                "maintain",
                vec![
                    "maintain",
                    "--policy",
                    &policy,
                    "--apply",
                    "--metrics-file",
                    &metrics,
                ],
                &db,
            ),
            (
                "reclaim --into",
                vec!["reclaim", "--into", &compact, "--apply"],
                &db,
            ),
        ];
        for (what, args, store) in steps {
            let out = run(store, &args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "round {round}, {what}: exit {:?}: {err}",
                out.status.code()
            );
            let check = integrity(&db);
            assert_eq!(check, "ok", "round {round}, after {what}: {check}");
            assert!(
                writer.try_wait().unwrap().is_none(),
                "round {round}, after {what}: the writer died"
            );
            runs += 1;
        }
    }
    std::fs::write(&stop, b"").unwrap();
    let out = writer.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "live writer: {err}");
    let report: Json = serde_json::from_slice(&out.stdout).expect("writer JSON");
    for (t, n) in report["threads"].as_object().unwrap() {
        assert_eq!(
            message_count(&db, t),
            n.as_u64().unwrap() as usize,
            "{t}: a writer turn was lost"
        );
    }
    assert_eq!(integrity(&db), "ok");
    eprintln!(
        "live writes: {runs} dfck write runs beside {} writer turns ({} busy retries), integrity ok after each",
        report["turns"], report["busy"]
    );
}

/// The number of messages of a thread, 0 while it does not exist yet.
fn message_count_quiet(db: &Path, thread: &str) -> usize {
    let o = run(db, &["inspect", thread, "--state", "--format", "json"]);
    if !o.status.success() {
        return 0;
    }
    let j: Json = serde_json::from_slice(&o.stdout).unwrap_or_default();
    j["values"]["messages"].as_array().map_or(0, Vec::len)
}
