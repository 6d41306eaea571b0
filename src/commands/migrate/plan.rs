//! Planning one thread of `migrate delta-to-full`: which checkpoints a conversion rewrites,
//! what it must refuse and why (`docs/replay-and-forks.md`), the bytes before and after.

use super::checks::{digest, encoded_len};
use super::{MigrateOptions, PlanStatus, ThreadPlan};
use dfck_core::codec::{self, EXT_DELTA_SNAPSHOT, Value};
use dfck_core::error::Error;
use dfck_core::lineage::fork_analysis;
use dfck_core::materialize::for_each_stored_messages;
use dfck_core::materialize::reducers::unrebuildable_message;
use dfck_core::model::thread::{LoadedThread, Node};
use dfck_core::model::{DELTA_COUNTERS, MESSAGES, MessagesEncoding, metadata_is_delta};
use dfck_core::store::Store;
use dfck_core::write::preamble::{self, Preamble};
use serde_json::Value as Json;
use std::collections::HashMap;

/// Delta by metadata, or by structure (`messages` a snapshot or versioned but not stored).
pub(super) fn delta_encoded(n: &Node) -> bool {
    metadata_is_delta(&n.metadata)
        || matches!(
            n.messages_encoding,
            Some(MessagesEncoding::Snapshot | MessagesEncoding::Absent)
        )
}

/// A checkpoint the conversion rewrites: delta, or carrying DeerFlow's marker key.
pub(super) fn needs_rewrite(n: &Node) -> bool {
    delta_encoded(n) || n.metadata.contains_key(dfck_core::model::MODE_MARKER)
}

impl ThreadPlan {
    /// A thread with nothing to do yet (`skipped`, no bytes counted).
    pub(super) fn skipped(thread_id: &str) -> Self {
        ThreadPlan {
            thread_id: thread_id.to_owned(),
            status: PlanStatus::Skipped,
            checkpoints_rewritten: 0,
            reason: None,
            bytes_before: 0,
            bytes_after: 0,
            accepted_delta_view: Vec::new(),
        }
    }
}

pub(super) fn refuse(mut p: ThreadPlan, reason: String) -> ThreadPlan {
    p.status = PlanStatus::Refused;
    p.reason = Some(reason);
    p.checkpoints_rewritten = 0;
    p.bytes_after = p.bytes_before;
    p
}

/// Plans one thread (every namespace), reading it as it is now.
pub fn plan_thread(
    store: &dyn Store,
    thread_id: &str,
    opts: &MigrateOptions,
) -> Result<ThreadPlan, Error> {
    plan_thread_keeping(store, thread_id, opts, None)
}

/// [`plan_thread`], handing the loaded namespaces of a convertible thread to `keep` (the
/// conversion then walks them without reading the thread again).
pub(super) fn plan_thread_keeping(
    store: &dyn Store,
    thread_id: &str,
    opts: &MigrateOptions,
    keep: Option<&mut Vec<LoadedThread>>,
) -> Result<ThreadPlan, Error> {
    let mut plan = ThreadPlan::skipped(thread_id);
    let threads = match preamble::load(store, thread_id, true)? {
        Preamble::Gone => {
            plan.reason = Some(preamble::THREAD_GONE.into());
            return Ok(plan);
        }
        Preamble::Loaded(threads) => threads,
    };
    plan.bytes_before = threads.iter().flat_map(|t| &t.nodes).map(|n| n.bytes).sum();
    plan.bytes_after = plan.bytes_before;
    let is_delta = |t: &LoadedThread| t.nodes.iter().any(delta_encoded);
    // A checkpoint that cannot be read hides its mode: the thread is refused, never
    // skipped as "no delta checkpoint".
    if let Some(e) = preamble::unreadable(&threads) {
        return Ok(refuse(plan, format!("unreadable checkpoint: {e}")));
    }
    if !threads.iter().any(is_delta) {
        plan.reason = Some("no delta checkpoint".into());
        return Ok(plan);
    }
    plan.status = PlanStatus::Converted;
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
        if let Some(f) = preamble::broken_lineage(t).into_iter().next() {
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
        for n in &t.nodes {
            let ck = match &n.checkpoint {
                Ok(ck) => ck,
                Err(e) => return Ok(refuse(plan, format!("unreadable checkpoint: {e}"))),
            };
            if let Some(kind) = ck
                .value(MESSAGES)
                .and_then(|v| dfck_core::model::messages_not_a_list(v, true))
            {
                return Ok(refuse(
                    plan,
                    format!(
                        "{} stores {kind} as 'messages', not a list: a full-mode list would show something else (dfck verify reports it as value.messages_not_a_list)",
                        n.id
                    ),
                ));
            }
            let stored = ck.value(MESSAGES).map(|v| match v {
                Value::Ext(e) if e.code == EXT_DELTA_SNAPSHOT => e.inner(),
                other => Some(other),
            });
            if let Some(class) = stored
                .flatten()
                .and_then(Value::as_array)
                .and_then(unrebuildable_message)
            {
                return Ok(refuse(
                    plan,
                    format!(
                        "{} stores a {class} message: LangGraph rebuilds it only where that class imports (else as a plain message by its 'type'), so a full-mode list may not read back as the delta view does; not converted",
                        n.id
                    ),
                ));
            }
            for w in &n.writes {
                let v = match codec::decode_typed(w.type_tag.as_deref(), w.value.clone()) {
                    Ok(v) => v,
                    Err(e) => {
                        return Ok(refuse(plan, format!("unreadable write on {}: {e}", n.id)));
                    }
                };
                if w.channel != MESSAGES {
                    continue;
                }
                let v = v.overwrite_value().cloned().unwrap_or(v);
                let items = match &v {
                    Value::Array(items) => items.iter().collect::<Vec<_>>(),
                    other => vec![other],
                };
                if let Some(class) = unrebuildable_message(items) {
                    return Ok(refuse(
                        plan,
                        format!(
                            "a messages write on {} holds a {class} message: LangGraph's delta reader rebuilds it only where that class imports (else as a plain message by its 'type'), so a full-mode list may not read back as the delta view does; not converted",
                            n.id
                        ),
                    ));
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
        let reducer = opts.reducer_for(t);
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
                if store.values_shared_by_version() {
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
