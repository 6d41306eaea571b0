//! Regression tests for hostile stores: parent cycles, values of the wrong SQLite storage
//! class, and terminal control sequences in store data. Each builds its store from a copy of
//! a committed fixture.

use crate::common::capped::{Run, contract_violation, dfck_capped};
use crate::common::{assert_clean_failure, sqlite_fixture, temp_copy};
use rusqlite::{Connection, params};
use serde_json::Value as Json;
use std::path::Path;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn dfck(db: &Path, args: &[&str]) -> Run {
    let r = dfck_capped(&s(db), args, TIMEOUT);
    let json = args.windows(2).any(|w| w == ["--format", "json"]);
    if let Some(v) = contract_violation(&r, json) {
        panic!("dfck {args:?}: {v}");
    }
    r
}

fn as_output(r: &Run) -> std::process::Output {
    use std::os::unix::process::ExitStatusExt;
    std::process::Output {
        status: std::process::ExitStatus::from_raw(r.code.unwrap_or(1) << 8),
        stdout: r.stdout.clone(),
        stderr: r.stderr.clone().into_bytes(),
    }
}

fn findings(r: &Run) -> Vec<Json> {
    let j: Json = serde_json::from_slice(&r.stdout).expect("json");
    j["findings"].as_array().cloned().unwrap_or_default()
}

/// (thread, checkpoint) pairs of the findings with `code`.
fn located(r: &Run, code: &str) -> Vec<(String, String)> {
    findings(r)
        .into_iter()
        .filter(|f| f["code"] == code)
        .map(|f| {
            (
                f["thread_id"].as_str().unwrap_or_default().to_owned(),
                f["checkpoint_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Root-namespace checkpoint ids of a thread, ascending.
fn ids(db: &Path, thread: &str) -> Vec<String> {
    let c = Connection::open(db).unwrap();
    let mut st = c
        .prepare("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = '' ORDER BY checkpoint_id")
        .unwrap();
    st.query_map([thread], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn exec(db: &Path, sql: &str, p: impl rusqlite::Params) {
    Connection::open(db).unwrap().execute(sql, p).unwrap();
}

const SELF_LOOP: &str = "1f1ee3a8-f9ab-6e03-800b-f0106fe8592a";

fn assert_cycle_handled(db: &Path, thread: &str, at: &str) {
    let v = dfck(db, &["--format", "json", "verify"]);
    assert_eq!(v.code, Some(1), "verify exit, stderr {}", v.stderr);
    let cycles = located(&v, "lineage.cycle");
    assert!(
        cycles.contains(&(thread.to_owned(), at.to_owned())),
        "lineage.cycle at {thread}/{at}: {cycles:?}"
    );
    let t = dfck(db, &["verify"]);
    assert_eq!(t.code, Some(1));
    for args in [
        vec!["lineage", thread],
        vec!["lineage", thread, "--tree"],
        vec!["--format", "json", "lineage", thread],
        vec!["--format", "json", "lineage", thread, "--tree"],
        vec!["lineage", thread, "--checkpoint", at],
    ] {
        let r = dfck(db, &args);
        assert!(matches!(r.code, Some(1 | 2)), "{args:?}: {:?}", r.code);
    }
    for args in [
        vec!["inspect", thread],
        vec!["inspect", thread, "--state"],
        vec!["inspect", thread, "--state", "--checkpoint", at],
        vec!["migrate", "delta-to-full", "--all"],
    ] {
        dfck(db, &args);
    }
}

#[test]
fn a_checkpoint_that_is_its_own_parent_is_a_cycle_finding_not_a_hang() {
    let (_d, db) = temp_copy(&sqlite_fixture("delta_k3"));
    exec(
        &db,
        "UPDATE checkpoints SET parent_checkpoint_id = checkpoint_id WHERE checkpoint_id = ?1",
        [SELF_LOOP],
    );
    assert_cycle_handled(&db, "t-update", SELF_LOOP);
}

/// Makes `a` (whose child is `b`) the child of `b`.
fn two_cycle(db: &Path, thread: &str, a: &str, b: &str) {
    let parent_of_b: Option<String> = Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT parent_checkpoint_id FROM checkpoints WHERE thread_id = ?1 AND checkpoint_id = ?2",
            params![thread, b],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(parent_of_b.as_deref(), Some(a), "{b} is a child of {a}");
    exec(
        db,
        "UPDATE checkpoints SET parent_checkpoint_id = ?1 WHERE thread_id = ?2 AND checkpoint_id = ?3",
        params![b, thread, a],
    );
}

#[test]
fn a_two_checkpoint_cycle_mid_thread_is_a_cycle_finding_not_a_hang() {
    // A fork point with pending messages writes and its child (the loop then replays
    // through the cycle), and a plain stretch of another thread.
    let (_d, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let b = "1f1ee3a8-f9b0-601b-800c-5846a471b48f";
    two_cycle(&db, "t-update", SELF_LOOP, b);
    assert_cycle_handled(&db, "t-update", SELF_LOOP);

    let (_d, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let all = ids(&db, "t-linear");
    let (a, b) = (&all[all.len() / 2 - 1], &all[all.len() / 2]);
    two_cycle(&db, "t-linear", a, b);
    assert_cycle_handled(&db, "t-linear", a);
}

#[test]
fn values_of_the_wrong_storage_class_are_findings_of_their_checkpoint() {
    let (_d, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let upd = ids(&db, "t-update");
    let fork = ids(&db, "t-fork");
    let exit = ids(&db, "t-exit");
    exec(
        &db,
        "UPDATE checkpoints SET checkpoint = 12345 WHERE thread_id = 't-update' AND checkpoint_id = ?1",
        [&upd[3]],
    );
    exec(
        &db,
        "UPDATE checkpoints SET checkpoint = 2.5 WHERE thread_id = 't-exit' AND checkpoint_id = ?1",
        [&exit[1]],
    );
    exec(
        &db,
        "UPDATE checkpoints SET metadata = 42 WHERE thread_id = 't-fork' AND checkpoint_id = ?1",
        [&fork[4]],
    );
    let write_of = |thread: &str| -> (i64, String) {
        Connection::open(&db)
            .unwrap()
            .query_row(
                "SELECT rowid, checkpoint_id FROM writes WHERE thread_id = ?1 AND channel = 'messages' ORDER BY checkpoint_id LIMIT 1",
                [thread],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    };
    let (w1, w1_ck) = write_of("t-linear");
    exec(&db, "UPDATE writes SET value = 7 WHERE rowid = ?1", [w1]);
    let (w2, w2_ck) = write_of("t-interrupt");
    exec(&db, "UPDATE writes SET idx = 'one' WHERE rowid = ?1", [w2]);

    let v = dfck(&db, &["--format", "json", "verify"]);
    assert_eq!(v.code, Some(1), "verify goes on: {}", v.stderr);
    let j: Json = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(j["threads_checked"], 8, "every thread checked");
    let bad = located(&v, "value.undecodable");
    for (t, c) in [
        ("t-update", &upd[3]),
        ("t-exit", &exit[1]),
        ("t-fork", &fork[4]),
        ("t-linear", &w1_ck),
        ("t-interrupt", &w2_ck),
    ] {
        assert!(
            bad.contains(&(t.to_owned(), c.clone())),
            "value.undecodable at {t}/{c}: {bad:?}"
        );
    }
    dfck(&db, &["verify"]);
    // The rest of the store reads as before.
    let i = dfck(&db, &["--format", "json", "inspect"]);
    assert_eq!(i.code, Some(0), "{}", i.stderr);
    for args in [
        vec!["inspect", "t-sendfan", "--state"],
        vec!["inspect", "t-update"],
        vec!["inspect", "t-fork"],
        vec!["--format", "json", "inspect", "t-error", "--state"],
    ] {
        let r = dfck(&db, &args);
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.stderr);
    }
    // The broken checkpoint itself: one line naming thread and checkpoint.
    for (t, c) in [
        ("t-update", &upd[3]),
        ("t-exit", &exit[1]),
        ("t-fork", &fork[4]),
    ] {
        let r = dfck(&db, &["inspect", t, "--state", "--checkpoint", c]);
        let line = assert_clean_failure(&as_output(&r), t);
        assert!(line.contains(c.as_str()), "names the checkpoint: {line}");
    }
}

/// A msgpack map of short strings.
fn msgpack_map(pairs: &[(&str, &str)]) -> Vec<u8> {
    fn str_(out: &mut Vec<u8>, s: &str) {
        out.push(0xd9);
        out.push(s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    }
    let mut out = vec![0x80 | pairs.len() as u8];
    for (k, v) in pairs {
        str_(&mut out, k);
        str_(&mut out, v);
    }
    out
}

const HOSTILE: &str = "\x1b]52;c;cHduZWQ=\x07\x1b]0;title\x07\x1b[2J\u{9b}31m\u{202e}\x7f";

fn assert_inert(args: &[&str], out: &[u8]) {
    let text = String::from_utf8_lossy(out);
    for bad in ['\x1b', '\x07', '\u{9b}', '\u{202e}', '\x7f', '\r'] {
        assert!(!text.contains(bad), "{args:?} prints {bad:?} raw:\n{text}");
    }
}

#[test]
fn terminal_control_sequences_in_store_data_are_escaped_in_human_output() {
    let (_d, db) = temp_copy(&sqlite_fixture("full"));
    let thread = format!("t-{HOSTILE}");
    let head = ids(&db, "t-linear").pop().unwrap();
    // A hostile thread id, metadata source, a message and a channel on the head.
    exec(
        &db,
        "UPDATE checkpoints SET thread_id = ?1 WHERE thread_id = 't-linear'",
        [&thread],
    );
    exec(
        &db,
        "UPDATE writes SET thread_id = ?1 WHERE thread_id = 't-linear'",
        [&thread],
    );
    exec(
        &db,
        "UPDATE checkpoints SET metadata = json_set(metadata, '$.source', ?1) WHERE thread_id = ?2",
        params![HOSTILE, thread],
    );
    let msg = msgpack_map(&[
        ("type", "human"),
        ("content", HOSTILE),
        ("id", "m-hostile\x1b[1A"),
    ]);
    let chan = msgpack_map(&[("note", HOSTILE)]);
    let c = Connection::open(&db).unwrap();
    let null_task = "00000000-0000-0000-0000-000000000000";
    for (idx, channel, value) in [(0i64, "messages", msg), (1, "note\x1b[2J", chan)] {
        c.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value) \
             VALUES (?1, '', ?2, ?3, '', ?4, ?5, 'msgpack', ?6)",
            params![thread, head, null_task, idx, channel, value],
        )
        .unwrap();
    }
    drop(c);
    let runs: Vec<Vec<&str>> = vec![
        vec!["inspect"],
        vec!["inspect", &thread],
        vec!["inspect", &thread, "--state"],
        vec!["inspect", &thread, "--state", "--raw"],
        vec!["verify"],
        vec!["verify", &thread],
        vec!["lineage", &thread],
        vec!["lineage", &thread, "--tree"],
        vec!["migrate", "delta-to-full", "--all"],
    ];
    for args in &runs {
        let r = dfck(&db, args);
        assert_eq!(r.code.map(|c| c < 2), Some(true), "{args:?}: {}", r.stderr);
        assert_inert(args, &r.stdout);
    }
    // The state view shows the content, escaped.
    let r = dfck(&db, &["inspect", &thread, "--state"]);
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("\\x1b]52;c;cHduZWQ=\\x07"), "{text}");
    // Error lines on stderr too.
    let first = ids(&db, &thread).remove(0);
    exec(
        &db,
        "UPDATE checkpoints SET checkpoint = 1 WHERE thread_id = ?1 AND checkpoint_id = ?2",
        params![thread, first],
    );
    let args = ["inspect", &thread, "--state", "--checkpoint", &first];
    let r = dfck(&db, &args);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert_inert(&args, r.stderr.as_bytes());
    // JSON keeps the exact data.
    let j = dfck(&db, &["--format", "json", "inspect", &thread, "--state"]);
    let state: Json = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(state["thread_id"], thread.as_str());
    assert!(
        state["values"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["content"] == HOSTILE),
        "JSON keeps the content as stored"
    );
}
