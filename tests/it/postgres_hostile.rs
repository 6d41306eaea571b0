//! The PostgreSQL red team (see docs/reliability.md): each case damages its own copy of
//! the `delta_k3` fixture database (`CREATE DATABASE … TEMPLATE`) or attacks a running dfck
//! — corrupt blob bytes, JSONB of the wrong shape, missing blob versions, a connection
//! terminated mid-run, hostile database defaults, row and advisory locks, a concurrent
//! writer. Read commands answer with a `verify` finding or a one-line error, exit 1 or 2,
//! never a panic or a hang; `migrate` leaves an affected thread untouched (refused, or a
//! one-line error), never half written, and a re-run after the cause is gone finishes.

use crate::common::*;
use crate::postgres_hostile_db::{Db, Session};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// The thread every data case damages.
pub(crate) const VICTIM: &str = "t-linear";
/// The thread dfck converts last (threads go in id order).
const LAST: &str = "t-update";
/// Threads of the hostile store: the twin store's eight less the one the real library
/// contaminates (see `Db::fresh`).
const THREADS: u64 = 7;

/// Runs dfck with a deadline: a hang fails the test.
fn run(uri: &str, args: &[&str]) -> Output {
    let child = crate::common::dfck_command()
        .arg("--db")
        .arg(uri)
        .args(args)
        .env_remove("DFCK_DB")
        .env_remove("DFCK_FAILPOINT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(child, Duration::from_secs(120), args)
}

fn wait_bounded(mut child: std::process::Child, limit: Duration, what: &[&str]) -> Output {
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("dfck {what:?} hangs (over {limit:?})");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 1 or 2, no panic, and at most one line on stderr (exactly one, naming one of
/// `needles`, on exit 2).
fn assert_tidy_failure(o: &Output, needles: &[&str], what: &str) {
    let err = stderr(o);
    assert!(
        matches!(o.status.code(), Some(1 | 2)),
        "{what}: exit {:?}, stderr {err}",
        o.status.code()
    );
    assert!(!err.contains("panicked"), "{what}: panic: {err}");
    assert!(err.trim_end().lines().count() <= 1, "{what}: {err:?}");
    if o.status.code() == Some(2) {
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err:?}");
        assert!(
            needles.iter().any(|n| err.contains(n)),
            "{what}: the error should name one of {needles:?}: {err}"
        );
    }
}

fn migrate(uri: &str, extra: &[&str]) -> (Json, Output) {
    let mut args = vec![
        "migrate",
        "delta-to-full",
        "--all",
        "--apply",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let o = run(uri, &args);
    (serde_json::from_slice(&o.stdout).unwrap_or(Json::Null), o)
}

fn thread_report<'a>(report: &'a Json, thread: &str) -> &'a Json {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == thread)
        .unwrap_or_else(|| panic!("no {thread} in {report}"))
}

/// The victim's checkpoint ids, newest first.
fn victim_checkpoints(db: &Db) -> Vec<String> {
    db.session().strings(&format!(
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = '{VICTIM}' ORDER BY 1 DESC"
    ))
}

/// A damaged victim: `verify` reports `finding` on it (or, with `None`, at least does not
/// fail), `inspect --state` at every checkpoint answers or fails in one line naming the
/// thread, `migrate` leaves the victim untouched or, when it converts, keeps every state
/// `inspect` could show; once the rows are restored a re-run finishes.
fn corruption_case(tag: &str, damage: &str, finding: Option<&str>) -> Option<String> {
    let db = Db::fresh(tag)?;
    db.save_victim();
    db.exec(damage);
    let ids = victim_checkpoints(&db);
    // verify
    let o = run(&db.uri, &["verify", "--format", "json"]);
    let mut observed = format!("verify exit {:?}", o.status.code());
    match finding {
        Some(code) => {
            assert_eq!(o.status.code(), Some(1), "{tag}: verify: {}", stderr(&o));
            let j: Json = serde_json::from_slice(&o.stdout).unwrap();
            let hit = j["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["code"] == code && f["thread_id"] == VICTIM);
            assert!(hit, "{tag}: no {code} on {VICTIM}: {j}");
            observed.push_str(&format!(" ({code})"));
        }
        None => assert_tidy_or_clean(&o, tag),
    }
    // inspect --state at every checkpoint
    let mut states: BTreeMap<String, Json> = BTreeMap::new();
    let mut failed = 0;
    for id in &ids {
        let o = run(
            &db.uri,
            &[
                "inspect",
                VICTIM,
                "--state",
                "--checkpoint",
                id,
                "--format",
                "json",
            ],
        );
        if o.status.success() {
            let j: Json = serde_json::from_slice(&o.stdout).unwrap();
            states.insert(id.clone(), j["values"].clone());
        } else {
            assert_tidy_failure(&o, &[VICTIM, id], &format!("{tag}: inspect --state {id}"));
            failed += 1;
        }
    }
    observed.push_str(&format!(
        "; inspect --state fails in one line at {failed}/{} checkpoints",
        ids.len()
    ));
    // migrate
    let before = db.thread_rows(VICTIM);
    let (report, o) = migrate(&db.uri, &[]);
    assert_tidy_or_clean(&o, tag);
    let status = if report.is_null() {
        format!("error: {}", stderr(&o).trim_end())
    } else {
        thread_report(&report, VICTIM)["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    if db.thread_rows(VICTIM) != before {
        // Converted: every state inspect showed before is still shown.
        assert_eq!(status, "converted", "{tag}: {report}");
        for (id, values) in &states {
            let j = dfck_json(
                &db.uri,
                &[
                    "inspect",
                    VICTIM,
                    "--state",
                    "--checkpoint",
                    id,
                    "--format",
                    "json",
                ],
            );
            assert_eq!(
                &j["values"], values,
                "{tag}: converted state differs at {id}"
            );
        }
    } else {
        assert_ne!(status, "converted", "{tag}: {report}");
    }
    observed.push_str(&format!(
        "; migrate exit {:?}, {VICTIM} {status}",
        o.status.code()
    ));
    // The cause is gone: a re-run finishes.
    db.restore_victim();
    let (report, o) = migrate(&db.uri, &[]);
    assert_eq!(o.status.code(), Some(0), "{tag}: re-run: {report}");
    let (report, _) = migrate(&db.uri, &[]);
    assert_eq!(report["converted"], 0, "{tag}: third run: {report}");
    println!("{tag}: {observed}");
    Some(observed)
}

fn assert_tidy_or_clean(o: &Output, what: &str) {
    if o.status.code() != Some(0) {
        assert_tidy_failure(o, &[VICTIM, "checkpoint"], what);
    }
}

#[test]
fn corrupt_blob_bytes() {
    corruption_case(
        "blob_bytes",
        &format!(
            "UPDATE checkpoint_blobs SET blob = '\\xdeadbeef' \
             WHERE thread_id = '{VICTIM}' AND channel = 'messages'"
        ),
        Some("value.undecodable"),
    );
}

#[test]
fn checkpoint_jsonb_is_an_array() {
    corruption_case(
        "checkpoint_array",
        &format!(
            "UPDATE checkpoints SET checkpoint = '[]' WHERE thread_id = '{VICTIM}' AND checkpoint_id = \
             (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = '{VICTIM}')"
        ),
        Some("value.undecodable"),
    );
}

#[test]
fn channel_versions_is_a_string() {
    corruption_case(
        "versions_string",
        &format!(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{{channel_versions}}', '\"oops\"') \
             WHERE thread_id = '{VICTIM}'"
        ),
        Some("value.undecodable"),
    );
}

#[test]
fn channel_versions_is_missing() {
    // LangGraph reads such a checkpoint too (it joins no blob): not an error by itself.
    corruption_case(
        "versions_missing",
        &format!(
            "UPDATE checkpoints SET checkpoint = checkpoint - 'channel_versions' WHERE thread_id = '{VICTIM}'"
        ),
        None,
    );
}

#[test]
fn channel_values_is_a_string() {
    corruption_case(
        "values_string",
        &format!(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{{channel_values}}', '\"oops\"') \
             WHERE thread_id = '{VICTIM}'"
        ),
        Some("value.undecodable"),
    );
}

#[test]
fn metadata_jsonb_is_an_array() {
    corruption_case(
        "metadata_array",
        &format!("UPDATE checkpoints SET metadata = '[1, 2]' WHERE thread_id = '{VICTIM}'"),
        Some("value.undecodable"),
    );
}

#[test]
fn metadata_counters_are_a_string() {
    corruption_case(
        "counters_string",
        &format!(
            "UPDATE checkpoints SET metadata = jsonb_set(metadata, '{{counters_since_delta_snapshot}}', '\"x\"') \
             WHERE thread_id = '{VICTIM}' AND metadata ? 'counters_since_delta_snapshot'"
        ),
        None,
    );
}

#[test]
fn missing_blob_versions() {
    corruption_case(
        "missing_blobs",
        &format!(
            "DELETE FROM checkpoint_blobs WHERE thread_id = '{VICTIM}' AND channel = 'messages' AND version IN \
             (SELECT version FROM checkpoint_blobs WHERE thread_id = '{VICTIM}' AND channel = 'messages' \
              ORDER BY version LIMIT 2)"
        ),
        None,
    );
}

/// Waits until dfck's backend on `db` is waiting for a lock; returns its pid.
fn dfck_backend_waiting(watch: &Session, db: &str) -> i32 {
    let t0 = Instant::now();
    loop {
        let rows = watch
            .rt
            .block_on(watch.client.query(
                "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'dfck %' AND datname = $1 \
                 AND wait_event_type = 'Lock'",
                &[&db],
            ))
            .unwrap();
        if let Some(r) = rows.first() {
            return r.get(0);
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "dfck never waited");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn spawn(uri: &str, args: &[&str]) -> std::process::Child {
    crate::common::dfck_command()
        .arg("--db")
        .arg(uri)
        .args(args)
        .env_remove("DFCK_DB")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// After a run stopped by a store error: the thread that was being written is untouched,
/// a re-run finishes and a third converts nothing.
fn assert_finishes_after(db: &Db, what: &str) {
    let (report, o) = migrate(&db.uri, &[]);
    assert_eq!(o.status.code(), Some(0), "{what}: re-run: {report}");
    let (report, _) = migrate(&db.uri, &[]);
    assert_eq!(report["converted"], 0, "{what}: third run: {report}");
}

#[test]
fn a_terminated_connection_mid_migrate_is_a_one_line_error() {
    let Some(db) = Db::fresh("terminate") else {
        return;
    };
    let before = db.thread_rows(LAST);
    // A session holds the last thread's rows, so dfck is mid-run when it is cut off.
    let holder = db.session();
    holder.exec(&format!(
        "BEGIN; SELECT 1 FROM checkpoints WHERE thread_id = '{LAST}' FOR UPDATE"
    ));
    let args = ["migrate", "delta-to-full", "--all", "--apply"];
    let child = spawn(&db.uri, &args);
    let watch = db.session();
    let pid = dfck_backend_waiting(&watch, &db.name);
    watch.count(&format!(
        "SELECT count(*) FROM (SELECT pg_terminate_backend({pid})) t"
    ));
    let o = wait_bounded(child, Duration::from_secs(60), &args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_tidy_failure(&o, &["terminat", "connection"], "terminated");
    holder.exec("ROLLBACK");
    assert_eq!(
        before,
        db.thread_rows(LAST),
        "the cut-off thread was written"
    );
    println!("terminated backend: {}", stderr(&o).trim_end());
    assert_finishes_after(&db, "terminated");
}

#[test]
fn a_terminated_connection_mid_read_is_a_one_line_error() {
    let Some(db) = Db::fresh("terminate_read") else {
        return;
    };
    // An exclusive table lock makes the read wait, so it can be cut off mid-run.
    let holder = db.session();
    holder.exec("BEGIN; LOCK TABLE checkpoint_blobs IN ACCESS EXCLUSIVE MODE");
    let args = ["verify"];
    let child = spawn(&db.uri, &args);
    let watch = db.session();
    let pid = dfck_backend_waiting(&watch, &db.name);
    watch.count(&format!(
        "SELECT count(*) FROM (SELECT pg_terminate_backend({pid})) t"
    ));
    let o = wait_bounded(child, Duration::from_secs(60), &args);
    holder.exec("ROLLBACK");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_tidy_failure(&o, &["terminat", "connection"], "terminated read");
    println!("terminated read: {}", stderr(&o).trim_end());
}

#[test]
fn hostile_database_timeouts_do_not_cancel_dfck() {
    let Some(db) = Db::fresh("timeouts") else {
        return;
    };
    // dfck sets its own limits on its sessions (see docs/reliability.md).
    db.exec(&format!(
        "ALTER DATABASE \"{0}\" SET statement_timeout = '1ms'; \
         ALTER DATABASE \"{0}\" SET idle_in_transaction_session_timeout = '1ms'; \
         ALTER DATABASE \"{0}\" SET lock_timeout = '1ms'",
        db.name
    ));
    let o = run(&db.uri, &["verify"]);
    assert_eq!(o.status.code(), Some(0), "verify: {}", stderr(&o));
    let o = run(&db.uri, &["inspect", VICTIM, "--state"]);
    assert_eq!(o.status.code(), Some(0), "inspect: {}", stderr(&o));
    let (report, o) = migrate(&db.uri, &["--jobs", "2"]);
    assert_eq!(o.status.code(), Some(0), "migrate: {report} {}", stderr(&o));
    assert_eq!(report["converted"], THREADS, "{report}");
    assert_finishes_after(&db, "timeouts");
}

#[test]
fn a_row_lock_held_past_the_lock_timeout_stops_the_run_cleanly() {
    let Some(db) = Db::fresh("row_lock") else {
        return;
    };
    let before = db.thread_rows(LAST);
    let holder = db.session();
    holder.exec(&format!(
        "BEGIN; SELECT 1 FROM checkpoint_blobs WHERE thread_id = '{LAST}' FOR UPDATE"
    ));
    // Reads do not wait for row locks.
    let o = run(&db.uri, &["verify"]);
    assert_eq!(o.status.code(), Some(0), "verify: {}", stderr(&o));
    let t0 = Instant::now();
    let (report, o) = migrate(&db.uri, &[]);
    let waited = t0.elapsed();
    assert!(
        matches!(o.status.code(), Some(1 | 2)),
        "{report} {}",
        stderr(&o)
    );
    assert_tidy_failure(&o, &["lock", LAST], "row lock");
    assert_eq!(
        before,
        db.thread_rows(LAST),
        "the locked thread was written"
    );
    holder.exec("ROLLBACK");
    println!(
        "row lock: exit {:?} after {waited:.1?}: {}",
        o.status.code(),
        stderr(&o).trim_end()
    );
    assert_finishes_after(&db, "row lock");
}

#[test]
fn an_advisory_lock_held_by_another_dfck_refuses_only_that_thread() {
    let Some(db) = Db::fresh("advisory") else {
        return;
    };
    let before = db.thread_rows(VICTIM);
    let holder = db.session();
    holder.exec(&format!(
        "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('dfck migrate ' || '{VICTIM}', 0))"
    ));
    let (report, o) = migrate(&db.uri, &["--jobs", "2"]);
    assert_eq!(o.status.code(), Some(1), "{report}");
    assert_eq!(thread_report(&report, VICTIM)["status"], "refused");
    assert_eq!(report["refused"], 1, "{report}");
    assert_eq!(before, db.thread_rows(VICTIM));
    holder.exec("ROLLBACK");
    assert_finishes_after(&db, "advisory");
}

#[test]
fn a_concurrent_writer_of_other_threads_loses_nothing() {
    let Some(db) = Db::fresh("writer") else {
        return;
    };
    let expected = dfck_json(&db.uri, &["inspect", VICTIM, "--state", "--format", "json"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (w_uri, w_stop) = (db.uri.clone(), stop.clone());
    // Copies of the victim appear as new threads, one transaction each, during migrate.
    let writer = std::thread::spawn(move || {
        let s = Session::open(&w_uri);
        let mut n = 0;
        while (!w_stop.load(std::sync::atomic::Ordering::Relaxed) && n < 12) || n < 3 {
            s.exec(&format!(
                "BEGIN; \
                 INSERT INTO checkpoints SELECT 'zz-new-{n}', checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
                   type, checkpoint, metadata FROM checkpoints WHERE thread_id = '{VICTIM}'; \
                 INSERT INTO checkpoint_blobs SELECT 'zz-new-{n}', checkpoint_ns, channel, version, type, blob \
                   FROM checkpoint_blobs WHERE thread_id = '{VICTIM}'; \
                 INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, \
                   channel, type, blob) SELECT 'zz-new-{n}', checkpoint_ns, checkpoint_id, task_id, task_path, idx, \
                   channel, type, blob FROM checkpoint_writes WHERE thread_id = '{VICTIM}'; \
                 COMMIT;"
            ));
            n += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        n
    });
    let (report, o) = migrate(&db.uri, &["--jobs", "2"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{report} {}", stderr(&o));
    let s = db.session();
    let threads = s
        .count("SELECT count(DISTINCT thread_id) FROM checkpoints WHERE thread_id LIKE 'zz-new-%'");
    assert_eq!(threads, written as i64, "a written thread is lost");
    let per = s.count(&format!(
        "SELECT count(*) FROM checkpoints WHERE thread_id = '{VICTIM}'"
    ));
    let all = s.count("SELECT count(*) FROM checkpoints WHERE thread_id LIKE 'zz-new-%'");
    assert_eq!(all, per * written as i64, "a written checkpoint is lost");
    assert_finishes_after(&db, "writer");
    // Converted or not, each copy shows the victim's head state.
    for n in [0, written - 1] {
        let t = format!("zz-new-{n}");
        let got = dfck_json(&db.uri, &["inspect", &t, "--state", "--format", "json"]);
        assert_eq!(got["values"], expected["values"], "{t}");
    }
    println!(
        "concurrent writer: {written} threads written during migrate, {} converted by it",
        report["converted"]
    );
}

#[test]
fn a_schema_store_under_a_hostile_search_path_converts_in_its_schema() {
    let Some(db) = Db::fresh("schema") else {
        return;
    };
    // The tables move to schema `lg`; the database's default search_path points elsewhere.
    db.exec(&format!(
        "CREATE SCHEMA lg; \
         ALTER TABLE checkpoints SET SCHEMA lg; ALTER TABLE checkpoint_blobs SET SCHEMA lg; \
         ALTER TABLE checkpoint_writes SET SCHEMA lg; ALTER TABLE checkpoint_migrations SET SCHEMA lg; \
         ALTER DATABASE \"{}\" SET search_path = nowhere",
        db.name
    ));
    let o = run(&db.uri, &["--pg-schema", "lg", "verify"]);
    assert_eq!(o.status.code(), Some(0), "verify: {}", stderr(&o));
    let (report, o) = migrate_in(&db.uri, "lg", &["--jobs", "2"]);
    assert_eq!(o.status.code(), Some(0), "{report} {}", stderr(&o));
    assert_eq!(report["converted"], THREADS, "{report}");
    let (report, o) = migrate_in(&db.uri, "lg", &[]);
    assert_eq!(o.status.code(), Some(0), "{report} {}", stderr(&o));
    assert_eq!(report["converted"], 0, "{report}");
}

/// `migrate` on the store in schema `schema` (`--pg-schema` goes before the command).
fn migrate_in(uri: &str, schema: &str, extra: &[&str]) -> (Json, Output) {
    let mut args = vec![
        "--pg-schema",
        schema,
        "migrate",
        "delta-to-full",
        "--all",
        "--apply",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let o = run(uri, &args);
    (serde_json::from_slice(&o.stdout).unwrap_or(Json::Null), o)
}

#[test]
fn read_commands_leave_a_postgres_store_unchanged() {
    let Some(db) = Db::fresh("read_only") else {
        return;
    };
    let threads = db
        .session()
        .strings("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1");
    let dump = || -> Vec<Vec<String>> { threads.iter().map(|t| db.thread_rows(t)).collect() };
    let before = dump();
    for args in [
        &["inspect"][..],
        &["inspect", VICTIM, "--state"],
        &["verify", "--jobs", "2"],
        &["lineage", VICTIM, "--tree"],
        &["migrate", "delta-to-full", "--all"],
    ] {
        let o = run(&db.uri, args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(before, dump(), "a read command changed the store");
}
