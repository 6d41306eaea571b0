//! Cheap facts of a stored checkpoint for whole-store scans: its mode, step and source from
//! the metadata, its `ts`, and how it stores `messages`. Each gives what the full parse or
//! decode gives ([`parse_metadata`](super::parse_metadata), [`Checkpoint::from_row`])
//! without building the values it does not need; anything the fast path cannot settle goes
//! through the full one.

use super::thread::MetaFacts;
use super::{Checkpoint, MESSAGES, MessagesEncoding, metadata_parses};
use crate::codec::{self, EXT_DELTA_SNAPSHOT};
use crate::store::{CheckpointBody, CheckpointKey, CheckpointRow};
pub use crate::store::{FactsRow, FactsWanted};
use serde_json::Value as Json;
use std::borrow::Cow;

/// What a store summary reads of checkpoint metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataFacts {
    /// Delta by DeerFlow's rule ([`super::metadata_is_delta`]).
    pub delta: bool,
    /// `metadata.step`, when an integer.
    pub step: Option<i64>,
    /// `metadata.source`, when a string.
    pub source: Option<String>,
}

/// The facts of metadata `bytes`; unreadable metadata gives the empty map's facts, as
/// `parse_metadata(..).unwrap_or_default()` does.
pub fn metadata_facts(bytes: &[u8]) -> MetadataFacts {
    let f = MetaFacts::parse(bytes, "").unwrap_or_default();
    MetadataFacts {
        delta: f.delta,
        step: f.step,
        source: f.source.map(String::from),
    }
}

/// The `ts` of a stored checkpoint (`None` when it cannot be decoded or has none).
pub fn checkpoint_ts(row: &CheckpointRow) -> Option<String> {
    match &row.body {
        CheckpointBody::Serialized {
            type_tag: Some(t),
            bytes,
        } if t == "msgpack" => codec::top_level_str(bytes, "ts").ok()?.map(str::to_owned),
        CheckpointBody::Serialized { type_tag, bytes } => {
            codec::decode_typed(type_tag.as_deref(), bytes.clone())
                .ok()?
                .get("ts")
                .and_then(codec::Value::as_str)
                .map(str::to_owned)
        }
        CheckpointBody::Postgres { checkpoint, .. } => checkpoint
            .get("ts")
            .and_then(Json::as_str)
            .map(str::to_owned),
    }
}

/// How `row` stores `messages`, as [`Checkpoint::messages_encoding`] gives it; `None` when
/// the row cannot be decoded. msgpack bodies are scanned, not decoded.
pub fn messages_encoding_of(row: &CheckpointRow) -> Option<MessagesEncoding> {
    encoding_of(Cow::Borrowed(row))
}

/// [`messages_encoding_of`], the row decoded (when it must be) without a copy when owned.
fn encoding_of(row: Cow<'_, CheckpointRow>) -> Option<MessagesEncoding> {
    if let CheckpointBody::Postgres { checkpoint, blobs } = &row.body {
        if blobs.iter().all(|b| !b.complete) {
            return placeholders_encoding(checkpoint, blobs, &row.metadata);
        }
    }
    if let CheckpointBody::Serialized {
        type_tag: Some(t),
        bytes,
    } = &row.body
    {
        if t == "msgpack" {
            let scanned = codec::checkpoint_messages_slice(bytes);
            return msgpack_encoding(bytes, &row.metadata, scanned);
        }
    }
    Checkpoint::from_row(row.into_owned())
        .ok()
        .map(|c| c.messages_encoding())
}

/// How a PostgreSQL row whose blobs are all placeholders (their first bytes) stores
/// `messages`, as [`Checkpoint::from_row`] and [`Checkpoint::messages_encoding`] give it
/// (`None` where the first fails), without building the checkpoint: a blob (not `empty`)
/// beats the inline value, and a placeholder is a snapshot or nothing.
fn placeholders_encoding(
    checkpoint: &Json,
    blobs: &[crate::store::BlobRow],
    metadata: &[u8],
) -> Option<MessagesEncoding> {
    let object = checkpoint.as_object()?;
    let inline = match object.get("channel_values") {
        None | Some(Json::Null) => None,
        Some(Json::Object(values)) => values.get(MESSAGES),
        Some(_) => return None,
    };
    let versioned = match object.get("channel_versions") {
        None | Some(Json::Null) => false,
        Some(Json::Object(versions)) => versions.contains_key(MESSAGES),
        Some(_) => return None,
    };
    if !metadata_parses(metadata) {
        return None;
    }
    let blob = blobs
        .iter()
        .rev()
        .find(|b| b.channel == MESSAGES && b.type_tag != "empty");
    Some(match (blob, inline) {
        (Some(b), _) if super::placeholder_is_snapshot(b.blob.as_deref()) => {
            MessagesEncoding::Snapshot
        }
        (Some(_), _) | (None, Some(_)) => MessagesEncoding::Plain,
        (None, None) if versioned => MessagesEncoding::Absent,
        (None, None) => MessagesEncoding::Unversioned,
    })
}

/// How a msgpack body stores `messages`, from its scan ([`codec::checkpoint_messages_slice`]):
/// `None` unless the body and the metadata are well formed.
fn msgpack_encoding(
    bytes: &[u8],
    metadata: &[u8],
    scanned: Result<(Option<&[u8]>, bool), crate::error::CodecError>,
) -> Option<MessagesEncoding> {
    if !codec::is_document(bytes) || !metadata_parses(metadata) {
        return None;
    }
    let (slice, versioned) = scanned.ok()?;
    Some(match slice {
        Some(v) if codec::ext_code(v) == Some(EXT_DELTA_SNAPSHOT) => MessagesEncoding::Snapshot,
        Some(_) => MessagesEncoding::Plain,
        None if versioned => MessagesEncoding::Absent,
        None => MessagesEncoding::Unversioned,
    })
}

/// What a store summary needs of one checkpoint to count the bytes its state reads
/// ([`crate::store::Store::checkpoint_facts_at`]).
#[derive(Debug, Clone)]
pub struct CheckpointFacts {
    /// Where it is.
    pub key: CheckpointKey,
    /// Parent id.
    pub parent_checkpoint_id: Option<String>,
    /// Checkpoint and metadata bytes ([`CheckpointRow::bytes`]).
    pub bytes: u64,
    /// PostgreSQL: bytes of the blobs at every channel version (only `messages`'s unless
    /// [`FactsWanted::head`]).
    pub blob_bytes: u64,
    /// The `messages` share of `blob_bytes`.
    pub messages_blob_bytes: u64,
    /// Bytes of the pending-write values stored on it.
    pub write_bytes: u64,
    /// Delta, `messages` absent: rebuilding its state reads the parent's.
    pub messages_absent: bool,
    /// Its `ts` ([`checkpoint_ts`]; `None` unless [`FactsWanted::head`]).
    pub ts: Option<String>,
    /// How it stores `messages`, when asked for: as decoding gives it when `whole`, else
    /// from the blobs' first bytes (then `Plain` may still fail to decode).
    pub messages: Option<MessagesEncoding>,
    /// Read from the whole row.
    pub whole: bool,
}

impl CheckpointFacts {
    /// The facts `want` names of what [`crate::store::Store::checkpoint_facts_at`] read.
    pub fn of(read: FactsRow, want: FactsWanted) -> Self {
        let FactsRow {
            row,
            write_bytes,
            blob_lengths,
            whole,
            ..
        } = read;
        Self::build(Cow::Owned(row), write_bytes, blob_lengths, whole, want)
    }

    /// [`CheckpointFacts::of`] on a borrowed row ([`crate::store::Store::scan_checkpoints_whole`]).
    pub fn of_row(read: &FactsRow, want: FactsWanted) -> Self {
        Self::build(
            Cow::Borrowed(&read.row),
            read.write_bytes,
            read.blob_lengths,
            read.whole,
            want,
        )
    }

    fn build(
        row: Cow<'_, CheckpointRow>,
        write_bytes: u64,
        blob_lengths: Option<(u64, u64)>,
        whole: bool,
        want: FactsWanted,
    ) -> Self {
        let (blob_bytes, messages_blob_bytes) = blob_lengths.unwrap_or_else(|| {
            let (mut all, mut messages) = (0, 0);
            if let CheckpointBody::Postgres { blobs, .. } = &row.body {
                for b in blobs {
                    let n = b.blob.as_ref().map_or(0, |v| v.len() as u64);
                    all += n;
                    if b.channel == MESSAGES {
                        messages += n;
                    }
                }
            }
            (all, messages)
        });
        let ts = if want.head { checkpoint_ts(&row) } else { None };
        let key = CheckpointKey {
            thread_id: row.thread_id.clone(),
            checkpoint_ns: row.checkpoint_ns.clone(),
            checkpoint_id: row.checkpoint_id.clone(),
        };
        let (parent_checkpoint_id, bytes) = (row.parent_checkpoint_id.clone(), row.bytes);
        // msgpack: only lengths are read, as the reader's delta walk does (one scan for
        // both facts); else decoded.
        let (msgpack_absent, decoded) = match &row.body {
            CheckpointBody::Serialized {
                type_tag: Some(t),
                bytes,
            } if t == "msgpack" => {
                let scanned = codec::checkpoint_messages_slice(bytes);
                let absent = matches!(scanned, Ok((None, true)));
                let decoded = want
                    .encoding
                    .then(|| msgpack_encoding(bytes, &row.metadata, scanned))
                    .flatten();
                (Some(absent), decoded)
            }
            _ => (None, encoding_of(row)),
        };
        let messages_absent = msgpack_absent.unwrap_or(decoded == Some(MessagesEncoding::Absent));
        let messages = if want.encoding { decoded } else { None };
        CheckpointFacts {
            key,
            parent_checkpoint_id,
            bytes,
            blob_bytes,
            messages_blob_bytes,
            write_bytes,
            messages_absent,
            ts,
            messages,
            whole,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::parse_metadata;
    use crate::store::Store;
    use crate::store::sqlite::SqliteStore;

    fn fixtures() -> Vec<std::path::PathBuf> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sqlite");
        let mut out: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "db"))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn the_fast_facts_equal_the_full_parse_and_decode_on_every_fixture_checkpoint() {
        let (mut rows, mut stores) = (0, 0);
        let dir = tempfile::tempdir().unwrap();
        for path in fixtures() {
            // A copy (with its WAL): a committed fixture is never opened in place.
            let copy = dir.path().join(path.file_name().unwrap());
            std::fs::copy(&path, &copy).unwrap();
            let wal = path.with_extension("db-wal");
            if wal.exists() {
                std::fs::copy(&wal, copy.with_extension("db-wal")).unwrap();
            }
            let Ok(store) = SqliteStore::open_read_only(&copy) else {
                continue;
            };
            stores += 1;
            let mut ids = Vec::new();
            store
                .scan_checkpoint_meta(&mut |r| {
                    ids.push((r.thread_id, r.checkpoint_ns, r.checkpoint_id));
                    Ok(())
                })
                .unwrap();
            for (t, ns, id) in ids {
                let row = store.checkpoint(&t, &ns, &id).unwrap().unwrap();
                let map = parse_metadata(&row.metadata, "").unwrap_or_default();
                let facts = metadata_facts(&row.metadata);
                assert_eq!(facts.delta, super::super::metadata_is_delta(&map));
                assert_eq!(
                    MetaFacts::parse(&row.metadata, "").ok(),
                    parse_metadata(&row.metadata, "")
                        .ok()
                        .map(|m| MetaFacts::of(&m)),
                    "{path:?} {t} {id}"
                );
                assert_eq!(facts.step, map.get("step").and_then(Json::as_i64));
                assert_eq!(
                    facts.source.as_deref(),
                    map.get("source").and_then(Json::as_str)
                );
                let slow_ts = match &row.body {
                    CheckpointBody::Serialized { type_tag, bytes } => {
                        codec::decode_typed(type_tag.as_deref(), bytes.clone())
                            .ok()
                            .and_then(|v| {
                                v.get("ts")
                                    .and_then(codec::Value::as_str)
                                    .map(str::to_owned)
                            })
                    }
                    CheckpointBody::Postgres { .. } => unreachable!(),
                };
                assert_eq!(checkpoint_ts(&row), slow_ts, "{path:?} {t} {id}");
                let slow = Checkpoint::from_row(row.clone())
                    .ok()
                    .map(|c| c.messages_encoding());
                assert_eq!(messages_encoding_of(&row), slow, "{path:?} {t} {id}");
                rows += 1;
            }
        }
        assert!(stores > 20 && rows > 1000, "{stores} stores, {rows} rows");
    }

    #[test]
    fn odd_metadata_takes_the_full_parse() {
        // The keys `Keys` renames are the model's.
        let marker = format!(r#"{{"{}": "delta"}}"#, crate::model::MODE_MARKER);
        assert!(metadata_facts(marker.as_bytes()).delta);
        let counters = format!(
            r#"{{"{}": {{"messages": 2}}}}"#,
            crate::model::DELTA_COUNTERS
        );
        assert!(metadata_facts(counters.as_bytes()).delta);
        let delta = br#"{"counters_since_delta_snapshot": {"messages": 1}, "step": 3}"#;
        assert!(metadata_facts(delta).delta);
        // The last duplicate wins, as in the parsed map.
        let dup = br#"{"step": 1, "step": 2, "source": "loop"}"#;
        assert_eq!(metadata_facts(dup).step, Some(2));
        let nan = br#"{"step": 4, "x": NaN}"#;
        assert_eq!(metadata_facts(nan).step, Some(4));
        assert_eq!(metadata_facts(b"[1]"), MetadataFacts::default());
        assert_eq!(metadata_facts(b"null"), MetadataFacts::default());
        assert_eq!(
            metadata_facts(br#"[1, "loop", null, null, false, null]"#).step,
            None
        );
        // Every fact as the map gives it, on odd shapes.
        for odd in [
            r#"{"deerflow_checkpoint_channel_mode": null}"#,
            r#"{"deerflow_checkpoint_channel_mode": 3, "step": 1.5}"#,
            r#"{"run_durations": null, "writes": {"runtime_run_duration": null}}"#,
            r#"{"writes": null, "source": 4}"#,
            r#"{"writes": [1]}"#,
            r#"{"writes": ["runtime_run_duration"]}"#,
            r#"{"writes": {"runtime_run_duration": 1}, "x": [{"writes": 2}]}"#,
            r#"{"writes": "runtime_run_duration"}"#,
            r#"{"writes": {"a": 1, "a": 2}}"#,
            r#"{"counters_since_delta_snapshot": {"messages": null}}"#,
            r#"{"counters_since_delta_snapshot": {"x": 1, "messages": [2, {"a": []}]}}"#,
            r#"{"counters_since_delta_snapshot": {"messages": 1, "messages": 2}}"#,
            r#"{"counters_since_delta_snapshot": {"mess\u0061ges": 1}}"#,
            r#"{"counters_since_delta_snapshot": {"x": {"messages": 1}}}"#,
            r#"{"counters_since_delta_snapshot": ["messages"]}"#,
            r#"{"counters_since_delta_snapshot": "messages"}"#,
            r#"{"counters_since_delta_snapshot": null}"#,
            r#"{"counters_since_delta_snapshot": -1.5}"#,
            r#"{"counters_since_delta_snapshot": true}"#,
            r#"{"counters_since_delta_snapshot": {}, "counters_since_delta_snapshot": {}}"#,
            "  {}",
            "{",
            r#"{"a": 1} x"#,
        ] {
            let full = parse_metadata(odd.as_bytes(), "m").map(|m| MetaFacts::of(&m));
            assert_eq!(
                MetaFacts::parse(odd.as_bytes(), "m").ok(),
                full.ok(),
                "{odd}"
            );
        }
    }

    #[test]
    fn metadata_parses_where_the_full_parse_does() {
        let deep = format!("{{\"a\": {}1{}}}", "[".repeat(130), "]".repeat(130));
        for odd in [
            "",
            "{}",
            "  {} ",
            "null",
            "[1]",
            "1",
            r#""s""#,
            "{",
            r#"{"a": 1} x"#,
            r#"{"a": 1, "a": {"b": [true, null, 1.5, -2]}}"#,
            r#"{"x": "\ud800"}"#,
            r#"{"\udc00": 1}"#,
            r#"{"x": 1e400}"#,
            r#"{"x": -1e400}"#,
            r#"{"x": 123456789012345678901234567890}"#,
            r#"{"x": NaN, "y": [Infinity, -Infinity]}"#,
            r#"{"x": 1.}"#,
            r#"{"x": 01}"#,
            "{\"x\": \"\u{1}\"}",
            &deep,
        ] {
            let full = parse_metadata(odd.as_bytes(), "m").is_ok();
            assert_eq!(metadata_parses(odd.as_bytes()), full, "{odd}");
        }
        // The cases IgnoredAny would let through are refused by both.
        assert!(!metadata_parses(br#"{"x": 1e400}"#));
        assert!(!metadata_parses(br#"{"x": "\ud800"}"#));
        assert!(metadata_parses(br#"{"x": NaN}"#));
    }

    #[test]
    fn the_placeholder_encoding_equals_the_full_decode_on_every_shape() {
        use crate::store::BlobRow;
        let blob = |channel: &str, type_tag: &str, head: Option<&[u8]>| BlobRow {
            channel: channel.into(),
            type_tag: type_tag.into(),
            blob: head.map(<[u8]>::to_vec),
            complete: false,
        };
        let snapshot: &[u8] = &[0xc7, 0x10, 7, 0x92];
        let heads: [Vec<BlobRow>; 7] = [
            vec![],
            vec![blob("messages", "msgpack", Some(snapshot))],
            vec![blob("messages", "msgpack", Some(&[0x92, 1, 2]))],
            vec![blob("messages", "empty", None)],
            vec![blob("messages", "msgpack", None)],
            vec![
                blob("messages", "msgpack", Some(&[0x91])),
                blob("title", "msgpack", Some(snapshot)),
            ],
            vec![blob("messages", "msgpack", Some(&[0xd5, 7, 0]))],
        ];
        let checkpoints = [
            r#"{"v": 4, "channel_values": {}, "channel_versions": {"messages": "2.0.1"}}"#,
            r#"{"channel_values": {"messages": true}, "channel_versions": {"messages": "1"}}"#,
            r#"{"channel_values": {"messages": null}, "channel_versions": {}}"#,
            r#"{"channel_values": null, "channel_versions": null}"#,
            r#"{"channel_versions": {"messages": 3}}"#,
            r#"{"channel_values": [1], "channel_versions": {"messages": "1"}}"#,
            r#"{"channel_values": {}, "channel_versions": [1]}"#,
            r#"{"channel_values": {}, "channel_versions": "x"}"#,
            r#"{"channel_values": {"title": "t"}}"#,
            r#"{"channel_values": {}, "channel_versions": {"title": "1"}}"#,
            r#"{"versions_seen": 3, "ts": 1}"#,
            "[1, 2]",
            "null",
        ];
        let (mut cases, mut decoded) = (0, 0);
        for checkpoint in checkpoints {
            for blobs in &heads {
                for metadata in [&b"{}"[..], br#"{"step": 1}"#, b"{", b"[1]"] {
                    let row = CheckpointRow {
                        thread_id: "t".into(),
                        checkpoint_ns: String::new(),
                        checkpoint_id: "c".into(),
                        parent_checkpoint_id: None,
                        body: CheckpointBody::Postgres {
                            checkpoint: serde_json::from_str(checkpoint).unwrap(),
                            blobs: blobs.clone(),
                        },
                        metadata: metadata.to_vec(),
                        bytes: 0,
                    };
                    let full = Checkpoint::from_row(row.clone())
                        .ok()
                        .map(|c| c.messages_encoding());
                    decoded += usize::from(full.is_some());
                    assert_eq!(messages_encoding_of(&row), full, "{checkpoint} {blobs:?}");
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 13 * 7 * 4);
        assert!(decoded > 50, "{decoded}");
    }
}
