//! The store summary from the facts of the rows its scan reads (SQLite: whole rows;
//! PostgreSQL: rows with their blobs' lengths and first bytes). A thread's mode, the bytes its
//! heads' states read, and its times come from the facts of its own rows, kept while its batch
//! is open; only the pending-write bytes of the checkpoints those states read are looked up
//! (where the scan did not read them), for the whole batch in one call. Gives what the point
//! reads give.

use super::{KEYS_PER_READ, ThreadAcc};
use dfck_core::error::StoreError;
use dfck_core::model::MessagesEncoding;
use dfck_core::model::facts::{CheckpointFacts, FactsWanted, checkpoint_ts, messages_encoding_of};
use dfck_core::store::{CheckpointKey, FactsRow, Store};
use std::collections::{HashMap, HashSet};

/// The largest body the scan reads (a thread with a larger one takes the point reads: a
/// giant thread's rows are not all read for the few its summary needs).
pub(super) const MAX_BODY: u64 = 64 << 10;

/// Adds one row's facts to its thread. The `ts` is read only where a summary may use it:
/// on the first and the last row of each namespace (rows come in id order), the last
/// known once the next row, or the end of the thread, is reached ([`settle`]).
pub(super) fn add_row(acc: &mut ThreadAcc, read: FactsRow, delta: bool, wait: u64) {
    let row = &read.row;
    let first_in_ns = acc
        .rows
        .last()
        .is_none_or(|f| f.key.checkpoint_ns != row.checkpoint_ns);
    if first_in_ns {
        settle(acc);
    }
    let ts = if first_in_ns {
        checkpoint_ts(row)
    } else {
        None
    };
    // How it stores `messages` when its metadata is not delta: a `mixed` candidate once the
    // thread is known to be delta. The full rows before its first delta row wait (up to
    // `wait` bytes of them, UNDECIDED_BYTES by default; then they are decided at once): a
    // full thread decodes none.
    let undecided = !delta && !acc.any_delta && !acc.eager;
    let want = FactsWanted {
        encoding: !delta && !undecided,
        head: false,
        writes: false,
    };
    let mut facts = CheckpointFacts::of_row(&read, want);
    facts.ts = ts;
    acc.rows.push(facts);
    let row = read.row;
    // The row is kept, not copied, where it is still needed: while it may be its
    // namespace's last (a first row is not: its `ts` is read), and while it waits.
    let waiting = undecided.then(|| acc.rows.len() - 1);
    acc.last_row = None;
    match (waiting, first_in_ns) {
        (Some(i), true) => {
            acc.undecided_bytes += row.read_bytes();
            acc.undecided.push((i, row));
        }
        (Some(i), false) => {
            acc.undecided_bytes += row.read_bytes();
            acc.undecided.push((i, row.clone()));
            acc.last_row = Some(row);
        }
        (None, true) => {}
        (None, false) => acc.last_row = Some(row),
    }
    if acc.any_delta || acc.undecided_bytes > wait {
        acc.eager |= !acc.any_delta;
        decide(acc);
    }
}

/// The bytes of full rows a thread keeps before it is known to be delta.
pub(super) const UNDECIDED_BYTES: u64 = 1 << 20;

/// Reads how each waiting full row stores `messages`.
fn decide(acc: &mut ThreadAcc) {
    acc.undecided_bytes = 0;
    for (i, row) in std::mem::take(&mut acc.undecided) {
        if let Some(f) = acc.rows.get_mut(i) {
            f.messages = messages_encoding_of(&row);
        }
    }
}

/// The thread is over: a full thread's waiting rows need no decoding.
pub(super) fn end(acc: &mut ThreadAcc) {
    settle(acc);
    acc.undecided = Vec::new();
    acc.undecided_bytes = 0;
}

/// Reads the `ts` of the thread's last row, when it is the last of its namespace and not
/// its first: at a new namespace and at the end of the thread.
pub(super) fn settle(acc: &mut ThreadAcc) {
    if let (Some(row), Some(f)) = (acc.last_row.take(), acc.rows.last_mut()) {
        f.ts = checkpoint_ts(&row);
    }
}

/// Per thread of the batch: whether it is `mixed`-plain, the bytes rebuilding its heads
/// reads, its summary head's `ts`, and its first and last activity.
#[allow(clippy::type_complexity)]
pub(super) fn finish(
    store: &dyn Store,
    accs: &[ThreadAcc],
    summary_heads: &[(String, String)],
) -> Result<
    (
        Vec<bool>,
        Vec<u64>,
        Vec<Option<String>>,
        Vec<[Option<String>; 2]>,
    ),
    StoreError,
> {
    let n = accs.len();
    let (mut plain, mut needed) = (vec![false; n], vec![0u64; n]);
    let (mut head_ts, mut activity) = (vec![None; n], vec![[None, None]; n]);
    let mut confirm: Vec<Vec<CheckpointKey>> = vec![Vec::new(); n];
    let with_writes = store.scan_reads_write_bytes();
    // The checkpoints each thread's walks read, for their write bytes (unless the scan
    // read those).
    let mut walked: Vec<(usize, CheckpointKey)> = Vec::new();
    for (t, acc) in accs.iter().enumerate() {
        let at = At::new(&acc.rows);
        // Facts not read whole (PostgreSQL's blobs by their first bytes) are confirmed.
        if acc.any_delta {
            for f in acc.rows.iter() {
                if f.messages == Some(MessagesEncoding::Plain) {
                    if f.whole {
                        plain[t] = true;
                    } else {
                        confirm[t].push(f.key.clone());
                    }
                }
            }
        }
        let (hns, hid) = &summary_heads[t];
        for (ns, head) in &acc.heads {
            let mut seen = Seen::new(acc.rows.len());
            let mut next = Some(head.as_str());
            while let Some(id) = next.take() {
                let Some(f) = at.get(ns, id).filter(|_| seen.insert(id)) else {
                    break;
                };
                // The head's blobs count for every channel, the rest's for `messages` only.
                let is_head = id == head;
                let blobs = if is_head {
                    f.blob_bytes
                } else {
                    f.messages_blob_bytes
                };
                needed[t] += f.bytes + blobs;
                if with_writes {
                    needed[t] += f.write_bytes;
                } else {
                    walked.push((t, f.key.clone()));
                }
                if is_head && ns == hns && id == hid {
                    head_ts[t].clone_from(&f.ts);
                }
                if acc.any_delta && f.messages_absent {
                    next = f.parent_checkpoint_id.as_deref();
                }
            }
        }
        for (j, slot) in [&acc.first, &acc.last].into_iter().enumerate() {
            activity[t][j] = match slot {
                Some((_, _, Some(ts))) => Some(ts.clone()),
                Some((ns, id, None)) if (ns, id) == (hns, hid) => head_ts[t].clone(),
                Some((ns, id, None)) => at.get(ns, id).and_then(|f| f.ts.clone()),
                None => None,
            };
        }
    }
    for chunk in walked.chunks(KEYS_PER_READ) {
        let keys: Vec<CheckpointKey> = chunk.iter().map(|(_, k)| k.clone()).collect();
        for ((t, _), bytes) in chunk.iter().zip(store.write_bytes_at(&keys)?) {
            needed[*t] += bytes;
        }
    }
    super::confirm_plain(store, confirm, &mut plain)?;
    Ok((plain, needed, head_ts, activity))
}

/// Threads of at most this many rows are searched, not hashed: most threads are short.
const FEW_ROWS: usize = 16;

/// A thread's facts by (namespace, id).
enum At<'a> {
    Few(&'a [CheckpointFacts]),
    Many(HashMap<(&'a str, &'a str), &'a CheckpointFacts>),
}

impl<'a> At<'a> {
    fn new(rows: &'a [CheckpointFacts]) -> Self {
        if rows.len() <= FEW_ROWS {
            return At::Few(rows);
        }
        At::Many(
            rows.iter()
                .map(|f| {
                    let k = &f.key;
                    ((k.checkpoint_ns.as_str(), k.checkpoint_id.as_str()), f)
                })
                .collect(),
        )
    }

    /// The facts at (`ns`, `id`); of rows with the same key, the last (as a map collects).
    fn get(&self, ns: &str, id: &str) -> Option<&'a CheckpointFacts> {
        match self {
            At::Few(rows) => rows
                .iter()
                .rev()
                .find(|f| f.key.checkpoint_id == id && f.key.checkpoint_ns == ns),
            At::Many(map) => map.get(&(ns, id)).copied(),
        }
    }
}

/// The ids a walk has been to.
enum Seen<'a> {
    Few(Vec<&'a str>),
    Many(HashSet<&'a str>),
}

impl<'a> Seen<'a> {
    fn new(rows: usize) -> Self {
        match rows <= FEW_ROWS {
            true => Seen::Few(Vec::new()),
            false => Seen::Many(HashSet::new()),
        }
    }

    /// Whether `id` is new (then it is kept).
    fn insert(&mut self, id: &'a str) -> bool {
        match self {
            Seen::Few(ids) if ids.contains(&id) => false,
            Seen::Few(ids) => {
                ids.push(id);
                true
            }
            Seen::Many(ids) => ids.insert(id),
        }
    }
}
