//! What a store summary reads of checkpoints without their blob values: the point reads of
//! [`crate::store::Store::checkpoint_facts_at`] and the scan of
//! [`crate::store::Store::scan_checkpoints_whole`]. Each row comes with its blobs' lengths
//! and first bytes (enough to tell a snapshot from a plain value), never a whole blob.

use super::PostgresStore;
use super::ahead::Ask;
use super::read::{blob_at, get, keys_json, nonneg, row_with_blobs, versions_of_c};
use crate::error::StoreError;
use crate::store::{
    BlobRow, CheckpointBody, CheckpointKey, CheckpointMetaRow, CheckpointRow, FactsRow, FactsWanted,
};
use std::collections::HashMap;
use tokio_postgres::Row;

/// The facts columns over the rows of `checkpoints c` that `$from` reaches: the checkpoint
/// (`$checkpoint`, NULL to leave it unread), its blobs at its channel versions that
/// `$blobs` keeps (length and first 8 bytes each), and `$writes`, the bytes of its pending
/// writes; then `$more` columns.
macro_rules! facts_select {
    ($checkpoint:expr, $writes:expr, $more:expr, $from:expr, $blobs:expr) => {
        concat!(
            "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, ",
            $checkpoint,
            ", c.metadata::text, \
             (pg_column_size(c.checkpoint) + pg_column_size(c.metadata))::int8, \
             b.channels, b.types, b.heads, b.lens, ",
            $writes,
            $more,
            " FROM ",
            $from,
            " LEFT JOIN LATERAL ( \
                SELECT array_agg(bl.channel) AS channels, array_agg(bl.type) AS types, \
                       array_agg(substring(bl.blob from 1 for 8)) AS heads, \
                       array_agg(coalesce(octet_length(bl.blob), 0)::int8) AS lens \
                FROM ",
            versions_of_c!(),
            " cv JOIN LATERAL (",
            blob_at!(),
            ") bl ON true WHERE ",
            $blobs,
            " ) b ON true"
        )
    };
}

/// The checkpoints $1 names ([`keys_json`]): every channel's blobs when $2 is `all`, else
/// `messages`'s; the write bytes when $3 is `writes`.
const FACTS_SELECT: &str = facts_select!(
    "c.checkpoint",
    "CASE WHEN $3::text = 'writes' THEN \
     (SELECT coalesce(sum(octet_length(w.blob)), 0)::int8 FROM checkpoint_writes w \
      WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns \
      AND w.checkpoint_id = c.checkpoint_id) ELSE 0 END",
    "",
    "json_to_recordset($1::text::json) AS k(o int8, t text, n text, i text) \
     JOIN checkpoints c ON c.thread_id = k.t AND c.checkpoint_ns = k.n AND c.checkpoint_id = k.i",
    "$2::text = 'all' OR cv.key = 'messages'"
);

/// Every checkpoint in key order, its `ts` (column 7). Of the checkpoint JSON (column 4)
/// only what the facts read: `ts`, `channel_versions` and `channel_values.messages` of an
/// object (a missing key comes as `null`, which the facts read as missing); NULL, unread,
/// when it is stored in more than $1 bytes.
const SCAN_SELECT: &str = "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, \
     c.parent_checkpoint_id, \
     CASE WHEN pg_column_size(c.checkpoint) > $1::text::int4 THEN NULL \
     WHEN jsonb_typeof(c.checkpoint) <> 'object' THEN c.checkpoint \
     ELSE jsonb_build_object('ts', c.checkpoint -> 'ts', \
       'channel_versions', c.checkpoint -> 'channel_versions', \
       'channel_values', CASE WHEN jsonb_typeof(c.checkpoint -> 'channel_values') = 'object' \
         THEN CASE WHEN c.checkpoint -> 'channel_values' ? 'messages' \
           THEN jsonb_build_object('messages', c.checkpoint -> 'channel_values' -> 'messages') \
           ELSE '{}'::jsonb END \
         ELSE c.checkpoint -> 'channel_values' END) END, \
     c.metadata::text, (pg_column_size(c.checkpoint) + pg_column_size(c.metadata))::int8, \
     CASE WHEN jsonb_typeof(c.checkpoint -> 'ts') = 'string' THEN c.checkpoint ->> 'ts' END \
     FROM checkpoints c ORDER BY c.thread_id, c.checkpoint_ns, c.checkpoint_id";

/// Each blob of the threads $1 lists ([`super::batch::IN_BATCH`]), its length and first bytes.
fn blobs_select() -> String {
    format!(
        "SELECT thread_id, checkpoint_ns, channel::text, version::text, type::text, \
         substring(blob from 1 for 8), coalesce(octet_length(blob), 0)::int8 \
         FROM checkpoint_blobs WHERE {}",
        super::batch::IN_BATCH
    )
}

/// The pending-write bytes and rows of each checkpoint of the threads $1 lists.
fn writes_select() -> String {
    format!(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, \
         coalesce(sum(octet_length(blob)), 0)::int8, count(*)::int8 \
         FROM checkpoint_writes WHERE {} GROUP BY thread_id, checkpoint_ns, checkpoint_id",
        super::batch::IN_BATCH
    )
}

/// Rows fetched per round trip by the scan.
const SCAN_FETCH: usize = 2000;

/// One row of [`facts_select!`] as facts: the blobs stand in by their first bytes, which
/// is all telling whether `messages` is absent asks of them.
fn facts_row(r: &Row, what: &str) -> Result<FactsRow, StoreError> {
    let channels: Option<Vec<String>> = get(r, 7, what)?;
    let types: Option<Vec<String>> = get(r, 8, what)?;
    let heads: Option<Vec<Option<Vec<u8>>>> = get(r, 9, what)?;
    let lens: Option<Vec<Option<i64>>> = get(r, 10, what)?;
    let (mut blob_bytes, mut messages_blob_bytes) = (0, 0);
    let mut blobs = Vec::new();
    for (((channel, type_tag), blob), len) in channels
        .unwrap_or_default()
        .into_iter()
        .zip(types.unwrap_or_default())
        .zip(heads.unwrap_or_default())
        .zip(lens.unwrap_or_default())
    {
        let len = nonneg(len);
        blob_bytes += len;
        if channel == "messages" {
            messages_blob_bytes += len;
        }
        blobs.push(BlobRow {
            channel,
            type_tag,
            blob,
            complete: false,
        });
    }
    Ok(FactsRow {
        row: row_with_blobs(r, what, blobs)?,
        write_bytes: nonneg(get(r, 11, what)?),
        blob_lengths: Some((blob_bytes, messages_blob_bytes)),
        whole: false,
        thread_writes: None,
        thread_blobs: None,
    })
}

impl PostgresStore {
    /// [`crate::store::Store::checkpoint_facts_at`]: one statement.
    pub(super) fn facts_at(
        &self,
        keys: &[CheckpointKey],
        want: FactsWanted,
        f: &mut dyn FnMut(FactsRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let what = "reading checkpoints";
        let blobs = if want.head { "all" } else { "messages" };
        let writes = if want.writes { "writes" } else { "" };
        for r in &self.query(what, FACTS_SELECT, &[&keys_json(keys), &blobs, &writes])? {
            f(facts_row(r, what)?)?;
        }
        Ok(())
    }

    /// [`crate::store::Store::scan_checkpoints_whole`]: one cursor over the table, and for
    /// each fetch of rows ([`SCAN_FETCH`]) one read of the blobs of their threads, joined to
    /// each row's channel versions here (a read of a thread's blobs in index order costs
    /// less than a lookup per checkpoint and channel), and one of their pending-write bytes
    /// per checkpoint. The next fetch is in flight while a fetch's rows are read, and those
    /// two reads are answered beside it ([`PostgresStore::cursor_answered_ahead`]).
    pub(super) fn scan_facts(
        &self,
        max_body: u64,
        f: &mut dyn FnMut(CheckpointMetaRow, Option<FactsRow>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "scanning checkpoints";
        // `pg_column_size` is an int4: a larger cap reads every body.
        let max = i32::try_from(max_body).unwrap_or(i32::MAX).to_string();
        let held = std::cell::RefCell::new(Held::default());
        let fetch = crate::failpoint::Failpoints::from_env("read").summary_fetch_rows(SCAN_FETCH);
        self.cursor_answered_ahead(
            what,
            SCAN_SELECT,
            &[&max],
            fetch,
            &mut |rows| {
                let mut held = held.borrow_mut();
                for r in rows {
                    held.rows.push(scanned_row(r, what)?);
                }
                Ok(held.asks())
            },
            &mut |answers| held.borrow_mut().hand_on(answers, f),
        )
    }
}

/// One row of [`SCAN_SELECT`]: its metadata row, and the row when its body was read.
fn scanned_row(r: &Row, what: &str) -> Result<HeldRow, StoreError> {
    let body: Option<serde_json::Value> = get(r, 4, what)?;
    let metadata: Option<String> = get(r, 5, what)?;
    let metadata = metadata.unwrap_or_default().into_bytes();
    let meta = CheckpointMetaRow {
        thread_id: get(r, 0, what)?,
        checkpoint_ns: get(r, 1, what)?,
        checkpoint_id: get(r, 2, what)?,
        bytes: nonneg(get(r, 6, what)?),
        metadata,
        ts: get(r, 7, what)?,
    };
    let row = body.map(|checkpoint| -> Result<CheckpointRow, StoreError> {
        Ok(CheckpointRow {
            thread_id: meta.thread_id.clone(),
            checkpoint_ns: meta.checkpoint_ns.clone(),
            checkpoint_id: meta.checkpoint_id.clone(),
            parent_checkpoint_id: get(r, 3, what)?,
            body: CheckpointBody::Postgres {
                checkpoint,
                blobs: Vec::new(),
            },
            metadata: meta.metadata.clone(),
            bytes: meta.bytes,
        })
    });
    Ok((meta, row.transpose()?))
}

impl Held {
    /// The reads the held rows need: the blobs and the pending-write bytes of their threads
    /// not already known (none when every row's thread is).
    fn asks(&self) -> Vec<Ask> {
        let open = self.open.as_ref().map(|(t, _)| t);
        let mut ids: Vec<&String> = Vec::new();
        for (meta, row) in &self.rows {
            if row.is_some()
                && open != Some(&meta.thread_id)
                && ids.last().is_none_or(|l| **l != meta.thread_id)
            {
                ids.push(&meta.thread_id);
            }
        }
        if ids.is_empty() {
            return Vec::new();
        }
        let list = super::batch::json_list(ids.iter().copied());
        vec![(blobs_select(), list.clone()), (writes_select(), list)]
    }

    /// Attaches what [`Held::asks`] read (`answers`, in its order) and hands every held row
    /// to `f`; keeps the last thread's for the rows to come (a thread's are read once,
    /// whatever the rows it spans).
    fn hand_on(
        &mut self,
        answers: Vec<Vec<Row>>,
        f: &mut dyn FnMut(CheckpointMetaRow, Option<FactsRow>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "reading blob and pending-write lengths";
        let rows = std::mem::take(&mut self.rows);
        let open = self.open.take();
        let open_id = open.as_ref().map(|(t, _)| t.clone());
        let mut known: HashMap<String, ThreadFacts> = open.into_iter().collect();
        let mut answers = answers.into_iter();
        if let (Some(blobs), Some(writes)) = (answers.next(), answers.next()) {
            // Every thread asked for ([`Held::asks`]) is known, with or without blobs and
            // writes, and its totals are given with its first row.
            for (meta, row) in &rows {
                if row.is_some() && open_id.as_ref() != Some(&meta.thread_id) {
                    known.entry(meta.thread_id.clone()).or_default().totals =
                        Some(((0, 0), (0, 0)));
                }
            }
            for b in &blobs {
                let facts = BlobFacts {
                    type_tag: get(b, 4, what)?,
                    head: get(b, 5, what)?,
                    len: nonneg(get(b, 6, what)?),
                };
                let thread: String = get(b, 0, what)?;
                let t = known.entry(thread).or_default();
                if let Some((_, blobs)) = t.totals.as_mut() {
                    *blobs = (blobs.0 + 1, blobs.1 + facts.len);
                }
                t.blobs
                    .entry(get(b, 1, what)?)
                    .or_default()
                    .entry(get(b, 2, what)?)
                    .or_default()
                    .insert(get(b, 3, what)?, facts);
            }
            for w in &writes {
                let thread: String = get(w, 0, what)?;
                let bytes = nonneg(get(w, 3, what)?);
                let t = known.entry(thread).or_default();
                if let Some((writes, _)) = t.totals.as_mut() {
                    *writes = (writes.0 + nonneg(get(w, 4, what)?), writes.1 + bytes);
                }
                t.writes
                    .entry(get(w, 1, what)?)
                    .or_default()
                    .insert(get(w, 2, what)?, bytes);
            }
        }
        let last = rows.last().map(|(m, _)| m.thread_id.clone());
        for (meta, row) in rows {
            let mut thread = known.get_mut(&meta.thread_id);
            let facts = row.and_then(|row| with_blobs(row, thread.as_ref().map(|t| &t.blobs)));
            let facts = facts.map(|mut facts| {
                if let Some(t) = thread.as_mut() {
                    facts.write_bytes = t
                        .writes
                        .get(&meta.checkpoint_ns)
                        .and_then(|n| n.get(&meta.checkpoint_id))
                        .copied()
                        .unwrap_or(0);
                    (facts.thread_writes, facts.thread_blobs) = t.totals.take().unzip();
                }
                facts
            });
            f(meta, facts)?;
        }
        self.open = last.and_then(|t| known.remove_entry(&t));
        Ok(())
    }
}

/// What the scan reads of one thread: its blobs, and its pending-write bytes by namespace
/// and checkpoint id.
#[derive(Default)]
struct ThreadFacts {
    blobs: ThreadBlobs,
    writes: HashMap<String, HashMap<String, u64>>,
    /// Its (writes, bytes) and (blobs, bytes), counted as `write_totals_of` and
    /// `blob_totals_of` count them, until a row takes them.
    totals: Option<((u64, u64), (u64, u64))>,
}

/// A row the scan holds: its metadata, and the row when it was read.
type HeldRow = (CheckpointMetaRow, Option<CheckpointRow>);

/// Rows the scan holds until their blobs are read.
#[derive(Default)]
struct Held {
    rows: Vec<HeldRow>,
    /// What was read of the thread the last fetch ended in.
    open: Option<(String, ThreadFacts)>,
}

/// What the summary reads of one blob.
struct BlobFacts {
    type_tag: String,
    head: Option<Vec<u8>>,
    len: u64,
}

/// A thread's blobs by namespace, channel and version.
type ThreadBlobs = HashMap<String, HashMap<String, HashMap<String, BlobFacts>>>;

/// `row` with the blobs at its channel versions, as [`facts_row`] gives it: `None` when a
/// version is neither a string nor null (its text form is the server's to give: the row
/// takes the point reads).
fn with_blobs(mut row: CheckpointRow, blobs: Option<&ThreadBlobs>) -> Option<FactsRow> {
    let CheckpointBody::Postgres {
        checkpoint,
        blobs: attached,
    } = &mut row.body
    else {
        return None;
    };
    let (mut all, mut messages) = (0, 0);
    if let Some(serde_json::Value::Object(versions)) = checkpoint.get("channel_versions") {
        let ns = blobs.and_then(|b| b.get(&row.checkpoint_ns));
        // The server's `jsonb_each_text` order: the JSON object as it sent it.
        for (channel, version) in versions {
            let version = match version {
                serde_json::Value::String(v) => v,
                serde_json::Value::Null => continue,
                _ => return None,
            };
            let Some(b) = ns.and_then(|n| n.get(channel)).and_then(|c| c.get(version)) else {
                continue;
            };
            all += b.len;
            if channel == "messages" {
                messages += b.len;
            }
            attached.push(BlobRow {
                channel: channel.clone(),
                type_tag: b.type_tag.clone(),
                blob: b.head.clone(),
                complete: false,
            });
        }
    }
    Some(FactsRow {
        row,
        write_bytes: 0,
        blob_lengths: Some((all, messages)),
        whole: false,
        thread_writes: None,
        thread_blobs: None,
    })
}
