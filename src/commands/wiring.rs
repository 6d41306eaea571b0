//! How a write command reaches its store: the request every write command takes
//! ([`WriteRequest`]), its dry run on a read-only store, and the connections its `--apply`
//! hands the write engine, by backend — one place for the per-backend rules of `--jobs` and
//! `--backup`.

use dfck_core::error::Error;
use dfck_core::progress::Progress;
use dfck_core::store::Store;
use dfck_core::store::postgres::PostgresStore;
use dfck_core::store::sqlite::SqliteStore;
use dfck_core::target::Target;
use dfck_core::write::{Connections, RunOptions, ThreadCache, WriteEvent};
use std::path::Path;

/// What a write command is asked to do, beside its own options.
pub struct WriteRequest<'a> {
    /// The store.
    pub target: &'a Target,
    /// The threads named (none: every thread, with `all`).
    pub threads: &'a [String],
    /// Every thread of the store.
    pub all: bool,
    /// Write (`--apply`); otherwise a dry run.
    pub apply: bool,
    /// Threads at once (`--jobs`, PostgreSQL).
    pub jobs: u16,
    /// `--backup PATH` (SQLite, with `--apply`).
    pub backup: Option<&'a Path>,
    /// Progress: one unit per thread.
    pub progress: &'a (dyn Progress + Sync),
    /// What the engine reports while it runs (the backup written, a WAL left).
    pub events: &'a (dyn Fn(WriteEvent<'_>) + Sync),
    /// DeerFlow's history cache, purged of every thread the command changes.
    pub cache: Option<&'a (dyn ThreadCache + Sync)>,
}

impl WriteRequest<'_> {
    /// The threads the engine works on: the named ones, or every thread (`&[]`).
    pub fn selected(&self) -> &[String] {
        if self.all { &[] } else { self.threads }
    }

    /// The dry run on the store opened read-only, or the engine's run over the backend's
    /// connections (`phase` names the progress phase: "pruning threads").
    pub fn dry_or_apply<R>(
        &self,
        phase: &str,
        dry: impl FnOnce(&dyn Store) -> Result<R, Error>,
        sqlite: impl FnOnce(Connections<'_, SqliteStore>, &RunOptions<'_>) -> Result<R, Error>,
        postgres: impl FnOnce(Connections<'_, PostgresStore>, &RunOptions<'_>) -> Result<R, Error>,
    ) -> Result<R, Error> {
        if !self.apply {
            if self.backup.is_some() {
                return Err(Error::Usage("--backup goes with --apply".into()));
            }
            let store = self.target.open_read_only()?;
            return dry(store.as_ref());
        }
        let run = RunOptions {
            jobs: usize::from(self.jobs),
            backup: self.backup,
            phase,
            progress: self.progress,
            events: self.events,
            cache: self.cache,
            exact_threads: false,
        };
        with_connections(
            self.target,
            self.jobs,
            self.backup.is_some(),
            |c| sqlite(c, &run),
            |c| postgres(c, &run),
        )
    }
}

/// Opens the engine's connections on `target` and runs the backend's half of a command.
/// SQLite has one writer at a time (no `--jobs`) and a spare connection that copies WAL
/// frames into the file in the background; PostgreSQL opens one connection per job and
/// has no `--backup` (pg_dump does that).
pub fn with_connections<R>(
    target: &Target,
    jobs: u16,
    backup: bool,
    sqlite: impl FnOnce(Connections<'_, SqliteStore>) -> Result<R, Error>,
    postgres: impl FnOnce(Connections<'_, PostgresStore>) -> Result<R, Error>,
) -> Result<R, Error> {
    match target {
        Target::Sqlite(path) => {
            if jobs > 1 {
                return Err(Error::Usage(
                    "--jobs applies to PostgreSQL stores (SQLite has one writer at a time)".into(),
                ));
            }
            let store = SqliteStore::open_read_write(path)?;
            let open = || SqliteStore::open_read_write(path);
            sqlite(Connections {
                first: &store,
                open: &open,
                spare: SqliteStore::open_read_write(path).ok(),
            })
        }
        Target::Postgres { url, schema } => {
            if backup {
                return Err(Error::Usage(
                    "--backup is for SQLite stores; back a PostgreSQL store up with pg_dump first"
                        .into(),
                ));
            }
            let open = || PostgresStore::open_read_write(url, schema.as_deref());
            let first = open()?;
            postgres(Connections {
                first: &first,
                open: &open,
                spare: None,
            })
        }
    }
}
