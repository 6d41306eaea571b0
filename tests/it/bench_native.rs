//! The native benchmark engine end to end: rows of memory/SQLite (and Postgres when
//! `TEST_POSTGRES_URI` is set) cases, and proof that the stores it writes are real LangGraph
//! stores — `dfck inspect` / `dfck verify` report them healthy, and (when `DFCK_TEST_PYTHON`
//! names a Python with the pinned LangGraph) Python's `SqliteSaver`/`PostgresSaver` read them
//! through the same graph (`scripts/check_native_store.py`).

use dfck_bench::case::{Backend, ChannelCase, ChannelMode, Engine, RowEnv, WorkerContext};
use dfck_bench::digest::channel_workload_sha256;
use dfck_bench::native::write_store;
use serde_json::{Map, Value};
use std::path::Path;

use crate::common::rows::MEASURED_FIELDS as FIELDS;

/// Runs a native channel case and returns its measured fields as the JSON object they
/// serialize to.
fn run_channel_case(c: &ChannelCase, x: &WorkerContext) -> Result<Map<String, Value>, String> {
    let m = dfck_bench::native::run_channel_case(c, x).map_err(|e| e.to_string())?;
    match serde_json::to_value(m) {
        Ok(Value::Object(m)) => Ok(m),
        other => Err(format!("not an object: {other:?}")),
    }
}

fn case(mode: ChannelMode, backend: Backend, n: u64, f: u64) -> ChannelCase {
    ChannelCase {
        mode,
        backend,
        update_count: n,
        payload_bytes: 128,
        repetition: 0,
        seed: 1,
        scenario: "append".into(),
        snapshot_frequency: f,
        engine: Engine::Native,
    }
}

fn ctx(dir: &Path, pg: Option<String>) -> WorkerContext {
    WorkerContext {
        work_dir: dir.to_path_buf(),
        pg_url: pg,
        env: RowEnv::default(),
    }
}

fn pg_url() -> Option<String> {
    crate::common::require_postgres("the native engine's Postgres part")
}

fn python() -> Option<std::path::PathBuf> {
    crate::common::require_python("the Python LangGraph check of native stores")
}

fn u(row: &serde_json::Map<String, Value>, k: &str) -> u64 {
    row[k]
        .as_u64()
        .unwrap_or_else(|| panic!("{k} = {}", row[k]))
}

fn common_checks(row: &serde_json::Map<String, Value>, n: u64) {
    let keys: Vec<&str> = row.keys().map(String::as_str).collect();
    assert_eq!(keys, FIELDS);
    assert_eq!(u(row, "expected_message_count"), n);
    assert_eq!(u(row, "actual_message_count"), n);
    assert_eq!(row["content_sha256"], channel_workload_sha256(n, 128));
    assert_eq!(u(row, "checkpoint_rows"), 3 * n);
    assert_eq!(u(row, "write_rows"), 3 * n);
    assert!(row["storage_stats_error"].is_null());
    let blob = row["blob_bytes"].as_u64().unwrap_or(0);
    assert_eq!(
        u(row, "logical_checkpoint_bytes"),
        u(row, "checkpoint_bytes") + blob
    );
    assert_eq!(u(row, "logical_write_bytes"), u(row, "write_bytes"));
    for k in FIELDS.iter().filter(|k| k.ends_with("_ms")) {
        assert!(row[*k].as_f64().unwrap() >= 0.0, "{k}");
    }
    let p = |k: &str| row[k].as_f64().unwrap();
    assert!(p("write_p50_ms") <= p("write_p90_ms"));
    assert!(p("write_p90_ms") <= p("write_p999_ms"));
    assert!(p("write_p999_ms") <= p("write_max_ms") + 0.01);
}

#[test]
fn memory_rows_full_and_delta() {
    let dir = tempfile::tempdir().unwrap();
    let full = run_channel_case(
        &case(ChannelMode::Full, Backend::Memory, 25, 10),
        &ctx(dir.path(), None),
    )
    .unwrap();
    let delta = run_channel_case(
        &case(ChannelMode::Delta, Backend::Memory, 25, 3),
        &ctx(dir.path(), None),
    )
    .unwrap();
    common_checks(&full, 25);
    common_checks(&delta, 25);
    for r in [&full, &delta] {
        assert_eq!(r["saver_reopen_ms"], 0.0);
        assert!(r["db_bytes"].is_null() && r["durable_db_bytes"].is_null());
        assert!(u(r, "blob_rows") > 0);
    }
    // Same writes in both modes; delta stores far fewer checkpoint bytes.
    assert_eq!(full["logical_write_bytes"], delta["logical_write_bytes"]);
    assert!(u(&delta, "logical_checkpoint_bytes") < u(&full, "logical_checkpoint_bytes"));
    // InMemorySaver keeps one blob per new version: input (__start__), loop (3), loop (1).
    assert_eq!(u(&full, "blob_rows"), 25 * 5);
}

#[test]
fn sqlite_rows_and_store_health() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    for (mode, f) in [(ChannelMode::Full, 10), (ChannelMode::Delta, 10)] {
        let d = dir.path().join(mode.as_str());
        std::fs::create_dir(&d).unwrap();
        let row = run_channel_case(&case(mode, Backend::Sqlite, 50, f), &ctx(&d, None)).unwrap();
        common_checks(&row, 50);
        assert!(u(&row, "db_bytes") > 0 && u(&row, "durable_db_bytes") > 0);
        assert!(u(&row, "wal_bytes") > 0 && u(&row, "shm_bytes") > 0);
        assert!(row["blob_rows"].is_null() && row["blob_bytes"].is_null());
        let text = serde_json::to_string(&row).unwrap();
        assert!(!text.contains(&d.display().to_string()), "work dir leaked");
        rows.push(row);
    }
    // LangGraph: 308.5 B of writes per update at 128 B payload, in both modes.
    assert_eq!(u(&rows[0], "logical_write_bytes"), 50 * 3085 / 10);
    assert_eq!(
        rows[0]["logical_write_bytes"],
        rows[1]["logical_write_bytes"]
    );
    assert!(u(&rows[1], "logical_checkpoint_bytes") * 3 < u(&rows[0], "logical_checkpoint_bytes"));
}

fn dfck_json(args: &[&str]) -> (i32, Value) {
    let out = crate::common::dfck_command().args(args).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: {e}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (code, v)
}

/// Writes native stores, then checks them with dfck's readers and (optionally) Python.
#[test]
fn native_stores_are_langgraph_stores() {
    let dir = tempfile::tempdir().unwrap();
    let n = 60;
    for mode in [ChannelMode::Full, ChannelMode::Delta] {
        let d = dir.path().join(mode.as_str());
        std::fs::create_dir(&d).unwrap();
        let thread = write_store(&case(mode, Backend::Sqlite, n, 10), &ctx(&d, None)).unwrap();
        let db = d.join("checkpoint-benchmark.sqlite");
        let db = db.to_str().unwrap();
        let (code, summary) = dfck_json(&["inspect", "--db", db, "--format", "json"]);
        assert_eq!(code, 0, "{summary}");
        let t = &summary["threads"][0];
        assert_eq!(t["thread_id"], thread);
        assert_eq!(t["checkpoints"], 3 * n);
        assert_eq!(t["writes"], 3 * n);
        assert_eq!(t["mode"], mode.as_str());
        let (code, one) = dfck_json(&["inspect", &thread, "--db", db, "--format", "json"]);
        assert_eq!(code, 0);
        let cks = one["checkpoints"].as_array().unwrap();
        assert_eq!(cks.len() as u64, 3 * n);
        let enc = |e: &str| cks.iter().filter(|c| c["messages_encoding"] == e).count() as u64;
        match mode {
            ChannelMode::Full => assert_eq!(enc("plain"), 2 * n + (n - 1)),
            ChannelMode::Delta => {
                assert_eq!(enc("snapshot"), n / 10);
                assert!(cks.iter().all(|c| c["mode"] == "delta"));
            }
        }
        let (code, v) = dfck_json(&["verify", "--db", db, "--format", "json"]);
        assert_eq!(code, 0, "{v}");
        let errors: Vec<&Value> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["severity"] == "error" || f["severity"] == "warning")
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
        let (code, st) = dfck_json(&[
            "inspect", &thread, "--state", "--db", db, "--format", "json",
        ]);
        assert_eq!(code, 0);
        assert_eq!(st["values"]["messages"].as_array().unwrap().len() as u64, n);
        if let Some(py) = python() {
            let script =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check_native_store.py");
            let out = std::process::Command::new(py)
                .arg(script)
                .args(["--db", db, "--thread", &thread, "--mode", mode.as_str()])
                .args(["--updates", &n.to_string(), "--snapshot-frequency", "10"])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "python check failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn postgres_rows_and_store_health() {
    let Some(url) = pg_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    for (mode, f) in [(ChannelMode::Full, 10), (ChannelMode::Delta, 10)] {
        let row = run_channel_case(
            &case(mode, Backend::Postgres, 40, f),
            &ctx(dir.path(), Some(url.clone())),
        )
        .unwrap();
        common_checks(&row, 40);
        // PostgresSaver: a __start__ blob per input; full adds the messages list per loop step,
        // delta only the snapshots.
        let want = match mode {
            ChannelMode::Full => 80,
            ChannelMode::Delta => 40 + 4,
        };
        assert_eq!(u(&row, "blob_rows"), want);
        assert!(row["db_bytes"].is_null());
        let text = serde_json::to_string(&row).unwrap();
        assert!(!text.contains("dfck-test-pw"));
    }
    // A kept thread reads back through dfck and (optionally) Python.
    let c = case(ChannelMode::Delta, Backend::Postgres, 30, 10);
    let thread = write_store(&c, &ctx(dir.path(), Some(url.clone()))).unwrap();
    let (code, v) = dfck_json(&["verify", &thread, "--db", &url, "--format", "json"]);
    assert_eq!(code, 0, "{v}");
    let (code, st) = dfck_json(&[
        "inspect", &thread, "--state", "--db", &url, "--format", "json",
    ]);
    assert_eq!(code, 0);
    assert_eq!(st["values"]["messages"].as_array().unwrap().len(), 30);
    if let Some(py) = python() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check_native_store.py");
        let out = std::process::Command::new(py)
            .arg(script)
            .args([
                "--pg-url",
                &url,
                "--thread",
                &thread,
                "--mode",
                "delta",
                "--updates",
                "30",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    dfck_bench::native::postgres::PgSaver::open(&url)
        .and_then(|s| s.delete_thread(&thread))
        .unwrap();
}
