//! `dfck prune [THREAD …|--all]`: what may be deleted (dry run), or the deletion.

use super::GlobalArgs;
use crate::commands::prune::PruneOptions;
use crate::commands::wiring::WriteRequest;
use crate::render::{self, TerminalProgress};
use clap::Args;
use dfck_core::error::Error;
use dfck_core::outcome::Outcome;
use dfck_core::time as age;

/// Arguments of `dfck prune`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  dfck prune --all                       # what would go: trailing duration-only checkpoints
  dfck prune --all --branches --apply    # also delete leaf branches off each thread's lineage
  dfck prune --all --idle 90d --apply    # delete threads untouched for 90 days
  dfck prune t-1 --branches --protect 1f0a3c --apply
  dfck prune --all --keep-last-turns 20  # trim history to the last 20 turns (plan only)")]
pub struct PruneArgs {
    /// Threads to prune.
    pub threads: Vec<String>,
    /// Every thread of the store.
    #[arg(long, conflicts_with = "threads")]
    pub all: bool,
    /// The threads this DeerFlow user owns (`threads_meta.user_id`).
    #[arg(long, value_name = "ID", conflicts_with_all = ["threads", "all"])]
    pub user: Option<String>,
    /// Also delete leaf branches off each thread's kept lineage (old regenerate or edit
    /// branches; a client may still hold one as a resume target: protect those).
    #[arg(long)]
    pub branches: bool,
    /// Delete whole threads whose first checkpoint is older than this: a number and a unit
    /// s, m, h, d or w (e.g. 180d, 12w).
    #[arg(long, value_name = "DURATION")]
    pub older_than: Option<String>,
    /// Delete whole threads whose last checkpoint is older than this: a number and a unit
    /// (e.g. 90d, 36h).
    #[arg(long, value_name = "DURATION")]
    pub idle: Option<String>,
    /// Keep only the last N turns of each thread's resume lineage: the checkpoint that
    /// starts the oldest kept turn becomes the root (storing its whole state), everything
    /// before it goes. Older turns can no longer be branched from or regenerated.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub keep_last_turns: Option<u32>,
    /// Never delete this checkpoint (nor its ancestors): its id or a unique prefix of it
    /// among the selected threads (a value naming none or several is an error); repeatable.
    #[arg(long, value_name = "ID", num_args = 1..)]
    pub protect: Vec<String>,
    /// Delete: one transaction per thread, verified before commit.
    #[arg(long)]
    pub apply: bool,
    /// Threads at once, each over its own connection: with --apply, PostgreSQL prunes this
    /// many at once (SQLite has one writer); a dry run plans this many on either backend.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// SQLite: write a consistent copy here before deleting (with --apply).
    #[arg(long, value_name = "PATH")]
    pub backup: Option<std::path::PathBuf>,
    /// On a DeerFlow database, DeerFlow's home, whose users/{user}/threads/{id} and
    /// threads/{id} directories go with a thread deleted whole (default: DEER_FLOW_HOME, else
    /// the DeerFlow config's).
    #[arg(long, value_name = "DIR", env = "DEER_FLOW_HOME")]
    pub deerflow_home: Option<std::path::PathBuf>,
    /// DeerFlow's history cache.
    #[command(flatten)]
    pub cache: super::deerflow::CacheArgs,
}

fn options(args: &PruneArgs) -> Result<PruneOptions, Error> {
    let dur = |flag: &str, v: &Option<String>| -> Result<Option<u64>, Error> {
        v.as_deref()
            .map(|s| age::parse_duration(s).map_err(|e| Error::Usage(format!("{flag}: {e}"))))
            .transpose()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    Ok(PruneOptions {
        branches: args.branches,
        older_than: dur("--older-than", &args.older_than)?,
        idle: dur("--idle", &args.idle)?,
        protect: args.protect.iter().cloned().collect(),
        keep_turns: args.keep_last_turns.map(|n| n as usize),
        now,
    })
}

/// Runs `dfck prune`: exit 1 when a thread is refused.
pub fn run(global: &GlobalArgs, args: &PruneArgs) -> Result<Outcome, Error> {
    if args.threads.is_empty() && !args.all && args.user.is_none() {
        return Err(Error::Usage(
            "name the threads to prune, or pass --all".into(),
        ));
    }
    let opts = options(args)?;
    let (target, found) = global.resolve()?;
    let (threads, all) =
        super::select_threads(&target, &args.threads, args.all, args.user.as_deref())?;
    let whole = crate::commands::delete::DeleteOptions {
        base_dir: super::deerflow::base_dir(args.deerflow_home.as_ref(), found.as_ref()),
        ..Default::default()
    };
    let (cache, cache_report) = args.cache.connect(&target, found.as_ref(), args.apply)?;
    let progress = TerminalProgress::stderr();
    let req = WriteRequest {
        target: &target,
        threads: &threads,
        all,
        apply: args.apply,
        jobs: args.jobs,
        backup: args.backup.as_deref(),
        progress: &progress,
        events: &render::write_event,
        cache: super::deerflow::thread_cache(&cache),
    };
    let writing = super::report::ReportWriting {
        command: "prune",
        stream: render::prune::stream,
        head: render::prune::head,
        table: render::prune::prune_table,
        writes: args.apply,
    };
    // Without an age, no thread is deleted whole: the report streams (docs/performance.md).
    let report = writing.write(
        global.format(),
        opts.older_than.is_none() && opts.idle.is_none(),
        |sink| crate::commands::prune::run_each(&req, &opts, sink),
        || crate::commands::prune::run(&req, &opts, &whole, cache_report.clone()),
    )?;
    let cache_report_shown = cache_report;
    if report.deerflow_delete.is_none() {
        super::deerflow::cache_note(&cache_report_shown, report.pruned, report.dry_run);
    }
    let refused = report.refused + report.deerflow_delete.as_ref().map_or(0, |d| d.refused);
    Ok(if refused > 0 {
        Outcome::Refused
    } else {
        Outcome::Clean
    })
}
