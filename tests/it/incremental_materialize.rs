//! The incremental whole-thread materializer (root to leaves, each checkpoint once — the
//! engine a delta→full conversion needs) gives, at every checkpoint of every fixture, the
//! same `messages` as LangGraph's `get_state` (state view) and as the stored view.

use crate::common::*;
use dfck_core::codec::{Value, to_json};
use dfck_core::materialize::{Reducer, for_each_stored_messages, with_own_writes};
use dfck_core::model::has_marker;
use dfck_core::model::thread::LoadedThread;
use dfck_core::store::Store;
use dfck_core::target::Target;
use serde_json::Value as Json;
use std::collections::{HashMap, HashSet};

fn check_store(label: &str, store: &dyn Store, exp: &Json) -> (usize, Vec<String>) {
    install_test_key();
    let mut compared = 0;
    let mut bad = Vec::new();
    let error_threads: HashSet<&str> = exp["errors"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["thread_id"].as_str()).collect())
        .unwrap_or_default();
    for t in exp["threads"].as_array().unwrap() {
        let tid = t["thread_id"].as_str().unwrap();
        if error_threads.contains(tid) {
            continue;
        }
        for ns in t["namespaces"].as_array().unwrap() {
            let nsid = ns["checkpoint_ns"].as_str().unwrap();
            let lt = LoadedThread::load_full(store, tid, nsid).expect("load");
            let reducer = if lt.nodes.iter().any(|n| has_marker(&n.metadata)) {
                Reducer::Deerflow
            } else {
                Reducer::Langgraph
            };
            let mut got: HashMap<String, (Json, Json)> = HashMap::new();
            for_each_stored_messages(&lt, reducer, &mut |i, stored| {
                let state = with_own_writes(&lt, i, stored, reducer)?;
                got.insert(
                    lt.nodes[i].id.clone(),
                    (
                        to_json(&Value::Array(stored.to_vec())),
                        to_json(&Value::Array(state)),
                    ),
                );
                Ok(())
            })
            .expect("materialize");
            for c in ns["checkpoints"].as_array().unwrap() {
                let cid = c["checkpoint_id"].as_str().unwrap();
                let Some((stored, state)) = got.get(cid) else {
                    bad.push(format!("{label} {tid} {cid}: not reached"));
                    continue;
                };
                let want_state = &c["values"]["messages"];
                if !want_state.is_null() && want_state != state {
                    bad.push(format!("{label} {tid} {cid}: state view differs"));
                }
                let want_stored = c
                    .get("stored")
                    .map(|s| &s["messages"])
                    .unwrap_or(want_state);
                if !want_stored.is_null() && want_stored != stored {
                    bad.push(format!("{label} {tid} {cid}: stored view differs"));
                }
                compared += 1;
            }
        }
    }
    (compared, bad)
}

#[test]
fn incremental_materialization_matches_langgraph_everywhere() {
    let mut total = 0;
    let mut bad = Vec::new();
    for stem in fixture_stems() {
        let store = Target::parse(&sqlite_fixture(&stem).to_string_lossy())
            .unwrap()
            .open_read_only()
            .unwrap();
        let (n, b) = check_store(&stem, store.as_ref(), &expected(&stem));
        total += n;
        bad.extend(b);
    }
    let mut pg_total = 0;
    if let Some(uri) = require_postgres("incremental materialization of the postgres fixtures") {
        for stem in stems_in("expected-pg") {
            let store = Target::parse(&with_db(&uri, &format!("dfck_{stem}")))
                .unwrap()
                .open_read_only()
                .unwrap();
            let (n, b) = check_store(
                &format!("pg {stem}"),
                store.as_ref(),
                &expected_in("expected-pg", &stem),
            );
            pg_total += n;
            bad.extend(b);
        }
        assert!(
            pg_total > 400,
            "too few postgres checkpoints compared: {pg_total}"
        );
    }
    total += pg_total;
    println!(
        "incremental materialization: {total} checkpoints equal LangGraph's messages (state and stored views)"
    );
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(total > 500);
}
