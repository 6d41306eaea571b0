//! The child side of `dfck bench channels` (docs/bench-rows.md#child-processes): `dfck bench channels
//! --worker-case '<case JSON>'` parses and validates the case, runs it with the native engine
//! inside a fresh temporary directory, prints one compact JSON row on stdout and exits 0
//! (success), 1 (the case failed) or 2 (the case JSON is unusable; minimal row).
//!
//! The row schema (identity fields, measured fields, what the worker and the controller append,
//! failure rows) is the field order of [`crate::rows::ChannelRow`]; docs/bench-rows.md
//! describes every field. Both engines (`native`: [`crate::native::run_channel_case`];
//! `langgraph`: `scripts/bench_worker_langgraph.py`) emit exactly these keys, in this order.
//!
//! Workload facts both engines share (docs/bench-rows.md#workloads): message `i` has id `bench-message-{i:08}`,
//! content `"x" × payload_bytes`, human when `i` is even, ai when odd; thread
//! `checkpoint-bench-{seed}-{repetition}` (memory, sqlite) and, on postgres, that id plus
//! `-{unique suffix}` (the thread is deleted after the case); namespace `""`.

use crate::case::{ChannelCase, Engine, RowEnv, WorkerContext};
use crate::env;
use crate::error::BenchError;
use crate::rows::{BadCaseRow, BenchRow, ChannelRow, PeakRss, to_map};
use dfck_core::outcome::Outcome;
use serde_json::{Map, Value};

pub use crate::env::TEMP_PREFIX;
/// The environment variable through which the controller hands the PostgreSQL URL to children.
pub const PG_URL_ENV: &str = "DFCK_BENCH_PG_URL";

/// What a worker child produced: its row (printed as one compact JSON line by the CLI) and
/// how the process ends (`Clean` when the case succeeded, else `Failed`).
#[derive(Debug)]
pub struct WorkerOutput {
    /// The row, as the JSON object to print.
    pub row: Map<String, Value>,
    /// `Clean` (success) or `Failed` (the case failed or was unusable).
    pub outcome: Outcome,
    /// Set when the case itself was unusable (the process then exits 2, DeerFlow's protocol).
    pub bad_case: Option<BenchError>,
}

impl WorkerOutput {
    /// The output of a worker that could not use its case: the minimal row, exit 2.
    pub fn bad_case(row: Map<String, Value>, error: &str) -> WorkerOutput {
        WorkerOutput {
            row,
            outcome: Outcome::Failed,
            bad_case: Some(BenchError::BadCase(error.to_string())),
        }
    }
}

/// The minimal row of a worker that could not use its case (docs/bench-rows.md#child-processes, schema v2).
pub fn bad_case_row(error: &str) -> Map<String, Value> {
    to_map(&BadCaseRow::new(env::safe_error(error, None, &[]), None))
}

fn field_text(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

/// Decodes and validates a case the way DeerFlow's worker does, with DeerFlow-style messages
/// (`unsupported mode: 'bogus'`, `missing required field 'seed'`, …).
pub fn parse_case(json_text: &str) -> Result<ChannelCase, BenchError> {
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
            return Err(format!("missing required field '{key}'").into());
        }
    }
    if let Some(x) = m.get("mode") {
        if !matches!(x.as_str(), Some("full" | "delta")) {
            return Err(format!("unsupported mode: {}", field_text(x)).into());
        }
    }
    if let Some(x) = m.get("backend") {
        if !matches!(x.as_str(), Some("memory" | "sqlite" | "postgres")) {
            return Err(format!("unsupported backend: {}", field_text(x)).into());
        }
    }
    if let Some(x) = m.get("engine") {
        if !matches!(x.as_str(), Some("native" | "langgraph")) {
            return Err(format!("unsupported engine: {}", field_text(x)).into());
        }
    }
    if let Some(x) = m.get("scenario") {
        if x.as_str() != Some("append") {
            return Err(format!("unsupported scenario: {}", field_text(x)).into());
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
                Some(_) => return Err(format!("{key} must be positive").into()),
                None => return Err(format!("{key} must be an integer, got {x}").into()),
            }
        }
    }
    if m.get("seed").and_then(Value::as_i64).is_none() {
        return Err(format!(
            "seed must be an integer, got {}",
            m.get("seed").unwrap_or(&Value::Null)
        )
        .into());
    }
    let case: ChannelCase =
        serde_json::from_value(v.clone()).map_err(|e| format!("invalid case: {e}"))?;
    case.validate()?;
    Ok(case)
}

/// The identity of the native engine (docs/bench-rows.md#engines).
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

/// Runs one case in this process and returns the row and how the worker ends. Never panics:
/// an engine panic becomes a failure row.
pub fn run_worker_case(case_json: &str) -> WorkerOutput {
    let bad = |e: &str| WorkerOutput::bad_case(bad_case_row(e), e);
    let case = match parse_case(case_json) {
        Ok(c) => c,
        Err(e) => return bad(&e.to_string()),
    };
    if case.engine != Engine::Native {
        return bad(&format!(
            "dfck's worker runs the native engine; this case asks for '{}' (run scripts/bench_worker_langgraph.py)",
            case.engine.as_str()
        ));
    }
    let row_env = native_row_env();
    let row = ChannelRow::new(&case, &row_env);
    run_in_child(row, row_env, TEMP_PREFIX, |ctx| {
        crate::native::run_channel_case(&case, ctx)
    })
}

/// Runs a native case in this process: a fresh temporary directory with `temp_prefix`, the
/// PostgreSQL URL from [`PG_URL_ENV`], `run` under `catch_unwind` (a panic becomes a failure
/// row), then the measured fields set on `row` plus the worker's peak RSS. Errors are
/// redacted (work dir, home, URLs, passwords).
pub fn run_in_child<R: BenchRow>(
    mut row: R,
    row_env: RowEnv,
    temp_prefix: &str,
    run: impl FnOnce(&WorkerContext) -> Result<R::Metrics, BenchError>,
) -> WorkerOutput {
    let pg_url = std::env::var(PG_URL_ENV).ok().filter(|u| !u.is_empty());
    let secrets: Vec<String> = pg_url.iter().filter_map(|u| env::url_password(u)).collect();
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let dir = match tempfile::Builder::new().prefix(temp_prefix).tempdir() {
        Ok(d) => d,
        Err(e) => {
            row.set_failure(env::safe_error(
                &format!("cannot create the case's temporary directory: {e}"),
                None,
                &secrets,
            ));
            return WorkerOutput {
                row: to_map(&row),
                outcome: Outcome::Failed,
                bad_case: None,
            };
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
        Err(p) => Err(format!("native engine panicked: {}", panic_text(&p)).into()),
    };
    let outcome = match outcome {
        Ok(metrics) => {
            let (peak_rss_bytes, rss_source) = env::peak_rss_self();
            row.set_metrics(
                metrics,
                PeakRss {
                    peak_rss_bytes,
                    rss_source,
                },
            );
            Outcome::Clean
        }
        Err(e) => {
            row.set_failure(env::safe_error(&e.to_string(), Some(dir.path()), &secrets));
            Outcome::Failed
        }
    };
    drop(dir);
    WorkerOutput {
        row: to_map(&row),
        outcome,
        bad_case: None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deerflow_style_case_errors() {
        let base = r#""backend":"memory","update_count":1,"payload_bytes":1,"repetition":0"#;
        let e = parse_case(&format!(r#"{{"mode":"bogus",{base},"seed":1}}"#))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "unsupported mode: 'bogus'");
        let e = parse_case(&format!(r#"{{"mode":"full",{base}}}"#))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "missing required field 'seed'");
        let e = parse_case("[1]").unwrap_err().to_string();
        assert!(e.starts_with("invalid case JSON"), "{e}");
        let e = parse_case(&format!(
            r#"{{"mode":"full",{base},"seed":1,"snapshot_frequency":0}}"#
        ))
        .unwrap_err()
        .to_string();
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
