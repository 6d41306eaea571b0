//! Helpers shared by the `bench summarize` tests: running dfck, writing JSONL row files, and
//! building DeerFlow v1 and dfck v2 rows.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

pub fn dfck() -> Command {
    let mut c = super::dfck_command();
    c.env("NO_COLOR", "1");
    c
}

/// Writes `rows` (one JSON value per line) to `dir/name`.
pub fn jsonl(dir: &TempDir, name: &str, rows: &[Value]) -> PathBuf {
    let p = dir.path().join(name);
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&p, text).expect("write jsonl");
    p
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// Runs `dfck bench summarize ARGS --json`, asserts `code`, parses stdout.
pub fn summarize_json(args: &[&str], code: i32) -> Value {
    let out = dfck()
        .args(["bench", "summarize", "--json"])
        .args(args)
        .output()
        .expect("run dfck");
    assert_eq!(
        out.status.code(),
        Some(code),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// A DeerFlow v1 channel row (docs/bench-rows.md#channel-rows identity fields).
pub fn ch(mode: &str, rep: u64, success: bool, total: f64) -> Value {
    json!({
        "schema_version": 1, "benchmark_version": 1, "success": success,
        "error": if success { Value::Null } else { json!("boom") }, "profiled": false,
        "mode": mode, "backend": "sqlite", "scenario": "append", "snapshot_frequency": 10,
        "update_count": 10, "payload_bytes": 128, "repetition": rep, "seed": 1,
        "write_total_ms": total,
    })
}

pub fn with(mut v: Value, extra: Value) -> Value {
    if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            m.insert(k.clone(), x.clone());
        }
    }
    v
}

/// A v2 channel row of `engine` at cadence `freq`.
pub fn v2(engine: &str, mode: &str, freq: u64, rep: u64, total: f64) -> Value {
    with(
        ch(mode, rep, true, total),
        json!({"schema_version": 2, "engine": engine, "engine_version": "x",
               "runtime_version": "y", "snapshot_frequency": freq}),
    )
}

/// A DeerFlow v1 production row (docs/bench-rows.md#production-rows).
pub fn pr(mode: &str, freq: Option<u64>, rep: u64, metrics: Value) -> Value {
    with(
        json!({
            "schema_version": 1, "benchmark_version": 1, "benchmark": "checkpoint_production",
            "success": true, "error": null, "profiled": false, "mode": mode,
            "snapshot_frequency": freq, "turns": 10, "payload_bytes": 128,
            "history_limits": [10], "read_repetitions": 2, "repetition": rep, "seed": 1,
        }),
        metrics,
    )
}
