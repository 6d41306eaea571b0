//! Bad inputs end in exit 2 and one line naming the problem — never a panic, never a
//! partial result — and read-only commands leave stores byte-for-byte unchanged.

use crate::common::*;
use rusqlite::{Connection, params};
use std::path::Path;
use std::process::Command;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The head checkpoint id of a thread in a fixture (read with SQL, not with dfck).
fn head_of(db: &Path, thread: &str) -> String {
    let conn = Connection::open(db).expect("open");
    conn.query_row(
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1",
        [thread],
        |r| r.get(0),
    )
    .expect("head")
}

#[test]
fn not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello, this is not a database\n".repeat(10)).unwrap();
    assert_clean_failure(&dfck(&s(&text), &["inspect"]), "not a SQLite database");

    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    assert_clean_failure(&dfck(&s(&empty), &["inspect"]), "empty");

    let other = dir.path().join("other.db");
    let conn = Connection::open(&other).unwrap();
    conn.execute_batch("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users(name) VALUES ('a');")
        .unwrap();
    drop(conn);
    assert_clean_failure(
        &dfck(&s(&other), &["inspect"]),
        "not a LangGraph checkpoint store",
    );

    let wrong = dir.path().join("wrong.db");
    let conn = Connection::open(&wrong).unwrap();
    conn.execute_batch(
        "CREATE TABLE checkpoints(thread_id TEXT, checkpoint BLOB); CREATE TABLE writes(x);",
    )
    .unwrap();
    drop(conn);
    assert_clean_failure(&dfck(&s(&wrong), &["inspect"]), "has no column");

    let missing = dir.path().join("missing.db");
    assert_clean_failure(&dfck(&s(&missing), &["inspect"]), "cannot open");
    assert!(!missing.exists(), "a missing store must not be created");
    assert_clean_failure(&dfck(&s(dir.path()), &["inspect"]), "directory");
    assert_clean_failure(
        &dfck("mysql://u:hunter2@h/db", &["inspect"]),
        "unsupported store URL",
    );
    let out = dfck("mysql://u:hunter2@h/db", &["inspect"]);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("hunter2"),
        "password leaked"
    );
}

#[test]
fn no_store_given() {
    let out = crate::common::dfck_command()
        .arg("inspect")
        .env_remove("DFCK_DB")
        .output()
        .unwrap();
    assert_clean_failure(&out, "no store given");
    // DFCK_DB is the same thing as --db.
    let out = crate::common::dfck_command()
        .args(["inspect", "--format", "json"])
        .env("DFCK_DB", sqlite_fixture("full"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let via_env: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let via_flag = dfck_json(
        &s(&sqlite_fixture("full")),
        &["inspect", "--format", "json"],
    );
    assert_eq!(via_env, via_flag);
}

#[test]
fn unknown_thread_and_checkpoint() {
    let db = s(&sqlite_fixture("full"));
    assert_clean_failure(
        &dfck(&db, &["inspect", "no-such-thread"]),
        "thread 'no-such-thread' not found",
    );
    assert_clean_failure(
        &dfck(&db, &["inspect", "no-such-thread", "--state"]),
        "thread 'no-such-thread' not found",
    );
    assert_clean_failure(
        &dfck(
            &db,
            &[
                "inspect",
                "t-linear",
                "--state",
                "--checkpoint",
                "1f000000-0000-6000-8000-000000000000",
            ],
        ),
        "checkpoint '1f000000-0000-6000-8000-000000000000' not found",
    );
    assert_clean_failure(
        &dfck(&db, &["inspect", "t-linear", "--ns", "nope:1"]),
        "not found",
    );
}

#[test]
fn pickle_and_encrypted_rows() {
    let exp = expected("pickle");
    let mut checked = 0;
    for e in exp["errors"].as_array().unwrap() {
        if e["what"].as_str().unwrap_or("").contains("checkpoint") {
            let out = dfck(
                &s(&sqlite_fixture("pickle")),
                &[
                    "inspect",
                    e["thread_id"].as_str().unwrap(),
                    "--state",
                    "--checkpoint",
                    e["checkpoint_id"].as_str().unwrap(),
                ],
            );
            let line = assert_clean_failure(&out, "unsupported serializer type 'pickle'");
            assert!(
                line.contains(e["checkpoint_id"].as_str().unwrap()),
                "names the checkpoint: {line}"
            );
            checked += 1;
        }
    }
    assert!(checked > 0);
    let enc = s(&sqlite_fixture("encrypted"));
    for t in ["t-enc-full", "t-enc-delta"] {
        assert_clean_failure(&dfck(&enc, &["inspect", t, "--state"]), "msgpack+xor");
    }
    // The summary and the listing still work: they report, not fail.
    assert!(dfck(&enc, &["inspect"]).status.success());
    let listing = dfck_json(&enc, &["inspect", "t-enc-full", "--format", "json"]);
    assert!(
        listing["checkpoints"][0]["error"]
            .as_str()
            .unwrap()
            .contains("msgpack+xor")
    );
}

#[test]
fn corrupt_blobs_and_lineage() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k10"));
    let head = head_of(&db, "t-linear");
    let conn = Connection::open(&db).unwrap();
    // Truncate the head's checkpoint blob.
    conn.execute(
        "UPDATE checkpoints SET checkpoint = substr(checkpoint, 1, length(checkpoint) / 2) WHERE thread_id = 't-linear' AND checkpoint_id = ?1",
        [&head],
    )
    .unwrap();
    let line = assert_clean_failure(
        &dfck(&s(&db), &["inspect", "t-linear", "--state"]),
        "truncated msgpack",
    );
    assert!(
        line.contains(&head) && line.contains("t-linear"),
        "names the checkpoint: {line}"
    );
    assert!(
        dfck(&s(&db), &["inspect"]).status.success(),
        "the summary survives a bad blob"
    );

    // Truncate every messages write of t-sendfan: each checkpoint either materializes
    // (its replay reads no damaged write) or fails naming the write.
    conn.execute(
        "UPDATE writes SET value = substr(value, 1, 5) WHERE thread_id = 't-sendfan' AND channel = 'messages' AND length(value) > 10",
        [],
    )
    .unwrap();
    let listing = dfck_json(&s(&db), &["inspect", "t-sendfan", "--format", "json"]);
    let mut failed = 0;
    for c in listing["checkpoints"].as_array().unwrap() {
        let out = dfck(
            &s(&db),
            &[
                "inspect",
                "t-sendfan",
                "--state",
                "--checkpoint",
                c["checkpoint_id"].as_str().unwrap(),
            ],
        );
        if !out.status.success() {
            assert_clean_failure(&out, "write (task");
            failed += 1;
        }
    }
    assert!(failed > 0, "no checkpoint read a damaged write");

    // Garbage metadata.
    let head = head_of(&db, "t-update");
    conn.execute("UPDATE checkpoints SET metadata = X'7B7B7B' WHERE thread_id = 't-update' AND checkpoint_id = ?1", [&head])
        .unwrap();
    assert_clean_failure(
        &dfck(&s(&db), &["inspect", "t-update", "--state"]),
        "metadata is not valid JSON",
    );
}

/// (id, parent) of checkpoints whose `messages` is versioned but not stored, and whose
/// parent is the same: their walks must go up at least two levels.
fn absent_pairs(db: &str, thread: &str) -> Vec<(String, String)> {
    let listing = dfck_json(db, &["inspect", thread, "--format", "json"]);
    let cks = listing["checkpoints"].as_array().unwrap().clone();
    let enc = |id: &str| {
        cks.iter()
            .find(|c| c["checkpoint_id"] == id)
            .map(|c| c["messages_encoding"].as_str().unwrap_or("").to_owned())
    };
    cks.iter()
        .filter(|c| c["messages_encoding"] == "absent")
        .filter_map(|c| {
            let p = c["parent_checkpoint_id"].as_str()?;
            (enc(p).as_deref() == Some("absent")).then(|| {
                (
                    c["checkpoint_id"].as_str().unwrap().to_owned(),
                    p.to_owned(),
                )
            })
        })
        .collect()
}

#[test]
fn cycles_and_dangling_parents_are_errors_not_loops() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k10"));
    let target = s(&db);
    let pairs = absent_pairs(&target, "t-linear");
    assert!(
        pairs.len() >= 3,
        "fixture has too few delta checkpoints: {pairs:?}"
    );
    let conn = Connection::open(&db).unwrap();
    let set_parent = |id: &str, parent: &str| {
        conn.execute(
            "UPDATE checkpoints SET parent_checkpoint_id = ?1 WHERE thread_id = 't-linear' AND checkpoint_id = ?2",
            params![parent, id],
        )
        .unwrap();
    };
    // Two-node cycle: A -> P -> A.
    let (a, p) = &pairs[0];
    set_parent(p, a);
    let line = assert_clean_failure(
        &dfck(
            &target,
            &["inspect", "t-linear", "--state", "--checkpoint", a],
        ),
        "lineage cycle",
    );
    assert!(line.contains(a.as_str()), "{line}");
    // Self-loop.
    let (b, _) = &pairs[pairs.len() - 1];
    set_parent(b, b);
    assert_clean_failure(
        &dfck(
            &target,
            &["inspect", "t-linear", "--state", "--checkpoint", b],
        ),
        "lineage cycle",
    );
    // Dangling parent.
    let (c, _) = &pairs[1];
    set_parent(c, "1f000000-dead-6000-8000-000000000000");
    let line = assert_clean_failure(
        &dfck(
            &target,
            &["inspect", "t-linear", "--state", "--checkpoint", c],
        ),
        "dangling parent",
    );
    assert!(
        line.contains("1f000000-dead-6000-8000-000000000000"),
        "{line}"
    );
}

fn digest(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn read_only_commands_change_nothing() {
    let (dir, db) = temp_copy(&sqlite_fixture("deerflow"));
    let before = digest(&db);
    let target = s(&db);
    assert!(dfck(&target, &["inspect"]).status.success());
    assert!(dfck(&target, &["inspect", "t-deerflow"]).status.success());
    assert!(
        dfck(&target, &["inspect", "t-deerflow", "--state"])
            .status
            .success()
    );
    assert_eq!(before, digest(&db), "the store changed");
    // Reads take SQLite's normal shared locks (safe beside a live writer): a WAL-mode file
    // may get the usual -wal/-shm sidecars, but no WAL frame is ever written.
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with("-wal") {
            assert_eq!(e.metadata().unwrap().len(), 0, "a read wrote to the WAL");
        } else {
            assert!(
                name == "deerflow.db" || name.ends_with("-shm"),
                "unexpected file {name}"
            );
        }
    }
    // A store that is live (has a -wal) is read through the WAL, still without writes.
    let conn = Connection::open(&db).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.execute("CREATE TABLE IF NOT EXISTS keepalive(x)", [])
        .unwrap();
    let wal = dir.path().join("deerflow.db-wal");
    assert!(wal.exists(), "the store is live");
    let (db_before, wal_before) = (digest(&db), digest(&wal));
    let out = dfck_json(&target, &["inspect", "--format", "json"]);
    assert_eq!(out["counts"]["threads"], 2);
    assert!(
        dfck(&target, &["inspect", "t-deerflow", "--state"])
            .status
            .success()
    );
    assert_eq!(db_before, digest(&db), "the live store changed");
    assert_eq!(wal_before, digest(&wal), "the live store's WAL changed");
    drop(conn);
}

#[test]
fn special_files_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success());
    assert!(made.unwrap_or(false), "mkfifo failed");
    // Opening a FIFO for reading would block forever: it must be refused up front.
    assert_clean_failure(&dfck(&s(&fifo), &["inspect"]), "not a regular file");
    assert_clean_failure(&dfck("/dev/null", &["inspect"]), "not a regular file");
}

#[test]
fn python_nonfinite_floats_in_metadata_are_read() {
    // Python's json.dumps writes NaN / Infinity for float metadata values.
    let (_dir, db) = temp_copy(&sqlite_fixture("full"));
    let head = head_of(&db, "t-linear");
    let conn = Connection::open(&db).unwrap();
    let meta: Vec<u8> = conn
        .query_row(
            "SELECT metadata FROM checkpoints WHERE checkpoint_id = ?1",
            [&head],
            |r| r.get(0),
        )
        .unwrap();
    let text = String::from_utf8(meta).unwrap();
    let patched = text.replacen(
        '{',
        r#"{"score": NaN, "hi": Infinity, "lo": -Infinity, "note": "NaN stays", "#,
        1,
    );
    conn.execute(
        "UPDATE checkpoints SET metadata = ?1 WHERE checkpoint_id = ?2",
        params![patched.as_bytes(), head],
    )
    .unwrap();
    drop(conn);
    let j = dfck_json(
        &s(&db),
        &["inspect", "t-linear", "--state", "--format", "json"],
    );
    assert_eq!(j["metadata"]["score"], "NaN");
    assert_eq!(j["metadata"]["hi"], "Infinity");
    assert_eq!(j["metadata"]["lo"], "-Infinity");
    assert_eq!(j["metadata"]["note"], "NaN stays");
}

#[test]
fn a_write_that_is_not_a_message_fails_like_langgraph() {
    // LangGraph's convert_to_messages raises on an int; dfck must not append it silently.
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k10"));
    let conn = Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE writes SET type = 'msgpack', value = X'05' WHERE thread_id = 't-linear' AND channel = 'messages'",
        [],
    )
    .unwrap();
    drop(conn);
    let out = dfck(&s(&db), &["inspect", "t-linear", "--state"]);
    assert_clean_failure(&out, "unsupported message type in messages: int");
}

#[test]
fn raw_view_shows_snapshots_as_stored() {
    let db = s(&sqlite_fixture("deerflow"));
    let j = dfck_json(
        &db,
        &[
            "inspect",
            "t-deerflow",
            "--state",
            "--raw",
            "--format",
            "json",
        ],
    );
    assert_eq!(j["view"], "raw");
    assert!(
        j["values"]["messages"]["$delta_snapshot"].is_array(),
        "{}",
        j["values"]
    );
}

#[test]
fn empty_dfck_db_means_unset() {
    let dir = tempfile::tempdir().unwrap();
    let out = crate::common::dfck_command()
        .arg("inspect")
        .env("DFCK_DB", "")
        .env_remove("DEER_FLOW_CONFIG_PATH")
        .env_remove("DEER_FLOW_PROJECT_ROOT")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_clean_failure(&out, "no store given");
}

#[test]
fn verify_reports_a_write_that_is_not_a_message() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k10"));
    let conn = Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE writes SET type = 'msgpack', value = X'05' WHERE thread_id = 't-linear' AND channel = 'messages'",
        [],
    )
    .unwrap();
    drop(conn);
    let out = dfck(&s(&db), &["verify", "t-linear", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        j["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "value.undecodable"
                && f["message"].as_str().unwrap().contains("not a message"))
    );
}
