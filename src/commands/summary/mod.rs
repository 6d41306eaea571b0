//! The store summary (`dfck inspect` without a thread): one scan of the checkpoints in key
//! order, and the point reads each thread still needs (its heads and the checkpoints their
//! state reads, its first activity, the full checkpoints of a delta thread) made for a
//! batch of threads at a time, so that they cost a round trip per batch, not per thread.
//! Where the scan reads whole rows cheaply (SQLite), those facts come from the rows
//! themselves (`whole`).

mod pipeline;
mod whole;

use crate::commands::inspect::{Counts, HeadInfo, StoreSummary, SummaryOptions, ThreadSummary};
use crate::commands::space::{SortKey, ThreadRef};
use dfck_core::error::{Error, StoreError};
use dfck_core::model::facts::{
    CheckpointFacts, FactsWanted, checkpoint_ts, messages_encoding_of, metadata_facts,
};
use dfck_core::model::{MessagesEncoding, thread_mode};
use dfck_core::progress::Progress;
use dfck_core::store::{
    CheckpointKey, CheckpointMetaRow, CheckpointRow, FactsRow, Store, WholeScan, WriteTotals,
};
use std::collections::{HashMap, HashSet};

/// Threads finished together.
const BATCH_THREADS: usize = 256;
/// Checkpoints read per call.
const KEYS_PER_READ: usize = 256;

type HeadEntry = (String, String, Option<i64>, Option<String>);

/// (ns, id, `ts` when the scan read it) of a checkpoint.
type Activity = (String, String, Option<String>);

/// One thread as the scan saw it.
struct ThreadAcc {
    thread_id: String,
    namespaces: Vec<String>,
    checkpoints: u64,
    bytes: u64,
    any_delta: bool,
    /// Full-by-metadata checkpoints (ns, id): candidates for `mixed`.
    full_ids: Vec<(String, String)>,
    /// (ns, id, step, source) of the greatest id in the root namespace.
    root_head: Option<HeadEntry>,
    /// The same over the other namespaces.
    any_head: Option<HeadEntry>,
    /// (ns, id) of the least and the greatest id over every namespace.
    first: Option<Activity>,
    last: Option<Activity>,
    /// (ns, greatest id) of every namespace, in scan order.
    heads: Vec<(String, String)>,
    /// The facts of every row, in scan order, when the scan read rows whole.
    rows: Vec<CheckpointFacts>,
    /// Whether every row's facts are in `rows`.
    whole: bool,
    /// Full rows before any delta one, their `messages` encoding not yet read (index in
    /// `rows`, the row), their bytes, and whether later ones are decided at once
    /// ([`whole::add_row`]).
    undecided: Vec<(usize, CheckpointRow)>,
    undecided_bytes: u64,
    eager: bool,
    /// The last row, while it may be its namespace's last ([`whole::settle`]).
    last_row: Option<CheckpointRow>,
    /// Rows handed over by the scan, not yet counted in ([`pipeline`]).
    pending: Vec<pipeline::Pending>,
    /// (writes, bytes) of the thread, when the scan read them.
    writes: Option<(u64, u64)>,
    /// (blobs, bytes) of the thread, when the scan read them (PostgreSQL).
    blobs: Option<(u64, u64)>,
}

impl ThreadAcc {
    fn new(thread_id: String) -> Self {
        ThreadAcc {
            thread_id,
            namespaces: Vec::new(),
            checkpoints: 0,
            bytes: 0,
            any_delta: false,
            full_ids: Vec::new(),
            root_head: None,
            any_head: None,
            first: None,
            last: None,
            heads: Vec::new(),
            rows: Vec::new(),
            whole: true,
            undecided: Vec::new(),
            undecided_bytes: 0,
            eager: false,
            last_row: None,
            pending: Vec::new(),
            writes: None,
            blobs: None,
        }
    }

    /// Counts one row in (its keys and metadata from its facts `read`, when the scan read
    /// them: [`CheckpointMetaRow::keys_of`]); whether its metadata says delta.
    fn add(&mut self, row: &CheckpointMetaRow, read: Option<&FactsRow>) -> bool {
        let (_, ns, id, metadata) = row.keys_of(read);
        let meta = metadata_facts(metadata);
        if !self.namespaces.iter().any(|n| n == ns) {
            self.namespaces.push(ns.to_owned());
        }
        self.checkpoints += 1;
        self.bytes += row.bytes;
        if meta.delta {
            self.any_delta = true;
        } else {
            self.full_ids.push((ns.to_owned(), id.to_owned()));
        }
        match self.heads.last_mut() {
            Some((n, head)) if n == ns => {
                if id > head.as_str() {
                    id.clone_into(head);
                }
            }
            _ => self.heads.push((ns.to_owned(), id.to_owned())),
        }
        // Updated in place (`clone_into` reuses the buffers): rows come in id order, so the
        // latest changes on almost every row.
        let set = |slot: &mut Option<Activity>| match slot {
            Some((n, i, ts)) => {
                ns.clone_into(n);
                id.clone_into(i);
                ts.clone_from(&row.ts);
            }
            None => *slot = Some((ns.to_owned(), id.to_owned(), row.ts.clone())),
        };
        if self.first.as_ref().is_none_or(|f| id < f.1.as_str()) {
            set(&mut self.first);
        }
        if self.last.as_ref().is_none_or(|l| id > l.1.as_str()) {
            set(&mut self.last);
        }
        // The head is the greatest id (byte order) of the root namespace, else of any.
        let slot = if ns.is_empty() {
            &mut self.root_head
        } else {
            &mut self.any_head
        };
        if slot.as_ref().is_none_or(|h| h.1.as_str() < id) {
            *slot = Some((ns.to_owned(), id.to_owned(), meta.step, meta.source));
        }
        meta.delta
    }

    fn key(&self, ns: &str, id: &str) -> CheckpointKey {
        CheckpointKey {
            thread_id: self.thread_id.clone(),
            checkpoint_ns: ns.to_owned(),
            checkpoint_id: id.to_owned(),
        }
    }
}

type Totals = HashMap<String, (u64, u64)>;

/// Reads `keys` in calls of at most [`KEYS_PER_READ`], each row to `f` with its position.
fn read_keys(
    store: &dyn Store,
    keys: &[CheckpointKey],
    f: &mut dyn FnMut(usize, CheckpointRow) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    for (c, chunk) in keys.chunks(KEYS_PER_READ).enumerate() {
        let at: HashMap<&CheckpointKey, usize> = chunk
            .iter()
            .enumerate()
            .map(|(i, k)| (k, c * KEYS_PER_READ + i))
            .collect();
        store.checkpoints_at(chunk, &mut |row| {
            let key = CheckpointKey {
                thread_id: row.thread_id.clone(),
                checkpoint_ns: row.checkpoint_ns.clone(),
                checkpoint_id: row.checkpoint_id.clone(),
            };
            match at.get(&key) {
                Some(&i) => f(i, row),
                None => Ok(()),
            }
        })?;
    }
    Ok(())
}

/// `mixed` candidates: does any full-by-metadata checkpoint of a delta thread store
/// `messages` as a plain value? Undecodable checkpoints are verify's business; they do not
/// make a thread mixed. Facts settle most candidates; a `Plain` from facts not read whole
/// is confirmed by decoding the row, and each thread stops at its first confirmed one.
fn full_plain(store: &dyn Store, accs: &[ThreadAcc]) -> Result<Vec<bool>, StoreError> {
    let mut plain = vec![false; accs.len()];
    let mut keys = Vec::new();
    let mut owner: HashMap<CheckpointKey, usize> = HashMap::new();
    for (t, acc) in accs.iter().enumerate() {
        if acc.any_delta {
            for (ns, id) in &acc.full_ids {
                let key = acc.key(ns, id);
                owner.insert(key.clone(), t);
                keys.push(key);
            }
        }
    }
    // Candidates to decode, per thread in id order.
    let mut confirm: Vec<Vec<CheckpointKey>> = vec![Vec::new(); accs.len()];
    for chunk in keys.chunks(KEYS_PER_READ) {
        let want = FactsWanted {
            encoding: true,
            head: false,
            writes: false,
        };
        store.checkpoint_facts_at(chunk, want, &mut |read| {
            let facts = CheckpointFacts::of(read, want);
            let t = owner[&facts.key];
            if facts.messages == Some(MessagesEncoding::Plain) {
                if facts.whole {
                    plain[t] = true;
                } else {
                    confirm[t].push(facts.key);
                }
            }
            Ok(())
        })?;
    }
    confirm_plain(store, confirm, &mut plain)?;
    Ok(plain)
}

/// Decodes each thread's `confirm` candidates (facts read from the blobs' first bytes said
/// `Plain`) in id order until one is: then the thread is `plain`.
fn confirm_plain(
    store: &dyn Store,
    confirm: Vec<Vec<CheckpointKey>>,
    plain: &mut [bool],
) -> Result<(), StoreError> {
    for (t, mut candidates) in confirm.into_iter().enumerate() {
        candidates.sort();
        for key in candidates {
            if plain[t] {
                break;
            }
            store.checkpoints_at(std::slice::from_ref(&key), &mut |row| {
                plain[t] |= messages_encoding_of(&row) == Some(MessagesEncoding::Plain);
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// One walk from a namespace head back over the checkpoints its state reads.
struct Walk {
    thread: usize,
    ns: String,
    head: String,
    next: Option<String>,
    seen: HashSet<String>,
}

/// Per thread: the bytes rebuilding the head of every namespace reads (the checkpoint, its
/// pending writes, on PostgreSQL its blobs: every channel's at the head, `messages` further
/// back), and the `ts` of each thread's summary head.
fn head_needs(
    store: &dyn Store,
    accs: &[ThreadAcc],
    summary_heads: &[(String, String)],
) -> Result<(Vec<u64>, Vec<Option<String>>), StoreError> {
    let mut needed = vec![0u64; accs.len()];
    let mut head_ts = vec![None; accs.len()];
    let mut walks: Vec<Walk> = accs
        .iter()
        .enumerate()
        .flat_map(|(t, acc)| {
            acc.heads.iter().map(move |(ns, id)| Walk {
                thread: t,
                ns: ns.clone(),
                head: id.clone(),
                next: Some(id.clone()),
                seen: HashSet::new(),
            })
        })
        .collect();
    let head_keys: HashSet<CheckpointKey> = walks
        .iter()
        .map(|w| accs[w.thread].key(&w.ns, &w.head))
        .collect();
    loop {
        let mut at: HashMap<CheckpointKey, Vec<usize>> = HashMap::new();
        let mut keys = Vec::new();
        for (w, walk) in walks.iter_mut().enumerate() {
            let Some(id) = walk.next.take() else { continue };
            if walk.seen.insert(id.clone()) {
                let key = accs[walk.thread].key(&walk.ns, &id);
                let of = at.entry(key.clone()).or_default();
                if of.is_empty() {
                    keys.push(key);
                }
                of.push(w);
            }
        }
        if keys.is_empty() {
            return Ok((needed, head_ts));
        }
        // The heads' blobs count for every channel, the rest's for `messages` only.
        let (heads, rest): (Vec<CheckpointKey>, Vec<CheckpointKey>) =
            keys.into_iter().partition(|k| head_keys.contains(k));
        let chunks = heads
            .chunks(KEYS_PER_READ)
            .map(|c| (c, true))
            .chain(rest.chunks(KEYS_PER_READ).map(|c| (c, false)));
        for (chunk, head) in chunks {
            let want = FactsWanted {
                encoding: false,
                head,
                writes: true,
            };
            store.checkpoint_facts_at(chunk, want, &mut |read| {
                let facts = CheckpointFacts::of(read, want);
                for &w in at.get(&facts.key).map(Vec::as_slice).unwrap_or_default() {
                    let walk = &mut walks[w];
                    let t = walk.thread;
                    let is_head = facts.key.checkpoint_id == walk.head;
                    debug_assert_eq!(is_head, head_keys.contains(&facts.key));
                    let blobs = if is_head {
                        facts.blob_bytes
                    } else {
                        facts.messages_blob_bytes
                    };
                    needed[t] += facts.write_bytes + facts.bytes + blobs;
                    let (hns, hid) = &summary_heads[t];
                    if is_head && *hns == walk.ns && *hid == facts.key.checkpoint_id {
                        head_ts[t].clone_from(&facts.ts);
                    }
                    if accs[t].any_delta && facts.messages_absent {
                        walk.next.clone_from(&facts.parent_checkpoint_id);
                    }
                }
                Ok(())
            })?;
        }
    }
}

/// First and last activity of each thread: the scan's `ts` (PostgreSQL), the head's,
/// else a read.
fn read_activity(
    store: &dyn Store,
    accs: &[ThreadAcc],
    summary_heads: &[(String, String)],
    head_ts: &[Option<String>],
) -> Result<Vec<[Option<String>; 2]>, StoreError> {
    let mut keys = Vec::new();
    let mut slots = Vec::new();
    let mut activity: Vec<[Option<String>; 2]> = vec![[None, None]; accs.len()];
    for (t, acc) in accs.iter().enumerate() {
        for (j, at) in [&acc.first, &acc.last].into_iter().enumerate() {
            match at {
                Some((_, _, Some(ts))) => activity[t][j] = Some(ts.clone()),
                Some((ns, id, None)) if (ns, id) == (&summary_heads[t].0, &summary_heads[t].1) => {
                    activity[t][j].clone_from(&head_ts[t]);
                }
                Some((ns, id, None)) => {
                    keys.push(acc.key(ns, id));
                    slots.push((t, j));
                }
                None => {}
            }
        }
    }
    read_keys(store, &keys, &mut |i, row| {
        let (t, j) = slots[i];
        activity[t][j] = checkpoint_ts(&row);
        Ok(())
    })?;
    Ok(activity)
}

/// Finishes a batch of threads with a few reads for all of them: the threads whose rows
/// the scan read whole from their facts, the others by point reads; in batch order. Adds
/// the batch's write and blob bytes to `held`.
fn finish_batch(
    store: &dyn Store,
    accs: Vec<ThreadAcc>,
    held: &mut u64,
) -> Result<Vec<ThreadSummary>, Error> {
    let (mut w, mut b) = batch_totals(store, &accs)?;
    *held += w
        .values()
        .chain(b.values())
        .map(|(_, bytes)| bytes)
        .sum::<u64>();
    let (writes, blobs) = (&mut w, &mut b);
    if accs.iter().all(|a| a.whole) || accs.iter().all(|a| !a.whole) {
        let whole = accs.first().is_some_and(|a| a.whole);
        return finish_group(store, accs, writes, blobs, whole);
    }
    let (w, p): (Vec<_>, Vec<_>) = accs.into_iter().enumerate().partition(|(_, a)| a.whole);
    let (wi, w): (Vec<usize>, Vec<ThreadAcc>) = w.into_iter().unzip();
    let (pi, p): (Vec<usize>, Vec<ThreadAcc>) = p.into_iter().unzip();
    let mut done: Vec<(usize, ThreadSummary)> = wi
        .into_iter()
        .zip(finish_group(store, w, &mut *writes, &mut *blobs, true)?)
        .chain(
            pi.into_iter()
                .zip(finish_group(store, p, writes, blobs, false)?),
        )
        .collect();
    done.sort_by_key(|(i, _)| *i);
    Ok(done.into_iter().map(|(_, t)| t).collect())
}

/// [`finish_batch`] for threads all read whole (`whole`) or all not.
fn finish_group(
    store: &dyn Store,
    accs: Vec<ThreadAcc>,
    writes: &mut Totals,
    blobs: &mut Totals,
    whole: bool,
) -> Result<Vec<ThreadSummary>, Error> {
    let summary_heads: Vec<(String, String)> = accs
        .iter()
        .map(|a| {
            let (ns, id, ..) = a
                .root_head
                .as_ref()
                .or(a.any_head.as_ref())
                .cloned()
                .unwrap_or_default();
            (ns, id)
        })
        .collect();
    let (plain, needed, mut head_ts, mut activity) = if whole {
        whole::finish(store, &accs, &summary_heads)?
    } else {
        let plain = full_plain(store, &accs)?;
        let (needed, head_ts) = head_needs(store, &accs, &summary_heads)?;
        let activity = read_activity(store, &accs, &summary_heads, &head_ts)?;
        (plain, needed, head_ts, activity)
    };
    let mut out = Vec::with_capacity(accs.len());
    for (t, acc) in accs.into_iter().enumerate() {
        let (hns, hid, step, source) = acc.root_head.or(acc.any_head).unwrap_or_default();
        let (wn, wb) = writes.remove(&acc.thread_id).unwrap_or((0, 0));
        let (_, bb) = blobs.remove(&acc.thread_id).unwrap_or((0, 0));
        let mut namespaces = acc.namespaces;
        namespaces.sort();
        let bytes = acc.bytes + wb + bb;
        let [first_activity, last_activity] = std::mem::take(&mut activity[t]);
        out.push(ThreadSummary {
            thread_id: acc.thread_id,
            namespaces,
            checkpoints: acc.checkpoints,
            writes: wn,
            bytes,
            history_bytes: bytes.saturating_sub(needed[t]),
            mode: thread_mode(acc.any_delta, plain[t]),
            head: HeadInfo {
                checkpoint_id: hid,
                checkpoint_ns: hns,
                step,
                source,
                ts: head_ts[t].take(),
            },
            first_activity,
            last_activity,
            channels: None,
            deerflow: None,
        });
    }
    Ok(out)
}

/// Orders the threads by `key` (ties by thread id).
fn sort_threads(threads: &mut [ThreadSummary], key: SortKey) {
    crate::commands::space::sort_by(threads, key, |t| crate::commands::space::SortFields {
        name: &t.thread_id,
        bytes: t.bytes,
        checkpoints: t.checkpoints,
        last_activity: t.last_activity.as_deref(),
    });
}

/// Summarizes the whole store, streaming thread by thread; threads by thread id.
pub fn summarize(store: &dyn Store, progress: &dyn Progress) -> Result<StoreSummary, Error> {
    summarize_with(store, &SummaryOptions::default(), progress)
}

/// The write and blob totals of a batch's threads.
fn batch_totals(store: &dyn Store, accs: &[ThreadAcc]) -> Result<(Totals, Totals), StoreError> {
    let writes = totals_of(accs, |a| a.writes, &mut |ids, f| {
        store.write_totals_of(ids, f)
    })?;
    let blobs = totals_of(accs, |a| a.blobs, &mut |ids, f| {
        store.blob_totals_of(ids, f)
    })?;
    Ok((writes, blobs))
}

/// The totals the scan gave threads of `accs` (`given`), and `ask`'s of the others. Through
/// the map: two threads of a batch may read as one id (a text and a blob id), given to the first.
#[allow(clippy::type_complexity)]
fn totals_of(
    accs: &[ThreadAcc],
    given: fn(&ThreadAcc) -> Option<(u64, u64)>,
    ask: &mut dyn FnMut(
        &[String],
        &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>,
) -> Result<Totals, StoreError> {
    let mut totals = Totals::new();
    totals.extend(
        accs.iter()
            .filter_map(|a| Some((a.thread_id.clone(), given(a)?))),
    );
    let unread: Vec<String> = accs
        .iter()
        .filter(|a| given(a).is_none())
        .map(|a| a.thread_id.clone())
        .collect();
    if !unread.is_empty() {
        ask(&unread, &mut |t| {
            totals.insert(t.thread_id, (t.writes, t.bytes));
            Ok(())
        })?;
    }
    Ok(totals)
}

/// Summarizes the whole store: threads in `opts.sort` order, cut to `opts.top`, with
/// per-channel bytes when `opts.channels`.
pub fn summarize_with(
    store: &dyn Store,
    opts: &SummaryOptions,
    progress: &dyn Progress,
) -> Result<StoreSummary, Error> {
    let mut threads = Vec::new();
    let mut s = summarize_each(store, opts, progress, &mut |batch| {
        threads.extend(batch);
        Ok(())
    })?;
    // The scan gives threads in id order: the sort is only for ids it orders otherwise.
    if !threads.is_sorted_by(|a, b| a.thread_id <= b.thread_id) {
        threads.sort_by(|a, b| a.thread_id.cmp(&b.thread_id));
    }
    sort_threads(&mut threads, opts.sort);
    if let Some(n) = opts.top {
        threads.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    if opts.channels {
        let refs: Vec<ThreadRef<'_>> = threads
            .iter()
            .map(|t| ThreadRef {
                thread_id: &t.thread_id,
                namespaces: &t.namespaces,
                checkpoints: t.checkpoints,
            })
            .collect();
        let (mut per, totals) = crate::commands::space::channel_bytes(store, &refs, progress)?;
        for t in &mut threads {
            t.channels = Some(per.remove(&t.thread_id).unwrap_or_default());
        }
        s.channel_totals = Some(totals);
    }
    s.threads = threads;
    Ok(s)
}

/// Summarizes the whole store, each finished batch of threads to `each` in scan order
/// (thread id order, where the store's scan orders ids bytewise: [`Store::scans_bytewise`])
/// as soon as it is done, so that memory does not grow with the number of threads. The
/// summary returned has every total and no threads; `opts.sort`, `opts.top` and
/// `opts.channels` are left to the caller.
pub fn summarize_each(
    store: &dyn Store,
    opts: &SummaryOptions,
    progress: &dyn Progress,
    each: &mut dyn FnMut(Vec<ThreadSummary>) -> Result<(), Error>,
) -> Result<StoreSummary, Error> {
    // Read first where the scan will not count them: an error comes before any thread.
    let early_totals = match store.scan_counts_write_totals() {
        true => None,
        false => Some(store.write_totals()?),
    };
    let (total_blobs, blob_bytes) = store.blob_totals()?;
    let (mut thread_count, mut checkpoints, mut thread_bytes) = (0u64, 0u64, 0u64);
    // The write and blob bytes of the threads with checkpoints.
    let mut held_bytes = 0u64;
    let mut emit = |done: Vec<ThreadSummary>| -> Result<(), Error> {
        thread_count += done.len() as u64;
        for t in &done {
            checkpoints += t.checkpoints;
            thread_bytes += t.bytes;
        }
        each(done)
    };
    let mut batch: Vec<ThreadAcc> = Vec::new();
    let mut failure: Option<Error> = None;
    progress.start("scanning checkpoints", None);
    let failpoints = dfck_core::failpoint::Failpoints::from_env("inspect");
    let wait = failpoints.summary_wait_bytes(whole::UNDECIDED_BYTES);
    let pending_limit = failpoints.summary_pending_bytes(pipeline::PENDING_BYTES);
    let mut finish =
        |accs: Vec<ThreadAcc>| finish_batch(store, accs, &mut held_bytes).and_then(&mut emit);
    // The scan hands each batch over at a thread boundary once full; a worker counts its
    // rows in while the scan reads on ([`pipeline`]).
    let scanned_totals = std::thread::scope(|scope| -> Result<Option<(u64, u64)>, Error> {
        let mut counting = pipeline::Counting::start(scope, wait);
        let mut pending_bytes = 0u64;
        // Each row in; `row`: the whole row when the scan read it.
        let mut push = |meta: CheckpointMetaRow, row: Option<FactsRow>, whole: bool| {
            progress.inc(1);
            let thread_id = meta.keys_of(row.as_ref()).0;
            if batch.last().is_none_or(|a| a.thread_id != thread_id) {
                if batch.len() == BATCH_THREADS {
                    pending_bytes = 0;
                    let done = counting
                        .hand_over(std::mem::take(&mut batch))
                        .and_then(|ready| ready.map_or(Ok(()), &mut finish));
                    if let Err(e) = done {
                        failure = Some(e);
                        return Err(StoreError::Query {
                            what: "summarizing".into(),
                            reason: "aborted".into(),
                        });
                    }
                }
                let mut acc = ThreadAcc::new(thread_id.to_owned());
                acc.whole = whole;
                batch.push(acc);
            }
            pending_bytes += pipeline::weight(&meta, row.as_ref());
            if let Some(acc) = batch.last_mut() {
                acc.pending.push((meta, row));
            }
            if pending_bytes > pending_limit {
                pending_bytes = 0;
                batch
                    .iter_mut()
                    .for_each(|acc| pipeline::count_pending(acc, wait));
            }
            Ok(())
        };
        let scan = store
            .scan_checkpoints_whole(
                failpoints.scan_body_bytes(whole::MAX_BODY),
                &mut |meta, row| push(meta, row, true),
            )
            .and_then(|scan| match scan {
                WholeScan::Unsupported => store
                    .scan_checkpoint_meta(&mut |meta| push(meta, None, false))
                    .map(|()| None),
                WholeScan::Read { write_totals } => Ok(write_totals),
            })
            .map_err(|e| failure.take().unwrap_or(Error::Store(e)))?;
        if let Some(done) = counting.hand_over(std::mem::take(&mut batch))? {
            finish(done)?;
        }
        counting.finish()?.into_iter().try_for_each(&mut finish)?;
        Ok(scan)
    })?;
    progress.finish();
    // Counted by the scan where it read every write (SQLite's merge), else a pass of their
    // own (SQLite when the merge could not compare the keys by bytes).
    let (total_writes, write_bytes) = match early_totals.or(scanned_totals) {
        Some(totals) => totals,
        None => store.write_totals()?,
    };
    // Writes and blobs of threads without checkpoints still occupy the store.
    let bytes = thread_bytes + (write_bytes + blob_bytes).saturating_sub(held_bytes);
    let space = Some(store.space()?);
    let info = store.info();
    let pg = info.backend == dfck_core::store::Backend::Postgres;
    Ok(StoreSummary {
        backend: info.backend,
        location: info.location.clone(),
        schema: info.schema.clone(),
        counts: Counts {
            threads: thread_count,
            checkpoints,
            writes: total_writes,
            blobs: pg.then_some(total_blobs),
        },
        bytes,
        table_bytes: crate::commands::space::TableBytes {
            checkpoints: bytes.saturating_sub(write_bytes + blob_bytes),
            writes: write_bytes,
            blobs: pg.then_some(blob_bytes),
        },
        config: None,
        space,
        sort: opts.sort,
        top: opts.top,
        channel_totals: None,
        savings: None,
        deerflow: None,
        threads: Vec::new(),
    })
}
