//! A thread's rows laid out for the target backend (docs/copy.md#layouts): SQLite keeps one
//! serialized checkpoint with every value inside; PostgreSQL keeps a JSONB checkpoint with
//! primitives inline, other values in `checkpoint_blobs` by (channel, version), and JSONB
//! metadata without `writes`. Rows of the same backend are copied as they are stored (sealed
//! with the key under `--encrypt-all`).

use dfck_core::codec::aes::Protection;
use dfck_core::codec::{self, EXT_DELTA_SNAPSHOT, Value};
use dfck_core::store::{Backend, BlobRow, CheckpointBody, CheckpointRow, WriteRow};
use dfck_core::write::Refusal;
use serde_json::{Map, Value as Json};

/// One namespace of a thread, read whole from the source.
#[derive(Debug)]
pub struct NsRows {
    /// Namespace.
    pub ns: String,
    /// Checkpoint rows, values complete.
    pub checkpoints: Vec<CheckpointRow>,
    /// Pending writes.
    pub writes: Vec<WriteRow>,
}

/// Sorts a namespace's writes as a copy reads them: by checkpoint, then in LangGraph's order.
pub fn sort_ns_writes(writes: &mut [WriteRow]) {
    writes.sort_by(|a, b| (&a.checkpoint_id, a.sort_key()).cmp(&(&b.checkpoint_id, b.sort_key())));
}

/// A checkpoint body in the target's layout.
#[derive(Debug)]
pub enum LaidBody {
    /// SQLite: the serialized checkpoint and the metadata JSON text.
    Sqlite {
        /// Serializer tag.
        type_tag: Option<String>,
        /// The checkpoint column.
        bytes: Vec<u8>,
        /// The metadata column.
        metadata: Vec<u8>,
    },
    /// PostgreSQL: JSONB checkpoint and metadata.
    Postgres {
        /// The checkpoint column.
        checkpoint: Json,
        /// The metadata column.
        metadata: Json,
    },
}

/// One checkpoint row to insert.
#[derive(Debug)]
pub struct LaidCheckpoint {
    /// Checkpoint id.
    pub id: String,
    /// Parent id.
    pub parent: Option<String>,
    /// Body and metadata.
    pub body: LaidBody,
}

/// One `checkpoint_blobs` row to insert.
#[derive(Debug)]
pub struct LaidBlob {
    /// Channel.
    pub channel: String,
    /// Version.
    pub version: String,
    /// Serializer tag.
    pub type_tag: String,
    /// Bytes (NULL for a tombstone).
    pub blob: Option<Vec<u8>>,
}

/// One namespace ready to insert.
#[derive(Debug)]
pub struct LaidNs {
    /// Namespace.
    pub ns: String,
    /// Checkpoints.
    pub checkpoints: Vec<LaidCheckpoint>,
    /// Blobs (PostgreSQL only).
    pub blobs: Vec<LaidBlob>,
    /// Pending writes, as stored.
    pub writes: Vec<WriteRow>,
}

impl LaidNs {
    /// Bytes the rows hold (bodies, metadata, blobs, write values).
    pub fn bytes(&self) -> u64 {
        let ck: usize = self
            .checkpoints
            .iter()
            .map(|c| match &c.body {
                LaidBody::Sqlite {
                    bytes, metadata, ..
                } => bytes.len() + metadata.len(),
                LaidBody::Postgres {
                    checkpoint,
                    metadata,
                } => checkpoint.to_string().len() + metadata.to_string().len(),
            })
            .sum();
        let blobs: usize = self
            .blobs
            .iter()
            .map(|b| b.blob.as_ref().map_or(0, Vec::len))
            .sum();
        let writes: usize = self.writes.iter().map(|w| w.value.len()).sum();
        (ck + blobs + writes) as u64
    }

    /// Rows to insert.
    pub fn rows(&self) -> usize {
        self.checkpoints.len() + self.blobs.len() + self.writes.len()
    }
}

fn what(row: &CheckpointRow) -> String {
    if row.checkpoint_ns.is_empty() {
        format!("checkpoint {}", row.checkpoint_id)
    } else {
        format!(
            "checkpoint {} (namespace '{}')",
            row.checkpoint_id, row.checkpoint_ns
        )
    }
}

/// Lays one namespace out for `target`.
///
/// Encryption (docs/security.md#writes): a value keeps its source's protection (a SQLite
/// checkpoint's blobs on PostgreSQL are encrypted when it was, a SQLite checkpoint built from
/// PostgreSQL blobs when any of them was, or, with none, when its own writes are, else as
/// its parent, else when the thread holds an encrypted value); under `--encrypt-all` every serialized value is encrypted. Metadata and
/// PostgreSQL's inline primitives stay plaintext JSONB, as with LangGraph's own saver.
pub fn lay_out(rows: NsRows, target: Backend) -> Result<LaidNs, Refusal> {
    let mut checkpoints = Vec::with_capacity(rows.checkpoints.len());
    let mut blobs: Vec<LaidBlob> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let thread_sealed = thread_protection(&rows);
    let mut decided: std::collections::HashMap<String, Protection> = Default::default();
    for row in rows.checkpoints {
        // A checkpoint without blobs takes the protection of its own writes, else its
        // parent's, else the thread's.
        let own: Vec<Protection> = rows
            .writes
            .iter()
            .filter(|x| x.checkpoint_id == row.checkpoint_id)
            .map(|x| Protection::of_tag(x.type_tag.as_deref()))
            .collect();
        let fallback = if own.iter().any(|p| p.is_encrypted()) {
            Protection::Aes
        } else if !own.is_empty() {
            Protection::Plain
        } else {
            row.parent_checkpoint_id
                .as_ref()
                .and_then(|p| decided.get(p).copied())
                .unwrap_or(thread_sealed)
        };
        let (laid, new_blobs, sealed) = lay_checkpoint(row, target, fallback)?;
        if let Some(sealed) = sealed {
            decided.insert(laid.id.clone(), sealed);
        }
        // PostgreSQL keeps one value per (channel, version): the first checkpoint's, as
        // `PostgresSaver` (which writes a blob only for new versions) would.
        for b in new_blobs {
            if seen.insert((b.channel.clone(), b.version.clone())) {
                blobs.push(b);
            }
        }
        checkpoints.push(laid);
    }
    let writes = writes_for(rows.writes, target)?;
    Ok(LaidNs {
        ns: rows.ns,
        checkpoints,
        blobs,
        writes,
    })
}

/// One checkpoint row in `target`'s layout, with the blobs it stores (PostgreSQL) and, on
/// SQLite, how its body was sealed; `fallback` is the protection of a PostgreSQL checkpoint
/// without blobs laid out for SQLite.
pub fn lay_checkpoint(
    row: CheckpointRow,
    target: Backend,
    fallback: Protection,
) -> Result<(LaidCheckpoint, Vec<LaidBlob>, Option<Protection>), Refusal> {
    let w = what(&row);
    let (body, blobs, sealed) = match target {
        Backend::Postgres => {
            let (body, blobs) = to_postgres(row.body, &row.metadata, &w)?;
            (body, blobs, None)
        }
        _ => {
            let (body, sealed) = to_sqlite(row.body, &row.metadata, &w, fallback)?;
            (body, Vec::new(), Some(sealed))
        }
    };
    let laid = LaidCheckpoint {
        id: row.checkpoint_id,
        parent: row.parent_checkpoint_id,
        body,
    };
    Ok((laid, blobs, sealed))
}

/// A namespace's pending writes for `target`, each sealed as it was (or under
/// `--encrypt-all`); an `idx` PostgreSQL's INTEGER cannot hold is refused.
pub fn writes_for(writes: Vec<WriteRow>, target: Backend) -> Result<Vec<WriteRow>, Refusal> {
    if target == Backend::Postgres {
        if let Some(w) = writes.iter().find(|w| i32::try_from(w.idx).is_err()) {
            return Err(Refusal(format!(
                "a write on checkpoint {} has idx {}, which PostgreSQL's INTEGER cannot hold",
                w.checkpoint_id, w.idx
            )));
        }
    }
    writes
        .into_iter()
        .map(|mut w| {
            let (tag, value) = Protection::of_tag(w.type_tag.as_deref())
                .for_write()
                .seal_stored(w.type_tag.take(), std::mem::take(&mut w.value))
                .map_err(|e| Refusal(format!("a write on checkpoint {}: {e}", w.checkpoint_id)))?;
            w.type_tag = tag;
            w.value = value;
            Ok(w)
        })
        .collect()
}

/// [`Protection::Aes`] when any stored value of the namespace is encrypted.
fn thread_protection(rows: &NsRows) -> Protection {
    let enc = |t: Option<&str>| Protection::of_tag(t).is_encrypted();
    let any = rows.writes.iter().any(|w| enc(w.type_tag.as_deref()))
        || rows.checkpoints.iter().any(|c| match &c.body {
            CheckpointBody::Serialized { type_tag, .. } => enc(type_tag.as_deref()),
            CheckpointBody::Postgres { blobs, .. } => blobs.iter().any(|b| enc(Some(&b.type_tag))),
        });
    if any {
        Protection::Aes
    } else {
        Protection::Plain
    }
}

fn sealing(w: &str) -> impl Fn(dfck_core::codec::CodecError) -> Refusal + '_ {
    move |e| Refusal(format!("{w}: {e}"))
}

fn parse_meta(raw: &[u8], w: &str) -> Result<Json, Refusal> {
    let v: Json = serde_json::from_slice(raw)
        .map_err(|e| Refusal(format!("{w}: metadata is not JSON ({e})")))?;
    if !v.is_object() {
        return Err(Refusal(format!("{w}: metadata is not a JSON object")));
    }
    Ok(v)
}

/// The SQLite layout: same-backend rows as stored; a PostgreSQL checkpoint rebuilt as
/// `PostgresSaver` reads it and serialized as one msgpack body.
fn to_sqlite(
    body: CheckpointBody,
    meta: &[u8],
    w: &str,
    thread_sealed: Protection,
) -> Result<(LaidBody, Protection), Refusal> {
    match body {
        CheckpointBody::Serialized { type_tag, bytes } => {
            let sealed = Protection::of_tag(type_tag.as_deref()).for_write();
            let (type_tag, bytes) = sealed.seal_stored(type_tag, bytes).map_err(sealing(w))?;
            Ok((
                LaidBody::Sqlite {
                    type_tag,
                    bytes,
                    metadata: meta.to_vec(),
                },
                sealed,
            ))
        }
        CheckpointBody::Postgres { checkpoint, blobs } => {
            // Values are laid out decrypted, and the body sealed as its blobs were.
            let mut sealed = if blobs.iter().any(|b| b.type_tag != "empty") {
                Protection::Plain
            } else {
                thread_sealed
            };
            let blobs = blobs
                .into_iter()
                .map(|b| {
                    if b.type_tag == "empty" {
                        return Ok(b);
                    }
                    let opened = codec::aes::open(
                        Some(&b.type_tag),
                        b.blob.clone().unwrap_or_default().into(),
                    )
                    .map_err(|e| Refusal(format!("{w}: channel '{}': {e}", b.channel)))?;
                    if opened.protection.is_encrypted() {
                        sealed = Protection::Aes;
                    }
                    Ok(BlobRow {
                        type_tag: opened.tag.unwrap_or_default(),
                        blob: b.blob.map(|_| opened.bytes.to_vec()),
                        ..b
                    })
                })
                .collect::<Result<Vec<_>, Refusal>>()?;
            if let Some(b) = blobs
                .iter()
                .find(|b| b.type_tag != "empty" && b.type_tag != "msgpack")
            {
                return Err(Refusal(format!(
                    "{w}: channel '{}' is stored with serializer '{}'; a SQLite checkpoint keeps every value inside one msgpack body, so it cannot be laid out without decoding (and, for an encrypted store, the key)",
                    b.channel, b.type_tag
                )));
            }
            // A snapshot is stored at the checkpoint that took it (inline `true`); others at
            // its version read it through the shared blob, and on SQLite replay to it.
            let marked = |c: &str| {
                checkpoint
                    .get("channel_values")
                    .and_then(|v| v.get(c))
                    .is_some_and(|v| v == &Json::Bool(true))
            };
            let blobs: Vec<BlobRow> = blobs
                .into_iter()
                .filter(|b| {
                    let snapshot =
                        b.blob.as_deref().and_then(codec::ext_code) == Some(EXT_DELTA_SNAPSHOT);
                    !snapshot || marked(&b.channel)
                })
                .collect();
            let body = dfck_core::model::postgres_body(&checkpoint, blobs, w)
                .map_err(|e| Refusal(e.to_string()))?;
            let bytes = codec::encode(&langgraph_key_order(body));
            let sealed = sealed.for_write();
            let (type_tag, bytes) = sealed.seal("msgpack", bytes).map_err(sealing(w))?;
            let metadata = parse_meta(meta, w)?;
            let text =
                codec::pyjson::dumps(&metadata, codec::pyjson::PyJsonFormatter::spaced(false))
                    .map_err(|e| Refusal(format!("{w}: metadata: {e}")))?;
            Ok((
                LaidBody::Sqlite {
                    type_tag: Some(type_tag),
                    bytes,
                    metadata: text.into_bytes(),
                },
                sealed,
            ))
        }
    }
}

/// The checkpoint keys in the order LangGraph writes them (`create_checkpoint`; the
/// exit-mode stub, without `updated_channels`, puts `id` before `ts`); other keys after.
fn langgraph_key_order(body: Value) -> Value {
    let Value::Map(mut entries) = body else {
        return body;
    };
    let stub = !entries
        .iter()
        .any(|(k, _)| k.as_str() == Some("updated_channels"));
    let order: &[&str] = if stub {
        &[
            "v",
            "id",
            "ts",
            "channel_values",
            "channel_versions",
            "versions_seen",
        ]
    } else {
        &[
            "v",
            "ts",
            "id",
            "channel_values",
            "channel_versions",
            "versions_seen",
            "updated_channels",
        ]
    };
    let rank = |k: &Value| {
        k.as_str()
            .and_then(|s| order.iter().position(|o| *o == s))
            .unwrap_or(order.len())
    };
    entries.sort_by_key(|(k, _)| rank(k));
    Value::Map(entries)
}

/// Text of a channel version as `checkpoint_blobs.version` holds it.
fn version_text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The PostgreSQL layout: same-backend rows as stored (each blob under its version); a
/// SQLite checkpoint split as `PostgresSaver.put` splits it.
fn to_postgres(
    body: CheckpointBody,
    meta: &[u8],
    w: &str,
) -> Result<(LaidBody, Vec<LaidBlob>), Refusal> {
    let mut metadata = parse_meta(meta, w)?;
    match body {
        CheckpointBody::Postgres { checkpoint, blobs } => {
            let versions = checkpoint.get("channel_versions").and_then(Json::as_object);
            let mut out = Vec::new();
            for BlobRow {
                channel,
                type_tag,
                blob,
                complete,
            } in blobs
            {
                let Some(version) = versions
                    .and_then(|m| m.get(&channel))
                    .and_then(version_text)
                else {
                    continue;
                };
                if !complete {
                    return Err(Refusal(format!(
                        "{w}: blob of '{channel}' read incompletely"
                    )));
                }
                let (type_tag, blob) = match blob {
                    Some(bytes) if type_tag != "empty" => {
                        let (t, b) = Protection::of_tag(Some(&type_tag))
                            .for_write()
                            .seal_stored(Some(type_tag), bytes)
                            .map_err(sealing(w))?;
                        (t.unwrap_or_default(), Some(b))
                    }
                    other => (type_tag, other),
                };
                out.push(LaidBlob {
                    channel,
                    version,
                    type_tag,
                    blob,
                });
            }
            Ok((
                LaidBody::Postgres {
                    checkpoint,
                    metadata,
                },
                out,
            ))
        }
        CheckpointBody::Serialized { type_tag, bytes } => {
            let opened = codec::aes::open(type_tag.as_deref(), bytes.into())
                .map_err(|e| Refusal(format!("{w}: {e}")))?;
            let sealed = opened.protection.for_write();
            let bytes = opened.bytes;
            if opened.tag.as_deref() != Some("msgpack") {
                return Err(Refusal(format!(
                    "{w}: the checkpoint is stored with serializer '{}'; PostgreSQL keeps channel values apart from the checkpoint, which needs the body decoded (and, for an encrypted store, the key); copy such threads to SQLite",
                    type_tag.as_deref().unwrap_or("NULL")
                )));
            }
            if let Some(m) = metadata.as_object_mut() {
                m.remove("writes");
            }
            if has_nul(&metadata) {
                return Err(Refusal(format!(
                    "{w}: metadata holds a NUL character, which PostgreSQL's JSONB cannot store"
                )));
            }
            let decoded = codec::decode(&bytes)
                .map_err(|e| Refusal(format!("{w}: the checkpoint does not decode: {e}")))?;
            let (checkpoint, mut blobs) = split(decoded, w)?;
            for b in &mut blobs {
                if let Some(plain) = b.blob.take() {
                    let (t, sealed_blob) = sealed.seal(&b.type_tag, plain).map_err(sealing(w))?;
                    b.type_tag = t;
                    b.blob = Some(sealed_blob);
                }
            }
            Ok((
                LaidBody::Postgres {
                    checkpoint,
                    metadata,
                },
                blobs,
            ))
        }
    }
}

fn has_nul(v: &Json) -> bool {
    match v {
        Json::String(s) => s.contains('\0'),
        Json::Array(a) => a.iter().any(has_nul),
        Json::Object(m) => m.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// Splits a decoded checkpoint as `PostgresSaver.put` does: primitives stay inline, a
/// `_DeltaSnapshot` goes to a blob behind an inline `true`, everything else to a blob.
fn split(body: Value, w: &str) -> Result<(Json, Vec<LaidBlob>), Refusal> {
    let Value::Map(entries) = body else {
        return Err(Refusal(format!("{w}: the checkpoint is not a map")));
    };
    let versions: Vec<(String, String)> = entries
        .iter()
        .find(|(k, _)| k.as_str() == Some("channel_versions"))
        .and_then(|(_, v)| v.as_map())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    let version = match v {
                        Value::Str(s) => s.clone(),
                        Value::Int(i) => i.to_string(),
                        Value::UInt(u) => u.to_string(),
                        Value::F64(f) => f.to_string(),
                        _ => return None,
                    };
                    Some((k.as_str()?.to_owned(), version))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out = Map::new();
    let mut blobs = Vec::new();
    for (k, v) in entries {
        let Some(key) = k.as_str().map(str::to_owned) else {
            return Err(Refusal(format!("{w}: a checkpoint key is not a string")));
        };
        if key != "channel_values" {
            out.insert(key.clone(), to_json(&v, w, &key)?);
            continue;
        }
        let Value::Map(values) = v else {
            out.insert(key, to_json(&v, w, "channel_values")?);
            continue;
        };
        let mut inline = Map::new();
        for (ck, cv) in values {
            let Some(channel) = ck.as_str().map(str::to_owned) else {
                return Err(Refusal(format!("{w}: a channel name is not a string")));
            };
            let primitive = matches!(
                cv,
                Value::Nil
                    | Value::Bool(_)
                    | Value::Int(_)
                    | Value::UInt(_)
                    | Value::F64(_)
                    | Value::F32(_)
            ) || matches!(&cv, Value::Str(s) if !s.contains('\0'));
            if primitive {
                inline.insert(channel.clone(), to_json(&cv, w, &channel)?);
                continue;
            }
            let Some(version) = versions
                .iter()
                .find(|(c, _)| *c == channel)
                .map(|(_, v)| v.clone())
            else {
                return Err(Refusal(format!(
                    "{w}: channel '{channel}' stores a value but has no version, which PostgreSQL's blob table needs"
                )));
            };
            if matches!(&cv, Value::Ext(e) if e.code == EXT_DELTA_SNAPSHOT) {
                inline.insert(channel.clone(), Json::Bool(true));
            }
            blobs.push(LaidBlob {
                channel,
                version,
                type_tag: "msgpack".into(),
                blob: Some(codec::encode(&cv)),
            });
        }
        out.insert(key, Json::Object(inline));
    }
    Ok((Json::Object(out), blobs))
}

/// A checkpoint field as JSONB holds it; values JSON cannot hold are refused.
fn to_json(v: &Value, w: &str, field: &str) -> Result<Json, Refusal> {
    let bad = |why: &str| {
        Refusal(format!(
            "{w}: '{field}' {why}, which PostgreSQL's JSONB cannot hold"
        ))
    };
    Ok(match v {
        Value::Nil => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::UInt(u) => Json::from(*u),
        Value::F64(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .ok_or_else(|| bad("holds a non-finite float"))?,
        Value::F32(f) => serde_json::Number::from_f64(f64::from(*f))
            .map(Json::Number)
            .ok_or_else(|| bad("holds a non-finite float"))?,
        Value::Str(s) if s.contains('\0') => return Err(bad("holds a NUL character")),
        Value::Str(s) => Json::String(s.clone()),
        Value::Array(a) => Json::Array(
            a.iter()
                .map(|x| to_json(x, w, field))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(m) => {
            let mut o = Map::new();
            for (k, x) in m {
                let Some(k) = k.as_str() else {
                    return Err(bad("has a non-string key"));
                };
                o.insert(k.to_owned(), to_json(x, w, field)?);
            }
            Json::Object(o)
        }
        Value::Bin(_) | Value::Ext(_) => {
            return Err(bad(
                "holds a serialized object (checkpoint format before v4?)",
            ));
        }
    })
}
