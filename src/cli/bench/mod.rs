//! `dfck bench channels|production|summarize`: flags and dispatch, one file per subcommand.
//! The benchmarks themselves are the library [`crate::bench`]; each command returns an
//! [`Outcome`].

mod channels;
mod production;
mod summarize;

use super::GlobalArgs;
use crate::error::Error;
use clap::{Args, Subcommand};
use dfck_core::outcome::Outcome;

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

/// The PostgreSQL server for `--backends postgres`, like every command's store: `--pg-url`
/// (the bench commands' alias of `--db`), else `--db` / `DFCK_DB`, else the store of an
/// explicit `--config`, else `TEST_POSTGRES_URI`. `None` when none is given; an error when the
/// one given is not PostgreSQL and `needed`.
fn pg_server(
    global: &GlobalArgs,
    pg_url: Option<&str>,
    needed: bool,
) -> Result<Option<String>, Error> {
    use dfck_core::target::Target;
    let given = |v: Option<&str>| {
        v.map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let (text, origin) = if let Some(u) = given(pg_url) {
        (Some(u), "--pg-url")
    } else if let Some(u) = given(global.db.as_deref()) {
        (Some(u), "--db")
    } else if global.config.is_some() {
        let (target, _) = global.resolve()?;
        match target {
            Target::Postgres { url, .. } => (Some(url), "--config"),
            other if needed => {
                return Err(Error::usage(format!(
                    "--backends postgres needs a PostgreSQL server; the config's store is {}",
                    other.display()
                )));
            }
            _ => (None, "--config"),
        }
    } else {
        (
            given(std::env::var("TEST_POSTGRES_URI").ok().as_deref()),
            "TEST_POSTGRES_URI",
        )
    };
    let Some(text) = text else {
        if needed {
            return Err(Error::usage(
                "--backends postgres needs a PostgreSQL server: pass --db URL (or --pg-url), set DFCK_DB, or set TEST_POSTGRES_URI",
            ));
        }
        return Ok(None);
    };
    match Target::parse(&text)? {
        Target::Postgres { url, .. } => Ok(Some(url)),
        other if needed => Err(Error::usage(format!(
            "{origin} must name a PostgreSQL server (postgresql://… or a keyword DSN) for --backends postgres, got {}",
            other.display()
        ))),
        _ => Ok(None),
    }
}

/// Prints a worker's row as one compact JSON line on stdout and ends like the worker: `Clean`
/// (0), `Failed` (1), or [`dfck_bench::error::BenchError::BadCase`] (2) for an unusable case.
fn print_worker_row(out: dfck_bench::worker::WorkerOutput) -> Result<Outcome, Error> {
    crate::render::bench::print_worker_row(&out.row);
    match out.bad_case {
        Some(e) => Err(e.into()),
        None => Ok(out.outcome),
    }
}
