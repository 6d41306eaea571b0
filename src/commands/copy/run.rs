//! `dfck copy` as a whole: checking the request, DeerFlow's schema on both sides (before
//! anything is written), the dry run against the target as it is, or the copy over one
//! connection pair per job (the source inside one snapshot, exported to every job on
//! PostgreSQL; the target set up first when it is new).

use super::app::{self, AppSetup};
use super::{
    CopyConn, CopyOptions, CopyPlace, CopyReport, CopyThread, CopyTotals, PlanSides, TargetConn,
    ThreadSink, apply, plan,
};
use crate::commands::wiring::WriteRequest;
use dfck_core::error::{Error, StoreError};
use dfck_core::store::postgres::{PostgresStore, TargetState};
use dfck_core::store::sqlite::SqliteStore;
use dfck_core::store::{Backend, Store};
use dfck_core::target::Target;
use dfck_core::write::{Connections, RunOptions};

/// A copy checked and ready to run: the request, the source open in its snapshot, and what
/// is done with DeerFlow's tables (decided before any thread, so that a report's columns are
/// known before its rows).
pub struct Prepared<'r> {
    req: &'r WriteRequest<'r>,
    to: &'r Target,
    opts: CopyOptions,
    src: Box<dyn Store + Send>,
    setup: AppSetup,
}

/// Checks `dfck copy` (the stores, `--jobs`, DeerFlow's schema on both sides) before
/// anything is read or written: `req.target` is the source, `to` the store copied into
/// (`--backup` does not apply); `checkpoints_only` leaves DeerFlow's tables behind.
pub fn prepare<'r>(
    req: &'r WriteRequest<'r>,
    to: &'r Target,
    replace: bool,
    checkpoints_only: bool,
) -> Result<Prepared<'r>, Error> {
    let source = req.target;
    if same_store(source, to) {
        return Err(Error::Usage(
            "--to names the source store itself; copy into another store".into(),
        ));
    }
    if let (Target::Sqlite(src), Target::Sqlite(dst)) = (source, to) {
        if let Some(which) = dfck_core::store::files::store_file_named(src, dst) {
            return Err(Error::Usage(format!(
                "--to {} is {which}: SQLite would take the copy for the source's own file; copy into another store",
                dst.display()
            )));
        }
    }
    let backend = match to {
        Target::Sqlite(_) => Backend::Sqlite,
        Target::Postgres { .. } => Backend::Postgres,
    };
    if backend == Backend::Sqlite && req.jobs > 1 {
        return Err(Error::Usage(
            "--jobs applies to PostgreSQL targets (SQLite has one writer at a time)".into(),
        ));
    }
    let opts = CopyOptions {
        replace,
        target: backend,
    };
    let src = open_source(source)?;
    let setup = app_setup(src.as_ref(), to, checkpoints_only)?;
    Ok(Prepared {
        req,
        to,
        opts,
        src,
        setup,
    })
}

impl Prepared<'_> {
    /// Runs the copy (or its dry run): the report holds every thread.
    pub fn run(self) -> Result<CopyReport, Error> {
        let mut threads = Vec::new();
        let mut report = self.run_each(&mut |t| {
            threads.push(t);
            Ok(())
        })?;
        report.threads = threads;
        Ok(report)
    }

    /// Whether DeerFlow's own tables are copied (the report's `deerflow` is there).
    pub fn copies_deerflow(&self) -> bool {
        matches!(self.setup, AppSetup::Copy(_))
    }

    /// Runs the copy (or its dry run), each thread's report handed to `sink` in thread
    /// order; the report returned holds the totals, not the threads.
    pub fn run_each(self, sink: ThreadSink<'_>) -> Result<CopyReport, Error> {
        let Prepared {
            req,
            to,
            opts,
            src,
            setup,
        } = self;
        let source = req.target;
        let app = match &setup {
            AppSetup::Copy(a) => Some(a),
            _ => None,
        };
        let mut totals = CopyTotals::default();
        let mut counted = |t: CopyThread| {
            totals.add(&t);
            sink(t)
        };
        let (shared, created) = if req.apply {
            drop(src);
            copy(req, to, &opts, app, &mut counted)?
        } else {
            let (dst, created): (Option<Box<dyn Store>>, bool) = match to {
                Target::Sqlite(p) if SqliteStore::prepare_copy_target(p, false)? => (None, true),
                Target::Postgres { url, schema } => {
                    match PostgresStore::prepare_copy_target(url, schema.as_deref(), false)? {
                        TargetState::Empty => (None, true),
                        TargetState::Present => (Some(to.open_read_only()?), false),
                    }
                }
                t => (Some(t.open_read_only()?), false),
            };
            let app_dst = match app {
                Some(_) => open_app_target(to)?,
                None => None,
            };
            let ids = app::thread_ids(src.as_ref(), app, req.selected())?;
            let sides = PlanSides {
                source: src.as_ref(),
                target: dst.as_deref(),
                app_target: app_dst.as_deref().and_then(|s| s.app_rows()),
            };
            let shared = plan(
                &sides,
                &ids,
                app,
                req.all,
                &opts,
                req.progress,
                &mut counted,
            )?;
            (shared, created)
        };
        let place = CopyPlace {
            source: source.display(),
            target: to.display(),
            target_backend: opts.target,
            target_created: created,
        };
        Ok(CopyReport::of(!req.apply, place, totals, &setup, shared))
    }
}

/// What the copy does with DeerFlow's tables: nothing when the source has none; with
/// `--checkpoints-only`, leaves them; otherwise checks that the target holds DeerFlow's schema
/// at the source's alembic revision (an error, exit 2, before anything is written).
fn app_setup(source: &dyn Store, to: &Target, checkpoints_only: bool) -> Result<AppSetup, Error> {
    let Some(schema) = app::source_schema(source)? else {
        return Ok(AppSetup::Absent);
    };
    if checkpoints_only {
        let mut tables = schema.tables.clone();
        tables.retain(|t| t != "alembic_version");
        return Ok(AppSetup::Left(tables));
    }
    if let Target::Postgres { url, schema } = to {
        // The target's own checks first (a missing schema, another application's tables).
        PostgresStore::prepare_copy_target(url, schema.as_deref(), false)?;
    }
    let target = open_app_target(to)?;
    let copy = app::prepare(source, &schema, target.as_deref(), &to.display())?;
    Ok(AppSetup::Copy(copy))
}

/// A read-only connection to the target's DeerFlow tables, whether or not LangGraph's are
/// there; `None` when the target file does not exist.
fn open_app_target(to: &Target) -> Result<Option<Box<dyn Store>>, StoreError> {
    Ok(match to {
        Target::Sqlite(p) if !p.exists() => None,
        Target::Sqlite(p) => Some(Box::new(SqliteStore::open_app_read_only(p)?)),
        Target::Postgres { url, schema } => Some(Box::new(PostgresStore::open_app_read_only(
            url,
            schema.as_deref(),
        )?)),
    })
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
                || dfck_core::store::files::store_file_named(x, y) == Some("the store itself")
                || matches!(
                    (std::fs::canonicalize(x), std::fs::canonicalize(y)),
                    (Ok(p), Ok(q)) if p == q
                )
        }
        _ => a == b,
    }
}

/// `--apply`: sets the target up when it is new, then the engine's run, each thread's report
/// to `sink`; DeerFlow's shared rows, and whether the target was set up.
fn copy(
    req: &WriteRequest<'_>,
    target: &Target,
    opts: &CopyOptions,
    app: Option<&app::AppCopy>,
    sink: ThreadSink<'_>,
) -> Result<(Option<super::SharedReport>, bool), Error> {
    let source = req.target;
    // Every worker reads the first connection's snapshot: PostgreSQL exports it. (A SQLite
    // read transaction cannot be shared; each worker holds its own.)
    let (first_source, snapshot): (Box<dyn Store + Send>, Option<String>) = match source {
        Target::Postgres { url, schema } if req.jobs > 1 => {
            let s = PostgresStore::open_read_only(url, schema.as_deref())?;
            let id = s.export_snapshot()?;
            (Box::new(s), Some(id))
        }
        _ => (open_source(source)?, None),
    };
    // Named threads must exist in the source before the target is set up.
    let ids = app::thread_ids(first_source.as_ref(), app, req.selected())?;
    let created = match target {
        Target::Sqlite(p) => SqliteStore::prepare_copy_target(p, true)?,
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
    let run = RunOptions {
        jobs: usize::from(req.jobs),
        backup: None,
        phase: "copying threads",
        progress: req.progress,
        events: req.events,
        cache: req.cache,
        exact_threads: false,
    };
    let conns = Connections {
        first: &first,
        open: &open,
        spare: None,
    };
    let shared = apply(conns, &ids, app, req.all, opts, &run, sink)?;
    Ok((shared, created))
}
