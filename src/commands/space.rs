//! Where the bytes go: the order and cut of `dfck inspect`'s thread table (`--sort`,
//! `--top`), and the per-channel bytes of `--channels` (stored values and pending writes).
//! SQLite keeps each checkpoint's values inside it, so `--channels` reads every checkpoint
//! of the threads shown (without decoding the values); PostgreSQL sums them in SQL.
//! See docs/space.md.

use dfck_core::codec;
use dfck_core::error::Error;
use dfck_core::progress::Progress;
use dfck_core::store::{CheckpointBody, Store};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// How the thread table is ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    /// By thread id.
    Name,
    /// Largest first.
    Bytes,
    /// Most checkpoints first.
    Checkpoints,
    /// Least recently active first (by the newest checkpoint's `ts`).
    Age,
}

impl SortKey {
    /// The key's name, as `--sort` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Name => "name",
            SortKey::Bytes => "bytes",
            SortKey::Checkpoints => "checkpoints",
            SortKey::Age => "age",
        }
    }
}

/// The store's bytes per LangGraph table (`table_bytes` of `dfck inspect`): together they
/// are the summary's `bytes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TableBytes {
    /// Checkpoint rows: the checkpoint and its metadata.
    pub checkpoints: u64,
    /// Pending-write values.
    pub writes: u64,
    /// Blob values (PostgreSQL only).
    pub blobs: Option<u64>,
}

/// How `dfck inspect` lists the threads of the summary.
#[derive(Debug, Clone, Copy)]
pub struct SummaryOptions {
    /// Order.
    pub sort: SortKey,
    /// Keep the first N.
    pub top: Option<u64>,
    /// Add per-channel bytes (reads every checkpoint of the listed threads on SQLite).
    pub channels: bool,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        SummaryOptions {
            sort: SortKey::Name,
            top: None,
            channels: false,
        }
    }
}

/// What a thread is ordered by.
#[derive(Debug, Clone, Copy)]
pub struct SortFields<'a> {
    /// Thread id (ties).
    pub name: &'a str,
    /// Bytes.
    pub bytes: u64,
    /// Checkpoints.
    pub checkpoints: u64,
    /// The newest checkpoint's `ts`.
    pub last_activity: Option<&'a str>,
}

/// Orders `items` by `key` (ties by name): bytes and checkpoints largest first, age least
/// recently active first (items without a readable `ts` last).
pub fn sort_by<T>(items: &mut [T], key: SortKey, fields: impl Fn(&T) -> SortFields<'_>) {
    let order = |a: &T, b: &T| {
        let (a, b) = (fields(a), fields(b));
        let name = a.name.cmp(b.name);
        match key {
            SortKey::Name => name,
            SortKey::Bytes => b.bytes.cmp(&a.bytes).then(name),
            SortKey::Checkpoints => b.checkpoints.cmp(&a.checkpoints).then(name),
            SortKey::Age => match (a.last_activity, b.last_activity) {
                (Some(x), Some(y)) => x.cmp(y).then(name),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => name,
            },
        }
    };
    // Items in order already (threads by name, as a store scan gives them) stay as they
    // are without the sort's scratch copy of half of them.
    if !items.is_sorted_by(|a, b| order(a, b).is_le()) {
        items.sort_by(order);
    }
}

/// The bytes of one channel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ChannelBytes {
    /// Channel name (`(undecoded)`: checkpoints whose values could not be read).
    pub channel: String,
    /// Bytes of stored values: every checkpoint's copy on SQLite; every blob version and
    /// inline value on PostgreSQL.
    pub values_bytes: u64,
    /// Bytes of pending-write values.
    pub writes_bytes: u64,
    /// Both.
    pub bytes: u64,
}

/// The pseudo-channel of checkpoints whose channel values could not be read.
pub const UNDECODED: &str = "(undecoded)";

type Acc = BTreeMap<String, (u64, u64)>;

fn sorted(acc: Acc) -> Vec<ChannelBytes> {
    let mut v: Vec<ChannelBytes> = acc
        .into_iter()
        .map(|(channel, (values_bytes, writes_bytes))| ChannelBytes {
            channel,
            values_bytes,
            writes_bytes,
            bytes: values_bytes + writes_bytes,
        })
        .collect();
    v.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.channel.cmp(&b.channel))
    });
    v
}

/// A thread whose channels are summed.
#[derive(Debug, Clone, Copy)]
pub struct ThreadRef<'a> {
    /// Thread id.
    pub thread_id: &'a str,
    /// Its namespaces.
    pub namespaces: &'a [String],
    /// Its checkpoints (for progress).
    pub checkpoints: u64,
}

/// Each thread's channels, by thread id.
pub type PerThread = HashMap<String, Vec<ChannelBytes>>;

/// Per-channel bytes of each thread given (largest first), and the totals over them.
pub fn channel_bytes(
    store: &dyn Store,
    threads: &[ThreadRef<'_>],
    progress: &dyn Progress,
) -> Result<(PerThread, Vec<ChannelBytes>), Error> {
    let mut per: HashMap<String, Acc> = threads
        .iter()
        .map(|t| (t.thread_id.to_owned(), Acc::new()))
        .collect();
    store.scan_write_channels(&mut |t| {
        if let Some(acc) = per.get_mut(&t.thread_id) {
            acc.entry(t.channel).or_default().1 += t.writes_bytes;
        }
        Ok(())
    })?;
    let summed = store.scan_value_channels(&mut |t| {
        if let Some(acc) = per.get_mut(&t.thread_id) {
            acc.entry(t.channel).or_default().0 += t.values_bytes;
        }
        Ok(())
    })?;
    if !summed {
        progress.start(
            "reading checkpoints for channel bytes",
            Some(threads.iter().map(|t| t.checkpoints).sum()),
        );
        for t in threads {
            let Some(acc) = per.get_mut(t.thread_id) else {
                continue;
            };
            for ns in t.namespaces {
                store.scan_thread(t.thread_id, ns, &mut |row| {
                    progress.inc(1);
                    add_checkpoint(acc, &row.body);
                    Ok(())
                })?;
            }
        }
        progress.finish();
    }
    let mut total = Acc::new();
    let mut out = HashMap::new();
    for (thread, acc) in per {
        for (k, (v, w)) in &acc {
            let e = total.entry(k.clone()).or_default();
            e.0 += v;
            e.1 += w;
        }
        out.insert(thread, sorted(acc));
    }
    Ok((out, sorted(total)))
}

/// Adds one stored checkpoint's values, channel by channel.
fn add_checkpoint(acc: &mut Acc, body: &CheckpointBody) {
    let CheckpointBody::Serialized { type_tag, bytes } = body else {
        return;
    };
    let sizes = match type_tag.as_deref() {
        Some("msgpack") => codec::checkpoint_channel_sizes(bytes).ok(),
        // An encrypted checkpoint counts by its plaintext (with the key; else undecoded).
        Some(t) if t.ends_with("+aes") => {
            codec::aes::open(type_tag.as_deref(), bytes.clone().into())
                .ok()
                .filter(|o| o.tag.as_deref() == Some("msgpack"))
                .and_then(|o| codec::checkpoint_channel_sizes(&o.bytes).ok())
        }
        _ => None,
    };
    match sizes {
        Some(sizes) => {
            for (channel, n) in sizes {
                acc.entry(channel).or_default().0 += n;
            }
        }
        None => acc.entry(UNDECODED.to_owned()).or_default().0 += bytes.len() as u64,
    }
}
