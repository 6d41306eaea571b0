//! A thread larger than the in-memory budget of write commands is loaded as structure and
//! read back one checkpoint at a time (`whole-bytes:0` forces that path on every thread):
//! `prune` plans, writes and verifies it exactly as it does a thread held whole — the same
//! report, the same rows afterwards. (`migrate full-to-delta`'s twin test is in
//! migrate_full_to_delta.rs.)

use crate::common::pg::{clone_db, connect, runtime};
use crate::common::store_rows::{pg_rows, sqlite_rows};
use crate::common::*;
use rusqlite::Connection;
use serde_json::Value as Json;

/// Runs `prune ARGS --format json`, read back a checkpoint at a time when `read_back`.
fn prune(target: &str, args: &[&str], read_back: bool) -> (Json, i32) {
    let mut cmd = dfck_command();
    if read_back {
        cmd.env("DFCK_FAILPOINT", "whole-bytes:0");
    }
    let out = cmd
        .arg("--db")
        .arg(target)
        .arg("prune")
        .args(args)
        .args(["--format", "json"])
        .output()
        .expect("run dfck");
    let j = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
    (j, out.status.code().unwrap_or(-1))
}

/// The prunes compared: every shape with branches, and history trimming (which refuses
/// some threads of the retention fixture).
const RUNS: &[&[&str]] = &[
    &["--all", "--branches", "--apply"],
    &["--all", "--keep-last-turns", "2", "--apply"],
];

#[test]
fn sqlite_prune_of_a_thread_read_back_checkpoint_by_checkpoint_equals_one_held_whole() {
    let mut deleted = 0;
    for stem in ["retention", "full", "forks_full", "deerflow"] {
        for args in RUNS {
            let (_da, a) = temp_copy(&sqlite_fixture(stem));
            let (_db, b) = temp_copy(&sqlite_fixture(stem));
            let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
            let (held, code_a) = prune(&a, args, false);
            let (read_back, code_b) = prune(&b, args, true);
            assert_eq!((code_a, &held), (code_b, &read_back), "{stem} {args:?}");
            assert_eq!(
                sqlite_rows(&a),
                sqlite_rows(&b),
                "{stem} {args:?}: rows differ"
            );
            deleted += held["threads"]
                .as_array()
                .expect("threads")
                .iter()
                .filter_map(|t| t["checkpoints"].as_u64())
                .sum::<u64>();
        }
    }
    println!("{deleted} checkpoints pruned alike, read back or held whole");
    assert!(deleted > 20, "{deleted}");
}

#[test]
fn postgres_prune_of_a_thread_read_back_checkpoint_by_checkpoint_equals_one_held_whole() {
    let Some(server) = require_postgres("prune read back on PostgreSQL") else {
        return;
    };
    let fresh = |name: &str| clone_db(&server, "dfck_retention", name);
    for args in RUNS {
        let a = fresh("dfck_read_back_held");
        let b = fresh("dfck_read_back_streamed");
        let (held, code_a) = prune(&a, args, false);
        let (read_back, code_b) = prune(&b, args, true);
        assert_eq!((code_a, &held), (code_b, &read_back), "{args:?}");
        assert!(held["checkpoints"].as_u64() > Some(0), "{held}");
        assert_eq!(pg_rows(&a), pg_rows(&b), "{args:?}: rows differ");
    }
    let rt = runtime();
    let admin = connect(&rt, &server);
    for name in ["dfck_read_back_held", "dfck_read_back_streamed"] {
        let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        let _ = rt.block_on(admin.batch_execute(&sql));
    }
}

/// A copy of fixture `full` whose newest `t-linear` checkpoint has one byte of a message
/// string made invalid UTF-8: its lengths still parse, its content does not decode.
fn damaged_full() -> (tempfile::TempDir, String) {
    let (dir, db) = temp_copy(&sqlite_fixture("full"));
    let c = Connection::open(&db).expect("open");
    let (id, mut body): (String, Vec<u8>) = c
        .query_row(
            "SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id = 't-linear' \
             ORDER BY checkpoint_id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("head");
    let (slice, _) = dfck_core::codec::checkpoint_messages_slice(&body).expect("scan");
    let slice = slice.expect("the head stores messages");
    let start = slice.as_ptr() as usize - body.as_ptr() as usize;
    let end = start + slice.len();
    let at = (start..end - 4)
        .find(|&i| {
            (0xa3..=0xbf).contains(&body[i])
                && body[i + 1..i + 4].iter().all(u8::is_ascii_alphabetic)
        })
        .expect("a string in the messages")
        + 1;
    body[at] = 0xff;
    c.execute(
        "UPDATE checkpoints SET checkpoint = ?1 WHERE thread_id = 't-linear' AND checkpoint_id = ?2",
        rusqlite::params![body, id],
    )
    .expect("damage");
    (dir, db.to_string_lossy().into_owned())
}

#[test]
fn damaged_messages_are_refused_whether_the_thread_is_held_or_read_back() {
    for read_back in [false, true] {
        for args in [
            &["migrate", "full-to-delta", "t-linear", "--apply"][..],
            &["prune", "t-linear", "--keep-last-turns", "1", "--apply"][..],
        ] {
            let (_dir, db) = damaged_full();
            let before = sqlite_rows(&db);
            let mut cmd = dfck_command();
            if read_back {
                cmd.env("DFCK_FAILPOINT", "whole-bytes:0");
            }
            let out = cmd
                .arg("--db")
                .arg(&db)
                .args(args)
                .args(["--format", "json"])
                .output()
                .expect("run dfck");
            let report: Json = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{args:?} read back {read_back}: {report}"
            );
            assert_eq!(report["threads"][0]["status"], "refused", "{report}");
            assert_eq!(
                sqlite_rows(&db),
                before,
                "{args:?} read back {read_back}: rows changed"
            );
        }
    }
}

/// A checkpoint that cannot be read (a pickled one) refuses its thread with the reader's own
/// words, once: "unreadable checkpoint: thread 'T' checkpoint ID: …", held or read back.
#[test]
fn an_unreadable_checkpoint_is_named_once_in_the_refusal() {
    for read_back in [false, true] {
        let (_d, db) = temp_copy(&sqlite_fixture("pickle"));
        let args = ["--all", "--branches", "--keep-last-turns", "2"];
        let (report, code) = prune(&db.to_string_lossy(), &args, read_back);
        assert_eq!(code, 1, "{report}");
        let reasons: Vec<&str> = report["threads"]
            .as_array()
            .expect("threads")
            .iter()
            .filter_map(|t| t["reason"].as_str())
            .filter(|r| r.starts_with("unreadable checkpoint: "))
            .collect();
        assert!(!reasons.is_empty(), "{report}");
        for r in reasons {
            assert!(
                r.starts_with("unreadable checkpoint: thread 't-pickle' checkpoint "),
                "read back {read_back}: {r}"
            );
        }
    }
}
