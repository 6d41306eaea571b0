//! `dfck copy --to TARGET [THREAD …|--all] [--apply]`: the plan, or the copy.

use super::{GlobalArgs, output};
use crate::copy::{CopyConn, CopyOptions, CopyReport, TargetConn};
use crate::error::{Error, StoreError};
use crate::outcome::Outcome;
use crate::render::{self, TerminalProgress};
use crate::store::postgres::{PostgresStore, TargetState};
use crate::store::sqlite::SqliteStore;
use crate::store::{Backend, Store};
use crate::target::Target;
use crate::write::{Connections, RunOptions, WriteEvent};
use clap::Args;

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
}

/// Opens the source read-only inside one read snapshot.
fn open_source(t: &Target) -> Result<Box<dyn Store + Send>, StoreError> {
    match t {
        Target::Sqlite(p) => {
            let s = SqliteStore::open_read_only(p)?;
            s.begin_snapshot()?;
            Ok(Box::new(s))
        }
        Target::Postgres { url, schema } => Ok(Box::new(PostgresStore::open_read_only(
            url,
            schema.as_deref(),
        )?)),
    }
}

fn same_store(a: &Target, b: &Target) -> bool {
    match (a, b) {
        (Target::Sqlite(x), Target::Sqlite(y)) => {
            x == y
                || crate::store::files::store_file_named(x, y) == Some("the store itself")
                || matches!(
                    (std::fs::canonicalize(x), std::fs::canonicalize(y)),
                    (Ok(p), Ok(q)) if p == q
                )
        }
        _ => a == b,
    }
}

/// Runs `dfck copy`: exit 1 when a thread is refused.
pub fn run(global: &GlobalArgs, args: &CopyArgs) -> Result<Outcome, Error> {
    if args.threads.is_empty() && !args.all {
        return Err(Error::Usage(
            "name the threads to copy, or pass --all".into(),
        ));
    }
    let (source, _) = global.resolve()?;
    let target = match (Target::parse(&args.to)?, &args.to_pg_schema) {
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
    if same_store(&source, &target) {
        return Err(Error::Usage(
            "--to names the source store itself; copy into another store".into(),
        ));
    }
    if let (Target::Sqlite(src), Target::Sqlite(dst)) = (&source, &target) {
        if let Some(which) = crate::store::files::store_file_named(src, dst) {
            return Err(Error::Usage(format!(
                "--to {} is {which}: SQLite would take the copy for the source's own file; copy into another store",
                dst.display()
            )));
        }
    }
    let backend = match target {
        Target::Sqlite(_) => Backend::Sqlite,
        Target::Postgres { .. } => Backend::Postgres,
    };
    if backend == Backend::Sqlite && args.jobs > 1 {
        return Err(Error::Usage(
            "--jobs applies to PostgreSQL targets (SQLite has one writer at a time)".into(),
        ));
    }
    let opts = CopyOptions {
        replace: args.replace,
        target: backend,
    };
    let progress = TerminalProgress::stderr();
    let (threads, created) = if args.apply {
        apply(&source, &target, args, &opts, &progress)?
    } else {
        let src = open_source(&source)?;
        let (dst, created): (Option<Box<dyn Store>>, bool) = match &target {
            Target::Sqlite(p) if !p.exists() => (None, true),
            Target::Postgres { url, schema } => {
                match PostgresStore::prepare_copy_target(url, schema.as_deref(), false)? {
                    TargetState::Empty => (None, true),
                    TargetState::Present => (Some(target.open_read_only()?), false),
                }
            }
            t => (Some(t.open_read_only()?), false),
        };
        let threads = crate::copy::plan(
            src.as_ref(),
            dst.as_deref(),
            &args.threads,
            args.all,
            &opts,
            &progress,
        )?;
        (threads, created)
    };
    let report = CopyReport::new(
        !args.apply,
        source.display(),
        target.display(),
        backend,
        created,
        threads,
    );
    output(global.format(), &report, render::copy_table)?;
    Ok(if report.refused > 0 {
        Outcome::Refused
    } else {
        Outcome::Clean
    })
}

fn apply(
    source: &Target,
    target: &Target,
    args: &CopyArgs,
    opts: &CopyOptions,
    progress: &TerminalProgress,
) -> Result<(Vec<crate::copy::CopyThread>, bool), Error> {
    // Every worker reads the first connection's snapshot: PostgreSQL exports it. (A SQLite
    // read transaction cannot be shared; each worker holds its own.)
    let (first_source, snapshot): (Box<dyn Store + Send>, Option<String>) = match source {
        Target::Postgres { url, schema } if args.jobs > 1 => {
            let s = PostgresStore::open_read_only(url, schema.as_deref())?;
            let id = s.export_snapshot()?;
            (Box::new(s), Some(id))
        }
        _ => (open_source(source)?, None),
    };
    // Named threads must exist in the source before the target is set up.
    if !args.all {
        crate::store::select_threads(first_source.as_ref(), &args.threads)?;
    }
    let created = match target {
        Target::Sqlite(p) if !p.exists() => {
            SqliteStore::create_langgraph(p)?;
            true
        }
        Target::Sqlite(_) => false,
        Target::Postgres { url, schema } => {
            PostgresStore::prepare_copy_target(url, schema.as_deref(), true)? == TargetState::Empty
        }
    };
    let open_target = || -> Result<TargetConn, StoreError> {
        Ok(match target {
            Target::Sqlite(p) => TargetConn::Sqlite(SqliteStore::open_read_write(p)?),
            Target::Postgres { url, schema } => {
                TargetConn::Postgres(PostgresStore::open_read_write(url, schema.as_deref())?)
            }
        })
    };
    let first = CopyConn {
        source: first_source,
        target: open_target()?,
    };
    let open = || -> Result<CopyConn, StoreError> {
        let source = match (source, &snapshot) {
            (Target::Postgres { url, schema }, Some(id)) => Box::new(
                PostgresStore::open_read_only_at(url, schema.as_deref(), id)?,
            ) as Box<dyn Store + Send>,
            _ => open_source(source)?,
        };
        Ok(CopyConn {
            source,
            target: open_target()?,
        })
    };
    let events = |e: WriteEvent<'_>| {
        if let WriteEvent::WalLeft(left) = e {
            render::note(&format!(
                "dfck: warning: another connection holds a read transaction on the target, so its WAL could not be truncated; {:.1} MiB of WAL are left (everything committed is durable in it)",
                left.bytes as f64 / f64::from(1u32 << 20)
            ));
        }
    };
    let run = RunOptions {
        jobs: usize::from(args.jobs),
        backup: None,
        phase: "copying threads",
        progress,
        events: &events,
    };
    let conns = Connections {
        first: &first,
        open: &open,
        spare: None,
    };
    let threads = crate::copy::apply(conns, &args.threads, args.all, opts, &run)?;
    Ok((threads, created))
}
