//! `dfck bench channels` with the real engines: the native worker's bad-case row, native rows
//! end to end (memory, SQLite and, with `TEST_POSTGRES_URI`, PostgreSQL without leaking the
//! password) and the real LangGraph engine (`DFCK_TEST_PYTHON`; PostgreSQL ones also need
//! `TEST_POSTGRES_URI`). The controller itself is tested on a fake interpreter in
//! `tests/bench_channels.rs`.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

fn rows(path: &Path) -> Vec<Map<String, Value>> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| match serde_json::from_str(l) {
            Ok(Value::Object(m)) => m,
            _ => panic!("not a JSON object row: {l}"),
        })
        .collect()
}

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

// ---- native engine ----

#[test]
fn native_worker_rejects_bad_cases_with_a_minimal_row() {
    let o = crate::common::dfck_command()
        .args([
            "bench",
            "channels",
            "--worker-case",
            r#"{"mode":"bogus","backend":"memory","update_count":1,"payload_bytes":1,"repetition":0,"seed":1}"#,
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        text.trim(),
        r#"{"schema_version":2,"benchmark_version":1,"success":false,"error":"unsupported mode: 'bogus'"}"#
    );
}

#[test]
fn native_end_to_end_rows_have_the_v2_identity() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("native.jsonl");
    let o = crate::common::dfck_command()
        .env("TMPDIR", dir.path())
        .env_remove("TEST_POSTGRES_URI")
        .args([
            "bench",
            "channels",
            "--backends",
            "memory,sqlite",
            "--updates",
            "4",
            "--payload-bytes",
            "16",
            "--repetitions",
            "1",
            "--output",
        ])
        .arg(&out)
        .output()
        .expect("run");
    let r = rows(&out);
    assert_eq!(r.len(), 4, "{}", stderr_of(&o));
    let failures = r.iter().filter(|x| x["success"] != true).count();
    assert_eq!(
        o.status.code(),
        Some(if failures > 0 { 1 } else { 0 }),
        "{}",
        stderr_of(&o)
    );
    for row in &r {
        assert_eq!(row["schema_version"], 2);
        assert_eq!(row["engine"], "native");
        assert_eq!(
            row["engine_version"],
            format!("dfck {}", env!("CARGO_PKG_VERSION"))
        );
        assert!(row["python_version"].is_null() && row["langgraph_version"].is_null());
        assert!(row["child_process_ms"].as_f64().is_some());
        if row["success"] == true {
            check_success_rows(
                std::slice::from_ref(row),
                row["backend"].as_str().unwrap_or(""),
            );
        } else {
            assert!(row["error"].as_str().is_some_and(|e| !e.is_empty()));
            assert!(row.contains_key("stderr_tail"));
        }
    }
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        !text.contains("deerflow-checkpoint-benchmark-"),
        "temp path leaked"
    );
    // the case's temporary directories are gone
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("deerflow-checkpoint-benchmark-")
        })
        .collect();
    assert!(left.is_empty());
}

// ---- the real LangGraph engine (DFCK_TEST_PYTHON) ----

fn test_python() -> Option<PathBuf> {
    crate::common::require_python("a real-LangGraph test")
}

fn run_langgraph(
    python: &Path,
    backends: &str,
    extra_env: &[(&str, &str)],
) -> (i32, Vec<Map<String, Value>>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("lg.jsonl");
    let mut c = crate::common::dfck_command();
    c.env_remove("TEST_POSTGRES_URI")
        .env("TMPDIR", dir.path())
        .args(["bench", "channels", "--engine", "langgraph", "--python"])
        .arg(python)
        .args([
            "--backends",
            backends,
            "--updates",
            "4",
            "--payload-bytes",
            "16",
            "--snapshot-frequencies",
            "2,10",
            "--repetitions",
            "1",
            "--output",
        ])
        .arg(&out);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let o = c.output().expect("run");
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    (
        o.status.code().unwrap_or(-1),
        rows(&out),
        format!("{}\n{text}", stderr_of(&o)),
    )
}

fn check_langgraph_rows(rows: &[Map<String, Value>], backend: &str) {
    for row in rows.iter().filter(|r| r["backend"] == backend) {
        assert_eq!(row["engine"], "langgraph");
        assert!(
            row["runtime_version"]
                .as_str()
                .is_some_and(|v| v.starts_with("CPython "))
        );
    }
    check_success_rows(rows, backend);
}

/// The v2 schema of the successful rows of the 4-update, 16-byte workload (any engine): key
/// order, LangGraph's row counts (3 checkpoints and 3 writes per update), the digest, which
/// fields are null per backend, and the RSS source.
fn check_success_rows(rows: &[Map<String, Value>], backend: &str) {
    for row in rows.iter().filter(|r| r["backend"] == backend) {
        let keys: Vec<&str> = row.keys().map(String::as_str).collect();
        assert_eq!(keys, crate::common::rows::v2_keys(), "{backend}");
        assert_eq!(row["checkpoint_rows"], 12);
        assert_eq!(row["write_rows"], 12);
        assert_eq!(row["actual_message_count"], 4);
        assert_eq!(
            row["content_sha256"],
            "6f2703ee86908e5841d830fd79c3661f3a53ba96ebb0933e0906c3f8bc7f460d"
        );
        let blobs_null = row["blob_rows"].is_null();
        assert_eq!(blobs_null, backend == "sqlite", "{backend}");
        assert_eq!(row["durable_db_bytes"].is_null(), backend != "sqlite");
        assert_eq!(row["rss_source"], "VmHWM");
        assert!(row["peak_rss_bytes"].as_u64().is_some_and(|v| v > 0));
    }
}

#[test]
fn langgraph_engine_memory_and_sqlite() {
    let Some(python) = test_python() else { return };
    let (code, rows, log) = run_langgraph(&python, "memory,sqlite", &[]);
    assert_eq!(code, 0, "{log}");
    assert_eq!(rows.len(), 6, "{log}");
    check_langgraph_rows(&rows, "memory");
    check_langgraph_rows(&rows, "sqlite");
    assert!(!log.contains("deerflow-checkpoint-benchmark-"));
}

#[test]
fn langgraph_engine_postgres() {
    let Some(python) = test_python() else { return };
    let Some(url) = crate::common::require_postgres("the PostgreSQL LangGraph test") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("pg.jsonl");
    let o = crate::common::dfck_command()
        .env("TEST_POSTGRES_URI", &url)
        .args(["bench", "channels", "--engine", "langgraph", "--python"])
        .arg(&python)
        .args([
            "--backends",
            "postgres",
            "--updates",
            "4",
            "--payload-bytes",
            "16",
            "--repetitions",
            "1",
            "--output",
        ])
        .arg(&out)
        .output()
        .expect("run");
    let r = rows(&out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert_eq!(r.len(), 2);
    check_langgraph_rows(&r, "postgres");
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    if let Some(pw) = url
        .split("://")
        .nth(1)
        .and_then(|s| s.split('@').next())
        .and_then(|u| u.split(':').nth(1))
    {
        assert!(!text.contains(pw), "password leaked into rows");
    }
}

#[test]
fn langgraph_worker_bad_case_exits_2() {
    let Some(python) = test_python() else { return };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench_worker_langgraph.py");
    let o = std::process::Command::new(python)
        .arg(script)
        .args(["--worker-case", r#"{"mode":"bogus","backend":"memory","update_count":1,"payload_bytes":1,"repetition":0,"seed":1}"#])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        r#"{"schema_version":2,"benchmark_version":1,"success":false,"error":"unsupported mode: 'bogus'"}"#
    );
}

#[test]
fn native_postgres_rows_never_show_the_password() {
    let Some(url) = crate::common::require_postgres("the native PostgreSQL test") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("native-pg.jsonl");
    let o = crate::common::dfck_command()
        .env("TEST_POSTGRES_URI", &url)
        .args([
            "bench",
            "channels",
            "--backends",
            "postgres",
            "--updates",
            "4",
            "--payload-bytes",
            "16",
            "--repetitions",
            "1",
            "--output",
        ])
        .arg(&out)
        .output()
        .expect("run");
    let r = rows(&out);
    assert_eq!(r.len(), 2, "{}", stderr_of(&o));
    for row in &r {
        if row["success"] == true {
            check_success_rows(std::slice::from_ref(row), "postgres");
        }
    }
    let text = format!(
        "{}{}",
        std::fs::read_to_string(&out).unwrap_or_default(),
        stderr_of(&o)
    );
    if let Some(pw) = dfck_bench::env::url_password(&url) {
        assert!(!text.contains(&pw), "password leaked");
    }
}
