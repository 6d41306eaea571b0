//! Row deletions of `dfck prune`, run inside the write engine's per-thread transaction:
//! checkpoints with the writes stored on them, a whole thread, and the thread's orphans
//! (writes on no checkpoint; on PostgreSQL also blobs that no remaining checkpoint's
//! `channel_versions` names — a blob is shared by every checkpoint at its version, so it
//! is never deleted while one of them is kept). See `docs/prune.md`.

use super::WriteStore;
use super::sqlite::SqliteStore;
use super::{CheckpointBody, Store};
use crate::codec::{self, EXT_DELTA_SNAPSHOT, Value};
use crate::error::StoreError;
use rusqlite::params;
use std::collections::HashMap;

/// Rows (and their logical bytes) deleted or counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RowCounts {
    /// `checkpoints` rows.
    pub checkpoints: u64,
    /// `writes` / `checkpoint_writes` rows.
    pub writes: u64,
    /// `checkpoint_blobs` rows (PostgreSQL).
    pub blobs: u64,
    /// Bytes of the stored values (checkpoint bodies and metadata, write and blob values).
    pub bytes: u64,
}

impl RowCounts {
    /// Every row counted.
    pub fn rows(&self) -> u64 {
        self.checkpoints + self.writes + self.blobs
    }

    /// Adds `o` to `self`.
    pub fn add(&mut self, o: RowCounts) {
        self.checkpoints += o.checkpoints;
        self.writes += o.writes;
        self.blobs += o.blobs;
        self.bytes += o.bytes;
    }
}

/// A count (or a deletion's) sent and not yet read: its rows, read when called
/// ([`DeleteRows::count_orphans_later`], [`DeleteRows::delete_checkpoints`]).
pub type LaterCount<'a> = Box<dyn FnOnce() -> Result<RowCounts, StoreError> + 'a>;

/// Counts (or deletions) of several threads sent and not yet read: each thread's rows (a
/// thread without any has no entry), read when called ([`DeleteRows::delete_together`]).
pub type LaterCounts<'a> = Box<dyn FnOnce() -> Result<HashMap<String, RowCounts>, StoreError> + 'a>;

/// What [`DeleteRows::orphans_together`] does with the threads' orphans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orphans {
    /// Counts them.
    Count,
    /// Deletes them.
    Delete,
    /// Counts them again, after [`Orphans::Count`] and the deletions, in the same
    /// transaction.
    Recount,
}

/// Checkpoints of one thread's namespace to delete together with others': (thread,
/// namespace, checkpoint ids).
pub type ThreadCheckpoints<'a> = (&'a str, &'a str, &'a [String]);

/// The deletions a prune makes, per backend.
pub trait DeleteRows: WriteStore {
    /// Deletes checkpoints of one namespace and the writes stored on them; the rows it
    /// deleted are read when the returned closure is called (PostgreSQL sends the
    /// statement at once and reads its answer then, so the deletions of a thread share a
    /// round trip). A failure shows in the statement that follows, or in the closure.
    fn delete_checkpoints(
        &self,
        thread_id: &str,
        ns: &str,
        ids: &[String],
    ) -> Result<LaterCount<'_>, StoreError>;
    /// Deletes every row of a thread, in every namespace.
    fn delete_thread(&self, thread_id: &str) -> Result<RowCounts, StoreError>;
    /// Deletes the thread's orphans; the rows deleted are read as those of
    /// [`Self::delete_checkpoints`] are.
    fn delete_orphans(&self, thread_id: &str) -> Result<LaterCount<'_>, StoreError>;
    /// Counts the thread's orphans.
    fn count_orphans(&self, thread_id: &str) -> Result<RowCounts, StoreError>;
    /// [`Self::count_orphans`] of the rows as they are now, read when the returned closure
    /// is called, whatever this connection changes meanwhile: PostgreSQL sends the count at
    /// once and reads its answer then, so it costs no round trip of its own.
    fn count_orphans_later(&self, thread_id: &str) -> Result<LaterCount<'_>, StoreError> {
        let counted = self.count_orphans(thread_id)?;
        Ok(Box::new(move || Ok(counted)))
    }
    /// Deletes, for several threads at once, the `checkpoints` with the writes stored on
    /// them, and every row of each `whole` thread: the rows deleted per thread, read when
    /// the closure is called (PostgreSQL: one statement for all of them).
    fn delete_together(
        &self,
        checkpoints: &[ThreadCheckpoints<'_>],
        whole: &[&str],
    ) -> Result<LaterCounts<'_>, StoreError> {
        let mut out: HashMap<String, RowCounts> = HashMap::new();
        for (thread_id, ns, ids) in checkpoints {
            let rows = self.delete_checkpoints(thread_id, ns, ids)?()?;
            out.entry((*thread_id).to_owned()).or_default().add(rows);
        }
        for thread_id in whole {
            let rows = self.delete_thread(thread_id)?;
            out.entry((*thread_id).to_owned()).or_default().add(rows);
        }
        Ok(Box::new(move || Ok(out)))
    }
    /// Counts or deletes the orphans of several threads at once, read as
    /// [`Self::delete_together`]'s are; a count sees the rows as they are when it is made.
    fn orphans_together(&self, ids: &[&str], step: Orphans) -> Result<LaterCounts<'_>, StoreError> {
        let mut out: HashMap<String, RowCounts> = HashMap::new();
        for thread_id in ids {
            let rows = match step {
                Orphans::Delete => self.delete_orphans(thread_id)?()?,
                Orphans::Count | Orphans::Recount => self.count_orphans(thread_id)?,
            };
            out.insert((*thread_id).to_owned(), rows);
        }
        Ok(Box::new(move || Ok(out)))
    }
    /// Makes a checkpoint a root (no parent). With `messages`, it also stores that list
    /// as a `_DeltaSnapshot` of the `messages` channel at the checkpoint's version, so
    /// delta replay starts there.
    fn make_root(
        &self,
        thread_id: &str,
        ns: &str,
        id: &str,
        messages: Option<&[Value]>,
    ) -> Result<(), StoreError>;
}

/// `list` as LangGraph's `_DeltaSnapshot` (ext 7 around the list).
pub fn snapshot_of(list: &[Value]) -> Value {
    Value::new_ext(EXT_DELTA_SNAPSHOT, Value::Array(list.to_vec()))
}

fn q(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Query {
        what: what.to_owned(),
        reason: e.to_string(),
    }
}

const SQLITE_ORPHAN_WRITES: &str = "FROM writes w WHERE w.thread_id = ?1 AND NOT EXISTS \
    (SELECT 1 FROM checkpoints c WHERE c.thread_id = w.thread_id \
     AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)";

impl SqliteStore {
    fn sum_rows(&self, sql: &str, args: &[&dyn rusqlite::ToSql]) -> Result<(u64, u64), StoreError> {
        let what = "deleting rows";
        let mut st = self.conn.prepare_cached(sql).map_err(q(what))?;
        let mut rows = st.query(args).map_err(q(what))?;
        let (mut n, mut bytes) = (0u64, 0u64);
        while let Some(r) = rows.next().map_err(q(what))? {
            n += 1;
            bytes += r
                .get::<_, Option<i64>>(0)
                .map_err(q(what))?
                .unwrap_or(0)
                .max(0) as u64;
        }
        Ok((n, bytes))
    }
}

impl DeleteRows for SqliteStore {
    fn delete_checkpoints(
        &self,
        thread_id: &str,
        ns: &str,
        ids: &[String],
    ) -> Result<LaterCount<'_>, StoreError> {
        let mut out = RowCounts::default();
        for id in ids {
            let (n, b) = self.sum_rows(
                "DELETE FROM writes WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3 \
                 RETURNING length(value)",
                &[&thread_id, &ns, id],
            )?;
            out.writes += n;
            out.bytes += b;
            let (n, b) = self.sum_rows(
                "DELETE FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3 \
                 RETURNING length(checkpoint) + length(metadata)",
                &[&thread_id, &ns, id],
            )?;
            out.checkpoints += n;
            out.bytes += b;
        }
        Ok(Box::new(move || Ok(out)))
    }

    fn delete_thread(&self, thread_id: &str) -> Result<RowCounts, StoreError> {
        let (writes, wb) = self.sum_rows(
            "DELETE FROM writes WHERE thread_id = ?1 RETURNING length(value)",
            &[&thread_id],
        )?;
        let (checkpoints, cb) = self.sum_rows(
            "DELETE FROM checkpoints WHERE thread_id = ?1 \
             RETURNING length(checkpoint) + length(metadata)",
            &[&thread_id],
        )?;
        Ok(RowCounts {
            checkpoints,
            writes,
            blobs: 0,
            bytes: wb + cb,
        })
    }

    fn delete_orphans(&self, thread_id: &str) -> Result<LaterCount<'_>, StoreError> {
        let (writes, bytes) = self.sum_rows(
            &format!(
                "DELETE FROM writes WHERE rowid IN (SELECT w.rowid {SQLITE_ORPHAN_WRITES}) \
                 RETURNING length(value)"
            ),
            &[&thread_id],
        )?;
        let out = RowCounts {
            writes,
            bytes,
            ..RowCounts::default()
        };
        Ok(Box::new(move || Ok(out)))
    }

    fn count_orphans(&self, thread_id: &str) -> Result<RowCounts, StoreError> {
        let (writes, bytes): (i64, i64) = self
            .conn
            .prepare_cached(&format!(
                "SELECT count(*), coalesce(sum(length(w.value)), 0) {SQLITE_ORPHAN_WRITES}"
            ))
            .and_then(|mut st| st.query_row(params![thread_id], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(q("counting orphan writes"))?;
        Ok(RowCounts {
            writes: writes.max(0) as u64,
            bytes: bytes.max(0) as u64,
            ..RowCounts::default()
        })
    }

    fn make_root(
        &self,
        thread_id: &str,
        ns: &str,
        id: &str,
        messages: Option<&[Value]>,
    ) -> Result<(), StoreError> {
        let body = match messages {
            None => None,
            Some(list) => {
                let row = self.checkpoint(thread_id, ns, id)?.ok_or_else(|| {
                    StoreError::CheckpointNotFound {
                        thread_id: thread_id.to_owned(),
                        checkpoint_ns: ns.to_owned(),
                        checkpoint_id: id.to_owned(),
                    }
                })?;
                let CheckpointBody::Serialized { type_tag, bytes } = row.body else {
                    return Err(StoreError::Query {
                        what: "rewriting a checkpoint".into(),
                        reason: "not a SQLite checkpoint".into(),
                    });
                };
                let decoding = |reason: String| StoreError::Query {
                    what: format!("decoding checkpoint {id}"),
                    reason,
                };
                // Encrypted checkpoints are rewritten encrypted (docs/security.md#writes).
                let opened = codec::aes::open(type_tag.as_deref(), bytes.into())
                    .map_err(|e| decoding(e.to_string()))?;
                if opened.tag.as_deref() != Some("msgpack") {
                    return Err(decoding(format!("serializer type {type_tag:?}")));
                }
                let body = codec::decode(&opened.bytes).map_err(|e| decoding(e.to_string()))?;
                let plain = codec::encode(&with_messages(body, snapshot_of(list)));
                Some(
                    opened
                        .protection
                        .for_write()
                        .seal("msgpack", plain)
                        .map_err(|e| decoding(e.to_string()))?,
                )
            }
        };
        let n = match body {
            Some((tag, b)) => self.conn.execute(
                "UPDATE checkpoints SET parent_checkpoint_id = NULL, checkpoint = ?1, type = ?5 \
                 WHERE thread_id = ?2 AND checkpoint_ns = ?3 AND checkpoint_id = ?4",
                params![b, thread_id, ns, id, tag],
            ),
            None => self.conn.execute(
                "UPDATE checkpoints SET parent_checkpoint_id = NULL \
                 WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3",
                params![thread_id, ns, id],
            ),
        }
        .map_err(q("making a checkpoint a root"))?;
        if n != 1 {
            return Err(StoreError::CheckpointNotFound {
                thread_id: thread_id.to_owned(),
                checkpoint_ns: ns.to_owned(),
                checkpoint_id: id.to_owned(),
            });
        }
        Ok(())
    }
}

/// A decoded checkpoint body with `channel_values.messages` set to `v`.
fn with_messages(body: Value, v: Value) -> Value {
    let Value::Map(mut entries) = body else {
        return body;
    };
    for (k, cv) in entries.iter_mut() {
        if k.as_str() != Some("channel_values") {
            continue;
        }
        if let Value::Map(values) = cv {
            match values
                .iter()
                .position(|(c, _)| c.as_str() == Some("messages"))
            {
                Some(i) => values[i].1 = v,
                None => values.push((Value::Str("messages".into()), v)),
            }
        }
        break;
    }
    Value::Map(entries)
}
