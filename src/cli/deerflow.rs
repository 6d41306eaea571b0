//! Options every command that deletes or rewrites threads shares about DeerFlow's surroundings
//! of the store: its checkpoint history cache (purged of every thread changed) and, for
//! `delete`, the base directory of its thread files.

use crate::commands::cache::{self, RedisCache};
use crate::commands::delete::CacheReport;
use clap::Args;
use dfck_core::config::Discovered;
use dfck_core::deerflow::cache::{Cache, identity_postgres, identity_sqlite, key_prefix};
use dfck_core::error::Error;
use dfck_core::target::Target;
use std::path::PathBuf;

/// Where DeerFlow's history cache is, beyond what its config says.
#[derive(Debug, Args, Default)]
pub struct CacheArgs {
    /// DeerFlow's Redis history cache (default: `database.checkpoint_cache.redis_url` of the
    /// DeerFlow config when its type is redis); every thread changed has its keys purged.
    #[arg(long, value_name = "URL", env = "DFCK_CACHE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// The cache's key prefix, when DeerFlow sees the database under another identity than
    /// dfck (a container path, a pooler address): see the dry run for the one computed.
    #[arg(long, value_name = "PREFIX")]
    pub cache_key_prefix: Option<String>,
}

impl CacheArgs {
    /// The cache as the config and these options say: the config's cache, with the URL and
    /// prefix overridden; with only `--redis-url`, the prefix DeerFlow would compute for the
    /// store as dfck reaches it.
    pub fn cache(&self, target: &Target, found: Option<&Discovered>) -> Cache {
        let configured = found.map_or(Cache::Off, |f| f.app.cache.clone());
        let (url, prefix, prefix_from) = match (configured, &self.redis_url) {
            (
                Cache::Redis {
                    url,
                    prefix,
                    prefix_from,
                },
                over,
            ) => (over.clone().unwrap_or(url), prefix, prefix_from),
            (_, Some(url)) => (
                url.clone(),
                key_prefix(&identity(target)),
                "store identity as dfck reaches it",
            ),
            (other, None) => return other,
        };
        match &self.cache_key_prefix {
            Some(p) => Cache::Redis {
                url,
                prefix: p.clone(),
                prefix_from: "--cache-key-prefix",
            },
            None => Cache::Redis {
                url,
                prefix,
                prefix_from,
            },
        }
    }

    /// The cache connected (Redis), and how the report describes it.
    pub fn connect(
        &self,
        target: &Target,
        found: Option<&Discovered>,
        apply: bool,
    ) -> Result<(Option<RedisCache>, CacheReport), Error> {
        let c = self.cache(target, found);
        if self.cache_key_prefix.is_some() && !matches!(c, Cache::Redis { .. }) {
            return Err(Error::Usage(
                "--cache-key-prefix names the keys of a Redis history cache: DeerFlow's config names none here, pass --redis-url too".into(),
            ));
        }
        let conn = if apply { cache::connect(&c)? } else { None };
        Ok((conn, cache::describe(&c)))
    }
}

/// The database identity DeerFlow would hash for `target` if it used it as dfck does.
fn identity(target: &Target) -> String {
    match target {
        Target::Sqlite(p) => {
            identity_sqlite(&std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        }
        Target::Postgres { url, schema } => identity_postgres(url, schema.as_deref().unwrap_or("")),
    }
}

/// DeerFlow's home: `--deerflow-home` (or `DEER_FLOW_HOME`), else the discovered config's.
pub fn base_dir(home: Option<&PathBuf>, found: Option<&Discovered>) -> Option<PathBuf> {
    home.cloned()
        .or_else(|| found.map(|f| f.app.base_dir.clone()))
}

/// A note on stderr of what happens to DeerFlow's history cache of the threads a command
/// changed (`changed`: how many; nothing when none).
pub fn cache_note(report: &CacheReport, changed: usize, dry_run: bool) {
    if changed == 0 {
        return;
    }
    match (&report.key_prefix, &report.note) {
        (Some(prefix), _) => crate::render::note(&format!(
            "dfck: DeerFlow's history cache (redis, keys {prefix}:<thread>:*): the keys of {changed} thread(s) {}",
            if dry_run {
                "would be purged after each commit"
            } else {
                "purged after each commit"
            }
        )),
        (None, Some(note)) => crate::render::note(&format!("dfck: {note}")),
        (None, None) => {}
    }
}

/// The connected cache as the engine takes it.
pub fn thread_cache(
    cache: &Option<RedisCache>,
) -> Option<&(dyn dfck_core::write::ThreadCache + Sync)> {
    cache
        .as_ref()
        .map(|c| c as &(dyn dfck_core::write::ThreadCache + Sync))
}
