//! DeerFlow's history cache as the write commands reach it: the purger the engine calls after
//! each committed thread (Redis), and what the reports say about the cache.

use dfck_core::deerflow::cache::{Cache, Purger};
use dfck_core::error::Error;
use dfck_core::write::ThreadCache;
use std::sync::Mutex;

/// A Redis connection purging threads' keys.
pub struct RedisCache(Mutex<Purger>);

impl ThreadCache for RedisCache {
    fn purge(&self, thread_id: &str) -> Result<u64, String> {
        let mut p = self
            .0
            .lock()
            .map_err(|_| "the cache connection is unusable".to_owned())?;
        p.purge(thread_id).map_err(|e| e.to_string())
    }
}

/// Connects to the cache `cache` describes (Redis only: a memory cache lives inside DeerFlow's
/// processes).
pub fn connect(cache: &Cache) -> Result<Option<RedisCache>, Error> {
    match cache {
        Cache::Redis { url, prefix, .. } => {
            let p = Purger::connect(url, prefix).map_err(|e| Error::Usage(e.to_string()))?;
            Ok(Some(RedisCache(Mutex::new(p))))
        }
        Cache::Memory | Cache::Off => Ok(None),
    }
}

/// The report's account of the cache.
pub fn describe(cache: &Cache) -> crate::commands::delete::CacheReport {
    use crate::commands::delete::CacheReport;
    match cache {
        Cache::Redis {
            prefix, prefix_from, ..
        } => CacheReport {
            kind: "redis",
            key_prefix: Some(prefix.clone()),
            prefix_from: Some(prefix_from),
            note: None,
        },
        Cache::Memory => CacheReport {
            kind: "memory",
            key_prefix: None,
            prefix_from: None,
            note: Some(
                "DeerFlow's history cache is in its processes' memory, out of dfck's reach: restart the DeerFlow processes so they forget the deleted threads' history".into(),
            ),
        },
        Cache::Off => CacheReport {
            kind: "off",
            key_prefix: None,
            prefix_from: None,
            note: None,
        },
    }
}
