//! `dfck migrate delta-to-full [THREAD …] [--all] [--apply]`: the plan, or the conversion.

use super::{GlobalArgs, ReducerArg};
use crate::commands::migrate::{MigrateOptions, MigrateReport};
use crate::commands::wiring::WriteRequest;
use crate::render::{self, TerminalProgress};
use clap::{Args, Subcommand};
use dfck_core::error::Error;
use dfck_core::model::ChannelMode;
use dfck_core::outcome::Outcome;

/// `dfck migrate …`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The conversion.
    #[command(subcommand)]
    pub direction: Direction,
}

/// Conversions.
#[derive(Debug, Subcommand)]
pub enum Direction {
    /// Convert delta threads so a full-mode DeerFlow opens them and sees identical state.
    DeltaToFull(DeltaToFullArgs),
    /// Shrink full-mode threads into delta form in place, every checkpoint kept and
    /// verified (snapshots every K updates and wherever the replay would differ).
    FullToDelta(super::full_to_delta::FullToDeltaArgs),
}

/// Arguments of `dfck migrate delta-to-full`.
#[derive(Debug, Args)]
pub struct DeltaToFullArgs {
    /// Threads to convert.
    pub threads: Vec<String>,
    /// Every thread of the store.
    #[arg(long, conflicts_with = "threads")]
    pub all: bool,
    /// The threads this DeerFlow user owns (`threads_meta.user_id`).
    #[arg(long, value_name = "ID", conflicts_with_all = ["threads", "all"])]
    pub user: Option<String>,
    /// Write the conversion: one transaction per thread, verified before commit.
    #[arg(long)]
    pub apply: bool,
    /// Encrypt every value this command writes with the AES key (`--aes-key-file` or
    /// LANGGRAPH_AES_KEY), plaintext ones included; without it each value keeps its
    /// protection (docs/security.md).
    #[arg(long)]
    pub encrypt_all: bool,
    /// Threads at once, each over its own connection: with --apply, PostgreSQL converts this
    /// many at once (SQLite has one writer); a dry run plans this many on either backend.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// Convert contaminated delta forks to exactly what delta mode shows.
    #[arg(long)]
    pub accept_delta_view: bool,
    /// SQLite: write a consistent copy here before converting (with --apply).
    #[arg(long, value_name = "PATH")]
    pub backup: Option<std::path::PathBuf>,
    /// DeerFlow's history cache (purged of every converted thread).
    #[command(flatten)]
    pub cache: super::deerflow::CacheArgs,
    /// Messages reducer the conversion replays with (`auto`: DeerFlow's on threads carrying
    /// DeerFlow's mode marker, LangGraph's otherwise).
    #[arg(long, value_enum, default_value_t = ReducerArg::Auto)]
    pub reducer: ReducerArg,
}

/// Runs `dfck migrate`: exit 1 when a thread is refused.
pub fn run(global: &GlobalArgs, args: &MigrateArgs) -> Result<Outcome, Error> {
    let args = match &args.direction {
        Direction::DeltaToFull(a) => a,
        Direction::FullToDelta(a) => return super::full_to_delta::run(global, a),
    };
    if args.threads.is_empty() && !args.all && args.user.is_none() {
        return Err(Error::Usage(
            "name the threads to convert, or pass --all".into(),
        ));
    }
    super::encrypt_all(args.encrypt_all)?;
    let (target, discovered) = global.resolve()?;
    let opts = MigrateOptions {
        accept_delta_view: args.accept_delta_view,
        reducer: args.reducer.fixed(),
    };
    let (threads, all) =
        super::select_threads(&target, &args.threads, args.all, args.user.as_deref())?;
    let (cache, cache_report) = args
        .cache
        .connect(&target, discovered.as_ref(), args.apply)?;
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
        command: "migrate",
        stream: render::migrate::stream,
        head: render::migrate::head,
        table: render::migrate::migrate_table,
        writes: args.apply,
    };
    let report: MigrateReport = writing.write(
        global.format(),
        true,
        |sink| crate::commands::migrate::run_each(&req, &opts, sink),
        || crate::commands::migrate::run(&req, &opts),
    )?;
    super::deerflow::cache_note(&cache_report, report.converted, report.dry_run);
    if !report.dry_run && report.converted > 0 {
        render::note(&format!(
            "dfck: {} thread(s) converted. Set database.checkpoint_channel_mode: full and restart every process sharing this store.",
            report.converted
        ));
        if discovered.is_some_and(|d| d.checkpoint_channel_mode == ChannelMode::Delta) {
            render::note(
                "dfck: warning: the DeerFlow config still says checkpoint_channel_mode: delta",
            );
        }
    }
    Ok(if report.refused > 0 {
        Outcome::Refused
    } else {
        Outcome::Clean
    })
}
