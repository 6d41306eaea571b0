//! Planning one thread of a prune, and the prune as a write-engine job: delete under the
//! lock, remove the orphans left behind, then verify before commit that every kept
//! checkpoint shows exactly the state it showed (every channel, `messages` through its
//! delta history), that none lost its parent, and that no orphan is left.

use super::select::{Shape, cut, select};
use super::{PruneOptions, PruneStatus, ThreadPrune};
use crate::commands::migrate::{MigrateOptions, StateFingerprints, compare_states, fingerprints};
use dfck_core::codec::Value;
use dfck_core::error::Error;
use dfck_core::materialize::Reducer;
use dfck_core::materialize::for_each_stored_messages;
use dfck_core::model::MessagesEncoding;
use dfck_core::model::thread::{LoadedThread, Metadata};
use dfck_core::store::delete::{DeleteRows, LaterCount, Orphans, RowCounts};
use dfck_core::store::{PlanStore, ReadOnly, Store};
use dfck_core::write::preamble::{self, Preamble};
use dfck_core::write::{ApplyContext, Planned, Refusal, ThreadJob, ThreadPlan};
use std::collections::BTreeMap;

mod held;

/// What one namespace loses: the checkpoints to delete and the state of those kept.
pub struct NsWork {
    ns: String,
    /// `--keep-last-turns`: the new root, and the `messages` list it must store as a
    /// snapshot when it stores none.
    root: Option<(String, Option<Vec<Value>>)>,
    delete: Vec<String>,
    reducer: Reducer,
    kept: StateFingerprints,
    /// The newest checkpoint's state before the prune: what `get_state` without a
    /// checkpoint id shows, which the newest checkpoint left must still show.
    latest: Option<u128>,
    /// Checkpoints `verify` already calls contaminated: pruning must add none.
    contaminated: Vec<String>,
    /// The pending writes stored on the checkpoints to delete.
    writes_deleted: u64,
    /// The namespace as planned, every value held, when no new root is made: apply turns it
    /// into what the deletions leave ([`held::settle`]), which verify checks instead of
    /// reading the namespace back; or, planned on the planner's thread, the outcome of that
    /// check ([`held::check_ahead`]).
    held: held::Held,
}

/// What the plan hands to apply.
pub enum Work {
    /// Delete every row of the thread.
    Whole,
    /// Delete these checkpoints.
    Checkpoints(Vec<NsWork>),
}

/// What apply did: the checks verify runs, and the counts the report shows.
pub struct Pruned {
    work: Work,
    deleted: RowCounts,
    orphans_before: RowCounts,
    /// The orphans left, counted by the deletions of a group written together (verify
    /// counts them itself otherwise).
    orphans_after: Option<RowCounts>,
}

fn thread_gone(thread_id: &str) -> ThreadPrune {
    ThreadPrune::skipped(thread_id, preamble::THREAD_GONE)
}

/// Plans one thread: the report line and, when something is to be deleted, the work.
pub fn plan_thread(
    store: &dyn Store,
    thread_id: &str,
    opts: &PruneOptions,
) -> Result<(ThreadPrune, Option<Work>), Error> {
    let namespaces = store.namespaces(thread_id)?;
    if namespaces.is_empty() {
        return Ok((thread_gone(thread_id), None));
    }
    // Whole-thread deletion needs only ids, timestamps and sizes: where the backend reads
    // those without the values, decide from them first.
    let mut age_decided = false;
    if opts.older_than.is_some() || opts.idle.is_some() {
        if let Some(times) = store.checkpoint_times(thread_id)? {
            if times.is_empty() {
                return Ok((thread_gone(thread_id), None));
            }
            let ts = times.iter().filter_map(|c| c.ts.as_deref());
            if due(ts, opts) {
                let mut report = ThreadPrune::new(thread_id, PruneStatus::Would);
                report.whole_thread = true;
                for c in &times {
                    report.checkpoints += 1;
                    report.writes += c.writes;
                    report.bytes_freed += c.bytes;
                }
                return whole_thread(report, times.iter().map(|c| c.checkpoint_id.as_str()), opts);
            }
            age_decided = true;
        }
    }
    // Otherwise the loaded thread decides; values are read (for the state fingerprints)
    // only when checkpoints are to be chosen.
    let full = age_decided || (opts.older_than.is_none() && opts.idle.is_none());
    let Some(loaded) = load(store, thread_id, full)? else {
        return Ok((thread_gone(thread_id), None));
    };
    let mut report = ThreadPrune::new(thread_id, PruneStatus::Would);
    if opts.older_than.is_some() || opts.idle.is_some() {
        // A checkpoint whose `ts` cannot be read (encrypted without the key, pickled,
        // damaged) leaves the thread's age unknown: refused, never silently kept.
        if let Some(e) = loaded
            .iter()
            .flat_map(|t| t.nodes.iter())
            .find_map(|n| n.checkpoint.as_ref().err())
        {
            return Ok((
                report.refused(format!("the thread's age is unknown: {e}")),
                None,
            ));
        }
    }
    if whole_thread_due(&loaded, opts) {
        report.whole_thread = true;
        for t in &loaded {
            for n in &t.nodes {
                report.checkpoints += 1;
                report.writes += n.writes.len() as u64;
                report.bytes_freed += n.bytes;
            }
        }
        let ids = loaded
            .iter()
            .flat_map(|t| t.nodes.iter())
            .map(|n| n.id.as_str());
        return whole_thread(report, ids, opts);
    }
    let loaded = if full {
        loaded
    } else {
        match load(store, thread_id, true)? {
            Some(l) => l,
            None => return Ok((thread_gone(thread_id), None)),
        }
    };
    let mut work = Vec::new();
    for t in loaded {
        match plan_namespace(store, &t, opts, &mut report) {
            Ok(Some(mut w)) => {
                if w.root.is_none() && t.values {
                    w.held = held::Held::Rows(t);
                }
                work.push(w)
            }
            Ok(None) => {}
            Err(reason) => return Ok((report.refused(reason), None)),
        }
    }
    if work.is_empty() {
        report.status = PruneStatus::Skipped;
        report.reason = Some("nothing to prune".into());
        return Ok((report, None));
    }
    Ok((report, Some(Work::Checkpoints(work))))
}

/// Every namespace of a thread, with values (`full`) or without (the engine's preamble);
/// `None` when the thread is gone.
fn load(
    store: &dyn Store,
    thread_id: &str,
    full: bool,
) -> Result<Option<Vec<LoadedThread>>, Error> {
    // Values are held up to a budget; a larger thread is read back as its walks go.
    let loaded = if full {
        preamble::load_bounded(store, thread_id, Metadata::Facts)?
    } else {
        preamble::load(store, thread_id, false)?
    };
    Ok(match loaded {
        Preamble::Gone => None,
        Preamble::Loaded(loaded) => Some(loaded),
    })
}

/// What one namespace loses (`Ok(None)`: nothing), counted into `report`.
fn plan_namespace(
    store: &dyn Store,
    t: &LoadedThread,
    opts: &PruneOptions,
    report: &mut ThreadPrune,
) -> Result<Option<NsWork>, String> {
    let sel = select(t, &opts.protect, opts.branches)?;
    if let Some(note) = &sel.note {
        report.note = Some(match report.note.take() {
            Some(earlier) => format!("{earlier}; {note}"),
            None => note.clone(),
        });
    }
    // History trimming applies to the root graph's lineage, where turns are.
    let trim = match opts.keep_turns {
        Some(k) if t.checkpoint_ns.is_empty() => cut(t, k, &opts.protect, opts.branches)?,
        _ => None,
    };
    let mut delete: BTreeMap<usize, Shape> = sel.delete.iter().copied().collect();
    if let Some(c) = &trim {
        for &i in &c.delete {
            delete.insert(i, Shape::Cut);
        }
        report.turns_cut += c.turns.len() as u64;
        report.oldest_kept = Some(t.nodes[c.root].id.clone());
    }
    report.kept += (t.nodes.len() - delete.len()) as u64;
    if delete.is_empty() {
        return Ok(None);
    }
    let writes_deleted = delete.keys().map(|&i| t.nodes[i].writes.len() as u64).sum();
    for (&i, &shape) in &delete {
        report.checkpoints += 1;
        report.writes += t.nodes[i].writes.len() as u64;
        report.bytes_freed += t.nodes[i].bytes
            + t.nodes[i]
                .writes
                .iter()
                .map(|w| w.value.len() as u64)
                .sum::<u64>();
        match shape {
            Shape::DurationLeaf => report.duration_leaves += 1,
            Shape::Branch => report.branch_checkpoints += 1,
            Shape::Cut => report.cut_checkpoints += 1,
        }
    }
    let reducer = MigrateOptions::default().reducer_for(t);
    let mut kept = fingerprints(store, t, reducer).map_err(|r| r.0)?;
    let latest = newest_id(t).and_then(|id| kept.get(id).copied());
    let delete: Vec<String> = delete.keys().map(|&i| t.nodes[i].id.clone()).collect();
    kept.retain(|id, _| !delete.contains(id));
    let root = match &trim {
        None => None,
        Some(c) => {
            let n = &t.nodes[c.root];
            // A delta checkpoint that stores no list gets its materialized one.
            let list = if n.messages_encoding == Some(MessagesEncoding::Absent) {
                // The replay needs every value: a namespace read back a checkpoint at a
                // time is loaded whole for it.
                let whole;
                let t = if t.values {
                    t
                } else {
                    whole = LoadedThread::load_full(store, &t.thread_id, &t.checkpoint_ns)
                        .map_err(|e| e.to_string())?;
                    &whole
                };
                let mut found = None;
                for_each_stored_messages(t, reducer, &mut |i, stored| {
                    if i == c.root {
                        found = Some(stored.to_vec());
                    }
                    Ok(())
                })
                .map_err(|e| format!("materialization fails: {e}"))?;
                Some(found.ok_or("the new root cannot be materialized")?)
            } else {
                None
            };
            Some((n.id.clone(), list))
        }
    };
    Ok(Some(NsWork {
        ns: t.checkpoint_ns.clone(),
        root,
        delete,
        reducer,
        kept,
        latest,
        contaminated: contaminated(t),
        writes_deleted,
        held: held::Held::No,
    }))
}

/// The id of the namespace's newest checkpoint: where LangGraph resumes.
fn newest_id(t: &LoadedThread) -> Option<&str> {
    t.nodes.iter().map(|n| n.id.as_str()).max()
}

/// The checkpoints whose delta replay picks up another branch's writes, by the fork
/// analysis `verify` runs.
fn contaminated(t: &LoadedThread) -> Vec<String> {
    dfck_core::lineage::fork_analysis(t)
        .contaminated
        .iter()
        .map(|&(k, _)| t.nodes[k].id.clone())
        .collect()
}

/// The plan of a whole-thread deletion: refused when the thread holds a protected
/// checkpoint (a thread DeerFlow is running is refused by the engine).
fn whole_thread<'a>(
    report: ThreadPrune,
    mut ids: impl Iterator<Item = &'a str>,
    opts: &PruneOptions,
) -> Result<(ThreadPrune, Option<Work>), Error> {
    if let Some(id) = ids.find(|id| super::select::is_protected(&opts.protect, id)) {
        let reason = format!("it holds protected checkpoint {id}; not deleting the thread");
        return Ok((report.refused(reason), None));
    }
    Ok((report, Some(Work::Whole)))
}

/// `--older-than`: the first checkpoint is older; `--idle`: the last one is. A thread
/// without readable timestamps is never old.
fn due<'a>(ts: impl Iterator<Item = &'a str>, opts: &PruneOptions) -> bool {
    if opts.older_than.is_none() && opts.idle.is_none() {
        return false;
    }
    let ts: Vec<i64> = ts.filter_map(dfck_core::time::unix_seconds).collect();
    let (Some(first), Some(last)) = (ts.iter().min(), ts.iter().max()) else {
        return false;
    };
    let before = |limit: u64| {
        opts.now
            .saturating_sub(i64::try_from(limit).unwrap_or(i64::MAX))
    };
    opts.older_than.is_some_and(|d| *first < before(d))
        || opts.idle.is_some_and(|d| *last < before(d))
}

/// [`due`] over the loaded namespaces' checkpoint timestamps.
fn whole_thread_due(loaded: &[LoadedThread], opts: &PruneOptions) -> bool {
    due(
        loaded
            .iter()
            .flat_map(|t| t.nodes.iter())
            .filter_map(|n| n.checkpoint.as_ref().ok()?.ts.as_deref()),
        opts,
    )
}

/// `dfck prune` as a write-engine job.
pub struct Prune<'a> {
    /// What to prune.
    pub opts: &'a PruneOptions,
}

fn store_refusal(e: impl std::fmt::Display) -> Refusal {
    Refusal(format!("deleting failed: {e}"))
}

impl<C: PlanStore + ?Sized> ThreadPlan<C> for Prune<'_> {
    type Report = ThreadPrune;
    type Work = Work;

    fn name(&self) -> &'static str {
        "prune"
    }

    fn verb(&self) -> &'static str {
        "pruning"
    }

    fn untouched(&self, thread_id: &str) -> ThreadPrune {
        ThreadPrune::new(thread_id, PruneStatus::Skipped)
    }

    fn refuse(&self, report: ThreadPrune, reason: Refusal) -> ThreadPrune {
        report.refused(reason.0)
    }

    /// Without an age, every thread is loaded whole with its values ([`plan_thread`]).
    fn reads_whole_threads(&self) -> Option<bool> {
        (self.opts.older_than.is_none() && self.opts.idle.is_none()).then_some(true)
    }

    fn plan(&self, conn: &C, thread_id: &str) -> Result<Planned<ThreadPrune, Work>, Error> {
        let (report, work) = plan_thread(conn.store(), thread_id, self.opts)?;
        let Some(work) = work else {
            return Ok(Planned::Done(report));
        };
        // Deleting rewrites the pages the rows sit on: the log holds about that much.
        let written = report.bytes_freed;
        Ok(Planned::Write {
            report,
            work,
            growth: 0,
            written,
        })
    }
}

impl<C: DeleteRows + ?Sized> ThreadJob<C> for Prune<'_> {
    type Expect = Pruned;

    fn apply(
        &self,
        conn: &C,
        thread_id: &str,
        work: Work,
        cx: &ApplyContext,
    ) -> Result<Pruned, Refusal> {
        // Counted before the deletions run, read after them (no round trip of its own).
        let orphans_before = conn.count_orphans_later(thread_id).map_err(store_refusal)?;
        let mut deleted = RowCounts::default();
        // The deletions' rows are read after the last is sent (one round trip for all).
        let mut sent: Vec<LaterCount<'_>> = Vec::new();
        match &work {
            Work::Whole => {
                deleted.add(conn.delete_thread(thread_id).map_err(store_refusal)?);
                cx.row_written();
            }
            Work::Checkpoints(namespaces) => {
                for ns in namespaces {
                    // The new root first: no kept checkpoint ever points at a deleted one.
                    if let Some((id, list)) = &ns.root {
                        if let Err(e) = conn.make_root(thread_id, &ns.ns, id, list.as_deref()) {
                            // A deletion sent before it that failed says why first.
                            for rows in sent {
                                rows().map_err(store_refusal)?;
                            }
                            return Err(store_refusal(e));
                        }
                        cx.row_written();
                    }
                    // One statement per table for the namespace (the transaction makes it
                    // all or nothing either way).
                    if !ns.delete.is_empty() {
                        sent.push(
                            conn.delete_checkpoints(thread_id, &ns.ns, &ns.delete)
                                .map_err(store_refusal)?,
                        );
                        cx.row_written();
                    }
                }
            }
        }
        sent.push(conn.delete_orphans(thread_id).map_err(store_refusal)?);
        cx.row_written();
        let orphans_before = orphans_before().map_err(store_refusal)?;
        for rows in sent {
            deleted.add(rows().map_err(store_refusal)?);
        }
        let mut work = work;
        held::settle(&mut work);
        Ok(Pruned {
            work,
            deleted,
            orphans_before,
            orphans_after: None,
        })
    }

    fn writes_together(&self) -> bool {
        true
    }

    fn verifies_from_memory(&self, done: &Pruned) -> bool {
        held::in_memory(&done.work)
    }

    fn plans_held(&self) -> bool {
        true
    }

    /// A plan made ahead keeps ids, fingerprints and a new root's list (what its deletions
    /// leave is checked and dropped when it is made): a whole group's may wait.
    fn plans_waiting(&self) -> usize {
        64
    }

    /// The plan over the rows held, and what its deletions will leave checked there, on the
    /// planner's thread ([`held::check_ahead`]).
    fn plan_held(
        &self,
        held: &ReadOnly<'_>,
        thread_id: &str,
    ) -> Result<Planned<ThreadPrune, Work>, Error> {
        let mut planned = ThreadPlan::<ReadOnly<'_>>::plan(self, held, thread_id)?;
        if let Planned::Write { work, .. } = &mut planned {
            held::check_ahead(held.store(), work);
        }
        Ok(planned)
    }

    /// Deletions without a new root go together with other threads', holding their ids and
    /// the kept states' fingerprints until then.
    fn together(&self, work: &Work) -> Option<usize> {
        match work {
            Work::Whole => Some(0),
            Work::Checkpoints(namespaces) => namespaces
                .iter()
                .map(|ns| {
                    ns.root.is_none().then(|| {
                        let ids = ns.delete.iter().chain(&ns.contaminated);
                        ids.map(|id| id.len() + 24).sum::<usize>()
                            + ns.kept.len() * 64
                            + held::held_bytes(ns)
                    })
                })
                .sum(),
        }
    }

    /// The group's orphans counted, its checkpoints and whole threads deleted, its orphans
    /// deleted and counted again: four statements for every thread, sent before any answer
    /// is read.
    fn apply_together(
        &self,
        conn: &C,
        items: Vec<(&str, Work)>,
        cx: &ApplyContext,
    ) -> Result<Vec<Pruned>, Refusal> {
        let ids: Vec<&str> = items.iter().map(|(id, _)| *id).collect();
        let mut checkpoints = Vec::new();
        let mut whole = Vec::new();
        for (id, work) in &items {
            match work {
                Work::Whole => whole.push(*id),
                Work::Checkpoints(namespaces) => checkpoints.extend(
                    namespaces
                        .iter()
                        .filter(|ns| !ns.delete.is_empty())
                        .map(|ns| (*id, ns.ns.as_str(), ns.delete.as_slice())),
                ),
            }
        }
        let before = conn
            .orphans_together(&ids, Orphans::Count)
            .map_err(store_refusal)?;
        let deleted = conn
            .delete_together(&checkpoints, &whole)
            .map_err(store_refusal)?;
        cx.row_written();
        let orphans = conn
            .orphans_together(&ids, Orphans::Delete)
            .map_err(store_refusal)?;
        cx.row_written();
        let after = conn
            .orphans_together(&ids, Orphans::Recount)
            .map_err(store_refusal)?;
        let (before, mut deleted, orphans, mut after) = (
            before().map_err(store_refusal)?,
            deleted().map_err(store_refusal)?,
            orphans().map_err(store_refusal)?,
            after().map_err(store_refusal)?,
        );
        Ok(items
            .into_iter()
            .map(|(id, mut work)| {
                held::settle(&mut work);
                let mut rows = deleted.remove(id).unwrap_or_default();
                rows.add(orphans.get(id).copied().unwrap_or_default());
                Pruned {
                    work,
                    deleted: rows,
                    orphans_before: before.get(id).copied().unwrap_or_default(),
                    orphans_after: Some(after.remove(id).unwrap_or_default()),
                }
            })
            .collect())
    }

    fn verify(&self, conn: &C, thread_id: &str, done: &Pruned) -> Result<(), Refusal> {
        let fail = |what: String| Err(Refusal(format!("verification failed: {what}")));
        let store = conn.store();
        let load = |ns: &str| {
            let budget = preamble::whole_thread_bytes();
            LoadedThread::load_bounded(store, thread_id, ns, budget, Metadata::Facts)
                .map_err(|e| Refusal(format!("verification failed: {e}")))
        };
        // The count is sent first and read once the first namespace is (one round trip
        // fewer); the checks keep their order.
        let orphans = match done.orphans_after {
            Some(counted) => Box::new(move || Ok(counted)),
            None => conn.count_orphans_later(thread_id).map_err(store_refusal)?,
        };
        let mut first = match &done.work {
            Work::Checkpoints(namespaces) => namespaces
                .first()
                .filter(|ns| matches!(ns.held, held::Held::No))
                .map(|ns| load(&ns.ns)),
            Work::Whole => None,
        };
        let orphans = orphans().map_err(store_refusal)?;
        if orphans.rows() != 0 {
            return fail(format!("{} orphan rows left", orphans.rows()));
        }
        match &done.work {
            Work::Whole => {
                let left = store.namespaces(thread_id).map_err(store_refusal)?;
                if !left.is_empty() {
                    return fail("checkpoints of the thread are left".into());
                }
            }
            Work::Checkpoints(namespaces) => {
                held::counted(namespaces, done).or_else(fail)?;
                for ns in namespaces {
                    let read;
                    let after = match &ns.held {
                        held::Held::Checked(outcome) => {
                            outcome.clone()?;
                            continue;
                        }
                        held::Held::Rows(t) => t,
                        held::Held::No => {
                            read = first.take().unwrap_or_else(|| load(&ns.ns))?;
                            &read
                        }
                    };
                    held::check(store, ns, after)?;
                }
            }
        }
        Ok(())
    }

    fn committed(&self, mut report: ThreadPrune, done: Pruned) -> ThreadPrune {
        report.status = PruneStatus::Done;
        report.checkpoints = done.deleted.checkpoints;
        report.writes = done.deleted.writes;
        report.blobs = done.deleted.blobs;
        report.bytes_freed = done.deleted.bytes;
        report.orphans_before = Some(done.orphans_before.rows());
        report.orphans_after = Some(0);
        report
    }
}
