//! Every checkpoint of every fixture store, materialized by the real `dfck` binary, equals
//! what the real LangGraph's `get_state` returned for it (fixtures/expected/*.json).

use crate::common::*;

#[test]
fn every_fixture_checkpoint_matches_langgraph() {
    let stems = fixture_stems();
    assert!(stems.len() >= 8, "fixtures missing: {stems:?}");
    let targets = stems
        .iter()
        .map(|stem| {
            (
                stem.clone(),
                sqlite_fixture(stem).to_string_lossy().into_owned(),
                expected(stem),
            )
        })
        .collect();
    let total = compare::check_all("sqlite", targets);
    assert!(
        total.states > 500,
        "too few checkpoints compared: {}",
        total.states
    );
}
