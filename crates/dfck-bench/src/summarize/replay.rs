//! The aggregate of `--replay-from` production rows across their source threads
//! (docs/bench-rows.md#summaries): per (engine, backend), the total durable bytes of the full
//! and the delta stores at each cadence, and the median delta/full ratios of the cold state
//! and cold history reads. `bench production --replay-from` ends with it and `bench
//! summarize` prints it for replay rows; the text comes from `crate::render::bench_reporter`.

use super::Row;
use crate::stats::median;
use dfck_core::model::ChannelMode;
use std::collections::BTreeMap;

/// Totals at one delta cadence, over the threads that have both a full and a delta size.
#[derive(Debug, Clone, PartialEq)]
pub struct CadenceTotals {
    /// The delta cadence K.
    pub snapshot_frequency: u64,
    /// Σ over threads of the median full `durable_db_bytes`.
    pub full_bytes: f64,
    /// Σ over threads of the median delta `durable_db_bytes` at K.
    pub delta_bytes: f64,
}

/// The aggregate of one (engine, backend).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayAggregate {
    /// `engine` of the rows (empty when absent).
    pub engine: String,
    /// `backend` of the rows (empty when absent).
    pub backend: String,
    /// Distinct source threads with a successful row.
    pub threads: usize,
    /// Per cadence, ascending; empty when no row has a durable size (PostgreSQL).
    pub cadences: Vec<CadenceTotals>,
    /// Median over (thread, cadence) of delta/full `state_cold_ms`.
    pub state_cold_ratio: Option<f64>,
    /// Median over (thread, cadence, history limit) of delta/full `history_limit_{L}_cold_ms`.
    pub history_cold_ratio: Option<f64>,
}

/// Medians of one (thread, side): durable bytes, state cold, history cold per metric name.
#[derive(Default)]
struct Side {
    durable: Vec<f64>,
    state: Vec<f64>,
    history: BTreeMap<String, Vec<f64>>,
}

fn text(r: &Row, k: &str) -> String {
    r.fields
        .get(k)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string()
}

/// The aggregates of the successful, non-profiled production rows that carry a
/// `source_thread_sha256`, one per (engine, backend), in that order. Empty without replay rows.
pub fn replay_aggregates(rows: &[Row]) -> Vec<ReplayAggregate> {
    // (engine, backend) → thread → cadence (None: full) → side
    type Sides = BTreeMap<Option<u64>, Side>;
    let mut groups: BTreeMap<(String, String), BTreeMap<String, Sides>> = BTreeMap::new();
    for r in rows {
        let thread = text(r, "source_thread_sha256");
        if thread.is_empty() || !r.is_production() || r.is_profiled() || !r.is_success() {
            continue;
        }
        let cadence = match r.mode() {
            Some(ChannelMode::Full) => None,
            Some(ChannelMode::Delta) => match r.fields.get("snapshot_frequency") {
                Some(v) => match v.as_u64() {
                    Some(k) => Some(k),
                    None => continue,
                },
                None => continue,
            },
            _ => continue,
        };
        let side = groups
            .entry((text(r, "engine"), text(r, "backend")))
            .or_default()
            .entry(thread)
            .or_default()
            .entry(cadence)
            .or_default();
        side.durable.extend(r.number("durable_db_bytes"));
        side.state.extend(r.number("state_cold_ms"));
        for k in r.fields.keys() {
            if k.starts_with("history_limit_") && k.ends_with("_cold_ms") {
                if let Some(v) = r.number(k) {
                    side.history.entry(k.clone()).or_default().push(v);
                }
            }
        }
    }
    let ratio = |d: Option<f64>, f: Option<f64>| match (d, f) {
        (Some(d), Some(f)) if f != 0.0 => Some(d / f),
        _ => None,
    };
    let mut out = Vec::new();
    for ((engine, backend), threads) in groups {
        let mut totals: BTreeMap<u64, CadenceTotals> = BTreeMap::new();
        let mut state_ratios = Vec::new();
        let mut history_ratios = Vec::new();
        for sides in threads.values() {
            let Some(full) = sides.get(&None) else {
                continue;
            };
            for (cadence, delta) in sides.iter().filter(|(c, _)| c.is_some()) {
                let k = cadence.unwrap_or(0);
                if let (Some(f), Some(d)) = (median(&full.durable), median(&delta.durable)) {
                    let t = totals.entry(k).or_insert(CadenceTotals {
                        snapshot_frequency: k,
                        full_bytes: 0.0,
                        delta_bytes: 0.0,
                    });
                    t.full_bytes += f;
                    t.delta_bytes += d;
                }
                state_ratios.extend(ratio(median(&delta.state), median(&full.state)));
                for (metric, d) in &delta.history {
                    let f = full.history.get(metric).and_then(|v| median(v));
                    history_ratios.extend(ratio(median(d), f));
                }
            }
        }
        out.push(ReplayAggregate {
            engine,
            backend,
            threads: threads.len(),
            cadences: totals.into_values().collect(),
            state_cold_ratio: median(&state_ratios),
            history_cold_ratio: median(&history_ratios),
        });
    }
    out
}
