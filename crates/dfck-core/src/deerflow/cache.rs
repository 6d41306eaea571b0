//! DeerFlow's checkpoint history cache (`runtime/checkpoint_cache/`): in delta mode DeerFlow
//! keeps each ancestor's `messages` history under `{key_prefix}:{thread_id}:{hash}` and never
//! invalidates an entry, since it assumes checkpoints never change. So every command that
//! deletes or rewrites a thread's rows purges that thread's keys after commit, as DeerFlow's
//! own delete does (`SCAN MATCH {prefix}:{thread}:*` + `UNLINK`).
//!
//! The key prefix is DeerFlow's: `database.checkpoint_cache.key_prefix` when set, else
//! `ckpt-hist:v1:` and the first 12 hex digits of the SHA-256 of the database identity as
//! DeerFlow sees it ([`identity_sqlite`], [`identity_postgres`]) — a container path or a pooler
//! address gives another prefix than dfck's own view, which `--cache-key-prefix` overrides.

use sha2::{Digest, Sha256};
use std::path::Path;

/// DeerFlow's `CACHE_FORMAT_VERSION`.
pub const CACHE_FORMAT_VERSION: u32 = 1;

/// The identity of a SQLite store: `sqlite:` and the absolute path of `deerflow.db` as
/// DeerFlow resolves `database.sqlite_dir`.
pub fn identity_sqlite(db_path: &Path) -> String {
    format!("sqlite:{}", db_path.display())
}

/// The identity of a PostgreSQL store: `postgres:HOST:PORT/DATABASE:SCHEMA` from DeerFlow's
/// `database.postgres_url` as SQLAlchemy's `make_url` splits it (no host: `localhost`; no
/// port: 5432; credentials, driver and query ignored).
pub fn identity_postgres(url: &str, schema: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, database) = rest.split_once('/').unwrap_or((rest, ""));
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6.split_once(']').unwrap_or((v6, ""));
        (h, after.strip_prefix(':').unwrap_or(""))
    } else {
        hostport.split_once(':').unwrap_or((hostport, ""))
    };
    let host = if host.is_empty() { "localhost" } else { host };
    let port = if port.is_empty() { "5432" } else { port };
    let database = percent_encoding::percent_decode_str(database).decode_utf8_lossy();
    format!("postgres:{host}:{port}/{database}:{schema}")
}

/// DeerFlow's default key prefix for a database identity.
pub fn key_prefix(identity: &str) -> String {
    let digest = hex::encode(Sha256::digest(identity.as_bytes()));
    format!("ckpt-hist:v{CACHE_FORMAT_VERSION}:{}", &digest[..12])
}

/// The `SCAN MATCH` pattern of one thread's keys, with the glob characters of the prefix and
/// the thread id escaped (a legacy thread id may hold `*`, `?`, `[`).
pub fn thread_pattern(prefix: &str, thread_id: &str) -> String {
    let mut out = String::new();
    for part in [prefix, ":", thread_id, ":"] {
        for c in part.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('*');
    out
}

/// Where a thread's cache keys live, as DeerFlow's config says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cache {
    /// No cache (full mode, `max_entries: 0`, or no DeerFlow config).
    Off,
    /// An in-process LRU: nothing outside DeerFlow can reach it; restart DeerFlow after
    /// rewriting threads.
    Memory,
    /// Redis at `url`, keys under `prefix` (`prefix_from` says where the prefix came from).
    Redis {
        /// The Redis URL (shown only redacted).
        url: String,
        /// The key prefix.
        prefix: String,
        /// `--cache-key-prefix`, `database.checkpoint_cache.key_prefix` or `database identity`.
        prefix_from: &'static str,
    },
}

/// A failed purge (the thread's rows are already committed; the keys stay until their TTL).
#[derive(Debug, thiserror::Error)]
#[error("purging DeerFlow's history cache at {url}: {reason}")]
pub struct CacheError {
    /// The Redis URL, redacted.
    pub url: String,
    /// Why.
    pub reason: String,
}

/// Connects to Redis once per run; purges threads' keys.
pub struct Purger {
    conn: redis::Connection,
    url: String,
    prefix: String,
}

impl Purger {
    /// Connects to `url` (a `redis://` URL; its password never shown).
    pub fn connect(url: &str, prefix: &str) -> Result<Self, CacheError> {
        let shown = crate::redact::redact_url(url);
        let fail = |e: redis::RedisError| CacheError {
            url: shown.clone(),
            reason: e.to_string(),
        };
        let client = redis::Client::open(url).map_err(fail)?;
        let conn = client
            .get_connection_with_timeout(std::time::Duration::from_secs(10))
            .map_err(fail)?;
        Ok(Purger {
            conn,
            url: shown,
            prefix: prefix.to_owned(),
        })
    }

    /// Unlinks every key of `thread_id`; returns how many.
    pub fn purge(&mut self, thread_id: &str) -> Result<u64, CacheError> {
        let pattern = thread_pattern(&self.prefix, thread_id);
        let fail = |e: redis::RedisError| CacheError {
            url: self.url.clone(),
            reason: e.to_string(),
        };
        let mut cursor: u64 = 0;
        let mut removed = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(500)
                .query(&mut self.conn)
                .map_err(fail)?;
            if !keys.is_empty() {
                let n: u64 = redis::cmd("UNLINK")
                    .arg(&keys)
                    .query(&mut self.conn)
                    .map_err(fail)?;
                removed += n;
            }
            if next == 0 {
                return Ok(removed);
            }
            cursor = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DeerFlow's own function gave these (fixtures/deerflow-schema/app_rows.json).
    #[test]
    fn prefixes_match_deerflows() {
        let cases = [
            (
                identity_sqlite(Path::new("/app/backend/.deer-flow/data/deerflow.db")),
                "ckpt-hist:v1:fb2b8af22c3a",
            ),
            (
                identity_postgres("postgresql://deerflow:secret@db:5432/deerflow", ""),
                "ckpt-hist:v1:4b4bda33bad6",
            ),
            (
                identity_postgres(
                    "postgresql://deerflow:rotated@db/deerflow?sslmode=require",
                    "",
                ),
                "ckpt-hist:v1:4b4bda33bad6",
            ),
            (
                identity_postgres("postgres://deerflow:secret@pgbouncer:6432/deerflow", ""),
                "ckpt-hist:v1:b68e7df2eada",
            ),
            (
                identity_postgres("postgresql://deerflow:secret@db:5432/deerflow", "deerflow"),
                "ckpt-hist:v1:10c009cea774",
            ),
            (
                identity_postgres("postgresql:///deerflow", ""),
                "ckpt-hist:v1:e15457b0cd7d",
            ),
            ("memory".to_owned(), "ckpt-hist:v1:c064fbca9d9d"),
        ];
        for (identity, want) in cases {
            assert_eq!(key_prefix(&identity), want, "{identity}");
        }
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(thread_pattern("p", "a*b"), "p:a\\*b:*");
        assert_eq!(thread_pattern("x[1]", "t?"), "x\\[1\\]:t\\?:*");
    }
}
