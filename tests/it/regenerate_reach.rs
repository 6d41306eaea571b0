//! Long threads written by the real LangGraph (scripts/gen_long_threads.py): no default walk
//! budget (a healthy thread of any length verifies clean), and `lineage.regenerate_budget`
//! reports how far back DeerFlow's 400-checkpoint regenerate walk reaches.

use crate::common::{dfck, dfck_json, sqlite_fixture};
use serde_json::Value as Json;

fn store() -> String {
    sqlite_fixture("long_threads")
        .to_string_lossy()
        .into_owned()
}

fn findings(j: &Json) -> Vec<(String, String, String)> {
    j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().unwrap().to_owned(),
                f["code"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_100_turn_thread_verifies_without_error_and_names_its_oldest_reachable_turn() {
    let out = dfck(&store(), &["verify", "t-100-turns", "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["checkpoints_checked"], 500);
    let f = findings(&j);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        (f[0].0.as_str(), f[0].1.as_str()),
        ("warning", "lineage.regenerate_budget")
    );
    // 5 checkpoints per turn: 400 fetches reach the newest 80 turns, h-20 .. h-99.
    assert!(f[0].2.contains("last 80 of 100 turns"), "{}", f[0].2);
    assert!(f[0].2.contains("human message h-20 "), "{}", f[0].2);
}

#[test]
fn a_last_turn_longer_than_the_walk_is_an_error() {
    let out = dfck(&store(), &["verify", "t-long-turn", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    let f = findings(&j);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        (f[0].0.as_str(), f[0].1.as_str()),
        ("error", "lineage.regenerate_budget")
    );
    assert!(f[0].2.contains("human message h-1 "), "{}", f[0].2);
}

#[test]
fn lineage_shows_the_same_reach() {
    let j = dfck_json(&store(), &["lineage", "t-100-turns", "--format", "json"]);
    assert_eq!(j["end"], "root", "no budget cuts the chain");
    assert_eq!(j["checkpoints"].as_array().unwrap().len(), 500);
    let f = findings(&j);
    assert!(
        f.iter().any(|(s, c, m)| s == "warning"
            && c == "lineage.regenerate_budget"
            && m.contains("h-20 ")),
        "{f:?}"
    );
    let out = dfck(&store(), &["lineage", "t-long-turn"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("lineage.regenerate_budget"));
}

#[test]
fn depth_exceeded_only_when_asked_for() {
    let j = dfck_json(&store(), &["verify", "t-100-turns", "--format", "json"]);
    assert!(!findings(&j).iter().any(|f| f.1 == "lineage.depth_exceeded"));
    let out = dfck(
        &store(),
        &[
            "verify",
            "t-100-turns",
            "--max-depth",
            "100",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        findings(&j)
            .iter()
            .any(|f| f.0 == "error" && f.1 == "lineage.depth_exceeded")
    );
}
