//! Applying `migrate full-to-delta` through the write engine: the [`FullToDelta`] job (plan
//! under the lock, rewrite, verify every checkpoint's state) and [`DeltaStore`], the rows a
//! rewrite touches on each backend.

use super::decide::{MessagesAction, NodeChange, delta_encoded};
use super::{ThreadWork, ToDeltaOptions, ToDeltaStatus, ToDeltaThread, plan_one};
use crate::commands::migrate::apply::py_json;
use crate::commands::migrate::state::{StateFingerprints, compare, fingerprints, values_at};
use dfck_core::codec::{self, EXT_DELTA_SNAPSHOT, Value};
use dfck_core::error::{Error, StoreError};
use dfck_core::materialize::Reducer;
use dfck_core::model::MESSAGES;
use dfck_core::model::thread::{LoadedThread, Metadata};
use dfck_core::store::postgres::PostgresStore;
use dfck_core::store::sqlite::SqliteStore;
use dfck_core::store::{PlanStore, WriteStore};
use dfck_core::write::{ApplyContext, Planned, Refusal, ThreadJob, ThreadPlan};
use serde_json::Value as Json;
use std::collections::HashSet;

fn refusal(e: impl std::fmt::Display) -> Refusal {
    Refusal(e.to_string())
}

/// The backend half of a full→delta rewrite.
pub trait DeltaStore: WriteStore {
    /// Rewrites one checkpoint: `messages` per `action`, the metadata replaced.
    fn rewrite_delta(&self, thread_id: &str, ns: &str, change: &NodeChange) -> Result<(), Refusal>;

    /// Where values live apart from checkpoints (Postgres blobs, shared by version): the
    /// blob at `version` becomes a `_DeltaSnapshot` of `list` (`Some`) or goes (`None`).
    fn store_version(
        &self,
        _thread_id: &str,
        _ns: &str,
        _version: &str,
        _list: Option<&Value>,
    ) -> Result<(), Refusal> {
        Ok(())
    }

    /// Whether values are shared by version (then [`DeltaStore::store_version`] is used).
    fn shares_versions(&self) -> bool {
        false
    }
}

fn snapshot_of(list: &Value) -> Value {
    Value::new_ext(EXT_DELTA_SNAPSHOT, list.clone())
}

impl DeltaStore for SqliteStore {
    fn rewrite_delta(&self, thread_id: &str, ns: &str, change: &NodeChange) -> Result<(), Refusal> {
        use dfck_core::store::Store;
        let id = &change.id;
        let row = self
            .checkpoint(thread_id, ns, id)
            .map_err(refusal)?
            .ok_or_else(|| Refusal(format!("checkpoint {id} vanished")))?;
        let dfck_core::store::CheckpointBody::Serialized { type_tag, bytes } = row.body else {
            return Err(Refusal("not a SQLite checkpoint".into()));
        };
        let bytes = crate::commands::migrate::apply::msgpack_body(id, type_tag.as_deref(), bytes)?;
        let edit = match change.action {
            MessagesAction::Unversioned => None,
            MessagesAction::Drop => Some(codec::MessagesEdit::Remove),
            MessagesAction::Snapshot(_) => Some(codec::MessagesEdit::Wrap(EXT_DELTA_SNAPSHOT)),
        };
        // The bytes were validated when the thread was planned, under this transaction's
        // lock: `messages` is cut out or wrapped where it sits, every other byte kept.
        let spliced = match edit {
            Some(e) => codec::edit_checkpoint_messages(&bytes, e).map_err(refusal)?,
            None => Some(bytes.to_vec()),
        };
        let body = match spliced {
            Some(b) => b,
            None => reencoded(id, &bytes, change.action)?,
        };
        let meta = py_json(&change.metadata).map_err(refusal)?;
        self.update_checkpoint(thread_id, ns, id, &body, &meta)
            .map_err(refusal)
    }
}

/// A checkpoint body rewritten through its decoded form (the shapes
/// [`codec::edit_checkpoint_messages`] leaves alone): every `messages` value of
/// `channel_values` dropped or wrapped.
fn reencoded(id: &str, bytes: &[u8], action: MessagesAction) -> Result<Vec<u8>, Refusal> {
    let Value::Map(mut entries) = codec::decode(bytes).map_err(refusal)? else {
        return Err(Refusal(format!("checkpoint {id} is not a map")));
    };
    for (k, v) in entries.iter_mut() {
        if k.as_str() != Some("channel_values") {
            continue;
        }
        let Value::Map(cv) = v else { continue };
        let Some(pos) = cv.iter().position(|(c, _)| c.as_str() == Some(MESSAGES)) else {
            continue;
        };
        match action {
            MessagesAction::Drop => {
                cv.remove(pos);
            }
            MessagesAction::Snapshot(_) => cv[pos].1 = snapshot_of(&cv[pos].1),
            MessagesAction::Unversioned => {}
        }
    }
    Ok(codec::encode(&Value::Map(entries)))
}

impl DeltaStore for PostgresStore {
    fn rewrite_delta(&self, thread_id: &str, ns: &str, change: &NodeChange) -> Result<(), Refusal> {
        let inline = match change.action {
            MessagesAction::Unversioned => None,
            MessagesAction::Drop => Some(false),
            MessagesAction::Snapshot(_) => Some(true),
        };
        self.rewrite_checkpoint_delta(
            thread_id,
            ns,
            &change.id,
            inline,
            &Json::Object(change.metadata.clone()),
        )
        .map_err(refusal)
    }

    fn store_version(
        &self,
        thread_id: &str,
        ns: &str,
        version: &str,
        list: Option<&Value>,
    ) -> Result<(), Refusal> {
        match list {
            Some(l) => {
                let blob = codec::encode(&snapshot_of(l));
                self.upsert_messages_blob(thread_id, ns, version, &blob)
                    .map_err(refusal)
            }
            None => self
                .delete_messages_blob(thread_id, ns, version)
                .map_err(refusal),
        }
    }

    fn shares_versions(&self) -> bool {
        true
    }
}

/// `migrate full-to-delta` as a write-engine job.
pub struct FullToDelta<'a> {
    /// The conversion's options.
    pub opts: &'a ToDeltaOptions,
}

/// What apply hands to verify.
pub struct Rewritten {
    rewritten: usize,
    /// Per namespace: the checkpoints rewritten, and every checkpoint's state before.
    state: Vec<(String, HashSet<String>, StateFingerprints)>,
    reducer: Reducer,
}

/// What plan hands to apply.
pub struct Work {
    work: ThreadWork,
}

impl<C: PlanStore + ?Sized> ThreadPlan<C> for FullToDelta<'_> {
    type Report = ToDeltaThread;
    type Work = Work;

    fn name(&self) -> &'static str {
        "full-to-delta"
    }

    fn verb(&self) -> &'static str {
        "converting"
    }

    fn untouched(&self, thread_id: &str) -> ToDeltaThread {
        ToDeltaThread::new(thread_id)
    }

    fn refuse(&self, report: ToDeltaThread, reason: Refusal) -> ToDeltaThread {
        report.refused(reason.0)
    }

    /// Every thread is loaded whole with its values (`preamble::load`).
    fn reads_whole_threads(&self) -> Option<bool> {
        Some(true)
    }

    fn plan(&self, conn: &C, thread_id: &str) -> Result<Planned<ToDeltaThread, Work>, Error> {
        let work = match plan_one(conn.store(), thread_id, self.opts) {
            Ok(w) => w,
            Err(Error::Store(StoreError::ThreadNotFound { .. })) => {
                let mut r = ToDeltaThread::new(thread_id);
                r.reason = Some("thread no longer exists".into());
                return Ok(Planned::Done(r));
            }
            Err(e) => return Err(e),
        };
        if work.report.status != ToDeltaStatus::Would {
            return Ok(Planned::Done(work.report));
        }
        let report = work.report.clone();
        // The rewrite shrinks the store; the log holds the rewritten rows.
        let written = report.bytes_after;
        Ok(Planned::Write {
            report,
            work: Work { work },
            growth: 0,
            written,
        })
    }
}

impl<C: DeltaStore + ?Sized> ThreadJob<C> for FullToDelta<'_> {
    type Expect = Rewritten;

    dfck_core::plans_held!(ToDeltaThread, Work);

    fn apply(
        &self,
        conn: &C,
        thread_id: &str,
        work: Work,
        cx: &ApplyContext,
    ) -> Result<Rewritten, Refusal> {
        let mut done = Rewritten {
            rewritten: 0,
            state: Vec::new(),
            reducer: work.work.reducer,
        };
        for (t, changes, before) in work.work.changes {
            let ns = t.checkpoint_ns.clone();
            if conn.shares_versions() {
                rewrite_versions(conn, thread_id, &t, &changes, cx)?;
            }
            let mut ids = HashSet::new();
            for c in &changes {
                conn.rewrite_delta(thread_id, &ns, c)?;
                ids.insert(c.id.clone());
                done.rewritten += 1;
                cx.row_written();
            }
            done.state.push((ns, ids, before));
        }
        Ok(done)
    }

    fn verify(&self, conn: &C, thread_id: &str, done: &Rewritten) -> Result<(), Refusal> {
        for (ns, ids, before) in &done.state {
            let budget = dfck_core::write::preamble::whole_thread_bytes();
            let after =
                LoadedThread::load_bounded(conn.store(), thread_id, ns, budget, Metadata::Whole)
                    .map_err(|e| Refusal(format!("verification failed: {e}")))?;
            if let Some(n) = after
                .nodes
                .iter()
                .find(|n| ids.contains(&n.id) && !delta_encoded(n))
            {
                return Err(Refusal(format!(
                    "verification failed: {} is not in delta form after the rewrite",
                    n.id
                )));
            }
            // Every checkpoint shows, through the delta replay, what it stored before.
            compare(before, &fingerprints(conn.store(), &after, done.reducer)?)?;
        }
        Ok(())
    }

    fn committed(&self, mut report: ToDeltaThread, done: Rewritten) -> ToDeltaThread {
        report.status = ToDeltaStatus::Done;
        report.checkpoints_rewritten = done.rewritten;
        report
    }
}

/// Postgres: one blob per `messages` version — a snapshot where any checkpoint of that
/// version snapshots, none where every checkpoint of it drops its list.
fn rewrite_versions<C: DeltaStore + ?Sized>(
    conn: &C,
    thread_id: &str,
    t: &LoadedThread,
    changes: &[NodeChange],
    cx: &ApplyContext,
) -> Result<(), Refusal> {
    let mut snap: Vec<(&str, usize)> = Vec::new();
    let mut drop: Vec<&str> = Vec::new();
    for c in changes {
        let Some(v) = c.version.as_deref() else {
            continue;
        };
        match c.action {
            MessagesAction::Snapshot(_) => {
                if !snap.iter().any(|(s, _)| *s == v) {
                    snap.push((v, c.index));
                }
            }
            MessagesAction::Drop => drop.push(v),
            MessagesAction::Unversioned => {}
        }
    }
    let mut done = HashSet::new();
    for (v, i) in &snap {
        // Read before any blob of this version changes (each version is written once).
        let ck = values_at(conn.store(), t, *i)?;
        conn.store_version(thread_id, &t.checkpoint_ns, v, ck.value(MESSAGES))?;
        done.insert(*v);
        cx.row_written();
    }
    for v in drop {
        if done.insert(v) {
            conn.store_version(thread_id, &t.checkpoint_ns, v, None)?;
            cx.row_written();
        }
    }
    Ok(())
}
