//! The whole-thread state check of a conversion: a fingerprint of every channel at every
//! checkpoint of a thread, as LangGraph shows it, taken before the rewrite (delta form,
//! under the lock) and again after it inside the same transaction. A conversion that would
//! change what any checkpoint shows — not only the checkpoints it rewrote — is rolled back.
//!
//! The `messages` view follows LangGraph's delta history walk: a checkpoint that versions
//! `messages` without storing it replays its ancestors' `messages` writes onto the nearest
//! ancestor that stores a value, whatever the versions in between. It is computed
//! incrementally (root to leaves, each checkpoint once), like
//! [`dfck_core::materialize::for_each_stored_messages`].

use super::checks::{digest, encoded_len};
use dfck_core::codec::{self, EXT_DELTA_SNAPSHOT, Value};
use dfck_core::materialize::{Reducer, replay_writes, unwrap_snapshot};
use dfck_core::model::read_back::ReadBack;
use dfck_core::model::thread::LoadedThread;
use dfck_core::model::{Checkpoint, MESSAGES, Write};
use dfck_core::store::Store;
use dfck_core::write::Refusal;
use std::borrow::Cow;
use std::collections::HashMap;
use std::rc::Rc;

/// Checkpoint id → fingerprint of every channel it shows.
pub(crate) type StateFingerprints = HashMap<String, u128>;

fn is_snapshot(v: &Value) -> bool {
    matches!(v, Value::Ext(e) if e.code == EXT_DELTA_SNAPSHOT)
}

/// A stored value as LangGraph reads it: one `_DeltaSnapshot` unwrapped. A snapshot inside
/// a snapshot is not something DeerFlow writes; the thread is refused.
fn stored(id: &str, channel: &str, v: &Value) -> Result<Value, Refusal> {
    let out = unwrap_snapshot(v.clone());
    if is_snapshot(&out) || (is_snapshot(v) && matches!(&out, Value::Ext(_))) {
        return Err(Refusal(format!(
            "{id} stores a _DeltaSnapshot inside another in channel '{channel}': not DeerFlow's delta data"
        )));
    }
    Ok(out)
}

fn seed(v: Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items,
        Value::Nil => Vec::new(),
        other => vec![other],
    }
}

/// Fingerprints every checkpoint of one namespace (see the module header). A thread loaded
/// without its values ([`LoadedThread::load_bounded`]) is read back from `store` as the walk
/// reaches its checkpoints ([`ReadBack`]).
pub(crate) fn fingerprints(
    store: &dyn Store,
    t: &LoadedThread,
    reducer: Reducer,
) -> Result<StateFingerprints, Refusal> {
    let mut out = HashMap::with_capacity(t.nodes.len());
    // (node, the `messages` base its children replay from: the value after its parent's
    // history, before this node's own writes)
    let mut stack: Vec<(usize, Rc<Vec<Value>>)> = t
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.parent_index.is_none())
        .map(|(i, _)| (i, Rc::new(Vec::new())))
        .collect();
    let mut reads = ReadBack::new(t, store);
    while let Some((i, base)) = stack.pop() {
        let n = &t.nodes[i];
        let (ck, raw) = reads
            .lazy_messages(i)
            .map_err(|e| Refusal(format!("unreadable checkpoint: {e}")))?;
        // What this checkpoint shows for `messages`, and the history its children start from.
        let versioned = ck.version(MESSAGES).is_some();
        let base_digest = versioned.then(|| digest(&base));
        let mut base = base;
        let own = stored_list(&n.id, &ck, raw, &mut base, base_digest.as_deref())?;
        let shown = match (&own.digest, versioned) {
            (Some(d), _) => Some(d.clone()),
            (None, true) => base_digest,
            (None, false) => None,
        };
        let fp = node_fingerprint(&n.id, &ck, shown.as_deref())?;
        let own = own.list;
        out.insert(n.id.clone(), fp);
        if n.children.is_empty() {
            continue;
        }
        // The history walk seeds from the nearest ancestor that stores a value.
        let start = match own {
            Some(v) => v,
            None => Rc::try_unwrap(base).unwrap_or_else(|rc| (*rc).clone()),
        };
        let next = Rc::new(replay_messages(t, i, start, reducer)?.0);
        // The newest child is walked first (which unreadable checkpoint a refusal names
        // depends on it); an older branch read ahead and skipped is read again when reached.
        for &c in &n.children {
            stack.push((c, next.clone()));
        }
    }
    Ok(out)
}

/// Checkpoint `i` with its values, read back when the thread was loaded without them.
pub(crate) fn values_at<'t>(
    store: &dyn Store,
    t: &'t LoadedThread,
    i: usize,
) -> Result<Cow<'t, Checkpoint>, Refusal> {
    t.checkpoint_values(store, i)
        .map_err(|e| Refusal(format!("unreadable checkpoint: {e}")))
}

/// The list a checkpoint stores as `messages`, as LangGraph reads it (a snapshot
/// unwrapped), or `None` when it stores none.
pub(crate) fn own_messages(id: &str, ck: &Checkpoint) -> Result<Option<Vec<Value>>, Refusal> {
    ck.value(MESSAGES).map(|v| seed_stored(id, v)).transpose()
}

/// A stored `messages` value as the list LangGraph reads (a snapshot unwrapped).
pub(crate) fn seed_stored(id: &str, v: &Value) -> Result<Vec<Value>, Refusal> {
    stored(id, MESSAGES, v).map(seed)
}

/// A checkpoint's stored `messages` list (as LangGraph reads it), the [`digest`] of it and
/// its encoded size.
pub(crate) struct Stored {
    pub list: Option<Vec<Value>>,
    pub digest: Option<String>,
    pub bytes: u64,
}

/// The list checkpoint `ck` stores. Given its stored bytes (`raw`), it is not decoded when
/// those bytes are the replayed list's encoding (`base_digest`): `base` is taken instead.
pub(crate) fn stored_list(
    id: &str,
    ck: &Checkpoint,
    raw: Option<Vec<u8>>,
    base: &mut Rc<Vec<Value>>,
    base_digest: Option<&str>,
) -> Result<Stored, Refusal> {
    let Some(raw) = raw else {
        let list = own_messages(id, ck)?;
        return Ok(Stored {
            digest: list.as_deref().map(digest),
            bytes: list.as_deref().map_or(0, encoded_len) as u64,
            list,
        });
    };
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&raw);
    let raw_digest = format!("{:032x}", h.digest128());
    if Some(raw_digest.as_str()) == base_digest {
        // The bytes are the replayed list's, byte for byte: it is the stored list.
        let list = Rc::try_unwrap(std::mem::take(base)).unwrap_or_else(|rc| (*rc).clone());
        return Ok(Stored {
            list: Some(list),
            digest: Some(raw_digest),
            bytes: raw.len() as u64,
        });
    }
    let value = dfck_core::codec::decode(&raw)
        .map_err(|e| Refusal(format!("unreadable checkpoint: {id}: messages: {e}")))?;
    let list = seed_stored(id, &value)?;
    Ok(Stored {
        digest: Some(digest(&list)),
        bytes: encoded_len(&list) as u64,
        list: Some(list),
    })
}

/// The fingerprint of one checkpoint: every channel but `messages` as stored (snapshots
/// unwrapped), and `shown`, the [`digest`] of the `messages` list it shows (`None`: none).
pub(crate) fn node_fingerprint(
    id: &str,
    ck: &Checkpoint,
    shown: Option<&str>,
) -> Result<u128, Refusal> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut channels: Vec<(&str, Value)> = Vec::new();
    for (name, v) in &ck.channel_values {
        if name != MESSAGES {
            channels.push((name, stored(id, name, v)?));
        }
    }
    channels.sort_by(|a, b| a.0.cmp(b.0));
    for (name, v) in &channels {
        h.update(name.as_bytes());
        h.update(&[0]);
        h.update(&codec::encode(v));
    }
    h.update(b"messages\0");
    match shown {
        Some(d) => h.update(d.as_bytes()),
        None => h.update(b"-"),
    }
    Ok(h.digest128())
}

/// `start` with node `i`'s own `messages` writes replayed onto it: what its children see;
/// and whether those writes hold an `Overwrite`.
pub(crate) fn replay_messages(
    t: &LoadedThread,
    i: usize,
    start: Vec<Value>,
    reducer: Reducer,
) -> Result<(Vec<Value>, bool), Refusal> {
    let fail = |e: String| Refusal(format!("materialization fails: {e}"));
    let mut writes = Vec::new();
    for w in t.nodes[i].writes.iter().filter(|w| w.channel == MESSAGES) {
        writes.push(Write::from_row(w.clone(), &t.thread_id).map_err(|e| fail(e.to_string()))?);
    }
    if writes.is_empty() {
        return Ok((start, false));
    }
    let overwrite = writes.iter().any(|w| w.value.overwrite_value().is_some());
    let refs: Vec<&Value> = writes.iter().map(|w| &w.value).collect();
    Ok((
        replay_writes(start, &refs, reducer).map_err(fail)?,
        overwrite,
    ))
}

/// Compares the state before and after a rewrite: every checkpoint shows what it showed.
pub(crate) fn compare(
    before: &StateFingerprints,
    after: &StateFingerprints,
) -> Result<(), Refusal> {
    let fail = |what: String| Err(Refusal(format!("verification failed: {what}")));
    if before.len() != after.len() {
        return fail("checkpoints appeared or vanished during the rewrite".into());
    }
    let mut changed: Vec<&String> = before
        .iter()
        .filter(|(id, fp)| after.get(*id) != Some(fp))
        .map(|(id, _)| id)
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    changed.sort();
    fail(format!(
        "the conversion would change the state shown at {}",
        changed
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}
