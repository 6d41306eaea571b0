//! `dfck delete` as a write-engine job: under the thread's lock, the thread's checkpoints,
//! writes and blobs and its `threads_meta` row (with `--erase`, its rows in every other
//! thread-scoped table) in one transaction, verified gone before commit. Around it, DeerFlow's
//! thread-operation reservation ([`super::operation::ThreadOperation`]), the cache purge (the
//! engine's) and the thread's files.

use super::operation::ThreadOperation;
use super::{DeleteOptions, DeleteStatus, ThreadDelete};
use dfck_core::error::Error;
use dfck_core::store::delete::DeleteRows;
use dfck_core::store::{PlanStore, Store};
use dfck_core::write::preamble::THREAD_GONE;
use dfck_core::write::{ApplyContext, Planned, Refusal, ThreadJob, ThreadPlan};

/// The engine job of `dfck delete`.
pub struct Delete<'a> {
    /// What to delete.
    pub opts: &'a DeleteOptions,
    /// The reservations and file steps.
    pub op: &'a ThreadOperation,
}

/// Why a thread an age selected is left alone.
pub const NOT_DUE: &str = "not old enough";

/// What the plan hands to apply: the thread's owner (for its files).
pub struct Work {
    user_id: Option<String>,
}

/// What apply did.
pub struct Deleted {
    rows: dfck_core::store::delete::RowCounts,
    app: dfck_core::deerflow::ThreadRows,
}

fn refusal(e: impl std::fmt::Display) -> Refusal {
    Refusal(format!("deleting failed: {e}"))
}

/// The thread's checkpoints (count, bytes), its DeerFlow rows and owner, as they are now.
pub fn plan_thread(
    store: &dyn Store,
    thread_id: &str,
    opts: &DeleteOptions,
    op: &ThreadOperation,
) -> Result<(ThreadDelete, Option<Work>), Error> {
    let mut report = ThreadDelete::new(thread_id, DeleteStatus::Would);
    // (checkpoint id, ts) of every checkpoint: from the inline columns where the backend
    // has them, else from the thread loaded structurally.
    let mut seen: Vec<(String, Option<String>)> = Vec::new();
    match store.checkpoint_times(thread_id)? {
        Some(times) => {
            for c in times {
                report.checkpoints += 1;
                report.writes += c.writes;
                report.bytes += c.bytes;
                seen.push((c.checkpoint_id, c.ts));
            }
        }
        None => {
            for ns in store.namespaces(thread_id)? {
                let t = dfck_core::model::thread::LoadedThread::load(store, thread_id, &ns)?;
                for n in &t.nodes {
                    report.checkpoints += 1;
                    report.writes += n.writes.len() as u64;
                    report.bytes += n.bytes;
                    let ts = n.checkpoint.as_ref().ok().and_then(|c| c.ts.clone());
                    seen.push((n.id.clone(), ts));
                }
            }
        }
    }
    if !opts.due(seen.iter().filter_map(|(_, ts)| ts.as_deref())) {
        report.status = DeleteStatus::Skipped;
        report.reason = Some(NOT_DUE.into());
        return Ok((report, None));
    }
    if let Some((id, _)) = seen.iter().find(|(id, _)| opts.protect.contains(id)) {
        report.status = DeleteStatus::Refused;
        report.reason = Some(format!(
            "it holds protected checkpoint {id}; not deleting the thread"
        ));
        return Ok((report, None));
    }
    let app = store.app();
    let meta = match app {
        Some(a) if op.schema.lists_threads() => a
            .thread_metas(Some(&[thread_id.to_owned()]))?
            .into_iter()
            .find(|m| m.thread_id == thread_id),
        _ => None,
    };
    report.user_id = meta.as_ref().and_then(|m| m.user_id.clone());
    report.listed = meta.is_some();
    if let Some(a) = app {
        report.app_rows = a.thread_rows(thread_id, &op.schema)?.tables;
        if !opts.erase {
            report.app_rows.retain(|(t, _)| t == "threads_meta");
        }
    }
    if report.checkpoints == 0 && meta.is_none() {
        report.status = DeleteStatus::Skipped;
        report.reason = Some(THREAD_GONE.into());
        return Ok((report, None));
    }
    // Active runs other than this dfck's own reservation refuse the thread.
    if let Some(a) = app {
        let mine = op.reservation(thread_id);
        if let Some(r) = a
            .active_runs(&op.schema)?
            .into_iter()
            .find(|r| r.thread_id == thread_id && Some(&r.run_id) != mine.as_ref())
        {
            report.status = DeleteStatus::Refused;
            report.reason = Some(format!(
                "DeerFlow has work in flight on this thread: {}; delete it after the work finishes",
                r.describe()
            ));
            return Ok((report, None));
        }
    }
    let user_id = report.user_id.clone();
    Ok((report, Some(Work { user_id })))
}

impl<C: PlanStore + ?Sized> ThreadPlan<C> for Delete<'_> {
    type Report = ThreadDelete;
    type Work = Work;

    fn name(&self) -> &'static str {
        "delete"
    }

    fn verb(&self) -> &'static str {
        "deleting"
    }

    fn untouched(&self, thread_id: &str) -> ThreadDelete {
        ThreadDelete::new(thread_id, DeleteStatus::Skipped)
    }

    fn refuse(&self, mut report: ThreadDelete, reason: Refusal) -> ThreadDelete {
        report.status = DeleteStatus::Refused;
        report.reason = Some(reason.0);
        report
    }

    /// The job checks DeerFlow's runs itself: its own reservation is one.
    fn guards_active_runs(&self) -> bool {
        false
    }

    fn plan(&self, conn: &C, thread_id: &str) -> Result<Planned<ThreadDelete, Work>, Error> {
        let (mut report, work) = plan_thread(conn.store(), thread_id, self.opts, self.op)?;
        report.files = self
            .op
            .files(thread_id, report.user_id.as_deref(), false)
            .removed;
        Ok(match work {
            None => Planned::Done(report),
            Some(work) => {
                let bytes = report.bytes;
                Planned::Write {
                    report,
                    work,
                    growth: 0,
                    written: bytes,
                }
            }
        })
    }
}

impl<C: DeleteRows + ?Sized> ThreadJob<C> for Delete<'_> {
    type Expect = (Deleted, Option<String>);

    /// The reservation is taken and released outside the thread's transaction.
    fn groups(&self) -> bool {
        false
    }

    fn before(&self, conn: &C, thread_id: &str) -> Result<(), Refusal> {
        let user = match conn.store().app() {
            Some(a) if self.op.schema.lists_threads() => a
                .thread_metas(Some(&[thread_id.to_owned()]))
                .map_err(refusal)?
                .into_iter()
                .find(|m| m.thread_id == thread_id)
                .and_then(|m| m.user_id),
            _ => None,
        };
        self.op.reserve(conn.store(), thread_id, user.as_deref())
    }

    fn apply(
        &self,
        conn: &C,
        thread_id: &str,
        work: Work,
        cx: &ApplyContext,
    ) -> Result<(Deleted, Option<String>), Refusal> {
        let rows = conn.delete_thread(thread_id).map_err(refusal)?;
        cx.row_written();
        let app = match conn.store().app() {
            Some(a) => a
                .delete_thread_app_rows(
                    thread_id,
                    &self.op.schema,
                    self.opts.erase,
                    self.op.reservation(thread_id).as_deref(),
                )
                .map_err(refusal)?,
            None => Default::default(),
        };
        cx.row_written();
        Ok((Deleted { rows, app }, work.user_id))
    }

    fn verify(
        &self,
        conn: &C,
        thread_id: &str,
        done: &(Deleted, Option<String>),
    ) -> Result<(), Refusal> {
        let fail = |what: String| Err(Refusal(format!("verification failed: {what}")));
        let store = conn.store();
        if !store.namespaces(thread_id).map_err(refusal)?.is_empty() {
            return fail("checkpoints of the thread are left".into());
        }
        let _ = done;
        if let Some(a) = store.app() {
            let left = a.thread_rows(thread_id, &self.op.schema).map_err(refusal)?;
            let mine = self.op.reservation(thread_id);
            for (table, n) in &left.tables {
                let allowed = if table == "runs" {
                    u64::from(mine.is_some())
                } else {
                    0
                };
                let checked = table == "threads_meta" || self.opts.erase;
                if checked && *n > allowed {
                    return fail(format!("{n} {table} row(s) of the thread are left"));
                }
            }
        }
        Ok(())
    }

    fn committed(&self, mut report: ThreadDelete, done: (Deleted, Option<String>)) -> ThreadDelete {
        let (d, _) = done;
        report.status = DeleteStatus::Done;
        report.checkpoints = d.rows.checkpoints;
        report.writes = d.rows.writes;
        report.blobs = d.rows.blobs;
        report.bytes = d.rows.bytes;
        report.app_rows = d.app.tables;
        report
    }

    fn after(
        &self,
        conn: &C,
        thread_id: &str,
        mut report: ThreadDelete,
        committed: bool,
        cache_keys: Option<u64>,
    ) -> Result<ThreadDelete, Error> {
        let resumed = self.op.resumed(thread_id);
        if committed || (resumed && report.status == DeleteStatus::Skipped) {
            self.op.renew(conn.store(), thread_id)?;
            let step = self.op.files(thread_id, report.user_id.as_deref(), true);
            report.files = step.removed;
            report.note = step.note;
            report.cache_keys = cache_keys;
            if resumed && !committed {
                report.status = DeleteStatus::Done;
                report.reason =
                    Some("finished the delete an earlier dfck left (its reservation)".into());
            }
        }
        self.op.release(conn.store(), thread_id)?;
        Ok(report)
    }
}
