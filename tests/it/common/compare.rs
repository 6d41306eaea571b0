//! The fixture comparison shared by the SQLite and Postgres suites: every checkpoint of a
//! store, materialized by the real `dfck` binary, against LangGraph's expected JSON.
#![allow(dead_code)]

use super::*;
use serde_json::{Map, Value as Json};
use std::collections::HashSet;

#[derive(Default, Debug)]
pub struct Tally {
    pub states: usize,
    pub stored: usize,
    pub defaults_skipped: usize,
    pub expected_failures: usize,
    pub listed: usize,
    pub threads: usize,
}

impl Tally {
    pub fn add(&mut self, o: &Tally) {
        self.states += o.states;
        self.stored += o.stored;
        self.defaults_skipped += o.defaults_skipped;
        self.expected_failures += o.expected_failures;
        self.listed += o.listed;
        self.threads += o.threads;
    }
}

fn short(j: &Json) -> String {
    let s = j.to_string();
    if s.len() > 600 {
        format!("{}…", &s[..600])
    } else {
        s
    }
}

/// Python sets have no stable order (LangGraph re-encodes them in hash order), so set and
/// frozenset members compare as multisets.
fn normalize(j: &Json) -> Json {
    match j {
        Json::Array(a) => Json::Array(a.iter().map(normalize).collect()),
        Json::Object(o) => {
            let is_set = matches!(
                o.get("$class").and_then(Json::as_str),
                Some("builtins.set" | "builtins.frozenset")
            );
            let mut m = Map::new();
            for (k, v) in o {
                let mut v = normalize(v);
                if is_set && k == "$arg" {
                    if let Json::Array(items) = &mut v {
                        items.sort_by_key(|x| x.to_string());
                    }
                }
                m.insert(k.clone(), v);
            }
            Json::Object(m)
        }
        other => other.clone(),
    }
}

/// Compares dfck's values to LangGraph's. Keys LangGraph shows only because the graph
/// declares a default for a never-written channel (`graph_defaults`) may be absent.
fn compare_values(
    got: &Map<String, Json>,
    exp: &Map<String, Json>,
    defaults: &HashSet<String>,
    tally: &mut Tally,
) -> Result<(), String> {
    for (k, ev) in exp {
        match got.get(k) {
            Some(gv) if normalize(gv) == normalize(ev) => {}
            Some(gv) => {
                return Err(format!(
                    "channel '{k}': got {} expected {}",
                    short(gv),
                    short(ev)
                ));
            }
            None if defaults.contains(k) => tally.defaults_skipped += 1,
            None => return Err(format!("channel '{k}' missing (expected {})", short(ev))),
        }
    }
    for k in got.keys() {
        if !exp.contains_key(k) {
            return Err(format!("unexpected channel '{k}': {}", short(&got[k])));
        }
    }
    Ok(())
}

/// Compares every thread, namespace and checkpoint of one fixture store (`target`) with
/// the expected JSON the real LangGraph wrote for it.
pub fn check_fixture(stem: &str, target: &str, exp: &Json) -> (Tally, Vec<String>) {
    check_fixture_as(stem, target, exp, false)
}

/// Like [`check_fixture`]; with `converted`, the store was converted delta→full, so modes
/// and `messages` encodings may differ from the expected file while every value must not.
pub fn check_fixture_as(
    stem: &str,
    target: &str,
    exp: &Json,
    converted: bool,
) -> (Tally, Vec<String>) {
    let target = target.to_owned();
    let mut tally = Tally::default();
    let mut bad = Vec::new();
    let error_threads: HashSet<&str> = exp["errors"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["thread_id"].as_str()).collect())
        .unwrap_or_default();
    let summary = dfck_json(&target, &["inspect", "--format", "json"]);
    let empty = vec![];
    let summary_threads = summary["threads"].as_array().unwrap_or(&empty);
    for t in exp["threads"].as_array().expect("threads") {
        tally.threads += 1;
        let tid = t["thread_id"].as_str().expect("thread_id");
        match summary_threads.iter().find(|s| s["thread_id"] == tid) {
            Some(s) if converted || s["mode"] == t["mode"] => {}
            Some(s) => bad.push(format!(
                "{stem} {tid}: mode {} expected {}",
                s["mode"], t["mode"]
            )),
            None => bad.push(format!("{stem} {tid}: missing from the summary")),
        }
        for ns in t["namespaces"].as_array().expect("namespaces") {
            let nsid = ns["checkpoint_ns"].as_str().expect("ns");
            let listing = dfck_json(&target, &["inspect", tid, "--ns", nsid, "--format", "json"]);
            let got_cks = listing["checkpoints"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let exp_cks = ns["checkpoints"].as_array().expect("checkpoints");
            if got_cks.len() != exp_cks.len() {
                bad.push(format!(
                    "{stem} {tid} ns '{nsid}': {} checkpoints, expected {}",
                    got_cks.len(),
                    exp_cks.len()
                ));
            }
            for (g, e) in got_cks.iter().zip(exp_cks) {
                tally.listed += 1;
                for key in [
                    "checkpoint_id",
                    "parent_checkpoint_id",
                    "source",
                    "step",
                    "mode",
                    "messages_encoding",
                    "writes",
                ] {
                    let unreadable = key == "messages_encoding"
                        && g[key].is_null()
                        && error_threads.contains(tid);
                    let structural = converted && (key == "mode" || key == "messages_encoding");
                    if g[key] != e[key] && !unreadable && !structural {
                        bad.push(format!(
                            "{stem} {tid} {}: {key} {} expected {}",
                            e["checkpoint_id"], g[key], e[key]
                        ));
                    }
                }
            }
            for c in exp_cks {
                let cid = c["checkpoint_id"].as_str().expect("id");
                let defaults: HashSet<String> = c["graph_defaults"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                let mut views = vec![("state", &c["values"])];
                if c.get("stored").is_some() {
                    views.push(("stored", &c["stored"]));
                }
                for (view, want) in views {
                    let mut args = vec![
                        "inspect",
                        tid,
                        "--ns",
                        nsid,
                        "--state",
                        "--checkpoint",
                        cid,
                        "--format",
                        "json",
                    ];
                    if view == "stored" {
                        args.push("--stored");
                    }
                    let out = dfck(&target, &args);
                    if !out.status.success() {
                        if error_threads.contains(tid) {
                            assert_clean_failure(&out, "unsupported serializer type");
                            tally.expected_failures += 1;
                        } else {
                            bad.push(format!(
                                "{stem} {tid} {cid} ({view}): dfck failed: {}",
                                String::from_utf8_lossy(&out.stderr).trim()
                            ));
                        }
                        continue;
                    }
                    let got: Json = serde_json::from_slice(&out.stdout).expect("JSON");
                    let (Some(gv), Some(ev)) = (got["values"].as_object(), want.as_object()) else {
                        bad.push(format!("{stem} {tid} {cid} ({view}): values not an object"));
                        continue;
                    };
                    match compare_values(gv, ev, &defaults, &mut tally) {
                        Ok(()) => {
                            if view == "state" {
                                tally.states += 1
                            } else {
                                tally.stored += 1
                            }
                        }
                        Err(e) => bad.push(format!(
                            "{stem} {tid} ns '{nsid}' {cid} ({view}, {}): {e}",
                            c["messages_encoding"]
                        )),
                    }
                    for key in ["checkpoint_id", "parent_checkpoint_id", "mode"] {
                        if converted && key == "mode" {
                            continue;
                        }
                        if got[key] != c[key] {
                            bad.push(format!(
                                "{stem} {tid} {cid}: {key} {} expected {}",
                                got[key], c[key]
                            ));
                        }
                    }
                }
            }
        }
    }
    (tally, bad)
}

/// Runs [`check_fixture`] over several stores in parallel, prints the tallies, and panics
/// listing the mismatches. `targets` are (stem, target, expected JSON).
pub fn check_all(label: &str, targets: Vec<(String, String, Json)>) -> Tally {
    let results: Vec<(String, Tally, Vec<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = targets
            .iter()
            .map(|(stem, target, exp)| {
                s.spawn(move || {
                    let (t, b) = check_fixture(stem, target, exp);
                    (stem.clone(), t, b)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker"))
            .collect()
    });
    let mut total = Tally::default();
    let mut bad = Vec::new();
    for (stem, t, b) in &results {
        println!(
            "{label} {stem}: {} threads, {} checkpoints listed, {} states + {} stored views equal, {} unreadable as expected, {} graph defaults skipped",
            t.threads, t.listed, t.states, t.stored, t.expected_failures, t.defaults_skipped
        );
        total.add(t);
        bad.extend(b.iter().cloned());
    }
    println!(
        "{label}: compared {} checkpoint states and {} stored views with LangGraph's get_state ({} checkpoints listed, {} unreadable as expected)",
        total.states, total.stored, total.listed, total.expected_failures
    );
    if !bad.is_empty() {
        for b in bad.iter().take(40) {
            eprintln!("MISMATCH {b}");
        }
        panic!("{} mismatches", bad.len());
    }
    total
}
