//! The read side of `bench production`: the native counterparts of DeerFlow's Gateway
//! `GET /state` and `POST /history` (docs/bench-rows.md#production-reads-and-wire-digests). A [`Reader`] materializes through
//! dfck's materializer and renders the response JSON; with a cache it keeps decoded
//! checkpoints, write rows and materialized states across requests (the counterpart of
//! DeerFlow's accessor and checkpoint-history caches) and counts hits and misses.
//!
//! The cache is bounded by the largest state, not by the history limit times the state:
//! cached states share each message (interned by its stored bytes) and each channel value
//! equal to the previous state's, and a checkpoint leaves the checkpoint cache once its own
//! state is cached (a history walk never asks for it again).

use crate::digest::{DigestMessage, wire_sha256};
use crate::error::BenchError;
use dfck_core::codec::{Value, to_json};
use dfck_core::materialize::Reducer;
use dfck_core::materialize::{Source, StoreSource, View, fixed, materialize};
use dfck_core::model::{Checkpoint, MESSAGES};
use dfck_core::store::{Store, WriteRow};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::rc::Rc;

/// Hit and miss counts of a warm reader's caches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that went to the store (or the materializer).
    pub misses: u64,
}

/// One channel of a materialized state.
enum Slot {
    /// The `messages` list, its items shared between cached states.
    Messages(Rc<[Rc<Value>]>),
    /// Any other value (shared with the previous cached state when equal).
    Value(Rc<Value>),
}

/// A materialized checkpoint: its channel values and its parent.
struct State {
    values: Vec<(String, Slot)>,
    parent: Option<String>,
}

/// Messages by their stored bytes: one copy of each distinct message across cached states.
#[derive(Default)]
struct MessagePool {
    by_hash: HashMap<u64, Vec<Rc<Value>>>,
}

impl MessagePool {
    fn intern(&mut self, m: Value) -> Rc<Value> {
        let Value::Ext(e) = &m else {
            return Rc::new(m);
        };
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(&[e.code as u8]);
        h.update(e.raw());
        let bucket = self.by_hash.entry(h.digest()).or_default();
        if let Some(found) = bucket.iter().find(|x| ***x == m) {
            return found.clone();
        }
        let rc = Rc::new(m);
        bucket.push(rc.clone());
        rc
    }
}

impl State {
    /// Builds a state from materialized values; with a cache, its messages are interned
    /// and values equal to `prev`'s are shared.
    fn new(
        values: Vec<(String, Value)>,
        parent: Option<String>,
        mut pool: Option<&mut MessagePool>,
        prev: Option<&State>,
    ) -> Self {
        let prev_slot = |k: &str| prev.and_then(|p| p.values.iter().find(|(x, _)| x == k));
        let values = values
            .into_iter()
            .map(|(k, v)| {
                let slot = match v {
                    Value::Array(items) if k == MESSAGES => {
                        let list: Vec<Rc<Value>> = match pool.as_deref_mut() {
                            Some(pool) => items.into_iter().map(|m| pool.intern(m)).collect(),
                            None => items.into_iter().map(Rc::new).collect(),
                        };
                        match prev_slot(&k) {
                            Some((_, Slot::Messages(old)))
                                if old.len() == list.len()
                                    && old.iter().zip(&list).all(|(a, b)| Rc::ptr_eq(a, b)) =>
                            {
                                Slot::Messages(old.clone())
                            }
                            _ => Slot::Messages(list.into()),
                        }
                    }
                    v => match prev_slot(&k) {
                        Some((_, Slot::Value(old))) if **old == v => Slot::Value(old.clone()),
                        _ => Slot::Value(Rc::new(v)),
                    },
                };
                (k, slot)
            })
            .collect();
        State { values, parent }
    }
}

#[derive(Default)]
struct Cache {
    checkpoints: HashMap<String, Rc<Checkpoint>>,
    writes: HashMap<(String, Option<String>), Vec<WriteRow>>,
    states: HashMap<String, Rc<State>>,
    messages: MessagePool,
    /// The state cached last (its values are shared by the next one when equal).
    last: Option<Rc<State>>,
    stats: CacheStats,
}

/// A [`Source`] that remembers what it read.
struct CachingSource<'a, 'c> {
    inner: StoreSource<'a>,
    cache: &'c mut Cache,
    /// The checkpoint being materialized: once its state is cached nothing asks for it
    /// again, so it is taken out of the cache (and not put in), not copied.
    target: &'c str,
}

impl Source for CachingSource<'_, '_> {
    fn thread_id(&self) -> &str {
        self.inner.thread_id()
    }

    fn checkpoint(
        &mut self,
        id: &str,
    ) -> Result<Option<Rc<Checkpoint>>, dfck_core::error::MaterializeError> {
        let target = id == self.target;
        let cached = if target {
            self.cache.checkpoints.remove(id)
        } else {
            self.cache.checkpoints.get(id).cloned()
        };
        if let Some(c) = cached {
            self.cache.stats.hits += 1;
            return Ok(Some(c));
        }
        self.cache.stats.misses += 1;
        let c = self.inner.checkpoint(id)?;
        if let (Some(c), false) = (&c, target) {
            self.cache.checkpoints.insert(id.to_owned(), c.clone());
        }
        Ok(c)
    }

    fn write_rows(
        &mut self,
        id: &str,
        channel: Option<&str>,
    ) -> Result<Vec<WriteRow>, dfck_core::error::MaterializeError> {
        let key = (id.to_owned(), channel.map(str::to_owned));
        let target = id == self.target;
        let cached = if target {
            self.cache.writes.remove(&key)
        } else {
            self.cache.writes.get(&key).cloned()
        };
        if let Some(w) = cached {
            self.cache.stats.hits += 1;
            return Ok(w);
        }
        self.cache.stats.misses += 1;
        let w = self.inner.write_rows(id, channel)?;
        if !target {
            self.cache.writes.insert(key, w.clone());
        }
        Ok(w)
    }
}

/// What one read returned: the wire digest of its messages and the response size.
#[derive(Debug, Clone)]
pub struct ReadResult {
    /// Wire digest (docs/bench-rows.md#production-reads-and-wire-digests) of the messages the response carries.
    pub wire_sha256: String,
    /// Messages in the response.
    pub message_count: usize,
    /// Bytes of the rendered JSON response.
    pub response_bytes: usize,
}

/// Reads state and history of one thread, like the Gateway routes; cached or not.
pub struct Reader<'a> {
    store: &'a dyn Store,
    thread_id: String,
    reducer: Reducer,
    cache: Option<Cache>,
}

fn messages_of(values: &[(String, Slot)]) -> &[Rc<Value>] {
    values
        .iter()
        .find(|(k, _)| k == MESSAGES)
        .and_then(|(_, v)| match v {
            Slot::Messages(list) => Some(&list[..]),
            Slot::Value(_) => None,
        })
        .unwrap_or(&[])
}

/// The wire digest of a message list (docs/bench-rows.md#production-reads-and-wire-digests).
pub fn wire_digest<'v>(messages: impl IntoIterator<Item = &'v Value>) -> String {
    let rendered: Vec<(String, String, Json)> = messages
        .into_iter()
        .map(|m| {
            let fields = m.model_fields();
            let get = |k: &str| fields.and_then(|f| f.get(k));
            (
                super::workload::message_type(m).unwrap_or("").to_owned(),
                m.model_field_str("id").unwrap_or("").to_owned(),
                get("content").map(to_json).unwrap_or(Json::Null),
            )
        })
        .collect();
    wire_sha256(
        rendered
            .iter()
            .map(|(kind, id, content)| DigestMessage { kind, id, content }),
    )
}

/// The channels a response shows: no internal (`__…`) or trigger (`branch:…`) channels, and
/// `messages` only when asked.
fn public(values: &[(String, Slot)], with_messages: bool) -> impl Iterator<Item = &(String, Slot)> {
    values
        .iter()
        .filter(|(k, _)| !k.starts_with("__") && !k.starts_with("branch:"))
        .filter(move |(k, _)| with_messages || k != MESSAGES)
}

/// Appends the JSON of a value: what [`to_json`] renders (`null` when it cannot be
/// rendered), streamed without building the JSON tree.
fn write_value_json(out: &mut Vec<u8>, v: &Value) {
    let at = out.len();
    if serde_json::to_writer(&mut *out, &dfck_core::codec::Rendered(v)).is_err() {
        out.truncate(at);
        out.extend_from_slice(b"null");
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) -> Result<(), BenchError> {
    serde_json::to_writer(&mut *out, s).map_err(|e| BenchError::from(e.to_string()))
}

/// Appends the `values` object of a response (the bytes `serde_json::to_vec` of the
/// rendered map gives).
fn write_values(
    out: &mut Vec<u8>,
    values: &[(String, Slot)],
    with_messages: bool,
) -> Result<(), BenchError> {
    out.push(b'{');
    for (i, (k, slot)) in public(values, with_messages).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, k)?;
        out.push(b':');
        match slot {
            Slot::Messages(list) => {
                out.push(b'[');
                for (j, m) in list.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    write_value_json(out, m);
                }
                out.push(b']');
            }
            Slot::Value(v) => write_value_json(out, v),
        }
    }
    out.push(b'}');
    Ok(())
}

impl<'a> Reader<'a> {
    /// A reader; `cached` keeps checkpoints, writes and states across requests.
    pub fn new(store: &'a dyn Store, thread_id: &str, reducer: Reducer, cached: bool) -> Self {
        Reader {
            store,
            thread_id: thread_id.to_owned(),
            reducer,
            cache: cached.then(Cache::default),
        }
    }

    /// The cache's counters (zero for an uncached reader).
    pub fn stats(&self) -> CacheStats {
        self.cache.as_ref().map(|c| c.stats).unwrap_or_default()
    }

    /// The state at `id` (the state view) and its parent id.
    fn state_at(&mut self, id: &str) -> Result<Rc<State>, BenchError> {
        let choose = fixed(self.reducer);
        let materialized = |src: &mut dyn Source| -> Result<_, BenchError> {
            let m = materialize(src, id, View::State, &choose).map_err(|e| e.to_string())?;
            Ok((m.values, m.checkpoint.parent_checkpoint_id.clone()))
        };
        match &mut self.cache {
            Some(cache) => {
                if let Some(s) = cache.states.get(id) {
                    cache.stats.hits += 1;
                    return Ok(s.clone());
                }
                cache.stats.misses += 1;
                let mut src = CachingSource {
                    inner: StoreSource::new(self.store, &self.thread_id, ""),
                    cache,
                    target: id,
                };
                let (values, parent) = materialized(&mut src)?;
                cache.writes.retain(|(w, _), _| w != id);
                let prev = cache.last.take();
                let state = Rc::new(State::new(
                    values,
                    parent,
                    Some(&mut cache.messages),
                    prev.as_deref(),
                ));
                cache.states.insert(id.to_owned(), state.clone());
                cache.last = Some(state.clone());
                Ok(state)
            }
            None => {
                let mut src = StoreSource::new(self.store, &self.thread_id, "");
                let (values, parent) = materialized(&mut src)?;
                Ok(Rc::new(State::new(values, parent, None, None)))
            }
        }
    }

    fn head(&self) -> Result<String, BenchError> {
        self.store
            .head_id(&self.thread_id, "")
            .map_err(|e| e.to_string())?
            .ok_or_else(|| BenchError::from("the benchmark thread has no checkpoint"))
    }

    /// The head's materialized messages (the accessor's view, for the seed digest).
    pub fn state_messages(&mut self) -> Result<Vec<Value>, BenchError> {
        let head = self.head()?;
        let state = self.state_at(&head)?;
        Ok(messages_of(&state.values)
            .iter()
            .map(|m| (**m).clone())
            .collect())
    }

    /// `GET /api/threads/{id}/state`: the head's values, rendered.
    pub fn state(&mut self) -> Result<ReadResult, BenchError> {
        let head = self.head()?;
        let state = self.state_at(&head)?;
        let values = &state.values;
        let mut bytes = Vec::new();
        bytes.extend_from_slice(b"{\"values\":");
        write_values(&mut bytes, values, true)?;
        bytes.extend_from_slice(b",\"checkpoint_id\":");
        write_str(&mut bytes, &head)?;
        bytes.push(b'}');
        let msgs = messages_of(values);
        Ok(ReadResult {
            wire_sha256: wire_digest(msgs.iter().map(|m| &**m)),
            message_count: msgs.len(),
            response_bytes: bytes.len(),
        })
    }

    /// `POST /api/threads/{id}/history {"limit": L}`: the newest `limit` checkpoints'
    /// states, messages on the newest entry only.
    pub fn history(&mut self, limit: u64) -> Result<ReadResult, BenchError> {
        let mut id = Some(self.head()?);
        let mut entries = 0u64;
        // The response is streamed entry by entry into one buffer (the bytes
        // `serde_json::to_vec` of the whole array gives, without any JSON tree).
        let mut bytes = vec![b'['];
        let mut digest: Option<(String, usize)> = None;
        while let Some(cur) = id {
            if entries >= limit {
                break;
            }
            let state = self.state_at(&cur)?;
            let newest = entries == 0;
            if newest {
                let msgs = messages_of(&state.values);
                digest = Some((wire_digest(msgs.iter().map(|m| &**m)), msgs.len()));
            } else {
                bytes.push(b',');
            }
            bytes.extend_from_slice(b"{\"checkpoint_id\":");
            write_str(&mut bytes, &cur)?;
            bytes.extend_from_slice(b",\"values\":");
            write_values(&mut bytes, &state.values, newest)?;
            bytes.push(b'}');
            entries += 1;
            id = state.parent.clone();
        }
        bytes.push(b']');
        let (wire_sha256, message_count) =
            digest.unwrap_or_else(|| (wire_digest(std::iter::empty()), 0));
        Ok(ReadResult {
            wire_sha256,
            message_count,
            response_bytes: bytes.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::production::workload::{generated_turn, written_messages};
    use dfck_core::codec::{decode, encode};

    /// A state's channels as a store would give them: messages decoded lazily from their
    /// bytes, each other channel's last write.
    fn values(turns: u64) -> Vec<(String, Value)> {
        let turns: Vec<_> = (0..turns).map(|t| generated_turn(t, 16)).collect();
        let msgs = Value::Array(written_messages(&turns));
        let mut out = vec![(MESSAGES.to_owned(), decode(&encode(&msgs)).unwrap())];
        for (ch, v) in turns.iter().flatten().flat_map(|s| s.writes.iter()) {
            if *ch == MESSAGES {
                continue;
            }
            out.retain(|(k, _)| k != ch);
            out.push(((*ch).to_owned(), decode(&encode(v)).unwrap()));
        }
        out.push(("__start__".to_owned(), Value::Nil));
        out.push(("branch:to:model".to_owned(), Value::Nil));
        out.push(("ratio".to_owned(), Value::F64(0.1)));
        out
    }

    #[test]
    fn streamed_values_are_the_bytes_of_the_rendered_tree() {
        let values = values(6);
        let state = State::new(values.clone(), None, None, None);
        for with_messages in [true, false] {
            let tree: serde_json::Map<String, Json> = values
                .iter()
                .filter(|(k, _)| !k.starts_with("__") && !k.starts_with("branch:"))
                .filter(|(k, _)| with_messages || k != MESSAGES)
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect();
            let mut streamed = Vec::new();
            write_values(&mut streamed, &state.values, with_messages).unwrap();
            assert_eq!(
                String::from_utf8(streamed).unwrap(),
                serde_json::to_string(&tree).unwrap()
            );
        }
    }

    #[test]
    fn cached_states_share_messages_and_equal_values() {
        let mut pool = MessagePool::default();
        let older = State::new(values(5), None, Some(&mut pool), None);
        // Read again from other bytes, one turn longer: the five turns' messages and the
        // unchanged channels are the older state's, not copies.
        let newer = State::new(values(6), None, Some(&mut pool), Some(&older));
        let (a, b) = (messages_of(&older.values), messages_of(&newer.values));
        assert_eq!(b.len(), a.len() + 4);
        assert!(a.iter().zip(b).all(|(x, y)| Rc::ptr_eq(x, y)));
        let slot = |s: &State, k: &str| match s.values.iter().find(|(x, _)| x == k) {
            Some((_, Slot::Value(v))) => v.clone(),
            _ => panic!("no {k}"),
        };
        assert!(Rc::ptr_eq(
            &slot(&older, "thread_data"),
            &slot(&newer, "thread_data")
        ));
        assert!(!Rc::ptr_eq(&slot(&older, "todos"), &slot(&newer, "todos")));
        let same = State::new(values(6), None, Some(&mut pool), Some(&newer));
        match (&same.values[0].1, &newer.values[0].1) {
            (Slot::Messages(x), Slot::Messages(y)) => assert!(Rc::ptr_eq(x, y)),
            _ => panic!("messages"),
        }
    }
}
