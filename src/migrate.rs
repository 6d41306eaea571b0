//! `migrate delta-to-full`: the plan — which threads a conversion rewrites, which it must
//! refuse and why (deerflow-semantics §5.7), the bytes before and after — and, on SQLite,
//! the conversion itself: one transaction per thread that plans under the write lock,
//! rewrites every delta checkpoint to full form (P1–P3), verifies (P4) and commits, or
//! rolls back and refuses.

use crate::codec::{self, EXT_DELTA_SNAPSHOT, Value};
use crate::error::{Error, StoreError};
use crate::lineage::{fork_analysis, integrity};
use crate::materialize::{Reducer, for_each_stored_messages};
use crate::model::thread::{LoadedThread, Node};
use crate::model::{DELTA_COUNTERS, MESSAGES, MessagesEncoding, has_marker, metadata_is_delta};
use crate::progress::Progress;
use crate::store::Store;
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::HashMap;

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
    let mut plan = ThreadPlan {
        thread_id: thread_id.to_owned(),
        status: "skipped",
        checkpoints_rewritten: 0,
        reason: None,
        bytes_before: 0,
        bytes_after: 0,
        accepted_delta_view: Vec::new(),
    };
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
            if matches!(f.code, "lineage.dangling_parent" | "lineage.cycle") {
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
            let bytes = codec::encode(&Value::Array(stored.to_vec()));
            let encoded = bytes.len() as i64;
            if let Some(v) = ck.version(MESSAGES) {
                if store.info().backend == "postgres" {
                    let hash = sha1_smol::Sha1::from(&bytes).digest().to_string();
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

fn digest(list: &[Value]) -> String {
    sha1_smol::Sha1::from(codec::encode(&Value::Array(list.to_vec())))
        .digest()
        .to_string()
}

/// Rewrites every delta checkpoint of one thread inside the caller's transaction and checks
/// the result before returning; `Err` means: roll back, refuse with this reason.
fn convert_thread(
    store: &crate::store::sqlite::SqliteStore,
    thread_id: &str,
    rewrites: &mut usize,
) -> Result<usize, String> {
    let abort_after = failpoint_after();
    let mut converted = 0;
    for ns in store.namespaces(thread_id).map_err(|e| e.to_string())? {
        let t = LoadedThread::load_full(store, thread_id, &ns).map_err(|e| e.to_string())?;
        if !t.nodes.iter().any(needs_rewrite) {
            continue;
        }
        let reducer = if t.nodes.iter().any(|n| has_marker(&n.metadata)) {
            Reducer::Deerflow
        } else {
            Reducer::Langgraph
        };
        let mut expect: HashMap<String, String> = HashMap::new();
        let mut failure: Option<String> = None;
        let res = for_each_stored_messages(&t, reducer, &mut |i, stored| {
            let n = &t.nodes[i];
            let Ok(ck) = &n.checkpoint else { return Ok(()) };
            let versioned = ck.version(MESSAGES).is_some();
            if versioned {
                expect.insert(n.id.clone(), digest(stored));
            }
            if !needs_rewrite(n) || failure.is_some() {
                return Ok(());
            }
            let step = (|| -> Result<(), String> {
                let row = store
                    .checkpoint(thread_id, &ns, &n.id)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("checkpoint {} vanished", n.id))?;
                let crate::store::CheckpointBody::Serialized { type_tag, bytes } = row.body else {
                    return Err("not a SQLite checkpoint".into());
                };
                if type_tag.as_deref() != Some("msgpack") {
                    return Err(format!(
                        "checkpoint {} has serializer type {:?}",
                        n.id, type_tag
                    ));
                }
                let body = codec::decode(&bytes).map_err(|e| e.to_string())?;
                let list = versioned.then(|| stored.to_vec());
                let new_body = codec::encode(&full_body(body, list));
                let new_meta = full_metadata(&row.metadata, &n.id)?;
                store
                    .update_checkpoint(thread_id, &ns, &n.id, &new_body, &new_meta)
                    .map_err(|e| e.to_string())?;
                *rewrites += 1;
                if abort_after == Some(*rewrites) {
                    std::process::abort();
                }
                Ok(())
            })();
            match step {
                Ok(()) => converted += 1,
                Err(e) => failure = Some(e),
            }
            Ok(())
        });
        if let Err(e) = res {
            return Err(format!("materialization fails: {e}"));
        }
        if let Some(e) = failure {
            return Err(e);
        }
        // Verify before commit: no delta signal left, and every versioned checkpoint stores
        // exactly the list delta mode showed.
        let after = LoadedThread::load_full(store, thread_id, &ns).map_err(|e| e.to_string())?;
        for n in &after.nodes {
            if metadata_is_delta(&n.metadata) || n.metadata.contains_key(crate::model::MODE_MARKER)
            {
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
    }
    Ok(converted)
}

/// `migrate delta-to-full --apply` on SQLite: per thread, one `BEGIN IMMEDIATE`
/// transaction that plans (under the write lock), rewrites, verifies and commits — or rolls
/// back and refuses. Killing the process at any moment leaves each thread old or new.
pub fn apply_sqlite(
    store: &crate::store::sqlite::SqliteStore,
    threads: &[String],
    all: bool,
    opts: &MigrateOptions,
    progress: &dyn Progress,
) -> Result<MigrateReport, Error> {
    let ids = crate::store::select_threads(store, if all { &[] } else { threads })?;
    progress.start("converting threads", Some(ids.len() as u64));
    let mut out = Vec::new();
    let mut rewrites = 0;
    for id in &ids {
        store.begin_immediate()?;
        let planned = match plan_thread(store, id, opts) {
            Ok(p) => p,
            Err(e) => {
                store.rollback()?;
                return Err(e);
            }
        };
        if planned.status != "converted" {
            store.rollback()?;
            out.push(planned);
            progress.inc(1);
            continue;
        }
        // A full-mode thread can be far larger than its delta form (every checkpoint holds
        // the whole list), and the WAL holds the transaction too: refuse rather than fill
        // the disk.
        let growth = planned.bytes_after.saturating_sub(planned.bytes_before);
        if let Some(free) = store.available_space() {
            if growth.saturating_mul(2) > free {
                store.rollback()?;
                out.push(refuse(
                    planned,
                    format!(
                        "not enough disk space: converting needs about {} MiB (twice the growth, for the WAL) and {} MiB are free",
                        growth.saturating_mul(2) / (1 << 20),
                        free / (1 << 20)
                    ),
                ));
                progress.inc(1);
                continue;
            }
        }
        match convert_thread(store, id, &mut rewrites) {
            Ok(n) => {
                store.commit()?;
                let mut p = planned;
                p.checkpoints_rewritten = n;
                out.push(p);
            }
            Err(reason) => {
                store.rollback()?;
                out.push(refuse(planned, reason));
            }
        }
        progress.inc(1);
    }
    progress.finish();
    let count = |s: &str| out.iter().filter(|p| p.status == s).count();
    Ok(MigrateReport {
        dry_run: false,
        converted: count("converted"),
        refused: count("refused"),
        skipped: count("skipped"),
        threads: out,
    })
}
