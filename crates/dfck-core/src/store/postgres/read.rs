//! Reads: the [`Store`] implementation over one read-only transaction.

use super::PostgresStore;
use crate::error::StoreError;
use crate::store::{
    BlobRow, CheckpointBody, CheckpointKey, CheckpointMetaRow, CheckpointRow,
    CheckpointWriteTotals, FactsRow, FactsWanted, Store, StoreInfo, WholeScan, WriteRow,
    WriteTotals, sort_writes,
};
use tokio_postgres::Row;

/// Pending writes per cursor fetch, and the most one statement reads.
const WRITES_FETCH: usize = 500;
const WRITES_WHAT: &str = "reading a thread's pending writes";
/// Checkpoints with their values per cursor fetch, and the most one statement reads.
const VALUES_FETCH: usize = 16;

impl PostgresStore {
    pub(super) fn task_path_expr(&self) -> &'static str {
        if self.info.has_task_path {
            "task_path"
        } else {
            "''::text"
        }
    }

    /// The checkpoints `keys` names, each to `f`: through a cursor (a few rows held at a
    /// time) or one plain statement.
    fn checkpoints_of(
        &self,
        keys: &[CheckpointKey],
        cursor: bool,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let what = "reading checkpoints";
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&keys_json(keys)];
        if cursor {
            return self.cursor(what, KEYS_SELECT, &params, 16, &mut |r| {
                f(checkpoint_row(r, what)?)
            });
        }
        for r in self.query(what, KEYS_SELECT, &params)? {
            f(checkpoint_row(&r, what)?)?;
        }
        Ok(())
    }

    /// Every pending write of (thread, ns).
    fn writes_sql(&self) -> String {
        format!(
            "SELECT checkpoint_id, task_id, {tp}, idx::int8, channel, type, blob \
             FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2",
            tp = self.task_path_expr()
        )
    }

    /// [`Self::writes_sql`] through a cursor, [`WRITES_FETCH`] rows at a time.
    fn writes_by_cursor(&self, thread_id: &str, ns: &str) -> Result<Vec<WriteRow>, StoreError> {
        let mut out = Vec::new();
        let sql = self.writes_sql();
        self.cursor(
            WRITES_WHAT,
            &sql,
            &[&thread_id, &ns],
            WRITES_FETCH,
            &mut |r| {
                out.push(write_row(r, WRITES_WHAT)?);
                Ok(())
            },
        )?;
        Ok(out)
    }
}

pub(super) fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    r: &'a Row,
    i: usize,
    what: &str,
) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| StoreError::Query {
        what: what.to_owned(),
        reason: e.to_string(),
    })
}

pub(super) fn write_row(r: &Row, what: &str) -> Result<WriteRow, StoreError> {
    let value: Option<Vec<u8>> = get(r, 6, what)?;
    Ok(WriteRow {
        checkpoint_id: get(r, 0, what)?,
        task_id: get(r, 1, what)?,
        task_path: get(r, 2, what)?,
        idx: get(r, 3, what)?,
        channel: get(r, 4, what)?,
        type_tag: get(r, 5, what)?,
        value: value.unwrap_or_default(),
    })
}

pub(super) fn nonneg(v: Option<i64>) -> u64 {
    v.unwrap_or(0).max(0) as u64
}

/// The blob row at one `channel_versions` entry `cv` of checkpoint `c`, looked up through
/// the primary key. The `OFFSET 0` keeps the planner from turning the lookup into a join
/// over every blob of the thread (which it prefers when one thread fills the table).
macro_rules! blob_at {
    () => {
        "SELECT bl.channel::text AS channel, bl.type::text AS type, bl.blob \
         FROM checkpoint_blobs bl WHERE bl.thread_id = c.thread_id \
         AND bl.checkpoint_ns = c.checkpoint_ns AND bl.channel = cv.key \
         AND bl.version = cv.value OFFSET 0"
    };
}
pub(super) use blob_at;

/// The `channel_versions` entries (key, value) of checkpoint `c`, none when it is not an
/// object; the caller names them `cv`.
macro_rules! versions_of_c {
    () => {
        "jsonb_each_text(CASE WHEN jsonb_typeof(c.checkpoint -> 'channel_versions') = 'object' \
         THEN c.checkpoint -> 'channel_versions' END)"
    };
}
pub(super) use versions_of_c;

/// A point read's columns: checkpoint columns plus every blob at its channel versions, in
/// full, over the rows of `checkpoints c` the FROM clause `$from` reaches.
macro_rules! point_select {
    ($from:expr) => {
        concat!(
            "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, \
             c.checkpoint, c.metadata::text, \
             (pg_column_size(c.checkpoint) + pg_column_size(c.metadata))::int8, \
             b.channels, b.types, b.blobs, b.complete \
             FROM ",
            $from,
            " LEFT JOIN LATERAL ( \
                SELECT array_agg(bl.channel) AS channels, array_agg(bl.type) AS types, \
                       array_agg(bl.blob) AS blobs, array_agg(true) AS complete \
                FROM ",
            versions_of_c!(),
            " cv JOIN LATERAL (",
            blob_at!(),
            ") bl ON true \
             ) b ON true"
        )
    };
}

/// A point read: one checkpoint by the WHERE clause the caller appends.
const POINT_SELECT: &str = point_select!("checkpoints c");

/// The rows $1 names: a JSON array of `{"t": thread, "n": ns, "i": id}` ([`keys_json`]).
const KEYS_SELECT: &str = point_select!(
    "json_to_recordset($1::text::json) AS k(o int8, t text, n text, i text) \
     JOIN checkpoints c ON c.thread_id = k.t AND c.checkpoint_ns = k.n AND c.checkpoint_id = k.i"
);

/// `keys` as the JSON array [`KEYS_SELECT`] reads, each with its position `o`.
pub(super) fn keys_json(keys: &[CheckpointKey]) -> String {
    let rows = keys
        .iter()
        .enumerate()
        .map(|(o, k)| {
            serde_json::json!({"o": o, "t": k.thread_id, "n": k.checkpoint_ns, "i": k.checkpoint_id})
        })
        .collect();
    serde_json::Value::Array(rows).to_string()
}

fn checkpoint_row(r: &Row, what: &str) -> Result<CheckpointRow, StoreError> {
    let channels: Option<Vec<String>> = get(r, 7, what)?;
    let types: Option<Vec<String>> = get(r, 8, what)?;
    let blobs: Option<Vec<Option<Vec<u8>>>> = get(r, 9, what)?;
    let complete: Option<Vec<Option<bool>>> = get(r, 10, what)?;
    let blobs = channels
        .unwrap_or_default()
        .into_iter()
        .zip(types.unwrap_or_default())
        .zip(blobs.unwrap_or_default())
        .zip(complete.unwrap_or_default())
        .map(|(((channel, type_tag), blob), complete)| BlobRow {
            channel,
            type_tag,
            blob,
            complete: complete.unwrap_or(true),
        })
        .collect();
    row_with_blobs(r, what, blobs)
}

/// The key, JSONB, metadata and size columns (0–6) of a checkpoint row, with its blobs.
pub(super) fn row_with_blobs(
    r: &Row,
    what: &str,
    blobs: Vec<BlobRow>,
) -> Result<CheckpointRow, StoreError> {
    let metadata: Option<String> = get(r, 5, what)?;
    Ok(CheckpointRow {
        thread_id: get(r, 0, what)?,
        checkpoint_ns: get(r, 1, what)?,
        checkpoint_id: get(r, 2, what)?,
        parent_checkpoint_id: get(r, 3, what)?,
        body: CheckpointBody::Postgres {
            checkpoint: get(r, 4, what)?,
            blobs,
        },
        metadata: metadata.unwrap_or_default().into_bytes(),
        bytes: nonneg(get(r, 6, what)?),
    })
}

impl Store for PostgresStore {
    fn maintenance(&self) -> Option<&dyn crate::store::maintenance::MaintenanceTable> {
        Some(self)
    }

    fn app(&self) -> Option<&dyn crate::store::app::AppTables> {
        Some(self)
    }

    fn app_rows(&self) -> Option<&dyn crate::store::app_copy::AppRows> {
        Some(self)
    }

    fn info(&self) -> &StoreInfo {
        &self.info
    }

    fn scans_bytewise(&self) -> bool {
        self.thread_ids_bytewise()
    }

    fn space(&self) -> Result<crate::store::space::StoreSpace, StoreError> {
        self.pg_space()
            .map(crate::store::space::StoreSpace::Postgres)
    }

    fn scan_write_channels(
        &self,
        f: &mut dyn FnMut(crate::store::space::ChannelTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.scan_write_channels_pg(f)
    }

    fn scan_value_channels(
        &self,
        f: &mut dyn FnMut(crate::store::space::ChannelTotals) -> Result<(), StoreError>,
    ) -> Result<bool, StoreError> {
        self.scan_value_channels_pg(f).map(|()| true)
    }

    fn scan_checkpoint_meta(
        &self,
        f: &mut dyn FnMut(CheckpointMetaRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "scanning checkpoints";
        self.cursor(
            what,
            "SELECT thread_id, checkpoint_ns, checkpoint_id, \
             (pg_column_size(checkpoint) + pg_column_size(metadata))::int8, metadata::text, \
             CASE WHEN jsonb_typeof(checkpoint -> 'ts') = 'string' THEN checkpoint ->> 'ts' END \
             FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id",
            &[],
            2000,
            &mut |r| {
                let metadata: Option<String> = get(r, 4, what)?;
                f(CheckpointMetaRow {
                    thread_id: get(r, 0, what)?,
                    checkpoint_ns: get(r, 1, what)?,
                    checkpoint_id: get(r, 2, what)?,
                    bytes: nonneg(get(r, 3, what)?),
                    metadata: metadata.unwrap_or_default().into_bytes(),
                    ts: get(r, 5, what)?,
                })
            },
        )
    }

    fn write_totals(&self) -> Result<(u64, u64), StoreError> {
        self.totals("checkpoint_writes", "scanning writes")
    }

    fn write_totals_of(
        &self,
        threads: &[String],
        f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.totals_in("checkpoint_writes", threads, f)
    }

    fn blob_totals_of(
        &self,
        threads: &[String],
        f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.totals_in("checkpoint_blobs", threads, f)
    }

    fn blob_totals(&self) -> Result<(u64, u64), StoreError> {
        self.totals("checkpoint_blobs", "scanning blobs")
    }

    fn values_shared_by_version(&self) -> bool {
        true
    }

    fn checkpoint_times(
        &self,
        thread_id: &str,
    ) -> Result<Option<Vec<crate::store::CheckpointTime>>, StoreError> {
        let rows = self.query(
            "reading checkpoint times",
            "SELECT c.checkpoint_id, c.checkpoint ->> 'ts', \
             (octet_length(c.checkpoint::text) + octet_length(c.metadata::text))::int8, \
             (SELECT count(*) FROM checkpoint_writes w WHERE w.thread_id = c.thread_id \
              AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id) \
             FROM checkpoints c WHERE c.thread_id = $1",
            &[&thread_id],
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            out.push(crate::store::CheckpointTime {
                checkpoint_id: r.try_get(0).unwrap_or_default(),
                ts: r.try_get(1).ok().flatten(),
                bytes: r.try_get::<_, i64>(2).unwrap_or(0).max(0) as u64,
                writes: r.try_get::<_, i64>(3).unwrap_or(0).max(0) as u64,
            });
        }
        Ok(Some(out))
    }

    fn active_run(&self, thread_id: &str) -> Result<bool, StoreError> {
        self.active_run_of(thread_id)
    }

    fn scan_thread_ids(
        &self,
        f: &mut dyn FnMut(String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "listing threads";
        self.cursor(
            what,
            "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id",
            &[],
            2000,
            &mut |r| f(get(r, 0, what)?),
        )
    }

    fn thread_ids_after(&self, after: Option<&str>, n: usize) -> Result<Vec<String>, StoreError> {
        self.thread_ids_page(after, n)
    }

    fn scan_thread_values(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        if let Some(served) =
            crate::store::batch::serve_checkpoints(&self.ahead, thread_id, ns, true, f)
        {
            return served;
        }
        let what = "reading a thread's checkpoints";
        let sql = format!("{POINT_SELECT} WHERE c.thread_id = $1 AND c.checkpoint_ns = $2");
        // Up to one FETCH's rows in one statement; a longer thread is read again.
        let ordered = format!("{sql} ORDER BY c.checkpoint_id");
        if let Some(rows) = self.query_short(what, &ordered, &[thread_id, ns], VALUES_FETCH)? {
            return rows.iter().try_for_each(|r| f(checkpoint_row(r, what)?));
        }
        self.cursor(what, &sql, &[&thread_id, &ns], VALUES_FETCH, &mut |r| {
            f(checkpoint_row(r, what)?)
        })
    }

    fn thread_writes(&self, thread_id: &str, ns: &str) -> Result<Vec<WriteRow>, StoreError> {
        self.thread_writes_later(thread_id, ns)?()
    }

    fn thread_writes_later(
        &self,
        thread_id: &str,
        ns: &str,
    ) -> Result<crate::store::LaterWrites<'_>, StoreError> {
        if let Some(rows) = self.ahead.borrow_mut().take_writes(thread_id, ns) {
            return Ok(Box::new(move || Ok(rows)));
        }
        let (t, n) = (thread_id.to_owned(), ns.to_owned());
        let most = super::short_most(WRITES_FETCH);
        if most == 0 {
            return Ok(Box::new(move || self.writes_by_cursor(&t, &n)));
        }
        // Up to one FETCH's rows in one statement, sent now; more are read again.
        let sql = format!(
            "{} ORDER BY checkpoint_id, task_id, idx LIMIT {}",
            self.writes_sql(),
            most + 1
        );
        let rows = self.query_later(WRITES_WHAT, &sql, &[thread_id, ns])?;
        Ok(Box::new(move || {
            let rows = rows()?;
            if rows.len() <= most {
                return rows.iter().map(|r| write_row(r, WRITES_WHAT)).collect();
            }
            drop(rows);
            self.writes_by_cursor(&t, &n)
        }))
    }

    fn namespaces(&self, thread_id: &str) -> Result<Vec<String>, StoreError> {
        let ahead = self.ahead.borrow();
        if let Some(ns) = ahead.namespaces(thread_id) {
            return Ok(ns);
        }
        ahead.missed(thread_id)?;
        drop(ahead);
        let what = "listing namespaces";
        let mut out: Vec<String> = self
            .query(
                what,
                "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = $1",
                &[&thread_id],
            )?
            .iter()
            .map(|r| get(r, 0, what))
            .collect::<Result<_, _>>()?;
        out.sort();
        Ok(out)
    }

    fn checkpoint_ids_with_prefix(
        &self,
        thread_id: &str,
        ns: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let what = "finding checkpoints by id prefix";
        let limit = limit.to_string();
        self.query(
            what,
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 \
             AND left(checkpoint_id, length($3)) = $3 ORDER BY checkpoint_id LIMIT $4::text::bigint",
            &[&thread_id, &ns, &prefix, &limit],
        )?
        .iter()
        .map(|r| get(r, 0, what))
        .collect()
    }

    fn checkpoints_with_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        let what = "finding checkpoints by id prefix";
        let limit = limit.to_string();
        self.query(
            what,
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints \
             WHERE left(checkpoint_id, length($1)) = $1 ORDER BY checkpoint_id LIMIT $2::text::bigint",
            &[&prefix, &limit],
        )?
        .iter()
        .map(|r| Ok((get(r, 0, what)?, get(r, 1, what)?, get(r, 2, what)?)))
        .collect()
    }

    fn head_id(&self, thread_id: &str, ns: &str) -> Result<Option<String>, StoreError> {
        let what = "finding the head checkpoint";
        self.query(
            what,
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 \
             ORDER BY checkpoint_id DESC LIMIT 1",
            &[&thread_id, &ns],
        )?
        .first()
        .map(|r| get(r, 0, what))
        .transpose()
    }

    fn checkpoint(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
    ) -> Result<Option<CheckpointRow>, StoreError> {
        let what = "reading a checkpoint";
        self.query(
            what,
            &format!(
                "{POINT_SELECT} WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3"
            ),
            &[&thread_id, &ns, &checkpoint_id],
        )?
        .first()
        .map(|r| checkpoint_row(r, what))
        .transpose()
    }

    fn reads_several_at_once(&self) -> bool {
        true
    }

    fn checkpoints_in_window(
        &self,
        keys: &[CheckpointKey],
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // One plain statement: the window is bounded in bytes by its caller.
        self.checkpoints_of(keys, false, f)
    }

    fn checkpoints_at(
        &self,
        keys: &[CheckpointKey],
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // A cursor: a head may be a large full checkpoint; a few rows are held at a time.
        self.checkpoints_of(keys, true, f)
    }

    fn checkpoint_facts_at(
        &self,
        keys: &[CheckpointKey],
        want: FactsWanted,
        f: &mut dyn FnMut(FactsRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.facts_at(keys, want, f)
    }

    fn scan_checkpoints_whole(
        &self,
        max_body: u64,
        f: &mut dyn FnMut(CheckpointMetaRow, Option<FactsRow>) -> Result<(), StoreError>,
    ) -> Result<WholeScan, StoreError> {
        self.scan_facts(max_body, f)
            .map(|()| WholeScan::Read { write_totals: None })
    }

    fn scan_reads_write_bytes(&self) -> bool {
        true
    }

    fn write_bytes_at(&self, keys: &[CheckpointKey]) -> Result<Vec<u64>, StoreError> {
        let what = "counting pending writes";
        let mut out = vec![0; keys.len()];
        if keys.is_empty() {
            return Ok(out);
        }
        let rows = self.query(
            what,
            "SELECT k.o, coalesce(sum(octet_length(w.blob)), 0)::int8 \
             FROM json_to_recordset($1::text::json) AS k(o int8, t text, n text, i text) \
             JOIN checkpoint_writes w ON w.thread_id = k.t AND w.checkpoint_ns = k.n \
             AND w.checkpoint_id = k.i GROUP BY k.o",
            &[&keys_json(keys)],
        )?;
        for r in &rows {
            let o: i64 = get(r, 0, what)?;
            if let Some(slot) = usize::try_from(o).ok().and_then(|o| out.get_mut(o)) {
                *slot = nonneg(get(r, 1, what)?);
            }
        }
        Ok(out)
    }

    fn metadata(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let what = "reading checkpoint metadata";
        self.query(
            what,
            "SELECT metadata::text FROM checkpoints \
             WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
            &[&thread_id, &ns, &checkpoint_id],
        )?
        .first()
        .map(|r| get::<Option<String>>(r, 0, what).map(|m| m.unwrap_or_default().into_bytes()))
        .transpose()
    }

    fn scan_thread(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        if let Some(served) =
            crate::store::batch::serve_checkpoints(&self.ahead, thread_id, ns, false, f)
        {
            return served;
        }
        self.scan_thread_split(thread_id, ns, f)
    }

    fn scan_stored_values(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(crate::store::StoredValue) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.stored_values(thread_id, ns, f)
    }

    fn read_threads(
        &self,
        ids: &[String],
        budget: usize,
        values: bool,
    ) -> Result<Option<Vec<crate::store::batch::ThreadRows>>, StoreError> {
        self.read_thread_batch(ids, budget, values).map(Some)
    }

    fn read_ahead(&self, ids: &[String], budget: usize, values: bool) -> Result<(), StoreError> {
        let read = if ids.is_empty() {
            Vec::new()
        } else {
            self.read_thread_batch(ids, budget, values)?
        };
        *self.ahead.borrow_mut() =
            crate::store::batch::ReadAhead::new(read, values, !ids.is_empty());
        Ok(())
    }

    fn forget_ahead(&self, thread_id: &str) {
        self.ahead.borrow_mut().forget(thread_id);
    }

    fn split_scans(&self, jobs: usize) {
        self.scan_jobs.set(jobs.max(1));
    }

    fn writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        channel: Option<&str>,
    ) -> Result<Vec<WriteRow>, StoreError> {
        let what = "reading pending writes";
        let sql = format!(
            "SELECT checkpoint_id, task_id, {tp}, idx::int8, channel, type, blob \
             FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2 \
             AND checkpoint_id = $3 AND ($4::text IS NULL OR channel = $4::text)",
            tp = self.task_path_expr()
        );
        let rows = self.query(what, &sql, &[&thread_id, &ns, &checkpoint_id, &channel])?;
        let mut out = rows
            .iter()
            .map(|r| write_row(r, what))
            .collect::<Result<Vec<_>, StoreError>>()?;
        sort_writes(&mut out);
        Ok(out)
    }

    fn write_totals_by_checkpoint(
        &self,
        thread_id: &str,
        ns: &str,
    ) -> Result<Vec<CheckpointWriteTotals>, StoreError> {
        let what = "counting pending writes";
        self.query(
            what,
            "SELECT checkpoint_id, count(*)::int8, coalesce(sum(octet_length(blob)), 0)::int8 \
             FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2 GROUP BY checkpoint_id",
            &[&thread_id, &ns],
        )?
        .iter()
        .map(|r| {
            Ok(CheckpointWriteTotals {
                checkpoint_id: get(r, 0, what)?,
                writes: nonneg(get(r, 1, what)?),
                bytes: nonneg(get(r, 2, what)?),
            })
        })
        .collect()
    }
}
