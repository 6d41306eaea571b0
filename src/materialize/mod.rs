//! The materializer: rebuilds channel values the way LangGraph 1.2's `get_state` does —
//! stored values as they are, delta channels replayed from ancestor writes back to the
//! nearest stored value (langgraph-storage.md §6.3–§6.5), and, for the state view, the
//! checkpoint's own `NULL_TASK_ID` writes applied on top.

pub mod reducers;

use crate::codec::Value;
use crate::error::{MaterializeError, StoreError};
use crate::model::{Checkpoint, MESSAGES, NULL_TASK_ID, Write, has_marker};
use crate::store::{Store, WriteRow};
pub use reducers::Reducer;
use std::collections::{HashMap, HashSet};
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

/// A [`Source`] that reads lazily from a store, one checkpoint at a time.
pub struct StoreSource<'a> {
    store: &'a dyn Store,
    thread_id: String,
    ns: String,
    cache: HashMap<String, Rc<Checkpoint>>,
}

impl<'a> StoreSource<'a> {
    /// A source over (thread, ns) of `store`.
    pub fn new(store: &'a dyn Store, thread_id: &str, ns: &str) -> Self {
        StoreSource {
            store,
            thread_id: thread_id.to_owned(),
            ns: ns.to_owned(),
            cache: HashMap::new(),
        }
    }
}

impl Source for StoreSource<'_> {
    fn thread_id(&self) -> &str {
        &self.thread_id
    }

    fn checkpoint(&mut self, id: &str) -> Result<Option<Rc<Checkpoint>>, MaterializeError> {
        if let Some(c) = self.cache.get(id) {
            return Ok(Some(c.clone()));
        }
        let Some(row) = self.store.checkpoint(&self.thread_id, &self.ns, id)? else {
            return Ok(None);
        };
        let ck = Rc::new(Checkpoint::from_row(row)?);
        self.cache.insert(id.to_owned(), ck.clone());
        Ok(Some(ck))
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
}

/// The value a delta channel holds before replay, from a stored value: a `_DeltaSnapshot`
/// is unwrapped, a plain value (a thread migrated from a full channel) is used as is.
fn unwrap_seed(v: &Value) -> Vec<Value> {
    let inner = v.delta_snapshot_inner().unwrap_or(v);
    match inner {
        Value::Array(items) => items.clone(),
        Value::Nil => Vec::new(),
        other => vec![other.clone()],
    }
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
    /// The stored value found (`None`: the walk reached a root).
    pub seed: Option<Value>,
    /// The ancestors walked, nearest first (the seed's holder last, when found).
    pub chain: Vec<Rc<Checkpoint>>,
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
        chain.push(a.clone());
        if let Some(v) = a.value(channel) {
            return Ok(DeltaHistory {
                seed: Some(v.clone()),
                chain,
            });
        }
        child = id;
        cur = a.parent_checkpoint_id.clone();
    }
    Ok(DeltaHistory { seed: None, chain })
}

/// Materializes every channel of checkpoint `id` (internal channels included).
pub fn materialize(
    src: &mut dyn Source,
    id: &str,
    view: View,
    reducer: Reducer,
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
    // Delta channels: versioned but not stored. Only `messages` has a known reducer.
    if ck.value(MESSAGES).is_none() && ck.version(MESSAGES).is_some() {
        let hist = delta_history(src, &ck, MESSAGES)?;
        replay_depth = hist.chain.len();
        let mut writes = Vec::new();
        for a in hist.chain.iter().rev() {
            for row in src.write_rows(&a.checkpoint_id, Some(MESSAGES))? {
                writes.push(Write::from_row(row, &ck.thread_id)?);
            }
        }
        let refs: Vec<&Value> = writes.iter().map(|w| &w.value).collect();
        let base = hist.seed.as_ref().map(unwrap_seed).unwrap_or_default();
        let v = replay_writes(base, &refs, reducer).map_err(reducer_err)?;
        values.push((MESSAGES.to_owned(), Value::Array(v)));
    }
    for (name, v) in &ck.channel_values {
        let v = if v.is_delta_snapshot() {
            Value::Array(unwrap_seed(v))
        } else {
            v.clone()
        };
        values.push((name.clone(), v));
    }
    if view == View::State {
        let own: Vec<Write> = src
            .write_rows(&ck.checkpoint_id, None)?
            .into_iter()
            .filter(|w| w.task_id == NULL_TASK_ID)
            .map(|r| Write::from_row(r, &ck.thread_id))
            .collect::<Result<_, _>>()?;
        apply_null_writes(&mut values, &own, reducer).map_err(reducer_err)?;
    }
    Ok(Materialized {
        checkpoint: ck,
        values,
        replay_depth,
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
            let cur = match pos.map(|i| &values[i].1) {
                Some(Value::Array(items)) => items.clone(),
                Some(Value::Nil) | None => Vec::new(),
                Some(other) => vec![other.clone()],
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
