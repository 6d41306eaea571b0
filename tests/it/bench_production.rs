//! `dfck bench production`: the native production matrix on SQLite (and PostgreSQL when the
//! test server runs) — paired rows with equal digests across modes and cadences, summarized
//! with the decision metrics and drawn as SVG; usage errors; and `--replay-from` on the
//! committed fixtures, whose rows carry the source threads' materialized messages digest and
//! nothing of their content. With `DFCK_TEST_PYTHON` (a Python with the pinned LangGraph),
//! the `langgraph` engine runs the same matrix through the real Python LangGraph and its rows
//! carry the native engine's digests, case by case.

use crate::common::*;
use dfck_bench::digest::{DigestMessage, content_sha256};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

fn bench(args: &[&str]) -> std::process::Output {
    crate::common::dfck_command()
        .args(args)
        .output()
        .expect("run dfck")
}

fn rows(path: &std::path::Path) -> Vec<Json> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn matrix_rows_pair_with_equal_digests_and_summarize() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("prod.jsonl");
    let pg = crate::common::require_postgres("postgres part");
    let backends = if pg.is_some() {
        "sqlite,postgres"
    } else {
        "sqlite"
    };
    let o = bench(&[
        "bench",
        "production",
        "--turns",
        "10,30",
        "--snapshot-frequencies",
        "5,10",
        "--repetitions",
        "2",
        "--read-repetitions",
        "3",
        "--backends",
        backends,
        "--output",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let rows = rows(&out);
    let n_backends = backends.split(',').count();
    assert_eq!(rows.len(), 2 * 2 * 3 * n_backends, "{stderr}");
    let mut sigs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &rows {
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(r["schema_version"], 2);
        assert_eq!(r["benchmark"], "checkpoint_production");
        let turns = r["turns"].as_u64().unwrap();
        assert_eq!(r["message_count"].as_u64().unwrap(), 4 * turns + 1);
        assert!(r["history_limit_100_warm_p50_ms"].is_number(), "{r}");
        assert!(r["checkpoints_per_turn"].as_f64().unwrap() >= 8.0);
        let key = format!("{}|{}|{}", r["backend"], turns, r["repetition"]);
        let sig = format!(
            "{}|{}|{}",
            r["seed_content_sha256"], r["state_wire_sha256"], r["history_wire_sha256"]
        );
        sigs.entry(key).or_default().push(sig);
        let text = r.to_string();
        if let Some(u) = &pg {
            assert!(
                !text.contains(u.as_str()),
                "the server URL leaked into a row"
            );
        }
        assert!(!text.contains("/tmp/"), "a temporary path leaked: {text}");
    }
    for (k, s) in &sigs {
        assert_eq!(s.len(), 3, "{k}");
        assert!(s.iter().all(|x| x == &s[0]), "{k}: {s:?}");
    }
    // The digests do not depend on the date or the run.
    let first = &rows[0]["seed_content_sha256"];
    assert!(
        rows.iter()
            .filter(|r| r["turns"] == 10)
            .all(|r| &r["seed_content_sha256"] == first)
    );
    // Summaries: paired table, decision metrics, SVG.
    let svg = dir.path().join("prod.svg");
    let s = bench(&[
        "bench",
        "summarize",
        out.to_str().unwrap(),
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(
        s.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&s.stderr)
    );
    let summary: Json = serde_json::from_slice(&s.stdout).unwrap();
    let groups = summary.as_array().unwrap();
    assert_eq!(groups.len(), 2 * 2 * n_backends);
    for g in groups {
        assert_eq!(g["paired_repetitions"], 2, "{g}");
        for k in [
            "full_snapshot_write_spike",
            "delta_snapshot_write_spike",
            "full_checkpoint_write_share",
            "delta_cache_effect_ms",
            "ratio_state_cold_ms",
        ] {
            assert!(g[k].is_number(), "{k} missing in {g}");
        }
    }
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"));
    let table = bench(&["bench", "summarize", out.to_str().unwrap()]);
    assert_eq!(table.status.code(), Some(0));
    // One group at a time: the metric down, full/delta/ratio across.
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("snapshot_write_spike")),
        "{text}"
    );
}

#[test]
fn bad_arguments_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.jsonl");
    let o = out.to_str().unwrap();
    let df = sqlite_fixture("deerflow").to_string_lossy().into_owned();
    let full = sqlite_fixture("full").to_string_lossy().into_owned();
    for (args, needle) in [
        (vec!["--turns", "2,10", "--output", o], "warm-up"),
        (
            vec!["--read-repetitions", "0", "--output", o],
            "repetition and timeout values must be positive",
        ),
        (vec!["--turns", "10"], "--output is required"),
        (vec!["--turns", "1,,2", "--output", o], "comma-separated"),
        (
            vec![
                "--engine",
                "langgraph",
                "--worker-script",
                "/nonexistent/worker.py",
                "--output",
                o,
            ],
            "does not exist",
        ),
        (
            vec!["--backends", "memory", "--output", o],
            "unsupported value",
        ),
        (
            vec!["--turns", "3", "--output", "/proc/no-such-dir/x.jsonl"],
            "cannot create the output file /proc/no-such-dir/x.jsonl",
        ),
        (
            vec!["--replay-from", &df, "--thread", "nope", "--output", o],
            "thread 'nope' not found",
        ),
        (
            vec!["--replay-from", &df, "--sample", "0", "--output", o],
            "--sample",
        ),
        (
            vec!["--replay-from", &full, "--thread", "t-exit", "--output", o],
            "more than 2 turns",
        ),
    ] {
        let mut a = vec!["bench", "production"];
        a.extend(args.iter().copied());
        let r = bench(&a);
        assert_eq!(r.status.code(), Some(2), "{a:?}");
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(err.contains(needle), "{a:?}: {err}");
        assert!(!out.exists(), "{a:?} wrote the output");
    }
}

/// thread-id hash → the canonical digest of its head messages, from `dfck inspect --state`.
fn source_digests(target: &str) -> BTreeMap<String, (String, usize)> {
    let summary = dfck_json(target, &["inspect", "--format", "json"]);
    let mut out = BTreeMap::new();
    for t in summary["threads"].as_array().unwrap() {
        let tid = t["thread_id"].as_str().unwrap();
        let st = dfck(target, &["inspect", tid, "--state", "--format", "json"]);
        let Ok(j) = serde_json::from_slice::<Json>(&st.stdout) else {
            continue;
        };
        let msgs = j["values"]["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let owned: Vec<(String, String, Json)> = msgs
            .iter()
            .map(|m| {
                (
                    m["type"].as_str().unwrap_or("").to_owned(),
                    m["id"].as_str().unwrap_or("").to_owned(),
                    m["content"].clone(),
                )
            })
            .collect();
        let d = content_sha256(owned.iter().map(|(k, i, c)| DigestMessage {
            kind: k,
            id: i,
            content: c,
        }));
        out.insert(hex::encode(Sha256::digest(tid.as_bytes())), (d, msgs.len()));
    }
    out
}

fn check_replay(target: &str, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("replay.jsonl");
    let o = bench(&[
        "bench",
        "production",
        "--replay-from",
        target,
        "--snapshot-frequencies",
        "2,3",
        "--repetitions",
        "1",
        "--read-repetitions",
        "2",
        "--history-limits",
        "5",
        "--output",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{what}: {stderr}");
    let want = source_digests(target);
    let rows = rows(&out);
    assert!(!rows.is_empty(), "{what}");
    let mut replayed = std::collections::BTreeSet::new();
    for r in &rows {
        assert_eq!(r["success"], true, "{what}: {r}");
        let h = r["source_thread_sha256"].as_str().unwrap();
        let (digest, n) = want
            .get(h)
            .unwrap_or_else(|| panic!("{what}: unknown source {h}"));
        assert_eq!(r["seed_content_sha256"].as_str().unwrap(), digest, "{what}");
        assert_eq!(r["message_count"].as_u64().unwrap() as usize, *n, "{what}");
        replayed.insert(h.to_owned());
        // No thread id and no message content in rows.
        let text = r.to_string();
        assert!(!text.contains("\"t-"), "{what}: a thread id leaked: {text}");
        assert!(
            !text.contains("\"content\":"),
            "{what}: message content in a row: {text}"
        );
    }
    // Each source thread: full + two cadences, paired.
    assert_eq!(rows.len(), replayed.len() * 3, "{what}");
    println!(
        "{what}: replayed {} source thread(s), {} rows, digests equal the sources'",
        replayed.len(),
        rows.len()
    );
}

#[test]
fn replay_from_sqlite_fixtures_reproduces_the_source_threads() {
    for stem in ["deerflow", "mixed", "delta_k3"] {
        check_replay(&sqlite_fixture(stem).to_string_lossy(), stem);
    }
}

#[test]
fn replay_from_a_postgres_fixture_reproduces_the_source_threads() {
    let Some(server) = pg_server() else { return };
    check_replay(&with_db(&server, "dfck_deerflow"), "postgres deerflow");
}

/// The Python of the langgraph engine tests (`DFCK_TEST_PYTHON`), or a note and `None`.
fn test_python(what: &str) -> Option<String> {
    crate::common::require_python(what).map(|p| p.to_string_lossy().into_owned())
}

/// Runs `bench production` with `args` for one engine; returns its rows (all successful).
fn engine_rows(engine: &str, python: &str, args: &[&str]) -> Vec<Json> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(format!("{engine}.jsonl"));
    let mut a = vec!["bench", "production", "--engine", engine];
    if engine == "langgraph" {
        a.extend(["--python", python]);
    }
    a.extend(args.iter().copied());
    a.extend(["--output", out.to_str().unwrap()]);
    let o = bench(&a);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{engine}: {stderr}");
    let rows = rows(&out);
    for r in &rows {
        assert_eq!(r["success"], true, "{engine}: {r}");
        assert_eq!(r["engine"], engine, "{r}");
    }
    rows
}

/// The identity of a case across engines.
fn case_key(r: &Json) -> String {
    [
        "backend",
        "mode",
        "snapshot_frequency",
        "turns",
        "payload_bytes",
        "repetition",
        "source_thread_sha256",
    ]
    .iter()
    .map(|k| r[*k].to_string())
    .collect::<Vec<_>>()
    .join("|")
}

fn by_case(rows: &[Json]) -> BTreeMap<String, &Json> {
    rows.iter().map(|r| (case_key(r), r)).collect()
}

#[test]
fn langgraph_engine_rows_carry_the_native_digests() {
    let Some(python) = test_python("langgraph engine matrix") else {
        return;
    };
    let backends = if crate::common::require_postgres("postgres part").is_some() {
        "sqlite,postgres"
    } else {
        "sqlite"
    };
    let args = [
        "--turns",
        "4,6",
        "--snapshot-frequencies",
        "3",
        "--repetitions",
        "1",
        "--read-repetitions",
        "2",
        "--history-limits",
        "3",
        "--backends",
        backends,
    ];
    let lg = engine_rows("langgraph", &python, &args);
    let native = engine_rows("native", &python, &args);
    let n_backends = backends.split(',').count();
    assert_eq!(lg.len(), 2 * 2 * n_backends);
    let native = by_case(&native);
    for r in &lg {
        // The real library's identity and the native engine's field order.
        assert_eq!(
            r["runtime_version"].as_str().unwrap_or("").get(..7),
            Some("CPython")
        );
        assert_eq!(r["engine_version"], r["langgraph_version"], "{r}");
        assert!(r["python_version"].is_string(), "{r}");
        assert_eq!(r["schema_version"], 2);
        assert_eq!(r["benchmark"], "checkpoint_production");
        let n = native
            .get(&case_key(r))
            .unwrap_or_else(|| panic!("no native row for {}", case_key(r)));
        let keys = |x: &Json| {
            x.as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<String>>()
        };
        assert_eq!(keys(r), keys(n), "field order differs");
        for k in [
            "message_count",
            "seed_content_sha256",
            "state_wire_sha256",
            "history_wire_sha256",
        ] {
            assert_eq!(r[k], n[k], "{k} differs for {}", case_key(r));
        }
        // The same graph shape: 8 checkpoints per turn, the same write rows.
        assert_eq!(r["checkpoints_per_turn"], 8.0, "{r}");
        assert_eq!(r["checkpoint_rows"], n["checkpoint_rows"], "{r}");
        assert_eq!(r["write_rows"], n["write_rows"], "{r}");
        assert_eq!(r["write_bytes"], n["write_bytes"], "{r}");
        if r["backend"] == "sqlite" {
            assert!(r["wal_bytes"].as_u64().unwrap() > 0, "{r}");
        }
        let text = r.to_string();
        assert!(!text.contains("/tmp/"), "a temporary path leaked: {text}");
        assert!(!text.contains("postgresql://"), "the server URL leaked");
    }
}

#[test]
fn langgraph_engine_replays_with_the_native_digests() {
    let Some(python) = test_python("langgraph engine replay") else {
        return;
    };
    let fixture = sqlite_fixture("deerflow");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/bench_worker_langgraph_production.py"
    );
    let args = [
        "--replay-from",
        fixture.to_str().unwrap(),
        "--snapshot-frequencies",
        "3",
        "--repetitions",
        "1",
        "--read-repetitions",
        "2",
        "--history-limits",
        "3",
        "--worker-script",
        script,
    ];
    let lg = engine_rows("langgraph", &python, &args);
    let native = engine_rows("native", &python, &args[..args.len() - 2]);
    assert!(!lg.is_empty());
    assert_eq!(lg.len(), native.len());
    let native = by_case(&native);
    for r in &lg {
        assert!(r["source_thread_sha256"].is_string(), "{r}");
        let n = native[&case_key(r)];
        assert_eq!(r["message_count"], n["message_count"], "{}", case_key(r));
        // All four digests, including the wire digests of a message whose list content has
        // non-ASCII text (Python's json.dumps escapes it).
        for k in [
            "seed_content_sha256",
            "state_wire_sha256",
            "history_wire_sha256",
        ] {
            assert_eq!(r[k], n[k], "{k} {}", case_key(r));
        }
    }
}

#[test]
fn langgraph_engine_without_a_usable_python_writes_failure_rows() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lg.jsonl");
    let o = bench(&[
        "bench",
        "production",
        "--engine",
        "langgraph",
        "--python",
        "/nonexistent/python",
        "--modes",
        "full",
        "--turns",
        "3",
        "--repetitions",
        "1",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows = rows(&out);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["engine"], "langgraph");
    assert_eq!(r["engine_version"], "unknown");
    assert_eq!(r["benchmark"], "checkpoint_production");
    assert!(r.get("run_turn_p50_ms").is_none(), "{r}");
}
