//! Where a full→delta conversion keeps a value (docs/full-to-delta.md): one walk of a
//! namespace's tree, root to leaves, replaying the kept writes exactly as a delta-mode
//! reader will, deciding per checkpoint whether `messages` can go (the replay already gives
//! the stored list) or must stay as a `_DeltaSnapshot` (cadence, fork, replay mismatch), and
//! computing the `counters_since_delta_snapshot` a delta-mode process would have stored.

use super::SnapshotReason;
use crate::commands::migrate::state::{self, StateFingerprints};
use dfck_core::codec::Value;
use dfck_core::materialize::Reducer;
use dfck_core::model::read_back::ReadBack;
use dfck_core::model::thread::{LoadedThread, Node};
use dfck_core::model::{DELTA_COUNTERS, MESSAGES, MessagesEncoding};
use dfck_core::store::Store;
use dfck_core::write::Refusal;
use serde_json::Value as Json;
use std::rc::Rc;

/// LangGraph snapshots a delta channel after this many supersteps even without updates.
const MAX_SUPERSTEPS_SINCE_SNAPSHOT: u64 = 5000;

/// What happens to `messages` at one checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessagesAction {
    /// The checkpoint does not version `messages`: its body stays as it is.
    Unversioned,
    /// The stored list goes: the delta replay gives it back.
    Drop,
    /// The stored list is wrapped in a `_DeltaSnapshot`.
    Snapshot(SnapshotReason),
}

/// The rewrite of one full-mode checkpoint.
#[derive(Debug, Clone)]
pub struct NodeChange {
    /// Index into the loaded namespace.
    pub index: usize,
    /// Checkpoint id.
    pub id: String,
    /// `channel_versions.messages`.
    pub version: Option<String>,
    /// What happens to the stored list.
    pub action: MessagesAction,
    /// The metadata afterwards.
    pub metadata: serde_json::Map<String, Json>,
    /// Encoded size of the stored list (0 when none).
    pub list_bytes: u64,
    /// Size of the metadata before, as JSON.
    pub metadata_bytes: u64,
}

/// Is this checkpoint already in delta form (metadata or structure)?
pub fn delta_encoded(n: &Node) -> bool {
    n.facts.delta
        || matches!(
            n.messages_encoding,
            Some(MessagesEncoding::Snapshot | MessagesEncoding::Absent)
        )
}

/// How the converted metadata looks.
#[derive(Debug, Clone, Copy)]
pub struct Form {
    /// Add DeerFlow's mode marker.
    pub deerflow_marker: bool,
    /// Snapshot cadence K.
    pub frequency: u64,
    /// Replay reducer.
    pub reducer: Reducer,
}

fn counters_of(meta: &serde_json::Map<String, Json>) -> Counters {
    match meta
        .get(DELTA_COUNTERS)
        .and_then(|c| c.get(MESSAGES))
        .and_then(Json::as_array)
    {
        Some(a) if a.len() == 2 => (a[0].as_u64().unwrap_or(0), a[1].as_u64().unwrap_or(0)),
        _ => (0, 0),
    }
}

/// The metadata of a converted checkpoint: the `messages` counters (only when non-zero,
/// placed where LangGraph puts them, after `parents`) and, in DeerFlow's form, the marker
/// last.
fn delta_metadata(
    old: &serde_json::Map<String, Json>,
    counters: Counters,
    form: Form,
) -> serde_json::Map<String, Json> {
    let pair = (counters != (0, 0)).then(|| Json::from(vec![counters.0, counters.1]));
    let mut counters_obj = match old.get(DELTA_COUNTERS) {
        Some(Json::Object(c)) => c.clone(),
        _ => serde_json::Map::new(),
    };
    counters_obj.shift_remove(MESSAGES);
    if let Some(p) = pair {
        counters_obj.insert(MESSAGES.into(), p);
    }
    let mut out = serde_json::Map::new();
    let mut placed = counters_obj.is_empty();
    for (k, v) in old {
        if k == DELTA_COUNTERS || k == dfck_core::model::MODE_MARKER {
            continue;
        }
        out.insert(k.clone(), v.clone());
        if k == "parents" && !placed {
            out.insert(DELTA_COUNTERS.into(), Json::Object(counters_obj.clone()));
            placed = true;
        }
    }
    if !placed {
        out.insert(DELTA_COUNTERS.into(), Json::Object(counters_obj));
    }
    if form.deerflow_marker {
        out.insert(dfck_core::model::MODE_MARKER.into(), Json::from("delta"));
    } else if let Some(v) = old.get(dfck_core::model::MODE_MARKER) {
        out.insert(dfck_core::model::MODE_MARKER.into(), v.clone());
    }
    out
}

/// `[updates, supersteps]` since the last snapshot.
type Counters = (u64, u64);

/// A checkpoint still to visit: its index, the list a child without a stored value replays
/// to (its parent's), its parent's counters, and whether its parent's `messages` writes hold
/// an `Overwrite`.
type Pending = (usize, Rc<Vec<Value>>, Counters, bool);

/// Decides every full-mode checkpoint of one namespace (see the module header). Checkpoints
/// already in delta form are left as they are and replayed through.
/// `shared`: stores whose values are shared by version (Postgres); a version a checkpoint
/// left as it is also stores keeps its value, as a snapshot.
/// Returns the changes and every checkpoint's state fingerprint before them (the walk is
/// the state check's, [`state::fingerprints`]). A thread loaded without its values is read
/// back from `store` as the walk reaches its checkpoints ([`ReadBack`]).
pub fn decide(
    store: &dyn Store,
    t: &LoadedThread,
    form: Form,
    shared: bool,
) -> Result<(Vec<NodeChange>, StateFingerprints), Refusal> {
    let kept: std::collections::HashSet<&str> = if shared {
        t.nodes
            .iter()
            .filter(|n| delta_encoded(n))
            .filter_map(|n| n.checkpoint.as_ref().ok())
            .filter(|c| c.value(MESSAGES).is_some())
            .filter_map(|c| c.version(MESSAGES))
            .collect()
    } else {
        Default::default()
    };
    let mut out = Vec::new();
    let mut state = StateFingerprints::with_capacity(t.nodes.len());
    let mut stack: Vec<Pending> = t
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.parent_index.is_none())
        .map(|(i, _)| (i, Rc::new(Vec::new()), (0, 0), false))
        .rev()
        .collect();
    let mut reads = ReadBack::new(t, store);
    while let Some((i, mut base, parent_counters, overwritten)) = stack.pop() {
        let n = &t.nodes[i];
        let (ck, raw) = reads
            .lazy_messages(i)
            .map_err(|e| Refusal(format!("unreadable checkpoint: {e}")))?;
        if let Some(kind) = ck
            .value(MESSAGES)
            .and_then(|v| dfck_core::model::messages_not_a_list(v, true))
        {
            return Err(Refusal(format!(
                "{} stores {kind} as 'messages', not a list: its delta form would show something else (dfck verify reports it as value.messages_not_a_list)",
                n.id
            )));
        }
        let version = ck.version(MESSAGES).map(str::to_owned);
        let base_digest = version.as_ref().map(|_| super::digest(&base));
        let state::Stored {
            list: stored,
            digest: stored_digest,
            bytes: stored_bytes,
        } = state::stored_list(&n.id, &ck, raw, &mut base, base_digest.as_deref())?;
        // What this checkpoint shows now, as the state check fingerprints it.
        let shown = match (&stored_digest, &version) {
            (Some(d), _) => Some(d.clone()),
            (None, Some(_)) => base_digest.clone(),
            (None, None) => None,
        };
        state.insert(
            n.id.clone(),
            state::node_fingerprint(&n.id, &ck, shown.as_deref())?,
        );
        let (carry, counters) = if delta_encoded(n) {
            let carry = stored.unwrap_or_else(|| (*base).clone());
            (carry, counters_of(&ck.metadata))
        } else {
            let parent = n.parent_index.map(|p| &t.nodes[p]);
            let parent_version = parent
                .and_then(|p| p.checkpoint.as_ref().ok())
                .and_then(|c| c.version(MESSAGES));
            let mut c = (parent_counters.0, parent_counters.1 + 1);
            let updated = version.is_some() && version.as_deref() != parent_version;
            if updated {
                c.0 += 1;
            }
            let (action, carry, list_bytes) = match (&version, stored) {
                (None, stored) => (
                    MessagesAction::Unversioned,
                    stored.unwrap_or_else(|| (*base).clone()),
                    0,
                ),
                (Some(_), None) => {
                    return Err(Refusal(format!(
                        "{} versions messages but stores no list: not a full-mode checkpoint",
                        n.id
                    )));
                }
                (Some(v), Some(full)) => {
                    let matches = shown == base_digest;
                    // A copy of the consumer (same version) shares its replay legitimately.
                    let fork = parent.is_some_and(|p| {
                        p.children.len() > 1
                            && p.writes.iter().any(|w| w.channel == MESSAGES)
                            && consumer(t, p).is_none_or(|c| {
                                c != i && version_of(&t.nodes[c]) != Some(v.as_str())
                            })
                    });
                    let reason = if kept.contains(v.as_str()) {
                        Some(SnapshotReason::SharedVersion)
                    } else if fork {
                        Some(SnapshotReason::Fork)
                    } else if !matches {
                        Some(SnapshotReason::ReplayMismatch)
                    } else if overwritten && updated {
                        Some(SnapshotReason::Overwrite)
                    } else if c.0 >= form.frequency || c.1 >= MAX_SUPERSTEPS_SINCE_SNAPSHOT {
                        Some(SnapshotReason::Cadence)
                    } else {
                        None
                    };
                    let bytes = stored_bytes;
                    match reason {
                        Some(r) => {
                            c = (0, 0);
                            (MessagesAction::Snapshot(r), full, bytes)
                        }
                        None => (MessagesAction::Drop, full, bytes),
                    }
                }
            };
            out.push(NodeChange {
                index: i,
                id: n.id.clone(),
                version: version.clone(),
                action,
                metadata: delta_metadata(&ck.metadata, c, form),
                metadata_bytes: serde_json::to_vec(&*ck.metadata).map_or(0, |v| v.len()) as u64,
                list_bytes,
            });
            (carry, c)
        };
        drop(ck);
        if n.children.is_empty() {
            continue;
        }
        let (next, overwrite) = state::replay_messages(t, i, carry, form.reducer)?;
        let next = Rc::new(next);
        for &c in n.children.iter().rev() {
            stack.push((c, next.clone(), counters, overwrite));
        }
    }
    if out
        .iter()
        .map(|c| c.index)
        .collect::<std::collections::HashSet<_>>()
        .len()
        + t.nodes.iter().filter(|n| delta_encoded(n)).count()
        < t.nodes.len()
    {
        return Err(Refusal(
            "some checkpoints are not reachable from a root".into(),
        ));
    }
    Ok((out, state))
}

fn version_of(n: &Node) -> Option<&str> {
    n.checkpoint.as_ref().ok().and_then(|c| c.version(MESSAGES))
}

/// The child of fork point `p` that consumed its pending `messages` writes: the first
/// (oldest) child that moved the `messages` version. Every other child starts a new branch.
fn consumer(t: &LoadedThread, p: &Node) -> Option<usize> {
    let pv = p.checkpoint.as_ref().ok().and_then(|c| c.version(MESSAGES));
    p.children.iter().copied().find(|&c| {
        t.nodes[c]
            .checkpoint
            .as_ref()
            .ok()
            .and_then(|ck| ck.version(MESSAGES))
            .is_some_and(|v| Some(v) != pv)
    })
}
