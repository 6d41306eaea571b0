//! What [`discover`] reads of DeerFlow's surroundings of the store: the history cache, the
//! base directory of thread files and the JSONL event files.

use super::*;
use crate::deerflow::cache::{Cache, identity_postgres, identity_sqlite, key_prefix};
use std::collections::HashMap;
use std::fs;

fn discover_with(yaml: &str, vars: &[(&str, &str)]) -> (tempfile::TempDir, Discovered) {
    let dir = tempfile::tempdir().unwrap();
    let root = super::paths::normalize(dir.path());
    fs::create_dir_all(root.join("backend/.deer-flow/data")).unwrap();
    fs::write(root.join("backend/.deer-flow/data/deerflow.db"), b"x").unwrap();
    fs::write(root.join("config.yaml"), yaml).unwrap();
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let env = move |k: &str| vars.get(k).cloned();
    let found = discover(&DiscoverOptions {
        config: None,
        deerflow_cwd: None,
        env_file: None,
        cwd: &root,
        env: &env,
    })
    .unwrap();
    (dir, found)
}

const DELTA: &str = "database:\n  backend: sqlite\n  checkpoint_channel_mode: delta\n";

#[test]
fn a_redis_cache_without_prefix_hashes_the_database_as_deerflow_sees_it() {
    let yaml = format!(
        "{DELTA}  checkpoint_cache:\n    type: redis\n    redis_url: redis://cache:6379/2\n"
    );
    let (dir, found) = discover_with(&yaml, &[]);
    let db = fs::canonicalize(dir.path())
        .unwrap()
        .join("backend/.deer-flow/data/deerflow.db");
    assert_eq!(
        found.app.cache,
        Cache::Redis {
            url: "redis://cache:6379/2".into(),
            prefix: key_prefix(&identity_sqlite(&db)),
            prefix_from: "database identity",
        }
    );
}

#[test]
fn a_configured_prefix_and_the_url_from_the_environment_win() {
    let yaml = format!("{DELTA}  checkpoint_cache:\n    type: redis\n    key_prefix: team-a\n");
    let (_d, found) = discover_with(
        &yaml,
        &[("DEER_FLOW_CHECKPOINT_CACHE_REDIS_URL", "redis://r:1/0")],
    );
    assert_eq!(
        found.app.cache,
        Cache::Redis {
            url: "redis://r:1/0".into(),
            prefix: "team-a".into(),
            prefix_from: "database.checkpoint_cache.key_prefix",
        }
    );
}

#[test]
fn memory_caches_only_in_delta_mode_redis_in_both_none_when_disabled() {
    let (_d, f) = discover_with(DELTA, &[]);
    assert_eq!(
        f.app.cache,
        Cache::Memory,
        "DeerFlow's default cache is in memory"
    );
    let (_d, f) = discover_with("database:\n  backend: sqlite\n", &[]);
    assert_eq!(f.app.cache, Cache::Off, "full mode keeps no cache");
    let full_redis = "database:\n  backend: sqlite\n  checkpoint_cache:\n    type: redis\n";
    let (_d, f) = discover_with(full_redis, &[]);
    assert!(
        matches!(f.app.cache, Cache::Redis { .. }),
        "keys outlive a mode switch"
    );
    let off = format!("{DELTA}  checkpoint_cache:\n    type: redis\n    max_entries: 0\n");
    let (_d, f) = discover_with(&off, &[]);
    assert_eq!(f.app.cache, Cache::Off);
}

#[test]
fn thread_files_follow_deer_flow_home_and_jsonl_events_the_working_directory() {
    let yaml = format!("{DELTA}run_events:\n  backend: jsonl\n");
    let (dir, f) = discover_with(&yaml, &[("DEER_FLOW_HOME", "/srv/deerflow-home")]);
    assert_eq!(
        f.app.base_dir,
        std::path::PathBuf::from("/srv/deerflow-home")
    );
    let root = super::paths::normalize(dir.path());
    assert_eq!(f.app.events_dir, Some(root.join("backend/.deer-flow")));
    let (_d, f) = discover_with(DELTA, &[]);
    assert_eq!(f.app.events_dir, None);
}

#[test]
fn a_postgres_identity_ignores_credentials_and_query() {
    assert_eq!(
        identity_postgres("postgresql://u:pw@db:5432/app?sslmode=require", "s"),
        "postgres:db:5432/app:s"
    );
}
