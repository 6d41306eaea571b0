//! The store a config selects, from the legacy top-level `checkpointer:` section or from
//! `database:`. Both sections share the backend names and the PostgreSQL URL and schema
//! rules; they differ only in their key names and in how a SQLite path is formed.

use super::invalid;
use super::paths::{absolute, is_sqlite_memory, show, sqlite_uri_path};
use super::yaml::{Node, opt_str};
use crate::error::ConfigError;
use crate::redact::redact_url;
use crate::store::Backend;
use crate::target::Target;
use std::path::{Path, PathBuf};

/// `database.sqlite_dir` when unset, relative to DeerFlow's CWD.
pub(super) const DEFAULT_SQLITE_DIR: &str = ".deer-flow/data";
/// `checkpointer.connection_string` of a SQLite checkpointer when unset, relative to the
/// data home.
const DEFAULT_LEGACY_SQLITE: &str = "store.db";

/// The key names of one store section.
struct Keys {
    /// The section: `checkpointer` or `database`.
    section: &'static str,
    /// Its backend key: `type` or `backend`.
    backend: &'static str,
    /// Its PostgreSQL URL key: `connection_string` or `postgres_url`.
    url: &'static str,
}

const LEGACY: Keys = Keys {
    section: "checkpointer",
    backend: "type",
    url: "connection_string",
};

const DATABASE: Keys = Keys {
    section: "database",
    backend: "backend",
    url: "postgres_url",
};

/// What a section selects.
pub(super) enum Selection {
    /// An in-process store: nothing on disk.
    Memory,
    /// A SQLite file, and the setting that produced its path (for "does not exist").
    Sqlite { path: PathBuf, how: String },
    /// A PostgreSQL store.
    Postgres(Target),
}

impl Selection {
    /// The selected backend.
    pub(super) fn backend(&self) -> Backend {
        match self {
            Selection::Memory => Backend::Memory,
            Selection::Sqlite { .. } => Backend::Sqlite,
            Selection::Postgres(_) => Backend::Postgres,
        }
    }

    /// The store to open; `None` for memory.
    pub(super) fn into_target(self) -> Option<Target> {
        match self {
            Selection::Memory => None,
            Selection::Sqlite { path, .. } => Some(Target::Sqlite(path)),
            Selection::Postgres(t) => Some(t),
        }
    }
}

/// The legacy `checkpointer:` section. A relative SQLite path resolves against DeerFlow's
/// data home (`data_home`, computed only then); a `file:` URI against DeerFlow's CWD.
pub(super) fn legacy(
    ck: &[(Node, Node)],
    cfg: &str,
    deerflow_cwd: &Path,
    data_home: &dyn Fn() -> Result<PathBuf, ConfigError>,
) -> Result<Selection, ConfigError> {
    let kind = opt_str(ck, "type", cfg)?.ok_or_else(|| {
        invalid(
            cfg,
            "checkpointer.type",
            "required (memory, sqlite or postgres)".into(),
        )
    })?;
    let conn = opt_str(ck, "connection_string", cfg)?.filter(|s| !s.is_empty());
    match parse_backend(&kind, &LEGACY, cfg)? {
        Backend::Memory => Ok(Selection::Memory),
        Backend::Sqlite => {
            let conn = conn.unwrap_or_else(|| DEFAULT_LEGACY_SQLITE.to_owned());
            if is_sqlite_memory(&conn) {
                return Ok(Selection::Memory);
            }
            let path = match conn.strip_prefix("file:") {
                // `file:` URIs are used as is: relative to DeerFlow's CWD.
                Some(uri) => absolute(deerflow_cwd, Path::new(&sqlite_uri_path(uri))),
                None => absolute(&data_home()?, Path::new(&conn)),
            };
            let how = format!("checkpointer.connection_string '{conn}'");
            Ok(Selection::Sqlite { path, how })
        }
        Backend::Postgres => postgres(ck, conn, &LEGACY, cfg),
    }
}

/// The `database:` section (missing keys: `backend: sqlite`, `sqlite_dir: .deer-flow/data`).
pub(super) fn database(
    db: &[(Node, Node)],
    cfg: &str,
    deerflow_cwd: &Path,
) -> Result<Selection, ConfigError> {
    let name = opt_str(db, "backend", cfg)?.unwrap_or_else(|| Backend::Sqlite.as_str().to_owned());
    match parse_backend(&name, &DATABASE, cfg)? {
        Backend::Memory => Ok(Selection::Memory),
        Backend::Sqlite => {
            let dir = opt_str(db, "sqlite_dir", cfg)?
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| DEFAULT_SQLITE_DIR.to_owned());
            let path = absolute(deerflow_cwd, &Path::new(&dir).join("deerflow.db"));
            let how = format!(
                "database.sqlite_dir '{dir}' relative to the DeerFlow cwd {}",
                show(deerflow_cwd)
            );
            Ok(Selection::Sqlite { path, how })
        }
        Backend::Postgres => {
            let url = opt_str(db, "postgres_url", cfg)?.filter(|s| !s.is_empty());
            postgres(db, url, &DATABASE, cfg)
        }
    }
}

/// A backend name; anything else is an error on the section's backend key.
fn parse_backend(name: &str, keys: &Keys, cfg: &str) -> Result<Backend, ConfigError> {
    Backend::parse(name).ok_or_else(|| {
        invalid(
            cfg,
            &format!("{}.{}", keys.section, keys.backend),
            format!("expected memory, sqlite or postgres, found '{name}'"),
        )
    })
}

/// A PostgreSQL store: the URL (required) and the optional schema of a section.
fn postgres(
    section: &[(Node, Node)],
    url: Option<String>,
    keys: &Keys,
    cfg: &str,
) -> Result<Selection, ConfigError> {
    let url_key = format!("{}.{}", keys.section, keys.url);
    let raw = url.ok_or_else(|| {
        invalid(
            cfg,
            &url_key,
            format!(
                "required when {}.{} is postgres",
                keys.section, keys.backend
            ),
        )
    })?;
    let url = pg_url(&raw, cfg, &url_key)?;
    let schema = pg_schema(section, cfg, &format!("{}.postgres_schema", keys.section))?;
    Ok(Selection::Postgres(Target::Postgres { url, schema }))
}

/// Validates a PostgreSQL schema name as DeerFlow does: `[a-z_][a-z0-9_]{0,62}`.
pub fn valid_schema(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0] == b'_')
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

/// A PostgreSQL URL as psycopg takes it: a SQLAlchemy `+driver` suffix is stripped and
/// `postgres://` is accepted.
fn pg_url(raw: &str, cfg: &str, key: &str) -> Result<String, ConfigError> {
    let raw = raw.trim();
    let bad = |why: &str| invalid(cfg, key, format!("{why}: '{}'", redact_url(raw)));
    let Some((scheme, rest)) = raw.split_once("://") else {
        return Err(bad("expected a postgresql:// URL"));
    };
    let base = scheme.split('+').next().unwrap_or("").to_ascii_lowercase();
    match base.as_str() {
        "postgresql" | "postgres" => Ok(format!("{base}://{rest}")),
        _ => Err(bad("expected a postgresql:// or postgres:// URL")),
    }
}

fn pg_schema(
    section: &[(Node, Node)],
    cfg: &str,
    key: &str,
) -> Result<Option<String>, ConfigError> {
    let name = key.rsplit('.').next().unwrap_or(key);
    match opt_str(section, name, cfg)? {
        None => Ok(None),
        Some(s) if valid_schema(&s) => Ok(Some(s)),
        Some(s) => Err(invalid(
            cfg,
            key,
            format!("'{s}' is not a valid schema name (expected [a-z_][a-z0-9_]{{0,62}})"),
        )),
    }
}
