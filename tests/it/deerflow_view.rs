//! The DeerFlow database as `inspect` and `verify` show it (docs/deerflow-database.md), on the
//! DeerFlow fixture in SQLite and PostgreSQL: DeerFlow's tables in the space report, each
//! thread's title, owner, status, runs (operation_kind 'run' only), last run and tokens; the
//! `deerflow.*` findings; `--user` selecting a user's threads.

use crate::common::*;
use serde_json::Value as Json;

const DB: &str = "fixtures/sqlite/deerflow_app.db";
const BOB: &str = "a0000000-0000-4000-8000-000000000003";

fn sqlite() -> String {
    sqlite_fixture("deerflow_app").display().to_string()
}

fn per_thread(summary: &Json) -> Vec<(String, Json)> {
    summary["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["thread_id"].as_str().unwrap().to_owned(),
                t["deerflow"].clone(),
            )
        })
        .collect()
}

#[test]
fn the_summary_shows_threads_as_deerflow_lists_them() {
    let s = dfck_json(&sqlite(), &["inspect", "--format", "json"]);
    let d = &s["deerflow"];
    assert_eq!(d["revision"], "0013_mcp_task_notifications");
    let tables: Vec<&str> = d["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(tables.len(), 15, "{tables:?}");
    assert_eq!(d["tables"][3]["table"], "run_events");
    assert_eq!(d["tables"][3]["rows"], 104);
    let threads = per_thread(&s);
    let t05 = &threads.iter().find(|(t, _)| t.ends_with("0005")).unwrap().1;
    // Thread 05 has three runs rows, one of them DeerFlow's pending delete reservation.
    assert_eq!(t05["runs"], 2, "reservations are not runs");
    assert_eq!(t05["title"], "Meeting notes");
    let t01 = &threads.iter().find(|(t, _)| t.ends_with("0001")).unwrap().1;
    assert_eq!(
        (t01["tokens"].as_u64(), t01["pinned"].as_bool()),
        (Some(2293), Some(true))
    );
    let unlisted = &threads
        .iter()
        .find(|(t, _)| t == "legacy.thread.0001")
        .unwrap()
        .1;
    assert_eq!(unlisted["listed"], false);
}

#[test]
fn postgres_shows_the_same_deerflow_threads() {
    let Some(server) = require_postgres("the DeerFlow summary on PostgreSQL") else {
        return;
    };
    let pg = dfck_json(
        &with_db(&server, "dfck_deerflow_app"),
        &["inspect", "--format", "json"],
    );
    let lite = dfck_json(&sqlite(), &["inspect", "--format", "json"]);
    assert_eq!(per_thread(&pg), per_thread(&lite));
    for k in [
        "revision",
        "listed_threads",
        "listed_without_checkpoints",
        "unlisted_threads",
        "active_runs",
    ] {
        assert_eq!(pg["deerflow"][k], lite["deerflow"][k], "{k}");
    }
}

#[test]
fn verify_names_what_deerflow_cannot_show_or_run() {
    let out = dfck(&sqlite(), &["verify", "--format", "json"]);
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    let mut got: Vec<(String, String)> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"].as_str().unwrap().starts_with("deerflow."))
        .map(|f| {
            let t = f["thread_id"].as_str().unwrap();
            (
                f["code"].as_str().unwrap().to_owned(),
                t[t.len() - 4..].to_owned(),
            )
        })
        .collect();
    got.sort();
    let want = [
        ("deerflow.listed_without_checkpoints", "000b"),
        ("deerflow.listed_without_checkpoints", "000c"),
        // 04: a running run whose lease expired; 05: a pending delete reservation whose lease
        // expired; 0b: a pending run with no lease. 03's lease is live.
        ("deerflow.stale_run_lease", "0004"),
        ("deerflow.stale_run_lease", "0005"),
        ("deerflow.stale_run_lease", "000b"),
        ("deerflow.unlisted_thread", "0001"),
        ("deerflow.unlisted_thread", "0007"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(c, t)| ((*c).into(), (*t).into()))
        .collect();
    assert_eq!(got, want);
    for code in [
        "deerflow.listed_without_checkpoints",
        "deerflow.unlisted_thread",
        "deerflow.stale_run_lease",
    ] {
        let e = dfck_command().args(["explain", code]).output().unwrap();
        assert!(e.status.success() && !e.stdout.is_empty(), "explain {code}");
    }
}

#[test]
fn user_selects_the_threads_deerflow_lists_for_them() {
    let r = dfck_json(DB, &["verify", "--user", BOB, "--format", "json"]);
    assert_eq!(
        r["threads_checked"], 1,
        "bob owns one thread with checkpoints"
    );
    let plan = dfck_json(
        DB,
        &[
            "migrate",
            "delta-to-full",
            "--user",
            BOB,
            "--format",
            "json",
        ],
    );
    let ids: Vec<&str> = plan["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["df0a0000-0000-4000-8000-000000000006"]);
    let out = dfck(DB, &["verify", "--user", "nobody-at-all"]);
    assert_clean_failure(&out, "nobody-at-all");
}
