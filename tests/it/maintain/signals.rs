//! One sweeper at a time, and stops: a held lease, two runs at once, SIGTERM during VACUUM,
//! `--watch` through a failed cycle.

use super::*;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

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

/// `maintain` in the background, its output captured; with a failpoint (`hold:PATH`,
/// `vacuum-slow:PATH`: a slowed VACUUM that announces itself in PATH).
pub(super) fn spawn(
    db: &Db,
    policy: &Path,
    args: &[&str],
    failpoint: Option<(&str, &Path)>,
) -> Child {
    let mut c = maintain_cmd(db, policy, args);
    if let Some((name, path)) = failpoint {
        c.env("DFCK_FAILPOINT", format!("{name}:{}", path.display()));
    }
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Two runs started together both exit 0 and exactly one was kept out by the other's lease;
/// that one's report.
pub(super) fn one_works(outs: [std::process::Output; 2]) -> Json {
    let reports: Vec<Json> = outs
        .iter()
        .map(|o| {
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{err}");
            serde_json::from_slice(&o.stdout).unwrap()
        })
        .collect();
    let held: Vec<&Json> = reports
        .iter()
        .filter(|r| r.get("lease_held_by").is_some())
        .collect();
    assert_eq!(held.len(), 1, "exactly one run works: {reports:?}");
    held[0].clone()
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
    let (a, b) = (
        spawn(&db, &p, &["--apply"], Some(("vacuum-slow", &flag))),
        spawn(&db, &p, &["--apply"], Some(("vacuum-slow", &flag))),
    );
    let held = one_works([a.wait_with_output().unwrap(), b.wait_with_output().unwrap()]);
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    assert!(held["lease_held_by"].as_str().unwrap().starts_with(&host));
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
    let mut child = spawn(&db, &p, &["--apply"], Some(("vacuum-slow", &flag)));
    wait_for(&flag, &mut child);
    sigterm(&child);
    stopped_cleanly(&child.wait_with_output().unwrap(), &db, &before);
    let c = rusqlite::Connection::open(path).unwrap();
    let pages: u64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    let page: u64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    assert!(pages * page >= size, "VACUUM did not shrink the file");
    // The lease was released: the next run takes it.
    let (r, _, _) = maintain(&db, &p, &["--apply"]);
    assert!(r.get("lease_held_by").is_none());
}

/// A session holding `SHARE UPDATE EXCLUSIVE` on `checkpoints`: a VACUUM waits for it.
pub(super) struct TableLock {
    rt: tokio::runtime::Runtime,
    locker: tokio_postgres::Client,
    /// pg_stat_activity read outside the locker's transaction (which sees one snapshot).
    monitor: tokio_postgres::Client,
}

impl TableLock {
    pub(super) fn take(db: &Db) -> TableLock {
        let Db::Pg(uri) = db else { unreachable!() };
        let rt = runtime();
        let (locker, monitor) = (connect(&rt, uri), connect(&rt, uri));
        rt.block_on(
            locker.batch_execute("BEGIN; LOCK TABLE checkpoints IN SHARE UPDATE EXCLUSIVE MODE"),
        )
        .unwrap();
        TableLock {
            rt,
            locker,
            monitor,
        }
    }

    /// Waits until another session waits on a lock (the VACUUM of `child`).
    fn wait_for_a_waiter(&self, child: &mut Child) {
        let t = Instant::now();
        loop {
            let waiting: i64 = self
                .rt
                .block_on(self.monitor.query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'",
                    &[],
                ))
                .unwrap()
                .get(0);
            if waiting > 0 {
                return;
            }
            if child.try_wait().unwrap().is_some() {
                let out = std::mem::replace(child, Command::new("true").spawn().unwrap())
                    .wait_with_output()
                    .unwrap();
                panic!(
                    "maintain ended early: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            assert!(t.elapsed() < Duration::from_secs(60), "VACUUM never waited");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn release(&self) {
        self.rt
            .block_on(self.locker.batch_execute("ROLLBACK"))
            .unwrap();
    }
}

#[test]
fn of_two_runs_started_together_one_works_postgres() {
    let Some(server) = require_postgres("maintain lease race") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = Db::pg(&server, "deerflow_app", "dfck_maint_race");
    // The winner's VACUUM waits on the lock, holding the lease, while the other run starts.
    race_behind_a_lock(&db, &db, dir.path());
}

/// Two `maintain --apply` runs started together on `through` while a lock on `direct`'s
/// `checkpoints` keeps the winner's VACUUM (and so its lease) waiting: exactly one works.
pub(super) fn race_behind_a_lock(through: &Db, direct: &Db, dir: &Path) {
    let lock = TableLock::take(direct);
    let p = policy(dir, "reclaim:\n  free_over: 0%\n");
    let mut a = spawn(through, &p, &["--apply"], None);
    let mut b = spawn(through, &p, &["--apply"], None);
    let t = Instant::now();
    while a.try_wait().unwrap().is_none() && b.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(60), "neither run ended");
        std::thread::sleep(Duration::from_millis(50));
    }
    lock.release();
    one_works([a.wait_with_output().unwrap(), b.wait_with_output().unwrap()]);
}

/// A stopped run's report: exit 0, its reclaim interrupted, the store's rows as `before`.
fn stopped_cleanly(out: &std::process::Output, db: &Db, before: &[String]) -> Json {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["reclaim"]["status"], "interrupted", "{r}");
    assert_eq!(r["run"]["ended"], "stopped");
    assert_eq!(db.dump(), before);
    r
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
    let lock = TableLock::take(&db);
    let p = policy(dir.path(), "reclaim:\n  free_over: 0%\n");
    let mut child = spawn(&db, &p, &["--apply"], None);
    lock.wait_for_a_waiter(&mut child);
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    lock.release();
    stopped_cleanly(&out, &db, &before);
}

#[test]
fn watch_survives_a_failed_cycle_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("deerflow_app");
    let Db::Sqlite(_, path) = &db else {
        unreachable!()
    };
    let away = dir.path().join("away.db");
    // The store goes away for a cycle, then comes back.
    watch_through_a_failure(
        &db,
        dir.path(),
        || std::fs::rename(path, &away).unwrap(),
        || std::fs::rename(&away, path).unwrap(),
    );
}

#[test]
fn watch_survives_a_failed_cycle_and_stops_on_sigterm_postgres() {
    let Some(server) = require_postgres("maintain --watch") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = Db::pg(&server, "deerflow_app", "dfck_maint_watch");
    // The database refuses new connections for a cycle, then takes them again.
    let rt = runtime();
    let admin = connect(&rt, &server);
    let allow = |on: bool| {
        rt.block_on(admin.batch_execute(&format!(
            "ALTER DATABASE dfck_maint_watch ALLOW_CONNECTIONS {on}"
        )))
        .unwrap()
    };
    watch_through_a_failure(&db, dir.path(), || allow(false), || allow(true));
}

/// `maintain --apply --watch 1s` while `break_store` makes one cycle fail until `mend_store`:
/// the loop reports the failure, goes on, and ends with exit 0 on SIGTERM.
fn watch_through_a_failure(
    db: &Db,
    dir: &Path,
    break_store: impl FnOnce(),
    mend_store: impl FnOnce(),
) {
    let p = policy(dir, "delete:\n  idle: 30d\nsweep:\n  limit: 1\n");
    let mut child = spawn(db, &p, &["--apply", "--watch", "1s"], None);
    std::thread::sleep(Duration::from_millis(600));
    break_store();
    std::thread::sleep(Duration::from_millis(1500));
    mend_store();
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
fn a_run_stops_at_its_time_budget_and_the_next_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("deerflow_app");
    // A chunk of one thread, held inside its transaction past the budget.
    let p = policy(
        dir.path(),
        "delete:\n  idle: 30d\nsweep:\n  limit: 1\n  time_budget: 1s\n",
    );
    let flag = dir.path().join("held");
    let mut child = spawn(&db, &p, &["--apply"], Some(("hold", &flag)));
    wait_for(&flag, &mut child);
    std::thread::sleep(Duration::from_millis(1200));
    std::fs::remove_file(&flag).unwrap();
    let out = child.wait_with_output().unwrap();
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["run"]["ended"], "time budget", "{r}");
    assert_eq!(r["run"]["threads_deleted"], 1);
    assert_eq!(r["next_after"], T02);
    let (r, _, _) = maintain(&db, &p, &["--apply"]);
    assert_eq!(r["resumed_after"], T02);
}

#[test]
fn first_runs_racing_to_create_the_lease_table_all_end_well_postgres() {
    let Some(server) = require_postgres("maintain first runs racing") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = policy(dir.path(), "verify: false\n");
    for round in 0..3 {
        // A fresh database each round: no dfck_maintenance yet.
        let db = Db::pg(
            &server,
            "deerflow_app",
            &format!("dfck_maint_first_{round}"),
        );
        let runs: Vec<Child> = (0..8).map(|_| spawn(&db, &p, &["--apply"], None)).collect();
        for out in runs.into_iter().map(|c| c.wait_with_output().unwrap()) {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "round {round}: {err}");
        }
    }
}
