//! `dfck maintain`: the retention policy, once or `--watch`ed; `--explain`, `--plan` and
//! `--apply-plan`.

use super::{FormatArg, GlobalArgs, output};
use crate::commands::maintain::plan::PlanFile;
use crate::commands::maintain::{MaintainReport, MaintainRequest, Mode};
use crate::render::{self, TerminalProgress};
use clap::Args;
use dfck_core::config::Discovered;
use dfck_core::config::policy::Policy;
use dfck_core::error::Error;
use dfck_core::outcome::Outcome;
use dfck_core::target::Target;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Arguments of `dfck maintain`.
#[derive(Debug, Args)]
#[command(
    after_help = "The policy is the `dfck:` section of DeerFlow's config.yaml, or a file of its own (--policy); docs/commands.md lists its keys and docs/operations.md how to run maintain unattended.

Examples:
  dfck maintain --explain                      # the effective policy, and where each value came from
  dfck maintain                                # what a run would do (nothing is written)
  dfck maintain --plan plan.json               # write that down for review
  dfck maintain --apply-plan plan.json         # do exactly that plan
  dfck maintain --apply --watch 15m --metrics-file /var/lib/node_exporter/dfck.prom"
)]
pub struct MaintainArgs {
    /// The policy file (its top level is the policy); default: the `dfck:` section of
    /// DeerFlow's config.yaml.
    #[arg(long, value_name = "PATH")]
    pub policy: Option<PathBuf>,
    /// Print the effective policy and where each value came from, and stop.
    #[arg(long)]
    pub explain: bool,
    /// Do it, under the sweeper lease (without it: a dry run that takes no lease and writes
    /// nothing).
    #[arg(long, conflicts_with_all = ["plan", "apply_plan"])]
    pub apply: bool,
    /// Write what a run would do, with each thread's fingerprint, to FILE (a dry run).
    #[arg(long, value_name = "FILE", conflicts_with = "apply_plan")]
    pub plan: Option<PathBuf>,
    /// Do exactly the plan in FILE: threads changed since it was made are refused, and a
    /// plan made for another store or dfck version is refused whole.
    #[arg(long, value_name = "FILE", conflicts_with = "watch")]
    pub apply_plan: Option<PathBuf>,
    /// Run again every INTERVAL (e.g. 15m) until SIGTERM or SIGINT; a failed run is reported
    /// on stderr and the next one goes ahead.
    #[arg(long, value_name = "INTERVAL")]
    pub watch: Option<String>,
    /// Write the store's metrics and this run's (OpenMetrics text, for node_exporter's
    /// textfile collector) to PATH after each run, atomically.
    #[arg(long, value_name = "PATH")]
    pub metrics_file: Option<PathBuf>,
    /// PostgreSQL: work on this many threads at once, each over its own connection.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// DeerFlow's home, whose thread directories go with a thread deleted whole (default:
    /// DEER_FLOW_HOME, else the DeerFlow config's).
    #[arg(long, value_name = "DIR", env = "DEER_FLOW_HOME")]
    pub deerflow_home: Option<PathBuf>,
    /// DeerFlow's history cache.
    #[command(flatten)]
    pub cache: super::deerflow::CacheArgs,
}

/// The policy and where it was read.
fn load_policy(
    global: &GlobalArgs,
    args: &MaintainArgs,
    found: Option<&Discovered>,
) -> Result<Policy, Error> {
    let read = |path: &Path, flag: &str| {
        std::fs::read_to_string(path)
            .map_err(|e| Error::Usage(format!("{flag} {}: {e}", path.display())))
    };
    if let Some(path) = &args.policy {
        let text = read(path, "--policy")?;
        return Policy::parse(&text, path, false)?.ok_or_else(|| {
            Error::Usage(format!("--policy {}: the file is empty", path.display()))
        });
    }
    let config = global
        .config
        .clone()
        .or_else(|| found.map(|f| f.config_path.clone()));
    let Some(config) = config else {
        return Err(Error::Usage(
            "maintain needs a policy: pass --policy FILE, or --config DeerFlow's config.yaml with a dfck: section".into(),
        ));
    };
    let text = read(&config, "--config")?;
    Policy::parse(&text, &config, true)?.ok_or_else(|| {
        Error::Usage(format!(
            "{} has no dfck: section: add one (docs/commands.md, maintain) or pass --policy FILE",
            config.display()
        ))
    })
}

/// SIGTERM and SIGINT ask the run to stop at its next safe point; a second one ends the
/// process at once.
fn stop_on_signals() -> Result<(), Error> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = dfck_core::stop::flag();
    for sig in [SIGTERM, SIGINT] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, std::sync::Arc::clone(&flag))
            .and_then(|_| signal_hook::flag::register(sig, std::sync::Arc::clone(&flag)))
            .map_err(|e| Error::Usage(format!("installing the signal handlers: {e}")))?;
    }
    Ok(())
}

/// Runs `dfck maintain`: exit 1 when a thread is refused (a run kept out by another
/// sweeper's lease exits 0).
pub fn run(global: &GlobalArgs, args: &MaintainArgs) -> Result<Outcome, Error> {
    if global.format == FormatArg::Csv {
        return Err(Error::Usage(
            "--format csv: maintain's report has no flat rows; use --format json or ndjson".into(),
        ));
    }
    let interval = args
        .watch
        .as_deref()
        .map(|w| {
            dfck_core::time::parse_duration(w)
                .map_err(|e| Error::Usage(format!("--watch: {e}")))
                .and_then(|s| match s {
                    0 => Err(Error::Usage(
                        "--watch: the interval must be at least 1s".into(),
                    )),
                    s => Ok(Duration::from_secs(s)),
                })
        })
        .transpose()?;
    let (target, found) = global.resolve()?;
    let policy = load_policy(global, args, found.as_ref())?;
    if args.explain {
        output(global.format(), &policy.explain(), |s| {
            render::maintain::explain_table(s)
        })?;
        return Ok(Outcome::Clean);
    }
    if interval.is_some() && args.plan.is_some() {
        return Err(Error::Usage(
            "--plan writes one plan; it does not go with --watch".into(),
        ));
    }
    let plan = args
        .apply_plan
        .as_deref()
        .map(|p| PlanFile::read(p, &target))
        .transpose()?;
    if let Some(m) = &args.metrics_file {
        check_output_path("--metrics-file", m, &target)?;
    }
    if let Some(p) = &args.plan {
        check_output_path("--plan", p, &target)?;
    }
    stop_on_signals()?;
    let apply = args.apply || plan.is_some();
    let (cache, cache_report) = args.cache.connect(&target, found.as_ref(), apply)?;
    let progress = TerminalProgress::stderr();
    let req = MaintainRequest {
        target: &target,
        policy: &policy,
        channel_mode: found.as_ref().map(|f| f.checkpoint_channel_mode),
        snapshot_frequency: found.as_ref().map_or(10, |f| f.snapshot_frequency),
        jobs: args.jobs,
        progress: &progress,
        events: &render::write_event,
        cache: super::deerflow::thread_cache(&cache),
        cache_report,
        whole: crate::commands::delete::DeleteOptions {
            base_dir: super::deerflow::base_dir(args.deerflow_home.as_ref(), found.as_ref()),
            ..Default::default()
        },
        now: 0,
    };
    let once = |now: i64| -> Result<MaintainReport, Error> {
        let req = MaintainRequest {
            now,
            cache_report: req.cache_report.clone(),
            whole: req.whole.clone(),
            ..req
        };
        let mode = match (&plan, apply) {
            (Some(p), _) => Mode::ApplyPlan(p),
            (None, true) => Mode::Apply,
            (None, false) => Mode::DryRun,
        };
        let report = crate::commands::maintain::run(&req, mode)?;
        if let (Some(path), Some(p)) = (&args.plan, &report.plan) {
            p.write(path, &target)?;
        }
        if let Some(m) = &args.metrics_file {
            write_metrics(m, &target)?;
        }
        output(global.format(), &report, render::maintain::maintain_table)?;
        Ok(report)
    };
    let Some(interval) = interval else {
        let now = plan.as_ref().map_or_else(unix_now, |p| p.options.now);
        let report = once(now)?;
        return Ok(if report.refused() > 0 {
            Outcome::Refused
        } else {
            Outcome::Clean
        });
    };
    watch(interval, || once(unix_now()).map(|_| ()))
}

/// The `--watch` loop: a run every `interval` until a stop is asked; a failed run is
/// reported and the loop goes on.
fn watch(
    interval: Duration,
    mut cycle: impl FnMut() -> Result<(), Error>,
) -> Result<Outcome, Error> {
    loop {
        if let Err(e) = cycle() {
            render::note(&format!(
                "dfck: maintain: this run failed: {e}; the next one runs in {}s",
                interval.as_secs()
            ));
        }
        let next = Instant::now() + interval;
        while Instant::now() < next {
            if dfck_core::stop::requested() {
                return Ok(Outcome::Clean);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        if dfck_core::stop::requested() {
            return Ok(Outcome::Clean);
        }
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// An output file (`--plan`, `--metrics-file`) is checked before any work: not a file of the
/// store, and in a directory that exists.
fn check_output_path(flag: &str, path: &Path, target: &Target) -> Result<(), Error> {
    if let Target::Sqlite(store) = target
        && let Some(which) = dfck_core::store::files::store_file_named(store, path)
    {
        return Err(Error::Usage(format!(
            "{flag} {}: that is {which}; write it under another name",
            path.display()
        )));
    }
    let dir = dfck_core::store::files::parent_dir(path);
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "{flag} {}: no directory {}",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// The store's metrics after a run, with the record the run left in `dfck_maintenance` (and
/// whether another sweeper holds the lease), written atomically.
fn write_metrics(path: &Path, target: &Target) -> Result<(), Error> {
    let store = target.open_read_only()?;
    let summary =
        crate::commands::summary::summarize(store.as_ref(), &dfck_core::progress::NoProgress)?;
    let m = crate::commands::metrics::collect(store.as_ref(), &summary, None)?;
    // The store's connection is closed before any file is written.
    drop(store);
    let store = match target {
        Target::Sqlite(p) => Some(p.as_path()),
        Target::Postgres { .. } => None,
    };
    crate::commands::metrics::write_file(path, &render::openmetrics::render(&m), store).map_err(
        |e| match e {
            crate::commands::metrics::MetricsFileError::StoreFile { .. } => {
                Error::Usage(e.to_string())
            }
            crate::commands::metrics::MetricsFileError::Io { .. } => {
                Error::Io(std::io::Error::other(e.to_string()))
            }
        },
    )
}
