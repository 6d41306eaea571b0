//! `verify`: every check of the contract's finding table over a store or a set of threads,
//! thread by thread (one (thread, ns) in memory at a time), optionally on several
//! connections at once ([`dfck_core::pool`]); with one, reading on the connection's thread
//! while a second checks ([`dfck_core::pool::two_stage`]).

use dfck_core::codec::Value;
use dfck_core::error::{CodecError, Error, ModelError, StoreError};
use dfck_core::finding::{Finding, FindingCode, Severity};
use dfck_core::lineage::{
    TurnInputs, fork_analysis, fork_findings, integrity, regenerate_findings,
};
use dfck_core::materialize::reducers::coerce_message;
use dfck_core::model::thread::{LoadVisitor, LoadedThread};
use dfck_core::model::{
    Checkpoint, DELTA_COUNTERS, MESSAGES, MODE_MARKER, MessagesEncoding, ThreadMode, Write,
    thread_mode,
};
use dfck_core::progress::Progress;
use dfck_core::store::batch::{NamespaceRows, ThreadRows};
use dfck_core::store::{Store, WriteRow};
use serde::Serialize;
use std::collections::HashMap;

/// Options of a verify run.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// A parent-walk budget the user asked for (`--max-depth`); none by default: cycle
    /// detection bounds every walk.
    pub max_depth: Option<usize>,
    /// Connections (threads of work) to check threads on.
    pub jobs: usize,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            max_depth: None,
            jobs: 1,
        }
    }
}

/// `dfck verify`.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    /// Threads checked.
    pub threads_checked: u64,
    /// Checkpoints checked.
    pub checkpoints_checked: u64,
    /// Findings, by thread, namespace, checkpoint.
    pub findings: Vec<Finding>,
    /// Threads listed but deleted (by DeerFlow) before they were read: skipped, named here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threads_gone: Vec<String>,
    /// Whether a finding handed to a sink (not kept in `findings`) was an error.
    #[serde(skip)]
    pub streamed_errors: bool,
}

impl VerifyReport {
    /// Whether any finding has severity `error`.
    pub fn has_errors(&self) -> bool {
        self.streamed_errors || self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

fn codec_code(e: &ModelError) -> FindingCode {
    match e {
        ModelError::Decode {
            source: CodecError::UnsupportedSerializer(_),
            ..
        } => FindingCode::ValueUnsupportedSerializer,
        ModelError::Decode {
            source: CodecError::Decrypt(_),
            ..
        } => FindingCode::ValueDecryptFailed,
        _ => FindingCode::ValueUndecodable,
    }
}

fn finding(t: &LoadedThread, code: FindingCode, checkpoint_id: &str, message: String) -> Finding {
    dfck_core::lineage::finding(t, code, Some(checkpoint_id), message)
}

/// The items of one persisted `messages` write (an Overwrite's value unwrapped; an
/// `Overwrite(None)` has none).
fn write_items(v: &Value) -> Vec<&Value> {
    match v.overwrite_value().unwrap_or(v) {
        Value::Array(items) => items.iter().collect(),
        Value::Nil if v.overwrite_value().is_some() => Vec::new(),
        other => vec![other],
    }
}

/// Messages without an id inside one persisted `messages` write value.
fn count_missing_ids(v: &Value) -> usize {
    write_items(v)
        .into_iter()
        .filter(|m| {
            if m.is_model() {
                m.model_field_str("id").is_none()
            } else if m.as_map().is_some() && (m.get("role").is_some() || m.get("type").is_some()) {
                m.get("id").and_then(Value::as_str).is_none()
            } else {
                false
            }
        })
        .count()
}

/// Value checks that need the values themselves, run while a thread loads.
struct ValueChecks {
    thread_id: String,
    checkpoint_ns: String,
    findings: Vec<Finding>,
    /// Human messages of the run inputs, for `lineage.regenerate_budget`.
    inputs: TurnInputs,
    /// Encrypted and plaintext values, for `value.plaintext_in_encrypted_thread`.
    sealing: SealingFacts,
}

/// Where a namespace's encrypted and plaintext serialized values are (checkpoint ids).
#[derive(Default)]
struct SealingFacts {
    encrypted: u64,
    plain: u64,
    /// The oldest checkpoint holding an encrypted value.
    first_encrypted: Option<String>,
    /// Checkpoints holding plaintext values (each once).
    plain_at: std::collections::BTreeSet<String>,
}

impl SealingFacts {
    fn add(&mut self, checkpoint_id: &str, encrypted: u32, plain: u32) {
        self.encrypted += u64::from(encrypted);
        self.plain += u64::from(plain);
        if encrypted > 0
            && self
                .first_encrypted
                .as_deref()
                .is_none_or(|f| checkpoint_id < f)
        {
            self.first_encrypted = Some(checkpoint_id.to_owned());
        }
        if plain > 0 {
            self.plain_at.insert(checkpoint_id.to_owned());
        }
    }

    /// The LangGraph #8938 shape: plaintext values beside encrypted ones, as one finding at
    /// the newest checkpoint holding plaintext.
    fn finding(&self, thread_id: &str, ns: &str) -> Option<Finding> {
        let first = self.first_encrypted.as_deref()?;
        let newest = self.plain_at.last()?;
        let newer = self
            .plain_at
            .iter()
            .filter(|id| id.as_str() > first)
            .count();
        let when = if newer == 0 {
            "all older than the thread's first encrypted value (written before encryption was switched on)".to_owned()
        } else {
            format!(
                "{newer} of them newer than the thread's first encrypted value {first}: not written by an application with encryption on"
            )
        };
        Some(Finding::new(
            FindingCode::ValuePlaintextInEncryptedThread,
            thread_id,
            ns,
            Some(newest),
            format!(
                "{} plaintext value(s) at {} checkpoint(s) beside {} encrypted one(s), {when}; LangGraph reads plaintext rows without any check even with encryption on (LangGraph #8938)",
                self.plain,
                self.plain_at.len(),
                self.encrypted
            ),
        ))
    }
}

impl ValueChecks {
    fn push(&mut self, code: FindingCode, id: &str, message: String) {
        self.findings.push(Finding::new(
            code,
            &self.thread_id,
            &self.checkpoint_ns,
            Some(id),
            message,
        ));
    }
}

impl LoadVisitor for ValueChecks {
    fn checkpoint(&mut self, ck: &Checkpoint) {
        self.sealing
            .add(&ck.checkpoint_id, ck.sealing.encrypted, ck.sealing.plain);
        if let Some(kind) = ck
            .value(MESSAGES)
            .and_then(|v| dfck_core::model::messages_not_a_list(v, false))
        {
            self.push(
                FindingCode::ValueMessagesNotAList,
                &ck.checkpoint_id,
                format!(
                    "channel 'messages' stores {kind}, not a list of messages: LangGraph hands it to the messages reducer as it is, which fails or shows it as the conversation"
                ),
            );
        }
        for (ch, v) in &ck.channel_values {
            if v.ext_class() == Some(("langgraph.types", "Overwrite")) {
                self.push(
                    FindingCode::ValueLiteralOverwrite,
                    &ck.checkpoint_id,
                    format!(
                        "channel '{ch}' stores a literal langgraph.types.Overwrite wrapper (DeerFlow #4380): the next reader fails with \"'Overwrite' object is not subscriptable\""
                    ),
                );
            }
        }
    }

    fn write(&mut self, w: &WriteRow) {
        let mut one = dfck_core::model::Sealing::default();
        one.count(w.type_tag.as_deref());
        self.sealing.add(&w.checkpoint_id, one.encrypted, one.plain);
        match Write::from_row(w.clone(), &self.thread_id) {
            Err(e) => self.push(
                codec_code(&e),
                &w.checkpoint_id,
                format!("{e}: replaying this write fails in LangGraph too"),
            ),
            Ok(dw) if w.channel == MESSAGES => {
                self.inputs.messages_write(&w.checkpoint_id, &dw.value);
                if let Some(err) = write_items(&dw.value)
                    .into_iter()
                    .find_map(|m| coerce_message(m.clone()).err())
                {
                    self.push(
                        FindingCode::ValueUndecodable,
                        &w.checkpoint_id,
                        format!(
                            "the messages write of task {} (idx {}) holds something that is not a message ({err}): LangGraph's replay fails on it",
                            w.task_id, w.idx
                        ),
                    );
                }
                let missing = count_missing_ids(&dw.value);
                if missing > 0 {
                    self.push(
                        FindingCode::MessageMissingId,
                        &w.checkpoint_id,
                        format!(
                            "{missing} message(s) without an id in the messages write of task {} (idx {}): delta replay assigns a new random id on every read",
                            w.task_id, w.idx
                        ),
                    );
                }
            }
            Ok(_) => {}
        }
    }
}

/// Per-thread facts needed across namespaces.
#[derive(Default)]
struct ThreadFacts {
    any_delta: bool,
    any_full_plain: bool,
}

/// Checks one (thread, ns).
fn check_namespace(
    t: &LoadedThread,
    opts: &VerifyOptions,
    facts: &mut ThreadFacts,
) -> Vec<Finding> {
    let mut out = integrity(t, opts.max_depth);
    let marked_thread = t.nodes.iter().any(|n| n.facts.marked_delta());
    for n in &t.nodes {
        let ck = match &n.checkpoint {
            Ok(ck) => ck,
            Err(e) => {
                out.push(finding(
                    t,
                    codec_code(e),
                    &n.id,
                    format!("{e}: LangGraph (and DeerFlow) cannot read this checkpoint either"),
                ));
                continue;
            }
        };
        let delta = n.facts.delta;
        let enc = n.messages_encoding.unwrap_or(MessagesEncoding::Unversioned);
        let marker = n.facts.marker.as_deref();
        facts.any_delta |= delta;
        facts.any_full_plain |= !delta && enc == MessagesEncoding::Plain;
        if let Some(m) = marker {
            if m.as_str() != Some("delta") {
                out.push(finding(
                    t,
                    FindingCode::ModeUnknownMarker,
                    &n.id,
                    format!(
                        "{MODE_MARKER} is {m}; DeerFlow only writes \"delta\" and treats anything else as no marker"
                    ),
                ));
            }
        }
        if enc == MessagesEncoding::Absent && !delta {
            out.push(finding(
                t,
                FindingCode::ModeUnmarkedDelta,
                &n.id,
                format!(
                    "messages is versioned but not stored (a delta checkpoint) and the metadata has neither the {MODE_MARKER} marker nor {DELTA_COUNTERS}.messages: a full-mode reader silently sees the wrong messages here"
                ),
            ));
        }
        if enc == MessagesEncoding::Snapshot && marker.is_none() && marked_thread {
            out.push(finding(
                t,
                FindingCode::ModeUnmarkedSnapshot,
                &n.id,
                "a _DeltaSnapshot stored without the DeerFlow marker in a marked thread: DeerFlow's full-mode gate does not see this checkpoint as delta".into(),
            ));
        }
        if enc == MessagesEncoding::Plain && n.facts.marked_delta() {
            let shared = n
                .parent_index
                .and_then(|p| t.checkpoint(p))
                .is_some_and(|p| {
                    p.version(MESSAGES).is_some() && p.version(MESSAGES) == ck.version(MESSAGES)
                });
            if !shared {
                out.push(finding(
                    t,
                    FindingCode::ModeMarkerWithoutDelta,
                    &n.id,
                    "the delta marker is present but messages is stored as a plain list: the data is full-mode, yet a full-mode DeerFlow refuses it".into(),
                ));
            }
        }
    }
    let analysis = fork_analysis(t);
    out.extend(fork_findings(t, &analysis));
    out
}

/// Threads per unit of work, at most: one batch where the backend reads threads together
/// ([`Store::read_threads`]).
const BATCH_THREADS: usize = 128;
/// Bytes of rows one batch holds, about.
const BATCH_BYTES: usize = 16 << 20;

/// One namespace to check: read now on a connection, or read with its thread's batch.
enum Namespace<'a> {
    Read(&'a dyn Store, String),
    Given(NamespaceRows),
}

/// Checks every namespace of one thread.
pub fn verify_thread(
    store: &dyn Store,
    thread_id: &str,
    opts: &VerifyOptions,
) -> Result<(Vec<Finding>, u64), StoreError> {
    let namespaces = store.namespaces(thread_id)?;
    check_thread(
        thread_id,
        opts,
        namespaces
            .into_iter()
            .map(|ns| Namespace::Read(store, ns))
            .collect(),
    )
}

fn check_thread(
    thread_id: &str,
    opts: &VerifyOptions,
    namespaces: Vec<Namespace>,
) -> Result<(Vec<Finding>, u64), StoreError> {
    let mut findings = Vec::new();
    let mut checkpoints = 0;
    let mut facts = ThreadFacts::default();
    for source in namespaces {
        let ns = match &source {
            Namespace::Read(_, ns) => ns.clone(),
            Namespace::Given(rows) => rows.checkpoint_ns.clone(),
        };
        let mut values = ValueChecks {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: ns.clone(),
            findings: Vec::new(),
            inputs: TurnInputs::default(),
            sealing: SealingFacts::default(),
        };
        let t = match source {
            Namespace::Read(store, ns) => {
                LoadedThread::load_with(store, thread_id, &ns, &mut values)?
            }
            Namespace::Given(rows) => LoadedThread::from_rows(thread_id, rows, &mut values)?,
        };
        checkpoints += t.nodes.len() as u64;
        findings.extend(check_namespace(&t, opts, &mut facts));
        findings.extend(regenerate_findings(&t, Some(&values.inputs)));
        findings.extend(values.findings);
        findings.extend(values.sealing.finding(thread_id, &ns));
    }
    if checkpoints == 0 {
        return Err(StoreError::ThreadNotFound {
            thread_id: thread_id.to_owned(),
            checkpoint_ns: String::new(),
        });
    }
    if thread_mode(facts.any_delta, facts.any_full_plain) == ThreadMode::Mixed {
        findings.push(Finding {
            code: FindingCode::ModeMixedThread,
            severity: Severity::Info,
            thread_id: thread_id.to_owned(),
            checkpoint_ns: String::new(),
            checkpoint_id: None,
            message: "full checkpoints followed by delta ones (a full→delta migration): a full-mode DeerFlow cannot open this thread".into(),
        });
    }
    Ok((findings, checkpoints))
}

/// The findings and checkpoints of one thread, or `None`: listed, then deleted by DeerFlow
/// before it was read.
type Checked = Option<(Vec<Finding>, u64)>;

/// A thread of a chunk as its read leaves it ([`read_chunk`]).
enum Slot {
    /// Read on its own and checked there.
    Done(Checked),
    /// Read with its batch: checked from its rows, which needs no connection.
    Given(ThreadRows),
    /// Its read or check failed: the chunk's error (the threads after it are not read).
    Failed(StoreError),
}

/// The findings and checkpoint count of each thread of `ids`, in order: [`read_chunk`],
/// then [`check_slots`].
fn verify_chunk(
    store: &dyn Store,
    ids: &[String],
    opts: &VerifyOptions,
    failpoints: &dfck_core::failpoint::Failpoints,
    progress: &(dyn Progress + Sync),
) -> Result<Vec<Checked>, StoreError> {
    let slots = read_chunk(store, ids, opts, failpoints, progress)?;
    check_slots(ids, slots, opts, progress)
}

/// How long a chunk's read transaction is held before the next thread renews it, so that a
/// live writer's WAL can be checkpointed past it.
const SNAPSHOT_HOLD: std::time::Duration = std::time::Duration::from_millis(200);

/// Reads the threads of `ids`, all in one read transaction (SQLite: not one per statement),
/// renewed before a thread read on its own once [`SNAPSHOT_HOLD`] has passed: those the
/// store reads as a batch are left to [`check_slots`], the others read one by one and
/// checked here.
fn read_chunk(
    store: &dyn Store,
    ids: &[String],
    opts: &VerifyOptions,
    failpoints: &dfck_core::failpoint::Failpoints,
    progress: &(dyn Progress + Sync),
) -> Result<Vec<Slot>, StoreError> {
    store.begin_read_transaction()?;
    let read = (|| -> Result<Vec<Slot>, StoreError> {
        let budget = failpoints.batch_bytes(BATCH_BYTES);
        let batch = match ids {
            [_, _, ..] if budget > 0 => store.read_threads(ids, budget, false)?,
            _ => None,
        };
        let required = batch.is_some() && failpoints.batch_required();
        let mut given: HashMap<String, ThreadRows> = batch
            .unwrap_or_default()
            .into_iter()
            .map(|t| (t.thread_id.clone(), t))
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        let mut since = std::time::Instant::now();
        for id in ids {
            let checked = match given.remove(id) {
                Some(t) => {
                    out.push(Slot::Given(t));
                    continue;
                }
                None if required => Err(StoreError::Query {
                    what: format!("reading thread {id}"),
                    reason: "failpoint batch-required: read on its own, not with its batch".into(),
                }),
                None => {
                    // A failure here takes its place after the batch's threads before it.
                    let mut renewed = Ok(());
                    if since.elapsed() >= SNAPSHOT_HOLD {
                        renewed = store
                            .end_read_transaction()
                            .and_then(|()| store.begin_read_transaction());
                        since = std::time::Instant::now();
                    }
                    renewed.and_then(|()| verify_thread(store, id, opts))
                }
            };
            match gone_or(checked) {
                Ok(c) => out.push(Slot::Done(c)),
                Err(e) => {
                    out.push(Slot::Failed(e));
                    break;
                }
            }
            progress.inc(1);
        }
        Ok(out)
    })();
    let ended = store.end_read_transaction();
    let out = read?;
    ended?;
    Ok(out)
}

/// A thread deleted before it was read is `None`, not an error.
fn gone_or(checked: Result<(Vec<Finding>, u64), StoreError>) -> Result<Checked, StoreError> {
    match checked {
        Ok(fc) => Ok(Some(fc)),
        Err(StoreError::ThreadNotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Checks the threads [`read_chunk`] left to be checked from their rows, and gives every
/// thread's result in order (the first failure, in thread order, fails the chunk).
fn check_slots(
    ids: &[String],
    slots: Vec<Slot>,
    opts: &VerifyOptions,
    progress: &(dyn Progress + Sync),
) -> Result<Vec<Checked>, StoreError> {
    let mut out = Vec::with_capacity(ids.len());
    for (id, slot) in ids.iter().zip(slots) {
        out.push(match slot {
            Slot::Done(c) => c,
            Slot::Failed(e) => return Err(e),
            Slot::Given(t) => {
                let namespaces = t.namespaces.into_iter().map(Namespace::Given).collect();
                let checked = gone_or(check_thread(id, opts, namespaces))?;
                progress.inc(1);
                checked
            }
        });
    }
    Ok(out)
}

/// Where findings go as threads finish: kept in the report, or handed to a sink in thread
/// order (then the DeerFlow findings), so a streamed report holds none of them.
pub type FindingSink<'a> = &'a mut (dyn FnMut(&Finding) -> Result<(), Error> + Send);

/// Verifies the given threads (every thread when `threads` is empty). `open` makes one
/// more connection for each extra job. With `sink`, findings are handed over as each thread
/// finishes, in thread order, and the report keeps only the counts.
pub fn verify_store<'s>(
    store: &'s (dyn Store + 's),
    open: &(dyn Fn() -> Result<Box<dyn Store>, StoreError> + Sync),
    threads: &[String],
    opts: &VerifyOptions,
    progress: &(dyn Progress + Sync),
    mut sink: Option<FindingSink<'_>>,
) -> Result<VerifyReport, Error> {
    // Every thread of the store is read a page at a time as the run goes, never all listed.
    let conn = dfck_core::store::ReadOnly(store);
    let selection = dfck_core::write::Selection::of(&conn, threads, false)?;
    progress.start("verifying threads", selection.total(&conn, progress)?);
    let failpoints = dfck_core::failpoint::Failpoints::from_env("verify");
    // Connections the threads leave over split one thread's scan (docs/storage-format.md),
    // as many as the first page leaves.
    // (0 until the first page is read).
    let split = std::sync::atomic::AtomicUsize::new(0);
    let relaxed = std::sync::atomic::Ordering::Relaxed;
    // Extra workers' connections, as trait objects living as long as the caller's.
    let open_more = || {
        let split = split.load(relaxed).max(1);
        open().map(|b| -> Box<dyn Store + 's> {
            b.split_scans(split);
            b
        })
    };
    let mut report = VerifyReport {
        threads_checked: 0,
        checkpoints_checked: 0,
        findings: Vec::new(),
        threads_gone: Vec::new(),
        streamed_errors: false,
    };
    let mut take = |report: &mut VerifyReport, f: Finding| -> Result<(), Error> {
        match sink.as_mut() {
            Some(s) => {
                report.streamed_errors |= f.severity == Severity::Error;
                s(&f)
            }
            None => {
                report.findings.push(f);
                Ok(())
            }
        }
    };
    let mut failure: Option<Error> = None;
    let result = selection.each(&conn, &mut |ids| {
        if split.load(relaxed) == 0 {
            failpoints.after_listing();
            let n = dfck_core::pool::connections_per_item(ids.len(), opts.jobs).max(1);
            store.split_scans(n);
            split.store(n, relaxed);
        }
        // Threads go to the workers in chunks, small enough to keep every worker busy.
        let chunk = match opts.jobs {
            0 | 1 => BATCH_THREADS,
            jobs => (ids.len() / (jobs * 8)).clamp(1, BATCH_THREADS),
        };
        let chunks: Vec<&[String]> = ids.chunks(chunk).collect();
        let mut sink = |k: usize, results: Vec<Checked>| {
            for (id, r) in chunks[k].iter().zip(results) {
                match r {
                    Some((findings, c)) => {
                        report.threads_checked += 1;
                        report.checkpoints_checked += c;
                        for f in findings {
                            if let Err(e) = take(&mut report, f) {
                                failure = Some(e);
                                return Err(StoreError::Query {
                                    what: "writing findings".into(),
                                    reason: "aborted".into(),
                                });
                            }
                        }
                    }
                    None => report.threads_gone.push(id.clone()),
                }
            }
            Ok(())
        };
        // One connection: its thread reads while a second checks.
        let ran = match opts.jobs {
            0 | 1 => dfck_core::pool::two_stage(
                chunks.len(),
                true,
                &mut |k| read_chunk(store, chunks[k], opts, &failpoints, progress),
                &|k, slots| check_slots(chunks[k], slots, opts, progress),
                &mut sink,
                &|| StoreError::Query {
                    what: "checking threads".into(),
                    reason: "the checking thread stopped".into(),
                },
            ),
            _ => dfck_core::pool::run_ordered(
                chunks.len(),
                opts.jobs,
                store,
                &open_more,
                &|s, k| verify_chunk(s, chunks[k], opts, &failpoints, progress),
                &mut sink,
            ),
        };
        ran.map_err(Error::from)
    });
    progress.finish();
    if let Some(e) = failure {
        return Err(e);
    }
    result?;
    let now = dfck_core::time::now_micros() / 1_000_000;
    crate::commands::deerflow_view::findings(store, threads, threads.is_empty(), now, &mut |f| {
        take(&mut report, f)
    })?;
    Ok(report)
}
