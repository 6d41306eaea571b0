//! `migrate delta-to-full`: the plan — which threads a conversion rewrites, which it must
//! refuse and why (deerflow-semantics §5.7), the bytes before and after — and the
//! conversion itself on SQLite and PostgreSQL: one transaction per thread that locks the
//! thread, plans under the lock, rewrites every delta checkpoint to full form (P1–P3),
//! verifies (P4) and commits, or rolls back and refuses. The backends differ only in
//! [`ConvertBackend`].

use crate::codec::{self, EXT_DELTA_SNAPSHOT, Value};
use crate::error::{Error, StoreError};
use crate::finding::FindingCode;
use crate::lineage::{fork_analysis, integrity};
use crate::materialize::{Reducer, for_each_stored_messages};
use crate::model::thread::{LoadedThread, Node};
use crate::model::{DELTA_COUNTERS, MESSAGES, MessagesEncoding, has_marker, metadata_is_delta};
use crate::progress::Progress;
use crate::store::Store;
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Options of a migration plan.
#[derive(Debug, Clone, Default)]
pub struct MigrateOptions {
    /// Convert contaminated or ambiguous delta forks to exactly what delta mode shows.
    pub accept_delta_view: bool,
}

/// One thread of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadPlan {
    /// Thread id.
    pub thread_id: String,
    /// `converted` (would be, in a dry run), `refused` or `skipped` (no delta checkpoint).
    pub status: &'static str,
    /// Checkpoints that would be rewritten.
    pub checkpoints_rewritten: usize,
    /// Why the thread is refused or skipped.
    pub reason: Option<String>,
    /// Bytes of the thread's checkpoints now.
    pub bytes_before: u64,
    /// Estimated bytes after conversion (every versioned checkpoint holds its full list).
    pub bytes_after: u64,
    /// Checkpoints whose delta view includes a sibling branch's writes (converted as
    /// delta mode shows them, with `--accept-delta-view`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accepted_delta_view: Vec<String>,
}

/// `dfck migrate delta-to-full` (plan).
#[derive(Debug, Clone, Serialize)]
pub struct MigrateReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// Per thread.
    pub threads: Vec<ThreadPlan>,
    /// Threads converted (would be, in a dry run).
    pub converted: usize,
    /// Threads refused.
    pub refused: usize,
    /// Threads without delta checkpoints.
    pub skipped: usize,
}

/// Delta by metadata, or by structure (`messages` a snapshot or versioned but not stored).
fn delta_encoded(n: &Node) -> bool {
    metadata_is_delta(&n.metadata)
        || matches!(
            n.messages_encoding,
            Some(MessagesEncoding::Snapshot | MessagesEncoding::Absent)
        )
}

/// A checkpoint the conversion rewrites: delta, or carrying DeerFlow's marker key.
fn needs_rewrite(n: &Node) -> bool {
    delta_encoded(n) || n.metadata.contains_key(crate::model::MODE_MARKER)
}

impl ThreadPlan {
    /// A thread with nothing to do yet (`skipped`, no bytes counted).
    fn skipped(thread_id: &str) -> Self {
        ThreadPlan {
            thread_id: thread_id.to_owned(),
            status: "skipped",
            checkpoints_rewritten: 0,
            reason: None,
            bytes_before: 0,
            bytes_after: 0,
            accepted_delta_view: Vec::new(),
        }
    }
}

fn refuse(mut p: ThreadPlan, reason: String) -> ThreadPlan {
    p.status = "refused";
    p.reason = Some(reason);
    p.checkpoints_rewritten = 0;
    p.bytes_after = p.bytes_before;
    p
}

/// Plans one thread (every namespace).
pub fn plan_thread(
    store: &dyn Store,
    thread_id: &str,
    opts: &MigrateOptions,
) -> Result<ThreadPlan, Error> {
    plan_thread_keeping(store, thread_id, opts, None)
}

/// [`plan_thread`], handing the loaded namespaces of a convertible thread to `keep` (the
/// conversion then walks them without reading the thread again).
fn plan_thread_keeping(
    store: &dyn Store,
    thread_id: &str,
    opts: &MigrateOptions,
    keep: Option<&mut Vec<LoadedThread>>,
) -> Result<ThreadPlan, Error> {
    let mut plan = ThreadPlan::skipped(thread_id);
    let namespaces = store.namespaces(thread_id)?;
    if namespaces.is_empty() {
        return Err(StoreError::ThreadNotFound {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: String::new(),
        }
        .into());
    }
    if store.active_run(thread_id)? {
        return Ok(refuse(
            plan,
            "DeerFlow's runs table has a pending or running run for this thread: stop DeerFlow (or let the run finish) first".into(),
        ));
    }
    let mut threads = Vec::new();
    for ns in &namespaces {
        let t = LoadedThread::load_full(store, thread_id, ns)?;
        plan.bytes_before += t.nodes.iter().map(|n| n.bytes).sum::<u64>();
        threads.push(t);
    }
    plan.bytes_after = plan.bytes_before;
    let is_delta = |t: &LoadedThread| t.nodes.iter().any(delta_encoded);
    if !threads.iter().any(is_delta) {
        plan.reason = Some("no delta checkpoint".into());
        return Ok(plan);
    }
    plan.status = "converted";
    let mut rewritten = 0;
    let mut after = plan.bytes_before as i64;
    for t in &threads {
        if !is_delta(t) {
            continue;
        }
        let ns = &t.checkpoint_ns;
        if !ns.is_empty() {
            return Ok(refuse(
                plan,
                format!(
                    "namespace '{ns}' holds delta data: DeerFlow never writes subgraph namespaces, convert them deliberately"
                ),
            ));
        }
        for f in integrity(t, usize::MAX) {
            if matches!(
                f.code,
                FindingCode::LineageDanglingParent | FindingCode::LineageCycle
            ) {
                return Ok(refuse(
                    plan,
                    format!(
                        "{} at {}: {}",
                        f.code,
                        f.checkpoint_id.unwrap_or_default(),
                        f.message
                    ),
                ));
            }
        }
        for n in &t.nodes {
            if let Err(e) = &n.checkpoint {
                return Ok(refuse(plan, format!("unreadable checkpoint: {e}")));
            }
            for w in &n.writes {
                if let Err(e) = codec::decode_typed(w.type_tag.as_deref(), w.value.clone()) {
                    return Ok(refuse(plan, format!("unreadable write on {}: {e}", n.id)));
                }
            }
            if let Some(Json::Object(c)) = n.metadata.get(DELTA_COUNTERS) {
                if let Some(other) = c.keys().find(|k| k.as_str() != MESSAGES) {
                    return Ok(refuse(
                        plan,
                        format!(
                            "{DELTA_COUNTERS} names channel '{other}' at {}: not DeerFlow's delta data",
                            n.id
                        ),
                    ));
                }
            }
        }
        let forks = fork_analysis(t);
        if !forks.contaminated.is_empty() || !forks.ambiguous.is_empty() {
            let ids: Vec<String> = forks
                .contaminated
                .iter()
                .map(|&(k, _)| t.nodes[k].id.clone())
                .chain(forks.ambiguous.iter().map(|&p| t.nodes[p].id.clone()))
                .collect();
            if !opts.accept_delta_view {
                return Ok(refuse(
                    plan,
                    format!(
                        "delta forks replay another branch's writes (DeerFlow #4458) at {}; --accept-delta-view converts exactly what delta mode shows",
                        ids.join(", ")
                    ),
                ));
            }
            plan.accepted_delta_view.extend(ids);
        }
        let reducer = if t.nodes.iter().any(|n| has_marker(&n.metadata)) {
            Reducer::Deerflow
        } else {
            Reducer::Langgraph
        };
        // Postgres shares blobs by version: one list per (messages, version).
        let mut by_version: HashMap<String, String> = HashMap::new();
        let mut conflict = None;
        let mut reached = 0;
        let result = for_each_stored_messages(t, reducer, &mut |i, stored| {
            reached += 1;
            let n = &t.nodes[i];
            let Ok(ck) = &n.checkpoint else { return Ok(()) };
            let encoded = encoded_len(stored) as i64;
            if let Some(v) = ck.version(MESSAGES) {
                if store.info().backend == crate::store::Backend::Postgres {
                    let hash = digest(stored);
                    if let Some(prev) = by_version.insert(v.to_owned(), hash.clone()) {
                        if prev != hash && conflict.is_none() {
                            conflict = Some(n.id.clone());
                        }
                    }
                }
            }
            if needs_rewrite(n) {
                rewritten += 1;
                let old = match ck.value(MESSAGES) {
                    Some(Value::Ext(e)) if e.code == EXT_DELTA_SNAPSHOT => {
                        codec::encode(&Value::Ext(e.clone())).len() as i64
                    }
                    _ => 0,
                };
                if ck.version(MESSAGES).is_some() {
                    after += encoded - old;
                }
            }
            Ok(())
        });
        if let Err(e) = result {
            return Ok(refuse(plan, format!("materialization fails: {e}")));
        }
        if reached != t.nodes.len() {
            return Ok(refuse(
                plan,
                "some checkpoints are not reachable from a root".into(),
            ));
        }
        if let Some(id) = conflict {
            return Ok(refuse(
                plan,
                format!(
                    "checkpoints sharing one Postgres messages version need different lists (at {id})"
                ),
            ));
        }
    }
    plan.checkpoints_rewritten = rewritten;
    plan.bytes_after = after.max(0) as u64;
    if let Some(k) = keep {
        *k = threads;
    }
    Ok(plan)
}

/// Plans every given thread (or every thread with `all`).
pub fn plan(
    store: &dyn Store,
    threads: &[String],
    all: bool,
    opts: &MigrateOptions,
    progress: &dyn Progress,
) -> Result<MigrateReport, Error> {
    let ids = crate::store::select_threads(store, if all { &[] } else { threads })?;
    progress.start("planning threads", Some(ids.len() as u64));
    let mut out = Vec::new();
    for id in &ids {
        out.push(plan_thread(store, id, opts)?);
        progress.inc(1);
    }
    progress.finish();
    let count = |s: &str| out.iter().filter(|p| p.status == s).count();
    Ok(MigrateReport {
        dry_run: true,
        converted: count("converted"),
        refused: count("refused"),
        skipped: count("skipped"),
        threads: out,
    })
}

/// Test-only crash injection: `DFCK_FAILPOINT=migrate-abort-after:N` aborts the process
/// (no rollback, no destructors — as a SIGKILL would) after the N-th checkpoint rewrite.
fn failpoint_after() -> Option<usize> {
    std::env::var("DFCK_FAILPOINT")
        .ok()?
        .strip_prefix("migrate-abort-after:")?
        .parse()
        .ok()
}

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

/// The metadata a full-mode checkpoint carries: no marker, no `messages` counters.
fn full_metadata(raw: &[u8], what: &str) -> Result<Vec<u8>, String> {
    let mut m: serde_json::Map<String, Json> = serde_json::from_slice(raw)
        .map_err(|e| format!("{what}: metadata is not plain JSON ({e}); not rewriting it"))?;
    m.remove(crate::model::MODE_MARKER);
    let drop_counters = match m.get_mut(DELTA_COUNTERS) {
        Some(Json::Object(c)) => {
            c.remove(MESSAGES);
            c.is_empty()
        }
        _ => false,
    };
    if drop_counters {
        m.remove(DELTA_COUNTERS);
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyJson);
    m.serialize(&mut ser).map_err(|e| e.to_string())?;
    Ok(out)
}

/// A checkpoint body with `messages` stored as the plain list (or, when unversioned, any
/// `_DeltaSnapshot` unwrapped); every other byte re-encoded as it was.
fn full_body(body: Value, list: Option<Vec<Value>>) -> Value {
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
            (Some(l), None) => cv.push((Value::Str(MESSAGES.into()), Value::Array(l))),
            (None, Some(i)) => {
                let old = std::mem::replace(&mut cv[i].1, Value::Nil);
                cv[i].1 = crate::materialize::unwrap_snapshot(old);
            }
            (None, None) => {}
        }
    }
    Value::Map(entries)
}

/// A fast fingerprint of a list as it is stored (msgpack array), computed without building
/// the encoding: ext items (messages) feed their stored bytes straight into the hash.
fn digest(list: &[Value]) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = Vec::with_capacity(64);
    codec::write_array_header(&mut buf, list.len());
    h.update(&buf);
    for item in list {
        buf.clear();
        match item {
            Value::Ext(e) => {
                codec::write_ext_header(&mut buf, e.code, e.raw().len());
                h.update(&buf);
                h.update(e.raw());
            }
            other => {
                codec::write_value(&mut buf, other);
                h.update(&buf);
            }
        }
    }
    format!("{:032x}", h.digest128())
}

/// The encoded size of a list, without encoding it.
fn encoded_len(list: &[Value]) -> usize {
    let mut buf = Vec::with_capacity(16);
    codec::write_array_header(&mut buf, list.len());
    let mut n = buf.len();
    for item in list {
        n += match item {
            Value::Ext(e) => {
                buf.clear();
                codec::write_ext_header(&mut buf, e.code, e.raw().len());
                buf.len() + e.raw().len()
            }
            other => codec::encode(other).len(),
        };
    }
    n
}

/// The backend half of a conversion: transactions and the rows one checkpoint rewrite
/// touches. The algorithm ([`convert_thread`]) and its checks are shared.
pub trait ConvertBackend {
    /// The store, read inside the open transaction.
    fn store(&self) -> &dyn Store;
    /// Starts the thread's transaction and takes its locks; `Some(reason)` when the thread
    /// cannot be locked now (nothing is open then).
    fn begin(&self, thread_id: &str) -> Result<Option<String>, Error>;
    /// Commits the thread's transaction.
    fn commit(&self) -> Result<(), Error>;
    /// Rolls the thread's transaction back.
    fn rollback(&self) -> Result<(), Error>;
    /// Free bytes where the store grows, when known.
    fn free_space(&self) -> Option<u64> {
        None
    }
    /// Rewrites checkpoint `id` to full form; `list` is its materialized `messages` when
    /// the checkpoint versions the channel.
    fn rewrite(
        &self,
        thread_id: &str,
        ns: &str,
        id: &str,
        list: Option<&[Value]>,
    ) -> Result<(), String>;
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
    ) -> Result<(), String> {
        Ok(())
    }
}

impl ConvertBackend for crate::store::sqlite::SqliteStore {
    fn store(&self) -> &dyn Store {
        self
    }
    fn begin(&self, _thread_id: &str) -> Result<Option<String>, Error> {
        self.begin_immediate()?;
        Ok(None)
    }
    fn commit(&self) -> Result<(), Error> {
        Ok(crate::store::sqlite::SqliteStore::commit(self)?)
    }
    fn rollback(&self) -> Result<(), Error> {
        Ok(crate::store::sqlite::SqliteStore::rollback(self)?)
    }
    fn free_space(&self) -> Option<u64> {
        self.available_space()
    }
    fn rewrite(
        &self,
        thread_id: &str,
        ns: &str,
        id: &str,
        list: Option<&[Value]>,
    ) -> Result<(), String> {
        let row = self
            .checkpoint(thread_id, ns, id)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("checkpoint {id} vanished"))?;
        let crate::store::CheckpointBody::Serialized { type_tag, bytes } = row.body else {
            return Err("not a SQLite checkpoint".into());
        };
        if type_tag.as_deref() != Some("msgpack") {
            return Err(format!("checkpoint {id} has serializer type {type_tag:?}"));
        }
        let body = codec::decode(&bytes).map_err(|e| e.to_string())?;
        let new_body = codec::encode(&full_body(body, list.map(<[Value]>::to_vec)));
        let new_meta = full_metadata(&row.metadata, id)?;
        self.update_checkpoint(thread_id, ns, id, &new_body, &new_meta)
            .map_err(|e| e.to_string())
    }
}

impl ConvertBackend for crate::store::postgres::PostgresStore {
    fn store(&self) -> &dyn Store {
        self
    }
    fn begin(&self, thread_id: &str) -> Result<Option<String>, Error> {
        Ok((!self.begin_thread(thread_id)?).then(|| {
            "another dfck migrate holds this thread's lock; re-run when it is done".to_string()
        }))
    }
    fn commit(&self) -> Result<(), Error> {
        Ok(self.end_transaction("COMMIT")?)
    }
    fn rollback(&self) -> Result<(), Error> {
        Ok(self.end_transaction("ROLLBACK")?)
    }
    fn rewrite(
        &self,
        thread_id: &str,
        ns: &str,
        id: &str,
        _list: Option<&[Value]>,
    ) -> Result<(), String> {
        self.rewrite_checkpoint_full(thread_id, ns, id)
            .map_err(|e| e.to_string())
    }
    fn store_version(
        &self,
        thread_id: &str,
        ns: &str,
        version: &str,
        current: Option<&Value>,
        list: &[Value],
    ) -> Result<(), String> {
        if let Some(Value::Array(items)) = current {
            if digest(items) == digest(list) {
                return Ok(());
            }
        }
        let blob = codec::encode(&Value::Array(list.to_vec()));
        self.upsert_messages_blob(thread_id, ns, version, &blob)
            .map_err(|e| e.to_string())
    }
}

/// Rewrites every delta checkpoint of one thread inside the caller's transaction and checks
/// the result before returning; `Err` means: roll back, refuse with this reason.
fn convert_thread(
    backend: &dyn ConvertBackend,
    thread_id: &str,
    rewrites: &AtomicUsize,
    loaded: Vec<LoadedThread>,
) -> Result<usize, String> {
    let store = backend.store();
    let abort_after = failpoint_after();
    let mut converted = 0;
    for t in loaded {
        let ns = t.checkpoint_ns.clone();
        if !t.nodes.iter().any(needs_rewrite) {
            continue;
        }
        let reducer = if t.nodes.iter().any(|n| has_marker(&n.metadata)) {
            Reducer::Deerflow
        } else {
            Reducer::Langgraph
        };
        let mut expect: HashMap<String, String> = HashMap::new();
        let mut versions_done: HashSet<String> = HashSet::new();
        let mut failure: Option<String> = None;
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
            let step = (|| -> Result<(), String> {
                if let Some(v) = version {
                    if versions_done.insert(v.to_owned()) {
                        backend.store_version(thread_id, &ns, v, ck.value(MESSAGES), stored)?;
                    }
                }
                if !needs_rewrite(n) {
                    return Ok(());
                }
                backend.rewrite(thread_id, &ns, &n.id, version.map(|_| stored))?;
                converted += 1;
                let done = rewrites.fetch_add(1, Ordering::SeqCst) + 1;
                if abort_after == Some(done) {
                    std::process::abort();
                }
                Ok(())
            })();
            if let Err(e) = step {
                failure = Some(e);
            }
            Ok(())
        });
        if let Err(e) = res {
            return Err(format!("materialization fails: {e}"));
        }
        if let Some(e) = failure {
            return Err(e);
        }
        verify_converted(store, thread_id, &ns, &expect)?;
    }
    Ok(converted)
}

/// The check before commit: no delta signal left, and every versioned checkpoint stores
/// exactly the list delta mode showed (`expect`: checkpoint id → digest).
fn verify_converted(
    store: &dyn Store,
    thread_id: &str,
    ns: &str,
    expect: &HashMap<String, String>,
) -> Result<(), String> {
    if store.info().backend == crate::store::Backend::Sqlite {
        return verify_converted_raw(store, thread_id, ns, expect);
    }
    let after = LoadedThread::load_full(store, thread_id, ns).map_err(|e| e.to_string())?;
    for n in &after.nodes {
        if metadata_is_delta(&n.metadata) || n.metadata.contains_key(crate::model::MODE_MARKER) {
            return Err(format!(
                "verification failed: {} still carries a delta marker",
                n.id
            ));
        }
        let Ok(ck) = &n.checkpoint else {
            return Err(format!(
                "verification failed: {} unreadable after rewrite",
                n.id
            ));
        };
        match (expect.get(&n.id), ck.value(MESSAGES)) {
            (Some(want), Some(v)) if !v.is_delta_snapshot() => {
                let got = match v {
                    Value::Array(items) => digest(items),
                    other => digest(std::slice::from_ref(other)),
                };
                if &got != want {
                    return Err(format!(
                        "verification failed: {} differs from its delta view",
                        n.id
                    ));
                }
            }
            (Some(_), _) => {
                return Err(format!(
                    "verification failed: {} does not store its messages",
                    n.id
                ));
            }
            (None, Some(v)) if v.is_delta_snapshot() => {
                return Err(format!(
                    "verification failed: {} still holds a snapshot",
                    n.id
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// [`verify_converted`] on SQLite without decoding the rewritten lists: every checkpoint's
/// metadata is parsed, and the stored `messages` bytes are fingerprinted as they sit in the
/// checkpoint blob (the fingerprint of [`digest`] is that of the list's encoding).
fn verify_converted_raw(
    store: &dyn Store,
    thread_id: &str,
    ns: &str,
    expect: &HashMap<String, String>,
) -> Result<(), String> {
    let mut seen = 0usize;
    let mut check = |row: crate::store::CheckpointRow| -> Result<(), String> {
        let id = &row.checkpoint_id;
        let meta = crate::model::parse_metadata(&row.metadata, id).map_err(|e| e.to_string())?;
        if metadata_is_delta(&meta) || meta.contains_key(crate::model::MODE_MARKER) {
            return Err(format!(
                "verification failed: {id} still carries a delta marker"
            ));
        }
        let crate::store::CheckpointBody::Serialized { type_tag, bytes } = &row.body else {
            return Err(format!(
                "verification failed: {id} is not a SQLite checkpoint"
            ));
        };
        let want = expect.get(id);
        if type_tag.as_deref() != Some("msgpack") {
            return match want {
                Some(_) => Err(format!(
                    "verification failed: {id} has serializer type {type_tag:?}"
                )),
                None => Ok(()),
            };
        }
        let (slice, _) = codec::checkpoint_messages_slice(bytes)
            .map_err(|e| format!("verification failed: {id} unreadable after rewrite: {e}"))?;
        let is_snapshot = |s: &[u8]| {
            let mut c = s;
            // ext headers: fixext 1/2/4/8/16 (d4–d8) or ext 8/16/32 (c7–c9) before the type.
            let skip = match c.first() {
                Some(0xd4..=0xd8) => 1,
                Some(0xc7) => 2,
                Some(0xc8) => 3,
                Some(0xc9) => 5,
                _ => return false,
            };
            c = &c[skip.min(c.len())..];
            c.first() == Some(&(EXT_DELTA_SNAPSHOT as u8))
        };
        match (want, slice) {
            (Some(want), Some(s)) if !is_snapshot(s) => {
                let got = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(s));
                if &got != want {
                    return Err(format!(
                        "verification failed: {id} differs from its delta view"
                    ));
                }
            }
            (Some(_), _) => {
                return Err(format!(
                    "verification failed: {id} does not store its messages"
                ));
            }
            (None, Some(s)) if is_snapshot(s) => {
                return Err(format!("verification failed: {id} still holds a snapshot"));
            }
            _ => {}
        }
        seen += 1;
        Ok(())
    };
    let mut failure = None;
    store
        .scan_thread_values(thread_id, ns, &mut |row| {
            if failure.is_none() {
                if let Err(e) = check(row) {
                    failure = Some(e);
                }
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    if let Some(e) = failure {
        return Err(e);
    }
    if seen < expect.len() {
        return Err("verification failed: checkpoints vanished during the rewrite".into());
    }
    Ok(())
}

/// Converts one thread in its own transaction: lock, plan under the lock, refuse when the
/// disk cannot take the growth, rewrite, verify, commit — or roll back and refuse.
fn apply_thread(
    backend: &dyn ConvertBackend,
    thread_id: &str,
    opts: &MigrateOptions,
    rewrites: &AtomicUsize,
) -> Result<ThreadPlan, Error> {
    if let Some(reason) = backend.begin(thread_id)? {
        return Ok(refuse(ThreadPlan::skipped(thread_id), reason));
    }
    let mut loaded = Vec::new();
    let planned = match plan_thread_keeping(backend.store(), thread_id, opts, Some(&mut loaded)) {
        Ok(p) => p,
        Err(e) => {
            backend.rollback()?;
            return Err(e);
        }
    };
    if planned.status != "converted" {
        backend.rollback()?;
        return Ok(planned);
    }
    // A full-mode thread can be far larger than its delta form (every checkpoint holds the
    // whole list), and the WAL holds the transaction too: refuse rather than fill the disk.
    let growth = planned.bytes_after.saturating_sub(planned.bytes_before);
    if let Some(free) = backend.free_space() {
        if growth.saturating_mul(2) > free {
            backend.rollback()?;
            return Ok(refuse(
                planned,
                format!(
                    "not enough disk space: converting needs about {} MiB (twice the growth, for the WAL) and {} MiB are free",
                    growth.saturating_mul(2) / (1 << 20),
                    free / (1 << 20)
                ),
            ));
        }
    }
    match convert_thread(backend, thread_id, rewrites, loaded) {
        Ok(n) => {
            backend.commit()?;
            let mut p = planned;
            p.checkpoints_rewritten = n;
            Ok(p)
        }
        Err(reason) => {
            backend.rollback()?;
            Ok(refuse(planned, reason))
        }
    }
}

fn applied_report(out: Vec<ThreadPlan>) -> MigrateReport {
    let count = |s: &str| out.iter().filter(|p| p.status == s).count();
    MigrateReport {
        dry_run: false,
        converted: count("converted"),
        refused: count("refused"),
        skipped: count("skipped"),
        threads: out,
    }
}

/// `migrate delta-to-full --apply` on SQLite: per thread, one `BEGIN IMMEDIATE`
/// transaction that plans (under the write lock), rewrites, verifies and commits — or rolls
/// back and refuses. Killing the process at any moment leaves each thread old or new.
///
/// With `checkpointer` (a second read-write connection to the same file), WAL frames are
/// copied into the database file by a background thread (`wal_checkpoint(PASSIVE)`, which
/// never blocks other connections) while the next thread converts, instead of inside each
/// commit; the WAL is checkpointed and truncated once at the end.
pub fn apply_sqlite(
    store: &crate::store::sqlite::SqliteStore,
    checkpointer: Option<crate::store::sqlite::SqliteStore>,
    threads: &[String],
    all: bool,
    opts: &MigrateOptions,
    progress: &dyn Progress,
) -> Result<MigrateReport, Error> {
    let ids = crate::store::select_threads(store, if all { &[] } else { threads })?;
    progress.start("converting threads", Some(ids.len() as u64));
    let rewrites = AtomicUsize::new(0);
    let mut out = Vec::new();
    let done = std::sync::atomic::AtomicBool::new(false);
    // Only in WAL mode: there, commits need not wait for the disk (a crash of dfck loses
    // nothing committed, the WAL is in the OS; a power cut can only roll whole threads back)
    // and everything is made durable by the final checkpoint before the report is printed.
    // A rollback-journal file keeps SQLite's defaults (NORMAL could corrupt it on power loss).
    let background =
        checkpointer.is_some() && store.is_wal() && store.set_wal_autocheckpoint(0).is_ok();
    let relaxed = background && store.set_synchronous_normal(true).is_ok();
    let result = std::thread::scope(|scope| {
        if let Some(bg) = checkpointer.filter(|_| background) {
            let done = &done;
            scope.spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    // Errors (a busy file) only delay the copy: the final checkpoint retries.
                    let _ = bg.wal_checkpoint(false);
                    std::thread::park_timeout(std::time::Duration::from_millis(20));
                }
            });
        }
        let r = (|| {
            for id in &ids {
                out.push(apply_thread(store, id, opts, &rewrites)?);
                progress.inc(1);
            }
            Ok::<(), Error>(())
        })();
        done.store(true, Ordering::SeqCst);
        r
    });
    if background {
        let _ = store.set_wal_autocheckpoint(1000);
        if relaxed {
            let _ = store.set_synchronous_normal(false);
        }
        store.wal_checkpoint(true)?;
    }
    result?;
    progress.finish();
    Ok(applied_report(out))
}

/// `migrate delta-to-full --apply` on PostgreSQL: per thread one `REPEATABLE READ`
/// transaction holding the thread's advisory lock and row locks, which plans, upserts one
/// plain `msgpack` blob per `messages` version, strips the inline snapshot markers and the
/// delta metadata, verifies and commits — or rolls back and refuses. `jobs` threads convert
/// concurrently, each over its own connection (`open`).
pub fn apply_postgres(
    open: &(dyn Fn() -> Result<crate::store::postgres::PostgresStore, StoreError> + Sync),
    threads: &[String],
    all: bool,
    opts: &MigrateOptions,
    jobs: usize,
    progress: &(dyn Progress + Sync),
) -> Result<MigrateReport, Error> {
    let first = open()?;
    first.begin_read()?;
    let ids = crate::store::select_threads(&first, if all { &[] } else { threads });
    first.end_transaction("ROLLBACK")?;
    let ids = ids?;
    progress.start("converting threads", Some(ids.len() as u64));
    let rewrites = AtomicUsize::new(0);
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<(usize, ThreadPlan)>> = Mutex::new(Vec::new());
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let work = |backend: &crate::store::postgres::PostgresStore| loop {
        let i = {
            let Ok(mut n) = next.lock() else { return };
            let i = *n;
            *n += 1;
            i
        };
        if i >= ids.len() || failure.lock().map(|f| f.is_some()).unwrap_or(true) {
            return;
        }
        match apply_thread(backend, &ids[i], opts, &rewrites) {
            Ok(p) => {
                if let Ok(mut r) = results.lock() {
                    r.push((i, p));
                }
            }
            Err(e) => {
                if let Ok(mut f) = failure.lock() {
                    f.get_or_insert(e);
                }
                return;
            }
        }
        progress.inc(1);
    };
    let jobs = jobs.max(1).min(ids.len().max(1));
    std::thread::scope(|scope| {
        for _ in 1..jobs {
            scope.spawn(|| match open() {
                Ok(s) => work(&s),
                Err(e) => {
                    if let Ok(mut f) = failure.lock() {
                        f.get_or_insert(e.into());
                    }
                }
            });
        }
        work(&first);
    });
    progress.finish();
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|r| r.0);
    Ok(applied_report(
        results.into_iter().map(|(_, p)| p).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;
    use crate::store::sqlite::SqliteStore;

    /// The fingerprints of every versioned checkpoint's stored list, as the conversion
    /// computes them.
    fn expected(store: &SqliteStore, thread: &str) -> HashMap<String, String> {
        let t = LoadedThread::load_full(store, thread, "").unwrap();
        let mut expect = HashMap::new();
        for_each_stored_messages(&t, Reducer::Langgraph, &mut |i, stored| {
            if let Ok(ck) = &t.nodes[i].checkpoint {
                if ck.version(MESSAGES).is_some() {
                    expect.insert(t.nodes[i].id.clone(), digest(stored));
                }
            }
            Ok(())
        })
        .unwrap();
        expect
    }

    #[test]
    fn verification_before_commit_catches_a_wrong_list_and_a_marker() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        std::fs::copy(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sqlite/delta_k3.db"),
            &db,
        )
        .unwrap();
        let store = SqliteStore::open_read_write(&db).unwrap();
        let opts = MigrateOptions::default();
        let report = apply_sqlite(
            &store,
            None,
            &["t-linear".into()],
            false,
            &opts,
            &NoProgress,
        )
        .unwrap();
        assert_eq!(report.converted, 1);
        let expect = expected(&store, "t-linear");
        assert!(verify_converted_raw(&store, "t-linear", "", &expect).is_ok());
        // The delta form itself fails verification (snapshots, markers, absent lists).
        let other = expected(&store, "t-fork");
        assert!(verify_converted_raw(&store, "t-fork", "", &other).is_err());

        // One message dropped from the head's stored list: "differs from its delta view".
        let head = store.head_id("t-linear", "").unwrap().unwrap();
        let row = store.checkpoint("t-linear", "", &head).unwrap().unwrap();
        let crate::store::CheckpointBody::Serialized { bytes, .. } = &row.body else {
            panic!("sqlite row");
        };
        let body = codec::decode(bytes).unwrap();
        let Some(Value::Array(mut list)) = body
            .get("channel_values")
            .and_then(|cv| cv.get(MESSAGES))
            .cloned()
        else {
            panic!("converted head stores its list");
        };
        list.pop();
        let tampered = codec::encode(&full_body(body, Some(list)));
        store
            .update_checkpoint("t-linear", "", &head, &tampered, &row.metadata)
            .unwrap();
        let e = verify_converted_raw(&store, "t-linear", "", &expect).unwrap_err();
        assert!(e.contains("differs from its delta view"), "{e}");
        store
            .update_checkpoint("t-linear", "", &head, bytes, &row.metadata)
            .unwrap();
        assert!(verify_converted_raw(&store, "t-linear", "", &expect).is_ok());

        // DeerFlow's marker left in the metadata.
        let meta = br#"{"source": "loop", "step": 1, "deerflow_checkpoint_channel_mode": "delta"}"#;
        store
            .update_checkpoint("t-linear", "", &head, bytes, meta)
            .unwrap();
        let e = verify_converted_raw(&store, "t-linear", "", &expect).unwrap_err();
        assert!(e.contains("delta marker"), "{e}");
    }
}
