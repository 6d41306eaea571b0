//! `dfck copy --to TARGET [THREAD …|--all] [--apply]`: the plan, or the copy (DeerFlow's own
//! tables with the checkpoints, unless `--checkpoints-only`).

use super::{GlobalArgs, output};
use crate::commands::wiring::WriteRequest;
use crate::render::{self, TerminalProgress};
use clap::Args;
use dfck_core::error::Error;
use dfck_core::outcome::Outcome;
use dfck_core::target::Target;

/// Arguments of `dfck copy`.
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The store to copy into: a SQLite path (created when missing), sqlite:///abs/path.db,
    /// or a postgresql:// URL or keyword DSN (an empty database is set up).
    #[arg(long, value_name = "TARGET")]
    pub to: String,
    /// Threads to copy.
    pub threads: Vec<String>,
    /// Every thread of the source store.
    #[arg(long, conflicts_with = "threads")]
    pub all: bool,
    /// The threads this DeerFlow user owns (`threads_meta.user_id`).
    #[arg(long, value_name = "ID", conflicts_with_all = ["threads", "all"])]
    pub user: Option<String>,
    /// PostgreSQL schema (search_path) of the target.
    #[arg(long, value_name = "NAME")]
    pub to_pg_schema: Option<String>,
    /// Write the copy: one transaction per thread, verified before commit.
    #[arg(long)]
    pub apply: bool,
    /// Overwrite a thread the target already holds with different content.
    #[arg(long)]
    pub replace: bool,
    /// PostgreSQL targets: copy this many threads at once, each over its own connections.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// Encrypt every value this command writes with the AES key (`--aes-key-file` or
    /// LANGGRAPH_AES_KEY), plaintext ones included; without it each value keeps its
    /// protection (docs/security.md).
    #[arg(long)]
    pub encrypt_all: bool,
    /// Copy LangGraph's checkpoints and writes only, leaving DeerFlow's own tables behind
    /// (a target without DeerFlow's schema).
    #[arg(long)]
    pub checkpoints_only: bool,
    /// The target's DeerFlow history cache (never the source's): purged of every thread
    /// `--replace` overwrote.
    #[command(flatten)]
    pub cache: super::deerflow::CacheArgs,
}

/// Runs `dfck copy`: exit 1 when a thread is refused.
pub fn run(global: &GlobalArgs, args: &CopyArgs) -> Result<Outcome, Error> {
    if args.threads.is_empty() && !args.all && args.user.is_none() {
        return Err(Error::Usage(
            "name the threads to copy, or pass --all".into(),
        ));
    }
    super::encrypt_all(args.encrypt_all)?;
    let (source, _) = global.resolve()?;
    let to = match (Target::parse(&args.to)?, &args.to_pg_schema) {
        (Target::Postgres { url, .. }, s) => Target::Postgres {
            url,
            schema: s.clone(),
        },
        (Target::Sqlite(_), Some(_)) => {
            return Err(Error::Usage(
                "--to-pg-schema goes with a PostgreSQL --to target".into(),
            ));
        }
        (t, None) => t,
    };
    let (threads, all) =
        super::select_threads(&source, &args.threads, args.all, args.user.as_deref())?;
    // The cache of the target's DeerFlow: only --redis-url / --cache-key-prefix name it (the
    // discovered config is the source's DeerFlow).
    let (cache, _) = args.cache.connect(&to, None, args.apply)?;
    let progress = TerminalProgress::stderr();
    let request = WriteRequest {
        target: &source,
        threads: &threads,
        all,
        apply: args.apply,
        jobs: args.jobs,
        backup: None,
        progress: &progress,
        events: &render::write_event,
        cache: cache
            .as_ref()
            .map(|c| c as &(dyn dfck_core::write::ThreadCache + Sync)),
    };
    let copy = crate::commands::copy::prepare(&request, &to, args.replace, args.checkpoints_only)?;
    // Written as its threads come where the format allows (docs/performance.md, "Reports of
    // many threads"); held whole for a terminal's table and `--pretty` JSON.
    let format = global.format();
    let report = if super::report::streamed("copy", format, args.apply) {
        let mut out = render::CopyStream::new(format, copy.copies_deerflow())?;
        let report = copy.run_each(&mut |t| out.push(&t))?;
        out.finish(&report)?;
        report
    } else {
        let report = copy.run()?;
        output(format, &report, render::copy_table)?;
        report
    };
    Ok(if report.any_refused() {
        Outcome::Refused
    } else {
        Outcome::Clean
    })
}
