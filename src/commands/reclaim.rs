//! `reclaim`: gives the space of deleted rows back. SQLite: a `TRUNCATE` checkpoint of the
//! WAL, then `VACUUM` in place (or `VACUUM INTO` a compacted copy, the original untouched);
//! refused when the disk cannot hold the copy `VACUUM` builds or when another process holds
//! the database. PostgreSQL: `VACUUM (ANALYZE)` of the store's tables (space becomes
//! reusable inside them; returning it to the OS needs `VACUUM FULL` or `pg_repack`). A dry
//! run by default. Returns a report value; rendering lives in `render`. See docs/space.md.

use dfck_core::error::{Error, StoreError};
use dfck_core::failpoint::Failpoints;
use dfck_core::store::postgres::{PgVacuumEnd, PostgresStore};
use dfck_core::store::space::{SqliteSpace, StoreSpace};
use dfck_core::store::sqlite::SqliteStore;
use dfck_core::store::sqlite::space::{Holder, VacuumEnd, dir_space, parent_dir, sqlite_temp_dir};
use dfck_core::store::{Backend, Store};
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// How long the lock probe and the WAL checkpoint wait for another connection.
const HOLDER_WAIT: Duration = Duration::from_secs(2);

/// How long `VACUUM` and the final checkpoint wait for a lock.
const VACUUM_WAIT: Duration = Duration::from_secs(5);

/// The advice for giving PostgreSQL table space back to the operating system.
pub const PG_ADVICE: &str = "VACUUM makes dead rows' space reusable inside the tables; it rarely shrinks the files. To return the space to the operating system run VACUUM FULL on the tables (it rewrites them under an ACCESS EXCLUSIVE lock: DeerFlow cannot read or write the store meanwhile, and it needs room for a full copy), or pg_repack (rewrites them online, holding an exclusive lock only briefly at the start and end).";

/// What reclaim does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReclaimAction {
    /// SQLite `VACUUM` in place, after a `TRUNCATE` checkpoint of the WAL.
    Vacuum,
    /// SQLite `VACUUM INTO` a new file.
    VacuumInto,
    /// PostgreSQL `VACUUM (ANALYZE)` of the store's tables.
    VacuumAnalyze,
}

impl ReclaimAction {
    /// How the action is shown to a person.
    pub fn describe(self) -> &'static str {
        match self {
            ReclaimAction::Vacuum => "wal_checkpoint(TRUNCATE), then VACUUM in place",
            ReclaimAction::VacuumInto => "VACUUM INTO a compacted copy (the store is only read)",
            ReclaimAction::VacuumAnalyze => {
                "VACUUM (ANALYZE) of checkpoints, checkpoint_blobs, checkpoint_writes"
            }
        }
    }
}

/// How the run ended (the write commands' vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReclaimStatus {
    /// Dry run: it would be done.
    Would,
    /// Done.
    Done,
    /// Refused, nothing changed: see `reason`.
    Refused,
    /// Interrupted by a stop (SIGTERM to `maintain --watch`): rolled back, nothing changed.
    Interrupted,
}

impl ReclaimStatus {
    /// The status word.
    pub fn as_str(self) -> &'static str {
        match self {
            ReclaimStatus::Would => "would",
            ReclaimStatus::Done => "done",
            ReclaimStatus::Refused => "refused",
            ReclaimStatus::Interrupted => "interrupted",
        }
    }
}

/// `dfck reclaim`.
#[derive(Debug, Clone, Serialize)]
pub struct ReclaimReport {
    /// True when nothing was changed on purpose.
    pub dry_run: bool,
    /// `sqlite` or `postgres`.
    pub backend: Backend,
    /// Path or redacted URL.
    pub location: String,
    /// What reclaim does (or would do).
    pub action: ReclaimAction,
    /// `would`, `done` or `refused`.
    pub status: ReclaimStatus,
    /// Why it was refused.
    pub reason: Option<String>,
    /// The compacted copy (`--into`).
    pub into: Option<String>,
    /// Free bytes where the work needs room (SQLite), when known.
    pub available_bytes: Option<u64>,
    /// Bytes the work needs free (SQLite: the copy `VACUUM` builds and logs).
    pub needed_bytes: Option<u64>,
    /// Bytes on disk before: file + WAL + SHM, or the tables.
    pub bytes_before: u64,
    /// Bytes on disk after (of the copy with `--into`); `None` unless done.
    pub bytes_after: Option<u64>,
    /// `bytes_before − bytes_after` (negative when the store grew).
    pub bytes_freed: Option<i64>,
    /// The store before.
    pub before: StoreSpace,
    /// The store (or the copy) after.
    pub after: Option<StoreSpace>,
    /// Conditions that did not stop the run.
    pub warnings: Vec<String>,
    /// How to give PostgreSQL space back to the operating system.
    pub advice: Option<String>,
}

/// What `dfck reclaim` was asked.
#[derive(Debug, Clone, Copy)]
pub struct ReclaimOptions<'a> {
    /// Change the store (else a dry run).
    pub apply: bool,
    /// Write a compacted copy there instead (SQLite).
    pub into: Option<&'a Path>,
}

fn report(store: &dyn Store, action: ReclaimAction, before: StoreSpace) -> ReclaimReport {
    let info = store.info();
    ReclaimReport {
        dry_run: true,
        backend: info.backend,
        location: info.location.clone(),
        action,
        status: ReclaimStatus::Would,
        reason: None,
        into: None,
        available_bytes: None,
        needed_bytes: None,
        bytes_before: before.total_bytes(),
        bytes_after: None,
        bytes_freed: None,
        before,
        after: None,
        warnings: Vec::new(),
        advice: None,
    }
}

impl ReclaimReport {
    fn refuse(mut self, reason: String) -> Self {
        self.status = ReclaimStatus::Refused;
        self.reason = Some(reason);
        self
    }

    fn interrupted(mut self) -> Self {
        self.status = ReclaimStatus::Interrupted;
        self.reason = Some("a stop was asked: the VACUUM was interrupted and rolled back".into());
        self
    }

    fn done(mut self, after: StoreSpace) -> Self {
        let a = after.total_bytes();
        self.status = ReclaimStatus::Done;
        self.bytes_after = Some(a);
        self.bytes_freed = Some(self.bytes_before as i64 - a as i64);
        self.after = Some(after);
        self
    }
}

fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
}

/// Checks that the disk can hold what `VACUUM` writes: the log of the compacted pages next
/// to the store (plus what folding the WAL into the file adds) and the temporary copy in
/// SQLite's temporary directory (both on one file system when they share it). Fills in the
/// report's needed and available bytes; `Some(reason)` when it cannot.
fn space_guard(r: &mut ReclaimReport, path: &Path, s: &SqliteSpace) -> Option<String> {
    let fp = Failpoints::from_env("reclaim");
    let growth = (s.page_count * s.page_size).saturating_sub(s.file_bytes);
    let db = dir_space(&parent_dir(path));
    let tmp_dir = sqlite_temp_dir();
    let tmp = dir_space(&tmp_dir);
    let free_db = fp.free_space(db.map(|d| d.0));
    let (needed, free) = match (db, tmp) {
        (Some((_, a)), Some((_, b))) if a == b => (2 * s.used_bytes + growth, free_db),
        (_, Some(t)) => {
            let free_tmp = fp.free_space(Some(t.0)).unwrap_or(t.0);
            if free_tmp < s.used_bytes {
                r.needed_bytes = Some(s.used_bytes);
                r.available_bytes = Some(free_tmp);
                return Some(format!(
                    "not enough disk space for VACUUM's temporary copy in {}: it needs about {} free, {} are",
                    tmp_dir.display(),
                    mib(s.used_bytes),
                    mib(free_tmp)
                ));
            }
            (s.used_bytes + growth, free_db)
        }
        _ => (s.used_bytes + growth, free_db),
    };
    r.needed_bytes = Some(needed);
    r.available_bytes = free;
    match free {
        Some(f) if f < needed => Some(format!(
            "not enough disk space: VACUUM needs about {} free next to the store (a copy of the {} in use, and its log), {} are",
            mib(needed),
            mib(s.used_bytes),
            mib(f)
        )),
        _ => None,
    }
}

/// `dfck reclaim` on a SQLite store.
pub fn reclaim_sqlite(path: &Path, opts: &ReclaimOptions<'_>) -> Result<ReclaimReport, Error> {
    if let Some(into) = opts.into {
        return reclaim_into(path, into, opts.apply);
    }
    if !opts.apply {
        let store = SqliteStore::open_read_only(path)?;
        let before = store.space_facts()?;
        let mut r = report(
            &store,
            ReclaimAction::Vacuum,
            StoreSpace::Sqlite(before.clone()),
        );
        if let Some(reason) = space_guard(&mut r, path, &before) {
            return Ok(r.refuse(reason));
        }
        return Ok(r);
    }
    let store = SqliteStore::open_read_write(path)?;
    let before = store.space_facts()?;
    let mut r = report(
        &store,
        ReclaimAction::Vacuum,
        StoreSpace::Sqlite(before.clone()),
    );
    r.dry_run = false;
    if let Some(reason) = space_guard(&mut r, path, &before) {
        return Ok(r.refuse(reason));
    }
    match store.probe_holder(HOLDER_WAIT)? {
        Holder::Nobody => {}
        Holder::Lock => {
            return Ok(r.refuse(format!(
                "another process holds the database lock (a writer such as DeerFlow or another dfck, or in rollback-journal mode a reader) and kept it for {} s; re-run when it is done",
                HOLDER_WAIT.as_secs()
            )));
        }
        Holder::WalReader => {
            return Ok(r.refuse(format!(
                "another process keeps a read transaction open on the store: the WAL checkpoint could not complete within {} s; re-run when it is done",
                HOLDER_WAIT.as_secs()
            )));
        }
    }
    // Test builds: `reclaim-abort-after:1` aborts here (the WAL folded in, no VACUUM yet),
    // `:2` after the VACUUM committed, before its pages left the WAL.
    let fp = Failpoints::from_env("reclaim");
    fp.after_row(1);
    match store.vacuum(VACUUM_WAIT)? {
        VacuumEnd::Busy(why) => {
            return Ok(r.refuse(format!(
                "another process took a lock on the store while VACUUM ran ({why}); nothing changed"
            )));
        }
        VacuumEnd::Interrupted => return Ok(r.interrupted()),
        VacuumEnd::Done => {}
    }
    fp.after_row(2);
    if !store.truncate_wal(VACUUM_WAIT)? {
        r.warnings.push(
            "a reader kept the WAL from being checkpointed after VACUUM: the compacted pages wait in the WAL, and the file shrinks at the next checkpoint once that reader is gone (re-run reclaim then)"
                .into(),
        );
    }
    fp.hold();
    let after = store.space_facts()?;
    Ok(r.done(StoreSpace::Sqlite(after)))
}

fn reclaim_into(path: &Path, into: &Path, apply: bool) -> Result<ReclaimReport, Error> {
    let store = SqliteStore::open_read_only(path)?;
    let before = store.space_facts()?;
    let mut r = report(
        &store,
        ReclaimAction::VacuumInto,
        StoreSpace::Sqlite(before.clone()),
    );
    r.dry_run = !apply;
    r.into = Some(into.display().to_string());
    if let Some(which) = dfck_core::store::files::store_file_named(path, into) {
        return Ok(r.refuse(format!(
            "--into {} is {which}: SQLite would take the copy for the store's own file; write it under another name",
            into.display()
        )));
    }
    if into.exists() || into.symlink_metadata().is_ok() {
        return Ok(r.refuse(format!(
            "{} already exists: reclaim --into writes a new file and never overwrites one",
            into.display()
        )));
    }
    let dir = parent_dir(into);
    let free = Failpoints::from_env("reclaim").free_space(dir_space(&dir).map(|d| d.0));
    r.needed_bytes = Some(before.used_bytes);
    r.available_bytes = free;
    if let Some(f) = free.filter(|f| *f < before.used_bytes) {
        return Ok(r.refuse(format!(
            "not enough disk space in {}: the copy needs about {}, {} are free",
            dir.display(),
            mib(before.used_bytes),
            mib(f)
        )));
    }
    if !apply {
        return Ok(r);
    }
    // Written under a temporary name in the target's directory, made durable, then linked
    // into place without overwriting: a failed or killed run leaves no partial file at PATH.
    let io = |what: &str, e: std::io::Error| StoreError::Query {
        what: format!("{what} {}", into.display()),
        reason: e.to_string(),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".dfck-reclaim-")
        .tempfile_in(&dir)
        .map_err(|e| io("creating a temporary file for", e))?;
    store.vacuum_into(tmp.path())?;
    Failpoints::from_env("reclaim").hold();
    // The copy gets the store's permissions (the temporary file is private).
    if let Ok(m) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(tmp.path(), m.permissions());
    }
    tmp.as_file()
        .sync_all()
        .map_err(|e| io("making durable", e))?;
    tmp.persist_noclobber(into)
        .map_err(|e| io("moving the copy to", e.error))?;
    dfck_core::store::files::sync_dir(&dir);
    let after = dfck_core::store::sqlite::space::file_space(into)?;
    Ok(r.done(StoreSpace::Sqlite(after)))
}

/// `dfck reclaim` on a PostgreSQL store.
pub fn reclaim_postgres(
    url: &str,
    schema: Option<&str>,
    opts: &ReclaimOptions<'_>,
) -> Result<ReclaimReport, Error> {
    if opts.into.is_some() {
        return Err(Error::Usage(
            "--into is for SQLite stores (a compacted copy of the file); a PostgreSQL store is vacuumed in place".into(),
        ));
    }
    let store = PostgresStore::open_read_write(url, schema)?;
    let before = StoreSpace::Postgres(store.pg_space()?);
    let mut r = report(&store, ReclaimAction::VacuumAnalyze, before);
    r.advice = Some(PG_ADVICE.to_owned());
    if !opts.apply {
        return Ok(r);
    }
    r.dry_run = false;
    match store.vacuum_analyze()? {
        PgVacuumEnd::Refused(why) => Ok(r.refuse(why)),
        PgVacuumEnd::Interrupted => Ok(r.interrupted()),
        PgVacuumEnd::Done => {
            let after = StoreSpace::Postgres(store.pg_space()?);
            Ok(r.done(after))
        }
    }
}
