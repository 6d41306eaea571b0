//! Connecting to PostgreSQL (TLS when the URL asks for it) and checking that the schema is
//! LangGraph's (`checkpoint_migrations`).

use super::{DEFAULT_CONNECT_TIMEOUT, MAX_KNOWN_MIGRATION, PostgresStore, describe};
use crate::error::StoreError;
use crate::redact::redact_url;
use crate::store::{Backend, StoreInfo};
use std::cell::Cell;
use std::str::FromStr;
use tokio_postgres::config::SslMode;
use tokio_postgres::{Client, Config, NoTls, Row};

impl PostgresStore {
    pub(super) fn connect(url: &str, schema: Option<&str>) -> Result<Self, StoreError> {
        let shown = redact_url(url);
        let open_err = |reason: String| StoreError::Open {
            path: shown.clone(),
            reason,
        };
        let PgClient {
            rt,
            client,
            password,
        } = connect_client(url, "dfck", DEFAULT_CONNECT_TIMEOUT).map_err(|e| match e {
            ConnectError::InvalidUrl(why) => {
                StoreError::Target(format!("invalid PostgreSQL URL {shown}: {why}"))
            }
            ConnectError::Setup(why) | ConnectError::Connect(why) => open_err(why),
        })?;
        Ok(PostgresStore {
            rt,
            client,
            info: StoreInfo {
                backend: Backend::Postgres,
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

    /// Returns the migration version and whether `checkpoint_writes.task_path` exists.
    pub(super) fn detect_schema(&self, schema: Option<&str>) -> Result<(i32, bool), StoreError> {
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
}

/// A client connected the way every dfck session connects (TLS for encryption unless
/// `sslmode=disable`, a connect timeout, the password kept for redaction), on its own
/// current-thread runtime. The store and the benchmarks' native saver both connect here.
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

/// Connects to `url` (a URL or a keyword DSN) with the shared TLS setup; `timeout` and
/// `application_name` apply unless the URL sets them.
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
    if config.get_application_name().is_none() {
        config.application_name(application_name);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ConnectError::Setup(format!("cannot start the I/O runtime: {e}")))?;
    let pw = password.clone();
    let client = rt.block_on(async move {
        let fail = |e: tokio_postgres::Error| ConnectError::Connect(describe(&e, pw.as_deref()));
        if config.get_ssl_mode() == SslMode::Disable {
            let (client, conn) = config.connect(NoTls).await.map_err(fail)?;
            // The connection ends when the client is dropped; errors surface on queries.
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok::<_, ConnectError>(client)
        } else {
            let tls = crate::store::tls::encrypt_only_connector()
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
