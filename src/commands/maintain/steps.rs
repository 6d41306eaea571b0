//! The steps of a `maintain` run: one chunk of threads through `prune` (and its DeerFlow
//! delete by age) then `migrate full-to-delta`, the plan's fingerprint check, `reclaim`
//! past the policy's thresholds, and the verify pass whose finding counts the record keeps.
//! Each step calls the command it stands for, so it keeps that command's guarantees.

use super::plan::{Action, PlanFile, PlanOptions, PlannedThread};
use super::select::fingerprint;
use super::{MaintainReport, MaintainRequest, StepReport, ThreadAction, Work, ended};
use crate::commands::delete::DeleteStatus;
use crate::commands::inspect::StoreSummary;
use crate::commands::migrate::to_delta::{DeltaForm, ToDeltaOptions, ToDeltaStatus};
use crate::commands::prune::{PruneOptions, PruneStatus};
use crate::commands::reclaim::{ReclaimOptions, ReclaimStatus, reclaim_postgres, reclaim_sqlite};
use crate::commands::verify::{VerifyOptions, verify_store};
use crate::commands::wiring::WriteRequest;
use dfck_core::error::Error;
use dfck_core::store::Store;
use dfck_core::store::space::StoreSpace;
use dfck_core::target::Target;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

/// Time spent in the per-chunk steps.
#[derive(Default)]
pub(super) struct Timer {
    prune: f64,
    convert: f64,
}

impl Timer {
    /// The step's report: ran, or not and why.
    pub(super) fn step<R: Into<String>>(
        &self,
        step: &'static str,
        ran: Result<(), R>,
    ) -> StepReport {
        let seconds = match step {
            "prune" => self.prune,
            _ => self.convert,
        };
        match ran {
            Ok(()) => StepReport {
                step,
                ran: true,
                reason: None,
                seconds,
            },
            Err(why) => StepReport {
                step,
                ran: false,
                reason: Some(why.into()),
                seconds: 0.0,
            },
        }
    }
}

/// What one chunk did.
pub(super) struct ChunkOutcome {
    /// Threads the steps reached (examined, whatever came of it).
    pub handled: HashSet<String>,
    /// Threads changed (would be) or refused.
    pub actions: Vec<ThreadAction>,
    /// Threads changed (would be): what counts against the sweep limit.
    pub acted: u64,
    changed: HashSet<String>,
}

impl ChunkOutcome {
    /// Notes what a step did to a thread (`status` `None`: nothing to do); `true` when the
    /// thread was changed (would be).
    fn record(
        &mut self,
        thread_id: &str,
        status: Option<&'static str>,
        action: Action,
        reason: &Option<String>,
        checkpoints: u64,
    ) -> bool {
        self.handled.insert(thread_id.to_owned());
        let Some(status) = status else {
            return false;
        };
        let changed = status != "refused";
        if changed {
            self.changed.insert(thread_id.to_owned());
        }
        self.actions.push(ThreadAction {
            thread_id: thread_id.to_owned(),
            action,
            status,
            reason: reason.clone(),
            checkpoints,
        });
        changed
    }
}

fn status_word(done: bool, would: bool) -> Option<&'static str> {
    if done {
        Some("done")
    } else if would {
        Some("would")
    } else {
        None
    }
}

/// Runs one chunk: prune (with deletion by age) on the threads the rule covers, then the
/// conversion on the large full-mode threads still there.
pub(super) fn run_chunk(
    req: &MaintainRequest<'_>,
    opts: &PlanOptions,
    chunk: &[Work],
    dry_run: bool,
    timer: &mut Timer,
) -> Result<ChunkOutcome, Error> {
    let mut out = ChunkOutcome {
        handled: HashSet::new(),
        actions: Vec::new(),
        acted: 0,
        changed: HashSet::new(),
    };
    let mut deleted: HashSet<String> = HashSet::new();
    let prune_ids: Vec<String> = chunk
        .iter()
        .filter(|w| w.prune)
        .map(|w| w.thread_id.clone())
        .collect();
    if !prune_ids.is_empty() {
        let t = Instant::now();
        let r = crate::commands::prune::run(
            &request(req, &prune_ids, dry_run),
            &PruneOptions {
                branches: opts.branches,
                older_than: opts.older_than,
                idle: opts.idle,
                protect: HashSet::new(),
                keep_turns: opts.keep_last_turns.map(|n| n as usize),
                now: opts.now,
            },
            &req.whole,
            req.cache_report.clone(),
        )?;
        timer.prune += t.elapsed().as_secs_f64();
        for p in &r.threads {
            let action = if p.whole_thread {
                Action::Delete
            } else {
                Action::Prune
            };
            let word = match p.status {
                PruneStatus::Refused => Some("refused"),
                s => status_word(s == PruneStatus::Done, s == PruneStatus::Would),
            };
            if out.record(&p.thread_id, word, action, &p.reason, p.checkpoints) && p.whole_thread {
                deleted.insert(p.thread_id.clone());
            }
        }
        for d in r.deerflow_delete.iter().flat_map(|d| &d.threads) {
            let word = match d.status {
                DeleteStatus::Refused => Some("refused"),
                s => status_word(s == DeleteStatus::Done, s == DeleteStatus::Would),
            };
            if out.record(&d.thread_id, word, Action::Delete, &d.reason, d.checkpoints) {
                deleted.insert(d.thread_id.clone());
            }
        }
    }
    let conv_ids: Vec<String> = chunk
        .iter()
        .filter(|w| w.convert && !deleted.contains(&w.thread_id))
        .map(|w| w.thread_id.clone())
        .collect();
    let mut converted: HashSet<String> = HashSet::new();
    if let Some(frequency) = opts.snapshot_frequency
        && !conv_ids.is_empty()
        && !dfck_core::stop::requested()
    {
        let t = Instant::now();
        let r = crate::commands::migrate::to_delta::run(
            &request(req, &conv_ids, dry_run),
            &ToDeltaOptions {
                frequency,
                form: Some(DeltaForm::Deerflow),
            },
        )?;
        timer.convert += t.elapsed().as_secs_f64();
        for c in &r.threads {
            converted.insert(c.thread_id.clone());
            let word = match c.status {
                ToDeltaStatus::Refused => Some("refused"),
                s => status_word(s == ToDeltaStatus::Done, s == ToDeltaStatus::Would),
            };
            let rewritten = c.checkpoints_rewritten as u64;
            out.record(&c.thread_id, word, Action::Convert, &c.reason, rewritten);
        }
    }
    // A thread is handled once every step meant for it reached it.
    out.handled = chunk
        .iter()
        .filter(|w| {
            let pruned = !w.prune || out.handled.contains(&w.thread_id);
            let conv = !(w.convert && opts.snapshot_frequency.is_some())
                || deleted.contains(&w.thread_id)
                || converted.contains(&w.thread_id);
            pruned && conv
        })
        .map(|w| w.thread_id.clone())
        .collect();
    out.acted = out.changed.len() as u64;
    Ok(out)
}

/// The engine's request for `threads`, as the command by hand would make it.
fn request<'a>(
    req: &'a MaintainRequest<'a>,
    threads: &'a [String],
    dry_run: bool,
) -> WriteRequest<'a> {
    WriteRequest {
        target: req.target,
        threads,
        all: false,
        apply: !dry_run,
        jobs: req.jobs,
        backup: None,
        progress: req.progress,
        events: req.events,
        cache: req.cache,
    }
}

/// The plan's entries for a chunk of a dry run: each thread with an action it would get.
pub(super) fn planned(
    store: &dyn Store,
    chunk: &[Work],
    actions: &[ThreadAction],
) -> Result<Vec<PlannedThread>, Error> {
    let mut by_thread: HashMap<&str, Vec<Action>> = HashMap::new();
    for a in actions.iter().filter(|a| a.status == "would") {
        by_thread
            .entry(a.thread_id.as_str())
            .or_default()
            .push(a.action);
    }
    let mut out = Vec::new();
    for w in chunk {
        if let Some(actions) = by_thread.remove(w.thread_id.as_str()) {
            let mut fp = w.fingerprint.clone();
            fp.active_run = store.active_run(&w.thread_id)?;
            out.push(PlannedThread {
                thread_id: w.thread_id.clone(),
                actions,
                fingerprint: fp,
            });
        }
    }
    Ok(out)
}

/// The plan's threads as they are now: those whose fingerprint differs are refused (and
/// listed), the others are the work.
pub(super) fn check_plan(
    store: &dyn Store,
    summary: &StoreSummary,
    plan: &PlanFile,
    report: &mut MaintainReport,
) -> Result<Vec<Work>, Error> {
    let now: HashMap<&str, _> = summary
        .threads
        .iter()
        .map(|t| (t.thread_id.as_str(), t))
        .collect();
    let mut work = Vec::new();
    for p in &plan.threads {
        let refuse = |why: String| ThreadAction {
            thread_id: p.thread_id.clone(),
            action: p.actions.first().copied().unwrap_or(Action::Prune),
            status: "refused",
            reason: Some(why),
            checkpoints: 0,
        };
        let Some(t) = now.get(p.thread_id.as_str()) else {
            report
                .threads
                .push(refuse("the thread is gone since the plan was made".into()));
            continue;
        };
        let fp = fingerprint(t, store.active_run(&p.thread_id)?);
        if fp != p.fingerprint {
            let why = if fp.active_run != p.fingerprint.active_run {
                "DeerFlow's run state changed since the plan was made".to_owned()
            } else {
                format!(
                    "changed since the plan was made (newest checkpoint {} → {}, checkpoints {} → {}, pending writes {} → {})",
                    p.fingerprint.newest_checkpoint_id,
                    fp.newest_checkpoint_id,
                    p.fingerprint.checkpoints,
                    fp.checkpoints,
                    p.fingerprint.pending_writes,
                    fp.pending_writes
                )
            };
            report.threads.push(refuse(why));
            continue;
        }
        work.push(Work {
            thread_id: p.thread_id.clone(),
            prune: p
                .actions
                .iter()
                .any(|a| matches!(a, Action::Prune | Action::Delete)),
            convert: p.actions.contains(&Action::Convert),
            fingerprint: fp,
        });
    }
    Ok(work)
}

/// Fills the record's counters from the thread actions.
pub(super) fn count(report: &mut MaintainReport) {
    let mut threads: HashMap<(&str, Action), ()> = HashMap::new();
    let mut refused: HashSet<&str> = HashSet::new();
    let r = &mut report.run;
    for a in &report.threads {
        if a.status == "refused" {
            refused.insert(a.thread_id.as_str());
            continue;
        }
        if threads
            .insert((a.thread_id.as_str(), a.action), ())
            .is_none()
        {
            match a.action {
                Action::Delete => r.threads_deleted += 1,
                Action::Prune => r.threads_pruned += 1,
                Action::Convert => r.threads_converted += 1,
            }
        }
        if a.action != Action::Convert {
            r.checkpoints_deleted += a.checkpoints;
        }
    }
    r.threads_refused = refused.len() as u64;
}

/// Why the store should be reclaimed now (`None`: it need not be).
fn reclaim_due(req: &MaintainRequest<'_>, space: &StoreSpace) -> Option<String> {
    let share = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 / whole as f64
        }
    };
    let pct = |f: f64| format!("{:.1}%", f * 100.0);
    match space {
        StoreSpace::Sqlite(s) => {
            let free = share(s.free_page_bytes, s.file_bytes);
            if let Some(over) = req.policy.reclaim_free_over.filter(|o| free >= *o) {
                return Some(format!("free pages {} ≥ {}", pct(free), pct(over)));
            }
            let wal = req.policy.reclaim_wal_over.filter(|o| s.wal_bytes >= *o)?;
            Some(format!("WAL {} bytes ≥ {wal}", s.wal_bytes))
        }
        StoreSpace::Postgres(p) => {
            let dead: u64 = p.tables.iter().map(|t| t.dead_tuples).sum();
            let live: u64 = p.tables.iter().map(|t| t.live_tuples).sum();
            let ratio = share(dead, dead + live);
            let over = req.policy.reclaim_free_over.filter(|o| ratio >= *o)?;
            Some(format!("dead rows {} ≥ {}", pct(ratio), pct(over)))
        }
    }
}

/// The reclaim step: `reclaim` when the store passes a threshold (or the plan said so).
pub(super) fn reclaim(
    req: &MaintainRequest<'_>,
    store: &dyn Store,
    planned: Option<bool>,
    report: &mut MaintainReport,
) -> Result<(), Error> {
    let skip = |report: &mut MaintainReport, why: &str| {
        report.steps.push(StepReport {
            step: "reclaim",
            ran: false,
            reason: Some(why.into()),
            seconds: 0.0,
        });
    };
    if req.policy.reclaim_free_over.is_none()
        && req.policy.reclaim_wal_over.is_none()
        && planned.is_none()
    {
        skip(
            report,
            "the policy sets no reclaim.free_over or reclaim.wal_over",
        );
        return Ok(());
    }
    if report.run.ended == ended::STOPPED {
        skip(report, "the run was stopped");
        return Ok(());
    }
    let t = Instant::now();
    let why = match planned {
        Some(true) => Some("the plan says so".to_owned()),
        Some(false) => None,
        None => reclaim_due(req, &store.space()?),
    };
    let Some(why) = why else {
        skip(report, "no threshold passed");
        return Ok(());
    };
    let opts = ReclaimOptions {
        apply: !report.dry_run,
        into: None,
    };
    let r = match req.target {
        Target::Sqlite(path) => reclaim_sqlite(path, &opts)?,
        Target::Postgres { url, schema } => reclaim_postgres(url, schema.as_deref(), &opts)?,
    };
    if r.status == ReclaimStatus::Interrupted {
        report.run.ended = ended::STOPPED.into();
    }
    report.run.reclaimed_bytes = r
        .bytes_freed
        .and_then(|b| u64::try_from(b).ok())
        .unwrap_or(0);
    report.reclaim = Some(r);
    report.steps.push(StepReport {
        step: "reclaim",
        ran: true,
        reason: Some(why),
        seconds: t.elapsed().as_secs_f64(),
    });
    Ok(())
}

/// The verify pass of an applied run: finding counts by code for the record.
pub(super) fn verify(
    req: &MaintainRequest<'_>,
    store: &dyn Store,
    report: &mut MaintainReport,
) -> Result<(), Error> {
    let why = if !req.policy.verify {
        Some("the policy sets verify: false")
    } else if report.dry_run {
        Some("a dry run does not verify")
    } else if report.run.ended == ended::STOPPED {
        Some("the run was stopped")
    } else {
        None
    };
    if let Some(why) = why {
        report.steps.push(StepReport {
            step: "verify",
            ran: false,
            reason: Some(why.into()),
            seconds: 0.0,
        });
        return Ok(());
    }
    let t = Instant::now();
    let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut sink = |f: &dfck_core::finding::Finding| -> Result<(), Error> {
        *counts
            .entry((f.code.as_str().to_owned(), f.severity.as_str().to_owned()))
            .or_default() += 1;
        Ok(())
    };
    let target = req.target;
    let open = || target.open_read_only();
    verify_store(
        store,
        &open,
        &[],
        &VerifyOptions {
            max_depth: None,
            jobs: usize::from(req.jobs),
        },
        req.progress,
        Some(&mut sink),
    )?;
    report.run.findings = Some(super::finding_counts(counts));
    report.steps.push(StepReport {
        step: "verify",
        ran: true,
        reason: None,
        seconds: t.elapsed().as_secs_f64(),
    });
    Ok(())
}
