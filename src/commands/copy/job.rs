//! The copy as a write-engine job: [`CopyConn`] pairs the read-only source (one snapshot)
//! with the target store the engine writes; [`decide`] reads a thread from the source — its
//! checkpoints and, when DeerFlow's tables are copied, its rows there — and says what to do
//! with it; [`Copy`] inserts its rows and verifies them before commit, both parts in the
//! thread's one transaction.

use super::app::{AppCopy, AppPrints, AppState, ThreadApp};
use super::cache::PurgeReplaced;
use super::convert::{LaidBody, LaidNs, lay_out};
use super::digest::{ThreadDigest, difference, digest_thread, raw_digest};
use super::stream::{NsSource, NsStream, copy_streamed, read_source};
use super::{CopyOptions, CopyStatus, CopyThread};
use dfck_core::error::{Error, StoreError};
use dfck_core::store::app_copy::AppRows;
use dfck_core::store::postgres::PostgresStore;
use dfck_core::store::sqlite::SqliteStore;
use dfck_core::store::{
    BackupPlan, BatchTuning, PlanStore, Store, ThreadLock, WalLeft, WriteStore,
};
use dfck_core::write::{ApplyContext, Planned, Refusal, ThreadJob, ThreadPlan};

/// The store a copy writes.
pub enum TargetConn {
    /// A SQLite file, opened read-write.
    Sqlite(SqliteStore),
    /// A PostgreSQL database, opened for write transactions.
    Postgres(PostgresStore),
}

impl TargetConn {
    fn write(&self) -> &dyn WriteStore {
        match self {
            TargetConn::Sqlite(s) => s,
            TargetConn::Postgres(p) => p,
        }
    }
}

/// One worker's connections: the source, read inside one read-only snapshot, and the
/// target. The engine's transaction is the target's.
pub struct CopyConn {
    /// The source store.
    pub source: Box<dyn Store + Send>,
    /// The target store.
    pub target: TargetConn,
}

impl PlanStore for CopyConn {
    fn store(&self) -> &dyn Store {
        self.target.write().store()
    }

    /// The threads come from the source.
    fn list_threads(&self, given: &[String]) -> Result<Vec<String>, StoreError> {
        dfck_core::store::select_threads(self.source.as_ref(), given)
    }

    fn thread_page(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>, StoreError> {
        self.source.thread_ids_after(after, limit)
    }

    fn begin_read(&self) -> Result<(), StoreError> {
        self.target.write().begin_read()
    }

    fn end_read(&self) -> Result<(), StoreError> {
        self.target.write().end_read()
    }
}

impl WriteStore for CopyConn {
    fn lock_thread(&self, thread_id: &str) -> Result<ThreadLock, StoreError> {
        self.target.write().lock_thread(thread_id)
    }

    fn commit(&self) -> Result<(), StoreError> {
        self.target.write().commit()
    }

    fn rollback(&self) -> Result<(), StoreError> {
        self.target.write().rollback()
    }

    /// Threads go to the target several to a transaction, each in a savepoint, as the
    /// target groups them: a copy of many short threads does not pay a commit each.
    fn groups_threads(&self) -> bool {
        self.target.write().groups_threads()
    }

    fn open_group(&self, ids: &[String]) -> Result<ThreadLock, StoreError> {
        self.target.write().open_group(ids)
    }

    fn lock_in_group(&self, thread_id: &str) -> Result<ThreadLock, StoreError> {
        self.target.write().lock_in_group(thread_id)
    }

    fn end_in_group(&self, keep: bool) -> Result<(), StoreError> {
        self.target.write().end_in_group(keep)
    }

    fn free_space(&self) -> Option<u64> {
        self.target.write().free_space()
    }

    fn backup_to(&self, dest: &std::path::Path) -> Result<(), StoreError> {
        self.target.write().backup_to(dest)
    }

    fn backup_plan(&self, dest: &std::path::Path) -> Result<BackupPlan, StoreError> {
        self.target.write().backup_plan(dest)
    }

    fn begin_batch(&self, background: bool) -> BatchTuning {
        self.target.write().begin_batch(background)
    }

    fn background_step(&self) {
        self.target.write().background_step()
    }

    fn between_threads(&self) {
        self.target.write().between_threads()
    }

    fn end_batch(&self, tuning: BatchTuning) -> Result<Option<WalLeft>, StoreError> {
        let left = self.target.write().end_batch(tuning)?;
        Ok(left.map(|l| WalLeft {
            of_target: true,
            ..l
        }))
    }
}

/// What to do with one thread.
pub enum Decision {
    /// Nothing to write: skipped or refused.
    Done(CopyThread),
    /// Copy these rows.
    Copy {
        /// The thread's report (counts and bytes).
        report: CopyThread,
        /// The checkpoint rows in the target's layout (none when the target holds them).
        laid: Vec<LaidNs>,
        /// Namespaces too big to hold, copied row by row at the insert.
        streamed: Vec<NsStream>,
        /// The target holds a different copy, to delete first (`--replace`).
        replace: bool,
        /// The source's fingerprints, for the check before commit (`None` in a dry run
        /// into an empty target): of its stored rows when a namespace is streamed, else
        /// of the state it shows.
        digest: Option<Verify>,
        /// DeerFlow's rows of the thread: to insert (`None` when the target holds them) and
        /// the fingerprints the target must show.
        app: Option<(Option<ThreadApp>, AppPrints)>,
    },
}

/// The fingerprints a copy is checked against.
pub enum Verify {
    /// The state every checkpoint shows ([`digest_thread`]).
    State(ThreadDigest),
    /// The rows as stored ([`raw_digest`]): a copy that streams keeps them as they are.
    Rows(ThreadDigest),
}

/// How the target's copy of one part of a thread (checkpoints, DeerFlow rows) compares.
#[derive(PartialEq)]
enum Part {
    /// Nothing on either side, or identical.
    Same,
    /// The target lacks it.
    Absent,
    /// Different: why.
    Differs(String),
}

/// The sides a decision reads: the source, the target's checkpoints (`None`: none yet) and,
/// when DeerFlow's tables are copied, both sides' DeerFlow rows.
pub struct Sides<'a> {
    /// The source store.
    pub source: &'a dyn Store,
    /// The target store, when it holds LangGraph's tables.
    pub target: Option<&'a dyn Store>,
    /// DeerFlow's tables, when copied: the tables, and the target's rows.
    pub app: Option<(&'a AppCopy, &'a dyn AppRows)>,
}

/// Reads `thread_id` from the source and decides against the target. `Err` is a store
/// failure; refusals are reports.
pub fn decide(sides: &Sides<'_>, thread_id: &str, opts: &CopyOptions) -> Result<Decision, Error> {
    let Sides {
        source,
        target,
        app,
    } = *sides;
    let refused =
        |r: CopyThread, why: String| Decision::Done(r.with(CopyStatus::Refused, Some(why)));
    let (rows, raw) = match read_source(source, thread_id, opts.target) {
        Ok(Ok(r)) => r,
        Ok(Err(r)) => return Ok(refused(CopyThread::new(thread_id), r.0)),
        Err(StoreError::ThreadNotFound { .. }) => (Vec::new(), ThreadDigest::default()),
        Err(e) => return Err(e.into()),
    };
    let streams = rows.iter().any(|n| matches!(n, NsSource::Streamed(_)));
    let mut report = CopyThread::new(thread_id);
    let theirs = match (app, source.app_rows()) {
        (Some((a, _)), Some(src)) => match ThreadApp::load(a, src, thread_id)? {
            Ok(t) => Some(t),
            Err(r) => return Ok(refused(report, r.0)),
        },
        _ => None,
    };
    if rows.is_empty() && theirs.as_ref().is_none_or(ThreadApp::is_empty) {
        return Ok(Decision::Done(report.with(
            CopyStatus::Skipped,
            Some("thread no longer exists".into()),
        )));
    }
    report.namespaces = rows.len();
    report.checkpoints = rows.iter().map(NsSource::checkpoints).sum();
    report.writes = rows.iter().map(NsSource::writes).sum();
    let exists = match target {
        Some(t) => !t.namespaces(thread_id)?.is_empty(),
        None => false,
    };
    let mut digest = None;
    let checkpoints = match target.filter(|_| exists) {
        None if rows.is_empty() => Part::Same,
        None => Part::Absent,
        Some(_) if rows.is_empty() => {
            Part::Differs("the target holds checkpoints the source does not".into())
        }
        Some(t) => match compare(source, t, thread_id, streams.then_some(&raw)) {
            Ok((want, part)) => {
                digest = Some(want);
                part
            }
            Err(why) => return Ok(refused(report, why)),
        },
    };
    let deerflow = match (&theirs, app) {
        (Some(t), Some((a, target_app))) => match t.state(a, target_app, thread_id)? {
            AppState::Absent if t.is_empty() => Part::Same,
            AppState::Absent => Part::Absent,
            AppState::Identical => Part::Same,
            AppState::Differs(why) => Part::Differs(why),
        },
        _ => Part::Same,
    };
    let differs: Vec<&str> = [&checkpoints, &deerflow]
        .into_iter()
        .filter_map(|p| match p {
            Part::Differs(why) => Some(why.as_str()),
            _ => None,
        })
        .collect();
    if !differs.is_empty() && !opts.replace {
        return Ok(refused(
            report,
            format!(
                "the target already holds this thread and it differs ({}); pass --replace to overwrite it",
                differs.join("; ")
            ),
        ));
    }
    let replace = !differs.is_empty();
    if !replace && checkpoints == Part::Same && deerflow == Part::Same {
        return Ok(Decision::Done(report.with(
            CopyStatus::Skipped,
            Some("already in the target, identical".into()),
        )));
    }
    let copy_checkpoints = replace || checkpoints == Part::Absent;
    let copy_deerflow = replace || deerflow == Part::Absent;
    let mut laid = Vec::with_capacity(rows.len());
    let mut streamed = Vec::new();
    if copy_checkpoints {
        for ns in rows {
            match ns {
                NsSource::Streamed(s) => streamed.push(s),
                NsSource::Held(ns) => match lay_out(ns, opts.target) {
                    Ok(l) => laid.push(l),
                    Err(r) => return Ok(refused(report, r.0)),
                },
            }
        }
    } else {
        report.reason = Some(if rows.is_empty() {
            "no checkpoints: DeerFlow's rows only".into()
        } else {
            "checkpoints already in the target, identical".into()
        });
        report.namespaces = 0;
        report.checkpoints = 0;
        report.writes = 0;
    }
    report.bytes =
        laid.iter().map(LaidNs::bytes).sum::<u64>() + streamed.iter().map(|s| s.bytes).sum::<u64>();
    if streams && copy_checkpoints && target.is_some() {
        // A streamed copy keeps every row as stored: its stored form is what to check.
        digest = Some(Verify::Rows(raw));
    } else if digest.is_none() && target.is_some() && !laid.is_empty() {
        match digest_thread(source, thread_id) {
            Ok(d) => digest = Some(Verify::State(d)),
            Err(r) => return Ok(refused(report, r.0)),
        }
    }
    let app = match (theirs, app) {
        (Some(t), Some((a, _))) => {
            let prints = t.prints().clone();
            if copy_deerflow {
                report.deerflow_rows = t.counts(a);
                report.bytes += t.bytes();
                Some((Some(t), prints))
            } else {
                if !t.is_empty() {
                    report.reason = Some("DeerFlow's rows already in the target, identical".into());
                }
                Some((None, prints))
            }
        }
        _ => None,
    };
    Ok(Decision::Copy {
        report,
        laid,
        streamed,
        replace,
        digest,
        app,
    })
}

/// The source's fingerprints and how the target's copy of the thread compares: by stored
/// rows first when the thread streams (`raw`: the source's), then by the state shown.
fn compare(
    source: &dyn Store,
    target: &dyn Store,
    thread_id: &str,
    raw: Option<&ThreadDigest>,
) -> Result<(Verify, Part), String> {
    if let Some(want) = raw {
        let got =
            raw_digest(target, thread_id).map_err(|r| format!("the target's copy: {}", r.0))?;
        if difference(want, &got).is_none() {
            return Ok((Verify::Rows(want.clone()), Part::Same));
        }
    }
    let want = digest_thread(source, thread_id).map_err(|r| r.0)?;
    let got =
        digest_thread(target, thread_id).map_err(|r| format!("the target's copy: {}", r.0))?;
    let part = match difference(&want, &got) {
        None => Part::Same,
        Some(why) => Part::Differs(why),
    };
    Ok((Verify::State(want), part))
}

/// The copy as a write-engine job.
pub struct Copy<'a> {
    /// The copy's options.
    pub opts: &'a CopyOptions,
    /// DeerFlow's tables, when they are copied.
    pub app: Option<&'a AppCopy>,
    /// The target's history cache, told which threads were replaced.
    pub cache: Option<&'a PurgeReplaced<'a>>,
}

/// What the plan hands to the insert.
pub struct Work {
    laid: Vec<LaidNs>,
    streamed: Vec<NsStream>,
    replace: bool,
    digest: Option<Verify>,
    app: Option<(Option<ThreadApp>, AppPrints)>,
}

/// What the insert hands to the check: the source's fingerprints.
pub struct Expect {
    digest: Option<Verify>,
    replaced: bool,
    app: Option<AppPrints>,
}

fn refusal(e: impl std::fmt::Display) -> Refusal {
    Refusal(e.to_string())
}

/// Inserts one namespace's rows, reporting each.
fn insert(conn: &CopyConn, thread_id: &str, ns: &LaidNs, cx: &ApplyContext) -> Result<(), Refusal> {
    let n = ns.ns.as_str();
    match &conn.target {
        TargetConn::Sqlite(s) => {
            for c in &ns.checkpoints {
                let LaidBody::Sqlite {
                    type_tag,
                    bytes,
                    metadata,
                } = &c.body
                else {
                    return Err(Refusal("rows laid out for the wrong backend".into()));
                };
                s.insert_checkpoint_row(
                    thread_id,
                    n,
                    &c.id,
                    c.parent.as_deref(),
                    type_tag.as_deref(),
                    bytes,
                    metadata,
                )
                .map_err(refusal)?;
                cx.row_written();
            }
            for w in &ns.writes {
                s.insert_write_row(thread_id, n, w).map_err(refusal)?;
                cx.row_written();
            }
        }
        TargetConn::Postgres(p) => {
            for b in &ns.blobs {
                p.insert_blob_row(
                    thread_id,
                    n,
                    &b.channel,
                    &b.version,
                    &b.type_tag,
                    b.blob.as_deref(),
                )
                .map_err(refusal)?;
                cx.row_written();
            }
            for c in &ns.checkpoints {
                let LaidBody::Postgres {
                    checkpoint,
                    metadata,
                } = &c.body
                else {
                    return Err(Refusal("rows laid out for the wrong backend".into()));
                };
                p.insert_checkpoint_json(
                    thread_id,
                    n,
                    &c.id,
                    c.parent.as_deref(),
                    checkpoint,
                    metadata,
                )
                .map_err(refusal)?;
                cx.row_written();
            }
            for w in &ns.writes {
                p.insert_write_json(thread_id, n, w).map_err(refusal)?;
                cx.row_written();
            }
        }
    }
    Ok(())
}

/// The two stores a copy plans against: the source, read inside one snapshot, and the
/// target (`None`: it does not exist yet, or is empty).
pub trait CopySides {
    /// The source store.
    fn source(&self) -> &dyn Store;
    /// The target store, when it holds anything.
    fn target(&self) -> Option<&dyn Store>;
    /// The target's DeerFlow tables, when it has them.
    fn app_target(&self) -> Option<&dyn AppRows>;
}

impl CopySides for CopyConn {
    fn source(&self) -> &dyn Store {
        self.source.as_ref()
    }

    fn target(&self) -> Option<&dyn Store> {
        Some(self.target.write().store())
    }

    fn app_target(&self) -> Option<&dyn AppRows> {
        self.target.write().store().app_rows()
    }
}

/// A dry run's connections: the source and, when it exists and holds a store, the target,
/// both read-only.
pub struct CopyPlanConn<'a> {
    /// The source store.
    pub source: &'a dyn Store,
    /// The target store, when it holds anything.
    pub target: Option<&'a dyn Store>,
    /// The target's DeerFlow tables, read on a connection of their own (LangGraph's tables
    /// may not be there yet).
    pub app_target: Option<&'a dyn AppRows>,
}

impl CopySides for CopyPlanConn<'_> {
    fn source(&self) -> &dyn Store {
        self.source
    }

    fn target(&self) -> Option<&dyn Store> {
        self.target
    }

    fn app_target(&self) -> Option<&dyn AppRows> {
        self.app_target
    }
}

/// The threads come from the source, which is read inside its own snapshot already.
impl PlanStore for CopyPlanConn<'_> {
    fn store(&self) -> &dyn Store {
        self.source
    }

    fn begin_read(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn end_read(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

impl<C: PlanStore + CopySides + ?Sized> ThreadPlan<C> for Copy<'_> {
    type Report = CopyThread;
    type Work = Work;

    fn name(&self) -> &'static str {
        "copy"
    }

    fn verb(&self) -> &'static str {
        "copying"
    }

    fn untouched(&self, thread_id: &str) -> CopyThread {
        CopyThread::new(thread_id)
    }

    fn refuse(&self, report: CopyThread, reason: Refusal) -> CopyThread {
        report.with(CopyStatus::Refused, Some(reason.0))
    }

    /// A copy reads the source, where DeerFlow may go on running: its runs do not stop it.
    fn guards_active_runs(&self) -> bool {
        false
    }

    fn would(&self, report: CopyThread) -> CopyThread {
        let reason = report.reason.clone();
        report.with(CopyStatus::Would, reason)
    }

    fn plan(&self, conn: &C, thread_id: &str) -> Result<Planned<CopyThread, Work>, Error> {
        let sides = Sides {
            source: conn.source(),
            target: conn.target(),
            app: self.app.zip(conn.app_target()),
        };
        match decide(&sides, thread_id, self.opts)? {
            Decision::Done(r) => Ok(Planned::Done(r)),
            Decision::Copy {
                report,
                laid,
                streamed,
                replace,
                digest,
                app,
            } => {
                let bytes = report.bytes;
                Ok(Planned::Write {
                    report,
                    work: Work {
                        laid,
                        streamed,
                        replace,
                        digest,
                        app,
                    },
                    growth: bytes,
                    written: bytes,
                })
            }
        }
    }
}

impl ThreadJob<CopyConn> for Copy<'_> {
    type Expect = Expect;

    fn apply(
        &self,
        conn: &CopyConn,
        thread_id: &str,
        work: Work,
        cx: &ApplyContext,
    ) -> Result<Expect, Refusal> {
        if work.replace {
            match &conn.target {
                TargetConn::Sqlite(s) => s.delete_thread_rows(thread_id),
                TargetConn::Postgres(p) => p.delete_thread_rows(thread_id),
            }
            .map_err(refusal)?;
            cx.row_written();
        }
        for ns in &work.laid {
            insert(conn, thread_id, ns, cx)?;
        }
        for s in &work.streamed {
            copy_streamed(conn.source(), thread_id, s, self.opts.target, &mut |ns| {
                insert(conn, thread_id, ns, cx)
            })?;
        }
        let app = match (work.app, self.app) {
            (Some((rows, prints)), Some(app)) => {
                let target = conn.app_target().ok_or_else(|| {
                    Refusal("the target's DeerFlow tables cannot be written".into())
                })?;
                if let Some(rows) = rows {
                    rows.insert(app, target, thread_id, work.replace, cx)?;
                }
                Some(prints)
            }
            _ => None,
        };
        if work.replace {
            if let Some(c) = self.cache {
                c.replaced(thread_id);
            }
        }
        Ok(Expect {
            digest: work.digest,
            replaced: work.replace,
            app,
        })
    }

    fn verify(&self, conn: &CopyConn, thread_id: &str, expect: &Expect) -> Result<(), Refusal> {
        let source_has_checkpoints = !conn
            .source()
            .namespaces(thread_id)
            .map_err(|e| Refusal(format!("verification failed: {e}")))?
            .is_empty();
        match &expect.digest {
            Some(want) => {
                let (want, got) = match want {
                    Verify::State(w) => (w, digest_thread(conn.store(), thread_id)),
                    Verify::Rows(w) => (w, raw_digest(conn.store(), thread_id)),
                };
                let got = got.map_err(|r| Refusal(format!("verification failed: {}", r.0)))?;
                if let Some(why) = difference(want, &got) {
                    return Err(Refusal(format!(
                        "verification failed: the copy differs from the source ({why})"
                    )));
                }
            }
            None if source_has_checkpoints => {
                return Err(Refusal(
                    "verification failed: no source fingerprints".into(),
                ));
            }
            None => {}
        }
        if let (Some(want), Some(app)) = (&expect.app, self.app) {
            let target = conn.app_target().ok_or_else(|| {
                Refusal("verification failed: the target's DeerFlow tables cannot be read".into())
            })?;
            super::app::verify(app, target, thread_id, want)?;
        }
        Ok(())
    }

    fn committed(&self, report: CopyThread, expect: Expect) -> CopyThread {
        let reason = match expect.replaced {
            true => Some("replaced the target's different copy".to_owned()),
            false => report.reason.clone(),
        };
        report.with(CopyStatus::Done, reason)
    }
}
