//! Store targets: `--db` / `DFCK_DB` text → a store to open. Passwords never leave this
//! module unredacted.

use crate::error::StoreError;
pub use crate::redact::redact_url;
use crate::store::Store;
use crate::store::postgres::PostgresStore;
use crate::store::sqlite::SqliteStore;
use std::path::PathBuf;

/// Where a store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL URL (kept whole; show it only through [`redact_url`]) and the schema
    /// (`search_path`) to use, if any.
    Postgres {
        /// libpq URL, password included.
        url: String,
        /// `--pg-schema` / DeerFlow's `postgres_schema`.
        schema: Option<String>,
    },
}

/// Whether `s` is a libpq keyword/value connection string (`host=… dbname=…`), not a path.
fn is_keyword_dsn(s: &str) -> bool {
    let Some((key, _)) = s.split_once('=') else {
        return false;
    };
    crate::store::postgres::conninfo::is_keyword(key.trim())
}

impl Target {
    /// Parses a `--db` value.
    pub fn parse(s: &str) -> Result<Target, StoreError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(StoreError::Target("empty --db value".into()));
        }
        if s.starts_with("postgresql://") || s.starts_with("postgres://") || is_keyword_dsn(s) {
            return Ok(Target::Postgres {
                url: s.to_owned(),
                schema: None,
            });
        }
        if let Some(rest) = s.strip_prefix("sqlite://") {
            // sqlite:///abs/path.db → /abs/path.db; sqlite://rel/path.db → rel/path.db
            if rest.is_empty() {
                return Err(StoreError::Target(format!("no path in '{s}'")));
            }
            return Ok(Target::Sqlite(PathBuf::from(rest)));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(StoreError::Target(format!(
                "unsupported store URL scheme '{scheme}://' in '{}' (use a file path, sqlite://, postgresql:// or postgres://)",
                redact_url(s)
            )));
        }
        Ok(Target::Sqlite(PathBuf::from(s)))
    }

    /// How the target is shown to a person.
    pub fn display(&self) -> String {
        match self {
            Target::Sqlite(p) => p.display().to_string(),
            Target::Postgres { url, schema: None } => redact_url(url),
            Target::Postgres {
                url,
                schema: Some(s),
            } => format!("{} (schema {s})", redact_url(url)),
        }
    }

    /// Opens the store read-only.
    pub fn open_read_only(&self) -> Result<Box<dyn Store>, StoreError> {
        match self {
            Target::Sqlite(p) => Ok(Box::new(SqliteStore::open_read_only(p)?)),
            Target::Postgres { url, schema } => Ok(Box::new(PostgresStore::open_read_only(
                url,
                schema.as_deref(),
            )?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_redacts() {
        assert_eq!(
            Target::parse("sqlite:///a/b.db").unwrap(),
            Target::Sqlite("/a/b.db".into())
        );
        assert_eq!(
            Target::parse("sqlite://rel/b.db").unwrap(),
            Target::Sqlite("rel/b.db".into())
        );
        assert_eq!(
            Target::parse("x.db").unwrap(),
            Target::Sqlite("x.db".into())
        );
        assert!(
            Target::parse("mysql://u:p@h/db")
                .unwrap_err()
                .to_string()
                .contains("u:***@h")
        );
        assert_eq!(
            redact_url("postgresql://me:s3cr@t@host:5432/db?password=x&sslmode=require"),
            "postgresql://me:***@host:5432/db?password=***&sslmode=require"
        );
        assert_eq!(redact_url("postgres://host/db"), "postgres://host/db");
        // libpq keyword DSNs are PostgreSQL targets, never file paths, and hide passwords,
        // quoted or not.
        let dsn = "host=127.0.0.1 port=5432 dbname=x user=u password='p w\\'d' sslmode=disable";
        assert!(matches!(
            Target::parse(dsn).unwrap(),
            Target::Postgres { .. }
        ));
        assert_eq!(
            redact_url(dsn),
            "host=127.0.0.1 port=5432 dbname=x user=u password=*** sslmode=disable"
        );
        assert_eq!(
            redact_url("password = secret host=h"),
            "password = *** host=h"
        );
        assert_eq!(
            Target::parse("./odd=name.db").unwrap(),
            Target::Sqlite("./odd=name.db".into())
        );
    }
}
