//! `dfck migrate delta-to-full [THREAD …] [--all] [--apply]`: the plan, or the conversion.

use super::{GlobalArgs, ReducerArg, output};
use crate::error::Error;
use crate::migrate::{MigrateOptions, MigrateReport, plan};
use crate::model::ChannelMode;
use crate::outcome::Outcome;
use crate::render::{self, TerminalProgress};
use crate::target::Target;
use crate::write::RunOptions;
use clap::{Args, Subcommand};

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
    /// Write the conversion: one transaction per thread, verified before commit.
    #[arg(long)]
    pub apply: bool,
    /// PostgreSQL: convert this many threads at once, each over its own connection.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// Convert contaminated delta forks to exactly what delta mode shows.
    #[arg(long)]
    pub accept_delta_view: bool,
    /// SQLite: write a consistent copy here before converting (with --apply).
    #[arg(long, value_name = "PATH")]
    pub backup: Option<std::path::PathBuf>,
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
    if args.threads.is_empty() && !args.all {
        return Err(Error::Usage(
            "name the threads to convert, or pass --all".into(),
        ));
    }
    let (target, discovered) = global.resolve()?;
    if args.apply {
        return apply(global, args, &target, discovered.as_ref());
    }
    if args.backup.is_some() {
        return Err(Error::Usage("--backup goes with --apply".into()));
    }
    let store = target.open_read_only()?;
    let opts = MigrateOptions {
        accept_delta_view: args.accept_delta_view,
        reducer: args.reducer.fixed(),
    };
    let report = plan(
        store.as_ref(),
        &args.threads,
        args.all,
        &opts,
        &TerminalProgress::stderr(),
    )?;
    output(global.format(), &report, render::migrate_table)?;
    Ok(if report.refused > 0 {
        Outcome::Refused
    } else {
        Outcome::Clean
    })
}

fn apply(
    global: &GlobalArgs,
    args: &DeltaToFullArgs,
    target: &Target,
    discovered: Option<&crate::config::Discovered>,
) -> Result<Outcome, Error> {
    let opts = MigrateOptions {
        accept_delta_view: args.accept_delta_view,
        reducer: args.reducer.fixed(),
    };
    let progress = TerminalProgress::stderr();
    let events = render::write_event;
    let run = RunOptions {
        jobs: usize::from(args.jobs),
        backup: args.backup.as_deref(),
        phase: "converting threads",
        progress: &progress,
        events: &events,
    };
    let report: MigrateReport = super::write::with_connections(
        target,
        args.jobs,
        args.backup.is_some(),
        |c| crate::migrate::apply(c, &args.threads, args.all, &opts, &run),
        |c| crate::migrate::apply(c, &args.threads, args.all, &opts, &run),
    )?;
    output(global.format(), &report, render::migrate_table)?;
    if report.converted > 0 {
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
