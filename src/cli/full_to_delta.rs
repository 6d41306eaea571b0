//! `dfck migrate full-to-delta [THREAD …] [--all] [--apply]`: the plan, or the conversion.

use super::GlobalArgs;
use crate::commands::migrate::to_delta::{DeltaForm, ToDeltaOptions};
use crate::commands::wiring::WriteRequest;
use crate::render::{self, TerminalProgress};
use clap::{Args, ValueEnum};
use dfck_core::error::Error;
use dfck_core::model::ChannelMode;
use dfck_core::outcome::Outcome;

/// `--form`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormArg {
    /// DeerFlow's form when a DeerFlow config was found or the thread carries DeerFlow's
    /// marker; LangGraph's otherwise.
    Auto,
    /// DeerFlow's: the mode marker on every checkpoint, DeerFlow's messages reducer.
    Deerflow,
    /// LangGraph's own DeltaChannel form: no marker, LangGraph's delta reducer.
    Langgraph,
}

/// Arguments of `dfck migrate full-to-delta`.
#[derive(Debug, Args)]
pub struct FullToDeltaArgs {
    /// Threads to convert.
    pub threads: Vec<String>,
    /// Every thread of the store.
    #[arg(long, conflicts_with = "threads")]
    pub all: bool,
    /// The threads this DeerFlow user owns (`threads_meta.user_id`).
    #[arg(long, value_name = "ID", conflicts_with_all = ["threads", "all"])]
    pub user: Option<String>,
    /// Snapshot cadence K: a snapshot after K updates of messages (default: the DeerFlow
    /// config's database.checkpoint_delta.snapshot_frequency, else 10).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    pub snapshot_frequency: Option<u64>,
    /// Metadata form of the converted threads.
    #[arg(long, value_enum, default_value_t = FormArg::Auto)]
    pub form: FormArg,
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
    /// SQLite: write a consistent copy here before converting (with --apply).
    #[arg(long, value_name = "PATH")]
    pub backup: Option<std::path::PathBuf>,
    /// DeerFlow's history cache (purged of every converted thread).
    #[command(flatten)]
    pub cache: super::deerflow::CacheArgs,
}

/// Runs `dfck migrate full-to-delta`: exit 1 when a thread is refused.
pub fn run(global: &GlobalArgs, args: &FullToDeltaArgs) -> Result<Outcome, Error> {
    if args.threads.is_empty() && !args.all && args.user.is_none() {
        return Err(Error::Usage(
            "name the threads to convert, or pass --all".into(),
        ));
    }
    super::encrypt_all(args.encrypt_all)?;
    let (target, discovered) = global.resolve()?;
    let opts = ToDeltaOptions {
        frequency: args
            .snapshot_frequency
            .or_else(|| discovered.as_ref().map(|d| d.snapshot_frequency))
            .unwrap_or(10)
            .max(1),
        form: match args.form {
            FormArg::Deerflow => Some(DeltaForm::Deerflow),
            FormArg::Langgraph => Some(DeltaForm::Langgraph),
            FormArg::Auto if discovered.is_some() => Some(DeltaForm::Deerflow),
            FormArg::Auto => None,
        },
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
        command: "full-to-delta",
        stream: render::full_to_delta::stream,
        head: render::full_to_delta::head,
        table: render::full_to_delta_table,
        writes: args.apply,
    };
    let report = writing.write(
        global.format(),
        true,
        |sink| crate::commands::migrate::to_delta::run_each(&req, &opts, sink),
        || crate::commands::migrate::to_delta::run(&req, &opts),
    )?;
    super::deerflow::cache_note(&cache_report, report.done + report.would, report.would > 0);
    if report.done + report.would > 0 {
        render::note(&format!(
            "dfck: {} thread(s) {}. Set database.checkpoint_channel_mode: delta in DeerFlow's config.yaml (checkpoint_delta.snapshot_frequency: {}) and restart every process sharing this store.",
            report.done + report.would,
            if report.dry_run {
                "would be converted"
            } else {
                "converted"
            },
            opts.frequency
        ));
        if discovered.is_some_and(|d| d.checkpoint_channel_mode == ChannelMode::Full) {
            render::note(
                "dfck: warning: the DeerFlow config still says checkpoint_channel_mode: full — a full-mode DeerFlow refuses delta threads",
            );
        }
    }
    Ok(if report.refused > 0 {
        Outcome::Refused
    } else {
        Outcome::Clean
    })
}
