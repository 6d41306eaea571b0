//! Hardening of the write engine and `migrate delta-to-full --apply` against what a red team
//! found: a conversion that changes the state of a checkpoint it did not rewrite is refused
//! and rolled back; the WAL stays bounded and the free-space guard counts it; a reader
//! holding the WAL open gets an honest warning; a failed backup leaves no partial file; a
//! busy write lock refuses a thread instead of failing the run; repeated thread arguments
//! count once; a thread deleted meanwhile is skipped and named.

mod common;

use common::*;
use dfck::codec::{self, Value};
use rusqlite::{Connection, params};
use serde_json::Value as Json;
use std::path::Path;
use std::process::{Command, Output};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn migrate(db: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dfck"));
    cmd.arg("--db")
        .arg(db)
        .args(["migrate", "delta-to-full", "--format", "json"])
        .args(extra)
        .env_remove("DFCK_DB")
        .env_remove("DFCK_FAILPOINT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run dfck")
}

fn report(out: &Output) -> Json {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "stdout is not JSON; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every checkpoint and write of a thread, bytes included.
fn thread_rows(db: &Path, thread: &str) -> Vec<Vec<u8>> {
    let conn = Connection::open(db).unwrap();
    let mut out = Vec::new();
    for sql in [
        "SELECT checkpoint_id || '|' || coalesce(type, ''), checkpoint, metadata FROM checkpoints WHERE thread_id = ?1 ORDER BY checkpoint_ns, checkpoint_id",
        "SELECT checkpoint_id || '|' || task_id || '|' || idx, value, channel FROM writes WHERE thread_id = ?1 ORDER BY checkpoint_ns, checkpoint_id, task_id, idx",
    ] {
        let mut st = conn.prepare(sql).unwrap();
        let rows = st
            .query_map([thread], |r| {
                let mut k = r.get::<_, String>(0)?.into_bytes();
                for i in 1..3 {
                    k.extend_from_slice(
                        r.get_ref(i)?
                            .as_bytes_or_null()
                            .ok()
                            .flatten()
                            .unwrap_or_default(),
                    );
                }
                Ok(k)
            })
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

/// Rewrites one checkpoint's msgpack body through dfck's codec.
fn mutate_checkpoint(db: &Path, id: &str, f: impl FnOnce(&mut Vec<(Value, Value)>)) {
    let conn = Connection::open(db).unwrap();
    let blob: Vec<u8> = conn
        .query_row(
            "SELECT checkpoint FROM checkpoints WHERE checkpoint_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    let Value::Map(mut entries) = codec::decode(&blob).unwrap() else {
        panic!("checkpoint body is a map");
    };
    f(&mut entries);
    let n = conn
        .execute(
            "UPDATE checkpoints SET checkpoint = ?1 WHERE checkpoint_id = ?2",
            params![codec::encode(&Value::Map(entries)), id],
        )
        .unwrap();
    assert_eq!(n, 1);
}

fn entry<'a>(entries: &'a mut [(Value, Value)], key: &str) -> &'a mut Value {
    &mut entries
        .iter_mut()
        .find(|(k, _)| k.as_str() == Some(key))
        .unwrap_or_else(|| panic!("no {key}"))
        .1
}

fn thread_status(j: &Json, thread: &str) -> (String, String) {
    let t = j["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == thread)
        .unwrap_or_else(|| panic!("{thread} in {j}"));
    (
        t["status"].as_str().unwrap().to_owned(),
        t["reason"].as_str().unwrap_or_default().to_owned(),
    )
}

/// Converts `thread` and asserts it is refused (exit 1) and byte-for-byte untouched.
fn assert_refused_untouched(db: &Path, thread: &str, needle: &str) {
    let before = thread_rows(db, thread);
    let out = migrate(db, &[thread, "--apply"], &[]);
    let j = report(&out);
    assert_eq!(out.status.code(), Some(1), "{j}");
    let (status, reason) = thread_status(&j, thread);
    assert_eq!(status, "refused", "{j}");
    assert!(
        reason.contains(needle),
        "reason {reason:?} names {needle:?}"
    );
    assert_eq!(thread_rows(db, thread), before, "rolled back");
}

#[test]
fn a_conversion_changing_an_unrewritten_checkpoints_state_is_refused() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    // The parent of 1f1ee3a8-fb20-… loses its channel versions: LangGraph's delta walk
    // still replays the root's `h-0` into fb20's `messages`; a rewrite that stored only
    // the parent's writes would change fb20's state (`[h-0, ai-1]` → `[ai-1]`).
    mutate_checkpoint(&db, "1f1ee3a8-fb1c-61f2-8000-58d5a2124d7d", |e| {
        *entry(e, "channel_versions") = Value::Map(Vec::new());
    });
    assert_refused_untouched(
        &db,
        "t-error",
        "would change the state shown at 1f1ee3a8-fb20-6964-8001-193ec77d4036",
    );
}

#[test]
fn a_nested_delta_snapshot_is_refused_and_left_untouched() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    mutate_checkpoint(&db, "1f1ee3a8-fb2d-6810-8003-ac5920a5a663", |e| {
        let Value::Map(cv) = entry(e, "channel_values") else {
            panic!("channel_values is a map");
        };
        let m = entry(cv, "messages");
        let inner = std::mem::replace(m, Value::Nil);
        *m = Value::new_ext(codec::EXT_DELTA_SNAPSHOT, inner);
    });
    assert_refused_untouched(&db, "t-error", "");
}
