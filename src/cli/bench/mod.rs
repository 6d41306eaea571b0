//! `dfck bench channels|production|summarize`: flags and dispatch, one file per subcommand.
//! The benchmarks themselves are the library [`crate::bench`]; each command returns an
//! [`Outcome`].

mod channels;
mod production;
mod summarize;

use super::GlobalArgs;
use crate::error::Error;
use crate::outcome::Outcome;
use clap::{Args, Subcommand};

/// Arguments of `dfck bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The benchmark.
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Paired full/delta benchmark of the `messages` channel, one child process per case.
    Channels(channels::ChannelsArgs),
    /// Production-shaped full/delta benchmark (DeerFlow turns, state and history reads).
    Production(Box<production::ProductionArgs>),
    /// Pair full/delta rows (DeerFlow v1 or dfck v2 JSONL) and print medians and delta/full ratios.
    Summarize(summarize::SummarizeArgs),
}

/// Runs `dfck bench …`.
pub fn run(global: &GlobalArgs, args: &BenchArgs) -> Result<Outcome, Error> {
    match &args.command {
        BenchCommand::Channels(a) => channels::run(global, a),
        BenchCommand::Production(a) => production::run(global, a),
        BenchCommand::Summarize(a) => summarize::run(global, a),
    }
}

/// Prints a worker's row as one compact JSON line on stdout and ends like the worker: `Clean`
/// (0), `Failed` (1), or [`crate::bench::error::BenchError::BadCase`] (2) for an unusable case.
fn print_worker_row(out: crate::bench::worker::WorkerOutput) -> Result<Outcome, Error> {
    crate::render::bench::print_worker_row(&out.row);
    match out.bad_case {
        Some(e) => Err(e.into()),
        None => Ok(out.outcome),
    }
}
