//! `migrate --reducer` is honoured: a DeerFlow-marked thread converted with LangGraph's reducer
//! stores LangGraph's view, and the two reducers really give different lists on that thread.

use crate::common::{dfck_json, sqlite_fixture, temp_copy};
use serde_json::Value as Json;
use std::path::Path;

const THREAD: &str = "t-deerflow";

fn ids(db: &str) -> Vec<String> {
    dfck_json(db, &["inspect", THREAD, "--format", "json"])["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkpoint_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The message lists at every checkpoint (the values stored there, no pending writes).
fn lists(db: &str, reducer: &str) -> Vec<Json> {
    ids(db)
        .iter()
        .map(|c| {
            let args = [
                "inspect",
                THREAD,
                "--state",
                "--stored",
                "--checkpoint",
                c,
                "--reducer",
                reducer,
                "--format",
                "json",
            ];
            dfck_json(db, &args)["values"]["messages"].clone()
        })
        .collect()
}

fn convert(db: &Path, reducer: &str) {
    let j = dfck_json(
        db.to_str().unwrap(),
        &[
            "migrate",
            "delta-to-full",
            THREAD,
            "--apply",
            "--reducer",
            reducer,
            "--format",
            "json",
        ],
    );
    assert_eq!(j["converted"], 1, "{j}");
}

#[test]
fn migrate_converts_with_the_reducer_it_is_given() {
    let fixture = sqlite_fixture("deerflow");
    let src = fixture.to_str().unwrap();
    let deerflow_view = lists(src, "deerflow");
    let langgraph_view = lists(src, "langgraph");
    let differ = deerflow_view
        .iter()
        .zip(&langgraph_view)
        .filter(|(a, b)| a != b)
        .count();
    assert!(
        differ > 0,
        "the reducers agree on {THREAD}: the test would prove nothing"
    );

    for (reducer, expected) in [
        ("langgraph", &langgraph_view),
        ("deerflow", &deerflow_view),
        ("auto", &deerflow_view),
    ] {
        let (_dir, db) = temp_copy(&fixture);
        convert(&db, reducer);
        // Converted: every checkpoint stores its list, whatever reducer reads it now.
        let got = lists(db.to_str().unwrap(), "langgraph");
        assert_eq!(&got, expected, "--reducer {reducer}");
    }
    eprintln!(
        "migrate --reducer: the reducers differ at {differ} checkpoint(s) of {THREAD}; each conversion stored its own reducer's lists"
    );
}
