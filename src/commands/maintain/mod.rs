//! `dfck maintain`: a retention policy run end to end — prune and delete by age
//! (`prune`'s engine), full-to-delta for large full-mode threads, `reclaim` past a
//! threshold, a `verify` pass — under one sweeper lease, in chunks of threads so that a
//! sweep limit, a time budget or a stop ends the run between threads and the next run
//! resumes after the last thread handled. Returns a plain report; rendering lives in
//! `render::maintain`.

pub mod lease;
pub mod plan;
pub mod select;
mod steps;

use crate::commands::delete::{CacheReport, DeleteOptions};
use crate::commands::reclaim::ReclaimReport;
use dfck_core::config::policy::Policy;
use dfck_core::error::Error;
use dfck_core::maintenance::{FindingCount, LastRun, StepTime};
use dfck_core::model::{ChannelMode, ThreadMode};
use dfck_core::progress::Progress;
use dfck_core::target::Target;
use dfck_core::write::{ThreadCache, WriteEvent};
use plan::{Action, PlanFile, PlanOptions, PlannedThread};
use select::Exempted;
use serde::Serialize;
use std::time::Instant;

/// Threads handed to the engine at once: between chunks the run checks its limit, its
/// time budget and a stop, and records the cursor.
const CHUNK: usize = 64;

/// What `maintain` is asked to do, beside the mode.
pub struct MaintainRequest<'a> {
    /// The store.
    pub target: &'a Target,
    /// The policy.
    pub policy: &'a Policy,
    /// DeerFlow's `checkpoint_channel_mode` (`None`: no DeerFlow config was read).
    pub channel_mode: Option<ChannelMode>,
    /// DeerFlow's `checkpoint_delta.snapshot_frequency`.
    pub snapshot_frequency: u64,
    /// Threads at once (PostgreSQL).
    pub jobs: u16,
    /// Progress of each step.
    pub progress: &'a (dyn Progress + Sync),
    /// What the engine reports while it runs.
    pub events: &'a (dyn Fn(WriteEvent<'_>) + Sync),
    /// DeerFlow's history cache, purged of every thread changed.
    pub cache: Option<&'a (dyn ThreadCache + Sync)>,
    /// Where that cache was, for the delete reports.
    pub cache_report: CacheReport,
    /// DeerFlow's thread directories, removed with a thread deleted whole.
    pub whole: DeleteOptions,
    /// "Now" (Unix seconds).
    pub now: i64,
}

/// How the run goes.
pub enum Mode<'a> {
    /// Say what would be done; no lease, nothing written.
    DryRun,
    /// Do it, under the lease.
    Apply,
    /// Do exactly this plan, under the lease.
    ApplyPlan(&'a PlanFile),
}

/// What happened (or would) to one thread.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadAction {
    /// Thread id.
    pub thread_id: String,
    /// `delete`, `prune` or `convert`.
    pub action: Action,
    /// `done`, `would` or `refused`.
    pub status: &'static str,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Checkpoints deleted or rewritten (would be).
    pub checkpoints: u64,
}

/// One step of the run.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    /// `summary`, `prune`, `convert`, `reclaim` or `verify`.
    pub step: &'static str,
    /// Whether it ran.
    pub ran: bool,
    /// Why it did not run, or why it did (reclaim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Seconds spent.
    pub seconds: f64,
}

/// `dfck maintain`'s report.
#[derive(Debug, Clone, Serialize)]
pub struct MaintainReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// The store.
    pub store: String,
    /// Another sweeper's lease, when it kept this run from working.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_held_by: Option<String>,
    /// Where the run started (after this thread id; `None`: from the first thread).
    pub resumed_after: Option<String>,
    /// Where the next run starts (`None`: from the first thread).
    pub next_after: Option<String>,
    /// Threads left out by the policy's exemptions.
    pub exempted: Exempted,
    /// Threads changed, that would be, or refused.
    pub threads: Vec<ThreadAction>,
    /// The steps.
    pub steps: Vec<StepReport>,
    /// The reclaim step's report, when it ran (or would).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaim: Option<ReclaimReport>,
    /// The run's record (as `dfck_maintenance` keeps it).
    pub run: LastRun,
    /// The plan of a dry run (`--plan`).
    #[serde(skip)]
    pub plan: Option<PlanFile>,
}

impl MaintainReport {
    /// Threads refused.
    pub fn refused(&self) -> u64 {
        self.run.threads_refused
    }
}

/// How the run ended, as the record says.
pub mod ended {
    /// Every thread examined.
    pub const COMPLETE: &str = "complete";
    /// The sweep limit was reached.
    pub const SWEEP_LIMIT: &str = "sweep limit";
    /// The time budget ran out.
    pub const TIME_BUDGET: &str = "time budget";
    /// A stop (SIGTERM, SIGINT) was asked.
    pub const STOPPED: &str = "stopped";
    /// Another sweeper holds the lease.
    pub const LEASE_HELD: &str = "lease held";
}

/// A thread to work on and what to do to it.
struct Work {
    thread_id: String,
    prune: bool,
    convert: bool,
    fingerprint: select::Fingerprint,
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Runs one maintenance pass.
pub fn run(req: &MaintainRequest<'_>, mode: Mode<'_>) -> Result<MaintainReport, Error> {
    let clock = Instant::now();
    let mut report = MaintainReport {
        dry_run: matches!(mode, Mode::DryRun),
        store: req.target.display(),
        lease_held_by: None,
        resumed_after: None,
        next_after: None,
        exempted: Exempted::default(),
        threads: Vec::new(),
        steps: Vec::new(),
        reclaim: None,
        run: LastRun {
            started_at: unix_now(),
            ended: ended::COMPLETE.into(),
            ..LastRun::default()
        },
        plan: None,
    };
    let lease = match mode {
        Mode::DryRun => None,
        Mode::Apply | Mode::ApplyPlan(_) => match lease::take(req.target, req.policy.lease_ttl)? {
            lease::Taken::Held(h) => {
                report.lease_held_by = Some(h.describe());
                report.run.ended = ended::LEASE_HELD.into();
                return Ok(report);
            }
            lease::Taken::Granted(l) => Some(l),
        },
    };
    // A failed sweep drops the lease (freed without a record) with the error.
    sweep(req, &mode, lease.as_ref(), &mut report)?;
    report.run.seconds = clock.elapsed().as_secs_f64();
    report.run.steps = report
        .steps
        .iter()
        .filter(|s| s.ran)
        .map(|s| StepTime {
            step: s.step.into(),
            seconds: s.seconds,
        })
        .collect();
    if let Some(l) = lease {
        l.release(Some(&report.run))?;
    }
    Ok(report)
}

/// The policy's prune options (or the plan's).
fn plan_options(req: &MaintainRequest<'_>, convert: bool) -> PlanOptions {
    let p = req.policy;
    PlanOptions {
        branches: p.prune.as_ref().is_some_and(|r| r.branches),
        keep_last_turns: p.prune.as_ref().and_then(|r| r.keep_last_turns),
        older_than: p.delete_older_than,
        idle: p.delete_idle,
        now: req.now,
        snapshot_frequency: convert.then_some(req.snapshot_frequency.max(1)),
    }
}

/// Why the conversion step does not run (`None`: it does).
fn convert_skipped(req: &MaintainRequest<'_>) -> Option<String> {
    if req.policy.convert_over.is_none() {
        return Some("the policy sets no convert.full_to_delta_over".into());
    }
    match req.channel_mode {
        Some(ChannelMode::Delta) => None,
        Some(ChannelMode::Full) => Some(
            "DeerFlow's config says checkpoint_channel_mode: full, and a full-mode DeerFlow refuses delta threads".into(),
        ),
        None => Some(
            "no DeerFlow config was read (the store was given with --db), so DeerFlow's checkpoint_channel_mode is unknown".into(),
        ),
    }
}

fn sweep(
    req: &MaintainRequest<'_>,
    mode: &Mode<'_>,
    lease: Option<&lease::Lease>,
    report: &mut MaintainReport,
) -> Result<(), Error> {
    let store = req.target.open_read_only()?;
    let t = Instant::now();
    let summary = crate::commands::summary::summarize(store.as_ref(), req.progress)?;
    let metas = match store.app() {
        Some(a) if a.app_schema()?.lists_threads() => a.thread_metas(None)?,
        _ => Vec::new(),
    };
    report.steps.push(StepReport {
        step: "summary",
        ran: true,
        reason: None,
        seconds: t.elapsed().as_secs_f64(),
    });
    let convert_why = convert_skipped(req);
    let prune_rule = req.policy.prune.is_some()
        || req.policy.delete_idle.is_some()
        || req.policy.delete_older_than.is_some();
    let (work, options, limit) = match mode {
        Mode::ApplyPlan(plan) => {
            let work = steps::check_plan(store.as_ref(), &summary, plan, report)?;
            (work, plan.options.clone(), u64::MAX)
        }
        _ => {
            let cursor = match lease {
                Some(l) => l.start.clone(),
                None => store
                    .maintenance()
                    .map(|m| m.maintenance_state())
                    .transpose()?
                    .flatten()
                    .and_then(|s| s.cursor),
            };
            report.resumed_after = cursor.clone();
            let (cands, ex) = select::candidates(&summary, &metas, req.policy, cursor.as_deref());
            report.exempted = ex;
            let over = req.policy.convert_over.unwrap_or(u64::MAX);
            let work = cands
                .into_iter()
                .map(|c| Work {
                    prune: prune_rule,
                    convert: convert_why.is_none() && c.mode == ThreadMode::Full && c.bytes > over,
                    thread_id: c.thread_id,
                    fingerprint: c.fingerprint,
                })
                .collect();
            (
                work,
                plan_options(req, convert_why.is_none()),
                req.policy.sweep_limit.unwrap_or(u64::MAX),
            )
        }
    };
    drop(summary);
    let budget = req.policy.time_budget.map(std::time::Duration::from_secs);
    let started = Instant::now();
    let mut timer = steps::Timer::default();
    let mut acted = 0u64;
    let mut planned: Vec<PlannedThread> = Vec::new();
    let mut i = 0;
    let mut cursor = report.resumed_after.clone();
    report.run.ended = ended::COMPLETE.into();
    while i < work.len() {
        if dfck_core::stop::requested() {
            report.run.ended = ended::STOPPED.into();
            break;
        }
        if budget.is_some_and(|b| started.elapsed() >= b) {
            report.run.ended = ended::TIME_BUDGET.into();
            break;
        }
        if acted >= limit {
            report.run.ended = ended::SWEEP_LIMIT.into();
            break;
        }
        let room = usize::try_from(limit - acted).unwrap_or(usize::MAX);
        let n = CHUNK.min(room).min(work.len() - i);
        let chunk = &work[i..i + n];
        let out = steps::run_chunk(req, &options, chunk, report.dry_run, &mut timer)?;
        acted += out.acted;
        if report.dry_run {
            planned.extend(steps::planned(store.as_ref(), chunk, &out.actions)?);
        }
        report.threads.extend(out.actions);
        let done = chunk
            .iter()
            .take_while(|w| out.handled.contains(&w.thread_id))
            .count();
        report.run.threads_examined += done as u64;
        if done > 0 {
            cursor = Some(chunk[done - 1].thread_id.clone());
        }
        if done < n {
            report.run.ended = ended::STOPPED.into();
            break;
        }
        i += n;
    }
    if report.run.ended == ended::COMPLETE {
        cursor = None;
    }
    if !matches!(mode, Mode::ApplyPlan(_)) {
        report.next_after = cursor.clone();
        if let Some(l) = lease {
            l.set_cursor(cursor);
        }
    }
    steps::count(report);
    report.steps.push(
        timer.step(
            "prune",
            prune_rule
                .then_some(())
                .ok_or("the policy sets no prune, delete.idle or delete.older_than rule"),
        ),
    );
    report
        .steps
        .push(timer.step("convert", convert_why.map_or(Ok(()), Err)));
    let reclaim_planned = match mode {
        Mode::ApplyPlan(p) => Some(p.reclaim),
        _ => None,
    };
    steps::reclaim(req, store.as_ref(), reclaim_planned, report)?;
    steps::verify(req, store.as_ref(), report)?;
    if report.dry_run {
        report.plan = Some(PlanFile {
            format: plan::FORMAT.into(),
            dfck_version: env!("CARGO_PKG_VERSION").into(),
            store: plan::identity(req.target),
            created_at: req.now,
            options,
            threads: planned,
            reclaim: report.reclaim.is_some(),
        });
    }
    Ok(())
}

/// The finding counts of a verify pass, by code and severity.
pub fn finding_counts(
    counts: std::collections::BTreeMap<(String, String), u64>,
) -> Vec<FindingCount> {
    counts
        .into_iter()
        .map(|((code, severity), count)| FindingCount {
            code,
            severity,
            count,
        })
        .collect()
}
