//! `dfck migrate delta-to-full [THREAD …] [--all]` (the plan; `--apply` is not built yet).

use super::{GlobalArgs, ReducerArg, output};
use crate::error::{EXIT_FINDINGS, EXIT_OK, Error};
use crate::migrate::{MigrateOptions, plan};
use crate::render::{self, TerminalProgress};
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
}

/// Arguments of `dfck migrate delta-to-full`.
#[derive(Debug, Args)]
pub struct DeltaToFullArgs {
    /// Threads to convert.
    pub threads: Vec<String>,
    /// Every thread of the store.
    #[arg(long, conflicts_with = "threads")]
    pub all: bool,
    /// Write the conversion (not available yet: this version plans only).
    #[arg(long)]
    pub apply: bool,
    /// Convert contaminated delta forks to exactly what delta mode shows.
    #[arg(long)]
    pub accept_delta_view: bool,
    /// SQLite: write a consistent copy here before converting (with --apply).
    #[arg(long, value_name = "PATH")]
    pub backup: Option<std::path::PathBuf>,
    /// Messages reducer (accepted for parity; `auto` follows the DeerFlow marker).
    #[arg(long, value_enum, default_value_t = ReducerArg::Auto)]
    pub reducer: ReducerArg,
}

/// Runs `dfck migrate`: exit 1 when a thread is refused.
pub fn run(global: &GlobalArgs, args: &MigrateArgs) -> Result<i32, Error> {
    let Direction::DeltaToFull(args) = &args.direction;
    if args.apply {
        return Err(Error::Usage(
            "--apply is not available in this version of dfck: the conversion itself is not built yet; run without --apply for the plan".into(),
        ));
    }
    if args.threads.is_empty() && !args.all {
        return Err(Error::Usage(
            "name the threads to convert, or pass --all".into(),
        ));
    }
    let (target, _) = global.resolve()?;
    let store = target.open_read_only()?;
    let opts = MigrateOptions {
        accept_delta_view: args.accept_delta_view,
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
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}
