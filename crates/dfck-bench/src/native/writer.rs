//! dfck's writer of the LangGraph 1.2 checkpoint format (docs/storage-format.md): UUIDv6
//! checkpoint ids, `{:032}.{fraction}` channel versions, the checkpoint dict in LangGraph's key
//! order, metadata as `json.dumps` text (SQLite), msgpack (InMemorySaver) or JSONB (Postgres),
//! `DeltaChannel` counters and `_DeltaSnapshot` values, and pending-write records.
//!
//! [`GraphState`] is the backend-neutral part: it tracks channel versions, `versions_seen`,
//! delta counters, the step and the parent, and turns one superstep into a
//! [`CheckpointRecord`]. A workload drives it with the supersteps its graph would run (see
//! `channels.rs` for the one-node graph of docs/bench-rows.md#workloads); a production-shaped workload
//! with more channels drives the same API. Backends (`memory.rs`, `sqlite.rs`, `postgres.rs`)
//! store records the way the matching LangGraph saver does.

use dfck_core::codec::pyjson::{self, PyJsonFormatter};
use dfck_core::codec::{EXT_DELTA_SNAPSHOT, Value, write_value};
use serde_json::{Map, Value as Json, json};
use std::time::{SystemTime, UNIX_EPOCH};

/// `DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT`: LangGraph's superstep cap between snapshots.
pub const DELTA_MAX_SUPERSTEPS: u64 = 5000;
/// The checkpoint format version LangGraph 1.2 writes.
pub const CHECKPOINT_V: i64 = 4;

/// A small deterministic-quality PRNG (SplitMix64) for id node bits and version fractions;
/// nothing here needs cryptographic randomness.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded from the clock and the process id.
    pub fn from_entropy() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Rng(nanos ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// A fixed seed (tests).
    pub fn seeded(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Python's `random.random()`: 53 random bits in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Gregorian offset of the UUID epoch (1582-10-15) in 100-ns ticks before the Unix epoch.
const UUID_EPOCH_OFFSET: u64 = 0x01b2_1dd2_1381_4000;

/// Mints checkpoint ids, timestamps and versions like one LangGraph process: UUIDv6 ids whose
/// timestamp increases strictly, `datetime.now(timezone.utc).isoformat()` timestamps.
#[derive(Debug, Clone)]
pub struct Clock {
    last_ticks: u64,
    rng: Rng,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new(Rng::from_entropy())
    }
}

impl Clock {
    /// A clock drawing random bits from `rng`.
    pub fn new(rng: Rng) -> Self {
        Clock { last_ticks: 0, rng }
    }

    /// `(checkpoint id, ts)` for a checkpoint at `step`: `uuid6(clock_seq=step)` and the
    /// ISO timestamp of the same instant.
    pub fn checkpoint_id(&mut self, step: i64) -> (String, String) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut ticks = (now.as_nanos() / 100) as u64 + UUID_EPOCH_OFFSET;
        if ticks <= self.last_ticks {
            ticks = self.last_ticks + 1;
        }
        self.last_ticks = ticks;
        let clock_seq = (step as u64) & 0x3fff;
        let node = self.rng.next_u64() & 0xffff_ffff_ffff;
        let id = format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            (ticks >> 28) & 0xffff_ffff,
            (ticks >> 12) & 0xffff,
            0x6000 | (ticks & 0x0fff),
            0x8000 | clock_seq,
            node
        );
        (id, iso_utc(now.as_secs(), now.subsec_micros()))
    }

    /// `get_next_version`: `f"{n:032}.{random.random():016}"`.
    pub fn version(&mut self, n: u64) -> String {
        // Python prints floats below 1e-4 in exponent form; such draws are re-rolled (the
        // fraction is opaque to every reader).
        let mut f = self.rng.next_f64();
        while f < 1e-4 {
            f = self.rng.next_f64();
        }
        format!("{n:032}.{f:016}")
    }
}

/// `datetime.isoformat()` of a UTC instant: `YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00`.
pub fn iso_utc(secs: u64, micros: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (rem / 3600, (rem / 60) % 60, rem % 60);
    if micros == 0 {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}+00:00")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{micros:06}+00:00")
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A task id in LangGraph's 8-4-4-4-12 layout. LangGraph hashes (checkpoint id, namespace,
/// step, node, trigger) with xxh3-128 and readers treat the id as opaque; dfck derives it
/// from SHA-1 of the same inputs, so it is deterministic and has the same shape.
pub fn task_id(checkpoint_id: &str, step: i64, node: &str) -> String {
    let mut h = sha1_smol::Sha1::new();
    h.update(checkpoint_id.as_bytes());
    h.update(b"\0\0");
    h.update(step.to_string().as_bytes());
    h.update(b"\0__pregel_pull\0");
    h.update(node.as_bytes());
    let b = h.digest().bytes();
    let hx = hex::encode(&b[..16]);
    format!(
        "{}-{}-{}-{}-{}",
        &hx[0..8],
        &hx[8..12],
        &hx[12..16],
        &hx[16..20],
        &hx[20..32]
    )
}

/// The task path of an ordinary (pull) task: `~__pregel_pull, <node>`.
pub fn pull_task_path(node: &str) -> String {
    format!("~__pregel_pull, {node}")
}

/// A channel value as a checkpoint stores it.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    /// Python `None` (trigger channels such as `branch:to:<node>`).
    Nil,
    /// A string (inline in Postgres JSONB).
    Str(String),
    /// An integer (inline in Postgres JSONB).
    Int(i64),
    /// A bool (inline in Postgres JSONB).
    Bool(bool),
    /// Any other value, already msgpack-encoded (a Postgres blob).
    Encoded(Vec<u8>),
    /// A `_DeltaSnapshot`: the complete ext 7 encoding (a Postgres blob plus the inline `true`
    /// marker).
    Snapshot(Vec<u8>),
}

impl Stored {
    /// A `_DeltaSnapshot` around an already encoded value.
    pub fn snapshot_of(encoded: &[u8]) -> Stored {
        let mut out = Vec::with_capacity(encoded.len() + 6);
        write_value(
            &mut out,
            &Value::Ext(Box::new(dfck_core::codec::Ext::lazy(
                EXT_DELTA_SNAPSHOT,
                bytes::Bytes::copy_from_slice(encoded),
            ))),
        );
        Stored::Snapshot(out)
    }

    /// Appends the msgpack encoding.
    pub fn write_msgpack(&self, out: &mut Vec<u8>) {
        match self {
            Stored::Nil => out.push(0xc0),
            Stored::Str(s) => write_value(out, &Value::Str(s.clone())),
            Stored::Int(i) => write_value(out, &Value::Int(*i)),
            Stored::Bool(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
            Stored::Encoded(b) | Stored::Snapshot(b) => out.extend_from_slice(b),
        }
    }

    /// `serde.dumps_typed`: `("null", b"")` for None, else `("msgpack", bytes)`.
    pub fn dumps_typed(&self) -> (&'static str, Vec<u8>) {
        match self {
            Stored::Nil => ("null", Vec::new()),
            other => {
                let mut out = Vec::new();
                other.write_msgpack(&mut out);
                ("msgpack", out)
            }
        }
    }

    /// The inline JSONB value in Postgres, `None` when the value goes to a blob.
    pub fn pg_inline(&self) -> Option<Json> {
        match self {
            Stored::Nil => Some(Json::Null),
            Stored::Str(s) => Some(Json::String(s.clone())),
            Stored::Int(i) => Some(json!(i)),
            Stored::Bool(b) => Some(Json::Bool(*b)),
            Stored::Snapshot(_) => Some(Json::Bool(true)),
            Stored::Encoded(_) => None,
        }
    }

    /// The Postgres blob bytes, for values that are not inline primitives.
    pub fn pg_blob(&self) -> Option<&[u8]> {
        match self {
            Stored::Encoded(b) | Stored::Snapshot(b) => Some(b),
            _ => None,
        }
    }
}

pub use crate::savers::WriteRecord;

/// One checkpoint as LangGraph's `create_checkpoint` + `get_checkpoint_metadata` produce it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointRecord {
    /// UUIDv6 id.
    pub id: String,
    /// Parent checkpoint id.
    pub parent: Option<String>,
    /// ISO timestamp.
    pub ts: String,
    /// `metadata.source`.
    pub source: &'static str,
    /// `metadata.step`.
    pub step: i64,
    /// `channel_values`, in channel-table order.
    pub channel_values: Vec<(String, Stored)>,
    /// `channel_versions`, in insertion order.
    pub channel_versions: Vec<(String, String)>,
    /// `versions_seen`, in insertion order.
    pub versions_seen: Vec<(String, Vec<(String, String)>)>,
    /// `updated_channels`, sorted.
    pub updated_channels: Vec<String>,
    /// Channels whose version moved since the previous checkpoint (`new_versions` of `put`).
    pub new_versions: Vec<(String, String)>,
    /// Non-zero `counters_since_delta_snapshot` pairs.
    pub counters: Vec<(String, (u64, u64))>,
    /// Extra metadata copied from the config (e.g. DeerFlow's mode marker).
    pub extra_metadata: Vec<(String, String)>,
}

fn s(x: &str) -> Value {
    Value::Str(x.to_owned())
}

fn write_str_map(out: &mut Vec<u8>, entries: &[(String, String)]) {
    write_map_header(out, entries.len());
    for (k, v) in entries {
        write_value(out, &s(k));
        write_value(out, &s(v));
    }
}

fn write_header(out: &mut Vec<u8>, n: usize, fix: u8, m16: u8, m32: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= u16::MAX as usize {
        out.push(m16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(m32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// Appends an array header of `n` items.
pub fn write_array_header(out: &mut Vec<u8>, n: usize) {
    write_header(out, n, 0x90, 0xdc, 0xdd);
}

/// Appends a map header of `n` entries.
pub fn write_map_header(out: &mut Vec<u8>, n: usize) {
    write_header(out, n, 0x80, 0xde, 0xdf);
}

/// Encodes a list of values (e.g. messages) as one msgpack array.
pub fn encode_list(items: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.len() * 320 + 5);
    write_array_header(&mut out, items.len());
    for it in items {
        write_value(&mut out, it);
    }
    out
}

impl CheckpointRecord {
    /// The checkpoint dict as msgpack, keys `v, ts, id, channel_values, channel_versions,
    /// versions_seen, updated_channels` (SQLite's `checkpoint` column); with
    /// `with_values = false`, `channel_values` is left out (InMemorySaver's storage entry).
    pub fn encode(&self, with_values: bool) -> Vec<u8> {
        let values_len: usize = self
            .channel_values
            .iter()
            .map(|(k, v)| {
                k.len()
                    + match v {
                        Stored::Encoded(b) | Stored::Snapshot(b) => b.len(),
                        _ => 8,
                    }
            })
            .sum();
        let mut out = Vec::with_capacity(512 + if with_values { values_len } else { 0 });
        write_map_header(&mut out, if with_values { 7 } else { 6 });
        write_value(&mut out, &s("v"));
        write_value(&mut out, &Value::Int(CHECKPOINT_V));
        write_value(&mut out, &s("ts"));
        write_value(&mut out, &s(&self.ts));
        write_value(&mut out, &s("id"));
        write_value(&mut out, &s(&self.id));
        if with_values {
            write_value(&mut out, &s("channel_values"));
            write_map_header(&mut out, self.channel_values.len());
            for (k, v) in &self.channel_values {
                write_value(&mut out, &s(k));
                v.write_msgpack(&mut out);
            }
        }
        write_value(&mut out, &s("channel_versions"));
        write_str_map(&mut out, &self.channel_versions);
        write_value(&mut out, &s("versions_seen"));
        write_map_header(&mut out, self.versions_seen.len());
        for (node, seen) in &self.versions_seen {
            write_value(&mut out, &s(node));
            write_str_map(&mut out, seen);
        }
        write_value(&mut out, &s("updated_channels"));
        write_array_header(&mut out, self.updated_channels.len());
        for c in &self.updated_channels {
            write_value(&mut out, &s(c));
        }
        out
    }

    /// The metadata as an ordered JSON object: `source, step, parents,
    /// [counters_since_delta_snapshot], <config metadata>`.
    pub fn metadata_json(&self) -> Map<String, Json> {
        let mut m = Map::new();
        m.insert("source".into(), json!(self.source));
        m.insert("step".into(), json!(self.step));
        m.insert("parents".into(), Json::Object(Map::new()));
        if !self.counters.is_empty() {
            let mut c = Map::new();
            for (ch, (u, st)) in &self.counters {
                c.insert(ch.clone(), json!([u, st]));
            }
            m.insert("counters_since_delta_snapshot".into(), Json::Object(c));
        }
        for (k, v) in &self.extra_metadata {
            m.insert(k.clone(), json!(v));
        }
        m
    }

    /// The metadata as SQLite stores it: Python `json.dumps` text (`", "` / `": "`).
    pub fn metadata_text(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(160);
        py_json(&Json::Object(self.metadata_json()), &mut out);
        out
    }

    /// The metadata as InMemorySaver stores it: `serde.dumps_typed(metadata)` (msgpack).
    pub fn metadata_msgpack(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(160);
        write_value(
            &mut out,
            &dfck_core::codec::from_json(&Json::Object(self.metadata_json())),
        );
        out
    }

    /// Postgres: the JSONB `checkpoint` (primitives inline, snapshots as `true`, other
    /// values left to blobs).
    pub fn pg_checkpoint(&self) -> Json {
        let mut cv = Map::new();
        for (k, v) in &self.channel_values {
            if let Some(j) = v.pg_inline() {
                cv.insert(k.clone(), j);
            }
        }
        let strmap = |e: &[(String, String)]| {
            Json::Object(
                e.iter()
                    .map(|(k, v)| (k.clone(), Json::String(v.clone())))
                    .collect(),
            )
        };
        let mut seen = Map::new();
        for (node, e) in &self.versions_seen {
            seen.insert(node.clone(), strmap(e));
        }
        json!({
            "v": CHECKPOINT_V,
            "ts": self.ts,
            "id": self.id,
            "channel_values": cv,
            "channel_versions": strmap(&self.channel_versions),
            "versions_seen": seen,
            "updated_channels": self.updated_channels,
        })
    }

    /// Postgres: the `checkpoint_blobs` rows `put` writes — `(channel, version, blob)` for
    /// every channel in `new_versions` whose value is not an inline primitive.
    pub fn pg_blobs(&self) -> Vec<(&str, &str, &[u8])> {
        let mut out = Vec::new();
        for (ch, ver) in &self.new_versions {
            if let Some((_, v)) = self.channel_values.iter().find(|(k, _)| k == ch) {
                if let Some(b) = v.pg_blob() {
                    out.push((ch.as_str(), ver.as_str(), b));
                }
            }
        }
        out
    }
}

/// Python `json.dumps(v, ensure_ascii=False)` with default separators.
pub fn py_json(v: &Json, out: &mut Vec<u8>) {
    // Serializing a JSON value cannot fail.
    let text = pyjson::dumps(v, PyJsonFormatter::spaced(false)).unwrap_or_default();
    out.extend_from_slice(text.as_bytes());
}

/// How a channel persists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// Stored whole whenever it has a value (LastValue, BinaryOperatorAggregate, triggers).
    Plain,
    /// `DeltaChannel(reducer, snapshot_frequency)`.
    Delta {
        /// Snapshot every this many updates.
        snapshot_frequency: u64,
    },
}

/// The saver-visible state of one thread/namespace between checkpoints.
#[derive(Debug, Clone)]
pub struct GraphState {
    /// Channel table, in the graph's order (the order `channel_values` keys follow).
    pub channels: Vec<(String, ChannelKind)>,
    versions: Vec<(String, String)>,
    max_version: u64,
    seen: Vec<(String, Vec<(String, String)>)>,
    counters: Vec<(String, (u64, u64))>,
    step: i64,
    parent: Option<String>,
    extra_metadata: Vec<(String, String)>,
    clock: Clock,
}

impl GraphState {
    /// A fresh thread (first checkpoint at step -1) with `channels` and config metadata.
    pub fn new(
        channels: Vec<(String, ChannelKind)>,
        extra_metadata: Vec<(String, String)>,
        clock: Clock,
    ) -> Self {
        let counters = channels
            .iter()
            .filter(|(_, k)| matches!(k, ChannelKind::Delta { .. }))
            .map(|(c, _)| (c.clone(), (0, 0)))
            .collect();
        GraphState {
            channels,
            versions: Vec::new(),
            max_version: 0,
            seen: vec![("__input__".to_owned(), Vec::new())],
            counters,
            step: -2,
            parent: None,
            extra_metadata,
            clock,
        }
    }

    /// The current version of a channel.
    pub fn version(&self, channel: &str) -> Option<&str> {
        self.versions
            .iter()
            .find(|(k, _)| k == channel)
            .map(|(_, v)| v.as_str())
    }

    /// Records that `node` read `channel` at its current version (`versions_seen`).
    pub fn mark_seen(&mut self, node: &str, channel: &str) {
        let Some(v) = self.version(channel).map(str::to_owned) else {
            return;
        };
        let entry = match self.seen.iter().position(|(n, _)| n == node) {
            Some(i) => &mut self.seen[i].1,
            None => {
                self.seen.push((node.to_owned(), Vec::new()));
                let last = self.seen.len() - 1;
                &mut self.seen[last].1
            }
        };
        match entry.iter_mut().find(|(c, _)| c == channel) {
            Some(e) => e.1 = v,
            None => entry.push((channel.to_owned(), v)),
        }
    }

    /// Whether a delta channel must snapshot at the next checkpoint, given the channels
    /// that superstep updates (cadence rule of docs/storage-format.md#delta-channel-storage).
    pub fn snapshot_due(&self, channel: &str, updated: &[&str]) -> bool {
        let Some((_, ChannelKind::Delta { snapshot_frequency })) =
            self.channels.iter().find(|(c, _)| c == channel)
        else {
            return false;
        };
        let (u, st) = self
            .counters
            .iter()
            .find(|(c, _)| c == channel)
            .map(|(_, p)| *p)
            .unwrap_or((0, 0));
        let u = u + u64::from(updated.contains(&channel));
        u >= *snapshot_frequency || st + 1 >= DELTA_MAX_SUPERSTEPS
    }

    /// Saves one superstep checkpoint: gives every channel of `bump` one new version, bumps
    /// delta counters (reset for channels stored as a snapshot), and builds the record.
    /// `values` must hold every channel with a value, in any order (sorted here into the
    /// channel-table order).
    pub fn save(
        &mut self,
        source: &'static str,
        updated: &[&str],
        bump: &[&str],
        mut values: Vec<(String, Stored)>,
    ) -> CheckpointRecord {
        self.step += 1;
        let mut new_versions = Vec::new();
        if !bump.is_empty() {
            self.max_version += 1;
            let v = self.clock.version(self.max_version);
            for ch in bump {
                match self.versions.iter_mut().find(|(k, _)| k == ch) {
                    Some(e) => e.1 = v.clone(),
                    None => self.versions.push(((*ch).to_owned(), v.clone())),
                }
                new_versions.push(((*ch).to_owned(), v.clone()));
            }
        }
        for (ch, (u, st)) in self.counters.iter_mut() {
            let snap = values
                .iter()
                .any(|(k, v)| k == ch && matches!(v, Stored::Snapshot(_)));
            if snap {
                *u = 0;
                *st = 0;
            } else {
                *st += 1;
                if updated.contains(&ch.as_str()) {
                    *u += 1;
                }
            }
        }
        let order = |k: &str| {
            self.channels
                .iter()
                .position(|(c, _)| c == k)
                .unwrap_or(usize::MAX)
        };
        values.sort_by_key(|(k, _)| order(k));
        let mut updated_channels: Vec<String> = updated.iter().map(|c| (*c).to_owned()).collect();
        updated_channels.sort();
        let (id, ts) = self.clock.checkpoint_id(self.step);
        CheckpointRecord {
            id: id.clone(),
            parent: self.parent.replace(id),
            ts,
            source,
            step: self.step,
            channel_values: values,
            channel_versions: self.versions.clone(),
            versions_seen: self.seen.clone(),
            updated_channels,
            new_versions,
            counters: self
                .counters
                .iter()
                .filter(|(_, p)| *p != (0, 0))
                .cloned()
                .collect(),
            extra_metadata: self.extra_metadata.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_versions_timestamps() {
        let mut c = Clock::new(Rng::seeded(7));
        let (a, ts) = c.checkpoint_id(-1);
        let (b, _) = c.checkpoint_id(0);
        assert!(a < b);
        assert_eq!(&a[14..15], "6");
        assert_eq!(&a[19..23], "bfff");
        assert_eq!(&b[19..23], "8000");
        assert!(ts.ends_with("+00:00"));
        let v = c.version(2);
        assert!(v.starts_with("00000000000000000000000000000002.0."));
        assert!(v.len() >= 32 + 1 + 16);
        assert_eq!(iso_utc(0, 0), "1970-01-01T00:00:00+00:00");
        assert_eq!(
            iso_utc(1_796_215_708, 103_272),
            "2026-12-02T12:48:28.103272+00:00"
        );
        assert_eq!(iso_utc(951_782_400, 5), "2000-02-29T00:00:00.000005+00:00");
        let t = task_id(&a, -1, "__start__");
        assert_eq!(t.len(), 36);
        assert_eq!(t, task_id(&a, -1, "__start__"));
    }

    #[test]
    fn python_json_and_snapshot_bytes() {
        let mut out = Vec::new();
        py_json(
            &json!({"source": "input", "step": -1, "parents": {}}),
            &mut out,
        );
        assert_eq!(out, br#"{"source": "input", "step": -1, "parents": {}}"#);
        assert_eq!(
            Stored::snapshot_of(&[0x90]),
            Stored::Snapshot(vec![0xd4, 7, 0x90])
        );
    }
}
