//! `dfck maintain` on SQLite and PostgreSQL: a policy gives the same rows in every table as
//! the same commands run by hand; one sweeper at a time (a held lease is named and nothing
//! done; of two runs started together one works); a run stopped at its sweep limit resumes
//! after the last thread; a plan applies only to unchanged threads and only on its store;
//! `--watch` survives a failed cycle and stops on SIGTERM; SIGTERM during VACUUM leaves the
//! store as it was; policy mistakes are one-line errors.

use crate::common::pg::{clone_db, connect, runtime};
use crate::common::*;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const T01: &str = "df0a0000-0000-4000-8000-000000000001";
const T02: &str = "df0a0000-0000-4000-8000-000000000002";
const T06: &str = "df0a0000-0000-4000-8000-000000000006";

/// A scratch store on one backend.
enum Db {
    Sqlite(#[allow(dead_code)] tempfile::TempDir, PathBuf),
    Pg(String),
}

impl Db {
    fn sqlite(stem: &str) -> Db {
        let (dir, path) = temp_copy(&sqlite_fixture(stem));
        Db::Sqlite(dir, path)
    }

    fn pg(server: &str, stem: &str, name: &str) -> Db {
        Db::Pg(clone_db(server, &format!("dfck_{stem}"), name))
    }

    fn target(&self) -> String {
        match self {
            Db::Sqlite(_, p) => p.display().to_string(),
            Db::Pg(uri) => uri.clone(),
        }
    }

    /// Every row of every table but dfck's own, as sorted text lines.
    fn dump(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self {
            Db::Sqlite(_, p) => {
                let c = rusqlite::Connection::open(p).unwrap();
                let tables: Vec<String> = c
                    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'dfck_maintenance' ORDER BY name")
                    .unwrap()
                    .query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                for t in tables {
                    let mut st = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
                    let n = st.column_count();
                    let rows = st
                        .query_map([], |r| {
                            let cells: Vec<String> = (0..n)
                                .map(|i| match r.get_ref(i).unwrap() {
                                    rusqlite::types::ValueRef::Text(t) => {
                                        String::from_utf8_lossy(t).into_owned()
                                    }
                                    v => format!("{v:?}"),
                                })
                                .collect();
                            Ok(format!("{t}|{}", cells.join("|")))
                        })
                        .unwrap();
                    out.extend(rows.map(Result::unwrap));
                }
            }
            Db::Pg(uri) => {
                let rt = runtime();
                let c = connect(&rt, uri);
                let tables: Vec<String> = rt
                    .block_on(c.query(
                        "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'dfck_maintenance' ORDER BY 1",
                        &[],
                    ))
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                for t in tables {
                    let rows = rt
                        .block_on(c.query(&format!("SELECT t::text FROM \"{t}\" t"), &[]))
                        .unwrap();
                    out.extend(
                        rows.iter()
                            .map(|r| format!("{t}|{}", r.get::<_, String>(0))),
                    );
                }
            }
        }
        out.sort();
        out
    }

    fn exec(&self, sql: &str) {
        match self {
            Db::Sqlite(_, p) => rusqlite::Connection::open(p)
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            Db::Pg(uri) => {
                let rt = runtime();
                rt.block_on(connect(&rt, uri).batch_execute(sql)).unwrap();
            }
        }
    }

    fn threads(&self) -> Vec<String> {
        let j = dfck_json(&self.target(), &["inspect", "--format", "json"]);
        j["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["thread_id"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// A policy file in `dir`.
fn policy(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("policy.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

/// `dfck maintain` with the policy, without DeerFlow's environment: (report, exit, stderr).
fn maintain(db: &Db, policy: &Path, args: &[&str]) -> (Json, i32, String) {
    let out = maintain_cmd(db, policy, args).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let j = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("maintain {args:?} exited {code} without JSON: {stderr}"));
    (j, code, stderr)
}

fn maintain_cmd(db: &Db, policy: &Path, args: &[&str]) -> Command {
    maintain_as(db, policy, args, "json")
}

fn maintain_as(db: &Db, policy: &Path, args: &[&str], format: &str) -> Command {
    let mut c = dfck_command();
    c.env_remove("DEER_FLOW_HOME")
        .env_remove("DFCK_CACHE_REDIS_URL")
        .env_remove("DFCK_FAILPOINT")
        .args(["--db", &db.target(), "maintain", "--policy"])
        .arg(policy)
        .args(args)
        .args(["--format", format]);
    c
}

fn by_hand(db: &Db, args: &[&str]) {
    let out = dfck_command()
        .env_remove("DEER_FLOW_HOME")
        .env_remove("DFCK_CACHE_REDIS_URL")
        .args(["--db", &db.target()])
        .args(args)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

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

/// A live lease of another host in `dfck_maintenance`.
const FOREIGN_LEASE: &str = "CREATE TABLE dfck_maintenance (name TEXT PRIMARY KEY, token TEXT, holder_host TEXT, holder_pid BIGINT, holder_version TEXT, acquired_at BIGINT, expires_at BIGINT NOT NULL DEFAULT 0, cursor_thread TEXT, last_run TEXT); INSERT INTO dfck_maintenance VALUES ('sweeper', 'tok', 'other-host', 4242, '9.9.9', 0, 99999999999, NULL, NULL);";

fn a_held_lease_is_named_and_nothing_done(db: &Db, dir: &Path) {
    db.exec(FOREIGN_LEASE);
    let before = db.dump();
    let p = policy(dir, "delete:\n  idle: 30d\n");
    let (r, code, _) = maintain(db, &p, &["--apply"]);
    assert_eq!(code, 0);
    assert_eq!(r["lease_held_by"], "other-host pid 4242 (dfck 9.9.9)");
    assert_eq!(db.dump(), before);
    let out = maintain_as(db, &p, &["--apply"], "table").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("another sweeper holds the lease: other-host pid 4242 (dfck 9.9.9)")
    );
    // An expired lease is taken over.
    db.exec("UPDATE dfck_maintenance SET expires_at = 1");
    let (r, _, _) = maintain(db, &p, &["--apply"]);
    assert!(r.get("lease_held_by").is_none());
    assert!(r["run"]["threads_deleted"].as_u64().unwrap() > 0);
}

#[test]
fn a_held_lease_is_named_and_nothing_done_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    a_held_lease_is_named_and_nothing_done(&Db::sqlite("deerflow_app"), dir.path());
}

#[test]
fn a_held_lease_is_named_and_nothing_done_postgres() {
    let Some(server) = require_postgres("maintain lease") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = Db::pg(&server, "deerflow_app", "dfck_maint_lease");
    a_held_lease_is_named_and_nothing_done(&db, dir.path());
}

/// Waits for `path` to exist (a failpoint announcing itself).
fn wait_for(path: &Path, child: &mut Child) {
    let t = Instant::now();
    while !path.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before {}",
            path.display()
        );
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{} never came",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigterm(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

#[test]
fn of_two_runs_started_together_one_works() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("long_threads");
    let p = policy(dir.path(), "reclaim:\n  free_over: 0%\n");
    let flag = dir.path().join("vacuuming");
    let spawn = || {
        maintain_cmd(&db, &p, &["--apply"])
            .env("DFCK_FAILPOINT", format!("vacuum-slow:{}", flag.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let reports: Vec<Json> = outs
        .iter()
        .map(|o| {
            assert_eq!(
                o.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
            serde_json::from_slice(&o.stdout).unwrap()
        })
        .collect();
    let held: Vec<&Json> = reports
        .iter()
        .filter(|r| r.get("lease_held_by").is_some())
        .collect();
    assert_eq!(held.len(), 1, "exactly one run works: {reports:?}");
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    assert!(
        held[0]["lease_held_by"]
            .as_str()
            .unwrap()
            .starts_with(&host)
    );
}

#[test]
fn sigterm_during_vacuum_leaves_the_sqlite_store_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("long_threads");
    let before = db.dump();
    let Db::Sqlite(_, path) = &db else {
        unreachable!()
    };
    let size = std::fs::metadata(path).unwrap().len();
    let p = policy(dir.path(), "reclaim:\n  free_over: 0%\n");
    let flag = dir.path().join("vacuuming");
    let mut child = maintain_cmd(&db, &p, &["--apply"])
        .env("DFCK_FAILPOINT", format!("vacuum-slow:{}", flag.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&flag, &mut child);
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["reclaim"]["status"], "interrupted", "{r}");
    assert_eq!(r["run"]["ended"], "stopped");
    assert_eq!(db.dump(), before);
    let c = rusqlite::Connection::open(path).unwrap();
    let pages: u64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    let page: u64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    assert!(pages * page >= size, "VACUUM did not shrink the file");
    // The lease was released: the next run takes it.
    let (r, _, _) = maintain(&db, &p, &["--apply"]);
    assert!(r.get("lease_held_by").is_none());
}

#[test]
fn sigterm_during_vacuum_leaves_the_postgres_store_unchanged() {
    let Some(server) = require_postgres("maintain SIGTERM during VACUUM") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = Db::pg(&server, "deerflow_app", "dfck_maint_vacuum");
    let before = db.dump();
    // Another session holds a lock VACUUM needs, so the VACUUM waits until it is cancelled.
    let rt = runtime();
    let Db::Pg(uri) = &db else { unreachable!() };
    let locker = connect(&rt, uri);
    rt.block_on(
        locker.batch_execute("BEGIN; LOCK TABLE checkpoints IN SHARE UPDATE EXCLUSIVE MODE"),
    )
    .unwrap();
    let p = policy(dir.path(), "reclaim:\n  free_over: 0%\n");
    let mut child = maintain_cmd(&db, &p, &["--apply"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // pg_stat_activity is read outside the locker's transaction (which sees one snapshot).
    let monitor = connect(&rt, uri);
    let t = Instant::now();
    loop {
        let waiting: i64 = rt
            .block_on(monitor.query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'",
                &[],
            ))
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "maintain ended early: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(t.elapsed() < Duration::from_secs(60), "VACUUM never waited");
        std::thread::sleep(Duration::from_millis(50));
    }
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    rt.block_on(locker.batch_execute("ROLLBACK")).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["reclaim"]["status"], "interrupted", "{r}");
    assert_eq!(db.dump(), before);
}

#[test]
fn watch_survives_a_failed_cycle_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("deerflow_app");
    let Db::Sqlite(_, path) = &db else {
        unreachable!()
    };
    let away = dir.path().join("away.db");
    let p = policy(dir.path(), "delete:\n  idle: 30d\nsweep:\n  limit: 1\n");
    let mut child = maintain_cmd(&db, &p, &["--apply", "--watch", "1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The store goes away for a cycle, then comes back.
    std::thread::sleep(Duration::from_millis(600));
    std::fs::rename(path, &away).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::rename(&away, path).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(child.try_wait().unwrap().is_none(), "the loop went on");
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("this run failed"), "{stderr}");
    let runs: Vec<Json> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(runs.len() >= 2, "{runs:?}");
    let deleted: u64 = runs
        .iter()
        .map(|r| r["run"]["threads_deleted"].as_u64().unwrap())
        .sum();
    assert!(deleted >= 2, "cycles after the failure worked: {runs:?}");
}

#[test]
fn a_thread_changed_since_the_plan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("deerflow_app");
    let p = policy(dir.path(), "delete:\n  idle: 30d\n");
    let plan = dir.path().join("plan.json");
    let (r, _, _) = maintain(&db, &p, &["--plan", plan.to_str().unwrap()]);
    assert_eq!(r["dry_run"], true);
    let planned: Json = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    let ids: Vec<&str> = planned["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&T02) && ids.contains(&T06), "{ids:?}");
    // T02 gets a pending write after the plan.
    db.exec(&format!(
        "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value) \
         SELECT thread_id, checkpoint_ns, checkpoint_id, 'late', 0, 'x', 'json', X'7B7D' FROM checkpoints \
         WHERE thread_id = '{T02}' ORDER BY checkpoint_id DESC LIMIT 1"
    ));
    let (r, code, _) = maintain(&db, &p, &["--apply-plan", plan.to_str().unwrap()]);
    assert_eq!(code, 1);
    let t02 = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == T02)
        .unwrap();
    assert_eq!(t02["status"], "refused");
    assert!(
        t02["reason"].as_str().unwrap().contains("pending writes"),
        "{t02}"
    );
    assert!(db.dump().iter().any(|l| l.contains(T02)), "T02 untouched");
    assert!(
        !db.dump()
            .iter()
            .any(|l| l.starts_with("checkpoints|") && l.contains(T06))
    );
    // Another store, or another dfck version: the whole plan is refused.
    let other = Db::sqlite("deerflow_app");
    let out = maintain_cmd(&other, &p, &["--apply-plan", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert_clean_failure(&out, "made for another store");
    let text = std::fs::read_to_string(&plan)
        .unwrap()
        .replace(env!("CARGO_PKG_VERSION"), "0.0.1-old");
    std::fs::write(&plan, text).unwrap();
    let out = maintain_cmd(&db, &p, &["--apply-plan", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert_clean_failure(&out, "made by dfck 0.0.1-old");
}

#[test]
fn policy_mistakes_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("deerflow_app");
    let p = policy(dir.path(), "prune:\n  brances: true\n");
    let out = maintain_cmd(&db, &p, &[]).output().unwrap();
    assert_clean_failure(
        &out,
        "policy.yaml:2: prune.brances: unknown key (did you mean branches?)",
    );
    let p = policy(dir.path(), "sweep:\n  limit: many\n");
    assert_clean_failure(&maintain_cmd(&db, &p, &[]).output().unwrap(), "sweep.limit");
    let out = dfck_command()
        .env_remove("DEER_FLOW_HOME")
        .args(["--db", &db.target(), "maintain"])
        .output()
        .unwrap();
    assert_clean_failure(&out, "maintain needs a policy");
    let p = policy(dir.path(), "delete:\n  idle: 30d\n");
    let out = maintain_cmd(&db, &p, &["--watch", "soon"])
        .output()
        .unwrap();
    assert_clean_failure(&out, "--watch");
    let Db::Sqlite(_, store) = &db else {
        unreachable!()
    };
    let out = maintain_cmd(&db, &p, &["--metrics-file", store.to_str().unwrap()])
        .output()
        .unwrap();
    assert_clean_failure(&out, "the store itself");
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
