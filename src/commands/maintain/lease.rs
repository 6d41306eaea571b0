//! The sweeper lease of `dfck maintain --apply`: taken in `dfck_maintenance` before any
//! write, renewed every [`RENEW_EVERY`] by a thread with its own connection (carrying the
//! cursor), and released with the run's record. Another holder's unexpired lease means
//! this run does nothing.

use dfck_core::error::{Error, StoreError};
use dfck_core::maintenance::{Acquired, Holder, LastRun};
use dfck_core::store::Store;
use dfck_core::store::postgres::PostgresStore;
use dfck_core::store::sqlite::SqliteStore;
use dfck_core::target::Target;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the lease is renewed.
pub const RENEW_EVERY: Duration = Duration::from_secs(30);

/// A connection that may write, for the lease (the table lives in the store).
pub fn open_read_write(target: &Target) -> Result<Box<dyn Store>, StoreError> {
    Ok(match target {
        Target::Sqlite(path) => Box::new(SqliteStore::open_read_write(path)?),
        Target::Postgres { url, schema } => {
            Box::new(PostgresStore::open_read_write(url, schema.as_deref())?)
        }
    })
}

/// This process as a lease holder (the expiry is the database's clock plus the TTL, set by
/// the statement that takes the lease).
fn this_holder() -> Holder {
    Holder {
        host: nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".into()),
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        expires_at: 0,
    }
}

/// The outcome of asking for the lease.
pub enum Taken {
    /// This run holds it (and the cursor the last run left).
    Granted(Lease),
    /// Another sweeper does.
    Held(Holder),
}

/// A held lease: its token, the cursor shared with the renewer, and the renewer.
pub struct Lease {
    target: Target,
    token: String,
    cursor: Arc<Mutex<Option<String>>>,
    /// The cursor the previous run left (where this run starts).
    pub start: Option<String>,
    stop: Option<Sender<()>>,
    renewer: Option<JoinHandle<()>>,
}

/// Takes the lease for `ttl` seconds (creating the table when missing).
pub fn take(target: &Target, ttl: u64) -> Result<Taken, Error> {
    let store = open_read_write(target)?;
    let table = store.maintenance().ok_or_else(|| {
        Error::Usage(format!(
            "{}: this store cannot hold dfck's maintenance lease",
            target.display()
        ))
    })?;
    let token = uuid::Uuid::new_v4().to_string();
    let ttl_secs = i64::try_from(ttl).unwrap_or(i64::MAX);
    match table.acquire_lease(&this_holder(), &token, ttl_secs)? {
        Acquired::Held(h) => Ok(Taken::Held(h)),
        Acquired::Granted { cursor } => {
            drop(store);
            let shared = Arc::new(Mutex::new(cursor.clone()));
            let (tx, rx) = mpsc::channel::<()>();
            let renewer = {
                let target = target.clone();
                let token = token.clone();
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let mut conn: Option<Box<dyn Store>> = None;
                    while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(RENEW_EVERY) {
                        if conn.is_none() {
                            conn = open_read_write(&target).ok();
                        }
                        let cursor = shared.lock().ok().and_then(|c| c.clone());
                        let renewed = conn
                            .as_deref()
                            .and_then(|s| s.maintenance())
                            .map(|t| t.renew_lease(&token, ttl_secs, cursor.as_deref()));
                        // A failed renewal (the store busy, a dropped connection) is retried
                        // on a fresh connection; the lease outlives a few misses.
                        if !matches!(renewed, Some(Ok(_))) {
                            conn = None;
                        }
                    }
                })
            };
            Ok(Taken::Granted(Lease {
                target: target.clone(),
                token,
                cursor: shared,
                start: cursor,
                stop: Some(tx),
                renewer: Some(renewer),
            }))
        }
    }
}

impl Lease {
    /// Records where the run got to (carried by the next renewal and the release).
    pub fn set_cursor(&self, cursor: Option<String>) {
        if let Ok(mut c) = self.cursor.lock() {
            *c = cursor;
        }
    }

    fn stop_renewer(&mut self) {
        drop(self.stop.take());
        if let Some(h) = self.renewer.take() {
            let _ = h.join();
        }
    }

    /// Frees the lease with the run's record.
    pub fn release(mut self, run: Option<&LastRun>) -> Result<(), Error> {
        self.stop_renewer();
        let cursor = self.cursor.lock().ok().and_then(|c| c.clone());
        let store = open_read_write(&self.target)?;
        if let Some(t) = store.maintenance() {
            t.release_lease(&self.token, cursor.as_deref(), run)?;
        }
        Ok(())
    }
}

impl Drop for Lease {
    /// A run that failed still frees its lease (without a record), so the next run need
    /// not wait for it to expire.
    fn drop(&mut self) {
        if self.renewer.is_some() {
            self.stop_renewer();
            let cursor = self.cursor.lock().ok().and_then(|c| c.clone());
            if let Ok(store) = open_read_write(&self.target)
                && let Some(t) = store.maintenance()
            {
                let _ = t.release_lease(&self.token, cursor.as_deref(), None);
            }
        }
    }
}
