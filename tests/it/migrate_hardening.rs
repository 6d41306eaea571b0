//! `migrate delta-to-full`, third hardening round: a `messages` value that is not a list
//! (`True`, `"oops"`) is refused on both backends and reported by `verify` as
//! `value.messages_not_a_list`; a message whose class the real library may not rebuild is
//! refused instead of converted into something the delta reader would not show. Each store is
//! a copy of a real-library fixture with exactly one value changed.

use crate::common::pg::{connect, runtime};
use crate::common::*;
use dfck_core::codec::{Value, decode, encode};
use serde_json::Value as Json;
use std::path::Path;

fn verify_codes(target: &str) -> Vec<(String, String)> {
    let out = dfck(target, &["verify", "--format", "json"]);
    let j: Json = serde_json::from_slice(&out.stdout).expect("verify JSON");
    j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_owned(),
                f["checkpoint_id"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// `migrate delta-to-full THREAD --apply`: exit code and the thread's report.
fn convert(target: &str, thread: &str) -> (i32, Json) {
    let out = dfck(
        target,
        &[
            "migrate",
            "delta-to-full",
            thread,
            "--apply",
            "--format",
            "json",
        ],
    );
    let j: Json = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!("no JSON: {}", String::from_utf8_lossy(&out.stderr));
    });
    (out.status.code().unwrap(), j["threads"][0].clone())
}

/// Every row of one thread of a SQLite store, as bytes.
fn sqlite_rows(db: &Path, thread: &str) -> Vec<Vec<u8>> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut out = Vec::new();
    for sql in [
        "SELECT checkpoint_id, checkpoint, metadata FROM checkpoints WHERE thread_id = ?1 ORDER BY 1",
        "SELECT checkpoint_id, task_id || idx, value FROM writes WHERE thread_id = ?1 ORDER BY 1, 2",
    ] {
        let mut st = c.prepare(sql).unwrap();
        let rows = st
            .query_map([thread], |r| {
                let mut v: Vec<u8> = r.get::<_, String>(0)?.into_bytes();
                v.extend(r.get::<_, Vec<u8>>(1).unwrap_or_default());
                v.extend(r.get::<_, Vec<u8>>(2)?);
                Ok(v)
            })
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

/// Replaces the `messages` value of the newest checkpoint of `thread` that stores one.
fn set_sqlite_messages(db: &Path, thread: &str, value: Value) -> String {
    let c = rusqlite::Connection::open(db).unwrap();
    let rows: Vec<(String, Vec<u8>)> = c
        .prepare("SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id = ?1 ORDER BY checkpoint_id DESC")
        .unwrap()
        .query_map([thread], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (id, bytes) in rows {
        let Value::Map(mut ck) = decode(&bytes).unwrap() else {
            continue;
        };
        let Some((_, Value::Map(values))) = ck
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some("channel_values"))
        else {
            continue;
        };
        if let Some(slot) = values
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some("messages"))
        {
            slot.1 = value;
            c.execute(
                "UPDATE checkpoints SET checkpoint = ?1 WHERE thread_id = ?2 AND checkpoint_id = ?3",
                rusqlite::params![encode(&Value::Map(ck)), thread, id],
            )
            .unwrap();
            return id;
        }
    }
    panic!("{thread}: no checkpoint stores messages");
}

#[test]
fn sqlite_messages_that_are_not_a_list_are_refused_and_reported() {
    for value in [Value::Bool(true), Value::Str("oops".into())] {
        let (_d, db) = temp_copy(&sqlite_fixture("delta_k3"));
        let target = db.to_str().unwrap();
        let id = set_sqlite_messages(&db, "t-linear", value.clone());
        assert!(
            verify_codes(target).contains(&("value.messages_not_a_list".into(), id.clone())),
            "{value:?}: verify must report {id}"
        );
        let before = sqlite_rows(&db, "t-linear");
        let (code, t) = convert(target, "t-linear");
        assert_eq!(code, 1, "{t}");
        assert_eq!(t["status"], "refused", "{t}");
        assert!(t["reason"].as_str().unwrap().contains("not a list"), "{t}");
        assert_eq!(
            sqlite_rows(&db, "t-linear"),
            before,
            "refused thread changed"
        );
    }
}

#[test]
fn postgres_messages_that_are_not_a_list_are_refused_and_reported() {
    let Some(server) = require_postgres("postgres messages not a list") else {
        return;
    };
    let rt = runtime();
    let admin = connect(&rt, &server);
    for (n, json) in ["true", "\"oops\""].iter().enumerate() {
        let name = format!("dfck_not_a_list_{n}");
        for sql in [
            format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
            format!("CREATE DATABASE \"{name}\" TEMPLATE \"dfck_delta_k3\""),
        ] {
            rt.block_on(admin.batch_execute(&sql)).unwrap();
        }
        let target = with_db(&server, &name);
        let db = connect(&rt, &target);
        // The newest checkpoint that versions messages without storing them (a delta step):
        // an inline value, no blob at its version.
        let row = rt
            .block_on(db.query_one(
                "SELECT c.checkpoint_id FROM checkpoints c WHERE c.thread_id = 't-linear' \
                 AND c.checkpoint -> 'channel_versions' ? 'messages' \
                 AND NOT (c.checkpoint -> 'channel_values' ? 'messages') \
                 AND NOT EXISTS (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = c.thread_id \
                   AND b.channel = 'messages' \
                   AND b.version = c.checkpoint -> 'channel_versions' ->> 'messages') \
                 ORDER BY c.checkpoint_id DESC LIMIT 1",
                &[],
            ))
            .unwrap();
        let id: String = row.get(0);
        rt.block_on(db.execute(
            &format!(
                "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{{channel_values,messages}}', '{json}') \
                 WHERE thread_id = 't-linear' AND checkpoint_id = $1"
            ),
            &[&id],
        ))
        .unwrap();
        let dump = |db: &tokio_postgres::Client| -> Vec<String> {
            rt.block_on(db.query(
                "SELECT checkpoint_id || checkpoint::text || metadata::text FROM checkpoints \
                 WHERE thread_id = 't-linear' ORDER BY checkpoint_id",
                &[],
            ))
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
        };
        assert!(
            verify_codes(&target).contains(&("value.messages_not_a_list".into(), id.clone())),
            "{json}: verify must report {id}"
        );
        let before = dump(&db);
        let (code, t) = convert(&target, "t-linear");
        assert_eq!(code, 1, "{json}: {t}");
        assert_eq!(t["status"], "refused", "{t}");
        assert!(t["reason"].as_str().unwrap().contains("not a list"), "{t}");
        assert_eq!(dump(&db), before, "refused thread changed");
    }
}

/// A message of a class outside `langchain_core.messages` in a `messages` write: the real
/// delta reader rebuilds it only where that module imports (else from its fields, by its
/// `type`), so converting it into a full-mode list could read back differently. Refused.
#[test]
fn a_message_class_the_library_may_not_rebuild_is_refused() {
    let (_d, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let target = db.to_str().unwrap();
    let c = rusqlite::Connection::open(&db).unwrap();
    let rows: Vec<(String, String, i64, Vec<u8>)> = c
        .prepare(
            "SELECT checkpoint_id, task_id, idx, value FROM writes \
             WHERE thread_id = 't-linear' AND channel = 'messages' AND type = 'msgpack' ORDER BY checkpoint_id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let renamed = |m: &Value| -> Option<Value> {
        let Value::Ext(e) = m else { return None };
        let Value::Array(mut parts) = e.inner()?.clone() else {
            return None;
        };
        if parts.first()?.as_str()? != "langchain_core.messages.ai" {
            return None;
        }
        parts[0] = Value::Str("dfck_test_missing.messages".into());
        Some(Value::new_ext(e.code, Value::Array(parts)))
    };
    let mut changed = false;
    for (ck, task, idx, bytes) in rows {
        let v = decode(&bytes).unwrap();
        let new = match &v {
            Value::Array(items) => {
                let items: Vec<Value> = items
                    .iter()
                    .map(|m| renamed(m).unwrap_or_else(|| m.clone()))
                    .collect();
                Value::Array(items)
            }
            m => renamed(m).unwrap_or_else(|| m.clone()),
        };
        if new != v {
            c.execute(
                "UPDATE writes SET value = ?1 WHERE thread_id = 't-linear' AND checkpoint_id = ?2 AND task_id = ?3 AND idx = ?4",
                rusqlite::params![encode(&new), ck, task, idx],
            )
            .unwrap();
            changed = true;
            break;
        }
    }
    assert!(changed, "no AIMessage write to rename");
    drop(c);
    let before = sqlite_rows(&db, "t-linear");
    let (code, t) = convert(target, "t-linear");
    assert_eq!(code, 1, "{t}");
    assert_eq!(t["status"], "refused", "{t}");
    let reason = t["reason"].as_str().unwrap();
    assert!(
        reason.contains("dfck_test_missing.messages.AIMessage"),
        "{t}"
    );
    assert_eq!(sqlite_rows(&db, "t-linear"), before);
}
