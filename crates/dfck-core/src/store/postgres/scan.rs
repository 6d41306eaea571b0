//! A thread scan ([`crate::store::Store::scan_thread`]): one (thread, ns)'s checkpoints in
//! checkpoint-id order, each blob in full only where its version is new, read on this
//! connection or split over several (docs/storage-format.md, "Reading a thread").
//!
//! A split cuts the thread's checkpoint ids into chunks of about [`CHUNK_BYTES`] of blobs.
//! Chunk `i` is read by connection `i mod N`: this one for `i mod N = 0`, otherwise a helper
//! connection opened inside this transaction's exported snapshot, which reads its chunks
//! ahead (at most [`AHEAD_BYTES`] of rows) while the caller works through the earlier ones.
//! The caller sees the chunks in order, so the rows arrive exactly as one connection reads
//! them. A helper that cannot connect leaves its chunks to this connection.

use super::PostgresStore;
use super::read::{blob_at, get, nonneg, versions_of_c};
use crate::error::StoreError;
use crate::failpoint::Failpoints;
use crate::store::{BlobRow, CheckpointBody, CheckpointRow};
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// Threads with fewer blob bytes are read on one connection.
const SPLIT_MIN_BYTES: u64 = 32 << 20;
/// Blob bytes per chunk of a split scan, on average.
const CHUNK_BYTES: u64 = 16 << 20;
/// Chunks per connection at least, so that uneven chunks even out.
const CHUNKS_PER_JOB: u64 = 4;
/// Fewest checkpoints in a chunk.
const MIN_CHUNK_ROWS: u64 = 16;
/// Bytes of rows one helper connection reads ahead of the caller.
const AHEAD_BYTES: usize = 48 << 20;
/// Rows per cursor fetch (a checkpoint takes one per channel version).
const FETCH_ROWS: usize = 96;

const WHAT: &str = "reading a thread's checkpoints";

/// The scan of (`$1`, `$2`) in checkpoint-id order, limited to ids above the next parameter
/// when `after`, and to ids up to the one after that when `upto`: one row per entry of a
/// checkpoint's `channel_versions` (one row when it has none), in their order, the
/// checkpoint and metadata on the first only. Each row carries the blob at that version
/// (none when there is no blob row), in full when the version is new — the parent has
/// another or is not there — and else its first 16 bytes, enough to tell a snapshot from
/// a list; an encrypted blob (`<tag>+aes`) always in full, as its head says nothing. A
/// blob travels as a column of its own: no array is built around it.
fn scan_sql(after: bool, upto: bool) -> String {
    let mut range = String::new();
    let mut n = 2;
    if after {
        n += 1;
        range.push_str(&format!(" AND checkpoint_id > ${n}"));
    }
    if upto {
        n += 1;
        range.push_str(&format!(" AND checkpoint_id <= ${n}"));
    }
    format!(
        concat!(
            "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, \
             CASE WHEN cv.ord IS NULL OR cv.ord = 1 THEN c.checkpoint END, \
             CASE WHEN cv.ord IS NULL OR cv.ord = 1 THEN c.metadata::text END, \
             (pg_column_size(c.checkpoint) + pg_column_size(c.metadata))::int8, \
             bl.channel, bl.type, \
             CASE WHEN n.is_new OR strpos(bl.type, '+') > 0 THEN bl.blob \
                  ELSE substring(bl.blob FROM 1 FOR 16) END, \
             n.is_new \
             FROM (SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
                   checkpoint, metadata FROM checkpoints \
                   WHERE thread_id = $1 AND checkpoint_ns = $2{range} \
                   ORDER BY checkpoint_id OFFSET 0) c \
             LEFT JOIN LATERAL (SELECT p.checkpoint -> 'channel_versions' AS versions \
                   FROM checkpoints p WHERE p.thread_id = c.thread_id \
                   AND p.checkpoint_ns = c.checkpoint_ns \
                   AND p.checkpoint_id = c.parent_checkpoint_id OFFSET 0) p ON true \
             LEFT JOIN LATERAL ",
            versions_of_c!(),
            " WITH ORDINALITY cv(key, value, ord) ON true \
             LEFT JOIN LATERAL \
                (SELECT (p.versions ->> cv.key) IS DISTINCT FROM cv.value AS is_new) n ON true \
             LEFT JOIN LATERAL (",
            blob_at!(),
            ") bl ON true \
             ORDER BY c.checkpoint_id, cv.ord"
        ),
        range = range
    )
}

/// Builds [`CheckpointRow`]s from the rows of [`scan_sql`], a checkpoint's rows in a run.
struct Rows<'a> {
    pending: Option<CheckpointRow>,
    f: &'a mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
}

impl Rows<'_> {
    fn add(&mut self, r: &Row) -> Result<(), StoreError> {
        let id: String = get(r, 2, WHAT)?;
        if self.pending.as_ref().is_some_and(|p| p.checkpoint_id != id) {
            self.flush()?;
        }
        let row = match &mut self.pending {
            Some(row) => row,
            None => {
                let metadata: Option<String> = get(r, 5, WHAT)?;
                self.pending.insert(CheckpointRow {
                    thread_id: get(r, 0, WHAT)?,
                    checkpoint_ns: get(r, 1, WHAT)?,
                    checkpoint_id: id,
                    parent_checkpoint_id: get(r, 3, WHAT)?,
                    body: CheckpointBody::Postgres {
                        checkpoint: get(r, 4, WHAT)?,
                        blobs: Vec::new(),
                    },
                    metadata: metadata.unwrap_or_default().into_bytes(),
                    bytes: nonneg(get(r, 6, WHAT)?),
                })
            }
        };
        let Some(channel) = get::<Option<String>>(r, 7, WHAT)? else {
            return Ok(());
        };
        let blob: Option<Vec<u8>> = get(r, 9, WHAT)?;
        let is_new = get::<Option<bool>>(r, 10, WHAT)?.unwrap_or(true);
        if is_new {
            row.bytes += blob.as_ref().map_or(0, |b| b.len() as u64);
        }
        let type_tag: String = get(r, 8, WHAT)?;
        let complete = is_new || type_tag.contains('+');
        if let CheckpointBody::Postgres { blobs, .. } = &mut row.body {
            blobs.push(BlobRow {
                channel,
                type_tag,
                blob,
                complete,
            });
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        match self.pending.take() {
            Some(row) => (self.f)(row),
            None => Ok(()),
        }
    }
}

/// Checkpoints per chunk of a split scan over `jobs` connections, or `None` when one
/// connection reads the thread (one job, or too few blob bytes to be worth a split).
fn chunk_rows(blob_bytes: u64, checkpoints: u64, jobs: usize) -> Option<u64> {
    if jobs < 2 || blob_bytes < SPLIT_MIN_BYTES {
        return None;
    }
    let chunks = (blob_bytes / CHUNK_BYTES).max(CHUNKS_PER_JOB * jobs as u64);
    let rows = checkpoints.div_ceil(chunks).max(MIN_CHUNK_ROWS);
    (rows < checkpoints).then_some(rows)
}

/// The id range of chunk `i` given the chunks' last ids: (previous bound, this bound].
fn chunk_range(bounds: &[String], i: usize) -> (Option<&str>, Option<&str>) {
    (
        i.checked_sub(1)
            .and_then(|j| bounds.get(j))
            .map(String::as_str),
        bounds.get(i).map(String::as_str),
    )
}

/// Bytes a row holds in memory, roughly.
fn row_size(row: &CheckpointRow) -> usize {
    let blobs = match &row.body {
        CheckpointBody::Postgres { blobs, .. } => blobs
            .iter()
            .map(|b: &BlobRow| b.blob.as_ref().map_or(0, Vec::len) + 64)
            .sum(),
        CheckpointBody::Serialized { bytes, .. } => bytes.len(),
    };
    blobs + row.metadata.len() + 1024
}

/// What a helper connection hands the caller.
enum Msg {
    Row(CheckpointRow),
    /// The current chunk is complete.
    ChunkEnd,
    Failed(StoreError),
    /// The helper could not connect: its chunks are the caller's to read.
    Unavailable,
}

/// A queue from one helper to the caller, bounded in bytes (a single row larger than the
/// bound still passes, alone).
struct Ahead {
    budget: usize,
    state: Mutex<AheadState>,
    changed: Condvar,
}

#[derive(Default)]
struct AheadState {
    items: VecDeque<(Msg, usize)>,
    bytes: usize,
    /// The caller stopped reading.
    closed: bool,
    /// The helper stopped writing.
    done: bool,
}

impl Ahead {
    fn new(budget: usize) -> Self {
        Ahead {
            budget,
            state: Mutex::new(AheadState::default()),
            changed: Condvar::new(),
        }
    }

    /// Queues `msg`, waiting for room; `false` once the caller stopped reading.
    fn push(&self, msg: Msg) -> bool {
        let size = match &msg {
            Msg::Row(r) => row_size(r),
            _ => 0,
        };
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        while !s.closed && !s.items.is_empty() && s.bytes + size > self.budget {
            s = match self.changed.wait(s) {
                Ok(s) => s,
                Err(_) => return false,
            };
        }
        if s.closed {
            return false;
        }
        s.bytes += size;
        s.items.push_back((msg, size));
        self.changed.notify_all();
        true
    }

    /// The next message, waiting for one; `None` when the helper stopped without one.
    fn pop(&self) -> Option<Msg> {
        let mut s = self.state.lock().ok()?;
        loop {
            if let Some((msg, size)) = s.items.pop_front() {
                s.bytes -= size;
                self.changed.notify_all();
                return Some(msg);
            }
            if s.done {
                return None;
            }
            s = self.changed.wait(s).ok()?;
        }
    }

    fn set(&self, f: impl FnOnce(&mut AheadState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
        self.changed.notify_all();
    }
}

/// Marks the helper's side of a queue done when the helper ends, however it ends.
struct Done<'a>(&'a Ahead);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.set(|s| s.done = true);
    }
}

/// Where helpers connect and what they read.
struct Job<'a> {
    url: &'a str,
    schema: Option<&'a str>,
    snapshot: &'a str,
    thread_id: &'a str,
    ns: &'a str,
    bounds: &'a [String],
}

/// A helper connection's work: every chunk `i` with `i mod connections = k`, in order.
fn read_ahead(job: &Job, k: usize, connections: usize, q: &Ahead, fail: bool) {
    let _done = Done(q);
    let Ok(store) = PostgresStore::open_read_only_at(job.url, job.schema, job.snapshot) else {
        q.push(Msg::Unavailable);
        return;
    };
    for i in (k..=job.bounds.len()).step_by(connections) {
        let (after, upto) = chunk_range(job.bounds, i);
        let read = if fail {
            Err(StoreError::Query {
                what: format!("{WHAT} on a helper connection"),
                reason: "injected failure (scan-helper-fail failpoint)".into(),
            })
        } else {
            store.scan_range(job.thread_id, job.ns, after, upto, &mut |row| {
                if q.push(Msg::Row(row)) {
                    Ok(())
                } else {
                    Err(StoreError::Query {
                        what: WHAT.into(),
                        reason: "the reader stopped".into(),
                    })
                }
            })
        };
        let sent = match read {
            Ok(()) => q.push(Msg::ChunkEnd),
            Err(e) => {
                q.push(Msg::Failed(e));
                false
            }
        };
        if !sent {
            return;
        }
    }
}

impl PostgresStore {
    /// Every checkpoint row of (thread, ns) in checkpoint-id order, split over up to
    /// `scan_jobs` connections when the thread is large enough.
    pub(super) fn scan_thread_split(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let jobs = self.scan_jobs.get();
        if jobs > 1 {
            if let Some(bounds) = self.chunk_bounds(thread_id, ns, jobs)? {
                return self.scan_chunks(thread_id, ns, &bounds, jobs, f);
            }
        }
        self.scan_range(thread_id, ns, None, None, f)
    }

    /// The rows of (thread, ns) with ids in (`after`, `upto`], in id order.
    fn scan_range(
        &self,
        thread_id: &str,
        ns: &str,
        after: Option<&str>,
        upto: Option<&str>,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&thread_id, &ns];
        if let Some(a) = &after {
            params.push(a);
        }
        if let Some(u) = &upto {
            params.push(u);
        }
        let mut rows = Rows { pending: None, f };
        if after.is_none() && upto.is_none() {
            // Up to one FETCH's rows in one statement; a longer thread is read again.
            let sql = scan_sql(false, false);
            if let Some(short) = self.query_short(WHAT, &sql, &[thread_id, ns], FETCH_ROWS)? {
                short.iter().try_for_each(|r| rows.add(r))?;
                return rows.flush();
            }
        }
        self.cursor_ahead(
            WHAT,
            &scan_sql(after.is_some(), upto.is_some()),
            &params,
            FETCH_ROWS,
            &mut |r| rows.add(r),
        )?;
        rows.flush()
    }

    /// The last checkpoint id of every chunk but the last, or `None` to read the thread on
    /// one connection.
    fn chunk_bounds(
        &self,
        thread_id: &str,
        ns: &str,
        jobs: usize,
    ) -> Result<Option<Vec<String>>, StoreError> {
        let what = "sizing a thread scan";
        let rows = match Failpoints::from_env("verify").scan_chunk_rows() {
            Some(n) => Some(n.max(1)),
            None => {
                let r = self.query(
                    what,
                    "SELECT (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs \
                     WHERE thread_id = $1 AND checkpoint_ns = $2)::int8, \
                     (SELECT count(*) FROM checkpoints \
                     WHERE thread_id = $1 AND checkpoint_ns = $2)::int8",
                    &[&thread_id, &ns],
                )?;
                let size = |i: usize| {
                    r.first()
                        .and_then(|r| r.try_get::<_, i64>(i).ok())
                        .unwrap_or(0)
                        .max(0) as u64
                };
                chunk_rows(size(0), size(1), jobs)
            }
        };
        let Some(rows) = rows else {
            return Ok(None);
        };
        let bounds = self
            .query(
                what,
                "SELECT checkpoint_id FROM (SELECT checkpoint_id, \
                 row_number() OVER (ORDER BY checkpoint_id) AS n FROM checkpoints \
                 WHERE thread_id = $1 AND checkpoint_ns = $2) s \
                 WHERE n % $3::int8 = 0 ORDER BY checkpoint_id",
                &[&thread_id, &ns, &rows.to_string()],
            )?
            .iter()
            .map(|r| {
                r.try_get::<_, String>(0).map_err(|e| StoreError::Query {
                    what: what.into(),
                    reason: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((!bounds.is_empty()).then_some(bounds))
    }

    /// Reads the chunks of `bounds` over this connection and up to `jobs - 1` helpers.
    fn scan_chunks(
        &self,
        thread_id: &str,
        ns: &str,
        bounds: &[String],
        jobs: usize,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let snapshot = self.export_snapshot()?;
        let chunks = bounds.len() + 1;
        let helpers = (jobs - 1).min(chunks - 1);
        let connections = helpers + 1;
        let job = Job {
            url: &self.reconnect.0,
            schema: self.reconnect.1.as_deref(),
            snapshot: &snapshot,
            thread_id,
            ns,
            bounds,
        };
        let fail = Failpoints::from_env("verify").scan_helper_fail();
        let queues: Vec<Ahead> = (0..helpers).map(|_| Ahead::new(AHEAD_BYTES)).collect();
        std::thread::scope(|scope| {
            for (k, q) in queues.iter().enumerate() {
                let job = &job;
                scope.spawn(move || read_ahead(job, k + 1, connections, q, fail));
            }
            let mut gone = vec![false; helpers];
            let mut read = || {
                for i in 0..chunks {
                    let (after, upto) = chunk_range(bounds, i);
                    let k = i % connections;
                    if k == 0 || gone[k - 1] {
                        self.scan_range(thread_id, ns, after, upto, f)?;
                        continue;
                    }
                    loop {
                        match queues[k - 1].pop() {
                            Some(Msg::Row(row)) => f(row)?,
                            Some(Msg::ChunkEnd) => break,
                            Some(Msg::Failed(e)) => return Err(e),
                            Some(Msg::Unavailable) => {
                                gone[k - 1] = true;
                                self.scan_range(thread_id, ns, after, upto, f)?;
                                break;
                            }
                            None => {
                                return Err(StoreError::Query {
                                    what: WHAT.into(),
                                    reason: "a helper connection stopped".into(),
                                });
                            }
                        }
                    }
                }
                Ok(())
            };
            let result = read();
            for q in &queues {
                q.set(|s| s.closed = true);
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_threads_and_one_job_read_on_one_connection() {
        assert_eq!(chunk_rows(1 << 30, 15_000, 1), None);
        assert_eq!(chunk_rows(SPLIT_MIN_BYTES - 1, 15_000, 4), None);
        // Too few checkpoints for more than one chunk.
        assert_eq!(chunk_rows(1 << 30, MIN_CHUNK_ROWS, 2), None);
    }

    #[test]
    fn chunks_follow_blob_bytes_with_a_few_per_job_at_least() {
        // 900 MB of blobs over 15,000 checkpoints: 56 chunks of ~16 MB.
        assert_eq!(chunk_rows(900 << 20, 15_000, 2), Some(268));
        // 40 MB: the floor of 4 chunks per job decides.
        assert_eq!(chunk_rows(40 << 20, 1_000, 2), Some(125));
        assert_eq!(chunk_rows(40 << 20, 40, 3), Some(MIN_CHUNK_ROWS));
    }

    #[test]
    fn chunk_ranges_cover_every_id_once() {
        let bounds: Vec<String> = ["b", "d"].iter().map(|s| s.to_string()).collect();
        assert_eq!(chunk_range(&bounds, 0), (None, Some("b")));
        assert_eq!(chunk_range(&bounds, 1), (Some("b"), Some("d")));
        assert_eq!(chunk_range(&bounds, 2), (Some("d"), None));
    }

    #[test]
    fn scan_sql_numbers_its_range_parameters() {
        assert!(!scan_sql(false, false).contains("$3"));
        assert!(scan_sql(true, false).contains("checkpoint_id > $3"));
        assert!(scan_sql(false, true).contains("checkpoint_id <= $3"));
        let both = scan_sql(true, true);
        assert!(both.contains("checkpoint_id > $3") && both.contains("checkpoint_id <= $4"));
    }

    fn row(blob_bytes: usize) -> CheckpointRow {
        CheckpointRow {
            thread_id: "t".into(),
            checkpoint_ns: String::new(),
            checkpoint_id: "c".into(),
            parent_checkpoint_id: None,
            body: CheckpointBody::Postgres {
                checkpoint: serde_json::Value::Null,
                blobs: vec![BlobRow {
                    channel: "messages".into(),
                    type_tag: "msgpack".into(),
                    blob: Some(vec![0; blob_bytes]),
                    complete: true,
                }],
            },
            metadata: Vec::new(),
            bytes: 0,
        }
    }

    #[test]
    fn the_queue_holds_its_byte_budget_and_lets_a_large_row_through_alone() {
        let q = Ahead::new(4096);
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| {
                let _done = Done(&q);
                for n in [100, 10_000, 100, 100] {
                    assert!(q.push(Msg::Row(row(n))));
                    let s = q.state.lock().unwrap();
                    assert!(
                        s.bytes <= 4096 || s.items.len() == 1,
                        "{} bytes queued",
                        s.bytes
                    );
                }
                q.push(Msg::ChunkEnd);
            });
            let mut sizes = Vec::new();
            while let Some(m) = q.pop() {
                match m {
                    Msg::Row(r) => sizes.push(blob_len(&r)),
                    Msg::ChunkEnd => sizes.push(0),
                    _ => unreachable!(),
                }
            }
            writer.join().unwrap();
            assert_eq!(sizes, vec![100, 10_000, 100, 100, 0]);
        });
    }

    #[test]
    fn a_closed_queue_releases_a_waiting_writer() {
        let q = Ahead::new(10);
        assert!(q.push(Msg::Row(row(100))));
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| q.push(Msg::Row(row(100))));
            q.set(|s| s.closed = true);
            assert!(!writer.join().unwrap());
        });
    }

    fn blob_len(r: &CheckpointRow) -> usize {
        match &r.body {
            CheckpointBody::Postgres { blobs, .. } => blobs
                .iter()
                .map(|b| b.blob.as_ref().map_or(0, Vec::len))
                .sum(),
            CheckpointBody::Serialized { .. } => 0,
        }
    }
}
