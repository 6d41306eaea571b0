//! The v2 JSONL row schema of `dfck bench channels` and `dfck bench production` stays put: the
//! same small native cases as the committed samples in `fixtures/bench/dfck-v2-*.sample.jsonl`
//! produce rows with exactly the same keys in the same order (recursively; values such as
//! timings may differ). See docs/bench-rows.md.

use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The key sequence of a value, recursively (`key{...}` for nested objects, `[...]` for arrays
/// holding objects).
fn shape(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let inner: Vec<String> = m.iter().map(|(k, v)| format!("{k}{}", shape(v))).collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) if a.iter().any(Value::is_object) => {
            let inner: Vec<String> = a.iter().map(shape).collect();
            format!("[{}]", inner.join(","))
        }
        _ => String::new(),
    }
}

fn shapes(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| shape(&serde_json::from_str::<Value>(l).expect("row is JSON")))
        .collect()
}

/// Runs `dfck bench ARGS --output <tmp>` and compares its rows' shapes with `sample`.
fn check(sample: &str, args: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("rows.jsonl");
    let run = crate::common::dfck_command()
        .arg("bench")
        .args(args)
        .arg("--output")
        .arg(&out)
        .env_remove("TEST_POSTGRES_URI")
        .output()
        .expect("run dfck");
    assert!(
        run.status.code() == Some(0) || run.status.code() == Some(1),
        "dfck bench {args:?}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let want = shapes(&root().join("fixtures/bench").join(sample));
    let got = shapes(&out);
    assert_eq!(got.len(), want.len(), "row count of {sample}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "row {i} of {sample}: key order differs");
    }
}

#[test]
fn channel_rows_keep_the_v2_schema() {
    check(
        "dfck-v2-channels.sample.jsonl",
        &[
            "channels",
            "--modes",
            "full,delta",
            "--backends",
            "memory,sqlite",
            "--updates",
            "3",
            "--repetitions",
            "1",
        ],
    );
}

#[test]
fn channel_failure_rows_keep_the_v2_schema() {
    check(
        "dfck-v2-channels-failure.sample.jsonl",
        &[
            "channels",
            "--modes",
            "delta",
            "--backends",
            "sqlite",
            "--updates",
            "2000",
            "--repetitions",
            "1",
            "--timeout-seconds",
            "0.001",
        ],
    );
}

#[test]
fn production_rows_keep_the_v2_schema() {
    check(
        "dfck-v2-production.sample.jsonl",
        &[
            "production",
            "--modes",
            "full,delta",
            "--backends",
            "sqlite",
            "--turns",
            "3",
            "--snapshot-frequencies",
            "2",
            "--history-limits",
            "2,5",
            "--read-repetitions",
            "1",
            "--repetitions",
            "1",
        ],
    );
}

#[test]
fn production_failure_rows_keep_the_v2_schema() {
    check(
        "dfck-v2-production-failure.sample.jsonl",
        &[
            "production",
            "--modes",
            "full",
            "--backends",
            "sqlite",
            "--turns",
            "300",
            "--history-limits",
            "2",
            "--read-repetitions",
            "1",
            "--repetitions",
            "1",
            "--timeout-seconds",
            "0.001",
        ],
    );
}

/// The worker's minimal row for an unusable case (printed on stdout; the process exits 2).
#[test]
fn bad_case_rows_keep_their_keys() {
    for (sub, want) in [
        (
            "channels",
            r#"{"schema_version":2,"benchmark_version":1,"success":false,"error":"invalid case JSON: expected a JSON object"}"#,
        ),
        (
            "production",
            r#"{"schema_version":2,"benchmark_version":1,"success":false,"error":"invalid case: expected value at line 1 column 2","benchmark":"checkpoint_production"}"#,
        ),
    ] {
        let run = crate::common::dfck_command()
            .args(["bench", sub, "--worker-case", "[1]"])
            .output()
            .expect("run dfck");
        assert_eq!(run.status.code(), Some(2));
        assert_eq!(String::from_utf8_lossy(&run.stdout).trim_end(), want);
    }
}
