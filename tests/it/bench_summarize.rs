//! `dfck bench summarize` end to end, on the real binary: the behaviours DeerFlow's
//! summarizer tests pin (docs/bench-rows.md#summaries: 9 channel, 6 production), dfck's fixes (docs/bench-rows.md#summaries:
//! broadcast pairing of cadence sweeps, numeric order, per-file failure counts), engines that
//! never pair, the interop fixtures (DeerFlow v1 rows → the numbers DeerFlow's own summarizer
//! prints), CSV, mixed inputs, and the SVG plot.

use crate::common::RunExt;
use serde_json::{Value, json};
use std::path::PathBuf;
use tempfile::TempDir;

use crate::common::summarize::*;

// ---- summarize_channels (docs/bench-rows.md#summaries, 9 behaviours) -------------------------------------------------

#[test]
fn channels_only_successful_pairs_count_exact_dict() {
    let d = TempDir::new().expect("tmp");
    let f = jsonl(
        &d,
        "results.jsonl",
        &[
            ch("full", 0, true, 20.0),
            ch("delta", 0, true, 10.0),
            ch("full", 1, true, 20.0),
            ch("delta", 1, true, 10.0),
            ch("full", 2, true, 30.0),
            ch("delta", 2, false, 0.0),
        ],
    );
    let out = dfck()
        .args([
            "bench",
            "summarize",
            "--json",
            "--metrics",
            "write_total_ms",
            s(&f),
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    let expected = r#"[
  {
    "backend": "sqlite",
    "scenario": "append",
    "snapshot_frequency": 10,
    "update_count": 10,
    "payload_bytes": 128,
    "paired_repetitions": 2,
    "failed_rows": 1,
    "full_write_total_ms": 20.0,
    "delta_write_total_ms": 10.0,
    "ratio_write_total_ms": 0.5
  }
]
"#;
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

#[test]
fn channels_group_without_pair_is_omitted() {
    let d = TempDir::new().expect("tmp");
    let other = |mode| with(ch(mode, 0, true, 5.0), json!({"update_count": 100}));
    let f = jsonl(
        &d,
        "r.jsonl",
        &[
            ch("full", 0, true, 20.0),
            ch("delta", 0, true, 10.0),
            other("full"),
            with(other("delta"), json!({"success": false})),
        ],
    );
    let v = summarize_json(&[s(&f)], 0);
    let list = v.as_array().expect("list");
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["update_count"], json!(10));
}

#[test]
fn channels_profiled_pairs_are_excluded_with_a_warning() {
    let d = TempDir::new().expect("tmp");
    let prof = |mode, t| with(ch(mode, 1, true, t), json!({"profiled": true}));
    let f = jsonl(
        &d,
        "r.jsonl",
        &[
            ch("full", 0, true, 20.0),
            ch("delta", 0, true, 10.0),
            prof("full", 1000.0),
            prof("delta", 1.0),
        ],
    );
    let out = dfck()
        .args(["bench", "summarize", "--json", s(&f)])
        .assert()
        .code(0)
        .stderr_contains("Skipping 2 profiled row(s)");
    let v: Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    assert_eq!(v[0]["paired_repetitions"], json!(1));
    assert_eq!(v[0]["ratio_write_total_ms"], json!(0.5));
}

#[test]
fn channels_all_profiled_prints_no_pairs_and_exits_1() {
    let d = TempDir::new().expect("tmp");
    let prof = |mode, t| with(ch(mode, 0, true, t), json!({"profiled": true}));
    let f = jsonl(&d, "r.jsonl", &[prof("full", 2.0), prof("delta", 1.0)]);
    dfck()
        .args(["bench", "summarize", s(&f)])
        .assert()
        .code(1)
        .stdout("(no comparable full/delta pairs)\n")
        .stderr_contains("Skipping 2 profiled row(s)");
}

#[test]
fn channels_groups_sort_numerically() {
    let d = TempDir::new().expect("tmp");
    let n = |mode, n: u64| with(ch(mode, 0, true, 1.0), json!({"update_count": n}));
    let f = jsonl(
        &d,
        "r.jsonl",
        &[n("full", 10), n("delta", 10), n("full", 2), n("delta", 2)],
    );
    let v = summarize_json(&[s(&f)], 0);
    let ns: Vec<&Value> = v
        .as_array()
        .expect("list")
        .iter()
        .map(|x| &x["update_count"])
        .collect();
    assert_eq!(ns, vec![&json!(2), &json!(10)]);
}

#[test]
fn channels_malformed_line_is_reported_with_file_and_line() {
    let d = TempDir::new().expect("tmp");
    let p = d.path().join("results.jsonl");
    std::fs::write(
        &p,
        format!(
            "{}\n{{not json\n# comment\n\n[1, 2]\n",
            ch("full", 0, true, 1.0)
        ),
    )
    .expect("write");
    dfck()
        .args(["bench", "summarize", s(&p)])
        .assert()
        .code(1)
        .stdout("")
        .stderr_contains("Malformed JSONL row(s):")
        .stderr_contains("results.jsonl:2: ")
        .stderr_contains("results.jsonl:5: expected a JSON object");
}

#[test]
fn channels_two_files_with_the_same_repetition_stay_separate() {
    let d = TempDir::new().expect("tmp");
    let a = jsonl(
        &d,
        "a.jsonl",
        &[ch("full", 0, true, 20.0), ch("delta", 0, true, 10.0)],
    );
    let b = jsonl(
        &d,
        "b.jsonl",
        &[ch("full", 0, true, 20.0), ch("delta", 0, true, 10.0)],
    );
    let v = summarize_json(&[s(&a), s(&b)], 0);
    assert_eq!(v[0]["paired_repetitions"], json!(2));
    assert_eq!(v[0]["full_write_total_ms"], json!(20.0));
    assert_eq!(v[0]["delta_write_total_ms"], json!(10.0));
}

#[test]
fn channels_full_only_and_delta_only_files_never_cross_pair() {
    let d = TempDir::new().expect("tmp");
    let a = jsonl(&d, "full.jsonl", &[ch("full", 0, true, 20.0)]);
    let b = jsonl(&d, "delta.jsonl", &[ch("delta", 0, true, 10.0)]);
    dfck()
        .args(["bench", "summarize", s(&a), s(&b)])
        .assert()
        .code(1)
        .stdout("(no comparable full/delta pairs)\n");
    assert_eq!(summarize_json(&[s(&a), s(&b)], 1), json!([]));
}

#[test]
fn channels_json_gives_ratio() {
    let d = TempDir::new().expect("tmp");
    let f = jsonl(
        &d,
        "r.jsonl",
        &[ch("full", 0, true, 20.0), ch("delta", 0, true, 10.0)],
    );
    let v = summarize_json(&[s(&f)], 0);
    assert_eq!(v[0]["ratio_write_total_ms"], json!(0.5));
}

// ---- summarize_production (docs/bench-rows.md#summaries, 6 behaviours) -----------------------------------------------

#[test]
fn production_full_row_is_broadcast_to_every_cadence() {
    let d = TempDir::new().expect("tmp");
    let m = |t: f64| json!({"run_turn_p50_ms": t});
    let f = jsonl(
        &d,
        "p.jsonl",
        &[
            pr("full", None, 0, m(100.0)),
            pr("delta", Some(10), 0, m(80.0)),
            pr("delta", Some(100), 0, m(90.0)),
        ],
    );
    let v = summarize_json(&[s(&f)], 0);
    assert_eq!(v.as_array().map(Vec::len), Some(2));
    assert_eq!(v[0]["snapshot_frequency"], json!(10));
    assert_eq!(v[0]["ratio_run_turn_p50_ms"], json!(0.8));
    assert_eq!(v[1]["snapshot_frequency"], json!(100));
    assert_eq!(v[1]["ratio_run_turn_p50_ms"], json!(0.9));
    assert_eq!(v[1]["paired_repetitions"], json!(1));
}

#[test]
fn production_decision_metrics() {
    let d = TempDir::new().expect("tmp");
    let m = json!({"checkpoint_write_p50_ms": 10.0, "checkpoint_write_p99_ms": 50.0,
                   "state_cold_ms": 50.0, "state_warm_p50_ms": 5.0});
    let f = jsonl(
        &d,
        "p.jsonl",
        &[pr("full", None, 0, m.clone()), pr("delta", Some(10), 0, m)],
    );
    let v = summarize_json(&[s(&f)], 0);
    for label in ["full", "delta"] {
        assert_eq!(v[0][format!("{label}_snapshot_write_spike")], json!(5.0));
        assert_eq!(v[0][format!("{label}_cache_effect_ms")], json!(45.0));
    }
}

#[test]
fn production_failed_rows_per_group_count_a_failed_full_row_in_each() {
    let d = TempDir::new().expect("tmp");
    let fail = |mode, freq, rep| with(pr(mode, freq, rep, json!({})), json!({"success": false}));
    let f = jsonl(
        &d,
        "p.jsonl",
        &[
            pr("full", None, 0, json!({"db_bytes": 10})),
            pr("delta", Some(10), 0, json!({"db_bytes": 5})),
            pr("delta", Some(100), 0, json!({"db_bytes": 6})),
            fail("full", None, 1),
            fail("delta", Some(10), 1),
            fail("delta", Some(10), 2),
            fail("delta", Some(100), 2),
        ],
    );
    let v = summarize_json(&[s(&f)], 0);
    assert_eq!(v[0]["failed_rows"], json!(3));
    assert_eq!(v[1]["failed_rows"], json!(2));
}

#[test]
fn production_history_metrics_are_discovered_unless_metrics_is_given() {
    let d = TempDir::new().expect("tmp");
    let f = jsonl(
        &d,
        "p.jsonl",
        &[
            pr(
                "full",
                None,
                0,
                json!({"history_limit_64_cold_ms": 10.0, "history_limit_64_warm_p95_ms": 1.0,
                       "history_limit_8_warm_p50_ms": 4.0, "history_limit_64_cold_saver_ms": 1.0}),
            ),
            pr(
                "delta",
                Some(10),
                0,
                json!({"history_limit_64_cold_ms": 20.0, "history_limit_64_warm_p95_ms": 2.0,
                       "history_limit_8_warm_p50_ms": 2.0, "history_limit_64_cold_saver_ms": 2.0}),
            ),
        ],
    );
    let v = summarize_json(&[s(&f)], 0);
    assert_eq!(v[0]["ratio_history_limit_64_cold_ms"], json!(2.0));
    assert_eq!(v[0]["ratio_history_limit_8_warm_p50_ms"], json!(0.5));
    assert!(v[0].get("ratio_history_limit_64_warm_p95_ms").is_none());
    assert!(v[0].get("ratio_history_limit_64_cold_saver_ms").is_none());
    // Sorted by (limit as int, key): 8 before 64.
    let keys: Vec<&String> = v[0].as_object().expect("obj").keys().collect();
    let pos = |k: &str| keys.iter().position(|x| *x == k);
    assert!(pos("full_history_limit_8_warm_p50_ms") < pos("full_history_limit_64_cold_ms"));
    let explicit = summarize_json(&["--metrics", "history_limit_8_warm_p50_ms", s(&f)], 0);
    assert!(explicit[0].get("ratio_history_limit_64_cold_ms").is_none());
    assert_eq!(explicit[0]["ratio_history_limit_8_warm_p50_ms"], json!(0.5));
}

#[test]
fn production_checkpoint_write_share() {
    let d = TempDir::new().expect("tmp");
    let f = jsonl(
        &d,
        "p.jsonl",
        &[
            pr(
                "full",
                None,
                0,
                json!({"checkpoint_write_p50_ms": 10.0, "run_turn_p50_ms": 100.0}),
            ),
            pr(
                "delta",
                Some(10),
                0,
                json!({"checkpoint_write_p50_ms": 20.0, "run_turn_p50_ms": 80.0}),
            ),
        ],
    );
    let v = summarize_json(&[s(&f)], 0);
    assert_eq!(v[0]["full_checkpoint_write_share"], json!(0.1));
    assert_eq!(v[0]["delta_checkpoint_write_share"], json!(0.25));
    let z = jsonl(
        &d,
        "z.jsonl",
        &[
            pr(
                "full",
                None,
                0,
                json!({"checkpoint_write_p50_ms": 10.0, "run_turn_p50_ms": 0.0}),
            ),
            pr(
                "delta",
                Some(10),
                0,
                json!({"checkpoint_write_p50_ms": 20.0, "run_turn_p50_ms": 0}),
            ),
        ],
    );
    let v = summarize_json(&[s(&z)], 0);
    assert!(v[0].get("full_checkpoint_write_share").is_none());
    assert!(v[0].get("delta_checkpoint_write_share").is_none());
    assert_eq!(v[0]["ratio_run_turn_p50_ms"], Value::Null);
}

#[test]
fn production_groups_sort_numerically_and_profiled_rows_drop_silently() {
    let d = TempDir::new().expect("tmp");
    let t = |mode, freq, turns: u64| {
        with(
            pr(mode, freq, 0, json!({"db_bytes": 1})),
            json!({"turns": turns}),
        )
    };
    let prof = with(
        pr("delta", Some(7), 0, json!({"db_bytes": 1})),
        json!({"profiled": true}),
    );
    let f = jsonl(
        &d,
        "p.jsonl",
        &[
            t("full", None, 100),
            t("delta", Some(10), 100),
            t("delta", Some(5), 100),
            t("full", None, 30),
            t("delta", Some(10), 30),
            prof,
        ],
    );
    dfck()
        .args(["bench", "summarize", s(&f)])
        .assert()
        .code(0)
        .stderr("");
    let v = summarize_json(&[s(&f)], 0);
    let keys: Vec<(Value, Value)> = v
        .as_array()
        .expect("list")
        .iter()
        .map(|x| (x["turns"].clone(), x["snapshot_frequency"].clone()))
        .collect();
    assert_eq!(
        keys,
        vec![
            (json!(30), json!(10)),
            (json!(100), json!(5)),
            (json!(100), json!(10))
        ]
    );
}

// ---- interop fixtures: DeerFlow v1 rows ----------------------------------------------------

fn fixture(name: &str) -> PathBuf {
    crate::common::root().join("fixtures/bench").join(name)
}

#[test]
fn interop_deerflow_v1_channels_match_the_expected_summary_byte_for_byte() {
    let expected = std::fs::read_to_string(fixture("deerflow-v1-channels.expected.json"))
        .expect("expected file");
    dfck()
        .args(["bench", "summarize", "--json"])
        .arg(fixture("deerflow-v1-channels.jsonl"))
        .assert()
        .code(0)
        .stdout(expected)
        .stderr_contains("Skipping 1 profiled row(s)");
}

#[test]
fn interop_deerflow_v1_production_matches_the_expected_summary_byte_for_byte() {
    let expected = std::fs::read_to_string(fixture("deerflow-v1-production.expected.json"))
        .expect("expected file");
    dfck()
        .args(["bench", "summarize", "--json"])
        .arg(fixture("deerflow-v1-production.jsonl"))
        .assert()
        .code(0)
        .stdout(expected)
        .stderr("");
}

// ---- output formats and errors ---------------------------------------------------------------

#[test]
fn csv_has_header_then_rows_in_column_order() {
    let d = TempDir::new().expect("tmp");
    let f = jsonl(
        &d,
        "r.jsonl",
        &[ch("full", 0, true, 20.0), ch("delta", 0, true, 10.0)],
    );
    dfck()
        .args(["bench", "summarize", "--csv", "--metrics", "write_total_ms", s(&f)])
        .assert()
        .code(0)
        .stdout(
            "backend,scenario,snapshot_frequency,update_count,payload_bytes,paired_repetitions,failed_rows,delta_write_total_ms,full_write_total_ms,ratio_write_total_ms\r\n\
             sqlite,append,10,10,128,1,0,10.0,20.0,0.5\r\n",
        );
    let e = jsonl(&d, "empty.jsonl", &[]);
    dfck()
        .args(["bench", "summarize", "--csv", s(&e)])
        .assert()
        .code(1)
        .stdout("");
}

#[test]
fn table_has_leading_columns_then_sorted_metrics() {
    let d = TempDir::new().expect("tmp");
    let f = jsonl(
        &d,
        "r.jsonl",
        &[ch("full", 0, true, 20.0), ch("delta", 0, true, 10.0)],
    );
    let out = dfck()
        .args([
            "bench",
            "summarize",
            "--wide",
            "--metrics",
            "write_total_ms",
            s(&f),
        ])
        .assert()
        .code(0);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let order = [
        "backend",
        "payload_bytes",
        "paired_repetitions",
        "failed_rows",
        "delta_write_total_ms",
        "full_write_total_ms",
        "ratio_write_total_ms",
    ];
    let pos: Vec<usize> = order.iter().filter_map(|c| text.find(c)).collect();
    assert_eq!(pos.len(), order.len(), "{text}");
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(text.contains("0.5"));
    // Without --wide: the group on one heading, the metric down, full/delta/ratio across.
    let out = dfck()
        .args(["bench", "summarize", "--metrics", "write_total_ms", s(&f)])
        .assert()
        .code(0);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.starts_with("backend=sqlite  scenario=append"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("write_total_ms"))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1..], ["20.0", "10.0", "0.5"], "{text}");
}

#[test]
fn mixed_input_gives_one_section_per_kind() {
    let d = TempDir::new().expect("tmp");
    let c = jsonl(
        &d,
        "c.jsonl",
        &[ch("full", 0, true, 20.0), ch("delta", 0, true, 10.0)],
    );
    let p = jsonl(
        &d,
        "p.jsonl",
        &[
            pr("full", None, 0, json!({"db_bytes": 10})),
            pr("delta", Some(10), 0, json!({"db_bytes": 5})),
        ],
    );
    let v = summarize_json(&[s(&c), s(&p)], 0);
    assert_eq!(v["channels"][0]["ratio_write_total_ms"], json!(0.5));
    assert_eq!(v["production"][0]["ratio_db_bytes"], json!(0.5));
    let out = dfck()
        .args(["bench", "summarize", s(&c), s(&p)])
        .assert()
        .code(0);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("channel benchmark"), "{text}");
    assert!(text.contains("production benchmark"), "{text}");
    let out = dfck()
        .args(["bench", "summarize", "--csv", s(&c), s(&p)])
        .assert()
        .code(0);
    let csv = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("kind,"));
    assert!(lines[1].starts_with("channels,"));
    assert!(lines[2].starts_with("production,"));
}

#[test]
fn usage_errors_exit_2() {
    let d = TempDir::new().expect("tmp");
    let f = jsonl(&d, "r.jsonl", &[ch("full", 0, true, 20.0)]);
    dfck()
        .args(["bench", "summarize", "--json", "--csv", s(&f)])
        .assert()
        .code(2);
    dfck()
        .args(["bench", "summarize", "--metrics", " , ", s(&f)])
        .assert()
        .code(2)
        .stderr_contains("--metrics");
    dfck().args(["bench", "summarize"]).assert().code(2);
    dfck()
        .args(["bench", "summarize"])
        .arg(d.path().join("missing.jsonl"))
        .assert()
        .code(2)
        .stderr_contains("missing.jsonl");
}

#[test]
fn plot_writes_an_svg_with_a_line_per_series() {
    let d = TempDir::new().expect("tmp");
    let svg = d.path().join("out.svg");
    dfck()
        .args(["bench", "summarize", "--plot", s(&svg)])
        .arg(fixture("deerflow-v1-channels.jsonl"))
        .arg(fixture("deerflow-v1-production.jsonl"))
        .assert()
        .code(0);
    let text = std::fs::read_to_string(&svg).expect("svg written");
    assert!(text.starts_with("<svg"), "{}", &text[..text.len().min(200)]);
    assert!(text.trim_end().ends_with("</svg>"));
    // channels: memory/sqlite × full/delta F=10 in 2 panels; production: full, F=5, F=10 in 3.
    assert_eq!(text.matches("<polyline").count(), 4 * 2 + 3 * 3);
    for label in [
        "memory full",
        "sqlite delta F=10",
        "delta F=5",
        "Channel benchmark: storage",
        "Production benchmark: database size",
    ] {
        assert!(text.contains(label), "missing {label}");
    }
    // Balanced tags: every opened <g> and <svg> closes.
    assert_eq!(text.matches("<g ").count(), text.matches("</g>").count());
    // A v2 sweep: one line per cadence plus full, per panel.
    let mut rows = Vec::new();
    for n in [10, 100, 1000] {
        for (mode, freq) in [("full", 10), ("delta", 5), ("delta", 50)] {
            rows.push(with(
                v2("native", mode, freq, 0, n as f64),
                json!({"update_count": n, "logical_checkpoint_bytes": n * 1000}),
            ));
        }
    }
    let f = jsonl(&d, "sweep.jsonl", &rows);
    let svg2 = d.path().join("sweep.svg");
    dfck()
        .args(["bench", "summarize", "--plot", s(&svg2), s(&f)])
        .assert()
        .code(0);
    let text = std::fs::read_to_string(&svg2).expect("svg written");
    assert_eq!(text.matches("<polyline").count(), 3 * 2);
    assert!(text.contains("native/sqlite delta F=50"));
}
