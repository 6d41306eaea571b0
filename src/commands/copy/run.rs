//! `dfck copy` as a whole: checking the request, the dry run against the target as it is, or
//! the copy over one connection pair per job (the source inside one snapshot, exported to
//! every job on PostgreSQL; the target set up first when it is new).

use super::{CopyConn, CopyOptions, CopyReport, TargetConn, apply, plan};
use crate::commands::wiring::WriteRequest;
use dfck_core::error::{Error, StoreError};
use dfck_core::store::postgres::{PostgresStore, TargetState};
use dfck_core::store::sqlite::SqliteStore;
use dfck_core::store::{Backend, Store};
use dfck_core::target::Target;
use dfck_core::write::{Connections, RunOptions};

/// Runs `dfck copy`: `req.target` is the source, `to` the store copied into (`--backup` does
/// not apply).
pub fn run(req: &WriteRequest<'_>, to: &Target, replace: bool) -> Result<CopyReport, Error> {
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
    let (threads, created) = if req.apply {
        copy(req, to, &opts)?
    } else {
        let src = open_source(source)?;
        let (dst, created): (Option<Box<dyn Store>>, bool) = match to {
            Target::Sqlite(p) if !p.exists() => (None, true),
            Target::Postgres { url, schema } => {
                match PostgresStore::prepare_copy_target(url, schema.as_deref(), false)? {
                    TargetState::Empty => (None, true),
                    TargetState::Present => (Some(to.open_read_only()?), false),
                }
            }
            t => (Some(t.open_read_only()?), false),
        };
        let threads = plan(
            src.as_ref(),
            dst.as_deref(),
            req.threads,
            req.all,
            &opts,
            req.progress,
        )?;
        (threads, created)
    };
    Ok(CopyReport::new(
        !req.apply,
        source.display(),
        to.display(),
        backend,
        created,
        threads,
    ))
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

/// `--apply`: sets the target up when it is new, then the engine's run.
fn copy(
    req: &WriteRequest<'_>,
    target: &Target,
    opts: &CopyOptions,
) -> Result<(Vec<super::CopyThread>, bool), Error> {
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
    if !req.all {
        dfck_core::store::select_threads(first_source.as_ref(), req.threads)?;
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
    let threads = apply(conns, req.threads, req.all, opts, &run)?;
    Ok((threads, created))
}
