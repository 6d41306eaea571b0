//! Applying `migrate delta-to-full` through the write engine: the [`DeltaToFull`] job
//! (plan under the lock, rewrite every delta checkpoint to full form, verify) and
//! [`ConvertStore`], the rows one checkpoint rewrite touches on each backend.

use super::checks::{digest, verify_loaded, verify_raw};
use super::plan::{needs_rewrite, plan_thread_keeping, refuse};
use super::state::{StateFingerprints, compare, fingerprints};
use super::{MigrateOptions, PlanStatus, ThreadPlan};
use dfck_core::codec::{self, Value};
use dfck_core::error::{Error, StoreError};
use dfck_core::materialize::{Reducer, for_each_stored_messages};
use dfck_core::model::thread::LoadedThread;
use dfck_core::model::{DELTA_COUNTERS, MESSAGES};
use dfck_core::store::postgres::PostgresStore;
use dfck_core::store::sqlite::SqliteStore;
use dfck_core::store::{PlanStore, WriteStore};
use dfck_core::write::{ApplyContext, Planned, Refusal, ThreadJob};
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::{HashMap, HashSet};

/// Python `json.dumps` separators (`", "`, `": "`), so rewritten metadata looks like
/// LangGraph's.
struct PyJson;

impl serde_json::ser::Formatter for PyJson {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// Metadata serialized as LangGraph's SQLite saver writes it (`json.dumps` separators).
pub(super) fn py_json(m: &serde_json::Map<String, Json>) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyJson);
    m.serialize(&mut ser)?;
    Ok(out)
}

/// The metadata a full-mode checkpoint carries: no marker, no `messages` counters.
fn full_metadata(raw: &[u8], what: &str) -> Result<Vec<u8>, Refusal> {
    let mut m: serde_json::Map<String, Json> = serde_json::from_slice(raw).map_err(|e| {
        Refusal(format!(
            "{what}: metadata is not plain JSON ({e}); not rewriting it"
        ))
    })?;
    // `shift_remove`: the other keys keep their order (LangGraph's metadata, byte for byte).
    m.shift_remove(dfck_core::model::MODE_MARKER);
    let drop_counters = match m.get_mut(DELTA_COUNTERS) {
        Some(Json::Object(c)) => {
            c.shift_remove(MESSAGES);
            c.is_empty()
        }
        _ => false,
    };
    if drop_counters {
        m.shift_remove(DELTA_COUNTERS);
    }
    py_json(&m).map_err(refusal)
}

/// A checkpoint body with `messages` stored as the plain list (or, when unversioned, any
/// `_DeltaSnapshot` unwrapped); every other byte re-encoded as it was.
pub(super) fn full_body(body: Value, list: Option<Vec<Value>>) -> Value {
    let Value::Map(mut entries) = body else {
        return body;
    };
    for (k, v) in entries.iter_mut() {
        if k.as_str() != Some("channel_values") {
            continue;
        }
        let Value::Map(cv) = v else { continue };
        let pos = cv.iter().position(|(c, _)| c.as_str() == Some(MESSAGES));
        match (list.clone(), pos) {
            (Some(l), Some(i)) => cv[i].1 = Value::Array(l),
            // First, where LangGraph's full mode puts it (`messages` is the state's first
            // channel in DeerFlow's and LangGraph's message states).
            (Some(l), None) => cv.insert(0, (Value::Str(MESSAGES.into()), Value::Array(l))),
            (None, Some(i)) => {
                let old = std::mem::replace(&mut cv[i].1, Value::Nil);
                cv[i].1 = dfck_core::materialize::unwrap_snapshot(old);
            }
            (None, None) => {}
        }
    }
    Value::Map(entries)
}

/// The backend half of a conversion: the rows one checkpoint rewrite touches, and how the
/// result is read back. The algorithm ([`DeltaToFull`]) is shared.
pub trait ConvertStore: WriteStore {
    /// Rewrites checkpoint `id` to full form; `list` is its materialized `messages` when
    /// the checkpoint versions the channel.
    fn rewrite(
        &self,
        thread_id: &str,
        ns: &str,
        id: &str,
        list: Option<&[Value]>,
    ) -> Result<(), Refusal>;

    /// Makes `messages` at `version` hold `list` where values live apart from checkpoints
    /// (Postgres blobs, shared by version); called once per version. `current` is what is
    /// stored there now.
    fn store_version(
        &self,
        _thread_id: &str,
        _ns: &str,
        _version: &str,
        _current: Option<&Value>,
        _list: &[Value],
    ) -> Result<(), Refusal> {
        Ok(())
    }

    /// The postcondition of one namespace (`expect`: checkpoint id → digest of the list
    /// it must store).
    fn verify_converted(
        &self,
        thread_id: &str,
        ns: &str,
        expect: &HashMap<String, String>,
    ) -> Result<(), Refusal>;
}

/// The plaintext msgpack body of a SQLite checkpoint, decrypted when stored `msgpack+aes`
/// (the rewrite is encrypted again by the store); any other serializer is refused.
pub(crate) fn msgpack_body(
    id: &str,
    type_tag: Option<&str>,
    bytes: Vec<u8>,
) -> Result<bytes::Bytes, Refusal> {
    let opened = codec::aes::open(type_tag, bytes.into())
        .map_err(|e| Refusal(format!("checkpoint {id}: {e}")))?;
    if opened.tag.as_deref() != Some("msgpack") {
        return Err(Refusal(format!(
            "checkpoint {id} has serializer type {type_tag:?}"
        )));
    }
    Ok(opened.bytes)
}

fn refusal(e: impl std::fmt::Display) -> Refusal {
    Refusal(e.to_string())
}

impl ConvertStore for SqliteStore {
    fn rewrite(
        &self,
        thread_id: &str,
        ns: &str,
        id: &str,
        list: Option<&[Value]>,
    ) -> Result<(), Refusal> {
        use dfck_core::store::Store;
        let row = self
            .checkpoint(thread_id, ns, id)
            .map_err(refusal)?
            .ok_or_else(|| Refusal(format!("checkpoint {id} vanished")))?;
        let dfck_core::store::CheckpointBody::Serialized { type_tag, bytes } = row.body else {
            return Err(Refusal("not a SQLite checkpoint".into()));
        };
        let bytes = msgpack_body(id, type_tag.as_deref(), bytes)?;
        let body = codec::decode(&bytes).map_err(refusal)?;
        let new_body = codec::encode(&full_body(body, list.map(<[Value]>::to_vec)));
        let new_meta = full_metadata(&row.metadata, id)?;
        self.update_checkpoint(thread_id, ns, id, &new_body, &new_meta)
            .map_err(refusal)
    }

    fn verify_converted(
        &self,
        thread_id: &str,
        ns: &str,
        expect: &HashMap<String, String>,
    ) -> Result<(), Refusal> {
        verify_raw(self, thread_id, ns, expect)
    }
}

impl ConvertStore for PostgresStore {
    fn rewrite(
        &self,
        thread_id: &str,
        ns: &str,
        id: &str,
        _list: Option<&[Value]>,
    ) -> Result<(), Refusal> {
        self.rewrite_checkpoint_full(thread_id, ns, id)
            .map_err(refusal)
    }

    fn store_version(
        &self,
        thread_id: &str,
        ns: &str,
        version: &str,
        current: Option<&Value>,
        list: &[Value],
    ) -> Result<(), Refusal> {
        if let Some(Value::Array(items)) = current {
            if digest(items) == digest(list) {
                return Ok(());
            }
        }
        let blob = codec::encode(&Value::Array(list.to_vec()));
        self.upsert_messages_blob(thread_id, ns, version, &blob)
            .map_err(refusal)
    }

    fn verify_converted(
        &self,
        thread_id: &str,
        ns: &str,
        expect: &HashMap<String, String>,
    ) -> Result<(), Refusal> {
        verify_loaded(self, thread_id, ns, expect)
    }
}

/// `migrate delta-to-full` as a write-engine job.
pub struct DeltaToFull<'a> {
    /// The plan's options.
    pub opts: &'a MigrateOptions,
}

/// What a conversion wrote: the checks [`ThreadJob::verify`] runs.
#[derive(Debug, Default)]
pub struct Converted {
    /// Checkpoints rewritten.
    rewritten: usize,
    /// Per namespace: checkpoint id → digest of the list it must store.
    expect: Vec<(String, HashMap<String, String>)>,
    /// Per namespace: the reducer and every checkpoint's state before the rewrite.
    state: Vec<(String, Reducer, StateFingerprints)>,
}

/// What the plan hands to the rewrite: the loaded namespaces and their state before it.
pub struct Work {
    loaded: Vec<LoadedThread>,
    state: Vec<(String, Reducer, StateFingerprints)>,
}

impl<C: PlanStore + ?Sized> dfck_core::write::ThreadPlan<C> for DeltaToFull<'_> {
    type Report = ThreadPlan;
    type Work = Work;

    fn name(&self) -> &'static str {
        "migrate"
    }

    fn verb(&self) -> &'static str {
        "converting"
    }

    fn untouched(&self, thread_id: &str) -> ThreadPlan {
        ThreadPlan::skipped(thread_id)
    }

    fn refuse(&self, report: ThreadPlan, reason: Refusal) -> ThreadPlan {
        refuse(report, reason.0)
    }

    /// Every thread is loaded whole with its values (`preamble::load`).
    fn reads_whole_threads(&self) -> Option<bool> {
        Some(true)
    }

    fn plan(&self, conn: &C, thread_id: &str) -> Result<Planned<ThreadPlan, Work>, Error> {
        let mut loaded = Vec::new();
        let report =
            match plan_thread_keeping(conn.store(), thread_id, self.opts, Some(&mut loaded)) {
                Ok(r) => r,
                // Deleted (by DeerFlow) between the listing and this transaction.
                Err(Error::Store(StoreError::ThreadNotFound { .. })) => {
                    let mut r = ThreadPlan::skipped(thread_id);
                    r.reason = Some("thread no longer exists".into());
                    return Ok(Planned::Done(r));
                }
                Err(e) => return Err(e),
            };
        if report.status != PlanStatus::Converted {
            return Ok(Planned::Done(report));
        }
        // Every checkpoint's state now, to compare with after the rewrite.
        let mut state = Vec::with_capacity(loaded.len());
        for t in &loaded {
            let reducer = self.opts.reducer_for(t);
            match fingerprints(conn.store(), t, reducer) {
                Ok(fp) => state.push((t.checkpoint_ns.clone(), reducer, fp)),
                Err(reason) => return Ok(Planned::Done(refuse(report, reason.0))),
            }
        }
        // A full-mode thread can be far larger than its delta form (every checkpoint holds
        // the whole list).
        let growth = report.bytes_after.saturating_sub(report.bytes_before);
        // The rewrite touches nearly every row of the thread: the log holds all of them.
        let written = report.bytes_after;
        Ok(Planned::Write {
            report,
            work: Work { loaded, state },
            growth,
            written,
        })
    }
}

impl<C: ConvertStore + ?Sized> ThreadJob<C> for DeltaToFull<'_> {
    type Expect = Converted;

    dfck_core::plans_held!(ThreadPlan, Work);

    fn apply(
        &self,
        conn: &C,
        thread_id: &str,
        work: Work,
        cx: &ApplyContext,
    ) -> Result<Converted, Refusal> {
        let mut done = convert_thread(conn, thread_id, work.loaded, self.opts, cx)?;
        done.state = work.state;
        Ok(done)
    }

    fn verify(&self, conn: &C, thread_id: &str, done: &Converted) -> Result<(), Refusal> {
        for (ns, expect) in &done.expect {
            conn.verify_converted(thread_id, ns, expect)?;
        }
        // Every checkpoint of the thread, rewritten or not, shows what it showed.
        for (ns, reducer, before) in &done.state {
            let after = LoadedThread::load_full(conn.store(), thread_id, ns)
                .map_err(|e| Refusal(format!("verification failed: {e}")))?;
            compare(before, &fingerprints(conn.store(), &after, *reducer)?)?;
        }
        Ok(())
    }

    fn committed(&self, mut report: ThreadPlan, done: Converted) -> ThreadPlan {
        report.checkpoints_rewritten = done.rewritten;
        report
    }
}

/// Rewrites every delta checkpoint of one thread inside the engine's transaction, noting
/// what each versioned checkpoint must store afterwards.
fn convert_thread<C: ConvertStore + ?Sized>(
    conn: &C,
    thread_id: &str,
    loaded: Vec<LoadedThread>,
    opts: &MigrateOptions,
    cx: &ApplyContext,
) -> Result<Converted, Refusal> {
    let mut done = Converted::default();
    for t in loaded {
        let ns = t.checkpoint_ns.clone();
        if !t.nodes.iter().any(needs_rewrite) {
            continue;
        }
        let reducer = opts.reducer_for(&t);
        let mut expect: HashMap<String, String> = HashMap::new();
        let mut versions_done: HashSet<String> = HashSet::new();
        let mut failure: Option<Refusal> = None;
        let res = for_each_stored_messages(&t, reducer, &mut |i, stored| {
            let n = &t.nodes[i];
            let Ok(ck) = &n.checkpoint else { return Ok(()) };
            let version = ck.version(MESSAGES);
            if version.is_some() {
                expect.insert(n.id.clone(), digest(stored));
            }
            if failure.is_some() {
                return Ok(());
            }
            let step = (|| -> Result<(), Refusal> {
                if let Some(v) = version {
                    if versions_done.insert(v.to_owned()) {
                        conn.store_version(thread_id, &ns, v, ck.value(MESSAGES), stored)?;
                    }
                }
                if !needs_rewrite(n) {
                    return Ok(());
                }
                conn.rewrite(thread_id, &ns, &n.id, version.map(|_| stored))?;
                done.rewritten += 1;
                cx.row_written();
                Ok(())
            })();
            if let Err(e) = step {
                failure = Some(e);
            }
            Ok(())
        });
        if let Err(e) = res {
            return Err(Refusal(format!("materialization fails: {e}")));
        }
        if let Some(e) = failure {
            return Err(e);
        }
        done.expect.push((ns, expect));
    }
    Ok(done)
}
