//! What a copy must preserve, as fingerprints (docs/copy.md#verification): per checkpoint
//! its id, parent, metadata (`writes` aside, which PostgreSQL never stores), format fields
//! and the state LangGraph shows there (every channel, `messages` through its delta history
//! walk); per namespace every pending write, bytes included. Equal fingerprints on source
//! and target mean the copy shows the same thing everywhere. A namespace whose state
//! cannot be materialized (encrypted or pickled rows) is fingerprinted by its stored bytes,
//! so it compares equal only when copied byte for byte.

use crate::commands::migrate::MigrateOptions;
use crate::commands::migrate::state::fingerprints;
use dfck_core::model::thread::LoadedThread;
use dfck_core::store::{CheckpointBody, CheckpointRow, Store, WriteRow};
use dfck_core::write::Refusal;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use xxhash_rust::xxh3::Xxh3;

/// Fingerprints of one thread.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThreadDigest {
    /// (namespace, checkpoint id) → fingerprint.
    pub checkpoints: BTreeMap<(String, String), u128>,
    /// Namespace → fingerprint of its writes.
    pub writes: BTreeMap<String, u128>,
}

fn field(h: &mut Xxh3, bytes: &[u8]) {
    h.update(&(bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

fn canonical_meta(meta: &serde_json::Map<String, serde_json::Value>) -> Vec<u8> {
    let mut m = meta.clone();
    m.remove("writes");
    serde_json::to_vec(&dfck_core::codec::pyjson::sort_keys(
        &serde_json::Value::Object(m),
    ))
    .unwrap_or_default()
}

/// Fingerprints a thread as `store` shows it now.
pub fn digest_thread(store: &dyn Store, thread_id: &str) -> Result<ThreadDigest, Refusal> {
    let e = |e: dfck_core::error::StoreError| Refusal(e.to_string());
    let mut out = ThreadDigest::default();
    for ns in store.namespaces(thread_id).map_err(e)? {
        let mut t = LoadedThread::load_full(store, thread_id, &ns).map_err(e)?;
        one_value_per_version(&mut t);
        let reducer = MigrateOptions::default().reducer_for(&t);
        let state = fingerprints(store, &t, reducer).ok();
        let raw = match state {
            Some(_) => None,
            None => Some(raw_bodies(store, thread_id, &ns)?),
        };
        let mut wh = Xxh3::new();
        for n in &t.nodes {
            let mut h = Xxh3::new();
            field(&mut h, n.id.as_bytes());
            field(
                &mut h,
                n.parent.as_deref().unwrap_or("\u{0}none").as_bytes(),
            );
            field(&mut h, &canonical_meta(&n.metadata));
            if let Ok(ck) = &n.checkpoint {
                field(&mut h, format!("{:?}|{:?}", ck.v, ck.ts).as_bytes());
                let mut versions = ck.channel_versions.clone();
                versions.sort();
                let mut seen = ck.versions_seen.clone();
                seen.sort();
                for s in &mut seen {
                    s.1.sort();
                }
                field(&mut h, format!("{versions:?}|{seen:?}").as_bytes());
            }
            match (&state, &raw) {
                (Some(s), _) => h.update(&s.get(&n.id).copied().unwrap_or(0).to_le_bytes()),
                (None, Some(r)) => h.update(&r.get(&n.id).copied().unwrap_or(0).to_le_bytes()),
                _ => {}
            }
            out.checkpoints
                .insert((ns.clone(), n.id.clone()), h.digest128());
            for w in &n.writes {
                hash_write(&mut wh, w);
            }
        }
        out.writes.insert(ns, wh.digest128());
    }
    Ok(out)
}

/// One pending write, its plaintext: a copy may encrypt (`--encrypt-all`) and encrypts with
/// a fresh nonce, so the stored bytes of the same value differ.
fn hash_write(wh: &mut Xxh3, w: &WriteRow) {
    field(wh, w.checkpoint_id.as_bytes());
    field(wh, w.task_path.as_bytes());
    field(wh, w.task_id.as_bytes());
    wh.update(&w.idx.to_le_bytes());
    field(wh, w.channel.as_bytes());
    let opened = dfck_core::codec::aes::open(
        w.type_tag.as_deref(),
        bytes::Bytes::copy_from_slice(&w.value),
    )
    .ok();
    let (tag, value) = match &opened {
        Some(o) => (o.tag.as_deref(), &o.bytes[..]),
        None => (w.type_tag.as_deref(), &w.value[..]),
    };
    field(wh, tag.unwrap_or("\u{0}null").as_bytes());
    field(wh, value);
}

/// The fingerprint of a checkpoint row as stored: id, parent, metadata and body (a SQLite
/// body by its bytes; a PostgreSQL one by its JSONB value, keys sorted, and the blobs at its
/// versions). Two stores of one backend holding the same rows show the same state, so a
/// copy that keeps rows as stored is verified by these ([`raw_digest`]).
pub fn raw_checkpoint(row: &CheckpointRow) -> u128 {
    let mut h = Xxh3::new();
    field(&mut h, row.checkpoint_id.as_bytes());
    field(
        &mut h,
        row.parent_checkpoint_id
            .as_deref()
            .unwrap_or("\u{0}none")
            .as_bytes(),
    );
    match &row.body {
        CheckpointBody::Serialized { .. } => field(&mut h, &row.metadata),
        CheckpointBody::Postgres { .. } => {
            let meta = serde_json::from_slice::<serde_json::Value>(&row.metadata)
                .map(|m| sorted_json(&m))
                .unwrap_or_else(|_| row.metadata.clone());
            field(&mut h, &meta);
        }
    }
    body_print(&mut h, &row.body);
    h.digest128()
}

fn sorted_json(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&dfck_core::codec::pyjson::sort_keys(v)).unwrap_or_default()
}

fn body_print(h: &mut Xxh3, body: &CheckpointBody) {
    match body {
        CheckpointBody::Serialized { type_tag, bytes } => {
            field(h, type_tag.as_deref().unwrap_or("").as_bytes());
            field(h, bytes);
        }
        CheckpointBody::Postgres { checkpoint, blobs } => {
            field(h, &sorted_json(checkpoint));
            for b in blobs {
                field(h, b.channel.as_bytes());
                field(h, b.type_tag.as_bytes());
                field(h, b.blob.as_deref().unwrap_or_default());
            }
        }
    }
}

/// The fingerprint of a namespace's pending writes, in the order given.
pub fn raw_writes(writes: &[WriteRow]) -> u128 {
    let mut wh = Xxh3::new();
    for w in writes {
        hash_write(&mut wh, w);
    }
    wh.digest128()
}

/// A thread's rows as stored, fingerprinted ([`raw_checkpoint`], [`raw_writes`]), read one
/// checkpoint at a time.
pub fn raw_digest(store: &dyn Store, thread_id: &str) -> Result<ThreadDigest, Refusal> {
    let e = |e: dfck_core::error::StoreError| Refusal(e.to_string());
    let mut out = ThreadDigest::default();
    for ns in store.namespaces(thread_id).map_err(e)? {
        store
            .scan_thread_values(thread_id, &ns, &mut |row| {
                out.checkpoints.insert(
                    (ns.clone(), row.checkpoint_id.clone()),
                    raw_checkpoint(&row),
                );
                Ok(())
            })
            .map_err(e)?;
        let mut writes = store.thread_writes(thread_id, &ns).map_err(e)?;
        super::convert::sort_ns_writes(&mut writes);
        out.writes.insert(ns, raw_writes(&writes));
    }
    Ok(out)
}

/// Every stored value replaced by the first (in id order) stored at the same (channel,
/// version): a version names one value (PostgreSQL stores one per version), so two
/// encodings of it (a Python set iterated in another order) count as the same value.
fn one_value_per_version(t: &mut LoadedThread) {
    let mut first: HashMap<(String, String), dfck_core::codec::Value> = HashMap::new();
    for n in &mut t.nodes {
        let Ok(ck) = &mut n.checkpoint else { continue };
        for (name, v) in ck.channel_values.iter_mut() {
            let Some(version) = ck
                .channel_versions
                .iter()
                .find(|(c, _)| c == name)
                .map(|(_, ver)| ver.clone())
            else {
                continue;
            };
            match first.entry((name.clone(), version)) {
                Entry::Occupied(o) => *v = o.get().clone(),
                Entry::Vacant(slot) => {
                    slot.insert(v.clone());
                }
            }
        }
    }
}

/// Stored-bytes fingerprints of every checkpoint of a namespace.
fn raw_bodies(
    store: &dyn Store,
    thread_id: &str,
    ns: &str,
) -> Result<HashMap<String, u128>, Refusal> {
    let mut out = HashMap::new();
    store
        .scan_thread_values(thread_id, ns, &mut |row| {
            let mut h = Xxh3::new();
            body_print(&mut h, &row.body);
            out.insert(row.checkpoint_id, h.digest128());
            Ok(())
        })
        .map_err(|e| Refusal(e.to_string()))?;
    Ok(out)
}

/// Why `got` (the target) differs from `want` (the source), or `None` when equal.
pub fn difference(want: &ThreadDigest, got: &ThreadDigest) -> Option<String> {
    if want == got {
        return None;
    }
    for (key, fp) in &want.checkpoints {
        match got.checkpoints.get(key) {
            None => return Some(format!("checkpoint {} is missing", key.1)),
            Some(g) if g != fp => return Some(format!("checkpoint {} differs", key.1)),
            _ => {}
        }
    }
    if let Some(key) = got
        .checkpoints
        .keys()
        .find(|k| !want.checkpoints.contains_key(*k))
    {
        return Some(format!("checkpoint {} is extra", key.1));
    }
    let ns = want
        .writes
        .iter()
        .find(|(ns, fp)| got.writes.get(*ns) != Some(fp))
        .map(|(ns, _)| ns.clone())
        .unwrap_or_default();
    Some(if ns.is_empty() {
        "the pending writes differ".into()
    } else {
        format!("the pending writes of namespace '{ns}' differ")
    })
}
