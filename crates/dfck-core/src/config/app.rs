//! What DeerFlow's config says about the parts of its database beside the checkpoints that
//! `dfck delete` and the write commands touch: its checkpoint history cache
//! (`database.checkpoint_cache`), the base directory of thread files (`DEER_FLOW_HOME`, else
//! `{project root}/.deer-flow`) and where run events live (`run_events.backend`).

use super::backend::DEFAULT_SQLITE_DIR;
use super::paths::absolute;
use super::yaml::{Node, get, opt_str};
use crate::deerflow::cache;
use crate::error::ConfigError;
use crate::model::ChannelMode;
use std::path::{Path, PathBuf};

/// DeerFlow's settings beside the store.
#[derive(Debug, Clone, PartialEq)]
pub struct AppConfig {
    /// The history cache as DeerFlow would use it.
    pub cache: cache::Cache,
    /// The base directory of thread files.
    pub base_dir: PathBuf,
    /// `run_events.backend` (`memory`, `db`, `jsonl`).
    pub run_events_backend: Option<String>,
    /// With the `jsonl` backend, the root of its event files: `.deer-flow` in the directory
    /// DeerFlow runs in (its `JsonlRunEventStore` ignores `DEER_FLOW_HOME`).
    pub events_dir: Option<PathBuf>,
}

/// Reads the settings from the `database` section (after `$VAR` substitution) and the
/// top-level `run_events` section.
pub(super) fn app_config(
    database: &[(Node, Node)],
    top: &[(Node, Node)],
    cfg: &str,
    deerflow_cwd: &Path,
    base_dir: PathBuf,
    mode: ChannelMode,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<AppConfig, ConfigError> {
    let run_events_backend = match get(top, "run_events") {
        Some(Node::Map(m)) => opt_str(m, "backend", cfg)?,
        _ => None,
    };
    let cache_section: Vec<(Node, Node)> = match get(database, "checkpoint_cache") {
        Some(Node::Map(m)) => m.clone(),
        _ => Vec::new(),
    };
    let kind = opt_str(&cache_section, "type", cfg)?.unwrap_or_else(|| "memory".into());
    let disabled = matches!(get(&cache_section, "max_entries"), Some(Node::Int(0)));
    // DeerFlow keeps the history cache only in delta mode; a Redis cache's keys outlive a
    // switch to full mode (and come back into use after one back), so they are purged anyway.
    let cache = if disabled || (mode != ChannelMode::Delta && kind != "redis") {
        cache::Cache::Off
    } else if kind == "redis" {
        let url = opt_str(&cache_section, "redis_url", cfg)?
            .filter(|u| !u.is_empty())
            .or_else(|| env("DEER_FLOW_CHECKPOINT_CACHE_REDIS_URL"))
            .or_else(|| env("REDIS_URL"))
            .unwrap_or_else(|| "redis://localhost:6379/0".into());
        let configured = opt_str(&cache_section, "key_prefix", cfg)?.filter(|p| !p.is_empty());
        let (prefix, prefix_from) = match configured {
            Some(p) => (p, "database.checkpoint_cache.key_prefix"),
            None => (
                cache::key_prefix(&identity(database, cfg, deerflow_cwd)?),
                "database identity",
            ),
        };
        cache::Cache::Redis {
            url,
            prefix,
            prefix_from,
        }
    } else {
        cache::Cache::Memory
    };
    let events_dir =
        (run_events_backend.as_deref() == Some("jsonl")).then(|| deerflow_cwd.join(".deer-flow"));
    Ok(AppConfig {
        cache,
        base_dir,
        run_events_backend,
        events_dir,
    })
}

/// The database identity DeerFlow hashes into the cache key prefix (always from the
/// `database` section).
fn identity(
    database: &[(Node, Node)],
    cfg: &str,
    deerflow_cwd: &Path,
) -> Result<String, ConfigError> {
    let backend = opt_str(database, "backend", cfg)?.unwrap_or_else(|| "sqlite".into());
    Ok(match backend.as_str() {
        "sqlite" => {
            let dir = opt_str(database, "sqlite_dir", cfg)?
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| DEFAULT_SQLITE_DIR.to_owned());
            let dir = absolute(deerflow_cwd, Path::new(&dir));
            let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
            cache::identity_sqlite(&dir.join("deerflow.db"))
        }
        "postgres" => {
            let url = opt_str(database, "postgres_url", cfg)?.unwrap_or_default();
            let schema = opt_str(database, "postgres_schema", cfg)?.unwrap_or_default();
            cache::identity_postgres(&url, &schema)
        }
        _ => "memory".into(),
    })
}
