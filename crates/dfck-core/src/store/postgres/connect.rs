//! Connecting to PostgreSQL (TLS when the URL asks for it) and checking that the schema is
//! LangGraph's (`checkpoint_migrations`).

use super::conninfo::quote;
use super::resolve::Resolved;
use super::{DEFAULT_CONNECT_TIMEOUT, MAX_KNOWN_MIGRATION, PostgresStore, describe};
use crate::error::StoreError;
use crate::redact::redact_url;
use crate::store::tls::Verify;
use crate::store::{Backend, StoreInfo};
use std::cell::Cell;
use std::path::{Path, PathBuf};
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
            completed_as,
        } = connect_client(url, &application_name(), DEFAULT_CONNECT_TIMEOUT).map_err(
            |e| match e {
                ConnectError::InvalidUrl(why) => {
                    StoreError::Target(format!("PostgreSQL connection {shown}: {why}"))
                }
                ConnectError::Setup(why) | ConnectError::Connect(why) => open_err(why),
            },
        )?;
        Ok(PostgresStore {
            rt,
            client: std::sync::Arc::new(client),
            info: StoreInfo {
                backend: Backend::Postgres,
                location: {
                    let base = match completed_as {
                        Some(c) => format!("{shown} \u{2192} {c}"),
                        None => shown.clone(),
                    };
                    match schema {
                        Some(s) => format!("{base} (schema {s})"),
                        None => base,
                    }
                },
                schema: String::new(),
                has_task_path: true,
            },
            password,
            cursor_seq: Cell::new(0),
            reconnect: Box::new((url.to_owned(), schema.map(str::to_owned))),
            scan_jobs: Cell::new(1),
            fetching_ahead: Cell::new(false),
            ahead: Default::default(),
            group_busy: Default::default(),
            prepared: Default::default(),
            in_write: Cell::new(false),
            to_close: Default::default(),
            has_runs: Cell::new(None),
            deferred: Default::default(),
            later: Default::default(),
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
    /// The password (whatever its source), to redact from error texts.
    pub password: Option<String>,
    /// `user@host:port/dbname` when some of it came from outside the connection string
    /// (environment, service file, password file).
    pub completed_as: Option<String>,
}

/// Why [`connect_client`] failed (texts already redacted).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The connection string does not parse or asks for what dfck cannot do.
    #[error("invalid PostgreSQL connection: {0}")]
    InvalidUrl(String),
    /// No runtime or no TLS setup.
    #[error("{0}")]
    Setup(String),
    /// The server could not be reached or refused the login.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(String),
}

/// The `application_name` of every session this process opens: `dfck <command>` once the
/// command line named its command ([`set_command`]), so that `pg_stat_activity` and a lock
/// refusal name the command holding a lock.
static COMMAND: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names the command this process runs (`prune`, `migrate full-to-delta`, …), for the
/// `application_name` of its PostgreSQL sessions. The first call wins.
pub fn set_command(command: &str) {
    let _ = COMMAND.set(format!("dfck {command}"));
}

fn application_name() -> String {
    COMMAND.get().cloned().unwrap_or_else(|| "dfck".into())
}

/// Connects to `url` (a URL or a keyword DSN, completed from the `PG*` environment, the
/// service file and the password file as libpq does) with the shared TLS setup; `timeout`
/// and `application_name` apply unless the connection string sets them.
pub fn connect_client(
    url: &str,
    application_name: &str,
    timeout: std::time::Duration,
) -> Result<PgClient, ConnectError> {
    let env = |k: &str| std::env::var(k).ok();
    let resolved = super::resolve::resolve(url, &env).map_err(ConnectError::InvalidUrl)?;
    let password = resolved.get("password").map(str::to_owned);
    let (mut config, tls, tls_rejection) = driver_config(&resolved, &env)?;
    let resolved_tls = format!(
        "sslmode={}, sslrootcert={}",
        resolved.get("sslmode").unwrap_or_default(),
        resolved
            .get("sslrootcert")
            .unwrap_or("~/.postgresql/root.crt"),
    );
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
    let origins = resolved.origins();
    let note = resolved.passfile_note.clone();
    let client = rt.block_on(async move {
        let fail = |e: tokio_postgres::Error| {
            let rejected = tls_rejection.as_ref().and_then(|r| r.lock().ok()?.clone());
            let mut msg = match rejected {
                Some(why) => format!("TLS: {why} ({})", resolved_tls),
                None => describe(&e, pw.as_deref()),
            };
            if !origins.is_empty() {
                msg.push_str(&format!(" ({origins})"));
            }
            if let Some(n) = note.filter(|_| pw.is_none()) {
                msg.push_str(&format!(" ({n})"));
            }
            ConnectError::Connect(msg)
        };
        match tls {
            None => {
                let (client, conn) = config.connect(NoTls).await.map_err(fail)?;
                // The connection ends when the client is dropped; errors surface on queries.
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok::<_, ConnectError>(client)
            }
            Some(tls) => {
                let (client, conn) = config.connect(tls).await.map_err(fail)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok(client)
            }
        }
    })?;
    let completed_as = (!resolved.origins().is_empty()).then(|| resolved.summary());
    Ok(PgClient {
        rt,
        client,
        password,
        completed_as,
    })
}

/// The connection keywords the driver takes as they are.
const DRIVER_KEYS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "options",
    "application_name",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// The driver's configuration, its TLS connector (`None`: no TLS) and, when it verifies
/// certificates, where it says why it rejected one.
type DriverConfig = (
    Config,
    Option<tokio_postgres_rustls::MakeRustlsConnect>,
    Option<crate::store::tls::Rejection>,
);

/// The driver's configuration for resolved values.
fn driver_config(
    r: &Resolved,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<DriverConfig, ConnectError> {
    let bad = ConnectError::InvalidUrl;
    let mut dsn: Vec<String> = Vec::new();
    for (k, v) in r.pairs() {
        if DRIVER_KEYS.contains(&k) {
            dsn.push(format!("{k}={}", quote(v)));
        }
    }
    if r.get("application_name").is_none() {
        if let Some(v) = r.get("fallback_application_name") {
            dsn.push(format!("application_name={}", quote(v)));
        }
    }
    if let Some(v) = r.get("keepalives_count") {
        dsn.push(format!("keepalives_retries={}", quote(v)));
    }
    for key in ["sslcert", "sslkey"] {
        if r.get(key).is_some() {
            return Err(bad(format!(
                "{key} (client certificates) is not supported by dfck"
            )));
        }
    }
    if r.get("gssencmode") == Some("require") {
        return Err(bad(
            "gssencmode=require (GSSAPI encryption) is not supported by dfck".into(),
        ));
    }
    let mode = r.get("sslmode").unwrap_or("prefer");
    let home = env("HOME").filter(|h| !h.is_empty());
    let default_root = home.map(|h| Path::new(&h).join(".postgresql/root.crt"));
    let root_file = |mode: &str| -> Result<PathBuf, ConnectError> {
        match r.get("sslrootcert") {
            Some("system") => Ok(system_roots().ok_or_else(|| {
                bad("sslrootcert=system: no system certificate bundle found (set SSL_CERT_FILE)".into())
            })?),
            Some(p) => Ok(PathBuf::from(p)),
            None => default_root.clone().filter(|p| p.exists()).ok_or_else(|| {
                bad(format!(
                    "sslmode={mode} needs a root certificate: give sslrootcert=FILE (or PGSSLROOTCERT), or put it in {}",
                    default_root
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "~/.postgresql/root.crt".into())
                ))
            }),
        }
    };
    let has_root =
        r.get("sslrootcert").is_some() || default_root.as_ref().is_some_and(|p| p.exists());
    let verify = match mode {
        "disable" | "allow" | "prefer" => None,
        // libpq verifies the chain under `require` when a root certificate is present.
        "require" if has_root => Some(Verify::Ca),
        "require" => None,
        "verify-ca" if r.get("sslrootcert") == Some("system") => Some(Verify::Full),
        "verify-ca" => Some(Verify::Ca),
        "verify-full" => Some(Verify::Full),
        other => return Err(bad(format!("invalid sslmode value: \"{other}\""))),
    };
    let driver_mode = match (mode, verify) {
        ("disable", _) => "disable",
        ("allow" | "prefer", _) => "prefer",
        _ => "require",
    };
    dsn.push(format!("sslmode={driver_mode}"));
    let config =
        Config::from_str(&dsn.join(" ")).map_err(|e| bad(describe(&e, r.get("password"))))?;
    let (tls, rejection) = match (driver_mode, verify) {
        ("disable", _) => (None, None),
        (_, Some(v)) => {
            let file = root_file(mode)?;
            let (tls, rejection) =
                crate::store::tls::verifying_connector(v, &file).map_err(ConnectError::Setup)?;
            (Some(tls), Some(rejection))
        }
        (_, None) => (
            Some(
                crate::store::tls::encrypt_only_connector()
                    .map_err(|e| ConnectError::Setup(format!("cannot set up TLS: {e}")))?,
            ),
            None,
        ),
    };
    debug_assert!(config.get_ssl_mode() != SslMode::Disable || tls.is_none());
    Ok((config, tls, rejection))
}

/// The system's certificate bundle (`SSL_CERT_FILE`, else the usual distribution paths).
fn system_roots() -> Option<PathBuf> {
    std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            [
                "/etc/ssl/certs/ca-certificates.crt",
                "/etc/pki/tls/certs/ca-bundle.crt",
                "/etc/ssl/cert.pem",
            ]
            .map(PathBuf::from),
        )
        .find(|p| p.is_file())
}

/// A one-line description of a driver error without the password.
pub fn describe_error(e: &tokio_postgres::Error, password: Option<&str>) -> String {
    describe(e, password)
}
