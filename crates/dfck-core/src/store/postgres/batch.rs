//! [`crate::store::Store::read_threads`] on PostgreSQL: a batch of threads in three plain
//! statements — their checkpoints (with each one's channel versions as text), their blobs
//! and their writes — each through a cursor that stops once past the budget; a thread not
//! read whole is left to a read of its own, so a giant thread is never held. The blobs are matched to checkpoints here, exactly as the thread scan's
//! joins match them on the server (docs/storage-format.md, "Reading a thread"): a blob in
//! full where the parent holds another version, else its first 16 bytes; an encrypted one
//! always in full. Index lookups per checkpoint and channel are what made the scan cost
//! the server several times what reading the rows does.

use super::PostgresStore;
use super::read::{get, row_with_blobs, write_row};
use crate::error::StoreError;
use crate::store::batch::{NamespaceRows, ThreadRows, row_bytes};
use crate::store::{BlobRow, CheckpointBody, CheckpointRow};
use std::collections::{HashMap, HashSet};
use tokio_postgres::Row;

const WHAT: &str = "reading a batch of threads";
/// The reason a cursor's row callback gives to stop the cursor early (never shown).
const FULL: &str = "\0the batch is full";
/// Rows per cursor fetch (most rows are small; a batch holds a budget of them anyway).
const FETCH: usize = 256;
/// The bytes of a blob a checkpoint sharing its parent's version gets.
const HEAD: usize = 16;

/// The threads `$1` (a JSON array of ids) select: an index scan over the ids, in index
/// order (an `IN (subquery)` lets a cursor's fast-start plan merge-join the whole index).
pub(super) const IN_BATCH: &str =
    "thread_id = ANY(ARRAY(SELECT json_array_elements_text($1::text::json)))";

/// A checkpoint's `channel_versions` entries in `jsonb_each_text` order, values as text.
type Versions = Vec<(String, Option<String>)>;

fn full() -> StoreError {
    StoreError::Query {
        what: WHAT.into(),
        reason: FULL.into(),
    }
}

/// Whether a cursor was stopped by [`full`] (`false`: it ran out).
fn stopped(r: Result<(), StoreError>) -> Result<bool, StoreError> {
    match r {
        Ok(()) => Ok(false),
        Err(StoreError::Query { reason, .. }) if reason == FULL => Ok(true),
        Err(e) => Err(e),
    }
}

/// One namespace as read, each checkpoint with its versions.
struct NsRead {
    rows: NamespaceRows,
    versions: Vec<Versions>,
}

/// One thread as read.
struct ThreadRead {
    thread_id: String,
    namespaces: Vec<NsRead>,
}

impl ThreadRead {
    fn ns(&mut self, ns: &str) -> Option<&mut NsRead> {
        self.namespaces
            .iter_mut()
            .find(|n| n.rows.checkpoint_ns == ns)
    }
}

impl PostgresStore {
    /// See [`crate::store::Store::read_threads`].
    pub(super) fn read_thread_batch(
        &self,
        ids: &[String],
        budget: usize,
        values: bool,
    ) -> Result<Vec<ThreadRows>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // Each of the three reads holds about `budget` bytes at most.
        let (mut threads, cut) = self.batch_checkpoints(ids, budget, &mut 0)?;
        let mut blobs = HashMap::new();
        let blobs_cut = self.batch_blobs(&threads, budget, &mut 0, &mut blobs)?;
        let writes_cut = self.batch_writes(&mut threads, budget, &mut 0)?;
        for done in [&blobs_cut, &writes_cut].into_iter().flatten() {
            // Only the threads whose rows were read to the end are whole.
            threads.retain(|t| done.contains(&t.thread_id));
        }
        let mut out: Vec<ThreadRows> = threads
            .into_iter()
            .map(|t| attach_blobs(t, &mut blobs, values))
            .collect();
        if !cut && blobs_cut.is_none() && writes_cut.is_none() {
            crate::store::batch::add_gone(&mut out, ids);
        }
        Ok(out)
    }

    /// The checkpoints of `ids`, grouped by thread and namespace; whether the budget cut the
    /// scan short.
    fn batch_checkpoints(
        &self,
        ids: &[String],
        budget: usize,
        held: &mut usize,
    ) -> Result<(Vec<ThreadRead>, bool), StoreError> {
        let sql = format!(
            "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, \
             c.checkpoint, c.metadata::text, \
             (pg_column_size(c.checkpoint) + pg_column_size(c.metadata))::int8, cv.keys, cv.vals \
             FROM checkpoints c LEFT JOIN LATERAL ( \
                SELECT array_agg(e.key ORDER BY e.ord) AS keys, \
                       array_agg(e.value ORDER BY e.ord) AS vals \
                FROM jsonb_each_text(CASE WHEN jsonb_typeof(c.checkpoint -> 'channel_versions') \
                     = 'object' THEN c.checkpoint -> 'channel_versions' END) \
                     WITH ORDINALITY e(key, value, ord)) cv ON true \
             WHERE c.{IN_BATCH} ORDER BY c.thread_id, c.checkpoint_ns, c.checkpoint_id"
        );
        let mut threads: Vec<ThreadRead> = Vec::new();
        let mut partial = false;
        let list = json_list(ids.iter());
        let scanned = self.cursor(WHAT, &sql, &[&list], FETCH, &mut |r| {
            let thread: &str = get(r, 0, WHAT)?;
            let new = threads.last().is_none_or(|t| t.thread_id != thread);
            if *held > budget {
                // Mid-thread, the thread is left to a read of its own (its rows streamed).
                partial = !new;
                return Err(full());
            }
            if new {
                threads.push(ThreadRead {
                    thread_id: thread.to_owned(),
                    namespaces: Vec::new(),
                });
            }
            let last = threads.len() - 1;
            let t = &mut threads[last];
            let (row, versions) = checkpoint_row(r)?;
            *held += row_bytes(&row);
            if t.namespaces
                .last()
                .is_none_or(|n| n.rows.checkpoint_ns != row.checkpoint_ns)
            {
                t.namespaces.push(NsRead {
                    rows: NamespaceRows {
                        checkpoint_ns: row.checkpoint_ns.clone(),
                        ..NamespaceRows::default()
                    },
                    versions: Vec::new(),
                });
            }
            let last = t.namespaces.len() - 1;
            let ns = &mut t.namespaces[last];
            ns.rows.checkpoints.push(row);
            ns.versions.push(versions);
            Ok(())
        });
        let cut = stopped(scanned)?;
        if partial {
            threads.pop();
        }
        Ok((threads, cut))
    }

    /// The blobs of `threads` into `blobs`, by (thread, ns, channel, version).
    fn batch_blobs(
        &self,
        threads: &[ThreadRead],
        budget: usize,
        held: &mut usize,
        blobs: &mut HashMap<String, ThreadBlobs>,
    ) -> Result<Option<HashSet<String>>, StoreError> {
        let sql = format!(
            "SELECT thread_id, checkpoint_ns, channel::text, version::text, type::text, blob \
             FROM checkpoint_blobs WHERE {IN_BATCH} ORDER BY thread_id, checkpoint_ns"
        );
        self.by_thread(&sql, threads, budget, held, &mut |thread, r| {
            let blob: Option<Vec<u8>> = get(r, 5, WHAT)?;
            let size = blob.as_ref().map_or(0, Vec::len) + 64;
            let ns: String = get(r, 1, WHAT)?;
            let channel: String = get(r, 2, WHAT)?;
            let version: String = get(r, 3, WHAT)?;
            let at_thread = match blobs.get_mut(thread) {
                Some(b) => b,
                None => blobs.entry(thread.to_owned()).or_default(),
            };
            at_thread
                .entry(ns)
                .or_default()
                .entry(channel)
                .or_default()
                .insert(version, (get(r, 4, WHAT)?, blob));
            Ok(size)
        })
    }

    /// The writes of the namespaces read, into `threads`.
    fn batch_writes(
        &self,
        threads: &mut [ThreadRead],
        budget: usize,
        held: &mut usize,
    ) -> Result<Option<HashSet<String>>, StoreError> {
        let sql = format!(
            "SELECT checkpoint_id, task_id, {tp}, idx::int8, channel, type, blob, thread_id, \
             checkpoint_ns FROM checkpoint_writes WHERE {IN_BATCH} \
             ORDER BY thread_id, checkpoint_ns",
            tp = self.task_path_expr()
        );
        let at: HashMap<String, usize> = threads
            .iter()
            .enumerate()
            .map(|(i, t)| (t.thread_id.clone(), i))
            .collect();
        let mut sink = |thread: &str, r: &Row| {
            let ns: &str = get(r, 8, WHAT)?;
            // Writes of a namespace without checkpoints are never read per thread either.
            let Some(n) = at.get(thread).and_then(|&i| threads[i].ns(ns)) else {
                return Ok(0);
            };
            let w = write_row(r, WHAT)?;
            let size = w.value.len() + 64;
            n.rows.writes.push(w);
            Ok(size)
        };
        let list = json_list(at.keys());
        self.by_thread_list(&sql, &list, 7, budget, held, &mut sink)
    }

    /// Streams the rows of `sql` (ordered by thread) for `threads`, the thread id in column
    /// 0, to `f`, which gives the bytes each holds.
    fn by_thread(
        &self,
        sql: &str,
        threads: &[ThreadRead],
        budget: usize,
        held: &mut usize,
        f: &mut dyn FnMut(&str, &Row) -> Result<usize, StoreError>,
    ) -> Result<Option<HashSet<String>>, StoreError> {
        let list = json_list(threads.iter().map(|t| &t.thread_id));
        self.by_thread_list(sql, &list, 0, budget, held, f)
    }

    /// [`Self::by_thread`] over the JSON id list `list`, the thread id in column `col`:
    /// past `budget` held bytes it stops. `Some(done)` when it stopped: the threads whose
    /// rows were all seen.
    fn by_thread_list(
        &self,
        sql: &str,
        list: &str,
        col: usize,
        budget: usize,
        held: &mut usize,
        f: &mut dyn FnMut(&str, &Row) -> Result<usize, StoreError>,
    ) -> Result<Option<HashSet<String>>, StoreError> {
        let (mut done, mut current) = (HashSet::new(), None::<String>);
        let scanned = self.cursor(WHAT, sql, &[&list], FETCH * 2, &mut |r| {
            let thread: &str = get(r, col, WHAT)?;
            if current.as_deref() != Some(thread) {
                done.extend(current.replace(thread.to_owned()));
            }
            // Past the budget, even mid-thread: that thread is then left out.
            if *held > budget {
                return Err(full());
            }
            *held += f(thread, r)?;
            Ok(())
        });
        Ok(stopped(scanned)?.then_some(done))
    }
}

/// A thread's blobs: by namespace, channel and version, the type and the blob.
type ThreadBlobs = HashMap<String, HashMap<String, HashMap<String, (String, Option<Vec<u8>>)>>>;

pub(super) fn json_list<S: AsRef<str>>(ids: impl Iterator<Item = S>) -> String {
    serde_json::Value::from(ids.map(|s| s.as_ref().to_owned()).collect::<Vec<_>>()).to_string()
}

/// A checkpoint row of [`PostgresStore::batch_checkpoints`], its blobs not yet attached.
fn checkpoint_row(r: &Row) -> Result<(CheckpointRow, Versions), StoreError> {
    let keys: Option<Vec<String>> = get(r, 7, WHAT)?;
    let vals: Option<Vec<Option<String>>> = get(r, 8, WHAT)?;
    let versions = keys
        .unwrap_or_default()
        .into_iter()
        .zip(vals.unwrap_or_default())
        .collect();
    Ok((row_with_blobs(r, WHAT, Vec::new())?, versions))
}

/// `t`'s checkpoints with their blobs, as the thread scan gives them (`values`: as the
/// point read gives them, every blob in full and the row's size its own); namespaces in
/// the order the per-thread read gives (the server's collation may differ).
fn attach_blobs(
    t: ThreadRead,
    blobs: &mut HashMap<String, ThreadBlobs>,
    values: bool,
) -> ThreadRows {
    let mut namespaces = Vec::with_capacity(t.namespaces.len());
    let thread_blobs = blobs.remove(&t.thread_id).unwrap_or_default();
    for NsRead { mut rows, versions } in t.namespaces {
        let ns_blobs = thread_blobs.get(&rows.checkpoint_ns);
        let index: HashMap<&str, usize> = rows
            .checkpoints
            .iter()
            .enumerate()
            .map(|(i, c)| (c.checkpoint_id.as_str(), i))
            .collect();
        let parents: Vec<Option<usize>> = rows
            .checkpoints
            .iter()
            .map(|c| {
                c.parent_checkpoint_id
                    .as_deref()
                    .and_then(|p| index.get(p).copied())
            })
            .collect();
        drop(index);
        for (i, row) in rows.checkpoints.iter_mut().enumerate() {
            let parent = parents[i].map(|p| &versions[p]);
            let mut attached = Vec::new();
            let mut new_bytes = 0;
            for (channel, version) in &versions[i] {
                // `(p.versions ->> key) IS DISTINCT FROM value`: no parent reads as NULL.
                let in_parent = parent.and_then(|p| {
                    p.iter()
                        .find(|(k, _)| k == channel)
                        .and_then(|(_, v)| v.as_deref())
                });
                let is_new = in_parent != version.as_deref();
                let Some(version) = version else { continue };
                let Some((type_tag, blob)) = ns_blobs
                    .and_then(|n| n.get(channel))
                    .and_then(|c| c.get(version))
                else {
                    continue;
                };
                let complete = values || is_new || type_tag.contains('+');
                if is_new && !values {
                    new_bytes += blob.as_ref().map_or(0, |b| b.len() as u64);
                }
                let blob = match blob {
                    Some(b) if !complete => Some(b[..b.len().min(HEAD)].to_vec()),
                    other => other.clone(),
                };
                attached.push(BlobRow {
                    channel: channel.clone(),
                    type_tag: type_tag.clone(),
                    blob,
                    complete,
                });
            }
            row.bytes += new_bytes;
            if let CheckpointBody::Postgres { blobs, .. } = &mut row.body {
                *blobs = attached;
            }
        }
        namespaces.push(rows);
    }
    namespaces.sort_by(|a, b| a.checkpoint_ns.cmp(&b.checkpoint_ns));
    ThreadRows {
        thread_id: t.thread_id,
        namespaces,
    }
}
