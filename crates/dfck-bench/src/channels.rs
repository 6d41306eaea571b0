//! The pure parts of `dfck bench channels` (docs/bench-rows.md#matrix-and-gate): CSV flag
//! parsing with DeerFlow's messages, matrix expansion, the cumulative full-payload cap with exact
//! skip counts, the progress line, and the cross-mode digest gate with broadcast pairing.
//!
//! Mode alternation (docs/bench-rows.md#matrix-and-gate): within one repetition the comparable groups (cells) are numbered
//! `g = 0, 1, 2, …` in execution order (backend, then payload, then update count); a cell runs
//! its modes in CLI order when `repetition + g` is even and reversed when odd. So consecutive
//! cells of a repetition always alternate (whatever the backend and payload), every cell flips
//! its order from one repetition to the next, and with one backend and one payload the order is
//! exactly DeerFlow's (`repetition + update_index`), e.g. the pinned `updates=[10,100], R=2`
//! matrix. (Across a repetition boundary two consecutive cells share an order when the number
//! of cells per repetition is odd.)

use crate::case::{Backend, ChannelCase, ChannelMode, Engine};
use crate::error::BenchError;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};

/// DeerFlow's default delta cadence; full cases always carry it (docs/bench-rows.md#matrix-and-gate).
pub const DEFAULT_SNAPSHOT_FREQUENCY: u64 = 10;
/// The gate's error text (docs/bench-rows.md#matrix-and-gate).
pub const CROSS_MODE_MISMATCH: &str = "cross-mode materialized state mismatch";

/// A parsed CSV flag: the values in first-seen order and the duplicate warning, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvValues<T> {
    /// Distinct values, first occurrence keeps its position.
    pub values: Vec<T>,
    /// `"<opt>: ignored duplicate value(s): …; use --repetitions for repeated samples."`.
    pub warning: Option<String>,
}

fn bad_shape(value: &str) -> bool {
    value.is_empty() || value.starts_with(',') || value.ends_with(',') || value.contains(",,")
}

fn dedup<T: PartialEq + Clone + ToString>(opt: &str, items: Vec<T>) -> CsvValues<T> {
    let mut values: Vec<T> = Vec::new();
    let mut dups: Vec<T> = Vec::new();
    for x in items {
        if values.contains(&x) {
            if !dups.contains(&x) {
                dups.push(x);
            }
        } else {
            values.push(x);
        }
    }
    let warning = (!dups.is_empty()).then(|| {
        let list: Vec<String> = dups.iter().map(ToString::to_string).collect();
        format!(
            "{opt}: ignored duplicate value(s): {}; use --repetitions for repeated samples.",
            list.join(", ")
        )
    });
    CsvValues { values, warning }
}

/// Python `int(text)` for the forms that matter: optional sign, ASCII digits, single
/// underscores between digits, surrounding whitespace already stripped.
fn py_int(text: &str) -> Option<i128> {
    let (neg, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    let n: i128 = digits.replace('_', "").parse().ok()?;
    Some(if neg { -n } else { n })
}

/// A positive-int CSV (`--updates`, `--payload-bytes`, `--snapshot-frequencies`, docs/bench-rows.md#matrix-and-gate).
pub fn parse_positive_int_csv(opt: &str, value: &str) -> Result<CsvValues<u64>, BenchError> {
    let shape_err = || {
        BenchError::Usage(format!(
            "{opt} must be a comma-separated list of positive integers"
        ))
    };
    if bad_shape(value) {
        return Err(shape_err());
    }
    let mut items = Vec::new();
    for part in value.split(',') {
        let n = py_int(part.trim()).ok_or_else(shape_err)?;
        if n <= 0 {
            return Err(BenchError::Usage(format!(
                "{opt} values must be positive integers"
            )));
        }
        items.push(u64::try_from(n).map_err(|_| shape_err())?);
    }
    Ok(dedup(opt, items))
}

/// A choice CSV (`--modes`, `--backends`, docs/bench-rows.md#matrix-and-gate): each item must be the name (`Display`) of
/// one of `choices`.
pub fn parse_choice_csv<T: Copy + PartialEq + std::fmt::Display>(
    opt: &str,
    value: &str,
    choices: &[T],
) -> Result<CsvValues<T>, BenchError> {
    let names: Vec<String> = choices.iter().map(ToString::to_string).collect();
    if bad_shape(value) {
        return Err(BenchError::Usage(format!(
            "{opt} must contain one or more of: {}",
            names.join(", ")
        )));
    }
    let mut items = Vec::new();
    for part in value.split(',') {
        let p = part.trim();
        let Some(i) = names.iter().position(|n| n == p) else {
            return Err(BenchError::Usage(format!(
                "{opt} contains unsupported value '{p}'; expected: {}",
                names.join(", ")
            )));
        };
        items.push(choices[i]);
    }
    Ok(dedup(opt, items))
}

/// The matrix flags after parsing.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixSpec {
    /// `--modes`, CLI order.
    pub modes: Vec<ChannelMode>,
    /// `--backends`, CLI order.
    pub backends: Vec<Backend>,
    /// `--updates`, CLI order.
    pub updates: Vec<u64>,
    /// `--payload-bytes`, CLI order.
    pub payloads: Vec<u64>,
    /// `--snapshot-frequencies`, CLI order (delta cases only).
    pub frequencies: Vec<u64>,
    /// `--repetitions`.
    pub repetitions: u64,
    /// `--seed`.
    pub seed: i64,
    /// `--engine`.
    pub engine: Engine,
}

/// Expands the matrix (docs/bench-rows.md#matrix-and-gate loop order, docs/bench-rows.md#matrix-and-gate alternation; see the module header).
pub fn expand_matrix(spec: &MatrixSpec) -> Vec<ChannelCase> {
    let mut cases = Vec::new();
    for repetition in 0..spec.repetitions {
        let mut cell: u64 = 0;
        for &backend in &spec.backends {
            for &payload in &spec.payloads {
                for &n in &spec.updates {
                    let mut modes = spec.modes.clone();
                    if (repetition + cell) % 2 == 1 {
                        modes.reverse();
                    }
                    cell += 1;
                    for mode in modes {
                        let freqs: Vec<u64> = match mode {
                            ChannelMode::Full => vec![DEFAULT_SNAPSHOT_FREQUENCY],
                            ChannelMode::Delta => spec.frequencies.clone(),
                        };
                        for f in freqs {
                            cases.push(ChannelCase {
                                mode,
                                backend,
                                update_count: n,
                                payload_bytes: payload,
                                repetition,
                                seed: spec.seed,
                                scenario: "append".into(),
                                snapshot_frequency: f,
                                engine: spec.engine,
                            });
                        }
                    }
                }
            }
        }
    }
    cases
}

/// What the safety cap did.
#[derive(Debug, Clone, PartialEq)]
pub struct CapOutcome {
    /// Cases that run, in matrix order.
    pub kept: Vec<ChannelCase>,
    /// Cases skipped, in matrix order.
    pub skipped: Vec<ChannelCase>,
    /// Oversized cells (backend, scenario, N, payload, repetition).
    pub skipped_cells: usize,
    /// Exact comparable pairs skipped: per oversized cell `max(full cases, delta cases)`, i.e.
    /// one per delta cadence paired (broadcast) with the cell's full case, and one for a lone
    /// full case (docs/bench-rows.md#matrix-and-gate).
    pub skipped_pairs: usize,
}

type CellKey = (Backend, String, u64, u64, u64);

fn cell_key(c: &ChannelCase) -> CellKey {
    (
        c.backend,
        c.scenario.clone(),
        c.update_count,
        c.payload_bytes,
        c.repetition,
    )
}

/// The cumulative full-payload cap (docs/bench-rows.md#matrix-and-gate): a cell whose full case estimates more than `max`
/// bytes is skipped whole (full and every delta cadence). `None` disables the cap;
/// delta-only runs are never capped.
pub fn apply_cap(cases: Vec<ChannelCase>, max: Option<u128>) -> CapOutcome {
    let Some(max) = max else {
        return CapOutcome {
            kept: cases,
            skipped: Vec::new(),
            skipped_cells: 0,
            skipped_pairs: 0,
        };
    };
    let mut oversized: HashMap<CellKey, (usize, usize)> = HashMap::new();
    for c in &cases {
        if c.mode == ChannelMode::Full && c.estimated_full_bytes() > max {
            oversized.insert(cell_key(c), (0, 0));
        }
    }
    let mut kept = Vec::new();
    let mut skipped = Vec::new();
    for c in cases {
        match oversized.get_mut(&cell_key(&c)) {
            Some(counts) => {
                match c.mode {
                    ChannelMode::Full => counts.0 += 1,
                    ChannelMode::Delta => counts.1 += 1,
                }
                skipped.push(c);
            }
            None => kept.push(c),
        }
    }
    let skipped_pairs = oversized.values().map(|(f, d)| (*f).max(*d)).sum();
    CapOutcome {
        kept,
        skipped,
        skipped_cells: oversized.len(),
        skipped_pairs,
    }
}

/// The cap's stderr message (docs/bench-rows.md#matrix-and-gate wording, exact count).
pub fn cap_message(outcome: &CapOutcome) -> String {
    format!(
        "Skipping {} oversized comparable case pair(s); use --allow-large-cases to run them.",
        outcome.skipped_pairs
    )
}

/// The progress line of case `i` of `n` (1-based, docs/bench-rows.md#matrix-and-gate).
pub fn progress_line(i: usize, n: usize, c: &ChannelCase) -> String {
    let freq = match c.mode {
        ChannelMode::Delta => format!(" freq={}", c.snapshot_frequency),
        ChannelMode::Full => String::new(),
    };
    format!(
        "[{i}/{n}] {} {}{freq} updates={} payload={} repetition={}",
        c.backend.as_str(),
        c.mode.as_str(),
        c.update_count,
        c.payload_bytes,
        c.repetition
    )
}

fn row_str<'a>(row: &'a Map<String, Value>, key: &str) -> &'a str {
    row.get(key).and_then(Value::as_str).unwrap_or("")
}

fn row_key_text(row: &Map<String, Value>, key: &str) -> String {
    row.get(key).map(Value::to_string).unwrap_or_default()
}

/// The cross-mode digest gate with broadcast pairing (docs/bench-rows.md#matrix-and-gate): rows are grouped by
/// `(engine, backend, scenario, update_count, payload_bytes, repetition)` — the cadence is not
/// part of the key, so every delta cadence is checked against the group's full row. In a group
/// holding at least one successful full and one successful delta row, if the successful rows
/// disagree on `(actual_message_count, content_sha256)`, every successful row of the group
/// becomes `success: false` with [`CROSS_MODE_MISMATCH`]. Rows without `engine` (DeerFlow v1)
/// group as `native`. Returns the number of rows changed.
pub fn cross_mode_gate(rows: &mut [Map<String, Value>]) -> usize {
    let mut groups: BTreeMap<Vec<String>, Vec<usize>> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        if row.get("success") != Some(&Value::Bool(true)) {
            continue;
        }
        let engine = match row_str(row, "engine") {
            "" => "native".to_string(),
            e => e.to_string(),
        };
        let key = vec![
            engine,
            row_key_text(row, "backend"),
            row_key_text(row, "scenario"),
            row_key_text(row, "update_count"),
            row_key_text(row, "payload_bytes"),
            row_key_text(row, "repetition"),
        ];
        groups.entry(key).or_default().push(i);
    }
    let mut changed = 0;
    for members in groups.values() {
        let has = |m: ChannelMode| {
            members
                .iter()
                .any(|&i| ChannelMode::parse(row_str(&rows[i], "mode")) == Some(m))
        };
        if !(has(ChannelMode::Full) && has(ChannelMode::Delta)) {
            continue;
        }
        let mut sigs: Vec<(String, String)> = members
            .iter()
            .map(|&i| {
                (
                    row_key_text(&rows[i], "actual_message_count"),
                    row_key_text(&rows[i], "content_sha256"),
                )
            })
            .collect();
        sigs.sort();
        sigs.dedup();
        if sigs.len() > 1 {
            for &i in members {
                rows[i].insert("success".into(), Value::Bool(false));
                rows[i].insert("error".into(), Value::String(CROSS_MODE_MISMATCH.into()));
                changed += 1;
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(updates: Vec<u64>, reps: u64) -> MatrixSpec {
        MatrixSpec {
            modes: vec![ChannelMode::Full, ChannelMode::Delta],
            backends: vec![Backend::Memory],
            updates,
            payloads: vec![128],
            frequencies: vec![10],
            repetitions: reps,
            seed: 1,
            engine: Engine::Native,
        }
    }

    fn triples(cases: &[ChannelCase]) -> Vec<(u64, u64, &'static str)> {
        cases
            .iter()
            .map(|c| (c.repetition, c.update_count, c.mode.as_str()))
            .collect()
    }

    #[test]
    fn pinned_deerflow_order() {
        let cases = expand_matrix(&spec(vec![10, 100], 2));
        assert_eq!(
            triples(&cases),
            vec![
                (0, 10, "full"),
                (0, 10, "delta"),
                (0, 100, "delta"),
                (0, 100, "full"),
                (1, 10, "delta"),
                (1, 10, "full"),
                (1, 100, "full"),
                (1, 100, "delta"),
            ]
        );
    }

    #[test]
    fn alternation_spans_backends_and_sweeps_add_no_full() {
        let mut s = spec(vec![100, 500, 1000], 1);
        s.backends = vec![Backend::Memory, Backend::Sqlite];
        s.frequencies = vec![5, 10];
        let cases = expand_matrix(&s);
        let firsts: Vec<&str> = cases.chunks(3).map(|c| c[0].mode.as_str()).collect();
        assert_eq!(firsts, ["full", "delta", "full", "delta", "full", "delta"]);
        assert_eq!(cases.len(), 6 * 3);
        assert!(
            cases
                .iter()
                .filter(|c| c.mode == ChannelMode::Full)
                .all(|c| c.snapshot_frequency == 10)
        );
    }

    #[test]
    fn cap_counts_are_exact() {
        let mut s = spec(vec![4095, 4096], 1);
        s.frequencies = vec![5, 10, 25];
        let out = apply_cap(expand_matrix(&s), Some(1 << 30));
        assert_eq!(out.kept.len(), 4);
        assert_eq!(out.skipped.len(), 4);
        assert_eq!(out.skipped_cells, 1);
        assert_eq!(out.skipped_pairs, 3);
        assert_eq!(
            cap_message(&out),
            "Skipping 3 oversized comparable case pair(s); use --allow-large-cases to run them."
        );
        s.modes = vec![ChannelMode::Delta];
        let out = apply_cap(expand_matrix(&s), Some(1));
        assert!(out.skipped.is_empty());
        let out = apply_cap(expand_matrix(&spec(vec![4096], 1)), None);
        assert_eq!(out.kept.len(), 2);
    }

    #[test]
    fn csv_parsing() {
        let v = parse_positive_int_csv("--updates", "100,10, 100,500,7,7").unwrap();
        assert_eq!(v.values, vec![100, 10, 500, 7]);
        assert_eq!(
            v.warning.as_deref(),
            Some(
                "--updates: ignored duplicate value(s): 100, 7; use --repetitions for repeated samples."
            )
        );
        for bad in ["", ",1", "1,", "1,,2", "x", "1.5"] {
            assert_eq!(
                parse_positive_int_csv("--updates", bad)
                    .unwrap_err()
                    .to_string(),
                "--updates must be a comma-separated list of positive integers"
            );
        }
        assert_eq!(
            parse_positive_int_csv("--updates", "1,0")
                .unwrap_err()
                .to_string(),
            "--updates values must be positive integers"
        );
        let ch = [ChannelMode::Full, ChannelMode::Delta];
        assert_eq!(
            parse_choice_csv("--modes", "full,bogus", &ch)
                .unwrap_err()
                .to_string(),
            "--modes contains unsupported value 'bogus'; expected: full, delta"
        );
        assert_eq!(
            parse_choice_csv("--modes", ",", &ch)
                .unwrap_err()
                .to_string(),
            "--modes must contain one or more of: full, delta"
        );
    }

    fn row(mode: &str, freq: u64, sha: &str) -> Map<String, Value> {
        match json!({"success": true, "error": null, "engine": "native", "mode": mode,
            "backend": "memory", "scenario": "append", "snapshot_frequency": freq,
            "update_count": 10, "payload_bytes": 128, "repetition": 0,
            "actual_message_count": 10, "content_sha256": sha})
        {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn gate_broadcasts_over_cadences() {
        let mut rows = vec![
            row("full", 10, "a"),
            row("delta", 5, "a"),
            row("delta", 25, "a"),
        ];
        assert_eq!(cross_mode_gate(&mut rows), 0);
        let mut rows = vec![
            row("full", 10, "a"),
            row("delta", 5, "a"),
            row("delta", 25, "b"),
        ];
        assert_eq!(cross_mode_gate(&mut rows), 3);
        assert!(
            rows.iter()
                .all(|r| r["success"] == false && r["error"] == CROSS_MODE_MISMATCH)
        );
        // no full row: nothing to compare
        let mut rows = vec![row("delta", 5, "a"), row("delta", 25, "b")];
        assert_eq!(cross_mode_gate(&mut rows), 0);
        // failed rows are ignored; other engines are other groups
        let mut f = row("full", 10, "a");
        f.insert("engine".into(), json!("langgraph"));
        let mut rows = vec![f, row("delta", 5, "b")];
        assert_eq!(cross_mode_gate(&mut rows), 0);
    }
}
