//! The postcondition of `migrate delta-to-full`, checked before commit: no delta signal
//! left, and every versioned checkpoint stores exactly the list delta mode showed —
//! compared through fingerprints of the lists as they are stored.

use dfck_core::codec::{self, EXT_DELTA_SNAPSHOT, Value};
use dfck_core::model::thread::LoadedThread;
use dfck_core::model::{MESSAGES, metadata_is_delta};
use dfck_core::store::Store;
use dfck_core::write::Refusal;
use std::collections::HashMap;

/// A fast fingerprint of a list as it is stored (msgpack array), computed without building
/// the encoding: ext items (messages) feed their stored bytes straight into the hash.
pub(super) fn digest(list: &[Value]) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = Vec::with_capacity(64);
    codec::write_array_header(&mut buf, list.len());
    h.update(&buf);
    for item in list {
        buf.clear();
        match item {
            Value::Ext(e) => {
                codec::write_ext_header(&mut buf, e.code, e.raw().len());
                h.update(&buf);
                h.update(e.raw());
            }
            other => {
                codec::write_value(&mut buf, other);
                h.update(&buf);
            }
        }
    }
    format!("{:032x}", h.digest128())
}

/// The encoded size of a list, without encoding it.
pub(super) fn encoded_len(list: &[Value]) -> usize {
    let mut buf = Vec::with_capacity(16);
    codec::write_array_header(&mut buf, list.len());
    let mut n = buf.len();
    for item in list {
        n += match item {
            Value::Ext(e) => {
                buf.clear();
                codec::write_ext_header(&mut buf, e.code, e.raw().len());
                buf.len() + e.raw().len()
            }
            other => codec::encode(other).len(),
        };
    }
    n
}

/// The check before commit, reading the thread back through the model (Postgres, whose
/// lists live in shared blobs): no delta signal left, and every versioned checkpoint stores
/// exactly the list delta mode showed (`expect`: checkpoint id → digest).
pub(super) fn verify_loaded(
    store: &dyn Store,
    thread_id: &str,
    ns: &str,
    expect: &HashMap<String, String>,
) -> Result<(), Refusal> {
    let fail = |what: String| Err(Refusal(format!("verification failed: {what}")));
    let after =
        LoadedThread::load_full(store, thread_id, ns).map_err(|e| Refusal(e.to_string()))?;
    for n in &after.nodes {
        if metadata_is_delta(&n.metadata) || n.metadata.contains_key(dfck_core::model::MODE_MARKER)
        {
            return fail(format!("{} still carries a delta marker", n.id));
        }
        let Ok(ck) = &n.checkpoint else {
            return fail(format!("{} unreadable after rewrite", n.id));
        };
        match (expect.get(&n.id), ck.value(MESSAGES)) {
            (Some(want), Some(v)) if !v.is_delta_snapshot() => {
                let got = match v {
                    Value::Array(items) => digest(items),
                    other => digest(std::slice::from_ref(other)),
                };
                if &got != want {
                    return fail(format!("{} differs from its delta view", n.id));
                }
            }
            (Some(_), _) => return fail(format!("{} does not store its messages", n.id)),
            (None, Some(v)) if v.is_delta_snapshot() => {
                return fail(format!("{} still holds a snapshot", n.id));
            }
            _ => {}
        }
    }
    Ok(())
}

/// [`verify_loaded`] on stores that keep each checkpoint's values inside it (SQLite),
/// without decoding the rewritten lists: every checkpoint's metadata is parsed, and the
/// stored `messages` bytes are fingerprinted as they sit in the checkpoint blob (the
/// fingerprint of [`digest`] is that of the list's encoding).
pub(super) fn verify_raw(
    store: &dyn Store,
    thread_id: &str,
    ns: &str,
    expect: &HashMap<String, String>,
) -> Result<(), Refusal> {
    let mut seen = 0usize;
    let mut check = |row: dfck_core::store::CheckpointRow| -> Result<(), String> {
        let id = &row.checkpoint_id;
        let meta =
            dfck_core::model::parse_metadata(&row.metadata, id).map_err(|e| e.to_string())?;
        if metadata_is_delta(&meta) || meta.contains_key(dfck_core::model::MODE_MARKER) {
            return Err(format!(
                "verification failed: {id} still carries a delta marker"
            ));
        }
        let dfck_core::store::CheckpointBody::Serialized { type_tag, bytes } = &row.body else {
            return Err(format!(
                "verification failed: {id} is not a SQLite checkpoint"
            ));
        };
        let want = expect.get(id);
        let opened = codec::aes::open(type_tag.as_deref(), bytes.clone().into());
        let bytes = match opened {
            Ok(o) if o.tag.as_deref() == Some("msgpack") => o.bytes,
            _ => {
                return match want {
                    Some(_) => Err(format!(
                        "verification failed: {id} has serializer type {type_tag:?}"
                    )),
                    None => Ok(()),
                };
            }
        };
        let (slice, _) = codec::checkpoint_messages_slice(&bytes)
            .map_err(|e| format!("verification failed: {id} unreadable after rewrite: {e}"))?;
        let is_snapshot = |s: &[u8]| codec::ext_code(s) == Some(EXT_DELTA_SNAPSHOT);
        match (want, slice) {
            (Some(want), Some(s)) if !is_snapshot(s) => {
                let got = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(s));
                if &got != want {
                    return Err(format!(
                        "verification failed: {id} differs from its delta view"
                    ));
                }
            }
            (Some(_), _) => {
                return Err(format!(
                    "verification failed: {id} does not store its messages"
                ));
            }
            (None, Some(s)) if is_snapshot(s) => {
                return Err(format!("verification failed: {id} still holds a snapshot"));
            }
            _ => {}
        }
        seen += 1;
        Ok(())
    };
    let mut failure = None;
    store
        .scan_thread_values(thread_id, ns, &mut |row| {
            if failure.is_none() {
                if let Err(e) = check(row) {
                    failure = Some(e);
                }
            }
            Ok(())
        })
        .map_err(|e| Refusal(e.to_string()))?;
    if let Some(e) = failure {
        return Err(Refusal(e));
    }
    if seen < expect.len() {
        return Err(Refusal(
            "verification failed: checkpoints vanished during the rewrite".into(),
        ));
    }
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::super::apply::full_body;
    use super::super::{DeltaToFull, MigrateOptions, PlanStatus};
    use super::*;
    use dfck_core::materialize::{Reducer, for_each_stored_messages};
    use dfck_core::progress::NoProgress;
    use dfck_core::store::sqlite::SqliteStore;
    use dfck_core::write::{Connections, RunOptions};

    /// The fingerprints of every versioned checkpoint's stored list, as the conversion
    /// computes them.
    fn expected(store: &SqliteStore, thread: &str) -> HashMap<String, String> {
        let t = LoadedThread::load_full(store, thread, "").unwrap();
        let mut expect = HashMap::new();
        for_each_stored_messages(&t, Reducer::Langgraph, &mut |i, stored| {
            if let Ok(ck) = &t.nodes[i].checkpoint {
                if ck.version(MESSAGES).is_some() {
                    expect.insert(t.nodes[i].id.clone(), digest(stored));
                }
            }
            Ok(())
        })
        .unwrap();
        expect
    }

    #[test]
    fn verification_before_commit_catches_a_wrong_list_and_a_marker() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        std::fs::copy(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sqlite/delta_k3.db"),
            &db,
        )
        .unwrap();
        let store = SqliteStore::open_read_write(&db).unwrap();
        let opts = MigrateOptions::default();
        let open = || SqliteStore::open_read_write(&db);
        let conns = Connections {
            first: &store,
            open: &open,
            spare: None,
        };
        let run = RunOptions {
            jobs: 1,
            cache: None,
            exact_threads: false,
            backup: None,
            phase: "converting threads",
            progress: &NoProgress,
            events: &|_| {},
        };
        let job = DeltaToFull { opts: &opts };
        let report = dfck_core::write::run(&job, conns, &["t-linear".into()], &run).unwrap();
        assert_eq!(report.len(), 1);
        assert_eq!(report[0].status, PlanStatus::Converted);
        let expect = expected(&store, "t-linear");
        assert!(verify_raw(&store, "t-linear", "", &expect).is_ok());
        // The delta form itself fails verification (snapshots, markers, absent lists).
        let other = expected(&store, "t-fork");
        assert!(verify_raw(&store, "t-fork", "", &other).is_err());

        // One message dropped from the head's stored list: "differs from its delta view".
        let head = store.head_id("t-linear", "").unwrap().unwrap();
        let row = store.checkpoint("t-linear", "", &head).unwrap().unwrap();
        let dfck_core::store::CheckpointBody::Serialized { bytes, .. } = &row.body else {
            panic!("sqlite row");
        };
        let body = codec::decode(bytes).unwrap();
        let Some(Value::Array(mut list)) = body
            .get("channel_values")
            .and_then(|cv| cv.get(MESSAGES))
            .cloned()
        else {
            panic!("converted head stores its list");
        };
        list.pop();
        let tampered = codec::encode(&full_body(body, Some(list)));
        store
            .update_checkpoint("t-linear", "", &head, &tampered, &row.metadata)
            .unwrap();
        let e = verify_raw(&store, "t-linear", "", &expect).unwrap_err();
        assert!(e.0.contains("differs from its delta view"), "{e}");
        store
            .update_checkpoint("t-linear", "", &head, bytes, &row.metadata)
            .unwrap();
        assert!(verify_raw(&store, "t-linear", "", &expect).is_ok());

        // DeerFlow's marker left in the metadata.
        let meta = br#"{"source": "loop", "step": 1, "deerflow_checkpoint_channel_mode": "delta"}"#;
        store
            .update_checkpoint("t-linear", "", &head, bytes, meta)
            .unwrap();
        let e = verify_raw(&store, "t-linear", "", &expect).unwrap_err();
        assert!(e.0.contains("delta marker"), "{e}");
    }
}
