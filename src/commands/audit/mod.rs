//! `audit`: every serialized value of a store read once, thread by thread (`--jobs` threads
//! at a time over [`dfck_core::pool`]); every class and method the values would make
//! LangGraph import, aggregated per distinct import ([`tally`]) and classified against the
//! strict mode of langgraph-checkpoint 4.3.2 ([`dfck_core::strict`]); the strict-mode
//! verdict and the `allowed_msgpack_modules` allowlist it needs (docs/security.md).

pub mod tally;

use dfck_core::codec::imports::Via;
use dfck_core::error::{Error, StoreError};
use dfck_core::progress::Progress;
use dfck_core::store::{Backend, Store};
use dfck_core::strict::{Class, LANGGRAPH_CHECKPOINT, Switch};
use serde::Serialize;
use std::sync::Mutex;
use tally::{NotAudited, Place, Tally, Undecodable};

/// What strict mode would do with the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every value reads back under strict mode with the emitted allowlist.
    Reads,
    /// Some value is never allowed: strict mode (and, for method calls, every mode) does
    /// not revive it; possible tampering.
    Breaks,
    /// Nothing is never allowed, but some values could not be audited (encrypted without the
    /// key, another cipher, pickle, undecodable): dfck cannot say they read back.
    Unknown,
}

impl Verdict {
    /// The word tables print.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Reads => "reads",
            Verdict::Breaks => "breaks",
            Verdict::Unknown => "unknown",
        }
    }
}

/// Rows of one serializer tag.
#[derive(Debug, Clone, Serialize)]
pub struct SerializerRows {
    /// The tag as stored (`msgpack`, `json`, `pickle`, `null`, `bytes`, `bytearray`,
    /// `empty`, `msgpack+aes`, `msgpack+xor`, …; `NULL` for SQL NULL).
    #[serde(rename = "type")]
    pub type_tag: String,
    /// Values stored with it.
    pub rows: u64,
    /// Values read and walked.
    pub audited: u64,
    /// Values that did not decode (or decrypt).
    pub undecodable: u64,
    /// Why the other values were not audited.
    pub not_audited: Option<NotAudited>,
}

/// Where an import was first or last seen.
#[derive(Debug, Clone, Serialize)]
pub struct Seen {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// Checkpoint id (for a shared PostgreSQL blob, the first or last checkpoint naming it).
    pub checkpoint_id: String,
    /// The checkpoint's time, from its id (UUIDv6), UTC to the second.
    pub time: Option<String>,
    /// The channel, when known.
    pub channel: Option<String>,
    /// `checkpoint`, `blob` or `write`.
    pub row: &'static str,
}

impl From<Place> for Seen {
    fn from(p: Place) -> Self {
        Seen {
            time: dfck_core::time::uuid6_micros(&p.checkpoint_id).map(dfck_core::time::utc_text),
            thread_id: p.thread_id,
            checkpoint_ns: p.checkpoint_ns,
            checkpoint_id: p.checkpoint_id,
            channel: p.channel,
            row: p.row,
        }
    }
}

/// One distinct import of the store.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// The module imported.
    pub module: String,
    /// The attribute taken from it.
    pub name: String,
    /// For ext 3, the method called.
    pub method: Option<String>,
    /// The msgpack ext code, `None` for a `json` row's envelope.
    pub ext: Option<i8>,
    /// `ext N`, `json lc:2` or `json lc:1`.
    pub via: String,
    /// `safe`, `needs_allowlist` or `never_allowed`.
    pub class: Class,
    /// For `needs_allowlist`: the serializer argument that allows it.
    pub allowlist: Option<Switch>,
    /// Why it has its class.
    pub reason: &'static str,
    /// Values holding it.
    pub rows: u64,
    /// Checkpoints holding it.
    pub checkpoints: u64,
    /// Pending writes holding it.
    pub writes: u64,
    /// Threads holding it.
    pub threads: u64,
    /// The earliest checkpoint holding it.
    pub first_seen: Option<Seen>,
    /// The latest.
    pub last_seen: Option<Seen>,
}

/// Strict mode, summed up.
#[derive(Debug, Clone, Serialize)]
pub struct Strict {
    /// `reads`, `breaks` or `unknown`.
    pub verdict: Verdict,
    /// What `allowed_msgpack_modules` must hold (entries outside the safe set), sorted.
    pub allowed_msgpack_modules: Vec<[String; 2]>,
    /// Whether `LANGGRAPH_STRICT_MSGPACK=true` alone (the safe set) reads every value.
    pub safe_set_suffices: bool,
    /// Values that come back as plain data (dicts, lists, values) instead of objects under
    /// strict mode without the allowlist.
    pub rows_needing_allowlist: u64,
    /// Values holding an import that is never allowed.
    pub rows_never_allowed: u64,
    /// `json` constructor ids that come back as dicts in every mode unless
    /// `allowed_json_modules` names them.
    pub allowed_json_modules: Vec<Vec<String>>,
    /// `pickle` values: read only with `pickle_fallback=True`, which no allowlist restricts.
    pub pickle_rows: u64,
    /// Values not audited (encrypted without the key, other ciphers, pickle, unknown tags).
    pub rows_not_audited: u64,
    /// Values that did not decode or decrypt.
    pub rows_undecodable: u64,
}

/// `dfck audit`.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// Where the store is.
    pub location: String,
    /// Its backend.
    pub backend: Backend,
    /// The langgraph-checkpoint release whose strict mode the classes follow.
    pub langgraph_checkpoint: &'static str,
    /// Threads audited.
    pub threads_audited: u64,
    /// Serialized values read.
    pub values: u64,
    /// The strict-mode verdict and allowlist.
    pub strict: Strict,
    /// Values by serializer tag.
    pub serializers: Vec<SerializerRows>,
    /// Every distinct import: never allowed first, then needing an allowlist, then safe.
    pub entries: Vec<Entry>,
    /// Undecodable values (the first 20 by place; `strict.rows_undecodable` counts them all).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub undecodable: Vec<Undecodable>,
    /// Threads listed but deleted before they were read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threads_gone: Vec<String>,
}

impl AuditReport {
    /// Exit 1 unless every value reads back under strict mode with the allowlist.
    pub fn has_problems(&self) -> bool {
        self.strict.verdict != Verdict::Reads
    }
}

/// Audits one thread (every namespace) into a tally of its own; `None` when it has no
/// namespace any more (deleted since the listing).
pub fn audit_thread(store: &dyn Store, thread_id: &str) -> Result<Option<Tally>, StoreError> {
    let namespaces = store.namespaces(thread_id)?;
    if namespaces.is_empty() {
        return Ok(None);
    }
    let mut t = Tally::default();
    for ns in &namespaces {
        store.scan_stored_values(thread_id, ns, &mut |v| {
            t.value(thread_id, ns, v);
            Ok(())
        })?;
    }
    Ok(Some(t))
}

/// Audits the given threads (every thread when `threads` is empty) over `jobs` connections
/// (`open` makes one for each extra job).
pub fn audit_store<'s>(
    store: &'s (dyn Store + 's),
    open: &(dyn Fn() -> Result<Box<dyn Store>, StoreError> + Sync),
    threads: &[String],
    jobs: usize,
    progress: &(dyn Progress + Sync),
) -> Result<AuditReport, Error> {
    // Every thread of the store is read a page at a time as the run goes, never all listed.
    let conn = dfck_core::store::ReadOnly(store);
    let selection = dfck_core::write::Selection::of(&conn, threads, false)?;
    progress.start("auditing threads", selection.total(&conn, progress)?);
    let open_more = || open().map(|b| -> Box<dyn Store + 's> { b });
    let total = Mutex::new(Tally::default());
    let mut gone: Vec<String> = Vec::new();
    let audited = selection.each(&conn, &mut |ids| {
        let results = dfck_core::pool::run(ids.len(), jobs, store, &open_more, &|s, i| {
            let r = audit_thread(s, &ids[i])?;
            progress.inc(1);
            Ok(match r {
                Some(t) => {
                    if let Ok(mut total) = total.lock() {
                        total.merge(t);
                    }
                    false
                }
                None => true,
            })
        })?;
        gone.extend(
            results
                .into_iter()
                .zip(ids)
                .filter(|(gone, _)| *gone)
                .map(|(_, id)| id.clone()),
        );
        Ok(())
    });
    progress.finish();
    audited?;
    let total = total.into_inner().unwrap_or_else(|p| p.into_inner());
    let info = store.info();
    Ok(report(info.location.clone(), info.backend, total, gone))
}

/// The report of a store's tally.
pub fn report(
    location: String,
    backend: Backend,
    t: Tally,
    threads_gone: Vec<String>,
) -> AuditReport {
    let mut json: Vec<Vec<String>> = t
        .entries
        .values()
        .filter(|e| e.verdict.switch == Some(Switch::AllowedJsonModules))
        .filter_map(|e| e.json_id.clone())
        .collect();
    json.sort();
    json.dedup();
    let mut entries: Vec<Entry> = t
        .entries
        .into_values()
        .map(|e| Entry {
            ext: match e.via {
                Via::Ext(code) => Some(code),
                _ => None,
            },
            via: e.via.label(),
            class: e.verdict.class,
            allowlist: e.verdict.switch,
            reason: e.verdict.reason,
            module: e.module,
            name: e.name,
            method: e.method,
            rows: e.rows,
            checkpoints: e.checkpoints,
            writes: e.writes,
            threads: e.threads,
            first_seen: e.first.map(Seen::from),
            last_seen: e.last.map(Seen::from),
        })
        .collect();
    entries.sort_by(|a, b| {
        (
            std::cmp::Reverse(a.class),
            &a.module,
            &a.name,
            &a.method,
            a.ext,
            &a.via,
        )
            .cmp(&(
                std::cmp::Reverse(b.class),
                &b.module,
                &b.name,
                &b.method,
                b.ext,
                &b.via,
            ))
    });
    let mut msgpack: Vec<[String; 2]> = entries
        .iter()
        .filter(|e| e.allowlist == Some(Switch::AllowedMsgpackModules))
        .map(|e| [e.module.clone(), e.name.clone()])
        .collect();
    msgpack.sort();
    msgpack.dedup();
    let serializers: Vec<SerializerRows> = t
        .serializers
        .into_iter()
        .map(|(type_tag, s)| SerializerRows {
            type_tag,
            rows: s.rows,
            audited: s.audited,
            undecodable: s.undecodable,
            not_audited: s.not_audited,
        })
        .collect();
    let not_audited: u64 = serializers
        .iter()
        .map(|s| s.rows - s.audited - s.undecodable)
        .sum();
    let pickle_rows = serializers
        .iter()
        .filter(|s| s.not_audited == Some(NotAudited::Pickle))
        .map(|s| s.rows - s.audited - s.undecodable)
        .sum();
    let never = entries.iter().any(|e| e.class == Class::NeverAllowed);
    let verdict = if never {
        Verdict::Breaks
    } else if not_audited > 0 || t.undecodable > 0 {
        Verdict::Unknown
    } else {
        Verdict::Reads
    };
    let mut undecodable = t.undecodable_examples;
    undecodable.sort();
    AuditReport {
        location,
        backend,
        langgraph_checkpoint: LANGGRAPH_CHECKPOINT,
        threads_audited: t.threads,
        values: t.values,
        strict: Strict {
            verdict,
            safe_set_suffices: verdict == Verdict::Reads && msgpack.is_empty(),
            allowed_msgpack_modules: msgpack,
            rows_needing_allowlist: t.rows_needing_allowlist,
            rows_never_allowed: t.rows_never_allowed,
            allowed_json_modules: json,
            pickle_rows,
            rows_not_audited: not_audited,
            rows_undecodable: t.undecodable,
        },
        serializers,
        entries,
        undecodable,
        threads_gone,
    }
}
