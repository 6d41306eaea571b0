//! How a write command reaches its store: the request every write command takes
//! ([`WriteRequest`]), its dry run on a read-only store, and the connections its `--apply`
//! hands the write engine, by backend — one place for the per-backend rules of `--jobs` and
//! `--backup`.

use dfck_core::error::Error;
use dfck_core::progress::Progress;
use dfck_core::store::ReadOnly;
use dfck_core::store::Store;
use dfck_core::store::postgres::PostgresStore;
use dfck_core::store::sqlite::SqliteStore;
use dfck_core::target::Target;
use dfck_core::write::{Connections, RunOptions, ThreadCache, ThreadJob, ThreadPlan, WriteEvent};
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

/// A sink for the reports a write command streams ([`WriteRequest::dry_or_apply_each`]).
pub type Sink<'a, R> = &'a mut (dyn FnMut(R) -> Result<(), Error> + Send);

/// A report sink handed to whichever of several closures runs (one backend's half of a
/// command): each takes it when it does.
pub struct OneSink<'a, R>(std::sync::Mutex<Sink<'a, R>>);

impl<'a, R> OneSink<'a, R> {
    /// Shares `sink`.
    pub fn new(sink: Sink<'a, R>) -> Self {
        OneSink(std::sync::Mutex::new(sink))
    }

    /// The sink, for the closure that runs.
    pub fn take(&self) -> Result<std::sync::MutexGuard<'_, Sink<'a, R>>, Error> {
        self.0
            .lock()
            .map_err(|_| Error::Render("a report sink panicked".into()))
    }
}

impl WriteRequest<'_> {
    /// [`WriteRequest::dry_or_apply`] for a command whose thread reports stream: whichever
    /// half runs hands them to `sink` (the write engine's `dry_run_each` or `run_each`).
    pub fn dry_or_apply_each<R>(
        &self,
        phase: &str,
        sink: Sink<'_, R>,
        dry: impl FnOnce(&dyn Store, Sink<'_, R>) -> Result<(), Error>,
        sqlite: impl FnOnce(
            Connections<'_, SqliteStore>,
            &RunOptions<'_>,
            Sink<'_, R>,
        ) -> Result<(), Error>,
        postgres: impl FnOnce(
            Connections<'_, PostgresStore>,
            &RunOptions<'_>,
            Sink<'_, R>,
        ) -> Result<(), Error>,
    ) -> Result<(), Error> {
        // Only one half runs; each takes the sink when it does.
        let shared = OneSink::new(sink);
        self.dry_or_apply(
            phase,
            |store| dry(store, &mut **shared.take()?),
            |c, run| sqlite(c, run, &mut **shared.take()?),
            |c, run| postgres(c, run, &mut **shared.take()?),
        )
    }
}

/// A job the write engine runs on either backend and dry-runs on a read-only store, its
/// thread reports of type `R`.
pub trait EngineJob<R>:
    for<'s> ThreadPlan<ReadOnly<'s>, Report = R>
    + ThreadJob<SqliteStore>
    + ThreadJob<PostgresStore>
    + ThreadPlan<SqliteStore, Report = R>
    + ThreadPlan<PostgresStore, Report = R>
{
}

impl<R, J> EngineJob<R> for J where
    J: for<'s> ThreadPlan<ReadOnly<'s>, Report = R>
        + ThreadJob<SqliteStore>
        + ThreadJob<PostgresStore>
        + ThreadPlan<SqliteStore, Report = R>
        + ThreadPlan<PostgresStore, Report = R>
{
}

/// A report's totals, counted a thread at a time (its threads not held).
pub trait CountsThreads<R> {
    /// Counts one thread's report in.
    fn count(&mut self, r: &R);
}

impl WriteRequest<'_> {
    /// [`WriteRequest::run_job`], each thread's report counted into `report` before it goes
    /// to `sink`: `report` with the totals.
    pub fn run_counted<J, R, T>(
        &self,
        phase: &str,
        job: &J,
        mut report: T,
        sink: Sink<'_, R>,
    ) -> Result<T, Error>
    where
        J: EngineJob<R>,
        R: Send,
        T: CountsThreads<R> + Send,
    {
        let mut counted = |r: R| {
            report.count(&r);
            sink(r)
        };
        self.run_job(phase, job, &mut counted)?;
        Ok(report)
    }

    /// Runs `job` on the request's threads: its dry run on the store opened read-only, or
    /// with `--apply` the engine's run; each thread's report to `sink` in thread order.
    pub fn run_job<J, R>(&self, phase: &str, job: &J, sink: Sink<'_, R>) -> Result<(), Error>
    where
        J: EngineJob<R>,
        R: Send,
    {
        let threads = self.selected();
        self.dry_or_apply_each(
            phase,
            sink,
            |store, sink| {
                // `--jobs N` plans over N read-only connections.
                let open = || self.target.open_read_only();
                let jobs = usize::from(self.jobs);
                dfck_core::write::dry_run_jobs(
                    job,
                    store,
                    &open,
                    jobs,
                    threads,
                    self.progress,
                    sink,
                )
            },
            |c, run, sink| dfck_core::write::run_each(job, c, threads, run, sink),
            |c, run, sink| dfck_core::write::run_each(job, c, threads, run, sink),
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
