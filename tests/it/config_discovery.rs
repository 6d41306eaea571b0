//! Config discovery end to end: the real `dfck` binary, without `--db`, finds the store of a
//! DeerFlow-shaped install built in a temp dir (docs/config.md).

use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Output;

const VARS: &[&str] = &[
    "DFCK_DB",
    "DEER_FLOW_CONFIG_PATH",
    "DEER_FLOW_PROJECT_ROOT",
    "DEER_FLOW_HOME",
    "DATABASE_URL",
    "DF_DATA_DIR",
];

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/sqlite/deerflow.db")
}

/// A temp dir holding a DeerFlow install: `<tmp>/config.yaml` plus the store copied to
/// `<tmp>/<db_rel>`.
fn install(db_rel: &str, config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(db_rel);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::copy(fixture(), &db).unwrap();
    std::fs::write(dir.path().join("config.yaml"), config).unwrap();
    dir
}

/// Runs dfck in `cwd` with a clean DeerFlow environment plus `env`.
fn dfck_in(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = crate::common::dfck_command();
    cmd.args(args).current_dir(cwd);
    for v in VARS {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run dfck")
}

fn inspect_with_config(dir: &Path) -> Output {
    let cfg = dir.join("config.yaml");
    dfck_in(
        dir,
        &[
            "--config",
            cfg.to_str().unwrap(),
            "inspect",
            "--format",
            "json",
        ],
        &[],
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit 0, `t-deerflow` listed, and stderr names the config and the store.
fn assert_found(out: &Output, config: &Path, store: &Path) {
    let err = stderr(out);
    assert!(out.status.success(), "dfck failed: {err}");
    let doc: Json = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let threads: Vec<&str> = doc["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .filter_map(|t| t["thread_id"].as_str())
        .collect();
    assert!(threads.contains(&"t-deerflow"), "{threads:?}");
    let line = err
        .lines()
        .find(|l| l.starts_with("dfck: config "))
        .unwrap_or_else(|| panic!("no config line in stderr: {err}"));
    assert!(line.contains(&config.display().to_string()), "{line}");
    assert!(line.contains(&store.display().to_string()), "{line}");
}

/// Exit 2 and exactly one error line; returns it.
fn assert_one_error(out: &Output) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("dfck: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    errors[0].to_owned()
}

#[test]
fn sqlite_dir_relative_to_backend() {
    let dir = install(
        "backend/.deer-flow/data/deerflow.db",
        "database:\n  backend: sqlite\n  sqlite_dir: .deer-flow/data\n  checkpoint_channel_mode: delta\n",
    );
    let out = inspect_with_config(dir.path());
    assert_found(
        &out,
        &dir.path().join("config.yaml"),
        &dir.path().join("backend/.deer-flow/data/deerflow.db"),
    );
    assert!(stderr(&out).contains("(--config)"), "{}", stderr(&out));
    // The summary shows what the config says next to what the data holds.
    let doc: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["config"]["checkpoint_channel_mode"], "delta");
    assert_eq!(doc["config"]["snapshot_frequency"], 10);
}

#[test]
fn full_mode_config_over_delta_data_is_called_out() {
    let dir = install(
        "backend/.deer-flow/data/deerflow.db",
        "database:\n  backend: sqlite\n  checkpoint_channel_mode: full\n",
    );
    let cfg = dir.path().join("config.yaml");
    let out = dfck_in(
        dir.path(),
        &["--config", cfg.to_str().unwrap(), "inspect"],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("checkpoint_channel_mode: full"), "{text}");
    assert!(text.contains("a full-mode DeerFlow refuses them"), "{text}");
}

#[test]
fn defaults_found_from_the_current_directory_and_env_var() {
    // No database section at all: sqlite in <cwd of DeerFlow>/.deer-flow/data.
    let dir = install("backend/.deer-flow/data/deerflow.db", "models: []\n");
    let store = dir.path().join("backend/.deer-flow/data/deerflow.db");
    let cfg = dir.path().join("config.yaml");
    let out = dfck_in(dir.path(), &["inspect", "--format", "json"], &[]);
    assert_found(&out, &cfg, &store);
    assert!(stderr(&out).contains("(current directory)"));

    let elsewhere = tempfile::tempdir().unwrap();
    let out = dfck_in(
        elsewhere.path(),
        &["inspect", "--format", "json"],
        &[("DEER_FLOW_CONFIG_PATH", cfg.to_str().unwrap())],
    );
    assert_found(&out, &cfg, &store);
    assert!(stderr(&out).contains("(DEER_FLOW_CONFIG_PATH)"));

    // --deerflow-cwd overrides the <config dir>/backend default.
    let out = dfck_in(
        elsewhere.path(),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--deerflow-cwd",
            dir.path().to_str().unwrap(),
            "inspect",
        ],
        &[],
    );
    let line = assert_one_error(&out);
    assert!(
        line.contains(
            &dir.path()
                .join(".deer-flow/data/deerflow.db")
                .display()
                .to_string()
        ),
        "{line}"
    );
}

#[test]
fn dollar_var_from_dotenv_beside_the_config() {
    let dir = install(
        "state/db/deerflow.db",
        "database:\n  backend: sqlite\n  sqlite_dir: $DF_DATA_DIR\n",
    );
    let data = dir.path().join("state/db");
    std::fs::write(
        dir.path().join(".env"),
        format!(
            "# DeerFlow env\nexport DF_DATA_DIR=\"{}\"\n",
            data.display()
        ),
    )
    .unwrap();
    let out = inspect_with_config(dir.path());
    assert_found(
        &out,
        &dir.path().join("config.yaml"),
        &data.join("deerflow.db"),
    );
    assert!(stderr(&out).contains(".env"), "{}", stderr(&out));

    // A variable set in the process wins over the .env file.
    let out = dfck_in(
        dir.path(),
        &["--config", "config.yaml", "inspect"],
        &[("DF_DATA_DIR", "/nonexistent/dir")],
    );
    let line = assert_one_error(&out);
    assert!(line.contains("/nonexistent/dir/deerflow.db"), "{line}");

    // A missing variable names the variable.
    std::fs::remove_file(dir.path().join(".env")).unwrap();
    let out = inspect_with_config(dir.path());
    let line = assert_one_error(&out);
    assert!(line.contains("DF_DATA_DIR"), "{line}");
}

#[test]
fn legacy_checkpointer_section_wins() {
    let dir = install(
        "home/checkpoints.db",
        "database:\n  backend: memory\ncheckpointer:\n  type: sqlite\n  connection_string: checkpoints.db\n",
    );
    let home = dir.path().join("home");
    let cfg = dir.path().join("config.yaml");
    let out = dfck_in(
        dir.path(),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "inspect",
            "--format",
            "json",
        ],
        &[("DEER_FLOW_HOME", home.to_str().unwrap())],
    );
    assert_found(&out, &cfg, &home.join("checkpoints.db"));
    assert!(stderr(&out).contains("legacy"), "{}", stderr(&out));
}

#[test]
fn memory_backend_is_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "database:\n  backend: memory\n",
    )
    .unwrap();
    let out = inspect_with_config(dir.path());
    let line = assert_one_error(&out);
    assert!(line.contains("memory"), "{line}");
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

#[test]
fn postgres_password_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "database:\n  backend: postgres\n  postgres_url: $DATABASE_URL\n  postgres_schema: deerflow\n",
    )
    .unwrap();
    // Port 1 on loopback: refused at once, whatever the store layer does with it.
    let out = dfck_in(
        dir.path(),
        &["--config", "config.yaml", "inspect"],
        &[(
            "DATABASE_URL",
            "postgresql+asyncpg://deer:Sup3rS3cretPw@127.0.0.1:1/deerflow",
        )],
    );
    let err = stderr(&out);
    assert_one_error(&out);
    assert!(!err.contains("Sup3rS3cretPw"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Sup3rS3cretPw"));
    let config_line = err
        .lines()
        .find(|l| l.starts_with("dfck: config "))
        .unwrap();
    assert!(
        config_line.contains("postgresql://deer:***@127.0.0.1:1/deerflow"),
        "{config_line}"
    );

    // A bad schema is refused before connecting, still without the password.
    std::fs::write(
        dir.path().join("config.yaml"),
        "database:\n  backend: postgres\n  postgres_url: 'postgres://deer:Sup3rS3cretPw@127.0.0.1:1/db'\n  postgres_schema: Bad-Schema\n",
    )
    .unwrap();
    let out = dfck_in(dir.path(), &["--config", "config.yaml", "inspect"], &[]);
    let line = assert_one_error(&out);
    assert!(line.contains("postgres_schema"), "{line}");
    assert!(!stderr(&out).contains("Sup3rS3cretPw"));
}

#[test]
fn missing_config_via_env_var() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope/config.yaml");
    let out = dfck_in(
        dir.path(),
        &["inspect"],
        &[("DEER_FLOW_CONFIG_PATH", missing.to_str().unwrap())],
    );
    let line = assert_one_error(&out);
    assert!(line.contains("DEER_FLOW_CONFIG_PATH"), "{line}");
    assert!(line.contains(&missing.display().to_string()), "{line}");
    assert_eq!(stderr(&out).lines().count(), 1);
}

#[test]
fn nothing_found_keeps_the_usage_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = dfck_in(dir.path(), &["inspect"], &[]);
    let line = assert_one_error(&out);
    assert!(
        line.contains(
            "no store given: pass --db TARGET, set DFCK_DB, or point --config at a DeerFlow config.yaml"
        ),
        "{line}"
    );
}

#[test]
fn db_flag_skips_discovery() {
    // A broken config is never read when --db is given.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), "database: [\n").unwrap();
    let db = fixture();
    let out = dfck_in(
        dir.path(),
        &["--db", db.to_str().unwrap(), "inspect", "--format", "json"],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("dfck: config"));
}
