//! The child side of `dfck bench channels` (bench-harness.md §1.5.7): `dfck bench channels
//! --worker-case '<case JSON>'` parses and validates the case, runs it with the native engine
//! inside a fresh temporary directory, prints one compact JSON row on stdout and exits 0
//! (success), 1 (the case failed) or 2 (the case JSON is unusable; minimal row).
//!
//! # THE v2 channel row schema (`schema_version: 2`, `benchmark_version: 1`)
//!
//! Both engines (`native`: [`crate::bench::native::run_channel_case`]; `langgraph`:
//! `scripts/bench_worker_langgraph.py`) emit exactly these keys, in this order. DeerFlow's v1
//! keys (§2.10) keep their names, meaning and relative order; v2 keys are inserted next to
//! their family and marked (v2).
//!
//! Identity ([`crate::bench::case::channel_base_row`], both success and failure rows):
//! 1. `schema_version` (2), `benchmark_version` (1), `success`, `error`, `profiled` (false),
//!    `git_sha`, `python_version` (null for native), `langgraph_version` (null for native),
//!    `platform`, `engine` (v2: `native`|`langgraph`), `engine_version` (v2: `dfck 0.1.0` /
//!    the langgraph package version), `runtime_version` (v2: `rustc 1.x.y` or `rust` /
//!    `CPython 3.11.7`), `mode`, `backend`, `scenario`, `snapshot_frequency`, `update_count`,
//!    `payload_bytes`, `repetition`, `seed`.
//!
//! Metrics (the engine's map, only on success, in this order):
//! 2. `write_total_ms` — wall time of the whole N-update loop.
//! 3. `write_p50_ms`, `write_p90_ms` (v2), `write_p95_ms`, `write_p99_ms`, `write_p999_ms` (v2),
//!    `write_max_ms` (v2), `write_mean_ms` (v2), `write_stddev_ms` (v2) — per-update latency.
//!    Percentiles use HdrHistogram's `value_at_quantile` rule (nearest rank: the smallest
//!    sample `v` with `count(x <= v) >= max(1, ceil(q * n))`); the native engine may read them
//!    from an HdrHistogram (3 significant digits), the Python engine computes them exactly.
//!    `stddev` is the population standard deviation. (This replaces DeerFlow's type-7
//!    interpolation for the percentile fields, per §9.6.)
//! 4. `write_first_window_ms`, `write_middle_window_ms`, `write_last_window_ms` — DeerFlow's
//!    chronological window medians ([`crate::bench::stats::window_median`]).
//! 5. `warm_read_ms`.
//! 6. `logical_checkpoint_bytes`, `logical_write_bytes`, `checkpoint_rows`, `write_rows`,
//!    `checkpoint_bytes` (v2), `blob_rows` (v2), `blob_bytes` (v2), `write_bytes` (v2),
//!    `storage_stats_error`. Per backend, for the case's thread only:
//!    - memory: `checkpoint_rows` = stored checkpoints; `checkpoint_bytes` = Σ(serialized
//!      checkpoint + serialized metadata); `blob_rows`/`blob_bytes` = channel-version blobs;
//!      `write_rows`/`write_bytes` = pending writes / Σ write blob bytes.
//!    - sqlite: `checkpoint_bytes` = Σ(length(checkpoint)+length(metadata)) of `checkpoints`;
//!      `blob_rows`/`blob_bytes` = **null** (SqliteSaver stores channel values inline);
//!      `write_rows`/`write_bytes` from `writes` (Σ length(value)).
//!    - postgres: `checkpoint_bytes` = Σ(octet_length(checkpoint::text) +
//!      octet_length(metadata::text)) of `checkpoints`; `blob_rows`/`blob_bytes` from
//!      `checkpoint_blobs` (Σ coalesce(octet_length(blob),0)); `write_rows`/`write_bytes` from
//!      `checkpoint_writes` (Σ octet_length(blob)).
//!    - always: `logical_checkpoint_bytes` = `checkpoint_bytes` + (`blob_bytes` or 0) (DeerFlow's
//!      definition for memory and sqlite) and `logical_write_bytes` = `write_bytes`.
//!    - if collecting them fails, all eight are null, `storage_stats_error` holds the safe error
//!      text and the row stays successful; otherwise `storage_stats_error` is null.
//! 7. `cold_read_ms`, `saver_reopen_ms` (memory 0.0; sqlite and postgres: open a new saver and
//!    run its setup), `db_bytes`, `wal_bytes`, `shm_bytes`, `durable_db_bytes` (sqlite only;
//!    null for memory and postgres).
//! 8. `expected_message_count`, `actual_message_count`, `content_sha256`, `reducer_replay_ms`.
//!
//! Appended by the worker (success rows only): `peak_rss_bytes` (int|null), `rss_source`
//! (v2: `VmHWM` from `/proc/self/status`, else `getrusage`, else null).
//!
//! Appended by the controller ([`crate::bench::controller`]): `child_process_ms` on every row the
//! child printed; when the child did not report `peak_rss_bytes` on a successful row the
//! controller fills it from its own observation and sets `rss_source` to `parent:rusage`
//! (RUSAGE_CHILDREN grew while this child ran: exact) or `parent:VmHWM` (sampled while the
//! child ran: a lower bound); `stderr_tail` (v2) on every failure row (last 2000 characters of
//! the child's stderr, redacted; `""` when the child wrote nothing).
//!
//! Failure rows: a failure in the child keeps the identity fields (+ `child_process_ms`,
//! `stderr_tail`); a controller-built failure (timeout, no result, malformed JSON) keeps the
//! identity fields + `stderr_tail`; the cross-mode gate keeps every field and overwrites only
//! `success` and `error`. Rows never contain the temporary directory, a database path or a
//! PostgreSQL URL/password.
//!
//! Workload facts both engines share (§2.6): message `i` has id `bench-message-{i:08}`,
//! content `"x" × payload_bytes`, human when `i` is even, ai when odd; thread
//! `checkpoint-bench-{seed}-{repetition}` (memory, sqlite) and, on postgres, that id plus
//! `-{unique suffix}` (the thread is deleted after the case); namespace `""`.

use crate::bench::case::{ChannelCase, Engine, RowEnv, WorkerContext, channel_base_row};
use crate::bench::env;
use serde_json::{Map, Value, json};
use std::io::Write;

/// The temporary-directory prefix of a channel case (§1.5.7).
pub const TEMP_PREFIX: &str = "deerflow-checkpoint-benchmark-";
/// The environment variable through which the controller hands the PostgreSQL URL to children.
pub const PG_URL_ENV: &str = "DFCK_BENCH_PG_URL";

/// Exit code of a worker whose case succeeded.
pub const WORKER_OK: i32 = 0;
/// Exit code of a worker whose case failed.
pub const WORKER_FAILED: i32 = 1;
/// Exit code of a worker that could not decode or validate its case.
pub const WORKER_BAD_CASE: i32 = 2;

/// The minimal row of a worker that could not use its case (§1.5.7, schema v2).
pub fn bad_case_row(error: &str) -> Map<String, Value> {
    let v = json!({
        "schema_version": crate::bench::case::SCHEMA_VERSION,
        "benchmark_version": crate::bench::case::BENCHMARK_VERSION,
        "success": false,
        "error": env::safe_error(error, None, &[]),
    });
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn field_text(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

/// Decodes and validates a case the way DeerFlow's worker does, with DeerFlow-style messages
/// (`unsupported mode: 'bogus'`, `missing required field 'seed'`, …).
pub fn parse_case(json_text: &str) -> Result<ChannelCase, String> {
    let v: Value =
        serde_json::from_str(json_text).map_err(|e| format!("invalid case JSON: {e}"))?;
    let Value::Object(m) = &v else {
        return Err("invalid case JSON: expected a JSON object".into());
    };
    for key in [
        "mode",
        "backend",
        "update_count",
        "payload_bytes",
        "repetition",
        "seed",
    ] {
        if !m.contains_key(key) {
            return Err(format!("missing required field '{key}'"));
        }
    }
    if let Some(x) = m.get("mode") {
        if !matches!(x.as_str(), Some("full" | "delta")) {
            return Err(format!("unsupported mode: {}", field_text(x)));
        }
    }
    if let Some(x) = m.get("backend") {
        if !matches!(x.as_str(), Some("memory" | "sqlite" | "postgres")) {
            return Err(format!("unsupported backend: {}", field_text(x)));
        }
    }
    if let Some(x) = m.get("engine") {
        if !matches!(x.as_str(), Some("native" | "langgraph")) {
            return Err(format!("unsupported engine: {}", field_text(x)));
        }
    }
    if let Some(x) = m.get("scenario") {
        if x.as_str() != Some("append") {
            return Err(format!("unsupported scenario: {}", field_text(x)));
        }
    }
    for key in [
        "update_count",
        "payload_bytes",
        "snapshot_frequency",
        "repetition",
    ] {
        if let Some(x) = m.get(key) {
            match x.as_i64() {
                Some(n) if n > 0 => {}
                Some(n) if n == 0 && key == "repetition" => {}
                Some(_) if key == "repetition" => {
                    return Err("repetition must be non-negative".into());
                }
                Some(_) => return Err(format!("{key} must be positive")),
                None => return Err(format!("{key} must be an integer, got {x}")),
            }
        }
    }
    if m.get("seed").and_then(Value::as_i64).is_none() {
        return Err(format!(
            "seed must be an integer, got {}",
            m.get("seed").unwrap_or(&Value::Null)
        ));
    }
    let case: ChannelCase =
        serde_json::from_value(v.clone()).map_err(|e| format!("invalid case: {e}"))?;
    case.validate()?;
    Ok(case)
}

/// The identity of the native engine (§9.1).
pub fn native_row_env() -> RowEnv {
    RowEnv {
        git_sha: env::git_sha(),
        python_version: None,
        langgraph_version: None,
        platform: env::platform(),
        engine_version: format!("dfck {}", env!("CARGO_PKG_VERSION")),
        runtime_version: env::rust_runtime_version(),
    }
}

/// Runs one case in this process and returns the row and the worker's exit code. Never
/// panics: an engine panic becomes a failure row.
pub fn run_worker_case(case_json: &str) -> (Map<String, Value>, i32) {
    let case = match parse_case(case_json) {
        Ok(c) => c,
        Err(e) => return (bad_case_row(&e), WORKER_BAD_CASE),
    };
    if case.engine != Engine::Native {
        return (
            bad_case_row(&format!(
                "dfck's worker runs the native engine; this case asks for '{}' (run scripts/bench_worker_langgraph.py)",
                case.engine.as_str()
            )),
            WORKER_BAD_CASE,
        );
    }
    let row_env = native_row_env();
    let row = channel_base_row(&case, &row_env);
    run_in_child(row, row_env, TEMP_PREFIX, |ctx| {
        crate::bench::native::run_channel_case(&case, ctx)
    })
}

/// Runs a native case in this process: a fresh temporary directory with `temp_prefix`, the
/// PostgreSQL URL from [`PG_URL_ENV`], `run` under `catch_unwind` (a panic becomes a failure
/// row), then the measured fields merged after `row`'s identity fields plus `peak_rss_bytes`
/// and `rss_source`. Errors are redacted (work dir, home, URLs, passwords).
pub fn run_in_child(
    mut row: Map<String, Value>,
    row_env: RowEnv,
    temp_prefix: &str,
    run: impl FnOnce(&WorkerContext) -> Result<Map<String, Value>, String>,
) -> (Map<String, Value>, i32) {
    let pg_url = std::env::var(PG_URL_ENV).ok().filter(|u| !u.is_empty());
    let secrets: Vec<String> = pg_url.iter().filter_map(|u| env::url_password(u)).collect();
    let dir = match tempfile::Builder::new().prefix(temp_prefix).tempdir() {
        Ok(d) => d,
        Err(e) => {
            fail(
                &mut row,
                &format!("cannot create the case's temporary directory: {e}"),
                None,
                &secrets,
            );
            return (row, WORKER_FAILED);
        }
    };
    let ctx = WorkerContext {
        work_dir: dir.path().to_path_buf(),
        pg_url,
        env: row_env,
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&ctx)));
    let outcome = match result {
        Ok(r) => r,
        Err(p) => Err(format!("native engine panicked: {}", panic_text(&p))),
    };
    let code = match outcome {
        Ok(metrics) => {
            for (k, v) in metrics {
                row.insert(k, v);
            }
            let (rss, source) = env::peak_rss_self();
            row.insert("peak_rss_bytes".into(), json!(rss));
            row.insert("rss_source".into(), json!(source));
            WORKER_OK
        }
        Err(e) => {
            fail(&mut row, &e, Some(dir.path()), &secrets);
            WORKER_FAILED
        }
    };
    drop(dir);
    (row, code)
}

fn fail(
    row: &mut Map<String, Value>,
    msg: &str,
    work_dir: Option<&std::path::Path>,
    secrets: &[String],
) {
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    row.insert("success".into(), Value::Bool(false));
    row.insert(
        "error".into(),
        Value::String(env::safe_error(msg, work_dir, &secrets)),
    );
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// `dfck bench channels --worker-case JSON`: runs the case, prints the row as compact JSON on
/// stdout and returns the exit code (§1.5.7).
pub fn worker_main(case_json: &str) -> i32 {
    print_row(run_worker_case(case_json))
}

/// Prints a worker's row as one compact JSON line on stdout; returns its exit code.
pub fn print_row((row, code): (Map<String, Value>, i32)) -> i32 {
    let text = serde_json::to_string(&Value::Object(row))
        .unwrap_or_else(|e| format!("{{\"success\":false,\"error\":\"cannot encode row: {e}\"}}"));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deerflow_style_case_errors() {
        let base = r#""backend":"memory","update_count":1,"payload_bytes":1,"repetition":0"#;
        let e = parse_case(&format!(r#"{{"mode":"bogus",{base},"seed":1}}"#)).unwrap_err();
        assert_eq!(e, "unsupported mode: 'bogus'");
        let e = parse_case(&format!(r#"{{"mode":"full",{base}}}"#)).unwrap_err();
        assert_eq!(e, "missing required field 'seed'");
        let e = parse_case("[1]").unwrap_err();
        assert!(e.starts_with("invalid case JSON"), "{e}");
        let e = parse_case(&format!(
            r#"{{"mode":"full",{base},"seed":1,"snapshot_frequency":0}}"#
        ))
        .unwrap_err();
        assert_eq!(e, "snapshot_frequency must be positive");
        let ok = parse_case(&format!(r#"{{"mode":"delta",{base},"seed":-3}}"#)).unwrap();
        assert_eq!(ok.seed, -3);
        assert_eq!(ok.snapshot_frequency, 10);
    }

    #[test]
    fn bad_case_row_is_minimal() {
        let row = bad_case_row("x");
        let keys: Vec<&str> = row.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["schema_version", "benchmark_version", "success", "error"]
        );
        assert_eq!(row["schema_version"], 2);
    }
}
