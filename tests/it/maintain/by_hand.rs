//! A policy gives the rows the same commands by hand give (prune, delete by age, convert,
//! reclaim); limits, resumption and exemptions; the human report.

use super::*;

/// The policy on one store, the commands by hand on a twin: the same rows everywhere.
fn same_as_by_hand(a: &Db, b: &Db, dir: &Path) {
    let p = policy(
        dir,
        "prune:\n  branches: true\ndelete:\n  idle: 30d\nreclaim:\n  free_over: 0%\n",
    );
    let (r, code, err) = maintain(a, &p, &["--apply"]);
    assert!(matches!(code, 0 | 1), "{err}");
    assert!(r["run"]["checkpoints_deleted"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["reclaim"]["status"], "done", "{r}");
    assert_eq!(r["run"]["ended"], "complete");
    // By hand: the same prune on every thread but the pinned one, then reclaim.
    let mut args = vec!["prune".to_owned()];
    args.extend(b.threads().into_iter().filter(|t| t != T01));
    args.extend(["--branches", "--idle", "30d", "--apply"].map(String::from));
    by_hand(b, &args.iter().map(String::as_str).collect::<Vec<_>>());
    by_hand(b, &["reclaim", "--apply"]);
    let (da, db) = (a.dump(), b.dump());
    assert_eq!(da.len(), db.len());
    assert!(da == db, "maintain and the commands by hand differ");
    assert!(
        da.iter().any(|l| l.contains(T01)),
        "the pinned thread stays"
    );
}

#[test]
fn a_policy_gives_the_rows_the_commands_by_hand_give_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    same_as_by_hand(
        &Db::sqlite("deerflow_app"),
        &Db::sqlite("deerflow_app"),
        dir.path(),
    );
    // A bare LangGraph store: branches and history trimming.
    let (a, b) = (Db::sqlite("forks_full"), Db::sqlite("forks_full"));
    let p = policy(
        dir.path(),
        "prune:\n  branches: true\n  keep_last_turns: 2\n",
    );
    let (r, code, err) = maintain(&a, &p, &["--apply"]);
    assert_eq!(code, 0, "{err}");
    assert!(r["run"]["threads_pruned"].as_u64().unwrap() > 0, "{r}");
    by_hand(
        &b,
        &[
            "prune",
            "--all",
            "--branches",
            "--keep-last-turns",
            "2",
            "--apply",
        ],
    );
    assert!(a.dump() == b.dump());
}

#[test]
fn a_policy_gives_the_rows_the_commands_by_hand_give_postgres() {
    let Some(server) = require_postgres("maintain equals the commands by hand") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    same_as_by_hand(
        &Db::pg(&server, "deerflow_app", "dfck_maint_a"),
        &Db::pg(&server, "deerflow_app", "dfck_maint_b"),
        dir.path(),
    );
}

#[test]
fn a_run_stopped_at_its_limit_resumes_after_the_last_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("deerflow_app");
    let p = policy(dir.path(), "delete:\n  idle: 30d\nsweep:\n  limit: 1\n");
    let (r, _, _) = maintain(&db, &p, &["--apply"]);
    assert_eq!(r["run"]["ended"], "sweep limit");
    assert_eq!(r["next_after"], T02, "{r}");
    assert_eq!(r["run"]["threads_deleted"], 1);
    // Threads 03-05 are refused (DeerFlow work in flight): they do not count.
    let (r, _, _) = maintain(&db, &p, &["--apply"]);
    assert_eq!(r["resumed_after"], T02);
    assert_eq!(r["run"]["threads_deleted"], 1);
    assert_eq!(r["run"]["threads_refused"], 3, "{r}");
    assert_eq!(r["next_after"], T06);
}

#[test]
fn exemptions_leave_threads_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("deerflow_app");
    let p = policy(
        dir.path(),
        "delete:\n  idle: 30d\nexempt:\n  threads: [df0a0000-0000-4000-8000-000000000002]\n  users: [a0000000-0000-4000-8000-000000000003]\n  metadata_key: scheduled_task_id\n",
    );
    let (r, code, _) = maintain(&db, &p, &[]);
    assert_eq!(
        code, 1,
        "threads with DeerFlow work in flight would be refused"
    );
    let ex = &r["exempted"];
    assert_eq!(
        (
            &ex["pinned"],
            &ex["threads"],
            &ex["users"],
            &ex["metadata_key"]
        ),
        (
            &Json::from(1),
            &Json::from(1),
            &Json::from(1),
            &Json::from(1)
        ),
        "{r}"
    );
    let touched: Vec<&str> = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert!(
        !touched.contains(&T01) && !touched.contains(&T02),
        "{touched:?}"
    );
    assert!(
        !db.dump().iter().any(|l| l.starts_with("dfck_")),
        "a dry run creates nothing"
    );
}

/// A DeerFlow install in a temp dir: the `deerflow` fixture as its store, a config in `mode`
/// with a `dfck:` policy converting every full-mode thread.
fn deerflow_install(mode: &str) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let db = dir.path().join("data/deerflow.db");
    std::fs::copy(sqlite_fixture("deerflow"), &db).unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        format!("database:\n  backend: sqlite\n  sqlite_dir: data\n  checkpoint_channel_mode: {mode}\n  checkpoint_delta:\n    snapshot_frequency: 4\ndfck:\n  convert:\n    full_to_delta_over: 1KiB\n"),
    )
    .unwrap();
    let copy = tempfile::tempdir().unwrap();
    let path = copy.path().join("deerflow.db");
    std::fs::copy(&db, &path).unwrap();
    (dir, Db::Sqlite(copy, path))
}

fn in_install(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut c = dfck_command();
    for v in [
        "DEER_FLOW_HOME",
        "DEER_FLOW_CONFIG_PATH",
        "DEER_FLOW_PROJECT_ROOT",
        "DFCK_CACHE_REDIS_URL",
    ] {
        c.env_remove(v);
    }
    c.current_dir(dir)
        .args(["--config", "config.yaml"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn large_full_threads_are_converted_only_when_deerflow_runs_delta() {
    let (dir, twin) = deerflow_install("delta");
    let out = in_install(dir.path(), &["maintain", "--apply", "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    let converted: Vec<&str> = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["action"] == "convert" && t["status"] == "done")
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert!(!converted.is_empty(), "{r}");
    assert_eq!(r["run"]["threads_converted"], converted.len());
    // By hand: the same threads converted with DeerFlow's cadence and form.
    let mut args = vec!["--db", twin_path(&twin), "migrate", "full-to-delta"];
    args.extend(converted.iter().copied());
    args.extend(["--snapshot-frequency", "4", "--form", "deerflow", "--apply"]);
    let by_hand = dfck_command().args(&args).output().unwrap();
    assert_eq!(by_hand.status.code(), Some(0));
    let mine = Db::Sqlite(
        tempfile::tempdir().unwrap(),
        dir.path().join("data/deerflow.db"),
    );
    assert!(
        mine.dump() == twin.dump(),
        "maintain's conversion differs from the command's"
    );
    // A full-mode DeerFlow: the step is skipped, and the report says why.
    let (dir, _) = deerflow_install("full");
    let out = in_install(dir.path(), &["maintain", "--apply", "--format", "json"]);
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    let step = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "convert")
        .unwrap();
    assert_eq!(step["ran"], false);
    assert!(
        step["reason"]
            .as_str()
            .unwrap()
            .contains("checkpoint_channel_mode: full")
    );
    assert_eq!(r["run"]["threads_converted"], 0);
}

fn twin_path(db: &Db) -> &str {
    match db {
        Db::Sqlite(_, p) => p.to_str().unwrap(),
        Db::Pg(u) => u,
    }
}

#[test]
fn the_dry_run_reads_as_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("deerflow_app");
    let p = policy(
        dir.path(),
        "prune:\n  branches: true\ndelete:\n  idle: 30d\nsweep:\n  limit: 2\n",
    );
    let out = maintain_as(&db, &p, &[], "table")
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // Durations (`0.01`) vary from run to run.
    let text: String = String::from_utf8_lossy(&out.stdout)
        .replace(&db.target(), "STORE")
        .split(' ')
        .map(|w| {
            let (lead, w2) = w.split_at(usize::from(w.starts_with('(')));
            let cut = w2
                .find(|c: char| !c.is_ascii_digit() && c != '.')
                .unwrap_or(w2.len());
            let (num, rest) = w2.split_at(cut);
            if num.contains('.') && num.parse::<f64>().is_ok() {
                format!("{lead}{}{rest}", "9".repeat(num.len()))
            } else {
                w.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    insta::assert_snapshot!(text);
}
