//! End-to-end tests of [`discover`] on temp DeerFlow installs.

use super::paths::normalize;
use super::*;
use crate::model::ChannelMode;
use crate::store::Backend;
use std::collections::HashMap;
use std::fs;

/// A temp "DeerFlow install" and an injected environment.
struct Env {
    dir: tempfile::TempDir,
    vars: HashMap<String, String>,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            vars: HashMap::new(),
        }
    }
    fn root(&self) -> PathBuf {
        normalize(self.dir.path())
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        p
    }
    fn set(mut self, k: &str, v: &str) -> Env {
        self.vars.insert(k.into(), v.into());
        self
    }
    fn run(&self, config: Option<&Path>, dcwd: Option<&Path>) -> Result<Discovered, ConfigError> {
        self.run_in(&self.root(), config, dcwd, None)
    }
    fn run_in(
        &self,
        cwd: &Path,
        config: Option<&Path>,
        dcwd: Option<&Path>,
        env_file: Option<&Path>,
    ) -> Result<Discovered, ConfigError> {
        let vars = self.vars.clone();
        let env = move |k: &str| vars.get(k).cloned();
        discover(&DiscoverOptions {
            config,
            deerflow_cwd: dcwd,
            env_file,
            cwd,
            env: &env,
        })
    }
}

fn sqlite(d: &Discovered) -> PathBuf {
    match &d.target {
        Some(Target::Sqlite(p)) => p.clone(),
        other => panic!("expected sqlite, got {other:?}"),
    }
}

const DB: &str = "backend/.deer-flow/data/deerflow.db";

#[test]
fn config_priority_explicit_then_env_then_project_root_then_cwd() {
    let e = Env::new();
    e.write(DB, "x");
    let a = e.write(
        "a/config.yaml",
        "database:\n  sqlite_dir: ../backend/.deer-flow/data\n",
    );
    let b = e.write(
        "b/config.yaml",
        "database:\n  sqlite_dir: ../backend/.deer-flow/data\n",
    );
    let c = e.write(
        "c/config.yaml",
        "database:\n  sqlite_dir: ../backend/.deer-flow/data\n",
    );
    let cwd_cfg = e.write("config.yaml", "{}\n");
    let e = e.set("DEER_FLOW_CONFIG_PATH", b.to_str().unwrap()).set(
        "DEER_FLOW_PROJECT_ROOT",
        c.parent().unwrap().to_str().unwrap(),
    );

    // 1. explicit
    let d = e.run(Some(&a), None).unwrap();
    assert_eq!((d.config_path, d.config_rule), (a.clone(), "--config"));
    // 2. DEER_FLOW_CONFIG_PATH
    let d = e.run(None, None).unwrap();
    assert_eq!(
        (d.config_path, d.config_rule),
        (b.clone(), "DEER_FLOW_CONFIG_PATH")
    );
    // 3. DEER_FLOW_PROJECT_ROOT
    let mut e = e;
    e.vars.remove("DEER_FLOW_CONFIG_PATH");
    let d = e.run(None, None).unwrap();
    assert_eq!(
        (d.config_path, d.config_rule),
        (c.clone(), "DEER_FLOW_PROJECT_ROOT")
    );
    // 4. the current directory
    e.vars.remove("DEER_FLOW_PROJECT_ROOT");
    let d = e.run(None, None).unwrap();
    assert_eq!(
        (d.config_path.clone(), d.config_rule),
        (cwd_cfg, "current directory")
    );
    assert_eq!(sqlite(&d), e.root().join(DB));
}

#[test]
fn config_errors_and_fallbacks() {
    let e = Env::new().set("DEER_FLOW_CONFIG_PATH", "nope.yaml");
    let err = e.run(None, None).unwrap_err();
    assert!(matches!(
        err,
        ConfigError::ConfigMissing {
            rule: "DEER_FLOW_CONFIG_PATH",
            ..
        }
    ));
    assert!(err.to_string().contains("nope.yaml"), "{err}");

    let err = Env::new()
        .run(Some(Path::new("missing.yaml")), None)
        .unwrap_err();
    assert!(matches!(
        err,
        ConfigError::ConfigMissing {
            rule: "--config",
            ..
        }
    ));

    let e = Env::new().set("DEER_FLOW_PROJECT_ROOT", "no/such/dir");
    let err = e.run(None, None).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    let e = Env::new();
    let f = e.write("file", "");
    let e = e.set("DEER_FLOW_PROJECT_ROOT", f.to_str().unwrap());
    assert!(
        e.run(None, None)
            .unwrap_err()
            .to_string()
            .contains("not a directory")
    );

    // Nothing anywhere.
    let e = Env::new();
    let err = e.run(None, None).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("no store given: pass --db TARGET, set DFCK_DB, or point --config"),
        "{err}"
    );

    // Source-tree fallbacks: ./backend/config.yaml, and ../config.yaml from backend/.
    let e = Env::new();
    e.write(DB, "x");
    let cfg = e.write("backend/config.yaml", "database: {}\n");
    let d = e.run(None, None).unwrap();
    assert_eq!(
        (d.config_path.clone(), d.config_rule),
        (cfg, "source-tree fallback")
    );
    // Config in backend/, no backend/backend: DeerFlow's cwd is backend/.
    assert_eq!(sqlite(&d), e.root().join(DB));
    let e = Env::new();
    e.write(DB, "x");
    let cfg = e.write("config.yaml", "");
    let d = e
        .run_in(&e.root().join("backend"), None, None, None)
        .unwrap();
    assert_eq!(
        (d.config_path.clone(), d.config_rule),
        (cfg, "source-tree fallback")
    );
}

#[test]
fn database_defaults_and_deerflow_cwd() {
    // Missing section, null section, and a dict lacking backend/sqlite_dir: all sqlite
    // at .deer-flow/data relative to <config dir>/backend.
    for text in [
        "",
        "models: []\n",
        "database:\n",
        "database: ~\n",
        "database:\n  checkpoint_channel_mode: delta\n",
    ] {
        let e = Env::new();
        e.write(DB, "x");
        let cfg = e.write("config.yaml", text);
        let d = e.run(Some(&cfg), None).unwrap();
        assert_eq!(d.backend, Backend::Sqlite, "{text:?}");
        assert_eq!(d.source, SOURCE_DATABASE);
        assert_eq!(d.deerflow_cwd, e.root().join("backend"));
        assert_eq!(sqlite(&d), e.root().join(DB), "{text:?}");
    }
    // No backend/ dir: the config's dir is DeerFlow's cwd.
    let e = Env::new();
    e.write(".deer-flow/data/deerflow.db", "x");
    let cfg = e.write("config.yaml", "database: {backend: sqlite}\n");
    let d = e.run(Some(&cfg), None).unwrap();
    assert_eq!(sqlite(&d), e.root().join(".deer-flow/data/deerflow.db"));
    // Explicit --deerflow-cwd and a relative sqlite_dir.
    let e = Env::new();
    e.write("srv/app/state/deerflow.db", "x");
    let cfg = e.write(
        "config.yaml",
        "database:\n  backend: sqlite\n  sqlite_dir: ./state\n",
    );
    let d = e.run(Some(&cfg), Some(Path::new("srv/app"))).unwrap();
    assert_eq!(sqlite(&d), e.root().join("srv/app/state/deerflow.db"));
    // Absolute sqlite_dir ignores the cwd.
    let abs = e.root().join("srv/app/state");
    let cfg = e.write(
        "abs.yaml",
        &format!("database:\n  sqlite_dir: '{}'\n", abs.display()),
    );
    let d = e.run(Some(&cfg), None).unwrap();
    assert_eq!(sqlite(&d), abs.join("deerflow.db"));
    // A missing store file is an error naming the path.
    let cfg = e.write("missing.yaml", "database:\n  sqlite_dir: nowhere\n");
    let err = e.run(Some(&cfg), None).unwrap_err();
    assert!(matches!(err, ConfigError::StoreMissing { .. }));
    assert!(
        err.to_string()
            .contains(&e.root().join("nowhere/deerflow.db").display().to_string()),
        "{err}"
    );
    // --deerflow-cwd must be a directory.
    assert!(matches!(
        e.run(Some(&cfg), Some(Path::new("no-such"))).unwrap_err(),
        ConfigError::DeerflowCwd { .. }
    ));
    // A bad backend.
    let cfg = e.write("bad.yaml", "database:\n  backend: mysql\n");
    assert!(
        e.run(Some(&cfg), None)
            .unwrap_err()
            .to_string()
            .contains("database.backend")
    );
}

#[test]
fn dollar_substitution() {
    let e = Env::new().set("DF_DATA", "state");
    e.write("backend/state/deerflow.db", "x");
    let cfg = e.write(
        "config.yaml",
        "models:\n  - api_key: $UNSET_KEY\ndatabase:\n  sqlite_dir: $DF_DATA\n",
    );
    // Unrelated sections are not resolved (dfck does not need model keys).
    let d = e.run(Some(&cfg), None).unwrap();
    assert_eq!(sqlite(&d), e.root().join("backend/state/deerflow.db"));
    // Only a value that starts with $ is replaced, and entirely.
    let cfg = e.write("c2.yaml", "database:\n  sqlite_dir: state$DF_DATA\n");
    let err = e.run(Some(&cfg), None).unwrap_err();
    assert!(err.to_string().contains("state$DF_DATA"), "{err}");
    // Missing variable: an error naming it (and the key), never a value.
    let cfg = e.write(
        "c3.yaml",
        "database:\n  backend: postgres\n  postgres_url: $DATABASE_URL\n",
    );
    let err = e.run(Some(&cfg), None).unwrap_err();
    assert!(
        matches!(&err, ConfigError::MissingEnv { var, key, .. } if var == "DATABASE_URL" && key == "database.postgres_url")
    );
    assert!(err.to_string().contains("DATABASE_URL"));
}

#[test]
fn dotenv_loading_does_not_override() {
    let e = Env::new().set("DF_DIR", "from-process");
    e.write("backend/from-process/deerflow.db", "x");
    e.write("backend/from-dotenv/deerflow.db", "x");
    e.write(
        ".env",
        "# comment\nexport DF_DIR=from-dotenv\nDF_OTHER='from-dotenv'  # c\n",
    );
    let cfg = e.write("config.yaml", "database:\n  sqlite_dir: $DF_DIR\n");
    let d = e.run(Some(&cfg), None).unwrap();
    assert_eq!(d.env_file, Some(e.root().join(".env")));
    assert_eq!(
        sqlite(&d),
        e.root().join("backend/from-process/deerflow.db")
    );
    let cfg = e.write("c2.yaml", "database:\n  sqlite_dir: $DF_OTHER\n");
    let d = e.run(Some(&cfg), None).unwrap();
    assert_eq!(sqlite(&d), e.root().join("backend/from-dotenv/deerflow.db"));
    // --env-file, relative to dfck's cwd; must exist.
    e.write("other.env", "DF_OTHER=from-process\n");
    let d = e
        .run_in(&e.root(), Some(&cfg), None, Some(Path::new("other.env")))
        .unwrap();
    assert_eq!(
        sqlite(&d),
        e.root().join("backend/from-process/deerflow.db")
    );
    assert!(matches!(
        e.run_in(&e.root(), Some(&cfg), None, Some(Path::new("nope.env")))
            .unwrap_err(),
        ConfigError::EnvFileMissing { .. }
    ));
}

#[test]
fn legacy_checkpointer_sqlite() {
    // Relative to DEER_FLOW_HOME.
    let e = Env::new().set("DEER_FLOW_HOME", "/nonexistent-home-for-test");
    let cfg = e.write("config.yaml", "checkpointer:\n  type: sqlite\n");
    let err = e.run(Some(&cfg), None).unwrap_err();
    assert!(
        err.to_string()
            .contains("/nonexistent-home-for-test/store.db"),
        "{err}"
    );
    let home = e.root().join("home");
    e.write("home/ck.db", "x");
    let e = e.set("DEER_FLOW_HOME", home.to_str().unwrap());
    let cfg = e.write(
        "c2.yaml",
        "database:\n  backend: postgres\n  checkpoint_channel_mode: delta\ncheckpointer:\n  type: sqlite\n  connection_string: ck.db\n",
    );
    let d = e.run(Some(&cfg), None).unwrap();
    assert_eq!((d.backend.as_str(), d.source), ("sqlite", SOURCE_LEGACY));
    assert_eq!(sqlite(&d), home.join("ck.db"));
    // Mode keys still come from `database`.
    assert_eq!(d.checkpoint_channel_mode, ChannelMode::Delta);
    // DEER_FLOW_HOME from the .env beside the config.
    let e = Env::new();
    e.write("h2/store.db", "x");
    e.write(
        ".env",
        &format!("DEER_FLOW_HOME={}\n", e.root().join("h2").display()),
    );
    let cfg = e.write("config.yaml", "checkpointer: {type: sqlite}\n");
    assert_eq!(
        sqlite(&e.run(Some(&cfg), None).unwrap()),
        e.root().join("h2/store.db")
    );

    // No DEER_FLOW_HOME: <project root>/.deer-flow, project root = DEER_FLOW_PROJECT_ROOT
    // else DeerFlow's cwd.
    let e = Env::new();
    e.write("backend/.deer-flow/store.db", "x");
    let cfg = e.write(
        "config.yaml",
        "checkpointer:\n  type: sqlite\n  connection_string: store.db\n",
    );
    assert_eq!(
        sqlite(&e.run(Some(&cfg), None).unwrap()),
        e.root().join("backend/.deer-flow/store.db")
    );
    e.write("proj/.deer-flow/store.db", "x");
    let proj = e.root().join("proj");
    let e = e.set("DEER_FLOW_PROJECT_ROOT", proj.to_str().unwrap());
    assert_eq!(
        sqlite(&e.run(Some(&cfg), None).unwrap()),
        e.root().join("proj/.deer-flow/store.db")
    );
    // Absolute paths and file: URIs are used as is; :memory: is memory.
    let abs = e.root().join("proj/.deer-flow/store.db");
    let cfg = e.write(
        "abs.yaml",
        &format!(
            "checkpointer:\n  type: sqlite\n  connection_string: {}\n",
            abs.display()
        ),
    );
    assert_eq!(sqlite(&e.run(Some(&cfg), None).unwrap()), abs);
    let cfg = e.write(
        "uri.yaml",
        &format!(
            "checkpointer:\n  type: sqlite\n  connection_string: 'file://{}?mode=ro'\n",
            abs.display()
        ),
    );
    assert_eq!(sqlite(&e.run(Some(&cfg), None).unwrap()), abs);
    let cfg = e.write(
        "mem.yaml",
        "checkpointer:\n  type: sqlite\n  connection_string: ':memory:'\n",
    );
    let d = e.run(Some(&cfg), None).unwrap();
    assert_eq!((d.backend.as_str(), d.target.clone()), ("memory", None));
    let cfg = e.write("mem2.yaml", "checkpointer:\n  type: memory\n");
    assert_eq!(e.run(Some(&cfg), None).unwrap().backend, Backend::Memory);
    let cfg = e.write("pg.yaml", "checkpointer:\n  type: postgres\n");
    assert!(
        e.run(Some(&cfg), None)
            .unwrap_err()
            .to_string()
            .contains("checkpointer.connection_string")
    );
    let cfg = e.write("pg2.yaml", "checkpointer:\n  type: postgres\n  connection_string: postgres://u:pw@h/db\n  postgres_schema: ck\n");
    let d = e.run(Some(&cfg), None).unwrap();
    assert_eq!(
        d.target,
        Some(Target::Postgres {
            url: "postgres://u:pw@h/db".into(),
            schema: Some("ck".into())
        })
    );
}

#[test]
fn postgres_url_and_schema() {
    let e = Env::new().set(
        "DATABASE_URL",
        "postgresql+asyncpg://deer:s3cret@db:5432/deerflow",
    );
    let cfg = e.write(
        "config.yaml",
        "database:\n  backend: postgres\n  postgres_url: $DATABASE_URL\n  postgres_schema: deerflow_ck\n",
    );
    let d = e.run(Some(&cfg), None).unwrap();
    assert_eq!(d.backend, Backend::Postgres);
    assert_eq!(
        d.target,
        Some(Target::Postgres {
            url: "postgresql://deer:s3cret@db:5432/deerflow".into(),
            schema: Some("deerflow_ck".into())
        })
    );
    // postgres:// accepted; no schema.
    let cfg = e.write(
        "c2.yaml",
        "database:\n  backend: postgres\n  postgres_url: postgres://h/db\n",
    );
    assert_eq!(
        e.run(Some(&cfg), None).unwrap().target,
        Some(Target::Postgres {
            url: "postgres://h/db".into(),
            schema: None
        })
    );
    // Invalid schema.
    for bad in ["Public", "1abc", "a-b", &"a".repeat(64)] {
        let cfg = e.write("c3.yaml", &format!("database:\n  backend: postgres\n  postgres_url: postgres://h/db\n  postgres_schema: '{bad}'\n"));
        let err = e.run(Some(&cfg), None).unwrap_err();
        assert!(
            err.to_string().contains("database.postgres_schema"),
            "{bad}: {err}"
        );
    }
    assert!(valid_schema("_a1") && valid_schema(&"a".repeat(63)));
    // Missing URL; a wrong scheme is reported without the password.
    let cfg = e.write("c4.yaml", "database:\n  backend: postgres\n");
    assert!(
        e.run(Some(&cfg), None)
            .unwrap_err()
            .to_string()
            .contains("postgres_url")
    );
    let cfg = e.write(
        "c5.yaml",
        "database:\n  backend: postgres\n  postgres_url: mysql://u:hunter2@h/db\n",
    );
    let err = e.run(Some(&cfg), None).unwrap_err().to_string();
    assert!(!err.contains("hunter2") && err.contains("u:***@h"), "{err}");
}

#[test]
fn memory_backend() {
    let e = Env::new();
    let cfg = e.write("config.yaml", "database:\n  backend: memory\n");
    let d = e.run(Some(&cfg), None).unwrap();
    assert_eq!(
        (d.backend.as_str(), d.source, d.target),
        ("memory", SOURCE_DATABASE, None)
    );
}

#[test]
fn mode_keys() {
    let e = Env::new();
    e.write(DB, "x");
    let run = |text: &str| {
        let cfg = e.write("config.yaml", text);
        e.run(Some(&cfg), None)
    };
    let d = run("database: {}\n").unwrap();
    assert_eq!(
        (d.checkpoint_channel_mode.as_str(), d.snapshot_frequency),
        ("full", 10)
    );
    let d = run("database:\n  checkpoint_channel_mode: delta\n  checkpoint_delta:\n    snapshot_frequency: 3\n").unwrap();
    assert_eq!(
        (d.checkpoint_channel_mode.as_str(), d.snapshot_frequency),
        ("delta", 3)
    );
    let d = run("database:\n  checkpoint_delta_snapshot_frequency: 7\n").unwrap();
    assert_eq!(d.snapshot_frequency, 7);
    // Nested wins over the legacy flat key.
    let d = run("database:\n  checkpoint_delta_snapshot_frequency: 7\n  checkpoint_delta: {snapshot_frequency: 5}\n").unwrap();
    assert_eq!(d.snapshot_frequency, 5);
    assert!(
        run("database:\n  checkpoint_channel_mode: partial\n")
            .unwrap_err()
            .to_string()
            .contains("checkpoint_channel_mode")
    );
    assert!(
        run("database:\n  checkpoint_delta: {snapshot_frequency: 0}\n")
            .unwrap_err()
            .to_string()
            .contains("snapshot_frequency")
    );
}
