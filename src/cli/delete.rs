//! `dfck delete THREAD…|--user ID|--older-than D|--idle D`: deletes threads the way DeerFlow
//! does (a dry run unless `--apply`); `--user ID --erase --apply` writes an erasure receipt.

use super::deerflow::CacheArgs;
use super::{GlobalArgs, output};
use crate::commands::delete::{self, DeleteOptions};
use crate::commands::wiring::WriteRequest;
use crate::render::{self, TerminalProgress};
use clap::Args;
use dfck_core::error::Error;
use dfck_core::outcome::Outcome;
use std::path::PathBuf;

/// Arguments of `dfck delete`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  dfck delete t-1 t-2                         # what would go, and what DeerFlow holds of each
  dfck delete t-1 --apply                     # delete as DeerFlow's own thread delete does
  dfck delete --idle 180d --apply             # every thread untouched for 180 days
  dfck delete --user u-7 --erase --apply --receipt erasure-u-7.json
                                              # a user's erasure: every row of their threads

DeerFlow's own delete keeps the thread's runs, run events and feedback; --erase removes them
too (docs/deerflow-database.md). Exit 1 when a thread is refused (it keeps all its rows).")]
pub struct DeleteArgs {
    /// Threads to delete.
    pub threads: Vec<String>,
    /// Every thread this DeerFlow user owns (`threads_meta.user_id`).
    #[arg(long, value_name = "ID", conflicts_with = "threads")]
    pub user: Option<String>,
    /// Only threads whose first checkpoint is older than this: a number and a unit s, m, h,
    /// d or w (without threads or --user: every thread of the store).
    #[arg(long, value_name = "DURATION")]
    pub older_than: Option<String>,
    /// Only threads whose last checkpoint is older than this (e.g. 90d).
    #[arg(long, value_name = "DURATION")]
    pub idle: Option<String>,
    /// Also remove the thread's rows in every thread-scoped DeerFlow table (runs, run events,
    /// feedback, MCP tasks, channel conversations, scheduled tasks and their runs) and its
    /// JSONL event files: nothing of the thread is left.
    #[arg(long)]
    pub erase: bool,
    /// Delete: one transaction per thread, verified before commit.
    #[arg(long)]
    pub apply: bool,
    /// With --user --erase --apply: write the erasure receipt here (a new file: what was
    /// deleted, counts, when, by which dfck; no content).
    #[arg(long, value_name = "PATH")]
    pub receipt: Option<PathBuf>,
    /// DeerFlow's home, whose users/{user}/threads/{id} and threads/{id} directories go with
    /// the thread (default: DEER_FLOW_HOME, else the DeerFlow config's).
    #[arg(long, value_name = "DIR", env = "DEER_FLOW_HOME")]
    pub deerflow_home: Option<PathBuf>,
    /// DeerFlow's history cache.
    #[command(flatten)]
    pub cache: CacheArgs,
    /// PostgreSQL: delete this many threads at once, each over its own connection.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// SQLite: write a consistent copy here before deleting (with --apply).
    #[arg(long, value_name = "PATH")]
    pub backup: Option<PathBuf>,
}

fn options(args: &DeleteArgs, base_dir: Option<PathBuf>) -> Result<DeleteOptions, Error> {
    let dur = |flag: &str, v: &Option<String>| -> Result<Option<u64>, Error> {
        v.as_deref()
            .map(|s| {
                dfck_core::time::parse_duration(s).map_err(|e| Error::Usage(format!("{flag}: {e}")))
            })
            .transpose()
    };
    Ok(DeleteOptions {
        erase: args.erase,
        older_than: dur("--older-than", &args.older_than)?,
        idle: dur("--idle", &args.idle)?,
        now: dfck_core::time::now_micros() / 1_000_000,
        base_dir,
        events_dir: None,
        protect: Default::default(),
    })
}

/// Checks the receipt path before anything is deleted: a new file in an existing directory.
fn check_receipt(args: &DeleteArgs) -> Result<Option<PathBuf>, Error> {
    let erasure = args.user.is_some() && args.erase;
    match (&args.receipt, erasure && args.apply) {
        (None, true) => Err(Error::Usage(
            "--user --erase --apply is a user's erasure and writes a receipt: name its path with --receipt".into(),
        )),
        (Some(_), false) if !erasure => Err(Error::Usage(
            "--receipt goes with --user ID --erase (a user's erasure)".into(),
        )),
        (Some(p), _) => {
            if p.symlink_metadata().is_ok() {
                return Err(Error::Usage(format!(
                    "--receipt {}: the file exists; a receipt is never overwritten",
                    p.display()
                )));
            }
            let dir = dfck_core::store::files::parent_dir(p);
            if !dir.is_dir() {
                return Err(Error::Usage(format!(
                    "--receipt {}: no directory {}",
                    p.display(),
                    dir.display()
                )));
            }
            Ok(Some(p.clone()))
        }
        (None, false) => Ok(None),
    }
}

/// Runs `dfck delete`: exit 1 when a thread is refused.
pub fn run(global: &GlobalArgs, args: &DeleteArgs) -> Result<Outcome, Error> {
    if args.threads.is_empty()
        && args.user.is_none()
        && args.older_than.is_none()
        && args.idle.is_none()
    {
        return Err(Error::Usage(
            "name the threads to delete, or select them with --user, --older-than or --idle".into(),
        ));
    }
    let receipt = check_receipt(args)?;
    let (target, found) = global.resolve()?;
    let base_dir = super::deerflow::base_dir(args.deerflow_home.as_ref(), found.as_ref());
    let mut opts = options(args, base_dir)?;
    opts.events_dir = found.as_ref().and_then(|f| f.app.events_dir.clone());
    let (cache, cache_report) = args.cache.connect(&target, found.as_ref(), args.apply)?;
    let progress = TerminalProgress::stderr();
    let request = WriteRequest {
        target: &target,
        threads: &args.threads,
        all: false,
        apply: args.apply,
        jobs: args.jobs,
        backup: args.backup.as_deref(),
        progress: &progress,
        events: &render::write_event,
        cache: super::deerflow::thread_cache(&cache),
    };
    let user = args.user.as_deref();
    // Written as its threads come where the format allows (docs/performance.md, "Reports of
    // many threads"); held whole for a terminal's table, `--pretty` JSON, or a receipt (which
    // lists the user's threads).
    let format = global.format();
    if receipt.is_none() && super::report::streamed("delete", format, args.apply) {
        let mut out = render::delete::DeleteStream::new(format)?;
        let report = delete::run_each(&request, user, &opts, cache_report, &mut |t| out.push(&t))?;
        out.finish(&report)?;
        return Ok(outcome(&report));
    }
    let report = delete::run(&request, user, &opts, cache_report)?;
    if let (Some(path), Some(user)) = (receipt, user) {
        let doc = delete::receipt::Receipt::new(user, &report);
        delete::receipt::write(&path, &doc)?;
        render::note(&format!(
            "dfck: erasure receipt written to {}",
            path.display()
        ));
    }
    output(format, &report, render::delete::delete_table)?;
    Ok(outcome(&report))
}

/// Exit 1 when a thread is refused.
fn outcome(report: &delete::DeleteReport) -> Outcome {
    if report.refused > 0 {
        Outcome::Refused
    } else {
        Outcome::Clean
    }
}
