//! Channel summaries (DeerFlow's channel summary with broadcast pairing; see the parent
//! module's header for the rules).

use super::*;
use dfck_core::model::ChannelMode;

const CHANNEL_BASE: &[&str] = &[
    "engine",
    "backend",
    "scenario",
    "update_count",
    "payload_bytes",
];
const CHANNEL_GROUP: &[&str] = &[
    "engine",
    "backend",
    "scenario",
    "snapshot_frequency",
    "update_count",
    "payload_bytes",
];

/// Channel summaries (DeerFlow's, with broadcast pairing; see the parent module's header). Profiled rows are
/// skipped here too.
pub fn summarize_channels(rows: &[&Row], metrics: &[String]) -> Vec<Map<String, Value>> {
    type RepKey = (usize, KeyPart);
    type Group = (Vec<KeyPart>, KeyPart);
    type Members<'r> = Vec<(RepKey, &'r Row)>;
    // base key → rep key → full row (later wins)
    let mut fulls: BTreeMap<Vec<KeyPart>, BTreeMap<RepKey, &Row>> = BTreeMap::new();
    // (base key, cadence) → rep key → delta row; insertion order of rep keys kept for pairs
    let mut deltas: BTreeMap<Group, Members> = BTreeMap::new();
    // (base key, cadence) → input files with delta rows (any success) in that group
    let mut delta_files: BTreeMap<(Vec<KeyPart>, KeyPart), HashSet<usize>> = BTreeMap::new();
    let mut failed: Vec<&Row> = Vec::new();
    for row in rows.iter().copied().filter(|r| !r.is_profiled()) {
        let base = key(row, CHANNEL_BASE);
        let cadence = KeyPart::of(row.get("snapshot_frequency"));
        if row.mode() == Some(ChannelMode::Delta) {
            delta_files
                .entry((base.clone(), cadence.clone()))
                .or_default()
                .insert(row.input_index);
        }
        if !row.is_success() {
            failed.push(row);
            continue;
        }
        let rep = (row.input_index, KeyPart::of(row.get("repetition")));
        match row.mode() {
            Some(ChannelMode::Full) => {
                fulls.entry(base).or_default().insert(rep, row);
            }
            Some(ChannelMode::Delta) => {
                let list = deltas.entry((base, cadence)).or_default();
                match list.iter_mut().find(|(k, _)| *k == rep) {
                    Some(slot) => slot.1 = row,
                    None => list.push((rep, row)),
                }
            }
            _ => {}
        }
    }

    // Sort groups by the public group order: engine, backend, scenario, cadence, N, payload.
    let mut groups: Vec<(&Group, &Members)> = deltas.iter().collect();
    let order = |(base, cadence): &(Vec<KeyPart>, KeyPart)| {
        let mut k = base.clone();
        k.insert(3, cadence.clone());
        k
    };
    groups.sort_by_key(|(g, _)| order(g));

    let mut out = Vec::new();
    for ((base, cadence), delta_rows) in groups {
        let Some(full_rows) = fulls.get(base) else {
            continue;
        };
        let pairs: Vec<(&Row, &Row)> = delta_rows
            .iter()
            .filter_map(|(rep, d)| full_rows.get(rep).map(|f| (*f, *d)))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let group_key = order(&(base.clone(), cadence.clone()));
        let mut summary = Map::new();
        insert_key(&mut summary, CHANNEL_GROUP, &group_key);
        summary.insert("paired_repetitions".into(), Value::from(pairs.len()));
        let files = delta_files.get(&(base.clone(), cadence.clone()));
        let failed_rows = failed
            .iter()
            .filter(|r| key(r, CHANNEL_BASE) == *base)
            .filter(|r| {
                if r.mode() == Some(ChannelMode::Delta) {
                    KeyPart::of(r.get("snapshot_frequency")) == *cadence
                } else {
                    files.is_some_and(|f| f.contains(&r.input_index))
                }
            })
            .count();
        summary.insert("failed_rows".into(), Value::from(failed_rows));
        for metric in metrics {
            let (fv, dv): (Vec<f64>, Vec<f64>) = pairs
                .iter()
                .filter_map(|(f, d)| Some((f.number(metric)?, d.number(metric)?)))
                .unzip();
            if let (Some(fm), Some(dm)) = (median(&fv), median(&dv)) {
                put_metric(&mut summary, metric, fm, dm);
            }
        }
        out.push(summary);
    }
    out
}
