//! `dfck bench summarize` on dfck's fixes to DeerFlow's summarizer and on v2 rows: broadcast
//! pairing of cadence sweeps, engines that never pair with each other nor with v1 rows,
//! per-file failure counts, and medians that skip bools and nulls pair by pair. DeerFlow's own
//! behaviours, the interop fixtures and the output formats are in `tests/bench_summarize.rs`.

use serde_json::{Value, json};

use tempfile::TempDir;

use crate::common::summarize::*;

// ---- dfck's fixes and v2 rows ----------------------------------------------------------------

#[test]
fn v2_cadence_sweep_pairs_every_cadence_with_the_one_full_row() {
    let d = TempDir::new().expect("tmp");
    let mut rows = Vec::new();
    for rep in 0..2 {
        rows.push(v2("native", "full", 10, rep, 100.0));
        rows.push(v2("native", "delta", 25, rep, 50.0));
        rows.push(v2("native", "delta", 5, rep, 80.0));
        rows.push(v2("native", "delta", 10, rep, 60.0));
    }
    let f = jsonl(&d, "sweep.jsonl", &rows);
    let v = summarize_json(&["--metrics", "write_total_ms", s(&f)], 0);
    let got: Vec<(Value, Value, Value)> = v
        .as_array()
        .expect("list")
        .iter()
        .map(|x| {
            (
                x["snapshot_frequency"].clone(),
                x["paired_repetitions"].clone(),
                x["ratio_write_total_ms"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (json!(5), json!(2), json!(0.8)),
            (json!(10), json!(2), json!(0.6)),
            (json!(25), json!(2), json!(0.5)),
        ]
    );
    assert_eq!(v[0]["engine"], json!("native"));
    let keys: Vec<&String> = v[0].as_object().expect("obj").keys().take(2).collect();
    assert_eq!(keys, ["engine", "backend"]);
}

#[test]
fn engines_never_pair_with_each_other_nor_with_v1_rows() {
    let d = TempDir::new().expect("tmp");
    let cross = jsonl(
        &d,
        "cross.jsonl",
        &[
            v2("native", "full", 10, 0, 100.0),
            v2("langgraph", "delta", 10, 0, 50.0),
            ch("delta", 0, true, 40.0),
        ],
    );
    assert_eq!(summarize_json(&[s(&cross)], 1), json!([]));
    let both = jsonl(
        &d,
        "both.jsonl",
        &[
            v2("native", "full", 10, 0, 100.0),
            v2("native", "delta", 10, 0, 50.0),
            v2("langgraph", "full", 10, 0, 400.0),
            v2("langgraph", "delta", 10, 0, 100.0),
            ch("full", 0, true, 10.0),
            ch("delta", 0, true, 9.0),
        ],
    );
    let v = summarize_json(&["--metrics", "write_total_ms", s(&both)], 0);
    let got: Vec<(Option<&str>, Value)> = v
        .as_array()
        .expect("list")
        .iter()
        .map(|x| (x["engine"].as_str(), x["ratio_write_total_ms"].clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (None, json!(0.9)),
            (Some("langgraph"), json!(0.25)),
            (Some("native"), json!(0.5)),
        ]
    );
    assert!(v[0].get("engine").is_none());
}

#[test]
fn channel_failed_full_row_counts_toward_each_cadence_of_its_own_file_only() {
    let d = TempDir::new().expect("tmp");
    let failed_full = with(v2("native", "full", 10, 1, 0.0), json!({"success": false}));
    let a = jsonl(
        &d,
        "a.jsonl",
        &[
            v2("native", "full", 10, 0, 10.0),
            v2("native", "delta", 5, 0, 5.0),
            v2("native", "delta", 50, 0, 5.0),
            failed_full,
        ],
    );
    let b = jsonl(
        &d,
        "b.jsonl",
        &[
            v2("native", "full", 10, 0, 10.0),
            v2("native", "delta", 100, 0, 5.0),
        ],
    );
    let v = summarize_json(&[s(&a), s(&b)], 0);
    let got: Vec<(Value, Value)> = v
        .as_array()
        .expect("list")
        .iter()
        .map(|x| (x["snapshot_frequency"].clone(), x["failed_rows"].clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (json!(5), json!(1)),
            (json!(50), json!(1)),
            (json!(100), json!(0))
        ]
    );
}

#[test]
fn production_failed_full_row_counts_only_where_its_file_has_that_cadence() {
    let d = TempDir::new().expect("tmp");
    let a = jsonl(
        &d,
        "a.jsonl",
        &[
            pr("full", None, 0, json!({"db_bytes": 10})),
            pr("delta", Some(10), 0, json!({"db_bytes": 5})),
            with(pr("full", None, 1, json!({})), json!({"success": false})),
        ],
    );
    let b = jsonl(
        &d,
        "b.jsonl",
        &[
            pr("full", None, 0, json!({"db_bytes": 10})),
            pr("delta", Some(100), 0, json!({"db_bytes": 5})),
        ],
    );
    let v = summarize_json(&[s(&a), s(&b)], 0);
    assert_eq!(v[0]["snapshot_frequency"], json!(10));
    assert_eq!(v[0]["failed_rows"], json!(1));
    assert_eq!(v[1]["snapshot_frequency"], json!(100));
    assert_eq!(v[1]["failed_rows"], json!(0));
}

#[test]
fn metric_medians_skip_bools_and_nulls_per_pair() {
    let d = TempDir::new().expect("tmp");
    let f = jsonl(
        &d,
        "r.jsonl",
        &[
            with(ch("full", 0, true, 20.0), json!({"x": true})),
            with(ch("delta", 0, true, 10.0), json!({"x": 1.0})),
            with(ch("full", 1, true, 20.0), json!({"x": 4.0})),
            with(ch("delta", 1, true, 10.0), json!({"x": 2.0})),
            with(ch("full", 2, true, 20.0), json!({"x": 0})),
            with(ch("delta", 2, true, 10.0), json!({"x": null})),
        ],
    );
    let v = summarize_json(&["--metrics", "x,nothing", s(&f)], 0);
    assert_eq!(v[0]["full_x"], json!(4.0));
    assert_eq!(v[0]["delta_x"], json!(2.0));
    assert!(v[0].get("full_nothing").is_none());
}
