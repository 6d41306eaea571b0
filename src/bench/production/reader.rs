//! The read side of `bench production`: the native counterparts of DeerFlow's Gateway
//! `GET /state` and `POST /history` (docs/bench-rows.md#production-reads-and-wire-digests). A [`Reader`] materializes through
//! dfck's materializer and renders the response JSON; with a cache it keeps decoded
//! checkpoints, write rows and materialized states across requests (the counterpart of
//! DeerFlow's accessor and checkpoint-history caches) and counts hits and misses.

use crate::bench::digest::{DigestMessage, wire_sha256};
use crate::bench::error::BenchError;
use crate::codec::{Value, to_json};
use crate::materialize::Reducer;
use crate::materialize::{Source, StoreSource, View, fixed, materialize};
use crate::model::Checkpoint;
use crate::store::{Store, WriteRow};
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

/// A materialized checkpoint: its channel values and its parent.
struct State {
    values: Vec<(String, Value)>,
    parent: Option<String>,
}

#[derive(Default)]
struct Cache {
    checkpoints: HashMap<String, Rc<Checkpoint>>,
    writes: HashMap<(String, Option<String>), Vec<WriteRow>>,
    states: HashMap<String, Rc<State>>,
    stats: CacheStats,
}

/// A [`Source`] that remembers what it read.
struct CachingSource<'a, 'c> {
    inner: StoreSource<'a>,
    cache: &'c mut Cache,
}

impl Source for CachingSource<'_, '_> {
    fn thread_id(&self) -> &str {
        self.inner.thread_id()
    }

    fn checkpoint(
        &mut self,
        id: &str,
    ) -> Result<Option<Rc<Checkpoint>>, crate::error::MaterializeError> {
        if let Some(c) = self.cache.checkpoints.get(id) {
            self.cache.stats.hits += 1;
            return Ok(Some(c.clone()));
        }
        self.cache.stats.misses += 1;
        let c = self.inner.checkpoint(id)?;
        if let Some(c) = &c {
            self.cache.checkpoints.insert(id.to_owned(), c.clone());
        }
        Ok(c)
    }

    fn write_rows(
        &mut self,
        id: &str,
        channel: Option<&str>,
    ) -> Result<Vec<WriteRow>, crate::error::MaterializeError> {
        let key = (id.to_owned(), channel.map(str::to_owned));
        if let Some(w) = self.cache.writes.get(&key) {
            self.cache.stats.hits += 1;
            return Ok(w.clone());
        }
        self.cache.stats.misses += 1;
        let w = self.inner.write_rows(id, channel)?;
        self.cache.writes.insert(key, w.clone());
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

fn messages_of(values: &[(String, Value)]) -> &[Value] {
    values
        .iter()
        .find(|(k, _)| k == "messages")
        .and_then(|(_, v)| v.as_array())
        .unwrap_or(&[])
}

/// The wire digest of a message list (docs/bench-rows.md#production-reads-and-wire-digests).
pub fn wire_digest(messages: &[Value]) -> String {
    let rendered: Vec<(String, String, Json)> = messages
        .iter()
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

fn public(values: &[(String, Value)], with_messages: bool) -> serde_json::Map<String, Json> {
    values
        .iter()
        .filter(|(k, _)| !k.starts_with("__") && !k.starts_with("branch:"))
        .filter(|(k, _)| with_messages || k != "messages")
        .map(|(k, v)| (k.clone(), to_json(v)))
        .collect()
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
        let materialized = |src: &mut dyn Source| -> Result<State, BenchError> {
            let m = materialize(src, id, View::State, &choose).map_err(|e| e.to_string())?;
            Ok(State {
                parent: m.checkpoint.parent_checkpoint_id.clone(),
                values: m.values,
            })
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
                };
                let state = Rc::new(materialized(&mut src)?);
                cache.states.insert(id.to_owned(), state.clone());
                Ok(state)
            }
            None => {
                let mut src = StoreSource::new(self.store, &self.thread_id, "");
                Ok(Rc::new(materialized(&mut src)?))
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
        Ok(messages_of(&state.values).to_vec())
    }

    /// `GET /api/threads/{id}/state`: the head's values, rendered.
    pub fn state(&mut self) -> Result<ReadResult, BenchError> {
        let head = self.head()?;
        let state = self.state_at(&head)?;
        let values = &state.values;
        let body = serde_json::json!({
            "values": public(values, true),
            "checkpoint_id": head,
        });
        let bytes = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
        let msgs = messages_of(values);
        Ok(ReadResult {
            wire_sha256: wire_digest(msgs),
            message_count: msgs.len(),
            response_bytes: bytes.len(),
        })
    }

    /// `POST /api/threads/{id}/history {"limit": L}`: the newest `limit` checkpoints'
    /// states, messages on the newest entry only.
    pub fn history(&mut self, limit: u64) -> Result<ReadResult, BenchError> {
        let mut id = Some(self.head()?);
        let mut entries = Vec::new();
        let mut digest_msgs: Vec<Value> = Vec::new();
        while let Some(cur) = id {
            if entries.len() as u64 >= limit {
                break;
            }
            let state = self.state_at(&cur)?;
            let newest = entries.is_empty();
            if newest {
                digest_msgs = messages_of(&state.values).to_vec();
            }
            entries.push(serde_json::json!({
                "checkpoint_id": cur,
                "values": public(&state.values, newest),
            }));
            id = state.parent.clone();
        }
        let bytes = serde_json::to_vec(&entries).map_err(|e| e.to_string())?;
        Ok(ReadResult {
            wire_sha256: wire_digest(&digest_msgs),
            message_count: digest_msgs.len(),
            response_bytes: bytes.len(),
        })
    }
}
