//! The copy as a write-engine job: [`CopyConn`] pairs the read-only source (one snapshot)
//! with the target store the engine writes; [`decide`] reads a thread from the source and
//! says what to do with it; [`Copy`] inserts its rows and verifies them before commit.

use super::convert::{LaidBody, LaidNs, lay_out, load_thread};
use super::digest::{ThreadDigest, difference, digest_thread};
use super::{CopyOptions, CopyStatus, CopyThread};
use dfck_core::error::{Error, StoreError};
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
        /// The rows in the target's layout.
        laid: Vec<LaidNs>,
        /// The target holds a different copy, to delete first (`--replace`).
        replace: bool,
        /// The source's fingerprints, for the check before commit (`None` in a dry run
        /// into an empty target).
        digest: Option<ThreadDigest>,
    },
}

/// Reads `thread_id` from `source` and decides against `target` (`None`: an empty or
/// missing target). `Err` is a store failure; refusals are reports.
pub fn decide(
    source: &dyn Store,
    target: Option<&dyn Store>,
    thread_id: &str,
    opts: &CopyOptions,
) -> Result<Decision, Error> {
    let refused =
        |r: CopyThread, why: String| Decision::Done(r.with(CopyStatus::Refused, Some(why)));
    let rows = match load_thread(source, thread_id) {
        Ok(r) => r,
        Err(StoreError::ThreadNotFound { .. }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let mut report = CopyThread::new(thread_id);
    if rows.is_empty() {
        return Ok(Decision::Done(report.with(
            CopyStatus::Skipped,
            Some("thread no longer exists".into()),
        )));
    }
    report.namespaces = rows.len();
    report.checkpoints = rows.iter().map(|n| n.checkpoints.len()).sum();
    report.writes = rows.iter().map(|n| n.writes.len()).sum();
    let exists = match target {
        Some(t) => !t.namespaces(thread_id)?.is_empty(),
        None => false,
    };
    let mut digest = None;
    let mut replace = false;
    if let Some(t) = target.filter(|_| exists) {
        let want = match digest_thread(source, thread_id) {
            Ok(d) => d,
            Err(r) => return Ok(refused(report, r.0)),
        };
        let got = match digest_thread(t, thread_id) {
            Ok(d) => d,
            Err(r) => return Ok(refused(report, format!("the target's copy: {}", r.0))),
        };
        match difference(&want, &got) {
            None => {
                return Ok(Decision::Done(report.with(
                    CopyStatus::Skipped,
                    Some("already in the target, identical".into()),
                )));
            }
            Some(why) if !opts.replace => {
                return Ok(refused(
                    report,
                    format!(
                        "the target already holds this thread and it differs ({why}); pass --replace to overwrite it"
                    ),
                ));
            }
            Some(_) => replace = true,
        }
        digest = Some(want);
    }
    let mut laid = Vec::with_capacity(rows.len());
    for ns in rows {
        match lay_out(ns, opts.target) {
            Ok(l) => laid.push(l),
            Err(r) => return Ok(refused(report, r.0)),
        }
    }
    report.bytes = laid.iter().map(LaidNs::bytes).sum();
    if digest.is_none() && target.is_some() {
        match digest_thread(source, thread_id) {
            Ok(d) => digest = Some(d),
            Err(r) => return Ok(refused(report, r.0)),
        }
    }
    Ok(Decision::Copy {
        report,
        laid,
        replace,
        digest,
    })
}

/// The copy as a write-engine job.
pub struct Copy<'a> {
    /// The copy's options.
    pub opts: &'a CopyOptions,
}

/// What the plan hands to the insert.
pub struct Work {
    laid: Vec<LaidNs>,
    replace: bool,
    digest: Option<ThreadDigest>,
}

/// What the insert hands to the check: the source's fingerprints.
pub struct Expect {
    digest: Option<ThreadDigest>,
    replaced: bool,
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
}

impl CopySides for CopyConn {
    fn source(&self) -> &dyn Store {
        self.source.as_ref()
    }

    fn target(&self) -> Option<&dyn Store> {
        Some(self.target.write().store())
    }
}

/// A dry run's connections: the source and, when it exists and holds a store, the target,
/// both read-only.
pub struct CopyPlanConn<'a> {
    /// The source store.
    pub source: &'a dyn Store,
    /// The target store, when it holds anything.
    pub target: Option<&'a dyn Store>,
}

impl CopySides for CopyPlanConn<'_> {
    fn source(&self) -> &dyn Store {
        self.source
    }

    fn target(&self) -> Option<&dyn Store> {
        self.target
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
        report.with(CopyStatus::Would, None)
    }

    fn plan(&self, conn: &C, thread_id: &str) -> Result<Planned<CopyThread, Work>, Error> {
        match decide(conn.source(), conn.target(), thread_id, self.opts)? {
            Decision::Done(r) => Ok(Planned::Done(r)),
            Decision::Copy {
                report,
                laid,
                replace,
                digest,
            } => {
                let bytes = report.bytes;
                Ok(Planned::Write {
                    report,
                    work: Work {
                        laid,
                        replace,
                        digest,
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
        Ok(Expect {
            digest: work.digest,
            replaced: work.replace,
        })
    }

    fn verify(&self, conn: &CopyConn, thread_id: &str, expect: &Expect) -> Result<(), Refusal> {
        let Some(want) = &expect.digest else {
            return Err(Refusal(
                "verification failed: no source fingerprints".into(),
            ));
        };
        let got = digest_thread(conn.store(), thread_id)
            .map_err(|r| Refusal(format!("verification failed: {}", r.0)))?;
        match difference(want, &got) {
            None => Ok(()),
            Some(why) => Err(Refusal(format!(
                "verification failed: the copy differs from the source ({why})"
            ))),
        }
    }

    fn committed(&self, report: CopyThread, expect: Expect) -> CopyThread {
        let reason = expect
            .replaced
            .then(|| "replaced the target's different copy".to_owned());
        report.with(CopyStatus::Done, reason)
    }
}
