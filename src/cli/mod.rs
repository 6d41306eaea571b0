//! Command-line interface: clap definitions and the dispatch into the library. One file
//! per command; `main.rs` only parses, calls [`run`] and maps errors to exit codes.

mod inspect;

use crate::error::Error;
use crate::render::Format;
use crate::target::Target;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::Write;

/// Inspect, verify and migrate LangGraph / DeerFlow checkpoint stores, without Python.
#[derive(Debug, Parser)]
#[command(name = "dfck", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Options shared by every command.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// The store: a SQLite file path, sqlite:///abs/path.db, or postgresql://… URL.
    #[arg(long, env = "DFCK_DB", global = true, value_name = "TARGET")]
    pub db: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Table, global = true)]
    pub format: FormatArg,
}

/// `--format`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// Human-readable tables.
    Table,
    /// One JSON document on stdout.
    Json,
}

/// `--reducer`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ReducerArg {
    /// DeerFlow's reducer when the thread carries DeerFlow's mode marker, else LangGraph's.
    Auto,
    /// DeerFlow's merge_message_writes.
    Deerflow,
    /// LangGraph's _messages_delta_reducer.
    Langgraph,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Summarize a store, list one thread's checkpoints, or show the state at a checkpoint.
    Inspect(inspect::InspectArgs),
}

impl GlobalArgs {
    fn format(&self) -> Format {
        match self.format {
            FormatArg::Table => Format::Table,
            FormatArg::Json => Format::Json,
        }
    }

    fn target(&self) -> Result<Target, Error> {
        match &self.db {
            Some(db) => Ok(Target::parse(db)?),
            None => Err(Error::Usage(
                "no store given: pass --db TARGET or set DFCK_DB".into(),
            )),
        }
    }
}

/// Writes command output to stdout; a closed pipe (`dfck … | head`) ends quietly.
pub(crate) fn emit(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> Result<i32, Error> {
    match &cli.command {
        Command::Inspect(args) => inspect::run(&cli.global, args),
    }
}
