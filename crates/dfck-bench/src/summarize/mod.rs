//! `dfck bench summarize`: loading benchmark JSONL (DeerFlow's schema v1 and dfck's v2) and
//! pairing full/delta rows into medians and delta/full ratios (docs/bench-rows.md#summaries for channel
//! rows, docs/bench-rows.md#summaries for production rows, with the fixes of docs/bench-rows.md#summaries). This module owns the numbers only; the
//! CLI prints them through `crate::render::bench`, and [`crate::plot`] draws them.
//!
//! # Row kinds
//! A row whose `benchmark` is `"checkpoint_production"` is a production row, every other row is a
//! channel row. One run may mix both kinds: each kind is summarized on its own. JSON output is
//! DeerFlow's plain list of summaries when the input holds one kind (or none), and the object
//! `{"channels": [...], "production": [...]}` when it holds both ([`Report::to_json`]).
//!
//! # Channel summary (docs/bench-rows.md#summaries)
//! * Groups are `(engine, backend, scenario, snapshot_frequency, update_count, payload_bytes)`
//!   where `snapshot_frequency` is the **delta** side's cadence. `engine` exists only in v2 rows;
//!   for DeerFlow's v1 rows it is absent (and absent from the output), so v1 rows never pair with
//!   v2 rows, and v2 rows of different engines never pair with each other.
//! * Pairing is a broadcast (docs/bench-rows.md#summaries): every successful delta row pairs with the successful full
//!   row of the same `(engine, backend, scenario, update_count, payload_bytes)` and the same
//!   `(input file, repetition)`, whatever its cadence. DeerFlow keys on `snapshot_frequency`, so
//!   it only pairs delta rows at cadence 10 (full rows always carry 10); for those rows the numbers
//!   are identical (the interop fixture `fixtures/bench/deerflow-v1-channels.*` pins this).
//! * `failed_rows`: failed (non-profiled) delta rows count toward their cadence's group; a failed
//!   full row (any failed row whose mode is not `delta`) counts toward every cadence group of its
//!   `(engine, backend, scenario, update_count, payload_bytes)` **in which its own input file has
//!   delta rows** (docs/bench-rows.md#summaries). DeerFlow counts a failed full row only in the cadence-10 group, from
//!   any input file.
//! * Metrics: only pairs where both sides hold a real number (not bool, not null) enter the
//!   medians; `ratio_m = delta/full` from the unrounded medians (null when the full median is 0);
//!   every value is `round(x, 6)`. A metric with no usable pair is left out.
//! * Profiled rows are dropped first; [`Report::profiled_channel_rows`] counts them for the
//!   warning the CLI prints.
//!
//! # Production summary (docs/bench-rows.md#summaries)
//! * Full rows (`snapshot_frequency` null) are broadcast to every delta cadence of the same
//!   `(engine, backend, source_thread_sha256, turns, payload_bytes)` and `(input file,
//!   repetition)`; `engine` and `backend` are absent in v1 rows, `source_thread_sha256` in all
//!   but `--replay-from` rows (and then absent from the output).
//! * Groups sort numerically (docs/bench-rows.md#summaries); DeerFlow sorts them by their text (10 before 5).
//! * `failed_rows`: a failed row with a cadence counts toward that cadence's group; a failed row
//!   without one (full) counts toward every cadence group in which its own input file has delta
//!   rows (docs/bench-rows.md#summaries); DeerFlow counts it in every group, from any input file.
//! * Medians are taken independently per side; history metrics
//!   `history_limit_{L}_{cold_ms|warm_p50_ms}` are discovered unless `--metrics` is given; the
//!   decision metrics (`{full,delta}_snapshot_write_spike`, `_checkpoint_write_share`,
//!   `_cache_effect_ms`) follow docs/bench-rows.md#summaries exactly. Profiled rows are dropped silently.
//!
//! Key order of a summary object is DeerFlow's (group fields, `paired_repetitions`,
//! `failed_rows`, then per metric `full_`, `delta_`, `ratio_`, then decision metrics); table and
//! CSV use [`columns`] (leading fields, then the rest alphabetically).

mod channels;
mod production;
pub mod replay;

pub use channels::summarize_channels;
pub use production::summarize_production;

use crate::stats::{median, round6};
use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

/// DeerFlow's default channel metrics (docs/bench-rows.md#summaries).
pub const DEFAULT_CHANNEL_METRICS: &[&str] = &[
    "write_total_ms",
    "write_p50_ms",
    "write_p95_ms",
    "write_last_window_ms",
    "warm_read_ms",
    "cold_read_ms",
    "logical_checkpoint_bytes",
    "logical_write_bytes",
    "durable_db_bytes",
    "reducer_replay_ms",
    "peak_rss_bytes",
];

/// DeerFlow's default production metrics (docs/bench-rows.md#summaries), before history-metric discovery.
pub const DEFAULT_PRODUCTION_METRICS: &[&str] = &[
    "run_turn_p50_ms",
    "run_turn_p95_ms",
    "checkpoint_write_p50_ms",
    "checkpoint_write_p95_ms",
    "state_cold_ms",
    "state_warm_p50_ms",
    "state_warm_p95_ms",
    "db_bytes",
    "durable_db_bytes",
    "peak_rss_bytes",
];

/// The `benchmark` value that marks a production row.
pub const PRODUCTION_BENCHMARK: &str = "checkpoint_production";

/// Leading table/CSV columns of channel summaries (present ones only).
pub const CHANNEL_LEADING: &[&str] = &[
    "engine",
    "backend",
    "scenario",
    "snapshot_frequency",
    "update_count",
    "payload_bytes",
    "paired_repetitions",
    "failed_rows",
];

/// Leading table/CSV columns of production summaries (present ones only).
pub const PRODUCTION_LEADING: &[&str] = &[
    "engine",
    "backend",
    "source_thread_sha256",
    "turns",
    "payload_bytes",
    "snapshot_frequency",
    "paired_repetitions",
    "failed_rows",
];

/// Loading the inputs failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// An input file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file as given.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Lines that are not JSON objects, each `path:line: message`.
    #[error("Malformed JSONL row(s):\n{}", .0.join("\n"))]
    Malformed(Vec<String>),
}

/// One JSONL row and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// 0-based position of its file among the inputs (rows of different files never pair).
    pub input_index: usize,
    /// 1-based line number in its file.
    pub line: usize,
    /// The row's fields.
    pub fields: Map<String, Value>,
}

impl Row {
    fn get(&self, k: &str) -> Option<&Value> {
        self.fields.get(k)
    }

    /// Whether this is a production row (`benchmark == "checkpoint_production"`).
    pub fn is_production(&self) -> bool {
        self.get("benchmark").and_then(Value::as_str) == Some(PRODUCTION_BENCHMARK)
    }

    /// Python truthiness of `profiled`.
    pub fn is_profiled(&self) -> bool {
        truthy(self.get("profiled"))
    }

    /// Python truthiness of `success`.
    pub fn is_success(&self) -> bool {
        truthy(self.get("success"))
    }

    /// `mode` as a string, if it is one.
    pub fn mode(&self) -> Option<dfck_core::model::ChannelMode> {
        self.get("mode")
            .and_then(Value::as_str)
            .and_then(dfck_core::model::ChannelMode::parse)
    }

    /// A metric as a real number: ints and floats, never bools or null.
    pub fn number(&self, metric: &str) -> Option<f64> {
        match self.get(metric) {
            Some(Value::Number(n)) => n.as_f64(),
            _ => None,
        }
    }
}

/// Python truthiness of an optional JSON value.
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// Parses JSONL text of input `input_index` named `name` (docs/bench-rows.md#summaries loading rules): lines are stripped,
/// blank and `#` lines skipped; each bad line is appended to `errors` as `name:line: msg`.
pub fn parse_jsonl(
    text: &str,
    name: &str,
    input_index: usize,
    rows: &mut Vec<Row>,
    errors: &mut Vec<String>,
) {
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(fields)) => rows.push(Row {
                input_index,
                line: i + 1,
                fields,
            }),
            Ok(_) => errors.push(format!("{name}:{}: expected a JSON object", i + 1)),
            Err(e) => errors.push(format!("{name}:{}: {e}", i + 1)),
        }
    }
}

/// Reads every input file in order; any malformed line fails the whole load.
pub fn load_jsonl(paths: &[PathBuf]) -> Result<Vec<Row>, LoadError> {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (index, path) in paths.iter().enumerate() {
        let text = read_text(path)?;
        parse_jsonl(
            &text,
            &path.display().to_string(),
            index,
            &mut rows,
            &mut errors,
        );
    }
    if errors.is_empty() {
        Ok(rows)
    } else {
        Err(LoadError::Malformed(errors))
    }
}

fn read_text(path: &Path) -> Result<String, LoadError> {
    let io = |source| LoadError::Io {
        path: path.display().to_string(),
        source,
    };
    let bytes = std::fs::read(path).map_err(io)?;
    String::from_utf8(bytes).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 ({e})"),
        ))
    })
}

/// A JSON value as a grouping/sorting key: numbers (not bools) sort numerically before every
/// other value, which sorts by its Python `str()` text (docs/bench-rows.md#summaries); a missing field sorts first.
#[derive(Debug, Clone)]
enum KeyPart {
    Missing,
    Num(f64, Value),
    Other(String, Value),
}

impl KeyPart {
    fn of(v: Option<&Value>) -> Self {
        match v {
            None => KeyPart::Missing,
            Some(Value::Number(n)) => match n.as_f64() {
                Some(f) => KeyPart::Num(f, Value::Number(n.clone())),
                None => KeyPart::Other(n.to_string(), Value::Number(n.clone())),
            },
            Some(other) => KeyPart::Other(python_str(other), other.clone()),
        }
    }

    fn value(&self) -> Option<&Value> {
        match self {
            KeyPart::Missing => None,
            KeyPart::Num(_, v) | KeyPart::Other(_, v) => Some(v),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            KeyPart::Missing => 0,
            KeyPart::Num(..) => 1,
            KeyPart::Other(..) => 2,
        }
    }
}

impl PartialEq for KeyPart {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for KeyPart {}
impl PartialOrd for KeyPart {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for KeyPart {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (KeyPart::Num(a, _), KeyPart::Num(b, _)) => a.total_cmp(b),
            (KeyPart::Other(a, _), KeyPart::Other(b, _)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// Python's `str()` of a JSON value, enough for sorting.
fn python_str(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn key(row: &Row, fields: &[&str]) -> Vec<KeyPart> {
    fields.iter().map(|f| KeyPart::of(row.get(f))).collect()
}

/// The summaries of one run: per kind, `None` when the input holds no row of that kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Channel summaries (docs/bench-rows.md#summaries), when the input has channel rows.
    pub channels: Option<Vec<Map<String, Value>>>,
    /// Production summaries (docs/bench-rows.md#summaries), when the input has production rows.
    pub production: Option<Vec<Map<String, Value>>>,
    /// Profiled channel rows that were dropped (the CLI warns about them).
    pub profiled_channel_rows: usize,
}

impl Report {
    /// True when no kind produced a summary (the command then exits 1).
    pub fn is_empty(&self) -> bool {
        self.channels.as_ref().is_none_or(Vec::is_empty)
            && self.production.as_ref().is_none_or(Vec::is_empty)
    }

    /// Whether the input held both kinds.
    pub fn is_mixed(&self) -> bool {
        self.channels.is_some() && self.production.is_some()
    }

    /// The JSON document: a list for one kind (or none), `{"channels", "production"}` for both.
    pub fn to_json(&self) -> Value {
        let list = |v: &Option<Vec<Map<String, Value>>>| {
            Value::Array(
                v.iter()
                    .flatten()
                    .cloned()
                    .map(Value::Object)
                    .collect::<Vec<_>>(),
            )
        };
        if self.is_mixed() {
            let mut m = Map::new();
            m.insert("channels".into(), list(&self.channels));
            m.insert("production".into(), list(&self.production));
            Value::Object(m)
        } else if self.production.is_some() {
            list(&self.production)
        } else {
            list(&self.channels)
        }
    }
}

/// Summarizes loaded rows: channel rows by docs/bench-rows.md#summaries, production rows by docs/bench-rows.md#summaries. `metrics` is `--metrics`
/// (applied to both kinds); `None` means each kind's defaults (plus discovered history metrics).
pub fn summarize(rows: &[Row], metrics: Option<&[String]>) -> Report {
    let (production, channels): (Vec<&Row>, Vec<&Row>) =
        rows.iter().partition(|r| r.is_production());
    let mut report = Report::default();
    if !channels.is_empty() {
        report.profiled_channel_rows = channels.iter().filter(|r| r.is_profiled()).count();
        let defaults: Vec<String>;
        let m = match metrics {
            Some(m) => m,
            None => {
                defaults = DEFAULT_CHANNEL_METRICS
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                &defaults
            }
        };
        report.channels = Some(summarize_channels(&channels, m));
    }
    if !production.is_empty() {
        let m = match metrics {
            Some(m) => m.to_vec(),
            None => {
                let mut m: Vec<String> = DEFAULT_PRODUCTION_METRICS
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                m.extend(discover_history_metrics(&production));
                m
            }
        };
        report.production = Some(summarize_production(&production, &m));
    }
    report
}

/// Parses `--metrics`: comma-separated, stripped, empties dropped; `None` when nothing is left.
pub fn parse_metrics(csv: &str) -> Option<Vec<String>> {
    let m: Vec<String> = csv
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    (!m.is_empty()).then_some(m)
}

/// `history_limit_{L}_cold_ms` / `history_limit_{L}_warm_p50_ms` → `L`; anything else → `None`.
fn history_limit(key: &str) -> Option<u128> {
    let rest = key.strip_prefix("history_limit_")?;
    let (digits, tail) = rest.split_at(rest.find(|c: char| !c.is_ascii_digit())?);
    if digits.is_empty() || !(tail == "_cold_ms" || tail == "_warm_p50_ms") {
        return None;
    }
    // Python's int() of a long digit string never fails; saturate instead of overflowing.
    Some(digits.parse().unwrap_or(u128::MAX))
}

/// The history metrics present in the rows, sorted by (limit, key) (docs/bench-rows.md#summaries).
pub fn discover_history_metrics(rows: &[&Row]) -> Vec<String> {
    let found: BTreeSet<(u128, String)> = rows
        .iter()
        .flat_map(|r| r.fields.keys())
        .filter_map(|k| history_limit(k).map(|l| (l, k.clone())))
        .collect();
    found.into_iter().map(|(_, k)| k).collect()
}

fn put(summary: &mut Map<String, Value>, k: &str, v: f64) {
    summary.insert(k.to_owned(), num(round6(v)));
}

fn num(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

/// `full_`, `delta_`, `ratio_` of one metric from the two unrounded medians.
fn put_metric(summary: &mut Map<String, Value>, metric: &str, full: f64, delta: f64) {
    put(summary, &format!("full_{metric}"), full);
    put(summary, &format!("delta_{metric}"), delta);
    let ratio = if full != 0.0 {
        num(round6(delta / full))
    } else {
        Value::Null
    };
    summary.insert(format!("ratio_{metric}"), ratio);
}

fn insert_key(summary: &mut Map<String, Value>, fields: &[&str], key: &[KeyPart]) {
    for (f, k) in fields.iter().zip(key) {
        if let Some(v) = k.value() {
            summary.insert((*f).to_owned(), v.clone());
        }
    }
}

/// Table/CSV columns of summaries: the `leading` fields present in any summary, in that order,
/// then every other key alphabetically (docs/bench-rows.md#summaries).
pub fn columns(summaries: &[Map<String, Value>], leading: &[&str]) -> Vec<String> {
    let mut cols: Vec<String> = leading
        .iter()
        .filter(|f| summaries.iter().any(|s| s.contains_key(**f)))
        .map(|f| (*f).to_owned())
        .collect();
    let rest: BTreeSet<&String> = summaries
        .iter()
        .flat_map(|s| s.keys())
        .filter(|k| !leading.contains(&k.as_str()))
        .collect();
    cols.extend(rest.into_iter().cloned());
    cols
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rows(v: &[Value]) -> Vec<Row> {
        v.iter()
            .enumerate()
            .map(|(i, r)| Row {
                input_index: 0,
                line: i + 1,
                fields: r.as_object().cloned().unwrap_or_default(),
            })
            .collect()
    }

    fn ch(mode: &str, rep: u64, freq: u64, ok: bool, total: f64) -> Value {
        json!({"success": ok, "mode": mode, "backend": "sqlite", "scenario": "append",
               "snapshot_frequency": freq, "update_count": 10, "payload_bytes": 128,
               "repetition": rep, "write_total_ms": total})
    }

    #[test]
    fn history_limit_matches_fully() {
        assert_eq!(history_limit("history_limit_64_cold_ms"), Some(64));
        assert_eq!(history_limit("history_limit_2_warm_p50_ms"), Some(2));
        assert_eq!(history_limit("history_limit_2_warm_p95_ms"), None);
        assert_eq!(history_limit("history_limit_2_cold_saver_ms"), None);
        assert_eq!(history_limit("history_limit__cold_ms"), None);
        assert_eq!(history_limit("history_limit_2_cold_msx"), None);
    }

    #[test]
    fn channel_pairs_and_ratio() {
        let r = rows(&[
            ch("full", 0, 10, true, 20.0),
            ch("delta", 0, 10, true, 10.0),
            ch("full", 1, 10, true, 20.0),
            ch("delta", 1, 10, true, 10.0),
            ch("full", 2, 10, false, 0.0),
        ]);
        let refs: Vec<&Row> = r.iter().collect();
        let s = summarize_channels(&refs, &["write_total_ms".to_string()]);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0]["paired_repetitions"], json!(2));
        assert_eq!(s[0]["failed_rows"], json!(1));
        assert_eq!(s[0]["ratio_write_total_ms"], json!(0.5));
        assert!(!s[0].contains_key("engine"));
    }

    #[test]
    fn channel_sweep_broadcasts() {
        let r = rows(&[
            ch("full", 0, 10, true, 20.0),
            ch("delta", 0, 5, true, 10.0),
            ch("delta", 0, 25, true, 5.0),
        ]);
        let refs: Vec<&Row> = r.iter().collect();
        let s = summarize_channels(&refs, &["write_total_ms".to_string()]);
        let freqs: Vec<&Value> = s.iter().map(|m| &m["snapshot_frequency"]).collect();
        assert_eq!(freqs, vec![&json!(5), &json!(25)]);
        assert_eq!(s[1]["ratio_write_total_ms"], json!(0.25));
    }

    #[test]
    fn key_order_numbers_before_text_and_missing_first() {
        let mut k = [
            KeyPart::of(Some(&json!("x"))),
            KeyPart::of(Some(&json!(10))),
            KeyPart::of(Some(&json!(2))),
            KeyPart::of(None),
        ];
        k.sort();
        assert!(matches!(k[0], KeyPart::Missing));
        assert_eq!(k[1].value(), Some(&json!(2)));
        assert_eq!(k[3].value(), Some(&json!("x")));
    }

    #[test]
    fn malformed_lines_are_collected() {
        let mut rows = Vec::new();
        let mut errors = Vec::new();
        parse_jsonl(
            "# c\n\n{}\n[1]\n{bad\n",
            "r.jsonl",
            0,
            &mut rows,
            &mut errors,
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(errors.len(), 2);
        assert!(errors[0].starts_with("r.jsonl:4: expected a JSON object"));
        assert!(errors[1].starts_with("r.jsonl:5: "));
    }
}
