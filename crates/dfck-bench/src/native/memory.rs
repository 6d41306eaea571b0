//! The memory backend: in-process maps laid out like LangGraph's `InMemorySaver` — `storage`
//! (checkpoint without `channel_values` + msgpack metadata + parent per id), `blobs` (one
//! `dumps_typed` value per `(channel, version)` that `put` saw in `new_versions`, `("empty", b"")`
//! when the checkpoint holds no value) and `writes` — plus a [`Source`] that rebuilds
//! checkpoints from them like `get_tuple`, so dfck's materializer reads the saver directly.

use super::writer::{CheckpointRecord, WriteRecord};
use crate::error::BenchError;
use dfck_core::codec::{self, Value};
use dfck_core::error::{MaterializeError, ModelError};
use dfck_core::materialize::Source;
use dfck_core::model::Checkpoint;
use dfck_core::store::{CheckpointBody, CheckpointRow, WriteRow, sort_writes};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

struct Stored {
    checkpoint: Vec<u8>,
    metadata: Vec<u8>,
    parent: Option<String>,
}

/// One thread's entries of an `InMemorySaver`.
#[derive(Default)]
pub struct MemorySaver {
    thread_id: String,
    storage: BTreeMap<String, Stored>,
    blobs: HashMap<(String, String), (&'static str, Vec<u8>)>,
    writes: HashMap<String, Vec<WriteRecord>>,
}

/// Logical sizes of the saver's entries (docs/bench-rows.md#measured-fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Stored checkpoints.
    pub checkpoint_rows: u64,
    /// Σ(checkpoint + metadata) bytes.
    pub checkpoint_bytes: u64,
    /// Channel-version blobs.
    pub blob_rows: u64,
    /// Σ blob bytes.
    pub blob_bytes: u64,
    /// Pending-write entries.
    pub write_rows: u64,
    /// Σ write value bytes.
    pub write_bytes: u64,
}

impl MemorySaver {
    /// An empty saver for one thread.
    pub fn new(thread_id: &str) -> Self {
        MemorySaver {
            thread_id: thread_id.to_owned(),
            ..Default::default()
        }
    }

    /// `put`: the checkpoint without values, metadata, parent, and one blob per new version.
    pub fn put(&mut self, rec: &CheckpointRecord) {
        for (ch, ver) in &rec.new_versions {
            let blob = match rec.channel_values.iter().find(|(k, _)| k == ch) {
                Some((_, v)) => v.dumps_typed(),
                None => ("empty", Vec::new()),
            };
            self.blobs.insert((ch.clone(), ver.clone()), blob);
        }
        self.storage.insert(
            rec.id.clone(),
            Stored {
                checkpoint: rec.encode(false),
                metadata: rec.metadata_msgpack(),
                parent: rec.parent.clone(),
            },
        );
    }

    /// `put_writes`: keyed by (task id, idx); a regular write never overwrites.
    pub fn put_writes(&mut self, checkpoint_id: &str, writes: &[WriteRecord]) {
        let list = self.writes.entry(checkpoint_id.to_owned()).or_default();
        for w in writes {
            if !list
                .iter()
                .any(|x| x.task_id == w.task_id && x.idx == w.idx)
            {
                list.push(w.clone());
            }
        }
    }

    /// The latest checkpoint id.
    pub fn head(&self) -> Option<String> {
        self.storage.keys().next_back().cloned()
    }

    /// Sums over the thread's entries.
    pub fn stats(&self) -> MemoryStats {
        let mut s = MemoryStats::default();
        for st in self.storage.values() {
            s.checkpoint_rows += 1;
            s.checkpoint_bytes += (st.checkpoint.len() + st.metadata.len()) as u64;
        }
        for (_, b) in self.blobs.values() {
            s.blob_rows += 1;
            s.blob_bytes += b.len() as u64;
        }
        for ws in self.writes.values() {
            for w in ws {
                s.write_rows += 1;
                s.write_bytes += w.value.len() as u64;
            }
        }
        s
    }

    fn row(&self, id: &str) -> Result<Option<CheckpointRow>, BenchError> {
        let Some(st) = self.storage.get(id) else {
            return Ok(None);
        };
        let body = codec::decode(&st.checkpoint).map_err(|e| e.to_string())?;
        let Value::Map(mut entries) = body else {
            return Err("a stored checkpoint is not a map".into());
        };
        let mut values = Vec::new();
        if let Some(Value::Map(versions)) = entries
            .iter()
            .find(|(k, _)| k.as_str() == Some("channel_versions"))
            .map(|(_, v)| v)
        {
            for (ch, ver) in versions {
                let (Some(ch), Some(ver)) = (ch.as_str(), ver.as_str()) else {
                    continue;
                };
                if let Some((tag, b)) = self.blobs.get(&(ch.to_owned(), ver.to_owned())) {
                    if *tag != "empty" {
                        let v =
                            codec::decode_typed(Some(tag), b.clone()).map_err(|e| e.to_string())?;
                        values.push((Value::Str(ch.to_owned()), v));
                    }
                }
            }
        }
        entries.insert(3, (Value::Str("channel_values".into()), Value::Map(values)));
        let meta = codec::decode(&st.metadata).map_err(|e| e.to_string())?;
        Ok(Some(CheckpointRow {
            thread_id: self.thread_id.clone(),
            checkpoint_ns: String::new(),
            checkpoint_id: id.to_owned(),
            parent_checkpoint_id: st.parent.clone(),
            body: CheckpointBody::Serialized {
                type_tag: Some("msgpack".into()),
                bytes: codec::encode(&Value::Map(entries)),
            },
            metadata: codec::to_json(&meta).to_string().into_bytes(),
            bytes: (st.checkpoint.len() + st.metadata.len()) as u64,
        }))
    }
}

fn malformed(id: &str, reason: String) -> MaterializeError {
    MaterializeError::Model(ModelError::Malformed {
        what: format!("in-memory checkpoint {id}"),
        reason,
    })
}

impl Source for MemorySaver {
    fn thread_id(&self) -> &str {
        &self.thread_id
    }

    fn checkpoint(&mut self, id: &str) -> Result<Option<Rc<Checkpoint>>, MaterializeError> {
        match self.row(id).map_err(|e| malformed(id, e.to_string()))? {
            Some(row) => Ok(Some(Rc::new(Checkpoint::from_row(row)?))),
            None => Ok(None),
        }
    }

    fn write_rows(
        &mut self,
        id: &str,
        channel: Option<&str>,
    ) -> Result<Vec<WriteRow>, MaterializeError> {
        let mut out: Vec<WriteRow> = self
            .writes
            .get(id)
            .map(|ws| {
                ws.iter()
                    .filter(|w| channel.is_none_or(|c| c == w.channel))
                    .map(|w| WriteRow {
                        checkpoint_id: id.to_owned(),
                        task_id: w.task_id.clone(),
                        task_path: w.task_path.clone(),
                        idx: w.idx,
                        channel: w.channel.clone(),
                        type_tag: Some(w.type_tag.to_owned()),
                        value: w.value.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        sort_writes(&mut out);
        Ok(out)
    }
}
