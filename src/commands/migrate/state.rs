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

use super::checks::digest;
use dfck_core::codec::{self, EXT_DELTA_SNAPSHOT, Value};
use dfck_core::materialize::{Reducer, replay_writes, unwrap_snapshot};
use dfck_core::model::thread::LoadedThread;
use dfck_core::model::{MESSAGES, Write};
use dfck_core::write::Refusal;
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

/// Fingerprints every checkpoint of one namespace (see the module header).
pub(crate) fn fingerprints(
    t: &LoadedThread,
    reducer: Reducer,
) -> Result<StateFingerprints, Refusal> {
    let fail = |e: String| Refusal(format!("materialization fails: {e}"));
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
    while let Some((i, base)) = stack.pop() {
        let n = &t.nodes[i];
        let ck = n
            .checkpoint
            .as_ref()
            .map_err(|e| Refusal(format!("unreadable checkpoint: {e}")))?;
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let mut channels: Vec<(&str, Value)> = Vec::new();
        for (name, v) in &ck.channel_values {
            if name != MESSAGES {
                channels.push((name, stored(&n.id, name, v)?));
            }
        }
        channels.sort_by(|a, b| a.0.cmp(b.0));
        for (name, v) in &channels {
            h.update(name.as_bytes());
            h.update(&[0]);
            h.update(&codec::encode(v));
        }
        // What this checkpoint shows for `messages`, and the history its children start from.
        let own: Option<Value> = match ck.value(MESSAGES) {
            Some(v) => Some(stored(&n.id, MESSAGES, v)?),
            None => None,
        };
        let shown: Option<Vec<Value>> = match (&own, ck.version(MESSAGES)) {
            (Some(v), _) => Some(seed(v.clone())),
            (None, Some(_)) => Some((*base).clone()),
            (None, None) => None,
        };
        h.update(b"messages\0");
        match &shown {
            Some(list) => h.update(digest(list).as_bytes()),
            None => h.update(b"-"),
        }
        out.insert(n.id.clone(), h.digest128());
        if n.children.is_empty() {
            continue;
        }
        // The history walk seeds from the nearest ancestor that stores a value.
        let start = match own {
            Some(v) => seed(v),
            None => Rc::try_unwrap(base).unwrap_or_else(|rc| (*rc).clone()),
        };
        let mut writes = Vec::new();
        for w in n.writes.iter().filter(|w| w.channel == MESSAGES) {
            writes.push(Write::from_row(w.clone(), &t.thread_id).map_err(|e| fail(e.to_string()))?);
        }
        let next = if writes.is_empty() {
            start
        } else {
            let refs: Vec<&Value> = writes.iter().map(|w| &w.value).collect();
            replay_writes(start, &refs, reducer).map_err(fail)?
        };
        let next = Rc::new(next);
        for &c in &n.children {
            stack.push((c, next.clone()));
        }
    }
    Ok(out)
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
