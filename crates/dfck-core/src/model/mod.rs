//! The checkpoint model: decoded checkpoints and writes, metadata, channel versions, and
//! mode detection (DeerFlow's metadata rule and the structural encoding of `messages`).

pub mod facts;
mod meta_keys;
pub(crate) use meta_keys::metadata_parses;
pub mod read_back;
pub mod thread;

use crate::codec::{self, Value};
use crate::error::ModelError;
use crate::store::{BlobRow, CheckpointBody, CheckpointRow, WriteRow};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use std::sync::Arc;

/// The messages channel, the only one DeerFlow stores as a `DeltaChannel`.
pub const MESSAGES: &str = "messages";
/// The task id of writes that belong to the checkpoint itself.
pub const NULL_TASK_ID: &str = "00000000-0000-0000-0000-000000000000";
/// DeerFlow's mode marker key in checkpoint metadata.
pub const MODE_MARKER: &str = "deerflow_checkpoint_channel_mode";
/// LangGraph's delta counters key in checkpoint metadata.
pub const DELTA_COUNTERS: &str = "counters_since_delta_snapshot";

/// Is a channel internal (left out of state views)?
pub fn is_internal_channel(name: &str) -> bool {
    name.starts_with("__") || name.starts_with("branch:") || name.starts_with("start:")
}

/// A decoded checkpoint row.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// Checkpoint id.
    pub checkpoint_id: String,
    /// Parent id.
    pub parent_checkpoint_id: Option<String>,
    /// Format version `v`.
    pub v: Option<i64>,
    /// Creation timestamp `ts`.
    pub ts: Option<String>,
    /// Stored channel values, in stored order.
    pub channel_values: Vec<(String, Value)>,
    /// Channel versions (as text; int/float versions are rendered as numbers' text).
    pub channel_versions: Vec<(String, String)>,
    /// `versions_seen`: per node (or special key), the channel versions it had seen.
    pub versions_seen: Vec<(String, Vec<(String, String)>)>,
    /// Metadata JSON object, shared with the loaded thread's node; empty in a structural
    /// load, whose nodes keep only [`thread::MetaFacts`].
    pub metadata: Arc<Map<String, Json>>,
    /// Stored bytes (checkpoint + metadata).
    pub bytes: u64,
    /// How its serialized values are stored: encrypted or plaintext.
    pub sealing: Sealing,
}

/// How many of a checkpoint's serialized values (the SQLite checkpoint; the PostgreSQL blobs
/// at its versions, tombstones aside) are encrypted (`<tag>+aes`) and how many plaintext.
/// Metadata and PostgreSQL's inline primitives are plaintext by design and not counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sealing {
    /// Values stored as `<tag>+aes`.
    pub encrypted: u32,
    /// Values stored as plaintext.
    pub plain: u32,
}

impl Sealing {
    /// Counts one stored value by its serializer tag.
    pub fn count(&mut self, tag: Option<&str>) {
        if codec::aes::Protection::of_tag(tag).is_encrypted() {
            self.encrypted += 1;
        } else {
            self.plain += 1;
        }
    }
}

/// How `messages` is stored at one checkpoint (docs/replay-and-forks.md#modes-and-markers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MessagesEncoding {
    /// A list is stored.
    Plain,
    /// A `_DeltaSnapshot` is stored.
    Snapshot,
    /// Versioned but not stored (a delta non-snapshot checkpoint).
    Absent,
    /// Never written on this branch.
    Unversioned,
}

impl MessagesEncoding {
    /// The contract's name.
    pub fn as_str(self) -> &'static str {
        match self {
            MessagesEncoding::Plain => "plain",
            MessagesEncoding::Snapshot => "snapshot",
            MessagesEncoding::Absent => "absent",
            MessagesEncoding::Unversioned => "unversioned",
        }
    }
}

/// How a channel is stored: the whole value at every checkpoint, or LangGraph 1.2's
/// `DeltaChannel` (a snapshot every K updates plus per-step writes). One type for checkpoints,
/// benchmark cases and DeerFlow's `checkpoint_channel_mode` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelMode {
    /// Full-value storage.
    Full,
    /// Delta storage.
    Delta,
}

impl ChannelMode {
    /// The contract's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelMode::Full => "full",
            ChannelMode::Delta => "delta",
        }
    }

    /// Parses `full` / `delta` (as written in flags, rows and DeerFlow's config).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "full" => Some(ChannelMode::Full),
            "delta" => Some(ChannelMode::Delta),
            _ => None,
        }
    }
}

impl std::fmt::Display for ChannelMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The mode class of a whole thread: uniform, or full checkpoints followed by delta ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadMode {
    /// Every checkpoint is full.
    Full,
    /// Every checkpoint is delta.
    Delta,
    /// A thread with full-value checkpoints followed by delta ones.
    Mixed,
}

impl ThreadMode {
    /// The contract's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadMode::Full => "full",
            ThreadMode::Delta => "delta",
            ThreadMode::Mixed => "mixed",
        }
    }
}

/// Parses checkpoint metadata (JSON bytes) into an object.
pub fn parse_metadata(bytes: &[u8], what: &str) -> Result<Map<String, Json>, ModelError> {
    if bytes.is_empty() {
        return Ok(Map::new());
    }
    let parsed = serde_json::from_slice::<Json>(bytes).or_else(|e| {
        // Python's json.dumps writes NaN/Infinity/-Infinity for non-finite floats.
        python_nonfinite_as_strings(bytes)
            .and_then(|fixed| serde_json::from_slice::<Json>(&fixed).ok())
            .ok_or(e)
    });
    match parsed {
        Ok(Json::Object(m)) => Ok(m),
        Ok(Json::Null) => Ok(Map::new()),
        Ok(_) => Err(ModelError::Malformed {
            what: what.to_owned(),
            reason: "metadata is not a JSON object".into(),
        }),
        Err(e) => Err(ModelError::Malformed {
            what: what.to_owned(),
            reason: format!("metadata is not valid JSON ({e})"),
        }),
    }
}

/// Rewrites Python's bare `NaN`, `Infinity` and `-Infinity` tokens (outside strings) as the
/// strings dfck renders non-finite floats as; `None` when there are none.
fn python_nonfinite_as_strings(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let (mut in_str, mut escaped, mut changed) = (false, false, false);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_str {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        let rest = &bytes[i..];
        let token = [&b"-Infinity"[..], b"Infinity", b"NaN"]
            .into_iter()
            .find(|t| rest.starts_with(t));
        match (b, token) {
            (b'"', _) => {
                in_str = true;
                out.push(b);
                i += 1;
            }
            (_, Some(t)) => {
                out.push(b'"');
                out.extend_from_slice(t);
                out.push(b'"');
                changed = true;
                i += t.len();
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    changed.then_some(out)
}

/// What a stored `messages` value is when it cannot be a message list: `Some("a bool")` for
/// `True`, `Some("a string")` for `"oops"`, … A list, `None` (an empty channel), a
/// `langgraph.types.Overwrite` (reported as `value.literal_overwrite`) and a
/// `_DeltaSnapshot` are not reported; a snapshot's wrapped value is looked at when it is
/// already decoded, or always with `decode`. LangGraph would hand such a value to the
/// reducer as it is, so a conversion that wrapped it into a list would change what the
/// thread shows.
pub fn messages_not_a_list(v: &Value, decode: bool) -> Option<&'static str> {
    match v {
        Value::Array(_) | Value::Nil => None,
        Value::Bool(_) => Some("a bool"),
        Value::Int(_) | Value::UInt(_) => Some("an integer"),
        Value::F32(_) | Value::F64(_) => Some("a float"),
        Value::Str(_) => Some("a string"),
        Value::Bin(_) => Some("bytes"),
        Value::Map(_) => Some("a map"),
        Value::Ext(e) if e.code == codec::EXT_DELTA_SNAPSHOT => {
            let inner = if decode {
                e.inner()
            } else {
                e.inner_if_decoded().and_then(Option::as_ref)
            };
            match inner {
                Some(inner) if !inner.is_delta_snapshot() => messages_not_a_list(inner, decode),
                _ => None,
            }
        }
        Value::Ext(_) if v.overwrite_value().is_some() => None,
        Value::Ext(_) => Some("an object that is not a list"),
    }
}

/// DeerFlow's detection rule (`checkpoint_metadata_uses_delta`): delta iff the marker is
/// exactly `"delta"` or the counters object has a `messages` key.
pub fn metadata_is_delta(meta: &Map<String, Json>) -> bool {
    if meta.get(MODE_MARKER).and_then(Json::as_str) == Some("delta") {
        return true;
    }
    matches!(meta.get(DELTA_COUNTERS), Some(Json::Object(c)) if c.contains_key(MESSAGES))
}

/// Does the metadata carry DeerFlow's marker key (any value)?
pub fn has_marker(meta: &Map<String, Json>) -> bool {
    meta.contains_key(MODE_MARKER)
}

fn version_text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::F64(f) => f.to_string(),
        Value::F32(f) => f.to_string(),
        other => format!("{other:?}"),
    }
}

impl Checkpoint {
    /// A label naming this checkpoint in messages.
    pub fn label(&self) -> String {
        format!(
            "thread '{}' checkpoint {}",
            self.thread_id, self.checkpoint_id
        )
    }

    /// Decodes a stored row.
    pub fn from_row(row: CheckpointRow) -> Result<Self, ModelError> {
        Self::from_row_at(row, codec::Depth::Full)
    }

    /// [`Checkpoint::from_row`] building channel values only to `depth` (see
    /// [`codec::Depth`]); the same rows fail, with the same errors.
    pub fn from_row_at(row: CheckpointRow, depth: codec::Depth<'_>) -> Result<Self, ModelError> {
        let metadata = parse_row_metadata(&row)?;
        Self::from_row_parsed(row, Arc::new(metadata), depth)
    }

    /// [`Checkpoint::from_row_at`] with the row's metadata already parsed.
    pub(crate) fn from_row_parsed(
        row: CheckpointRow,
        metadata: Arc<Map<String, Json>>,
        depth: codec::Depth<'_>,
    ) -> Result<Self, ModelError> {
        // Named only in errors: not formatted for every row.
        let what = || row_what(&row.thread_id, &row.checkpoint_id);
        let malformed = |reason: &str| ModelError::Malformed {
            what: what(),
            reason: reason.to_owned(),
        };
        let mut sealing = Sealing::default();
        match &row.body {
            CheckpointBody::Serialized { type_tag, .. } => sealing.count(type_tag.as_deref()),
            CheckpointBody::Postgres { blobs, .. } => blobs
                .iter()
                .filter(|b| b.type_tag != "empty")
                .for_each(|b| sealing.count(Some(&b.type_tag))),
        }
        let body = match row.body {
            CheckpointBody::Serialized { type_tag, bytes } => {
                codec::decode_typed_checkpoint(type_tag.as_deref(), bytes, depth).map_err(
                    |source| ModelError::Decode {
                        what: format!(
                            "{}: checkpoint blob (type {})",
                            what(),
                            type_tag.as_deref().unwrap_or("NULL")
                        ),
                        source,
                    },
                )?
            }
            CheckpointBody::Postgres { checkpoint, blobs } => {
                postgres_body_at(&checkpoint, blobs, &what(), depth)?
            }
        };
        if body.as_map().is_none() {
            return Err(malformed("the checkpoint is not a map"));
        }
        let mut channel_values = Vec::new();
        let mut channel_versions = Vec::new();
        let mut versions_seen = Vec::new();
        let mut v = None;
        let mut ts = None;
        if let Value::Map(entries) = body {
            for (k, val) in entries {
                match (k.as_str(), val) {
                    (Some("v"), Value::Int(i)) => v = Some(i),
                    (Some("ts"), Value::Str(s)) => ts = Some(s),
                    (Some("channel_values"), Value::Map(m)) => {
                        for (ck, cv) in m {
                            match ck {
                                Value::Str(name) => channel_values.push((name, cv)),
                                _ => return Err(malformed("a channel name is not a string")),
                            }
                        }
                    }
                    (Some("channel_values"), Value::Nil) => {}
                    (Some("channel_values"), _) => {
                        return Err(malformed("channel_values is not a map"));
                    }
                    (Some("versions_seen"), Value::Map(m)) => {
                        for (node, seen) in m {
                            let (Value::Str(node), Value::Map(seen)) = (node, seen) else {
                                continue;
                            };
                            let seen = seen
                                .into_iter()
                                .filter_map(|(k, v)| {
                                    Some((k.as_str()?.to_owned(), version_text(&v)))
                                })
                                .collect();
                            versions_seen.push((node, seen));
                        }
                    }
                    (Some("channel_versions"), Value::Map(m)) => {
                        for (ck, cv) in m {
                            match ck {
                                Value::Str(name) => {
                                    channel_versions.push((name, version_text(&cv)))
                                }
                                _ => return Err(malformed("a channel name is not a string")),
                            }
                        }
                    }
                    (Some("channel_versions"), Value::Nil) => {}
                    (Some("channel_versions"), _) => {
                        return Err(malformed("channel_versions is not a map"));
                    }
                    _ => {}
                }
            }
        }
        Ok(Checkpoint {
            thread_id: row.thread_id,
            checkpoint_ns: row.checkpoint_ns,
            checkpoint_id: row.checkpoint_id,
            parent_checkpoint_id: row.parent_checkpoint_id,
            v,
            ts,
            channel_values,
            channel_versions,
            versions_seen,
            metadata,
            bytes: row.bytes,
            sealing,
        })
    }

    /// The stored value of a channel.
    pub fn value(&self, channel: &str) -> Option<&Value> {
        self.channel_values
            .iter()
            .find(|(k, _)| k == channel)
            .map(|(_, v)| v)
    }

    /// The version of a channel.
    pub fn version(&self, channel: &str) -> Option<&str> {
        self.channel_versions
            .iter()
            .find(|(k, _)| k == channel)
            .map(|(_, v)| v.as_str())
    }

    /// The version of `channel` that `node` had seen (`versions_seen`).
    pub fn seen(&self, node: &str, channel: &str) -> Option<&str> {
        self.versions_seen
            .iter()
            .find(|(n, _)| n == node)?
            .1
            .iter()
            .find(|(c, _)| c == channel)
            .map(|(_, v)| v.as_str())
    }

    /// How `messages` is stored here.
    pub fn messages_encoding(&self) -> MessagesEncoding {
        match self.value(MESSAGES) {
            Some(v) if v.is_delta_snapshot() => MessagesEncoding::Snapshot,
            Some(_) => MessagesEncoding::Plain,
            None if self.version(MESSAGES).is_some() => MessagesEncoding::Absent,
            None => MessagesEncoding::Unversioned,
        }
    }

    /// Checkpoint mode by DeerFlow's metadata rule.
    pub fn mode(&self) -> ChannelMode {
        if metadata_is_delta(&self.metadata) {
            ChannelMode::Delta
        } else {
            ChannelMode::Full
        }
    }

    /// `metadata.source`.
    pub fn source(&self) -> Option<&str> {
        self.metadata.get("source").and_then(Json::as_str)
    }

    /// `metadata.step`.
    pub fn step(&self) -> Option<i64> {
        self.metadata.get("step").and_then(Json::as_i64)
    }
}

/// [`parse_metadata`] of a row's metadata, its errors naming the row (formatted only then).
pub(crate) fn parse_row_metadata(row: &CheckpointRow) -> Result<Map<String, Json>, ModelError> {
    parse_metadata(&row.metadata, "").map_err(|e| naming(e, row))
}

/// A metadata error (of an unnamed parse) naming `row`.
pub(crate) fn naming(e: ModelError, row: &CheckpointRow) -> ModelError {
    match e {
        ModelError::Malformed { reason, .. } => ModelError::Malformed {
            what: row_what(&row.thread_id, &row.checkpoint_id),
            reason,
        },
        other => other,
    }
}

/// How errors name a checkpoint row.
pub(crate) fn row_what(thread_id: &str, checkpoint_id: &str) -> String {
    format!("thread '{thread_id}' checkpoint {checkpoint_id}")
}

/// Rebuilds a Postgres checkpoint the way `PostgresSaver.get_tuple` does: the inline JSONB
/// values, then every non-`empty` blob at the checkpoint's channel versions (a blob beats
/// the inline `true` snapshot marker).
pub fn postgres_body(
    checkpoint: &Json,
    blobs: Vec<BlobRow>,
    what: &str,
) -> Result<Value, ModelError> {
    postgres_body_at(checkpoint, blobs, what, codec::Depth::Full)
}

/// [`postgres_body`] with blob values built to `depth`.
fn postgres_body_at(
    checkpoint: &Json,
    blobs: Vec<BlobRow>,
    what: &str,
    depth: codec::Depth<'_>,
) -> Result<Value, ModelError> {
    let Value::Map(mut entries) = codec::from_json(checkpoint) else {
        return Err(ModelError::Malformed {
            what: what.to_owned(),
            reason: "the checkpoint JSONB is not an object".into(),
        });
    };
    let pos = entries
        .iter()
        .position(|(k, _)| k.as_str() == Some("channel_values"));
    let mut values = match pos.map(|i| std::mem::replace(&mut entries[i].1, Value::Nil)) {
        Some(Value::Map(m)) => m,
        None | Some(Value::Nil) => Vec::new(),
        // LangGraph merges the blobs into this map, and fails on anything else.
        Some(_) => {
            return Err(ModelError::Malformed {
                what: what.to_owned(),
                reason: "channel_values is not a map".into(),
            });
        }
    };
    for b in blobs {
        if b.type_tag == "empty" {
            continue;
        }
        if !b.complete {
            // A scan's placeholder for a value the parent shares: keep only whether it is
            // a snapshot (ext 7), which is all structural analysis asks of it.
            let v = if placeholder_is_snapshot(b.blob.as_deref()) {
                Value::new_ext(codec::EXT_DELTA_SNAPSHOT, Value::Array(Vec::new()))
            } else {
                Value::Nil
            };
            set_value(&mut values, &b.channel, v);
            continue;
        }
        let bytes = bytes::Bytes::from(b.blob.unwrap_or_default());
        let v = codec::aes::open(Some(&b.type_tag), bytes)
            .and_then(|opened| {
                let plain = opened.tag.as_deref() == Some("msgpack");
                let lazy = plain && depth.stands_in(&b.channel);
                let shallow = plain && !depth.builds(&b.channel);
                if lazy && shallow {
                    codec::stand_in(&opened.bytes)
                } else if shallow {
                    codec::decode_value_shallow(&opened.bytes)
                } else {
                    codec::decode_typed(opened.tag.as_deref(), opened.bytes)
                }
            })
            .map_err(|source| ModelError::Decode {
                what: format!(
                    "{what}: blob of channel '{}' (type {})",
                    b.channel, b.type_tag
                ),
                source,
            })?;
        set_value(&mut values, &b.channel, v);
    }
    match pos {
        Some(i) => entries[i].1 = Value::Map(values),
        None => entries.push((Value::Str("channel_values".into()), Value::Map(values))),
    }
    Ok(Value::Map(entries))
}

/// Whether a blob placeholder's first bytes ([`BlobRow::complete`] false) open a msgpack
/// ext 7: a `DeltaChannel` snapshot.
pub(crate) fn placeholder_is_snapshot(head: Option<&[u8]>) -> bool {
    matches!(
        head.unwrap_or_default(),
        [0xc7, _, 7, ..] | [0xc8, _, _, 7, ..] | [0xc9, _, _, _, _, 7, ..] | [0xd4..=0xd8, 7, ..]
    )
}

fn set_value(values: &mut Vec<(Value, Value)>, channel: &str, v: Value) {
    match values.iter_mut().find(|(k, _)| k.as_str() == Some(channel)) {
        Some(slot) => slot.1 = v,
        None => values.push((Value::Str(channel.to_owned()), v)),
    }
}

/// A decoded pending write.
#[derive(Debug, Clone)]
pub struct Write {
    /// Task id.
    pub task_id: String,
    /// Task path.
    pub task_path: String,
    /// Index.
    pub idx: i64,
    /// Channel.
    pub channel: String,
    /// Decoded value.
    pub value: Value,
}

impl Write {
    /// Decodes a stored write row.
    pub fn from_row(row: WriteRow, thread_id: &str) -> Result<Self, ModelError> {
        let value = codec::decode_typed(row.type_tag.as_deref(), row.value).map_err(|source| {
            ModelError::Decode {
                what: format!(
                    "thread '{thread_id}' checkpoint {} write (task {}, idx {}, channel '{}', type {})",
                    row.checkpoint_id,
                    row.task_id,
                    row.idx,
                    row.channel,
                    row.type_tag.as_deref().unwrap_or("NULL")
                ),
                source,
            }
        })?;
        Ok(Write {
            task_id: row.task_id,
            task_path: row.task_path,
            idx: row.idx,
            channel: row.channel,
            value,
        })
    }
}

/// Classifies a thread from per-checkpoint facts: `full` when no checkpoint is delta,
/// `mixed` when a delta thread also holds full checkpoints that store `messages` as a
/// plain list (a full→delta migration), `delta` otherwise.
pub fn thread_mode(any_delta: bool, any_full_plain: bool) -> ThreadMode {
    match (any_delta, any_full_plain) {
        (false, _) => ThreadMode::Full,
        (true, true) => ThreadMode::Mixed,
        (true, false) => ThreadMode::Delta,
    }
}

/// A copy of the committed SQLite fixture `name` (with its WAL) in a new temporary
/// directory, and the copy's path.
#[cfg(test)]
pub(crate) fn fixture_copy(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sqlite");
    for suffix in ["", "-wal"] {
        let from = fixtures.join(format!("{name}{suffix}"));
        if from.exists() {
            std::fs::copy(&from, dir.path().join(format!("{name}{suffix}"))).unwrap();
        }
    }
    let db = dir.path().join(name);
    (dir, db)
}
