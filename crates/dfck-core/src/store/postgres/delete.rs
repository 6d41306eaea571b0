//! The PostgreSQL half of [`DeleteRows`]: deletions inside the thread's write transaction.
//! A `checkpoint_blobs` row is an orphan when no checkpoint of its (thread, namespace)
//! names its version for its channel: blobs are shared by version (a duration-only clone
//! has its parent's versions), so they are never deleted by the deleted checkpoint's
//! versions, only by reference count (`docs/prune.md`).

use super::PostgresStore;
use super::batch::json_list;
use crate::codec::{self, Value};
use crate::error::StoreError;
use crate::store::delete::{DeleteRows, LaterCount, RowCounts, snapshot_of};
use tokio_postgres::types::{ToSql, Type};

const ORPHAN_WRITES: &str = "FROM checkpoint_writes w WHERE w.thread_id = $1 AND NOT EXISTS \
    (SELECT 1 FROM checkpoints c WHERE c.thread_id = w.thread_id \
     AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)";

const ORPHAN_BLOBS: &str = "FROM checkpoint_blobs b WHERE b.thread_id = $1 AND NOT EXISTS \
    (SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id \
     AND c.checkpoint_ns = b.checkpoint_ns \
     AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)";

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
