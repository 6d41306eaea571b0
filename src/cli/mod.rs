//! Command-line interface: clap definitions and the dispatch into the library. One file
//! per command; `main.rs` only parses, calls [`run`] and maps errors to exit codes.

mod audit;
pub mod bench;
mod copy;
mod deerflow;
mod delete;
mod diff;
mod full_to_delta;
pub mod help;
mod inspect;
mod lineage;
mod maintain;
mod meta;
mod migrate;
mod prune;
mod reclaim;
mod report;
mod verify;

use crate::render::Format;
use dfck_core::error::Error;
use dfck_core::outcome::Outcome;
use dfck_core::target::Target;

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
    /// Output format: tables for people; one JSON document; NDJSON (one thread, checkpoint,
    /// finding or summary per line); CSV of the flat rows (summary threads, thread
    /// checkpoints, findings, write reports' threads, bench summaries); OpenMetrics text of
    /// the store summary (`dfck inspect` only) for node_exporter's textfile collector.
    #[arg(long, value_enum, default_value_t = FormatArg::Table, global = true)]
    pub format: FormatArg,
    /// Indent the JSON (with --format json).
    #[arg(long, global = true)]
    pub pretty: bool,
    /// Leave out the header line of tables and CSV.
    #[arg(long, global = true)]
    pub no_headers: bool,
    /// Color severities and status words in tables: auto (when stdout is a terminal and
    /// NO_COLOR is unset), always or never. JSON and CSV are never colored.
    #[arg(long, value_enum, default_value_t = ColorArg::Auto, global = true, value_name = "WHEN")]
    pub color: ColorArg,
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
    /// The AES key of LangGraph's EncryptedSerializer, to read and write `+aes` values: a
    /// file of exactly 16, 24 or 32 bytes (one trailing newline ignored). Default: the
    /// LANGGRAPH_AES_KEY variable, as LangGraph reads it. The key is never printed.
    #[arg(long, global = true, value_name = "PATH")]
    pub aes_key_file: Option<std::path::PathBuf>,
    /// Where `db` came from (`--db` or `DFCK_DB`), for error messages; set by
    /// [`help::parse`].
    #[arg(skip)]
    pub db_origin: Option<&'static str>,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Human-readable tables.
    Table,
    /// One JSON document on stdout.
    Json,
    /// One JSON row per line.
    Ndjson,
    /// Comma-separated flat rows.
    Csv,
    /// OpenMetrics text of the store summary (`dfck inspect` without a thread only), for
    /// node_exporter's textfile collector.
    Openmetrics,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    /// When stdout is a terminal and NO_COLOR is unset.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
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
    pub fn fixed(self) -> Option<dfck_core::materialize::Reducer> {
        match self {
            ReducerArg::Auto => None,
            ReducerArg::Deerflow => Some(dfck_core::materialize::Reducer::Deerflow),
            ReducerArg::Langgraph => Some(dfck_core::materialize::Reducer::Langgraph),
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
    /// List every class and method the stored values would make LangGraph import, classified
    /// for strict mode (safe, needs allowlist, never allowed), and the allowlist it needs.
    Audit(audit::AuditArgs),
    /// Walk a thread's parent chain to the root, or draw its whole tree (--tree).
    Lineage(lineage::LineageArgs),
    /// Plan the conversion of delta threads to full mode (dry run).
    Migrate(migrate::MigrateArgs),
    /// Delete what no resume, regenerate or branch needs (dry run unless --apply).
    Prune(prune::PruneArgs),
    /// Delete threads the way DeerFlow does: its reservation, the checkpoints and the thread
    /// list entry in one transaction, its history cache and files (--erase: every row of the
    /// thread); a dry run unless --apply.
    Delete(delete::DeleteArgs),
    /// Give the space of deleted rows back: VACUUM a SQLite store (or copy it compacted with
    /// --into), VACUUM (ANALYZE) a PostgreSQL one (dry run without --apply).
    Reclaim(reclaim::ReclaimArgs),
    /// Run a retention policy end to end: prune and delete by age, convert large full-mode
    /// threads, reclaim past a threshold, verify; one sweeper at a time (dry run unless
    /// --apply).
    Maintain(maintain::MaintainArgs),
    /// Copy threads into another store (SQLite or PostgreSQL), verified; a dry run unless --apply.
    #[command(
        after_help = "LangGraph's checkpoints and writes are copied in the target's own layout. DeerFlow's own tables go with them: each thread's rows (threads_meta, runs, run_events, feedback, …) in the thread's transaction, and with --all every other DeerFlow row (users, agents, channels, …) first; the target must hold DeerFlow's schema at the source's alembic revision (start DeerFlow once against it), or pass --checkpoints-only. docs/copy.md. Exit 1 when a thread is refused (the target keeps none of its rows)."
    )]
    Copy(copy::CopyArgs),
    /// Benchmarks: paired full/delta channel and production cases, and their summaries.
    Bench(bench::BenchArgs),
    /// Show what changed between two checkpoints' states (exit 1 when they differ).
    Diff(diff::DiffArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish).
    Completions(meta::CompletionsArgs),
    /// Print dfck's man page (roff), or write one page per command with --dir.
    Manpage(meta::ManpageArgs),
    /// Explain a finding code: what it means and what to do.
    Explain(meta::ExplainArgs),
}

impl GlobalArgs {
    fn format(&self) -> Format {
        match self.format {
            FormatArg::Table => Format::Table,
            FormatArg::Json => Format::Json,
            FormatArg::Ndjson => Format::Ndjson,
            FormatArg::Csv => Format::Csv,
            FormatArg::Openmetrics => Format::Openmetrics,
        }
    }

    /// The output style these options ask for.
    fn style(&self) -> crate::render::Style {
        use std::io::IsTerminal;
        let color = match self.color {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::stdout().is_terminal()
            }
        };
        crate::render::Style {
            pretty: self.pretty,
            headers: !self.no_headers,
            color: color && self.format == FormatArg::Table,
        }
    }

    /// The store: `--db` / `DFCK_DB`, else found from a DeerFlow config (which file and which
    /// store are printed on stderr); the discovery result says the configured channel mode.
    pub fn resolve(&self) -> Result<(Target, Option<dfck_core::config::Discovered>), Error> {
        let with_schema = |target: Target| match (target, &self.pg_schema) {
            (Target::Postgres { url, .. }, Some(s)) => Target::Postgres {
                url,
                schema: Some(s.clone()),
            },
            (t, _) => t,
        };
        if let Some(db) = self.db.as_ref().filter(|d| !d.trim().is_empty()) {
            let target = Target::parse(db).map_err(|e| match self.db_origin {
                Some(origin) => Error::Usage(format!("{origin}: {e}")),
                None => e.into(),
            })?;
            return Ok((with_schema(target), None));
        }
        let cwd = std::env::current_dir()?;
        let env = |k: &str| std::env::var(k).ok();
        let found = dfck_core::config::discover(&dfck_core::config::DiscoverOptions {
            config: self.config.as_deref(),
            deerflow_cwd: self.deerflow_cwd.as_deref(),
            env_file: self.env_file.as_deref(),
            cwd: &cwd,
            env: &env,
        })
        .map_err(with_config_line)?;
        let Some(target) = found.target.clone().map(with_schema) else {
            return Err(Error::Usage(format!(
                "config {} selects the in-memory checkpointer ({}): the store lives in DeerFlow's process memory and there is nothing on disk to inspect",
                found.config_path.display(),
                if found.source == dfck_core::config::SOURCE_LEGACY {
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
        let legacy_note = if found.source == dfck_core::config::SOURCE_LEGACY {
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

/// A config error about a key names the file's line holding it (`config.yaml:12`).
fn with_config_line(e: dfck_core::config::ConfigError) -> dfck_core::config::ConfigError {
    use dfck_core::config::{ConfigError, line_of_key};
    let at = |path: &str, key: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| line_of_key(&text, key))
            .map(|n| format!("{path}:{n}"))
            .unwrap_or_else(|| path.to_owned())
    };
    match e {
        ConfigError::Invalid { path, key, reason } => ConfigError::Invalid {
            path: at(&path, &key),
            key,
            reason,
        },
        ConfigError::MissingEnv {
            path,
            var,
            key,
            env_file,
        } => ConfigError::MissingEnv {
            path: at(&path, &key),
            var,
            key,
            env_file,
        },
        ConfigError::StoreMissing {
            path,
            how,
            config,
            hint,
        } => ConfigError::StoreMissing {
            config: at(&config, how.split_whitespace().next().unwrap_or_default()),
            path,
            how,
            hint,
        },
        other => other,
    }
}

/// Runs a parsed command line; returns how it ended. An error about the store named by
/// `--db`/`DFCK_DB` says which of the two named it.
pub fn run(cli: Cli) -> Result<Outcome, crate::error::Error> {
    crate::render::set_style(cli.global.style());
    install_aes_key(&cli.global)?;
    let shown = cli
        .global
        .db
        .as_deref()
        .and_then(|d| Target::parse(d).ok())
        .map(|t| t.display());
    run_command(&cli).map_err(|e| match (e, &shown, cli.global.db_origin) {
        (
            crate::error::Error::Core(Error::Store(dfck_core::error::StoreError::Open {
                path,
                reason,
            })),
            Some(shown),
            Some(origin),
        ) if path.starts_with(shown.as_str()) => Error::Store(dfck_core::error::StoreError::Open {
            path: format!("{path} (from {origin})"),
            reason,
        })
        .into(),
        (e, _, _) => e,
    })
}

/// Installs the EncryptedSerializer key for this process: `--aes-key-file`, else a set,
/// non-empty `LANGGRAPH_AES_KEY`. A key of the wrong length is a usage error naming its
/// source (never its bytes).
fn install_aes_key(global: &GlobalArgs) -> Result<(), Error> {
    use dfck_core::codec::aes::{AesKey, KEY_ENV, install_key};
    let key = match &global.aes_key_file {
        Some(path) => Some(AesKey::from_file(path)),
        None => match std::env::var_os(KEY_ENV) {
            Some(v) if !v.is_empty() => Some(match v.into_string() {
                Ok(s) => AesKey::from_env_value(&s),
                Err(raw) => {
                    use std::os::unix::ffi::OsStringExt;
                    AesKey::new(raw.into_vec(), KEY_ENV)
                }
            }),
            _ => None,
        },
    };
    if let Some(key) = key {
        install_key(key.map_err(|e| Error::Usage(e.to_string()))?);
    }
    Ok(())
}

/// `--encrypt-all`: needs the key.
pub(crate) fn encrypt_all(on: bool) -> Result<(), Error> {
    if on && dfck_core::codec::aes::key().is_none() {
        return Err(Error::Usage(format!(
            "--encrypt-all needs the AES key: set {} or pass --aes-key-file",
            dfck_core::codec::aes::KEY_ENV
        )));
    }
    dfck_core::codec::aes::set_encrypt_all(on);
    Ok(())
}

/// The threads a command selects: the named ones, every thread (`all`), or with `--user` the
/// threads that user owns in DeerFlow's thread list (resolved on a read-only look at the
/// store). Returns (threads, all).
pub(crate) fn select_threads(
    target: &Target,
    threads: &[String],
    all: bool,
    user: Option<&str>,
) -> Result<(Vec<String>, bool), Error> {
    match user {
        None => Ok((threads.to_vec(), all)),
        Some(u) => {
            let store = target.open_read_only()?;
            Ok((
                crate::commands::deerflow_view::user_threads(store.as_ref(), u)?,
                false,
            ))
        }
    }
}

/// The command's name as `pg_stat_activity` shows it (`dfck <name>`).
fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Inspect(_) => "inspect",
        Command::Verify(_) => "verify",
        Command::Audit(_) => "audit",
        Command::Lineage(_) => "lineage",
        Command::Migrate(m) => match m.direction {
            migrate::Direction::DeltaToFull(_) => "migrate delta-to-full",
            migrate::Direction::FullToDelta(_) => "migrate full-to-delta",
        },
        Command::Prune(_) => "prune",
        Command::Delete(_) => "delete",
        Command::Reclaim(_) => "reclaim",
        Command::Maintain(_) => "maintain",
        Command::Copy(_) => "copy",
        Command::Bench(_) => "bench",
        Command::Diff(_) => "diff",
        Command::Completions(_) => "completions",
        Command::Manpage(_) => "manpage",
        Command::Explain(_) => "explain",
    }
}

fn run_command(cli: &Cli) -> Result<Outcome, crate::error::Error> {
    dfck_core::store::postgres::set_command(command_name(&cli.command));
    Ok(match &cli.command {
        Command::Inspect(args) => inspect::run(&cli.global, args)?,
        Command::Verify(args) => verify::run(&cli.global, args)?,
        Command::Audit(args) => audit::run(&cli.global, args)?,
        Command::Lineage(args) => lineage::run(&cli.global, args)?,
        Command::Migrate(args) => migrate::run(&cli.global, args)?,
        Command::Prune(args) => prune::run(&cli.global, args)?,
        Command::Delete(args) => delete::run(&cli.global, args)?,
        Command::Reclaim(args) => reclaim::run(&cli.global, args)?,
        Command::Maintain(args) => maintain::run(&cli.global, args)?,
        Command::Copy(args) => copy::run(&cli.global, args)?,
        Command::Bench(args) => bench::run(&cli.global, args)?,
        Command::Diff(args) => diff::run(&cli.global, args)?,
        Command::Completions(args) => meta::completions(args)?,
        Command::Manpage(args) => meta::manpage(args)?,
        Command::Explain(args) => meta::explain(&cli.global, args)?,
    })
}
