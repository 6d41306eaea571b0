//! Issue #6's "done when", end to end: the native channel matrix on memory, SQLite and the
//! PostgreSQL test server (`--updates 10,100 --repetitions 2`), every pair through the digest
//! gate, then `bench summarize` as table, JSON, CSV and SVG; and the same command with
//! `--engine langgraph` when the pinned Python is available (`DFCK_TEST_PYTHON`).

use crate::common::*;
use serde_json::Value as Json;

fn run_matrix(extra: &[&str], out: &std::path::Path, backends: &str) -> Vec<Json> {
    let mut args = vec![
        "bench",
        "channels",
        "--backends",
        backends,
        "--updates",
        "10,100",
        "--repetitions",
        "2",
    ];
    args.extend_from_slice(extra);
    let o = crate::common::dfck_command()
        .args(&args)
        .arg("--output")
        .arg(out)
        .output()
        .expect("run dfck");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {stderr}");
    let rows: Vec<Json> = std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let n_backends = backends.split(',').count();
    assert_eq!(rows.len(), n_backends * 2 * 2 * 2, "{stderr}");
    for r in &rows {
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(r["schema_version"], 2);
        let n = r["update_count"].as_u64().unwrap();
        assert_eq!(r["actual_message_count"].as_u64().unwrap(), n);
        assert_eq!(
            r["content_sha256"].as_str().unwrap(),
            dfck_bench::digest::channel_workload_sha256(n, 128)
        );
        assert_eq!(r["checkpoint_rows"].as_u64().unwrap(), 3 * n, "{r}");
        assert_eq!(r["write_rows"].as_u64().unwrap(), 3 * n, "{r}");
    }
    rows
}

fn summarize_all_ways(out: &std::path::Path, dir: &std::path::Path) {
    let dfck = |args: &[&str]| {
        crate::common::dfck_command()
            .args(args)
            .output()
            .expect("run dfck")
    };
    let p = out.to_str().unwrap();
    let table = dfck(&["bench", "summarize", p]);
    assert_eq!(table.status.code(), Some(0));
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("write_total_ms") && text.contains("ratio"),
        "{text}"
    );
    let json = dfck(&["bench", "summarize", p, "--json"]);
    let groups: Json = serde_json::from_slice(&json.stdout).unwrap();
    for g in groups.as_array().unwrap() {
        assert_eq!(g["paired_repetitions"], 2, "{g}");
        assert!(
            g["ratio_logical_checkpoint_bytes"].as_f64().unwrap() < 1.5,
            "{g}"
        );
    }
    let csv = dfck(&["bench", "summarize", p, "--csv"]);
    assert!(String::from_utf8_lossy(&csv.stdout).starts_with("engine,backend"));
    let svg = dir.join("channels.svg");
    let plot = dfck(&["bench", "summarize", p, "--plot", svg.to_str().unwrap()]);
    assert_eq!(plot.status.code(), Some(0));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

#[test]
fn native_channel_matrix_on_every_backend_summarizes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("native.jsonl");
    let backends = if pg_server().is_some() {
        "memory,sqlite,postgres"
    } else {
        "memory,sqlite"
    };
    let rows = run_matrix(&[], &out, backends);
    assert!(rows.iter().all(|r| r["engine"] == "native"));
    summarize_all_ways(&out, dir.path());
    println!(
        "bench channels (native, {backends}): {} rows, all paired",
        rows.len()
    );
}

#[test]
fn langgraph_channel_matrix_on_every_backend_summarizes() {
    let Some(python) = crate::common::require_python("langgraph engine") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("langgraph.jsonl");
    let backends = if pg_server().is_some() {
        "memory,sqlite,postgres"
    } else {
        "memory,sqlite"
    };
    let rows = run_matrix(
        &[
            "--engine",
            "langgraph",
            "--python",
            &python.to_string_lossy(),
        ],
        &out,
        backends,
    );
    assert!(rows.iter().all(|r| r["engine"] == "langgraph"));
    summarize_all_ways(&out, dir.path());
    println!(
        "bench channels (langgraph, {backends}): {} rows, all paired",
        rows.len()
    );
}
