//! Production summaries (DeerFlow's production summary with full rows broadcast to every
//! cadence; see the parent module's header for the rules).

use super::*;
use dfck_core::model::ChannelMode;

const PRODUCTION_BASE: &[&str] = &[
    "engine",
    "backend",
    "source_thread_sha256",
    "turns",
    "payload_bytes",
];
const PRODUCTION_GROUP: &[&str] = &[
    "engine",
    "backend",
    "source_thread_sha256",
    "turns",
    "payload_bytes",
    "snapshot_frequency",
];

fn side_median(rows: &[&Row], metric: &str) -> Option<f64> {
    let v: Vec<f64> = rows.iter().filter_map(|r| r.number(metric)).collect();
    median(&v)
}

/// Production summaries (DeerFlow's, with numeric order and per-file failure counts; see the module
/// header). Profiled rows are skipped silently.
pub fn summarize_production(rows: &[&Row], metrics: &[String]) -> Vec<Map<String, Value>> {
    type RepKey = (usize, KeyPart, Vec<KeyPart>);
    let mut fulls: BTreeMap<RepKey, &Row> = BTreeMap::new();
    let mut deltas: BTreeMap<Vec<KeyPart>, Vec<(RepKey, &Row)>> = BTreeMap::new();
    let mut delta_files: BTreeMap<Vec<KeyPart>, HashSet<usize>> = BTreeMap::new();
    let mut failed: Vec<&Row> = Vec::new();
    for row in rows.iter().copied().filter(|r| !r.is_profiled()) {
        let group = key(row, PRODUCTION_GROUP);
        if row.mode() == Some(ChannelMode::Delta) {
            delta_files
                .entry(group.clone())
                .or_default()
                .insert(row.input_index);
        }
        if !row.is_success() {
            failed.push(row);
            continue;
        }
        let rep = (
            row.input_index,
            KeyPart::of(row.get("repetition")),
            key(row, PRODUCTION_BASE),
        );
        match row.mode() {
            Some(ChannelMode::Full) => {
                fulls.insert(rep, row);
            }
            Some(ChannelMode::Delta) => {
                let list = deltas.entry(group).or_default();
                match list.iter_mut().find(|(k, _)| *k == rep) {
                    Some(slot) => slot.1 = row,
                    None => list.push((rep, row)),
                }
            }
            _ => {}
        }
    }

    let mut out = Vec::new();
    for (group, delta_rows) in &deltas {
        let pairs: Vec<(&Row, &Row)> = delta_rows
            .iter()
            .filter_map(|(rep, d)| fulls.get(rep).map(|f| (*f, *d)))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let mut summary = Map::new();
        insert_key(&mut summary, PRODUCTION_GROUP, group);
        summary.insert("paired_repetitions".into(), Value::from(pairs.len()));
        let base = &group[..PRODUCTION_BASE.len()];
        let cadence = &group[PRODUCTION_BASE.len()];
        let files = delta_files.get(group);
        let failed_rows = failed
            .iter()
            .filter(|r| key(r, PRODUCTION_BASE) == base)
            .filter(|r| match r.get("snapshot_frequency") {
                None | Some(Value::Null) => files.is_some_and(|f| f.contains(&r.input_index)),
                v => KeyPart::of(v) == *cadence,
            })
            .count();
        summary.insert("failed_rows".into(), Value::from(failed_rows));
        let full_side: Vec<&Row> = pairs.iter().map(|p| p.0).collect();
        let delta_side: Vec<&Row> = pairs.iter().map(|p| p.1).collect();
        for metric in metrics {
            if let (Some(fm), Some(dm)) = (
                side_median(&full_side, metric),
                side_median(&delta_side, metric),
            ) {
                put_metric(&mut summary, metric, fm, dm);
            }
        }
        for (label, side) in [("full", &full_side), ("delta", &delta_side)] {
            let p50 = side_median(side, "checkpoint_write_p50_ms");
            let p99 = side_median(side, "checkpoint_write_p99_ms");
            let run_p50 = side_median(side, "run_turn_p50_ms");
            let cold = side_median(side, "state_cold_ms");
            let warm = side_median(side, "state_warm_p50_ms");
            if let (Some(p50), Some(p99)) = (p50.filter(|v| *v != 0.0), p99) {
                put(
                    &mut summary,
                    &format!("{label}_snapshot_write_spike"),
                    p99 / p50,
                );
            }
            if let (Some(p50), Some(run)) = (p50, run_p50.filter(|v| *v != 0.0)) {
                put(
                    &mut summary,
                    &format!("{label}_checkpoint_write_share"),
                    p50 / run,
                );
            }
            if let (Some(cold), Some(warm)) = (cold, warm) {
                put(
                    &mut summary,
                    &format!("{label}_cache_effect_ms"),
                    cold - warm,
                );
            }
        }
        out.push(summary);
    }
    out
}
