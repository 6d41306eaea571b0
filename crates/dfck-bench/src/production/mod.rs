//! `dfck bench production` (docs/bench-rows.md#production-rows): the production-shaped case model, its
//! matrix (per-group mode alternation), the cross-mode gate on the four-value signature, the
//! DeerFlow-shaped turn workload and the replay of an operator's own threads.

pub mod estimate;
pub mod native;
pub mod reader;
pub mod replay;
pub mod workload;

use super::case::{Backend, ChannelMode, Engine};
use super::rows::{BadCaseRow, ProductionRow, to_map};
use super::worker::WorkerOutput;
use serde_json::{Map, Value};

pub use super::case::{BENCHMARK, HISTORY_LIMIT_CAP, ProductionCase, ReplaySource, WARMUP_TURNS};

/// The matrix of `bench production` (docs/bench-rows.md#matrix-and-gate): loops repetition → backend → payload →
/// turns, one global group counter; the mode order flips on every odd group; delta expands
/// into one case per cadence, full into one case with `snapshot_frequency: null`.
#[derive(Debug, Clone)]
pub struct ProductionMatrix {
    /// Modes in CLI order.
    pub modes: Vec<ChannelMode>,
    /// Backends in CLI order.
    pub backends: Vec<Backend>,
    /// Turn counts.
    pub turns: Vec<u64>,
    /// Payload sizes.
    pub payload_bytes: Vec<u64>,
    /// Delta cadences.
    pub snapshot_frequencies: Vec<u64>,
    /// History limits.
    pub history_limits: Vec<u64>,
    /// Warm samples per read.
    pub read_repetitions: u64,
    /// Passes.
    pub repetitions: u64,
    /// Seed.
    pub seed: i64,
    /// Engine.
    pub engine: Engine,
}

impl ProductionMatrix {
    /// Expands the matrix into cases in execution order.
    pub fn expand(&self) -> Vec<ProductionCase> {
        let mut out = Vec::new();
        let mut group = 0u64;
        for repetition in 0..self.repetitions {
            for &backend in &self.backends {
                for &payload_bytes in &self.payload_bytes {
                    for &turns in &self.turns {
                        let mut modes = self.modes.clone();
                        if group % 2 == 1 {
                            modes.reverse();
                        }
                        group += 1;
                        for mode in modes {
                            let freqs: Vec<Option<u64>> = match mode {
                                ChannelMode::Full => vec![None],
                                ChannelMode::Delta => {
                                    self.snapshot_frequencies.iter().map(|f| Some(*f)).collect()
                                }
                            };
                            for snapshot_frequency in freqs {
                                out.push(ProductionCase {
                                    mode,
                                    turns,
                                    payload_bytes,
                                    snapshot_frequency,
                                    history_limits: self.history_limits.clone(),
                                    read_repetitions: self.read_repetitions,
                                    repetition,
                                    seed: self.seed,
                                    engine: self.engine,
                                    backend,
                                    replay: None,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// The cross-mode gate (docs/bench-rows.md#matrix-and-gate, over every cadence): within each (engine, backend, turns,
/// payload, repetition, source) group holding successful rows of both modes, more than one
/// distinct (message_count, seed_content_sha256, state_wire_sha256, history_wire_sha256)
/// fails every successful row. Returns how many rows it failed.
pub fn production_gate(rows: &mut [Map<String, Value>]) -> usize {
    use std::collections::{BTreeMap, BTreeSet};
    let key = |r: &Map<String, Value>| {
        [
            "engine",
            "backend",
            "turns",
            "payload_bytes",
            "repetition",
            "source_thread_sha256",
        ]
        .iter()
        .map(|k| r.get(*k).map(Value::to_string).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("|")
    };
    let ok = |r: &Map<String, Value>| r.get("success") == Some(&Value::Bool(true));
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if ok(r) {
            groups.entry(key(r)).or_default().push(i);
        }
    }
    let mut failed = 0;
    for idx in groups.values() {
        let modes: BTreeSet<String> = idx
            .iter()
            .map(|&i| {
                rows[i]
                    .get("mode")
                    .map(Value::to_string)
                    .unwrap_or_default()
            })
            .collect();
        if modes.len() < 2 {
            continue;
        }
        let sigs: BTreeSet<String> = idx
            .iter()
            .map(|&i| {
                [
                    "message_count",
                    "seed_content_sha256",
                    "state_wire_sha256",
                    "history_wire_sha256",
                ]
                .iter()
                .map(|k| rows[i].get(*k).map(Value::to_string).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("|")
            })
            .collect();
        if sigs.len() > 1 {
            for &i in idx {
                rows[i].insert("success".into(), Value::Bool(false));
                rows[i].insert(
                    "error".into(),
                    Value::String("cross-mode materialized state mismatch".into()),
                );
                failed += 1;
            }
        }
    }
    failed
}

/// The temporary-directory prefix of a production case (docs/bench-rows.md#child-processes).
pub const TEMP_PREFIX: &str = "deerflow-checkpoint-production-";

/// The minimal row of a production worker that cannot use its case.
pub fn bad_case_row(error: &str) -> Map<String, Value> {
    to_map(&BadCaseRow::new(
        crate::env::safe_error(error, None, &[]),
        Some(BENCHMARK),
    ))
}

/// `dfck bench production --worker-case JSON`: runs one case natively in this process;
/// returns the row and how the worker ends (`Failed` for a failed or unusable case).
pub fn run_worker_case(case_json: &str) -> WorkerOutput {
    use crate::worker::{native_row_env, run_in_child};
    let bad = |e: &str| WorkerOutput::bad_case(bad_case_row(e), e);
    let case: ProductionCase = match serde_json::from_str(case_json) {
        Ok(c) => c,
        Err(e) => return bad(&format!("invalid case: {e}")),
    };
    if let Err(e) = case.validate() {
        return bad(&e.to_string());
    }
    if case.engine != Engine::Native {
        return bad("dfck's production worker runs the native engine");
    }
    let row_env = native_row_env();
    let row = ProductionRow::new(&case, &row_env);
    run_in_child(row, row_env, TEMP_PREFIX, |ctx| {
        native::run_production_case(&case, ctx)
    })
}

/// One progress line (docs/bench-rows.md#matrix-and-gate): `[i/n] mode turns=T payload=P freq=F|None repetition=R`.
pub fn progress_line(i: usize, n: usize, c: &ProductionCase) -> String {
    let freq = c
        .snapshot_frequency
        .map(|f| f.to_string())
        .unwrap_or_else(|| "None".into());
    let source = c
        .replay
        .as_ref()
        .map(|r| {
            format!(
                " thread={}",
                &r.source_thread_sha256[..12.min(r.source_thread_sha256.len())]
            )
        })
        .unwrap_or_default();
    format!(
        "[{i}/{n}] {} {} turns={} payload={} freq={freq} repetition={}{source}",
        c.backend.as_str(),
        c.mode.as_str(),
        c.turns,
        c.payload_bytes,
        c.repetition
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn matrix() -> ProductionMatrix {
        ProductionMatrix {
            modes: vec![ChannelMode::Full, ChannelMode::Delta],
            backends: vec![Backend::Sqlite],
            turns: vec![10, 30],
            payload_bytes: vec![128],
            snapshot_frequencies: vec![5, 10],
            history_limits: vec![10, 50, 200],
            read_repetitions: 3,
            repetitions: 2,
            seed: 1,
            engine: Engine::Native,
        }
    }

    #[test]
    fn sweep_is_delta_only_and_order_flips_every_group() {
        let cases = matrix().expand();
        let sig: Vec<(u64, u64, &str, Option<u64>)> = cases
            .iter()
            .map(|c| (c.repetition, c.turns, c.mode.as_str(), c.snapshot_frequency))
            .collect();
        assert_eq!(
            sig,
            vec![
                (0, 10, "full", None),
                (0, 10, "delta", Some(5)),
                (0, 10, "delta", Some(10)),
                (0, 30, "delta", Some(5)),
                (0, 30, "delta", Some(10)),
                (0, 30, "full", None),
                (1, 10, "full", None),
                (1, 10, "delta", Some(5)),
                (1, 10, "delta", Some(10)),
                (1, 30, "delta", Some(5)),
                (1, 30, "delta", Some(10)),
                (1, 30, "full", None),
            ]
        );
        for c in &cases {
            assert!(c.validate().is_ok());
        }
    }

    #[test]
    fn validation() {
        let mut c = matrix().expand()[0].clone();
        for t in [0, 1, 2] {
            c.turns = t;
            assert!(c.validate().is_err());
        }
        c.turns = 3;
        assert!(c.validate().is_ok());
        c.snapshot_frequency = Some(10);
        assert!(c.validate().unwrap_err().to_string().contains("delta-only"));
        assert_eq!(c.effective_history_limits(), vec![10, 50, 100]);
    }

    #[test]
    fn gate_fails_every_row_of_a_mismatching_group_and_tolerates_missing_pairs() {
        let row = |mode: &str, f: Value, d: &str| {
            let mut m = Map::new();
            m.insert("success".into(), Value::Bool(true));
            m.insert("mode".into(), json!(mode));
            m.insert("snapshot_frequency".into(), f);
            m.insert("turns".into(), json!(10));
            m.insert("repetition".into(), json!(0));
            m.insert("message_count".into(), json!(41));
            m.insert("seed_content_sha256".into(), json!(d));
            m
        };
        let mut rows = vec![
            row("full", Value::Null, "a"),
            row("delta", json!(5), "a"),
            row("delta", json!(10), "a"),
        ];
        assert_eq!(production_gate(&mut rows), 0);
        rows[2].insert("seed_content_sha256".into(), json!("b"));
        assert_eq!(production_gate(&mut rows), 3);
        assert!(rows.iter().all(|r| r["success"] == false));
        let mut lonely = vec![row("delta", json!(5), "a"), row("delta", json!(10), "b")];
        assert_eq!(production_gate(&mut lonely), 0);
    }
}
