//! Command-line interface: clap definitions and the dispatch into the library. One file
//! per command; `main.rs` only parses, calls [`run`] and maps errors to exit codes.

pub mod bench;
mod full_to_delta;
mod inspect;
mod lineage;
mod migrate;
mod verify;

use crate::error::Error;
use crate::outcome::Outcome;
use crate::render::Format;
use crate::target::Target;

/// Output plumbing for the command files (`super::emit`, `super::output`).
pub(crate) use crate::render::{emit, output};
use clap::{Args, Parser, Subcommand, ValueEnum};

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
    /// DeerFlow config.yaml to find the store from (without --db; default:
    /// DEER_FLOW_CONFIG_PATH, else config.yaml in DEER_FLOW_PROJECT_ROOT or the current directory).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// The directory DeerFlow runs in, against which database.sqlite_dir resolves (default:
    /// <config dir>/backend when it exists, else the config's directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub deerflow_cwd: Option<std::path::PathBuf>,
    /// A .env file for $VAR values in the config (default: .env beside the config or at the
    /// project root); never overrides variables already set.
    #[arg(long, global = true, value_name = "FILE")]
    pub env_file: Option<std::path::PathBuf>,
    /// PostgreSQL schema (search_path) of the store.
    #[arg(long, global = true, value_name = "NAME")]
    pub pg_schema: Option<String>,
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

impl ReducerArg {
    /// The reducer asked for, or `None` for `auto`.
    pub fn fixed(self) -> Option<crate::materialize::Reducer> {
        match self {
            ReducerArg::Auto => None,
            ReducerArg::Deerflow => Some(crate::materialize::Reducer::Deerflow),
            ReducerArg::Langgraph => Some(crate::materialize::Reducer::Langgraph),
        }
    }
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Summarize a store, list one thread's checkpoints, or show the state at a checkpoint.
    Inspect(inspect::InspectArgs),
    /// Check a store (or threads) for every known way a checkpoint store goes wrong.
    Verify(verify::VerifyArgs),
    /// Walk a thread's parent chain to the root, or draw its whole tree (--tree).
    Lineage(lineage::LineageArgs),
    /// Plan the conversion of delta threads to full mode (dry run).
    Migrate(migrate::MigrateArgs),
    /// Benchmarks: paired full/delta channel and production cases, and their summaries.
    Bench(bench::BenchArgs),
}

impl GlobalArgs {
    fn format(&self) -> Format {
        match self.format {
            FormatArg::Table => Format::Table,
            FormatArg::Json => Format::Json,
        }
    }

    /// The store: `--db` / `DFCK_DB`, else found from a DeerFlow config (which file and which
    /// store are printed on stderr); the discovery result says the configured channel mode.
    pub fn resolve(&self) -> Result<(Target, Option<crate::config::Discovered>), Error> {
        let with_schema = |target: Target| match (target, &self.pg_schema) {
            (Target::Postgres { url, .. }, Some(s)) => Target::Postgres {
                url,
                schema: Some(s.clone()),
            },
            (t, _) => t,
        };
        if let Some(db) = self.db.as_ref().filter(|d| !d.trim().is_empty()) {
            return Ok((with_schema(Target::parse(db)?), None));
        }
        let cwd = std::env::current_dir()?;
        let env = |k: &str| std::env::var(k).ok();
        let found = crate::config::discover(&crate::config::DiscoverOptions {
            config: self.config.as_deref(),
            deerflow_cwd: self.deerflow_cwd.as_deref(),
            env_file: self.env_file.as_deref(),
            cwd: &cwd,
            env: &env,
        })?;
        let Some(target) = found.target.clone().map(with_schema) else {
            return Err(Error::Usage(format!(
                "config {} selects the in-memory checkpointer ({}): the store lives in DeerFlow's process memory and there is nothing on disk to inspect",
                found.config_path.display(),
                if found.source == crate::config::SOURCE_LEGACY {
                    "legacy checkpointer: section"
                } else {
                    "database.backend: memory"
                },
            )));
        };
        let env_note = match &found.env_file {
            Some(f) => format!(", env {}", f.display()),
            None => String::new(),
        };
        let legacy_note = if found.source == crate::config::SOURCE_LEGACY {
            " [legacy checkpointer: section]"
        } else {
            ""
        };
        crate::render::note(&format!(
            "dfck: config {} ({}){env_note} \u{2192} {} {}{legacy_note}",
            found.config_path.display(),
            found.config_rule,
            found.backend,
            target.display(),
        ));
        Ok((target, Some(found)))
    }
}

/// Runs a parsed command line; returns how it ended.
pub fn run(cli: Cli) -> Result<Outcome, Error> {
    match &cli.command {
        Command::Inspect(args) => inspect::run(&cli.global, args),
        Command::Verify(args) => verify::run(&cli.global, args),
        Command::Lineage(args) => lineage::run(&cli.global, args),
        Command::Migrate(args) => migrate::run(&cli.global, args),
        Command::Bench(args) => bench::run(&cli.global, args),
    }
}
