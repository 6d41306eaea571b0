//! The PostgreSQL half of [`DeleteRows`]: deletions inside the thread's write transaction.
//! A `checkpoint_blobs` row is an orphan when no checkpoint of its (thread, namespace)
//! names its version for its channel: blobs are shared by version (a duration-only clone
//! has its parent's versions), so they are never deleted by the deleted checkpoint's
//! versions, only by reference count (`docs/prune.md`).

use super::PostgresStore;
use super::batch::json_list;
use crate::codec::{self, Value};
use crate::error::StoreError;
use crate::store::delete::{
    DeleteRows, LaterCount, LaterCounts, Orphans, RowCounts, ThreadCheckpoints, snapshot_of,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio_postgres::types::{ToSql, Type};

/// Deletions of threads written together sent by this process (the `together-fail`
/// failpoint counts them).
static TOGETHER: AtomicU64 = AtomicU64::new(0);

/// A `checkpoint_writes w` row no checkpoint holds.
macro_rules! write_orphaned {
    () => {
        "NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = w.thread_id \
         AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)"
    };
}

/// A `checkpoint_blobs b` row no checkpoint of its namespace names.
macro_rules! blob_orphaned {
    () => {
        "NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id \
         AND c.checkpoint_ns = b.checkpoint_ns \
         AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
    };
}

/// The threads of `$1`, a JSON array of ids, in an index scan (as a batch read selects).
macro_rules! of_threads {
    ($t:literal) => {
        concat!(
            $t,
            ".thread_id = ANY(ARRAY(SELECT json_array_elements_text($1::text::json)))"
        )
    };
}

const ORPHAN_WRITES: &str = concat!(
    "FROM checkpoint_writes w WHERE w.thread_id = $1 AND ",
    write_orphaned!()
);

const ORPHAN_BLOBS: &str = concat!(
    "FROM checkpoint_blobs b WHERE b.thread_id = $1 AND ",
    blob_orphaned!()
);

/// The orphans of the threads `$1` (a JSON array), as `(kind, thread_id, bytes)`: 0 for a
/// write, 1 for a blob.
const ORPHANS_OF: &str = concat!(
    "SELECT 0 AS kind, w.thread_id, length(w.blob)::int8 AS n FROM checkpoint_writes w WHERE ",
    of_threads!("w"),
    " AND ",
    write_orphaned!(),
    " UNION ALL SELECT 1, b.thread_id, coalesce(length(b.blob), 0)::int8 \
     FROM checkpoint_blobs b WHERE ",
    of_threads!("b"),
    " AND ",
    blob_orphaned!()
);

/// Deletes the orphans of the threads `$1`, as [`ORPHANS_OF`] counts them (the `WITH`
/// parts, then the rows of [`DELETED_ORPHANS`]).
const DELETE_ORPHANS_OF: &str = concat!(
    "WITH dw AS (DELETE FROM checkpoint_writes w WHERE ",
    of_threads!("w"),
    " AND ",
    write_orphaned!(),
    " RETURNING w.thread_id, length(w.blob)::int8 n), \
     db AS (DELETE FROM checkpoint_blobs b WHERE ",
    of_threads!("b"),
    " AND ",
    blob_orphaned!(),
    " RETURNING b.thread_id, coalesce(length(b.blob), 0)::int8 n)"
);

const DELETED_ORPHANS: &str =
    "SELECT 0 AS kind, thread_id, n FROM dw UNION ALL SELECT 1, thread_id, n FROM db";

/// Rows `(kind, thread_id, bytes)` summed per kind and thread, on the server, after the
/// `with` parts (data-modifying ones stay at the top level).
fn per_thread(with: &str, rows: &str) -> String {
    format!(
        "{with} SELECT kind, thread_id, count(*)::int8, coalesce(sum(n), 0)::int8 \
         FROM ({rows}) x GROUP BY 1, 2"
    )
}

impl PostgresStore {
    /// Runs one statement whose rows are (kind, bytes), `kind` in `0..N` (the data-modifying
    /// `WITH` parts of several deletions, or the `UNION ALL` of several counts: one round
    /// trip), and sums the rows and bytes of each kind.
    fn sum_kinds<const N: usize>(
        &self,
        what: &str,
        sql: &str,
        args: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<[(u64, u64); N], StoreError> {
        self.sum_rows(what, &self.query_reused(what, sql, args)?)
    }

    /// The sums of [`Self::sum_kinds`] over rows already read.
    fn sum_rows<const N: usize>(
        &self,
        what: &str,
        rows: &[tokio_postgres::Row],
    ) -> Result<[(u64, u64); N], StoreError> {
        let mut out = [(0u64, 0u64); N];
        for r in rows {
            let kind = r.try_get::<_, i32>(0).map_err(|e| self.err(what, e))?;
            let bytes = r
                .try_get::<_, Option<i64>>(1)
                .ok()
                .flatten()
                .unwrap_or(0)
                .max(0) as u64;
            if let Some(slot) = usize::try_from(kind).ok().and_then(|k| out.get_mut(k)) {
                slot.0 += 1;
                slot.1 += bytes;
            }
        }
        Ok(out)
    }
}

impl PostgresStore {
    /// Sends `sql`, whose rows are (0 for a write, 1 for a blob; bytes), for `thread_id`
    /// ($1): the rows it counts, read when the closure is called.
    fn orphans_later(
        &self,
        what: &'static str,
        sql: &str,
        thread_id: &str,
    ) -> Result<LaterCount<'_>, StoreError> {
        let rows = self.query_later(what, sql, &[thread_id])?;
        Ok(Box::new(move || {
            let [(writes, wb), (blobs, bb)] = self.sum_rows(what, &rows()?)?;
            Ok(RowCounts {
                checkpoints: 0,
                writes,
                blobs,
                bytes: wb + bb,
            })
        }))
    }
}

impl PostgresStore {
    /// Sends `sql`, whose rows are (kind, thread_id, rows, bytes) with kind 0 for writes, 1
    /// for blobs and 2 for checkpoints: each thread's counts, read when the closure is
    /// called.
    fn per_thread_later(
        &self,
        what: &'static str,
        sql: &str,
        params: &[&str],
    ) -> Result<LaterCounts<'_>, StoreError> {
        let rows = self.query_later(what, sql, params)?;
        Ok(Box::new(move || {
            let mut out: HashMap<String, RowCounts> = HashMap::new();
            for r in rows()? {
                let get = |i| r.try_get::<_, i64>(i).map(|v| v.max(0) as u64);
                let (kind, thread_id, n, bytes) = (
                    r.try_get::<_, i32>(0),
                    r.try_get::<_, String>(1),
                    get(2),
                    get(3),
                );
                let (kind, thread_id, n, bytes) = (|| Ok((kind?, thread_id?, n?, bytes?)))()
                    .map_err(|e: tokio_postgres::Error| self.err(what, e))?;
                let counts = out.entry(thread_id).or_default();
                match kind {
                    0 => counts.writes += n,
                    1 => counts.blobs += n,
                    _ => counts.checkpoints += n,
                }
                counts.bytes += bytes;
            }
            Ok(out)
        }))
    }
}

/// What a deleted (or counted) row of each table weighs, as `RETURNING` gives it.
const WRITE_BYTES: &str = "length(blob)::int8";
const BLOB_BYTES: &str = "coalesce(length(blob), 0)::int8";
const CHECKPOINT_BYTES: &str =
    "(octet_length(checkpoint::text) + octet_length(metadata::text))::int8";

impl DeleteRows for PostgresStore {
    fn delete_checkpoints(
        &self,
        thread_id: &str,
        ns: &str,
        ids: &[String],
    ) -> Result<LaterCount<'_>, StoreError> {
        const WHAT: &str = "deleting checkpoints and their writes";
        let keys = "thread_id = $1 AND checkpoint_ns = $2 \
            AND checkpoint_id = ANY(ARRAY(SELECT json_array_elements_text($3::text::json)))";
        let rows = self.query_later(
            WHAT,
            &format!(
                "WITH dw AS (DELETE FROM checkpoint_writes WHERE {keys} RETURNING {WRITE_BYTES} n), \
                 dc AS (DELETE FROM checkpoints WHERE {keys} RETURNING {CHECKPOINT_BYTES} n) \
                 SELECT 0, n FROM dw UNION ALL SELECT 1, n FROM dc"
            ),
            &[thread_id, ns, &json_list(ids.iter())],
        )?;
        Ok(Box::new(move || {
            let [(writes, wb), (checkpoints, cb)] = self.sum_rows(WHAT, &rows()?)?;
            Ok(RowCounts {
                checkpoints,
                writes,
                blobs: 0,
                bytes: wb + cb,
            })
        }))
    }

    fn delete_thread(&self, thread_id: &str) -> Result<RowCounts, StoreError> {
        let args: [(&(dyn ToSql + Sync), Type); 1] = [(&thread_id, Type::TEXT)];
        let [(writes, wb), (blobs, bb), (checkpoints, cb)] = self.sum_kinds(
            "deleting the thread",
            &format!(
                "WITH dw AS (DELETE FROM checkpoint_writes WHERE thread_id = $1 \
                    RETURNING {WRITE_BYTES} n), \
                 db AS (DELETE FROM checkpoint_blobs WHERE thread_id = $1 RETURNING {BLOB_BYTES} n), \
                 dc AS (DELETE FROM checkpoints WHERE thread_id = $1 RETURNING {CHECKPOINT_BYTES} n) \
                 SELECT 0, n FROM dw UNION ALL SELECT 1, n FROM db UNION ALL SELECT 2, n FROM dc"
            ),
            &args,
        )?;
        Ok(RowCounts {
            checkpoints,
            writes,
            blobs,
            bytes: wb + bb + cb,
        })
    }

    fn delete_orphans(&self, thread_id: &str) -> Result<LaterCount<'_>, StoreError> {
        self.orphans_later(
            "deleting orphan rows",
            &format!(
                "WITH dw AS (DELETE FROM checkpoint_writes WHERE ctid IN (SELECT w.ctid {ORPHAN_WRITES}) \
                    RETURNING {WRITE_BYTES} n), \
                 db AS (DELETE FROM checkpoint_blobs WHERE ctid IN (SELECT b.ctid {ORPHAN_BLOBS}) \
                    RETURNING {BLOB_BYTES} n) \
                 SELECT 0, n FROM dw UNION ALL SELECT 1, n FROM db"
            ),
            thread_id,
        )
    }

    fn count_orphans(&self, thread_id: &str) -> Result<RowCounts, StoreError> {
        self.count_orphans_later(thread_id)?()
    }

    fn count_orphans_later(&self, thread_id: &str) -> Result<LaterCount<'_>, StoreError> {
        self.orphans_later(
            "counting orphan rows",
            &format!(
                "SELECT 0, length(w.blob)::int8 {ORPHAN_WRITES} \
                 UNION ALL SELECT 1, coalesce(length(b.blob), 0)::int8 {ORPHAN_BLOBS}"
            ),
            thread_id,
        )
    }

    fn delete_together(
        &self,
        checkpoints: &[ThreadCheckpoints<'_>],
        whole: &[&str],
    ) -> Result<LaterCounts<'_>, StoreError> {
        // $1: the threads with checkpoints to delete, for the index scan; $2: the keys,
        // `[thread, namespace, id]` each; $3: the threads deleted whole.
        let keys = "thread_id = ANY(ARRAY(SELECT json_array_elements_text($1::text::json))) \
            AND (thread_id, checkpoint_ns, checkpoint_id) IN \
            (SELECT e ->> 0, e ->> 1, e ->> 2 FROM json_array_elements($2::text::json) e)";
        let whole_of = "thread_id = ANY(ARRAY(SELECT json_array_elements_text($3::text::json)))";
        let sql = per_thread(
            &format!(
                "WITH dw AS (DELETE FROM checkpoint_writes WHERE {keys} \
                RETURNING thread_id, {WRITE_BYTES} n), \
             dc AS (DELETE FROM checkpoints WHERE {keys} RETURNING thread_id, {CHECKPOINT_BYTES} n), \
             tw AS (DELETE FROM checkpoint_writes WHERE {whole_of} \
                RETURNING thread_id, {WRITE_BYTES} n), \
             tb AS (DELETE FROM checkpoint_blobs WHERE {whole_of} RETURNING thread_id, {BLOB_BYTES} n), \
             tc AS (DELETE FROM checkpoints WHERE {whole_of} \
                RETURNING thread_id, {CHECKPOINT_BYTES} n)"
            ),
            "SELECT 0 AS kind, thread_id, n FROM dw UNION ALL SELECT 2, thread_id, n FROM dc \
             UNION ALL SELECT 0, thread_id, n FROM tw UNION ALL SELECT 1, thread_id, n FROM tb \
             UNION ALL SELECT 2, thread_id, n FROM tc",
        );
        let threads = json_list(checkpoints.iter().map(|(t, _, _)| *t));
        let keys = serde_json::Value::Array(
            checkpoints
                .iter()
                .flat_map(|(t, ns, ids)| {
                    ids.iter()
                        .map(move |id| serde_json::Value::from(vec![*t, *ns, id.as_str()]))
                })
                .collect(),
        )
        .to_string();
        let whole = json_list(whole.iter().copied());
        let n = TOGETHER.fetch_add(1, Ordering::Relaxed) + 1;
        let sql = if crate::failpoint::Failpoints::from_env("write").together_fails(n) {
            "SELECT $1::text, $2::text, $3::text FROM dfck_no_such_table".into()
        } else {
            sql
        };
        self.per_thread_later(
            "deleting the group's checkpoints and threads",
            &sql,
            &[&threads, &keys, &whole],
        )
    }

    fn orphans_together(&self, ids: &[&str], step: Orphans) -> Result<LaterCounts<'_>, StoreError> {
        let list = json_list(ids.iter().copied());
        let (what, sql) = match step {
            Orphans::Delete => (
                "deleting the group's orphan rows",
                per_thread(DELETE_ORPHANS_OF, DELETED_ORPHANS),
            ),
            Orphans::Count => (
                "counting the group's orphan rows",
                per_thread("", ORPHANS_OF),
            ),
            // Another text: the same one again would be prepared (`query_reused`), which
            // waits for every answer sent before it.
            Orphans::Recount => (
                "counting the group's orphan rows left",
                per_thread("", ORPHANS_OF) + " /* left */",
            ),
        };
        self.per_thread_later(what, &sql, &[&list])
    }

    fn make_root(
        &self,
        thread_id: &str,
        ns: &str,
        id: &str,
        messages: Option<&[Value]>,
    ) -> Result<(), StoreError> {
        let snapshot = messages.is_some();
        let n = self
            .rt
            .block_on(self.client.execute_typed(
                "UPDATE checkpoints SET parent_checkpoint_id = NULL, checkpoint = CASE WHEN $4 \
                 THEN jsonb_set(checkpoint, '{channel_values,messages}', 'true'::jsonb, true) \
                 ELSE checkpoint END \
                 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&id, Type::TEXT),
                    (&snapshot, Type::BOOL),
                ],
            ))
            .map_err(|e| self.err("making a checkpoint a root", e))?;
        if n != 1 {
            return Err(StoreError::CheckpointNotFound {
                thread_id: thread_id.to_owned(),
                checkpoint_ns: ns.to_owned(),
                checkpoint_id: id.to_owned(),
            });
        }
        let Some(list) = messages else {
            return Ok(());
        };
        let version: Option<String> = self
            .rt
            .block_on(self.client.query_opt(
                "SELECT checkpoint -> 'channel_versions' ->> 'messages' FROM checkpoints \
                 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
                &[&thread_id, &ns, &id],
            ))
            .map_err(|e| self.err("reading a checkpoint's versions", e))?
            .and_then(|r| r.get(0));
        let Some(version) = version else {
            return Ok(());
        };
        let blob = codec::encode(&snapshot_of(list));
        self.upsert_messages_blob(thread_id, ns, &version, &blob)
    }
}
