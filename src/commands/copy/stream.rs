//! Reading a thread from the source for a copy, and streaming a big one
//! (docs/copy.md#big-threads). A namespace is held whole while its stored bytes stay within
//! the write engine's budget ([`whole_thread_bytes`]); past it, a copy between stores of one
//! backend (rows kept as they are stored) streams the namespace instead: the plan counts its
//! rows and fingerprints their stored form, and the insert reads them again one checkpoint
//! at a time, so memory follows the largest checkpoint, not the namespace (its pending
//! writes are still read whole, as every write command reads them). A copy across
//! backends, or under `--encrypt-all`, holds the namespace whole whatever its size.

use super::convert::{LaidCheckpoint, LaidNs, NsRows, lay_checkpoint, sort_ns_writes, writes_for};
use super::digest::{ThreadDigest, raw_checkpoint, raw_writes};
use dfck_core::codec::aes::Protection;
use dfck_core::error::StoreError;
use dfck_core::store::{Backend, CheckpointRow, Store, WriteRow};
use dfck_core::write::Refusal;
use dfck_core::write::preamble::whole_thread_bytes;
use std::collections::HashSet;

/// A namespace too big to hold, copied row by row.
#[derive(Debug)]
pub struct NsStream {
    /// Namespace.
    pub ns: String,
    /// Checkpoint rows.
    pub checkpoints: usize,
    /// Pending writes.
    pub writes: usize,
    /// Bytes the rows take in the target's layout.
    pub bytes: u64,
}

/// One namespace of the source, held or to stream.
#[derive(Debug)]
pub enum NsSource {
    /// Read whole.
    Held(NsRows),
    /// Past the budget: counted and fingerprinted, read again at the insert.
    Streamed(NsStream),
}

impl NsSource {
    /// Checkpoint rows.
    pub fn checkpoints(&self) -> usize {
        match self {
            NsSource::Held(r) => r.checkpoints.len(),
            NsSource::Streamed(s) => s.checkpoints,
        }
    }

    /// Pending writes.
    pub fn writes(&self) -> usize {
        match self {
            NsSource::Held(r) => r.writes.len(),
            NsSource::Streamed(s) => s.writes,
        }
    }
}

/// A thread's namespaces and the fingerprints of its stored rows.
pub type Source = (Vec<NsSource>, ThreadDigest);

/// Every namespace of a thread (none when it does not exist), and, when a namespace streams,
/// the fingerprints of the thread's stored rows ([`super::digest::raw_digest`]; empty when
/// none does). `target` is the backend the rows go to. The inner `Err` is a row a streamed
/// namespace cannot lay out for the target.
pub fn read_source(
    store: &dyn Store,
    thread_id: &str,
    target: Backend,
) -> Result<Result<Source, Refusal>, StoreError> {
    let streamable = store.info().backend == target && !dfck_core::codec::aes::encrypt_all();
    let budget = whole_thread_bytes();
    let mut raw = ThreadDigest::default();
    let mut out = Vec::new();
    for ns in store.namespaces(thread_id)? {
        let mut held: Vec<CheckpointRow> = Vec::new();
        let mut stream: Option<Counter> = None;
        let mut total = 0u64;
        let mut failed = None;
        let mut count = |c: &mut Counter, row: CheckpointRow| {
            raw.checkpoints.insert(
                (ns.clone(), row.checkpoint_id.clone()),
                raw_checkpoint(&row),
            );
            c.count(row)
        };
        let scanned = store.scan_thread_values(thread_id, &ns, &mut |row| {
            total += row.read_bytes();
            let counted = match stream.as_mut() {
                Some(c) => count(c, row),
                None => {
                    held.push(row);
                    if !(streamable && total > budget) {
                        return Ok(());
                    }
                    let mut c = Counter::new(target);
                    let counted = held.drain(..).try_for_each(|r| count(&mut c, r));
                    stream = Some(c);
                    counted
                }
            };
            counted.map_err(|r| stopped(&mut failed, r))
        });
        if let Some(r) = failed {
            return Ok(Err(r));
        }
        scanned?;
        let mut writes = store.thread_writes(thread_id, &ns)?;
        sort_ns_writes(&mut writes);
        out.push(match stream {
            Some(c) => {
                raw.writes.insert(ns.clone(), raw_writes(&writes));
                NsSource::Streamed(NsStream {
                    ns,
                    checkpoints: c.checkpoints,
                    writes: writes.len(),
                    bytes: c.bytes + writes.iter().map(|w| w.value.len() as u64).sum::<u64>(),
                })
            }
            None => {
                held.sort_by(|a, b| a.checkpoint_id.cmp(&b.checkpoint_id));
                NsSource::Held(NsRows {
                    ns,
                    checkpoints: held,
                    writes,
                })
            }
        });
    }
    // A thread verified by its stored rows is verified by all of them.
    if out.iter().any(|n| matches!(n, NsSource::Streamed(_))) {
        for n in &out {
            if let NsSource::Held(rows) = n {
                for row in &rows.checkpoints {
                    let key = (rows.ns.clone(), row.checkpoint_id.clone());
                    raw.checkpoints.insert(key, raw_checkpoint(row));
                }
                raw.writes.insert(rows.ns.clone(), raw_writes(&rows.writes));
            }
        }
    }
    Ok(Ok((out, raw)))
}

/// Keeps the first refusal and stops the scan it came from.
fn stopped(failed: &mut Option<Refusal>, r: Refusal) -> StoreError {
    let reason = r.0.clone();
    failed.get_or_insert(r);
    StoreError::Query {
        what: "copying a thread".into(),
        reason,
    }
}

/// Lays a streamed namespace's checkpoints out one at a time, as [`super::convert::lay_out`]
/// does for a held one: one blob per (channel, version).
struct Counter {
    target: Backend,
    seen: HashSet<(String, String)>,
    checkpoints: usize,
    bytes: u64,
}

impl Counter {
    fn new(target: Backend) -> Self {
        Counter {
            target,
            seen: HashSet::new(),
            checkpoints: 0,
            bytes: 0,
        }
    }

    /// One checkpoint laid out, its bytes counted (a version's blob once: within one backend
    /// every checkpoint at a version reads the same blob, so the order does not matter).
    fn lay(&mut self, row: CheckpointRow) -> Result<LaidNs, Refusal> {
        // A streamed namespace stays in its backend: no PostgreSQL checkpoint is laid out
        // for SQLite, the one case that reads the fallback protection.
        let (checkpoint, blobs, _) = lay_checkpoint(row, self.target, Protection::Plain)?;
        let blobs: Vec<_> = blobs
            .into_iter()
            .filter(|b| self.seen.insert((b.channel.clone(), b.version.clone())))
            .collect();
        let laid = LaidNs {
            ns: String::new(),
            checkpoints: vec![checkpoint],
            blobs,
            writes: Vec::new(),
        };
        self.checkpoints += 1;
        self.bytes += laid.bytes();
        Ok(laid)
    }

    fn count(&mut self, row: CheckpointRow) -> Result<(), Refusal> {
        self.lay(row).map(drop)
    }
}

/// Copies a streamed namespace into the target, checkpoint by checkpoint in the order the
/// source reads them, then its writes: `insert` writes one laid-out batch of rows.
pub fn copy_streamed(
    source: &dyn Store,
    thread_id: &str,
    s: &NsStream,
    target: Backend,
    insert: &mut dyn FnMut(&LaidNs) -> Result<(), Refusal>,
) -> Result<(), Refusal> {
    let mut c = Counter::new(target);
    let mut failed = None;
    let scanned = source.scan_thread_values(thread_id, &s.ns, &mut |row| {
        c.lay(row)
            .and_then(|mut laid| {
                laid.ns = s.ns.clone();
                insert(&laid)
            })
            .map_err(|r| stopped(&mut failed, r))
    });
    if let Some(r) = failed {
        return Err(r);
    }
    scanned.map_err(|e| Refusal(e.to_string()))?;
    if c.checkpoints != s.checkpoints {
        return Err(Refusal(format!(
            "the source's namespace '{}' changed during the copy",
            s.ns
        )));
    }
    let mut writes: Vec<WriteRow> = source
        .thread_writes(thread_id, &s.ns)
        .map_err(|e| Refusal(e.to_string()))?;
    sort_ns_writes(&mut writes);
    insert(&LaidNs {
        ns: s.ns.clone(),
        checkpoints: Vec::<LaidCheckpoint>::new(),
        blobs: Vec::new(),
        writes: writes_for(writes, target)?,
    })
}
