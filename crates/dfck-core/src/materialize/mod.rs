//! The materializer: rebuilds channel values the way LangGraph 1.2's `get_state` does —
//! stored values as they are, delta channels replayed from ancestor writes back to the
//! nearest stored value (docs/replay-and-forks.md#delta-replay), and, for the state view, the
//! checkpoint's own `NULL_TASK_ID` writes applied on top.

pub mod reducers;

use crate::codec::Value;
use crate::error::{MaterializeError, StoreError};
use crate::model::{Checkpoint, MESSAGES, NULL_TASK_ID, Write, has_marker};
use crate::store::{Store, WriteRow};
pub use reducers::Reducer;
use std::collections::HashSet;
use std::rc::Rc;

/// Where the materializer reads checkpoints and writes of one (thread, ns).
pub trait Source {
    /// Thread id.
    fn thread_id(&self) -> &str;
    /// A checkpoint by id, `None` when it does not exist.
    fn checkpoint(&mut self, id: &str) -> Result<Option<Rc<Checkpoint>>, MaterializeError>;
    /// The write rows stored on a checkpoint, canonical order; `channel` filters.
    fn write_rows(
        &mut self,
        id: &str,
        channel: Option<&str>,
    ) -> Result<Vec<WriteRow>, MaterializeError>;
}

/// A [`Source`] that reads lazily from a store, one checkpoint at a time (no caching:
/// a walk reads each checkpoint once, and values can then be moved instead of copied).
pub struct StoreSource<'a> {
    store: &'a dyn Store,
    thread_id: String,
    ns: String,
}

impl<'a> StoreSource<'a> {
    /// A source over (thread, ns) of `store`.
    pub fn new(store: &'a dyn Store, thread_id: &str, ns: &str) -> Self {
        StoreSource {
            store,
            thread_id: thread_id.to_owned(),
            ns: ns.to_owned(),
        }
    }
}

impl Source for StoreSource<'_> {
    fn thread_id(&self) -> &str {
        &self.thread_id
    }

    fn checkpoint(&mut self, id: &str) -> Result<Option<Rc<Checkpoint>>, MaterializeError> {
        let Some(row) = self.store.checkpoint(&self.thread_id, &self.ns, id)? else {
            return Ok(None);
        };
        Ok(Some(Rc::new(Checkpoint::from_row(row)?)))
    }

    fn write_rows(
        &mut self,
        id: &str,
        channel: Option<&str>,
    ) -> Result<Vec<WriteRow>, MaterializeError> {
        Ok(self.store.writes(&self.thread_id, &self.ns, id, channel)?)
    }
}

/// Which values to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// What `get_state(checkpoint_id=C).values` returns: the checkpoint's own
    /// `NULL_TASK_ID` writes applied.
    State,
    /// The value stored *at* the checkpoint (what a full-mode checkpoint holds).
    Stored,
    /// The channel values exactly as stored: no replay, `_DeltaSnapshot`s not unwrapped.
    Raw,
}

/// The materialized channels of one checkpoint, in order (internal channels included).
#[derive(Debug, Clone)]
pub struct Materialized {
    /// The checkpoint.
    pub checkpoint: Rc<Checkpoint>,
    /// Channel values.
    pub values: Vec<(String, Value)>,
    /// Ancestors whose writes were replayed (0 when the value is stored).
    pub replay_depth: usize,
    /// The messages reducer used.
    pub reducer: Reducer,
}

/// Unwraps a `_DeltaSnapshot` (ext 7) into the value it wraps; other values are returned as is.
pub fn unwrap_snapshot(v: Value) -> Value {
    match v {
        Value::Ext(e) if e.code == crate::codec::EXT_DELTA_SNAPSHOT && e.inner().is_some() => {
            e.into_inner().unwrap_or(Value::Nil)
        }
        other => other,
    }
}

/// The list a delta channel holds before replay, from a stored value: a `_DeltaSnapshot`
/// is unwrapped, a plain value (a thread migrated from a full channel) is used as is.
fn unwrap_seed(v: Value) -> Vec<Value> {
    match unwrap_snapshot(v) {
        Value::Array(items) => items,
        Value::Nil => Vec::new(),
        other => vec![other],
    }
}

/// Takes a checkpoint out of its `Rc` (copying only when it is shared).
fn owned(ck: Rc<Checkpoint>) -> Checkpoint {
    Rc::try_unwrap(ck).unwrap_or_else(|rc| (*rc).clone())
}

/// Moves a channel's stored value out of a checkpoint.
fn take_value(ck: &mut Checkpoint, channel: &str) -> Option<Value> {
    let i = ck.channel_values.iter().position(|(k, _)| k == channel)?;
    Some(ck.channel_values.swap_remove(i).1)
}

fn overwrite_base(v: &Value) -> Vec<Value> {
    match v {
        Value::Nil => Vec::new(),
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    }
}

/// `DeltaChannel.replay_writes`: the last Overwrite resets the base, the rest is folded in
/// one reducer call.
pub fn replay_writes(
    base: Vec<Value>,
    writes: &[&Value],
    reducer: Reducer,
) -> Result<Vec<Value>, String> {
    let (base, rest) = match writes.iter().rposition(|w| w.overwrite_value().is_some()) {
        Some(i) => (
            overwrite_base(writes[i].overwrite_value().unwrap_or(&Value::Nil)),
            &writes[i + 1..],
        ),
        None => (base, writes),
    };
    if rest.is_empty() {
        Ok(base)
    } else {
        reducer.apply(base, rest)
    }
}

/// `DeltaChannel.update` / `BinaryOperatorAggregate.update` for one batch: an Overwrite
/// replaces the value and drops the batch's other writes (two are an error); otherwise the
/// reducer folds the batch.
pub fn update_messages(
    value: Vec<Value>,
    writes: &[&Value],
    reducer: Reducer,
) -> Result<Vec<Value>, String> {
    let overwrites: Vec<&Value> = writes.iter().filter_map(|w| w.overwrite_value()).collect();
    match overwrites.len() {
        0 if writes.is_empty() => Ok(value),
        0 => reducer.apply(value, writes),
        1 => Ok(overwrite_base(overwrites[0])),
        _ => Err("Can receive only one Overwrite value per super-step.".into()),
    }
}

/// Chooses the reducer for `--reducer auto`: DeerFlow's when a checkpoint carries the marker.
pub fn auto_reducer<'a>(checkpoints: impl IntoIterator<Item = &'a Checkpoint>) -> Reducer {
    if checkpoints.into_iter().any(|c| has_marker(&c.metadata)) {
        Reducer::Deerflow
    } else {
        Reducer::Langgraph
    }
}

/// The result of walking up from a checkpoint to the nearest stored value of a channel.
pub struct DeltaHistory {
    /// The ancestors walked, nearest first (the seed's holder last, when `seeded`).
    pub chain: Vec<Rc<Checkpoint>>,
    /// Whether the last ancestor of `chain` stores the value (else the walk reached a root).
    pub seeded: bool,
}

impl DeltaHistory {
    /// Moves the seed value out of the chain (copying only that value, and only if the
    /// checkpoint is shared, e.g. by a reader's cache).
    pub fn take_seed(&mut self, channel: &str) -> Option<Value> {
        if !self.seeded {
            return None;
        }
        self.seeded = false;
        let holder = self.chain.pop()?;
        match Rc::try_unwrap(holder) {
            Ok(mut holder) => {
                let v = take_value(&mut holder, channel);
                self.chain.push(Rc::new(holder));
                v
            }
            Err(shared) => {
                let v = shared.value(channel).cloned();
                self.chain.push(shared);
                v
            }
        }
    }
}

/// `get_delta_channel_history` for one channel: walks parents of `ck` until one stores a
/// value. A cycle or a dangling parent ends the walk with an error.
pub fn delta_history(
    src: &mut dyn Source,
    ck: &Checkpoint,
    channel: &str,
) -> Result<DeltaHistory, MaterializeError> {
    let mut seen: HashSet<String> = HashSet::from([ck.checkpoint_id.clone()]);
    let mut chain = Vec::new();
    let mut child = ck.checkpoint_id.clone();
    let mut cur = ck.parent_checkpoint_id.clone();
    while let Some(id) = cur {
        if !seen.insert(id.clone()) {
            return Err(MaterializeError::Cycle {
                thread_id: src.thread_id().to_owned(),
                from: ck.checkpoint_id.clone(),
                at: id,
            });
        }
        let Some(a) = src.checkpoint(&id)? else {
            return Err(MaterializeError::DanglingParent {
                thread_id: src.thread_id().to_owned(),
                child,
                parent: id,
            });
        };
        let stores = a.value(channel).is_some();
        cur = a.parent_checkpoint_id.clone();
        chain.push(a);
        if stores {
            return Ok(DeltaHistory {
                chain,
                seeded: true,
            });
        }
        child = id;
    }
    Ok(DeltaHistory {
        chain,
        seeded: false,
    })
}

/// Decides the messages reducer once the replay chain is known: gets the target and the
/// ancestors the replay walks (empty when the value is stored).
pub type ChooseReducer<'a> = &'a dyn Fn(&Checkpoint, &[Rc<Checkpoint>]) -> Reducer;

/// A fixed reducer, whatever the checkpoints say.
pub fn fixed(r: Reducer) -> impl Fn(&Checkpoint, &[Rc<Checkpoint>]) -> Reducer {
    move |_, _| r
}

/// Materializes every channel of checkpoint `id` (internal channels included).
pub fn materialize(
    src: &mut dyn Source,
    id: &str,
    view: View,
    choose: ChooseReducer<'_>,
) -> Result<Materialized, MaterializeError> {
    let ck = src
        .checkpoint(id)?
        .ok_or_else(|| StoreError::CheckpointNotFound {
            thread_id: src.thread_id().to_owned(),
            checkpoint_ns: String::new(),
            checkpoint_id: id.to_owned(),
        })?;
    let reducer_err = |reason: String| MaterializeError::Reducer {
        thread_id: ck.thread_id.clone(),
        checkpoint_id: ck.checkpoint_id.clone(),
        reason,
    };
    let mut values: Vec<(String, Value)> = Vec::with_capacity(ck.channel_values.len() + 1);
    let mut replay_depth = 0;
    let reducer;
    // Delta channels: versioned but not stored. Only `messages` has a known reducer.
    if view == View::Raw {
        reducer = choose(&ck, &[]);
        let ck = owned(ck);
        return Ok(Materialized {
            values: ck.channel_values.clone(),
            checkpoint: Rc::new(ck),
            replay_depth: 0,
            reducer,
        });
    }
    if ck.value(MESSAGES).is_none() && ck.version(MESSAGES).is_some() {
        let mut hist = delta_history(src, &ck, MESSAGES)?;
        replay_depth = hist.chain.len();
        reducer = choose(&ck, &hist.chain);
        let mut writes = Vec::new();
        for a in hist.chain.iter().rev() {
            for row in src.write_rows(&a.checkpoint_id, Some(MESSAGES))? {
                writes.push(Write::from_row(row, &ck.thread_id)?);
            }
        }
        let base = hist
            .take_seed(MESSAGES)
            .map(unwrap_seed)
            .unwrap_or_default();
        drop(hist);
        let refs: Vec<&Value> = writes.iter().map(|w| &w.value).collect();
        let v = replay_writes(base, &refs, reducer).map_err(reducer_err)?;
        values.push((MESSAGES.to_owned(), Value::Array(v)));
    } else {
        reducer = choose(&ck, &[]);
    }
    let own: Vec<Write> = if view == View::State {
        src.write_rows(&ck.checkpoint_id, None)?
            .into_iter()
            .filter(|w| w.task_id == NULL_TASK_ID)
            .map(|r| Write::from_row(r, &ck.thread_id))
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let mut ck = owned(ck);
    for (name, v) in std::mem::take(&mut ck.channel_values) {
        values.push((name, unwrap_snapshot(v)));
    }
    if view == View::State {
        apply_null_writes(&mut values, &own, reducer).map_err(|reason| {
            MaterializeError::Reducer {
                thread_id: ck.thread_id.clone(),
                checkpoint_id: ck.checkpoint_id.clone(),
                reason,
            }
        })?;
    }
    Ok(Materialized {
        checkpoint: Rc::new(ck),
        values,
        replay_depth,
        reducer,
    })
}

/// Applies a checkpoint's own `NULL_TASK_ID` writes as one batch per channel: `messages`
/// through the messages reducer, every other channel with last-value semantics (an
/// Overwrite's value, else the last write).
fn apply_null_writes(
    values: &mut Vec<(String, Value)>,
    writes: &[Write],
    reducer: Reducer,
) -> Result<(), String> {
    let mut channels: Vec<&str> = Vec::new();
    for w in writes {
        if !channels.contains(&w.channel.as_str()) {
            channels.push(&w.channel);
        }
    }
    for ch in channels {
        let batch: Vec<&Value> = writes
            .iter()
            .filter(|w| w.channel == ch)
            .map(|w| &w.value)
            .collect();
        let pos = values.iter().position(|(k, _)| k == ch);
        let new = if ch == MESSAGES {
            let cur = match pos.map(|i| std::mem::replace(&mut values[i].1, Value::Nil)) {
                Some(Value::Array(items)) => items,
                Some(Value::Nil) | None => Vec::new(),
                Some(other) => vec![other],
            };
            Value::Array(update_messages(cur, &batch, reducer)?)
        } else {
            match batch.iter().rev().find_map(|w| w.overwrite_value()) {
                Some(v) => v.clone(),
                None => match batch.last() {
                    Some(v) => (*v).clone(),
                    None => continue,
                },
            }
        };
        match pos {
            Some(i) => values[i].1 = new,
            None => values.push((ch.to_owned(), new)),
        }
    }
    Ok(())
}

/// Receives each checkpoint (by index) with its stored `messages` view.
pub type StoredMessagesVisitor<'a> =
    dyn FnMut(usize, &[Value]) -> Result<(), MaterializeError> + 'a;

/// Whole-thread materialization, incrementally: `M(C)` = the value stored at C (a
/// `_DeltaSnapshot` unwrapped), else `replay(M(parent), parent's messages writes)`, else `[]`
/// at a root — root to leaves, each checkpoint once, so a thread costs time linear in its
/// writes. Equals LangGraph's ancestor walk because the messages reducers are
/// batching-invariant and replay resets at every Overwrite (docs/replay-and-forks.md#whole-thread-replay).
///
/// `f` sees every checkpoint reachable from a root, parents before children, with its
/// stored view (without its own pending writes — what a full-mode checkpoint holds).
/// Checkpoints on a parent cycle are never reached.
pub fn for_each_stored_messages(
    t: &crate::model::thread::LoadedThread,
    reducer: Reducer,
    f: &mut StoredMessagesVisitor<'_>,
) -> Result<(), MaterializeError> {
    let reducer_err = |i: usize, reason: String| MaterializeError::Reducer {
        thread_id: t.thread_id.clone(),
        checkpoint_id: t.nodes[i].id.clone(),
        reason,
    };
    // Depth-first from every root, carrying the parent's value; a fork clones it per child.
    let mut stack: Vec<(usize, Rc<Vec<Value>>)> = t
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.parent_index.is_none())
        .map(|(i, _)| (i, Rc::new(Vec::new())))
        .rev()
        .collect();
    let mut is_root = vec![false; t.nodes.len()];
    for (i, _) in &stack {
        is_root[*i] = true;
    }
    while let Some((i, from_parent)) = stack.pop() {
        let node = &t.nodes[i];
        let ck = node.checkpoint.as_ref().map_err(|e| {
            MaterializeError::Model(crate::error::ModelError::Malformed {
                what: format!("thread '{}' checkpoint {}", t.thread_id, node.id),
                reason: e.to_string(),
            })
        })?;
        let value: Vec<Value> = match ck.value(MESSAGES) {
            Some(v) => unwrap_seed(v.clone()),
            // Never written on this branch, or nothing above to replay from.
            None if is_root[i] || ck.version(MESSAGES).is_none() => Vec::new(),
            None => {
                // The parent's writes to `messages` replayed onto the parent's value.
                let p = node.parent_index.unwrap_or(i);
                let mut writes = Vec::new();
                for w in t.nodes[p].writes.iter().filter(|w| w.channel == MESSAGES) {
                    writes.push(Write::from_row(w.clone(), &t.thread_id)?);
                }
                let refs: Vec<&Value> = writes.iter().map(|w| &w.value).collect();
                let base = Rc::try_unwrap(from_parent).unwrap_or_else(|rc| (*rc).clone());
                replay_writes(base, &refs, reducer).map_err(|e| reducer_err(i, e))?
            }
        };
        f(i, &value)?;
        let value = Rc::new(value);
        for &c in node.children.iter().rev() {
            stack.push((c, value.clone()));
        }
    }
    Ok(())
}

/// The state view of `messages` at checkpoint `i` from its stored view: its own
/// `NULL_TASK_ID` writes applied as one batch (what `get_state(checkpoint_id=…)` shows).
pub fn with_own_writes(
    t: &crate::model::thread::LoadedThread,
    i: usize,
    stored: &[Value],
    reducer: Reducer,
) -> Result<Vec<Value>, MaterializeError> {
    let mut own = Vec::new();
    for w in t.nodes[i]
        .writes
        .iter()
        .filter(|w| w.task_id == NULL_TASK_ID && w.channel == MESSAGES)
    {
        own.push(Write::from_row(w.clone(), &t.thread_id)?);
    }
    let refs: Vec<&Value> = own.iter().map(|w| &w.value).collect();
    update_messages(stored.to_vec(), &refs, reducer).map_err(|reason| MaterializeError::Reducer {
        thread_id: t.thread_id.clone(),
        checkpoint_id: t.nodes[i].id.clone(),
        reason,
    })
}
