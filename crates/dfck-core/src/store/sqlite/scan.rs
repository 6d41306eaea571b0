//! The store summary's scan on SQLite ([`crate::store::Store::scan_checkpoints_whole`]): one
//! statement over `checkpoints` in key order and, beside it in the same read, one over
//! `writes` in the same order, merged here. Each row comes with its pending-write bytes, and
//! a thread's first row with its write totals: no point read per checkpoint and no totals
//! query per batch. The merge reads every write, so the scan also gives the store's write
//! totals (no pass of their own over `writes`). A row whose keys are not UTF-8 text, and
//! every row of a store the merge cannot compare by bytes (a declared collation, UTF-16, key
//! columns not of TEXT affinity), takes its write bytes from a point read, as
//! [`crate::store::Store::write_bytes_at`] reads them, and its thread's totals from
//! [`crate::store::Store::write_totals_of`].

use super::rows::{UNDECODABLE, checkpoint_row, idx_col, len_col, serialized_len};
use super::{SqliteStore, q};
use crate::error::StoreError;
use crate::store::{CheckpointMetaRow, FactsRow, WholeScan};
use rusqlite::Rows;
use rusqlite::types::ValueRef;
use std::cmp::Ordering;

const WHAT: &str = "scanning checkpoints";

/// Every write in key order: its keys, `idx`, the bytes [`super::rows::write_row`] reads of
/// its value (`-1`: a number, read as undecodable) and `length(value)` as the totals count it.
const WRITES_SCAN: &str = "SELECT thread_id, checkpoint_ns, checkpoint_id, idx, \
     CASE typeof(value) WHEN 'blob' THEN length(value) \
     WHEN 'text' THEN length(CAST(value AS BLOB)) WHEN 'null' THEN 0 ELSE -1 END, \
     length(value) FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id";

/// A key column as UTF-8 text, else `None`.
fn text_key<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<&'r [u8]>> {
    Ok(match r.get_ref(i)? {
        ValueRef::Text(b) if std::str::from_utf8(b).is_ok() => Some(b),
        _ => None,
    })
}

/// A (namespace, checkpoint id) as bytes.
type Key = (Vec<u8>, Vec<u8>);

/// One write as the merge reads it.
struct WriteKey {
    /// Its thread's place against a text id: numbers and NULL sort before text, blobs after.
    thread: Result<Vec<u8>, Ordering>,
    /// (namespace, checkpoint id) when both are UTF-8 text.
    key: Option<Key>,
    bytes: u64,
    length: u64,
}

impl WriteKey {
    fn empty() -> Self {
        WriteKey {
            thread: Err(Ordering::Less),
            key: None,
            bytes: 0,
            length: 0,
        }
    }

    /// Reads row `r` into `self`, reusing its buffers (a write row costs no allocation).
    fn read_into(&mut self, r: &rusqlite::Row<'_>) -> rusqlite::Result<()> {
        let refill = |buf: &mut Vec<u8>, b: &[u8]| {
            buf.clear();
            buf.extend_from_slice(b);
        };
        match (r.get_ref(0)?, &mut self.thread) {
            (ValueRef::Text(b), Ok(t)) => refill(t, b),
            (ValueRef::Text(b), slot) => *slot = Ok(b.to_vec()),
            (ValueRef::Blob(_), slot) => *slot = Err(Ordering::Greater),
            (_, slot) => *slot = Err(Ordering::Less),
        }
        match ((text_key(r, 1)?, text_key(r, 2)?), &mut self.key) {
            ((Some(ns), Some(id)), Some((n, i))) => {
                refill(n, ns);
                refill(i, id);
            }
            ((Some(ns), Some(id)), slot) => *slot = Some((ns.to_vec(), id.to_vec())),
            (_, slot) => *slot = None,
        }
        self.bytes = match (idx_col(r, 3)?, r.get::<_, Option<i64>>(4)?) {
            (Some(_), Some(n)) if n >= 0 => n as u64,
            (Some(_), None) => 0,
            _ => UNDECODABLE.len() as u64,
        };
        self.length = len_col(r, 5)?;
        Ok(())
    }

    fn against(&self, thread: &[u8]) -> Ordering {
        match &self.thread {
            Ok(t) => t.as_slice().cmp(thread),
            Err(o) => *o,
        }
    }
}

/// The writes scan, read a thread at a time as the checkpoints scan reaches it.
struct WriteMerge<'s> {
    rows: Rows<'s>,
    /// The next write, read and not yet passed (`peeked`), its buffers kept between rows.
    slot: WriteKey,
    peeked: bool,
    done: bool,
    /// The thread whose writes are loaded: its write bytes per (namespace, id) in key order,
    /// the next one a row may match, and its totals until given.
    thread: Option<Vec<u8>>,
    keys: Vec<(Key, u64)>,
    next: usize,
    totals: Option<(u64, u64)>,
    /// A thread came out of byte order: the rest is left to the point reads.
    off: bool,
    /// (rows, `length(value)`) of every write read so far.
    seen: (u64, u64),
}

impl<'s> WriteMerge<'s> {
    fn new(rows: Rows<'s>) -> Self {
        WriteMerge {
            rows,
            slot: WriteKey::empty(),
            peeked: false,
            done: false,
            thread: None,
            keys: Vec::new(),
            next: 0,
            totals: None,
            off: false,
            seen: (0, 0),
        }
    }

    fn peek(&mut self) -> Result<Option<&WriteKey>, StoreError> {
        if !self.peeked && !self.done {
            match self.rows.next().map_err(q(WHAT))? {
                Some(r) => {
                    self.slot.read_into(r).map_err(q(WHAT))?;
                    self.peeked = true;
                    self.seen.0 += 1;
                    self.seen.1 += self.slot.length;
                }
                None => self.done = true,
            }
        }
        Ok(self.peeked.then_some(&self.slot))
    }

    /// Reads the writes of `thread`, passing those of the threads before it.
    fn load(&mut self, thread: &[u8]) -> Result<(), StoreError> {
        self.keys.clear();
        self.next = 0;
        let (mut writes, mut length) = (0u64, 0u64);
        while self.peek()?.is_some() {
            let w = &self.slot;
            match w.against(thread) {
                Ordering::Less => {}
                Ordering::Greater => break,
                Ordering::Equal => {
                    writes += 1;
                    length += w.length;
                    if let Some(key) = &w.key {
                        match self.keys.last_mut() {
                            Some(((n, i), bytes)) if key_cmp(n, i, &key.0, &key.1).is_eq() => {
                                *bytes += w.bytes
                            }
                            _ => self.keys.push((key.clone(), w.bytes)),
                        }
                    }
                }
            }
            self.peeked = false;
        }
        self.thread = Some(thread.to_vec());
        self.totals = Some((writes, length));
        Ok(())
    }

    /// The write bytes of checkpoint (`thread`, `ns`, `id`), and its thread's (writes, bytes)
    /// the first time one of its rows asks; `None` once the merge is off. Rows come in key
    /// order.
    #[allow(clippy::type_complexity)]
    fn at(
        &mut self,
        thread: &[u8],
        ns: &[u8],
        id: &[u8],
    ) -> Result<Option<(u64, Option<(u64, u64)>)>, StoreError> {
        if self.off {
            return Ok(None);
        }
        // The same thread as the last row's, most often: one comparison.
        if self.thread.as_deref() != Some(thread) {
            if self.thread.as_deref().is_some_and(|t| t > thread) {
                self.off = true;
                return Ok(None);
            }
            self.load(thread)?;
        }
        let bytes = loop {
            let Some(((n, i), bytes)) = self.keys.get(self.next) else {
                break 0;
            };
            match key_cmp(n, i, ns, id) {
                Ordering::Less => self.next += 1,
                Ordering::Equal => break *bytes,
                Ordering::Greater => break 0,
            }
        };
        Ok(Some((bytes, self.totals.take())))
    }

    /// Reads the writes left after the last checkpoint, and gives the store's (writes,
    /// bytes) as [`crate::store::Store::write_totals`] counts them; `None` once the merge is
    /// off (it stopped reading).
    fn finish(mut self) -> Result<Option<(u64, u64)>, StoreError> {
        if self.off {
            return Ok(None);
        }
        while self.peek()?.is_some() {
            self.peeked = false;
        }
        Ok(Some(self.seen))
    }
}

/// (namespace, id) against (`ns`, `id`), bytewise; the root namespace, empty, needs no
/// comparison.
fn key_cmp(n: &[u8], i: &[u8], ns: &[u8], id: &[u8]) -> Ordering {
    let by_ns = match (n.is_empty(), ns.is_empty()) {
        (true, true) => Ordering::Equal,
        _ => n.cmp(ns),
    };
    by_ns.then_with(|| i.cmp(id))
}

impl SqliteStore {
    /// Whether both tables hold and sort their keys as the merge compares them: UTF-8 text
    /// (the database's encoding), compared by bytes (no declared collation), each key
    /// column of TEXT affinity (a number-like id stays text).
    fn keys_merge(&self) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table' \
                   AND lower(name) IN ('checkpoints', 'writes') AND sql LIKE '%collate%') = 0 \
                 AND (SELECT encoding FROM pragma_encoding) = 'UTF-8' \
                 AND (SELECT count(*) FROM (\
                   SELECT type FROM pragma_table_info('checkpoints') WHERE name IN \
                     ('thread_id', 'checkpoint_ns', 'checkpoint_id') \
                   UNION ALL SELECT type FROM pragma_table_info('writes') WHERE name IN \
                     ('thread_id', 'checkpoint_ns', 'checkpoint_id')) \
                   WHERE upper(type) NOT LIKE '%INT%' AND (upper(type) LIKE '%CHAR%' \
                     OR upper(type) LIKE '%CLOB%' OR upper(type) LIKE '%TEXT%')) = 6",
                [],
                |r| r.get(0),
            )
            .map_err(q(WHAT))
    }

    /// [`crate::store::Store::scan_checkpoints_whole`]: one statement over the table, merged
    /// with one over the writes; a body over `max_body` is left unread (its length needs
    /// none of its overflow pages).
    pub(super) fn scan_whole(
        &self,
        max_body: u64,
        f: &mut dyn FnMut(CheckpointMetaRow, Option<FactsRow>) -> Result<(), StoreError>,
    ) -> Result<WholeScan, StoreError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, \
                 CASE WHEN coalesce(length(checkpoint), 0) <= ?1 THEN checkpoint END, metadata, \
                 coalesce(length(checkpoint), 0) + coalesce(length(metadata), 0), \
                 coalesce(length(checkpoint), 0) <= ?1 \
                 FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id",
            )
            .map_err(q(WHAT))?;
        let mut writes_st = match self.keys_merge()? {
            true => Some(self.conn.prepare(WRITES_SCAN).map_err(q(WHAT))?),
            false => None,
        };
        let mut merge = match writes_st.as_mut() {
            Some(st) => Some(WriteMerge::new(st.query([]).map_err(q(WHAT))?)),
            None => None,
        };
        let max = i64::try_from(max_body).unwrap_or(i64::MAX);
        let mut rows = st.query([max]).map_err(q(WHAT))?;
        while let Some(r) = rows.next().map_err(q(WHAT))? {
            let whole: bool = r.get(8).map_err(q(WHAT))?;
            let keys = (text_key(r, 0), text_key(r, 1), text_key(r, 2));
            let writes = match (whole, merge.as_mut(), keys) {
                (true, Some(m), (Ok(Some(t)), Ok(Some(n)), Ok(Some(i)))) => m.at(t, n, i)?,
                _ => None,
            };
            let row = checkpoint_row(r).map_err(q(WHAT))?;
            // A row the merge cannot answer: its write bytes as the point reads find them.
            let writes = match (whole, writes) {
                (true, None) => {
                    let key = crate::store::CheckpointKey {
                        thread_id: row.thread_id.clone(),
                        checkpoint_ns: row.checkpoint_ns.clone(),
                        checkpoint_id: row.checkpoint_id.clone(),
                    };
                    let bytes = self.write_bytes_each(std::slice::from_ref(&key))?;
                    Some((bytes.first().copied().unwrap_or(0), None))
                }
                (_, writes) => writes,
            };
            // Nothing copied where the row goes with it (its keys and metadata are the row's).
            let bytes = len_col(r, 7).map_err(q(WHAT))?;
            let meta = match writes {
                Some(_) => CheckpointMetaRow {
                    thread_id: String::new(),
                    checkpoint_ns: String::new(),
                    checkpoint_id: String::new(),
                    bytes,
                    metadata: Vec::new(),
                    ts: None,
                },
                None => CheckpointMetaRow {
                    thread_id: row.thread_id.clone(),
                    checkpoint_ns: row.checkpoint_ns.clone(),
                    checkpoint_id: row.checkpoint_id.clone(),
                    bytes,
                    metadata: row.metadata.clone(),
                    ts: None,
                },
            };
            let facts = writes.map(|(write_bytes, thread_writes)| FactsRow {
                row,
                write_bytes,
                blob_lengths: None,
                whole: true,
                thread_writes,
                thread_blobs: None,
            });
            f(meta, facts)?;
        }
        let write_totals = match merge {
            Some(m) => m.finish()?,
            None => None,
        };
        Ok(WholeScan::Read { write_totals })
    }

    /// [`crate::store::Store::write_bytes_at`]: the lengths of the values
    /// [`super::rows::write_row`] reads (an unreadable `idx` makes the value undecodable),
    /// none copied.
    pub(super) fn write_bytes_each(
        &self,
        keys: &[crate::store::CheckpointKey],
    ) -> Result<Vec<u64>, StoreError> {
        let what = "reading pending writes";
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT idx, value FROM writes \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3",
            )
            .map_err(q(what))?;
        keys.iter()
            .map(|k| {
                let mut rows = st
                    .query(rusqlite::params![
                        k.thread_id,
                        k.checkpoint_ns,
                        k.checkpoint_id
                    ])
                    .map_err(q(what))?;
                let mut sum = 0u64;
                while let Some(r) = rows.next().map_err(q(what))? {
                    let len = match idx_col(r, 0).map_err(q(what))? {
                        Some(_) => serialized_len(r, 1).map_err(q(what))?,
                        None => UNDECODABLE.len(),
                    };
                    sum += len as u64;
                }
                Ok(sum)
            })
            .collect()
    }
}
