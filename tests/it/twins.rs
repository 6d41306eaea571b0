//! The twin test of fork ownership (docs/replay-and-forks.md#fork-ownership).
//!
//! The fixture generator runs each scenario twice with the real LangGraph: once in full mode
//! and once in delta mode (`full` / `delta_k*`, `forks_full` / `forks_delta_k*`). The full
//! twin holds what every branch really is. Wherever the delta twin's `get_state` differs from
//! its full twin's, delta replay picked up writes that belong to another branch, and
//! `dfck verify` must report `delta.fork_contaminated` at that checkpoint; wherever the twins
//! agree, it must report no contamination. Both directions are counted (precision and recall)
//! on SQLite and on PostgreSQL.
//!
//! Checkpoints are paired by (source, step, rank among the checkpoints of that source and step
//! in id order): the twins were written by the same script, so ranks agree, and a checkpoint
//! only one twin has (a delta `durability="exit"` run writes one more root) is left unpaired.

use crate::common::{dfck, expected_in, require_postgres, root, with_db};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};

/// (thread, ns, source, step, rank).
type PairKey = (String, String, String, i64, usize);
/// (thread, ns, checkpoint id).
type CheckpointKey = (String, String, String);

/// Paired checkpoints of one expected file: pair key → (checkpoint id, messages value).
fn checkpoints(exp: &Json) -> BTreeMap<PairKey, (String, Json)> {
    let mut out = BTreeMap::new();
    for t in exp["threads"].as_array().expect("threads") {
        let tid = t["thread_id"].as_str().expect("thread_id").to_owned();
        for ns in t["namespaces"].as_array().expect("namespaces") {
            let ns_name = ns["checkpoint_ns"].as_str().expect("ns").to_owned();
            let mut cks: Vec<&Json> = ns["checkpoints"].as_array().expect("cks").iter().collect();
            cks.sort_by_key(|c| c["checkpoint_id"].as_str().unwrap_or("").to_owned());
            let mut rank: BTreeMap<(String, i64), usize> = BTreeMap::new();
            for c in cks {
                let source = c["source"].as_str().unwrap_or("-").to_owned();
                let step = c["step"].as_i64().unwrap_or(i64::MIN);
                let r = rank.entry((source.clone(), step)).or_default();
                let key = (tid.clone(), ns_name.clone(), source, step, *r);
                *r += 1;
                let id = c["checkpoint_id"].as_str().expect("id").to_owned();
                out.insert(key, (id, c["values"]["messages"].clone()));
            }
        }
    }
    out
}

/// One twin pair's counts.
#[derive(Default, Debug)]
struct Counts {
    paired: usize,
    differ: usize,
    flagged: usize,
    hits: usize,
    misses: Vec<CheckpointKey>,
    false_alarms: Vec<CheckpointKey>,
}

fn compare(dir: &str, full: &str, delta: &str, target: &str) -> Counts {
    let f = checkpoints(&expected_in(dir, full));
    let d = checkpoints(&expected_in(dir, delta));
    let mut differ: BTreeSet<CheckpointKey> = BTreeSet::new();
    let mut paired: BTreeSet<CheckpointKey> = BTreeSet::new();
    for (key, (id, messages)) in &d {
        let Some((_, full_messages)) = f.get(key) else {
            continue;
        };
        let ck = (key.0.clone(), key.1.clone(), id.clone());
        if messages != full_messages {
            differ.insert(ck.clone());
        }
        paired.insert(ck);
    }
    let out = dfck(target, &["verify", "--format", "json"]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "verify {target}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Json = serde_json::from_slice(&out.stdout).expect("verify JSON");
    let flagged: BTreeSet<CheckpointKey> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] == "delta.fork_contaminated")
        .map(|f| {
            (
                f["thread_id"].as_str().unwrap_or("").to_owned(),
                f["checkpoint_ns"].as_str().unwrap_or("").to_owned(),
                f["checkpoint_id"].as_str().unwrap_or("").to_owned(),
            )
        })
        .filter(|k| paired.contains(k))
        .collect();
    Counts {
        paired: paired.len(),
        differ: differ.len(),
        flagged: flagged.len(),
        hits: flagged.intersection(&differ).count(),
        misses: differ.difference(&flagged).cloned().collect(),
        false_alarms: flagged.difference(&differ).cloned().collect(),
    }
}

const PAIRS: [(&str, &str); 5] = [
    ("full", "delta_k1"),
    ("full", "delta_k3"),
    ("full", "delta_k10"),
    ("forks_full", "forks_delta_k1"),
    ("forks_full", "forks_delta_k4"),
];

fn run(label: &str, dir: &str, target_of: impl Fn(&str) -> String) {
    let mut total = Counts::default();
    for (full, delta) in PAIRS {
        let c = compare(dir, full, delta, &target_of(delta));
        println!(
            "twins {label} {delta}: {} paired checkpoints, {} differ from the full twin, {} flagged, {} hits",
            c.paired, c.differ, c.flagged, c.hits
        );
        total.paired += c.paired;
        total.differ += c.differ;
        total.flagged += c.flagged;
        total.hits += c.hits;
        total.misses.extend(c.misses);
        total.false_alarms.extend(c.false_alarms);
    }
    let pct = |a: usize, b: usize| {
        if b == 0 {
            100.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    println!(
        "twins {label}: precision {:.1} % ({} of {} flagged), recall {:.1} % ({} of {} differing), {} paired",
        pct(total.hits, total.flagged),
        total.hits,
        total.flagged,
        pct(total.hits, total.differ),
        total.hits,
        total.differ,
        total.paired
    );
    assert!(
        total.differ > 0,
        "the twins must include real contamination for the test to mean anything"
    );
    assert!(
        total.misses.is_empty(),
        "{label}: delta differs from full but verify is silent at {:?}",
        total.misses
    );
    assert!(
        total.false_alarms.is_empty(),
        "{label}: verify reports contamination where the twins agree at {:?}",
        total.false_alarms
    );
}

#[test]
fn sqlite_twins_contamination_precision_and_recall() {
    run("sqlite", "expected", |stem| {
        root()
            .join("fixtures/sqlite")
            .join(format!("{stem}.db"))
            .to_string_lossy()
            .into_owned()
    });
}

#[test]
fn postgres_twins_contamination_precision_and_recall() {
    let Some(uri) = require_postgres("postgres twin test") else {
        return;
    };
    run("postgres", "expected-pg", |stem| {
        with_db(&uri, &format!("dfck_{stem}"))
    });
}
