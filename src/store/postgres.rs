//! The PostgreSQL backend (`PostgresSaver` layout): connection handling, schema detection
//! from `checkpoint_migrations`, and reads inside one `REPEATABLE READ READ ONLY`
//! transaction. Large scans go through server-side cursors fetched in batches, so memory
//! stays bounded and the caller's callbacks may issue further queries between batches.

use super::{
    BlobRow, CheckpointBody, CheckpointMetaRow, CheckpointRow, CheckpointWriteTotals, Store,
    StoreInfo, WriteRow, WriteTotals, sort_writes,
};
use crate::error::StoreError;
use crate::redact::redact_url;
use std::cell::Cell;
use std::str::FromStr;
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio_postgres::config::SslMode;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Config, NoTls, Row};

/// The newest `checkpoint_migrations` version this build knows (langgraph-checkpoint-postgres 3.x).
pub const MAX_KNOWN_MIGRATION: i32 = 9;
/// Default connect timeout when the URL sets none.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Statement timeout set on the session (one cursor batch is one statement).
pub const STATEMENT_TIMEOUT_MS: u64 = 300_000;

/// A LangGraph Postgres checkpoint store, read inside one read-only transaction.
pub struct PostgresStore {
    rt: Runtime,
    client: Client,
    info: StoreInfo,
    password: Option<String>,
    cursor_seq: Cell<u64>,
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
        let mut sql = format!("SET statement_timeout = {STATEMENT_TIMEOUT_MS};");
        if let Some(s) = schema {
            sql.push_str(&format!(" SET search_path TO {};", quote_ident(s)));
        }
        sql.push_str(" BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;");
        store
            .rt
            .block_on(store.client.batch_execute(&sql))
            .map_err(|e| store.err("starting a session", e))?;
        let detected = store.detect_schema(schema);
        store.end_transaction("ROLLBACK")?;
        let (version, has_task_path) = detected?;
        store.info.schema = format!("postgres (checkpoint_migrations v{version})");
        store.info.has_task_path = has_task_path;
        Ok(store)
    }

    fn connect(url: &str, schema: Option<&str>) -> Result<Self, StoreError> {
        let shown = redact_url(url);
        let mut config = Config::from_str(url).map_err(|e| {
            StoreError::Target(format!(
                "invalid PostgreSQL URL {shown}: {}",
                describe(&e, None)
            ))
        })?;
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("dfck");
        }
        let open_err = |reason: String| StoreError::Open {
            path: shown.clone(),
            reason,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| open_err(format!("cannot start the I/O runtime: {e}")))?;
        let client = rt.block_on(async {
            let fail = |e: tokio_postgres::Error| open_err(describe(&e, password.as_deref()));
            if config.get_ssl_mode() == SslMode::Disable {
                let (client, conn) = config.connect(NoTls).await.map_err(fail)?;
                // The connection ends when the client is dropped; errors surface on queries.
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok::<_, StoreError>(client)
            } else {
                let tls = super::tls::encrypt_only_connector()
                    .map_err(|e| open_err(format!("cannot set up TLS: {e}")))?;
                let (client, conn) = config.connect(tls).await.map_err(fail)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok(client)
            }
        })?;
        Ok(PostgresStore {
            rt,
            client,
            info: StoreInfo {
                backend: super::Backend::Postgres,
                location: match schema {
                    Some(s) => format!("{shown} (schema {s})"),
                    None => shown.clone(),
                },
                schema: String::new(),
                has_task_path: true,
            },
            password,
            cursor_seq: Cell::new(0),
        })
    }

    /// Opens a short read-only transaction (listing threads on a read-write session).
    pub fn begin_read(&self) -> Result<(), StoreError> {
        self.rt
            .block_on(
                self.client
                    .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
            )
            .map_err(|e| self.err("starting a read-only transaction", e))
    }

    /// Starts the conversion transaction of one thread: `REPEATABLE READ`, a transaction
    /// advisory lock on the thread (another dfck converting it makes this return
    /// `Ok(false)` at once), then row locks on every checkpoint and blob row of the thread
    /// (waiting at most `lock_timeout` for a live writer). `Ok(false)`: not locked, the
    /// transaction is already rolled back.
    pub fn begin_thread(&self, thread_id: &str) -> Result<bool, StoreError> {
        self.rt
            .block_on(self.client.batch_execute(
                "BEGIN ISOLATION LEVEL REPEATABLE READ; SET LOCAL lock_timeout = '30s'",
            ))
            .map_err(|e| self.err("starting a write transaction", e))?;
        let locked = self
            .query(
                "taking the thread's advisory lock",
                "SELECT pg_try_advisory_xact_lock(hashtextextended('dfck migrate ' || $1, 0))",
                &[&thread_id],
            )
            .map(|rows| {
                rows.first()
                    .and_then(|r| r.try_get::<_, bool>(0).ok())
                    .unwrap_or(false)
            });
        let locked = match locked {
            Ok(l) => l,
            Err(e) => {
                let _ = self.end_transaction("ROLLBACK");
                return Err(e);
            }
        };
        if !locked {
            self.end_transaction("ROLLBACK")?;
            return Ok(false);
        }
        for (what, sql) in [
            (
                "locking the thread's checkpoints",
                "SELECT 1 FROM checkpoints WHERE thread_id = $1 FOR UPDATE",
            ),
            (
                "locking the thread's blobs",
                "SELECT 1 FROM checkpoint_blobs WHERE thread_id = $1 FOR UPDATE",
            ),
        ] {
            if let Err(e) = self.query(what, sql, &[&thread_id]) {
                let _ = self.end_transaction("ROLLBACK");
                return Err(e);
            }
        }
        Ok(true)
    }

    /// Ends the open transaction with `COMMIT` or `ROLLBACK`.
    pub fn end_transaction(&self, how: &str) -> Result<(), StoreError> {
        let sql = if how == "COMMIT" {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        self.rt
            .block_on(self.client.batch_execute(sql))
            .map_err(|e| self.err(&format!("{} the transaction", sql.to_lowercase()), e))
    }

    /// Turns one checkpoint into its full-mode form, in SQL so every other JSONB byte stays
    /// as stored: the inline `messages: true` snapshot marker goes, and the metadata loses
    /// DeerFlow's mode marker and the `messages` delta counter (the counters key when it
    /// becomes empty).
    pub fn rewrite_checkpoint_full(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
    ) -> Result<(), StoreError> {
        let what = "rewriting a checkpoint";
        let sql = "UPDATE checkpoints SET \
            checkpoint = CASE WHEN checkpoint -> 'channel_values' -> 'messages' = 'true'::jsonb \
                THEN checkpoint #- '{channel_values,messages}' ELSE checkpoint END, \
            metadata = (SELECT CASE WHEN m -> 'counters_since_delta_snapshot' = '{}'::jsonb \
                THEN m - 'counters_since_delta_snapshot' ELSE m END \
                FROM (SELECT (metadata - 'deerflow_checkpoint_channel_mode') \
                    #- '{counters_since_delta_snapshot,messages}' AS m) s) \
            WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3";
        let n = self
            .rt
            .block_on(self.client.execute_typed(
                sql,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&checkpoint_id, Type::TEXT),
                ],
            ))
            .map_err(|e| self.err(what, e))?;
        if n != 1 {
            return Err(StoreError::Query {
                what: what.into(),
                reason: format!("checkpoint {checkpoint_id} vanished"),
            });
        }
        Ok(())
    }

    /// Stores `messages` at `version` as a plain `msgpack` blob, overwriting a snapshot.
    pub fn upsert_messages_blob(
        &self,
        thread_id: &str,
        ns: &str,
        version: &str,
        blob: &[u8],
    ) -> Result<(), StoreError> {
        let sql = "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
            VALUES ($1, $2, 'messages', $3, 'msgpack', $4) \
            ON CONFLICT (thread_id, checkpoint_ns, channel, version) \
            DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob";
        self.rt
            .block_on(self.client.execute_typed(
                sql,
                &[
                    (&thread_id, Type::TEXT),
                    (&ns, Type::TEXT),
                    (&version, Type::TEXT),
                    (&blob, Type::BYTEA),
                ],
            ))
            .map(|_| ())
            .map_err(|e| self.err("writing a messages blob", e))
    }

    fn err(&self, what: &str, e: tokio_postgres::Error) -> StoreError {
        StoreError::Query {
            what: format!("{}: {what}", self.info.location),
            reason: describe(&e, self.password.as_deref()),
        }
    }

    fn begin(&self, schema: Option<&str>) -> Result<(), StoreError> {
        let mut sql = format!(
            "SET statement_timeout = {STATEMENT_TIMEOUT_MS}; \
             BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;"
        );
        if let Some(s) = schema {
            sql.push_str(&format!(" SET LOCAL search_path TO {};", quote_ident(s)));
        }
        self.rt
            .block_on(self.client.batch_execute(&sql))
            .map_err(|e| self.err("starting a read-only transaction", e))
    }

    /// Runs a query in one round trip (no separate prepare): every parameter is TEXT.
    fn query(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let typed: Vec<(&(dyn ToSql + Sync), Type)> =
            params.iter().map(|p| (*p, Type::TEXT)).collect();
        self.rt
            .block_on(self.client.query_typed(sql, &typed))
            .map_err(|e| self.err(what, e))
    }

    /// Runs `sql` through a server-side cursor, `batch` rows at a time.
    fn cursor(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        batch: usize,
        f: &mut dyn FnMut(&Row) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let n = self.cursor_seq.get() + 1;
        self.cursor_seq.set(n);
        let name = format!("dfck_cursor_{n}");
        let typed: Vec<(&(dyn ToSql + Sync), Type)> =
            params.iter().map(|p| (*p, Type::TEXT)).collect();
        self.rt
            .block_on(self.client.execute_typed(
                &format!("DECLARE {name} NO SCROLL CURSOR FOR {sql}"),
                &typed,
            ))
            .map_err(|e| self.err(what, e))?;
        let fetch = format!("FETCH {batch} FROM {name}");
        let result = (|| loop {
            let rows = self.query(what, &fetch, &[])?;
            if rows.is_empty() {
                return Ok(());
            }
            for r in &rows {
                f(r)?;
            }
        })();
        // Closing is best-effort: the transaction ends with the connection anyway.
        let _ = self
            .rt
            .block_on(self.client.batch_execute(&format!("CLOSE {name}")));
        result
    }

    /// Returns the migration version and whether `checkpoint_writes.task_path` exists.
    fn detect_schema(&self, schema: Option<&str>) -> Result<(i32, bool), StoreError> {
        let not_lg = |reason: String| StoreError::NotLangGraph {
            path: self.info.location.clone(),
            reason,
        };
        if let Some(s) = schema {
            let rows = self.query(
                "checking the schema",
                "SELECT 1 FROM pg_namespace WHERE nspname = $1",
                &[&s],
            )?;
            if rows.is_empty() {
                return Err(not_lg(format!("schema '{s}' does not exist")));
            }
        }
        let tables = [
            "checkpoint_migrations",
            "checkpoints",
            "checkpoint_blobs",
            "checkpoint_writes",
        ];
        let present_row = self.query(
            "reading the schema",
            "SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL, \
             to_regclass($3) IS NOT NULL, to_regclass($4) IS NOT NULL",
            &[&tables[0], &tables[1], &tables[2], &tables[3]],
        )?;
        let present: Vec<&str> = tables
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                present_row
                    .first()
                    .and_then(|r| r.try_get::<_, bool>(*i).ok())
                    .unwrap_or(false)
            })
            .map(|(_, t)| *t)
            .collect();
        let has = |t: &str| present.contains(&t);
        if !has("checkpoint_migrations") {
            return Err(not_lg("no 'checkpoint_migrations' table".into()));
        }
        let v: Option<i32> = self
            .query(
                "reading checkpoint_migrations",
                "SELECT max(v) FROM checkpoint_migrations",
                &[],
            )?
            .first()
            .and_then(|r| r.try_get(0).ok().flatten());
        let Some(v) = v else {
            return Err(not_lg("checkpoint_migrations is empty".into()));
        };
        if v > MAX_KNOWN_MIGRATION {
            return Err(not_lg(format!(
                "unknown schema version v{v} (this dfck knows up to v{MAX_KNOWN_MIGRATION})"
            )));
        }
        for t in &tables[1..] {
            if !has(t) {
                return Err(not_lg(format!("no '{t}' table (migration v{v})")));
            }
        }
        // Every column of the three tables, with whether it is part of the primary key.
        let cols = self.query(
            "reading the schema",
            "SELECT c.relname::text, a.attname::text, coalesce(a.attnum = ANY(i.indkey), false) \
             FROM pg_class c \
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
             LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary \
             WHERE c.oid IN (to_regclass($1), to_regclass($2), to_regclass($3))",
            &[&tables[1], &tables[2], &tables[3]],
        )?;
        let named = |r: &Row, i: usize| r.try_get::<_, String>(i).unwrap_or_default();
        let columns = |table: &str| -> Vec<String> {
            cols.iter()
                .filter(|r| named(r, 0) == table)
                .map(|r| named(r, 1))
                .collect()
        };
        let pk = |table: &str| -> Vec<String> {
            cols.iter()
                .filter(|r| named(r, 0) == table && r.try_get::<_, bool>(2).unwrap_or(false))
                .map(|r| named(r, 1))
                .collect()
        };
        if !pk("checkpoints").iter().any(|c| c == "checkpoint_id")
            || !pk("checkpoint_blobs").iter().any(|c| c == "version")
        {
            return Err(not_lg(
                "this is the ShallowPostgresSaver layout (no checkpoint history): \
                 it keeps only the latest checkpoint and cannot hold delta threads"
                    .into(),
            ));
        }
        for (t, needed) in [
            (
                "checkpoints",
                &[
                    "thread_id",
                    "checkpoint_ns",
                    "checkpoint_id",
                    "parent_checkpoint_id",
                    "checkpoint",
                    "metadata",
                ][..],
            ),
            (
                "checkpoint_blobs",
                &[
                    "thread_id",
                    "checkpoint_ns",
                    "channel",
                    "version",
                    "type",
                    "blob",
                ][..],
            ),
            (
                "checkpoint_writes",
                &[
                    "thread_id",
                    "checkpoint_ns",
                    "checkpoint_id",
                    "task_id",
                    "idx",
                    "channel",
                    "type",
                    "blob",
                ][..],
            ),
        ] {
            let cols = columns(t);
            for c in needed {
                if !cols.iter().any(|x| x == c) {
                    return Err(not_lg(format!("table '{t}' has no column '{c}'")));
                }
            }
        }
        let has_task_path = columns("checkpoint_writes")
            .iter()
            .any(|c| c == "task_path");
        Ok((v, has_task_path))
    }

    /// Row counts and `blob` bytes per thread of one table.
    fn scan_totals(
        &self,
        table: &'static str,
        what: &str,
        f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.cursor(
            what,
            &format!(
                "SELECT thread_id, count(*)::int8, coalesce(sum(octet_length(blob)), 0)::int8 \
                 FROM {table} GROUP BY thread_id"
            ),
            &[],
            2000,
            &mut |r| {
                f(WriteTotals {
                    thread_id: get(r, 0, what)?,
                    writes: nonneg(get(r, 1, what)?),
                    bytes: nonneg(get(r, 2, what)?),
                })
            },
        )
    }

    fn task_path_expr(&self) -> &'static str {
        if self.info.has_task_path {
            "task_path"
        } else {
            "''::text"
        }
    }
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    r: &'a Row,
    i: usize,
    what: &str,
) -> Result<T, StoreError> {
    r.try_get(i).map_err(|e| StoreError::Query {
        what: what.to_owned(),
        reason: e.to_string(),
    })
}

fn write_row(r: &Row, what: &str) -> Result<WriteRow, StoreError> {
    let value: Option<Vec<u8>> = get(r, 6, what)?;
    Ok(WriteRow {
        checkpoint_id: get(r, 0, what)?,
        task_id: get(r, 1, what)?,
        task_path: get(r, 2, what)?,
        idx: get(r, 3, what)?,
        channel: get(r, 4, what)?,
        type_tag: get(r, 5, what)?,
        value: value.unwrap_or_default(),
    })
}

fn nonneg(v: Option<i64>) -> u64 {
    v.unwrap_or(0).max(0) as u64
}

/// A point read: checkpoint columns plus every blob at its channel versions, in full.
const POINT_SELECT: &str = "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, \
    c.checkpoint, c.metadata::text, \
    (pg_column_size(c.checkpoint) + pg_column_size(c.metadata))::int8, \
    b.channels, b.types, b.blobs, b.complete \
    FROM checkpoints c \
    LEFT JOIN LATERAL ( \
        SELECT array_agg(bl.channel::text) AS channels, array_agg(bl.type::text) AS types, \
               array_agg(bl.blob) AS blobs, array_agg(true) AS complete \
        FROM jsonb_each_text(c.checkpoint -> 'channel_versions') cv \
        JOIN checkpoint_blobs bl ON bl.thread_id = c.thread_id AND bl.checkpoint_ns = c.checkpoint_ns \
            AND bl.channel = cv.key AND bl.version = cv.value \
    ) b ON true";

/// A scan: like [`POINT_SELECT`], but a blob the parent shares (same version) comes as its
/// first 16 bytes only — enough to tell a snapshot from a list — so a thread scan reads each
/// blob in full once, at the checkpoint that introduced it. The bytes column counts the
/// blobs a checkpoint introduced.
const SCAN_SELECT: &str = "SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, \
    c.checkpoint, c.metadata::text, \
    (pg_column_size(c.checkpoint) + pg_column_size(c.metadata))::int8 + coalesce(b.new_bytes, 0)::int8, \
    b.channels, b.types, b.blobs, b.complete \
    FROM checkpoints c \
    LEFT JOIN checkpoints p ON p.thread_id = c.thread_id AND p.checkpoint_ns = c.checkpoint_ns \
        AND p.checkpoint_id = c.parent_checkpoint_id \
    LEFT JOIN LATERAL ( \
        SELECT array_agg(bl.channel::text) AS channels, array_agg(bl.type::text) AS types, \
               array_agg(CASE WHEN n.is_new THEN bl.blob ELSE substring(bl.blob FROM 1 FOR 16) END) AS blobs, \
               array_agg(n.is_new) AS complete, \
               sum(CASE WHEN n.is_new THEN octet_length(bl.blob) ELSE 0 END) AS new_bytes \
        FROM jsonb_each_text(c.checkpoint -> 'channel_versions') cv \
        CROSS JOIN LATERAL (SELECT (p.checkpoint IS NULL \
            OR (p.checkpoint -> 'channel_versions' ->> cv.key) IS DISTINCT FROM cv.value) AS is_new) n \
        JOIN checkpoint_blobs bl ON bl.thread_id = c.thread_id AND bl.checkpoint_ns = c.checkpoint_ns \
            AND bl.channel = cv.key AND bl.version = cv.value \
    ) b ON true";

fn checkpoint_row(r: &Row, what: &str) -> Result<CheckpointRow, StoreError> {
    let channels: Option<Vec<String>> = get(r, 7, what)?;
    let types: Option<Vec<String>> = get(r, 8, what)?;
    let blobs: Option<Vec<Option<Vec<u8>>>> = get(r, 9, what)?;
    let complete: Option<Vec<Option<bool>>> = get(r, 10, what)?;
    let blobs = channels
        .unwrap_or_default()
        .into_iter()
        .zip(types.unwrap_or_default())
        .zip(blobs.unwrap_or_default())
        .zip(complete.unwrap_or_default())
        .map(|(((channel, type_tag), blob), complete)| BlobRow {
            channel,
            type_tag,
            blob,
            complete: complete.unwrap_or(true),
        })
        .collect();
    let metadata: Option<String> = get(r, 5, what)?;
    Ok(CheckpointRow {
        thread_id: get(r, 0, what)?,
        checkpoint_ns: get(r, 1, what)?,
        checkpoint_id: get(r, 2, what)?,
        parent_checkpoint_id: get(r, 3, what)?,
        body: CheckpointBody::Postgres {
            checkpoint: get(r, 4, what)?,
            blobs,
        },
        metadata: metadata.unwrap_or_default().into_bytes(),
        bytes: nonneg(get(r, 6, what)?),
    })
}

impl Store for PostgresStore {
    fn info(&self) -> &StoreInfo {
        &self.info
    }

    fn scan_checkpoint_meta(
        &self,
        f: &mut dyn FnMut(CheckpointMetaRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "scanning checkpoints";
        self.cursor(
            what,
            "SELECT thread_id, checkpoint_ns, checkpoint_id, \
             (pg_column_size(checkpoint) + pg_column_size(metadata))::int8, metadata::text \
             FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id",
            &[],
            2000,
            &mut |r| {
                let metadata: Option<String> = get(r, 4, what)?;
                f(CheckpointMetaRow {
                    thread_id: get(r, 0, what)?,
                    checkpoint_ns: get(r, 1, what)?,
                    checkpoint_id: get(r, 2, what)?,
                    bytes: nonneg(get(r, 3, what)?),
                    metadata: metadata.unwrap_or_default().into_bytes(),
                })
            },
        )
    }

    fn scan_write_totals(
        &self,
        f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.scan_totals("checkpoint_writes", "scanning writes", f)
    }

    fn scan_blob_totals(
        &self,
        f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.scan_totals("checkpoint_blobs", "scanning blobs", f)
    }

    fn active_run(&self, thread_id: &str) -> Result<bool, StoreError> {
        let what = "checking DeerFlow's runs table";
        let rows = self.query(
            what,
            "SELECT count(*) = 2 FROM pg_attribute \
             WHERE attrelid = to_regclass('runs') AND attname IN ('thread_id', 'status') AND NOT attisdropped",
            &[],
        )?;
        if !rows
            .first()
            .and_then(|r| r.try_get::<_, bool>(0).ok())
            .unwrap_or(false)
        {
            return Ok(false);
        }
        let rows = self.query(
            what,
            "SELECT EXISTS (SELECT 1 FROM runs WHERE thread_id = $1 AND status IN ('pending', 'running'))",
            &[&thread_id],
        )?;
        Ok(rows
            .first()
            .and_then(|r| r.try_get::<_, bool>(0).ok())
            .unwrap_or(false))
    }

    fn scan_thread_ids(
        &self,
        f: &mut dyn FnMut(String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "listing threads";
        self.cursor(
            what,
            "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id",
            &[],
            2000,
            &mut |r| f(get(r, 0, what)?),
        )
    }

    fn scan_thread_values(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "reading a thread's checkpoints";
        self.cursor(
            what,
            &format!("{POINT_SELECT} WHERE c.thread_id = $1 AND c.checkpoint_ns = $2"),
            &[&thread_id, &ns],
            16,
            &mut |r| f(checkpoint_row(r, what)?),
        )
    }

    fn thread_writes(&self, thread_id: &str, ns: &str) -> Result<Vec<WriteRow>, StoreError> {
        let what = "reading a thread's pending writes";
        let sql = format!(
            "SELECT checkpoint_id, task_id, {tp}, idx::int8, channel, type, blob \
             FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2",
            tp = self.task_path_expr()
        );
        let mut out = Vec::new();
        self.cursor(what, &sql, &[&thread_id, &ns], 500, &mut |r| {
            out.push(write_row(r, what)?);
            Ok(())
        })?;
        Ok(out)
    }

    fn namespaces(&self, thread_id: &str) -> Result<Vec<String>, StoreError> {
        let what = "listing namespaces";
        let mut out: Vec<String> = self
            .query(
                what,
                "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = $1",
                &[&thread_id],
            )?
            .iter()
            .map(|r| get(r, 0, what))
            .collect::<Result<_, _>>()?;
        out.sort();
        Ok(out)
    }

    fn head_id(&self, thread_id: &str, ns: &str) -> Result<Option<String>, StoreError> {
        let what = "finding the head checkpoint";
        self.query(
            what,
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 \
             ORDER BY checkpoint_id DESC LIMIT 1",
            &[&thread_id, &ns],
        )?
        .first()
        .map(|r| get(r, 0, what))
        .transpose()
    }

    fn checkpoint(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
    ) -> Result<Option<CheckpointRow>, StoreError> {
        let what = "reading a checkpoint";
        self.query(
            what,
            &format!(
                "{POINT_SELECT} WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3"
            ),
            &[&thread_id, &ns, &checkpoint_id],
        )?
        .first()
        .map(|r| checkpoint_row(r, what))
        .transpose()
    }

    fn metadata(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let what = "reading checkpoint metadata";
        self.query(
            what,
            "SELECT metadata::text FROM checkpoints \
             WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
            &[&thread_id, &ns, &checkpoint_id],
        )?
        .first()
        .map(|r| get::<Option<String>>(r, 0, what).map(|m| m.unwrap_or_default().into_bytes()))
        .transpose()
    }

    fn scan_thread(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "reading a thread's checkpoints";
        self.cursor(
            what,
            &format!("{SCAN_SELECT} WHERE c.thread_id = $1 AND c.checkpoint_ns = $2"),
            &[&thread_id, &ns],
            32,
            &mut |r| f(checkpoint_row(r, what)?),
        )
    }

    fn writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        channel: Option<&str>,
    ) -> Result<Vec<WriteRow>, StoreError> {
        let what = "reading pending writes";
        let sql = format!(
            "SELECT checkpoint_id, task_id, {tp}, idx::int8, channel, type, blob \
             FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2 \
             AND checkpoint_id = $3 AND ($4::text IS NULL OR channel = $4::text)",
            tp = self.task_path_expr()
        );
        let rows = self.query(what, &sql, &[&thread_id, &ns, &checkpoint_id, &channel])?;
        let mut out = rows
            .iter()
            .map(|r| write_row(r, what))
            .collect::<Result<Vec<_>, StoreError>>()?;
        sort_writes(&mut out);
        Ok(out)
    }

    fn write_totals_by_checkpoint(
        &self,
        thread_id: &str,
        ns: &str,
    ) -> Result<Vec<CheckpointWriteTotals>, StoreError> {
        let what = "counting pending writes";
        self.query(
            what,
            "SELECT checkpoint_id, count(*)::int8, coalesce(sum(octet_length(blob)), 0)::int8 \
             FROM checkpoint_writes WHERE thread_id = $1 AND checkpoint_ns = $2 GROUP BY checkpoint_id",
            &[&thread_id, &ns],
        )?
        .iter()
        .map(|r| {
            Ok(CheckpointWriteTotals {
                checkpoint_id: get(r, 0, what)?,
                writes: nonneg(get(r, 1, what)?),
                bytes: nonneg(get(r, 2, what)?),
            })
        })
        .collect()
    }
}

/// A client connected the way every dfck session connects (TLS for encryption unless
/// `sslmode=disable`, a connect timeout, the password kept for redaction), on its own
/// current-thread runtime. Used by the benchmarks' native saver.
pub struct PgClient {
    /// The runtime driving the connection.
    pub rt: tokio::runtime::Runtime,
    /// The client.
    pub client: Client,
    /// The URL's password, to redact from error texts.
    pub password: Option<String>,
}

/// Why [`connect_client`] failed (texts already redacted).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The URL does not parse.
    #[error("invalid PostgreSQL URL: {0}")]
    InvalidUrl(String),
    /// No runtime or no TLS setup.
    #[error("{0}")]
    Setup(String),
    /// The server could not be reached or refused the login.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(String),
}

/// Connects to `url` with the shared TLS setup; `timeout` applies unless the URL sets one.
pub fn connect_client(
    url: &str,
    application_name: &str,
    timeout: std::time::Duration,
) -> Result<PgClient, ConnectError> {
    let mut config =
        Config::from_str(url).map_err(|e| ConnectError::InvalidUrl(describe(&e, None)))?;
    let password = config
        .get_password()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(timeout);
    }
    config.application_name(application_name);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ConnectError::Setup(format!("cannot start the I/O runtime: {e}")))?;
    let pw = password.clone();
    let client = rt.block_on(async move {
        let fail = |e: tokio_postgres::Error| ConnectError::Connect(describe(&e, pw.as_deref()));
        if config.get_ssl_mode() == SslMode::Disable {
            let (client, conn) = config.connect(NoTls).await.map_err(fail)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok::<_, ConnectError>(client)
        } else {
            let tls = super::tls::encrypt_only_connector()
                .map_err(|e| ConnectError::Setup(format!("cannot set up TLS: {e}")))?;
            let (client, conn) = config.connect(tls).await.map_err(fail)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(client)
        }
    })?;
    Ok(PgClient {
        rt,
        client,
        password,
    })
}

/// A one-line description of a driver error without the password.
pub fn describe_error(e: &tokio_postgres::Error, password: Option<&str>) -> String {
    describe(e, password)
}
