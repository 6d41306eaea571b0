//! `dfck migrate delta-to-full --apply` on SQLite: after conversion every checkpoint of
//! every delta, mixed and DeerFlow fixture shows exactly what LangGraph showed in delta
//! mode, no delta signal remains, ids/parents/writes are untouched, a re-run converts
//! nothing; killing dfck mid-conversion leaves each thread old or new; a concurrent writer
//! loses nothing.

use crate::common::*;
use rusqlite::Connection;
use serde_json::Value as Json;
use std::path::Path;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `migrate --all --apply`, accepting the delta view: the twin fixtures hold one thread
/// (`t-resume-old-update`) where the real library itself leaks a later resume's note into the
/// first branch, which a plain run refuses (see [`apply_strict`]).
fn apply(db: &Path, extra: &[&str]) -> (Json, i32) {
    let mut all = vec!["--accept-delta-view"];
    all.extend_from_slice(extra);
    apply_strict(db, &all)
}

/// `migrate --all --apply` as given: contaminated forks are refused.
fn apply_strict(db: &Path, extra: &[&str]) -> (Json, i32) {
    let mut args = vec![
        "migrate",
        "delta-to-full",
        "--all",
        "--apply",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = dfck(&s(db), &args);
    let code = out.status.code().unwrap_or(-1);
    let j = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
    (j, code)
}

/// (thread, ns, id, parent, type) of a checkpoint.
type CheckpointKey = (String, String, String, Option<String>, Option<String>);

/// The key of every checkpoint, and every write row.
fn untouched_rows(db: &Path) -> (Vec<CheckpointKey>, Vec<Vec<u8>>) {
    let conn = Connection::open(db).unwrap();
    let mut st = conn
        .prepare("SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type FROM checkpoints ORDER BY 1, 2, 3")
        .unwrap();
    let cks = st
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let mut st = conn
        .prepare("SELECT thread_id || '|' || checkpoint_ns || '|' || checkpoint_id || '|' || task_id || '|' || task_path || '|' || idx || '|' || channel || '|' || coalesce(type, ''), value FROM writes ORDER BY 1")
        .unwrap();
    let writes = st
        .query_map([], |r| {
            let mut k: Vec<u8> = r.get::<_, String>(0)?.into_bytes();
            k.extend(
                r.get_ref(1)?
                    .as_bytes_or_null()
                    .unwrap_or_default()
                    .unwrap_or_default(),
            );
            Ok(k)
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    (cks, writes)
}

#[test]
fn converted_fixtures_show_the_delta_view_everywhere() {
    let mut total = 0;
    for stem in ["delta_k1", "delta_k3", "delta_k10", "mixed", "deerflow"] {
        let (_dir, db) = temp_copy(&sqlite_fixture(stem));
        let before = untouched_rows(&db);
        let (report, exit) = apply(&db, &[]);
        assert_eq!(exit, 0, "{stem}: {report}");
        assert_eq!(report["dry_run"], false);
        assert_eq!(report["refused"], 0, "{stem}: {report}");
        assert!(report["converted"].as_u64().unwrap() > 0);
        // Every value equals what LangGraph showed before the conversion.
        let (tally, bad) = compare::check_fixture_as(stem, &s(&db), &expected(stem), true);
        assert!(bad.is_empty(), "{stem}: {bad:#?}");
        total += tally.states;
        // No delta signal left: full mode everywhere, plain or unversioned messages.
        for t in expected(stem)["threads"].as_array().unwrap() {
            let tid = t["thread_id"].as_str().unwrap();
            let listing = dfck_json(&s(&db), &["inspect", tid, "--format", "json"]);
            for c in listing["checkpoints"].as_array().unwrap() {
                assert_eq!(c["mode"], "full", "{stem} {tid} {}", c["checkpoint_id"]);
                assert!(
                    c["messages_encoding"] == "plain" || c["messages_encoding"] == "unversioned",
                    "{stem} {tid}: {c}"
                );
            }
        }
        let out = dfck(&s(&db), &["verify"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        // Ids, parents, types and every write row are byte-identical.
        assert_eq!(before, untouched_rows(&db), "{stem}: rows changed");
        // A second run converts nothing.
        let (again, exit) = apply(&db, &[]);
        assert_eq!(exit, 0);
        assert_eq!(again["converted"], 0, "{stem}: {again}");
    }
    println!("migrate: {total} converted checkpoint states equal LangGraph's delta view");
}

#[test]
fn contaminated_forks_are_refused_unless_the_delta_view_is_accepted() {
    let (_dir, db) = temp_copy(&root().join("fixtures/defects/contaminated_fork.db"));
    let bytes = std::fs::read(&db).unwrap();
    let (report, exit) = apply_strict(&db, &[]);
    assert_eq!(exit, 1, "{report}");
    assert_eq!(report["refused"], 1);
    assert_eq!(
        bytes,
        std::fs::read(&db).unwrap(),
        "a refused thread is not written"
    );
    // The delta view at every checkpoint, before.
    let listing = dfck_json(&s(&db), &["inspect", "t-fork", "--format", "json"]);
    let ids: Vec<String> = listing["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkpoint_id"].as_str().unwrap().to_owned())
        .collect();
    let view = |id: &str| {
        dfck_json(
            &s(&db),
            &[
                "inspect",
                "t-fork",
                "--state",
                "--checkpoint",
                id,
                "--format",
                "json",
            ],
        )["values"]
            .clone()
    };
    let before: Vec<Json> = ids.iter().map(|id| view(id)).collect();
    let (report, exit) = apply_strict(&db, &["--accept-delta-view"]);
    assert_eq!(exit, 0, "{report}");
    assert_eq!(report["converted"], 1);
    assert_eq!(
        report["threads"][0]["accepted_delta_view"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let after: Vec<Json> = ids.iter().map(|id| view(id)).collect();
    assert_eq!(before, after, "converted to exactly what delta mode showed");
}

#[test]
fn backup_is_written_first() {
    let (dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let backup = dir.path().join("backup.db");
    let (_, exit) = apply(&db, &["--backup", &s(&backup)]);
    assert_eq!(exit, 0);
    let orig = dfck_json(
        &s(&sqlite_fixture("delta_k3")),
        &["inspect", "--format", "json"],
    );
    let copy = dfck_json(&s(&backup), &["inspect", "--format", "json"]);
    assert_eq!(
        orig["threads"].as_array().unwrap().len(),
        copy["threads"].as_array().unwrap().len()
    );
    for (a, b) in orig["threads"]
        .as_array()
        .unwrap()
        .iter()
        .zip(copy["threads"].as_array().unwrap())
    {
        assert_eq!(a["mode"], b["mode"]);
        assert_eq!(a["checkpoints"], b["checkpoints"]);
    }
    // An existing target is refused before anything is written.
    let (_, exit) = apply(&db, &["--backup", &s(&backup)]);
    assert_eq!(exit, 2);
}

/// Thread id → whether every checkpoint is converted (true), untouched (false), or
/// neither (panics: a half-converted thread).
fn thread_states(db: &Path, orig: &Path) -> Vec<(String, bool)> {
    let now = Connection::open(db).unwrap();
    let was = Connection::open(orig).unwrap();
    let ids: Vec<String> = now
        .prepare("SELECT DISTINCT thread_id FROM checkpoints ORDER BY 1")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let rows = |c: &Connection, t: &str| -> Vec<(String, Vec<u8>, Vec<u8>)> {
        c.prepare("SELECT checkpoint_id, checkpoint, metadata FROM checkpoints WHERE thread_id = ?1 ORDER BY 1")
            .unwrap()
            .query_map([t], |r| Ok((r.get(0)?, r.get(1)?, r.get_ref(2)?.as_bytes().unwrap().to_vec())))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    ids.into_iter()
        .map(|t| {
            let (a, b) = (rows(&now, &t), rows(&was, &t));
            if a == b {
                return (t, false);
            }
            let delta_left = a.iter().any(|(_, _, m)| {
                let m = String::from_utf8_lossy(m);
                m.contains("deerflow_checkpoint_channel_mode") || m.contains("\"messages\": [")
            });
            assert!(!delta_left, "thread {t} is half converted");
            (t, true)
        })
        .collect()
}

#[test]
fn killing_dfck_mid_conversion_leaves_each_thread_old_or_new() {
    for after in [1usize, 20, 45] {
        let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
        let out = crate::common::dfck_command()
            .args([
                "--db",
                &s(&db),
                "migrate",
                "delta-to-full",
                "--all",
                "--apply",
                "--accept-delta-view",
            ])
            .env("DFCK_FAILPOINT", format!("migrate-abort-after:{after}"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "the failpoint must kill the process");
        assert_eq!(out.status.code(), None, "killed by a signal");
        let states = thread_states(&db, &sqlite_fixture("delta_k3"));
        let converted = states.iter().filter(|(_, c)| *c).count();
        assert!(converted < states.len(), "after {after}: {states:?}");
        // The store stays readable, and a re-run finishes the job.
        let (report, exit) = apply(&db, &[]);
        assert_eq!(exit, 0, "{report}");
        assert_eq!(
            report["converted"].as_u64().unwrap() as usize,
            states.len() - converted
        );
        assert!(
            thread_states(&db, &sqlite_fixture("delta_k3"))
                .iter()
                .all(|(_, c)| *c)
        );
        let (again, _) = apply(&db, &[]);
        assert_eq!(again["converted"], 0);
    }
}

#[test]
fn a_concurrent_writer_on_another_thread_loses_nothing() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k10"));
    let path = db.clone();
    let writer = std::thread::spawn(move || {
        let conn = Connection::open(&path).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .unwrap();
        for i in 0..200 {
            conn.execute(
                "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value) \
                 VALUES ('zz-other', '', 'c', 't', '', ?1, 'x', 'null', X'')",
                [i],
            )
            .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    let (report, exit) = apply(&db, &[]);
    writer.join().unwrap();
    assert_eq!(exit, 0, "{report}");
    let conn = Connection::open(&db).unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM writes WHERE thread_id = 'zz-other'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 200);
}

#[test]
fn apply_on_an_unreachable_postgres_fails_cleanly() {
    let out = dfck(
        "postgresql://u:pw@127.0.0.1:1/db",
        &["migrate", "delta-to-full", "--all", "--apply"],
    );
    assert_clean_failure(&out, "127.0.0.1");
}

#[test]
fn an_active_deerflow_run_blocks_its_thread() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, thread_id TEXT, status TEXT);
         INSERT INTO runs VALUES ('r1', 't-linear', 'running'), ('r2', 't-fork', 'success');",
    )
    .unwrap();
    drop(conn);
    let (report, exit) = apply(&db, &[]);
    assert_eq!(exit, 1, "{report}");
    let linear = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == "t-linear")
        .unwrap();
    assert_eq!(linear["status"], "refused");
    assert!(linear["reason"].as_str().unwrap().contains("running run"));
    let fork = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == "t-fork")
        .unwrap();
    assert_eq!(fork["status"], "converted");
}

#[test]
fn a_full_disk_refuses_the_thread_and_writes_nothing() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let before = std::fs::read(&db).unwrap();
    let out = crate::common::dfck_command()
        .args([
            "--db",
            &s(&db),
            "migrate",
            "delta-to-full",
            "t-linear",
            "--apply",
            "--format",
            "json",
        ])
        .env("DFCK_FAILPOINT", "free-bytes:1000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["threads"][0]["status"], "refused");
    assert!(
        j["threads"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("not enough disk space")
    );
    assert_eq!(before, std::fs::read(&db).unwrap());
}

#[test]
fn a_rollback_journal_store_converts_with_sqlites_defaults() {
    // The background checkpointer and synchronous=NORMAL are for WAL files only.
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let conn = Connection::open(&db).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    drop(conn);
    let (report, exit) = apply(&db, &[]);
    assert_eq!(exit, 0, "{report}");
    assert_eq!(report["converted"], 8, "{report}");
    let conn = Connection::open(&db).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    let (_, exit) = apply(&db, &[]);
    assert_eq!(exit, 0);
    assert!(!db.with_extension("db-wal").exists());
}

/// A thread that fits the free space alone but not beside the rows of the group
/// transaction it would join gets a transaction of its own: with just enough space for the
/// largest thread, every thread converts, grouped or not.
#[test]
fn a_thread_too_big_for_its_group_goes_alone_and_is_not_refused() {
    let run = |free: u64, group: &str| {
        let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
        let out = crate::common::dfck_command()
            .args(["--db", &s(&db), "migrate", "delta-to-full", "--all"])
            .args(["--apply", "--accept-delta-view", "--format", "json"])
            .env("DFCK_FAILPOINT", format!("free-bytes:{free}{group}"))
            .output()
            .unwrap();
        let j: Json = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
        (
            j["converted"].as_u64().unwrap_or(0),
            j["refused"].as_u64().unwrap_or(0),
        )
    };
    // The least free space at which no thread is refused, one thread per transaction.
    let (mut low, mut high) = (4u64 << 20, 64u64 << 20);
    assert_eq!(
        run(high, ",group-threads:1").1,
        0,
        "64 MiB is room for every thread"
    );
    assert!(
        run(low, ",group-threads:1").1 > 0,
        "the reserve alone fits no thread"
    );
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if run(mid, ",group-threads:1").1 == 0 {
            high = mid;
        } else {
            low = mid;
        }
    }
    let (alone, _) = run(high, ",group-threads:1");
    assert_eq!(alone, 8);
    // Two threads together do not fit there: the groups must hand threads over.
    assert_eq!(run(high, ""), (8, 0), "grouped, at {high} free bytes");
    assert_eq!(
        run(high, ",group-threads:2"),
        (8, 0),
        "groups of two, at {high}"
    );
}
