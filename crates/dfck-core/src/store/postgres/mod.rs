//! The PostgreSQL backend (`PostgresSaver` layout): the connection type and its query
//! helpers. Connecting and schema detection live in `connect`, reads inside one
//! `REPEATABLE READ READ ONLY` transaction in `read` (large scans go through server-side
//! cursors fetched in batches, so memory stays bounded and the caller's callbacks may issue
//! further queries between batches; `values` reads every serialized value once), and the
//! per-thread write transaction in `write`.

mod ahead;
mod app;
mod app_copy;
mod batch;
mod connect;
pub mod conninfo;
pub mod resolve;
pub use connect::{ConnectError, PgClient, connect_client, describe_error, set_command};
mod copy;
mod deferred;
mod delete;
mod facts;
mod group;
mod maintenance;
pub use copy::TargetState;
mod read;
mod scan;
mod space;
mod values;
mod write;
pub use space::PgVacuumEnd;

use super::StoreInfo;
use crate::error::StoreError;
use std::cell::Cell;
use std::collections::hash_map::Entry;
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Row, Statement};

/// The newest `checkpoint_migrations` version this build knows (langgraph-checkpoint-postgres 3.x).
pub const MAX_KNOWN_MIGRATION: i32 = 9;
/// Default connect timeout when the URL sets none.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Statement timeout set on the session (one cursor batch is one statement).
pub const STATEMENT_TIMEOUT_MS: u64 = 300_000;

/// A LangGraph Postgres checkpoint store, read inside one read-only transaction.
pub struct PostgresStore {
    rt: Runtime,
    client: std::sync::Arc<Client>,
    info: StoreInfo,
    password: Option<String>,
    cursor_seq: Cell<u64>,
    /// The connection string and schema, for the helper connections of a split scan.
    reconnect: Box<(String, Option<String>)>,
    /// Connections one thread scan may use ([`crate::store::Store::split_scans`]).
    scan_jobs: Cell<usize>,
    /// A FETCH is in flight while the caller looks at the previous batch
    /// ([`Self::cursor_ahead`], [`Self::cursor_answered_ahead`]): queries are refused until
    /// it is read.
    fetching_ahead: Cell<bool>,
    /// Threads read ahead for planning ([`crate::store::Store::read_ahead`]).
    ahead: std::cell::RefCell<crate::store::batch::ReadAhead>,
    /// The threads of the open group transaction another dfck holds.
    group_busy: Box<std::cell::RefCell<std::collections::HashSet<String>>>,
    /// The statements prepared in the open write transaction ([`Self::query_reused`]).
    /// (`None`: run once, not prepared yet.)
    prepared: Box<std::cell::RefCell<std::collections::HashMap<String, Option<Statement>>>>,
    /// Whether a write transaction is open.
    in_write: Cell<bool>,
    /// The cursors of the open write transaction still open: closed in the same round trip
    /// as the thread's savepoint ([`Self::end_savepoint`]), else by the transaction's end.
    to_close: Box<std::cell::RefCell<Vec<String>>>,
    /// Whether DeerFlow's `runs` table can be asked for a thread's active run, once asked
    /// in the open transaction (forgotten when a transaction begins or ends).
    has_runs: Cell<Option<bool>>,
    /// Statements sent and not yet answered ([`Self::send_deferred`]).
    deferred: std::cell::RefCell<Vec<deferred::Deferred>>,
    /// The tasks reading the answers of queries sent ahead ([`Self::query_later`]).
    later: std::cell::RefCell<Vec<tokio::task::JoinHandle<()>>>,
}

/// The most rows a one-statement read of a thread takes ([`PostgresStore::query_short`]):
/// `most`, unless the `short-rows` failpoint says otherwise (`0`: none, a cursor reads them).
pub(super) fn short_most(most: usize) -> usize {
    crate::failpoint::Failpoints::from_env("read").short_rows(most)
}

/// dfck's own session limits, whatever the database or role defaults say: a statement
/// (one cursor batch) may take [`STATEMENT_TIMEOUT_MS`], and so may the pause between two
/// statements of one transaction (the caller's work between cursor batches), so that a tiny
/// `statement_timeout` or `idle_in_transaction_session_timeout` default neither cancels
/// dfck's reads nor lets a stalled dfck hold its transaction open for ever. JIT
/// compilation is off where the server has it: the planner's row guess for a checkpoint's
/// `channel_versions` makes every thread scan look costly enough to compile, which costs
/// more than the scan of a typical thread (docs/storage-format.md, "Reading a thread").
fn session_settings() -> String {
    format!(
        "SET statement_timeout = {STATEMENT_TIMEOUT_MS}; \
         SET idle_in_transaction_session_timeout = {STATEMENT_TIMEOUT_MS}; \
         SELECT set_config('jit', 'off', false) WHERE current_setting('jit', true) IS NOT NULL;"
    )
}

/// Quotes an SQL identifier.
fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// A one-line description of a driver error, without the password.
fn describe(e: &tokio_postgres::Error, password: Option<&str>) -> String {
    let mut msg = match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => {
            let mut m = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(s) = src {
                let t = s.to_string();
                if !m.contains(&t) {
                    m.push_str(": ");
                    m.push_str(&t);
                }
                src = s.source();
            }
            m
        }
    };
    if let Some(p) = password.filter(|p| !p.is_empty()) {
        msg = msg.replace(p, "***");
    }
    msg.replace(['\n', '\r'], " ")
}

impl PostgresStore {
    /// Connects to `url`, opens a read-only transaction, checks the schema.
    pub fn open_read_only(url: &str, schema: Option<&str>) -> Result<Self, StoreError> {
        let mut store = Self::connect(url, schema)?;
        store.set_session_limits()?;
        store.begin(schema)?;
        let (version, has_task_path) = store.detect_schema(schema)?;
        store.info.schema = format!("postgres (checkpoint_migrations v{version})");
        store.info.has_task_path = has_task_path;
        Ok(store)
    }

    /// Connects to `url` for a conversion: the session gets the statement timeout and the
    /// schema's search_path; no transaction is left open (see [`Self::begin_thread`]).
    pub fn open_read_write(url: &str, schema: Option<&str>) -> Result<Self, StoreError> {
        let mut store = Self::connect(url, schema)?;
        // Session settings go in their own round trips: statements sent in one batch with a
        // BEGIN belong to that transaction, and would be undone by its ROLLBACK.
        store.set_session_limits()?;
        if let Some(s) = schema {
            store
                .rt
                .block_on(
                    store
                        .client
                        .batch_execute(&format!("SET search_path TO {}", quote_ident(s))),
                )
                .map_err(|e| store.err("starting a session", e))?;
        }
        store
            .rt
            .block_on(
                store
                    .client
                    .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
            )
            .map_err(|e| store.err("starting a session", e))?;
        let detected = store.detect_schema(schema);
        store.end_transaction(false)?;
        let (version, has_task_path) = detected?;
        store.info.schema = format!("postgres (checkpoint_migrations v{version})");
        store.info.has_task_path = has_task_path;
        store.check_writable()?;
        Ok(store)
    }

    /// Refuses, before any work, a server this session cannot write to: a hot standby
    /// (`pg_is_in_recovery()`) or a session whose transactions default to read-only.
    pub(crate) fn check_writable(&self) -> Result<(), StoreError> {
        let rows = self.query(
            "checking that the server accepts writes",
            "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only')",
            &[],
        )?;
        let (standby, read_only) = rows
            .first()
            .map(|r| {
                (
                    r.try_get::<_, bool>(0).unwrap_or(false),
                    r.try_get::<_, String>(1).unwrap_or_default(),
                )
            })
            .unwrap_or_default();
        let reason = if standby {
            "this server is a read-only standby".to_owned()
        } else if read_only == "on" {
            "this session is read-only (default_transaction_read_only is on)".to_owned()
        } else {
            return Ok(());
        };
        Err(StoreError::ReadOnlyServer {
            path: self.info.location.clone(),
            reason,
        })
    }

    pub(super) fn err(&self, what: &str, e: tokio_postgres::Error) -> StoreError {
        StoreError::Query {
            what: format!("{}: {what}", self.info.location),
            reason: describe(&e, self.password.as_deref()),
        }
    }

    /// Sets dfck's own session limits (see [`session_settings`]). The first statement of a
    /// session still runs under the database's defaults: when a tiny `statement_timeout`
    /// cancels it, it is tried again (a `SET` takes microseconds).
    fn set_session_limits(&self) -> Result<(), StoreError> {
        let sql = session_settings();
        let mut tries = 0;
        loop {
            match self.rt.block_on(self.client.batch_execute(&sql)) {
                Ok(()) => return Ok(()),
                Err(e) if tries < 10 && e.code() == Some(&SqlState::QUERY_CANCELED) => tries += 1,
                Err(e) => return Err(self.err("starting a session", e)),
            }
        }
    }

    pub(super) fn begin(&self, schema: Option<&str>) -> Result<(), StoreError> {
        self.has_runs.set(None);
        let mut sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;".to_owned();
        if let Some(s) = schema {
            sql.push_str(&format!(" SET LOCAL search_path TO {};", quote_ident(s)));
        }
        self.rt
            .block_on(self.client.batch_execute(&sql))
            .map_err(|e| self.err("starting a read-only transaction", e))
    }

    /// Refuses a query while a FETCH is in flight ([`Self::cursor_ahead`],
    /// [`Self::cursor_answered_ahead`]): its answer would queue behind rows nobody reads.
    fn not_busy(&self, what: &str) -> Result<(), StoreError> {
        if self.fetching_ahead.get() {
            return Err(StoreError::Query {
                what: format!("{}: {what}", self.info.location),
                reason: "the connection is busy reading ahead for a thread scan".into(),
            });
        }
        Ok(())
    }

    /// Runs a query in one round trip (no separate prepare): every parameter is TEXT.
    pub(super) fn query(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        self.not_busy(what)?;
        let typed: Vec<(&(dyn ToSql + Sync), Type)> =
            params.iter().map(|p| (*p, Type::TEXT)).collect();
        self.rt
            .block_on(self.client.query_typed(sql, &typed))
            .map_err(|e| self.err(what, e))
    }

    /// `sql` with typed parameters. Inside a write transaction a statement run a second time
    /// is prepared and then reused, so that the server parses and plans it once per
    /// transaction instead of once per thread (and a transaction of one thread pays no
    /// prepare); the transaction's statements are closed before it ends
    /// ([`Self::write_ended`]), so none is left on a server connection a transaction-pooling
    /// proxy hands to another client.
    pub(super) fn query_reused(
        &self,
        what: &str,
        sql: &str,
        args: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, StoreError> {
        self.not_busy(what)?;
        let types: Vec<Type> = args.iter().map(|(_, t)| t.clone()).collect();
        let Some(statement) = self.reused_statement(what, sql, &types)? else {
            return self
                .rt
                .block_on(self.client.query_typed(sql, args))
                .map_err(|e| self.err(what, e));
        };
        let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|(p, _)| *p).collect();
        self.rt
            .block_on(self.client.query(&statement, &params))
            .map_err(|e| self.err(what, e))
    }

    /// `sql` prepared in the open write transaction, the second time it is run there
    /// ([`Self::query_reused`]); `None`: run it unprepared (outside a write transaction, or
    /// its first run in one).
    pub(super) fn reused_statement(
        &self,
        what: &str,
        sql: &str,
        types: &[Type],
    ) -> Result<Option<Statement>, StoreError> {
        if !self.in_write.get() {
            return Ok(None);
        }
        match self.prepared.borrow_mut().entry(sql.to_owned()) {
            Entry::Occupied(e) if e.get().is_some() => return Ok(e.get().clone()),
            Entry::Occupied(_) => {}
            Entry::Vacant(e) => {
                e.insert(None);
                return Ok(None);
            }
        }
        let st = self
            .rt
            .block_on(self.client.prepare_typed(sql, types))
            .map_err(|e| self.err(what, e))?;
        self.prepared
            .borrow_mut()
            .insert(sql.to_owned(), Some(st.clone()));
        Ok(Some(st))
    }

    /// The rows of `sql` (TEXT parameters) in one statement, through [`Self::query_later`]
    /// (prepared once per write transaction), when they are `most` at most (fewer with the
    /// `short-rows` failpoint); `None` when there are more, to be read through a cursor. A
    /// short thread then costs one round trip and no cursor.
    pub(super) fn query_short(
        &self,
        what: &'static str,
        sql: &str,
        params: &[&str],
        most: usize,
    ) -> Result<Option<Vec<Row>>, StoreError> {
        let most = short_most(most);
        if most == 0 {
            return Ok(None);
        }
        let rows = self.query_later(what, &format!("{sql} LIMIT {}", most + 1), params)?()?;
        Ok((rows.len() <= most).then_some(rows))
    }

    /// A write transaction began: [`Self::query_reused`] may prepare statements.
    pub(super) fn write_began(&self) {
        self.prepared.borrow_mut().clear();
        self.to_close.borrow_mut().clear();
        self.has_runs.set(None);
        self.in_write.set(true);
    }

    /// The write transaction is about to end: its statements are closed (the Close goes
    /// before the `COMMIT` or `ROLLBACK`, on the same server connection).
    pub(super) fn write_ended(&self) {
        // No query sent ahead outlives the transaction, nor the statement it runs.
        self.join_later();
        self.prepared.borrow_mut().clear();
        self.to_close.borrow_mut().clear();
        self.has_runs.set(None);
        self.in_write.set(false);
    }

    /// Runs `sql` through a server-side cursor, `batch` rows at a time; `f` may run further
    /// queries between rows.
    pub(super) fn cursor(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        batch: usize,
        f: &mut dyn FnMut(&Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.cursor_with(what, sql, params, batch, false, f)
    }

    /// Like [`Self::cursor`], but the next batch is requested before `f` sees the current
    /// one, so that the server works while the caller does: `f` must not query this
    /// connection (such a query fails).
    pub(super) fn cursor_ahead(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        batch: usize,
        f: &mut dyn FnMut(&Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.cursor_with(what, sql, params, batch, true, f)
    }

    fn cursor_with(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        batch: usize,
        ahead: bool,
        f: &mut dyn FnMut(&Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let name = self.cursor_name();
        let typed: Vec<(&(dyn ToSql + Sync), Type)> =
            params.iter().map(|p| (*p, Type::TEXT)).collect();
        self.not_busy(what)?;
        let declare = format!("DECLARE {name} NO SCROLL CURSOR FOR {sql}");
        let fetch = format!("FETCH {batch} FROM {name}");
        let mut first = None;
        if ahead {
            self.rt
                .block_on(self.client.execute_typed(&declare, &typed))
                .map_err(|e| self.err(what, e))?;
        } else {
            // The first FETCH goes out with the DECLARE: one round trip for a short result
            // (`join` polls the DECLARE first, so both requests are sent before either
            // answer is awaited, and answered in order).
            let (declared, fetched) = self.rt.block_on(futures_util::future::join(
                self.client.execute_typed(&declare, &typed),
                self.client.query_typed(&fetch, &[]),
            ));
            declared.map_err(|e| self.err(what, e))?;
            first = Some(fetched.map_err(|e| self.err(what, e)));
        }
        let result = if ahead {
            self.fetch_ahead(what, &fetch, f)
        } else {
            (|| loop {
                let rows = match first.take() {
                    Some(rows) => rows?,
                    None => self.query(what, &fetch, &[])?,
                };
                if rows.is_empty() {
                    return Ok(());
                }
                for r in &rows {
                    f(r)?;
                }
                // A short batch is the last: no round trip for the empty one.
                if rows.len() < batch {
                    return Ok(());
                }
            })()
        };
        self.close_cursor(name);
        result
    }

    /// A name for a new cursor of this connection.
    fn cursor_name(&self) -> String {
        let n = self.cursor_seq.get() + 1;
        self.cursor_seq.set(n);
        format!("dfck_cursor_{n}")
    }

    /// Closes cursor `name` once read.
    fn close_cursor(&self, name: String) {
        if self.in_write.get() {
            // Closed with the thread's savepoint, or by the transaction's end.
            self.to_close.borrow_mut().push(name);
        } else {
            // Closing is best-effort: the transaction ends with the connection anyway.
            let _ = self
                .rt
                .block_on(self.client.batch_execute(&format!("CLOSE {name}")));
        }
    }

    /// The FETCH loop of [`Self::cursor_ahead`]: one request always in flight.
    fn fetch_ahead(
        &self,
        what: &str,
        fetch: &str,
        f: &mut dyn FnMut(&Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let request = || -> ahead::Fetch<'_> {
            futures_util::future::maybe_done(Box::pin(self.client.query_typed(fetch, &[])))
        };
        let mut next = request();
        loop {
            let rows = self.answer(what, &mut next)?;
            if rows.is_empty() {
                return Ok(());
            }
            next = request();
            self.send(&mut next);
            self.fetching_ahead.set(true);
            let seen = rows.iter().try_for_each(&mut *f);
            self.fetching_ahead.set(false);
            if let Err(e) = seen {
                // The batch in flight is read and dropped, so the connection stays usable.
                self.rt.block_on(&mut next);
                return Err(e);
            }
        }
    }
}
