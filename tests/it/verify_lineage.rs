//! `dfck verify` and `dfck lineage` on the real-library fixtures (no error finding on any
//! healthy store, SQLite and Postgres) and on the defect fixtures (exactly the codes each
//! injected defect causes).

use crate::common::*;
use serde_json::Value as Json;
use std::collections::BTreeSet;

/// (severity, code) pairs of a verify report, with counts.
fn codes(report: &Json) -> Vec<(String, String)> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().unwrap_or("").to_owned(),
                f["code"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Threads where the real LangGraph itself leaks writes across a fork (its delta `get_state`
/// differs from the full twin's): `verify` must report them, which the twin test checks
/// checkpoint by checkpoint (tests/twins.rs).
const REAL_LEAKS: [&str; 2] = ["t-resume-old-update", "f-resume-update-thrice"];

/// Error codes outside [`REAL_LEAKS`], and whether a real leak was reported.
fn errors_beside_real_leaks(report: &Json) -> (BTreeSet<String>, bool) {
    let mut errors = BTreeSet::new();
    let mut leak = false;
    for f in report["findings"].as_array().expect("findings") {
        if f["severity"] != "error" {
            continue;
        }
        let code = f["code"].as_str().unwrap_or("").to_owned();
        if code == "delta.fork_contaminated"
            && REAL_LEAKS.contains(&f["thread_id"].as_str().unwrap_or(""))
        {
            leak = true;
        } else {
            errors.insert(code);
        }
    }
    (errors, leak)
}

fn verify(target: &str, args: &[&str]) -> (Json, i32) {
    let mut all = vec!["verify", "--format", "json"];
    all.extend_from_slice(args);
    let out = dfck(target, &all);
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "verify {target}: exit {code}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).expect("JSON"), code)
}

/// Stores with rows dfck cannot read by design: only `value.unsupported_serializer`.
const UNREADABLE: [&str; 2] = ["encrypted", "pickle"];

/// Errors a fixture holds because the program that wrote it has the bug: DeerFlow's own
/// branch (thread …09 of `deerflow_app`) stores a literal `Overwrite` (DeerFlow #4380).
fn known_errors(stem: &str) -> BTreeSet<String> {
    match stem {
        "deerflow_app" => BTreeSet::from(["value.literal_overwrite".to_string()]),
        _ => BTreeSet::new(),
    }
}

#[test]
fn healthy_sqlite_fixtures_have_no_error_findings() {
    let mut threads = 0;
    let mut checkpoints = 0;
    for stem in fixture_stems() {
        let (report, exit) = verify(&sqlite_fixture(&stem).to_string_lossy(), &[]);
        threads += report["threads_checked"].as_u64().unwrap();
        checkpoints += report["checkpoints_checked"].as_u64().unwrap();
        let (errors, leak) = errors_beside_real_leaks(&report);
        if UNREADABLE.contains(&stem.as_str()) {
            assert_eq!(
                errors,
                BTreeSet::from(["value.unsupported_serializer".to_string()]),
                "{stem}"
            );
            assert_eq!(exit, 1, "{stem}");
        } else {
            let known = known_errors(&stem);
            assert_eq!(errors, known, "{stem}");
            assert_eq!(exit, i32::from(leak || !known.is_empty()), "{stem}");
        }
    }
    println!(
        "verify: {threads} healthy-fixture threads, {checkpoints} checkpoints, no error findings"
    );
    assert!(checkpoints > 600);
}

#[test]
fn mixed_thread_is_information_only() {
    let (report, exit) = verify(&sqlite_fixture("mixed").to_string_lossy(), &["t-mixed"]);
    assert_eq!(exit, 0);
    assert_eq!(report["threads_checked"], 1);
    assert_eq!(
        codes(&report),
        vec![("info".to_string(), "mode.mixed_thread".to_string())]
    );
}

#[test]
fn verify_names_unknown_threads() {
    let out = dfck(
        &sqlite_fixture("full").to_string_lossy(),
        &["verify", "nope"],
    );
    assert_clean_failure(&out, "thread 'nope' not found");
}

#[test]
fn jobs_give_the_same_report() {
    let db = sqlite_fixture("delta_k3").to_string_lossy().into_owned();
    let (one, _) = verify(&db, &[]);
    let (four, _) = verify(&db, &["--jobs", "4"]);
    assert_eq!(one, four);
}

#[test]
fn depth_budget() {
    let db = sqlite_fixture("full").to_string_lossy().into_owned();
    let (report, exit) = verify(&db, &["t-linear", "--max-depth", "5"]);
    assert_eq!(exit, 1);
    assert!(codes(&report).contains(&("error".into(), "lineage.depth_exceeded".into())));
}

#[test]
fn lineage_chain_and_tree() {
    let db = sqlite_fixture("delta_k3").to_string_lossy().into_owned();
    let chain = dfck_json(&db, &["lineage", "t-fork", "--format", "json"]);
    assert_eq!(chain["view"], "chain");
    assert_eq!(chain["end"], "root");
    let cks = chain["checkpoints"].as_array().unwrap();
    assert_eq!(cks[0]["checkpoint_id"], chain["from"]);
    assert!(cks.last().unwrap()["parent_checkpoint_id"].is_null());
    for pair in cks.windows(2) {
        assert_eq!(pair[0]["parent_checkpoint_id"], pair[1]["checkpoint_id"]);
    }
    let tree = dfck_json(&db, &["lineage", "t-fork", "--tree", "--format", "json"]);
    let all = tree["checkpoints"].as_array().unwrap();
    let listing = dfck_json(&db, &["inspect", "t-fork", "--format", "json"]);
    assert_eq!(all.len(), listing["checkpoints"].as_array().unwrap().len());
    let forks = all
        .iter()
        .filter(|e| e["children"].as_array().unwrap().len() > 1)
        .count();
    assert!(forks >= 2, "t-fork has forks");
    let text = dfck(&db, &["lineage", "t-fork", "--tree"]);
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("├─ ") && text.contains("└─ "), "{text}");
    // A chain from a given checkpoint starts there.
    let mid = cks[cks.len() / 2]["checkpoint_id"].as_str().unwrap();
    let from_mid = dfck_json(
        &db,
        &["lineage", "t-fork", "--checkpoint", mid, "--format", "json"],
    );
    assert_eq!(from_mid["checkpoints"][0]["checkpoint_id"], mid);
    assert_clean_failure(
        &dfck(&db, &["lineage", "t-fork", "--checkpoint", "nope"]),
        "checkpoint 'nope' not found",
    );
}

#[test]
fn healthy_postgres_fixtures_have_no_error_findings() {
    let Some(uri) = require_postgres("verify on the healthy postgres fixtures") else {
        return;
    };
    let mut checkpoints = 0;
    for stem in stems_in("expected-pg") {
        let (report, exit) = verify(&with_db(&uri, &format!("dfck_{stem}")), &["--jobs", "2"]);
        checkpoints += report["checkpoints_checked"].as_u64().unwrap();
        let (errors, leak) = errors_beside_real_leaks(&report);
        let known = known_errors(&stem);
        assert_eq!(errors, known, "{stem}");
        assert_eq!(exit, i32::from(leak || !known.is_empty()), "{stem}");
    }
    println!("verify (postgres): {checkpoints} checkpoints, no error findings");
    assert!(checkpoints > 500);
}

/// Checks one defect store against its entry in an expected.json: every primary expected
/// finding is reported, nothing outside the expected list (secondaries included) is, and
/// the exit code matches. Returns the number of findings matched.
fn check_defect(target: &str, d: &Json) -> Result<usize, String> {
    let name = d["name"].as_str().unwrap_or("?");
    let mut args: Vec<&str> = Vec::new();
    if let Some(t) = d["thread_id"].as_str() {
        args.push(t);
    }
    let (report, exit) = verify(target, &args);
    let got: BTreeSet<(String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "info")
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_owned(),
                f["checkpoint_id"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let entry = |e: &Json| {
        (
            e["code"].as_str().unwrap().to_owned(),
            e["checkpoint_id"].as_str().unwrap_or("").to_owned(),
        )
    };
    let expect = d["expect"].as_array().unwrap();
    let allowed: BTreeSet<_> = expect.iter().map(entry).collect();
    let primary: BTreeSet<_> = expect
        .iter()
        .filter(|e| e["secondary"] != true)
        .map(entry)
        .collect();
    let missing: Vec<_> = primary.difference(&got).collect();
    let extra: Vec<_> = got.difference(&allowed).collect();
    if !missing.is_empty() || !extra.is_empty() {
        return Err(format!("{name}: missing {missing:?}, unexpected {extra:?}"));
    }
    let want_exit = d["exit"].as_i64().unwrap_or(0) as i32;
    if exit != want_exit {
        return Err(format!("{name}: exit {exit}, expected {want_exit}"));
    }
    Ok(primary.len())
}

#[test]
fn sqlite_defects_yield_exactly_their_codes() {
    let exp = expected_in("defects", "expected");
    let mut matched = 0;
    let mut bad = Vec::new();
    let defects = exp["defects"].as_array().expect("defects");
    for d in defects {
        let file = root()
            .join("fixtures/defects")
            .join(d["file"].as_str().unwrap());
        match check_defect(&file.to_string_lossy(), d) {
            Ok(n) => matched += n,
            Err(e) => bad.push(e),
        }
    }
    println!(
        "verify: {} sqlite defect stores, {matched} expected findings matched",
        defects.len()
    );
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(defects.len() >= 14);
}

#[test]
fn one_bad_row_does_not_stop_the_scan() {
    // The whole store is checked around a truncated blob: every thread is counted.
    let db = root().join("fixtures/defects/truncated_blob.db");
    let db = db.to_string_lossy();
    let summary = dfck_json(&db, &["inspect", "--format", "json"]);
    let (report, exit) = verify(&db, &[]);
    assert_eq!(exit, 1);
    assert_eq!(report["threads_checked"], summary["counts"]["threads"]);
    assert_eq!(
        report["checkpoints_checked"],
        summary["counts"]["checkpoints"]
    );
}

#[test]
fn lineage_marks_contaminated_branches() {
    let exp = expected_in("defects", "expected");
    let d = exp["defects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "contaminated_fork")
        .expect("contaminated_fork defect");
    let db = root()
        .join("fixtures/defects")
        .join(d["file"].as_str().unwrap());
    let thread = d["thread_id"].as_str().unwrap();
    let out = dfck(
        &db.to_string_lossy(),
        &["lineage", thread, "--tree", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(1), "error findings give exit 1");
    let tree: Json = serde_json::from_slice(&out.stdout).unwrap();
    let marked: BTreeSet<&str> = tree["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["contaminated"] == true)
        .map(|e| e["checkpoint_id"].as_str().unwrap())
        .collect();
    let expected: BTreeSet<&str> = d["expect"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["code"] == "delta.fork_contaminated")
        .map(|e| e["checkpoint_id"].as_str().unwrap())
        .collect();
    assert_eq!(marked, expected);
    let text = dfck(&db.to_string_lossy(), &["lineage", thread, "--tree"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("[CONTAMINATED]"));
}

#[test]
fn postgres_defects_yield_exactly_their_codes() {
    let Some(uri) = require_postgres("verify on the postgres defect fixtures") else {
        return;
    };
    let exp = expected_in("defects-pg", "expected");
    let mut matched = 0;
    let mut bad = Vec::new();
    let defects = exp["defects"].as_array().expect("defects");
    for d in defects {
        let stem = d["file"].as_str().unwrap().trim_end_matches(".sql");
        match check_defect(&with_db(&uri, &format!("dfck_defect_{stem}")), d) {
            Ok(n) => matched += n,
            Err(e) => bad.push(e),
        }
    }
    println!(
        "verify: {} postgres defect stores, {matched} expected findings matched",
        defects.len()
    );
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(defects.len() >= 10);
}

#[test]
fn duration_only_checkpoints_are_information() {
    // DeerFlow's run-duration writer: the head's body under a new id, parent = the head,
    // the head's metadata plus source "update", run_durations and writes.runtime_run_duration.
    let (_dir, db) = temp_copy(&sqlite_fixture("deerflow"));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (head, ty, body, meta): (String, String, Vec<u8>, Vec<u8>) = conn
        .query_row(
            "SELECT checkpoint_id, type, checkpoint, metadata FROM checkpoints \
             WHERE thread_id = 't-deerflow' AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    let new_id = format!("{}ffffffffffff", &head[..head.len() - 12]);
    assert!(new_id > head);
    let mut m: serde_json::Map<String, Json> = serde_json::from_slice(&meta).unwrap();
    m.insert("source".into(), "update".into());
    m.insert("run_durations".into(), serde_json::json!({"run-1": 3}));
    m.insert(
        "writes".into(),
        serde_json::json!({"runtime_run_duration": {"run_ids": ["run-1"]}}),
    );
    conn.execute(
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) \
         VALUES ('t-deerflow', '', ?1, ?2, ?3, ?4, ?5)",
        rusqlite::params![new_id, head, ty, body, serde_json::to_vec(&m).unwrap()],
    )
    .unwrap();
    drop(conn);
    let (report, exit) = verify(&db.to_string_lossy(), &["t-deerflow"]);
    assert_eq!(exit, 0, "{report}");
    let found = codes(&report);
    assert!(
        found.contains(&("info".into(), "lineage.duration_only".into())),
        "{found:?}"
    );
    assert!(found.iter().all(|(s, _)| s == "info"), "{found:?}");
    let chain = dfck_json(
        &db.to_string_lossy(),
        &["lineage", "t-deerflow", "--format", "json"],
    );
    assert_eq!(chain["checkpoints"][0]["duration_only"], true);
}

/// Removes `messages` from a SQLite checkpoint's stored values and gives it delta counters,
/// as if LangGraph had not forced a snapshot there.
fn strip_snapshot(conn: &rusqlite::Connection, thread: &str, id: &str) {
    use dfck_core::codec::{Value, decode, encode};
    let (body, meta): (Vec<u8>, Vec<u8>) = conn
        .query_row(
            "SELECT checkpoint, metadata FROM checkpoints WHERE thread_id = ?1 AND checkpoint_id = ?2",
            [thread, id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let mut v = decode(&body).unwrap();
    if let Value::Map(entries) = &mut v {
        for (k, val) in entries.iter_mut() {
            if k.as_str() == Some("channel_values") {
                if let Value::Map(cv) = val {
                    cv.retain(|(c, _)| c.as_str() != Some("messages"));
                }
            }
        }
    }
    let mut m: serde_json::Map<String, Json> = serde_json::from_slice(&meta).unwrap();
    m.insert(
        "counters_since_delta_snapshot".into(),
        serde_json::json!({"messages": [1, 1]}),
    );
    conn.execute(
        "UPDATE checkpoints SET checkpoint = ?1, metadata = ?2 WHERE thread_id = ?3 AND checkpoint_id = ?4",
        rusqlite::params![encode(&v), serde_json::to_vec(&m).unwrap(), thread, id],
    )
    .unwrap();
}

#[test]
fn an_update_child_replaying_node_writes_is_contaminated_even_beside_a_loop_sibling() {
    // In t-fork, a loop checkpoint P has a loop child and an update child, both with
    // snapshots LangGraph forced. Without them both replay P's node writes: the loop child
    // consumed them (it owns them), the update child did not produce them (contaminated).
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let target = db.to_string_lossy().into_owned();
    let tree = dfck_json(
        &target,
        &["lineage", "t-fork", "--tree", "--format", "json"],
    );
    let entries = tree["checkpoints"].as_array().unwrap();
    let by_id = |id: &str| entries.iter().find(|e| e["checkpoint_id"] == id).unwrap();
    let p = entries
        .iter()
        .find(|e| {
            let kids: Vec<&Json> = e["children"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| by_id(k.as_str().unwrap()))
                .collect();
            e["writes"].as_u64().unwrap() > 0
                && kids.iter().any(|k| k["source"] == "loop")
                && kids.iter().any(|k| k["source"] == "update")
        })
        .expect("a fork point with loop and update children");
    let conn = rusqlite::Connection::open(&db).unwrap();
    for k in p["children"].as_array().unwrap() {
        let k = by_id(k.as_str().unwrap());
        if k["source"] == "loop" || k["source"] == "update" {
            strip_snapshot(&conn, "t-fork", k["checkpoint_id"].as_str().unwrap());
        }
    }
    drop(conn);
    let (report, exit) = verify(&target, &["t-fork"]);
    let update_child = p["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| by_id(k.as_str().unwrap()))
        .find(|k| k["source"] == "update")
        .unwrap();
    let found: Vec<_> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"].as_str().unwrap().starts_with("delta."))
        .map(|f| {
            (
                f["code"].as_str().unwrap(),
                f["checkpoint_id"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        found.contains(&(
            "delta.fork_contaminated",
            update_child["checkpoint_id"].as_str().unwrap()
        )),
        "{found:?}"
    );
    assert!(
        found.iter().all(|f| f.0 == "delta.fork_contaminated"),
        "no ambiguity left: {found:?}"
    );
    for k in p["children"].as_array().unwrap() {
        let k = by_id(k.as_str().unwrap());
        if k["source"] == "loop" {
            assert!(
                !found.iter().any(|f| f.1 == k["checkpoint_id"]),
                "the loop child owns the writes it replays: {found:?}"
            );
        }
    }
    assert_eq!(exit, 1, "contamination is an error");
}

#[test]
fn a_replaying_child_without_metadata_source_is_ambiguous() {
    // t-fork's update child, stripped of the snapshot LangGraph forced and of its `source`
    // (as a raw writer would leave it): nothing says which operation made it.
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let target = db.to_string_lossy().into_owned();
    let tree = dfck_json(
        &target,
        &["lineage", "t-fork", "--tree", "--format", "json"],
    );
    let entries = tree["checkpoints"].as_array().unwrap();
    let update = entries
        .iter()
        .find(|e| e["source"] == "update" && e["parent_checkpoint_id"].is_string())
        .expect("an update child");
    let id = update["checkpoint_id"].as_str().unwrap();
    let parent = update["parent_checkpoint_id"].as_str().unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    strip_snapshot(&conn, "t-fork", id);
    conn.execute(
        "UPDATE checkpoints SET metadata = json_remove(metadata, '$.source') \
         WHERE thread_id = 't-fork' AND checkpoint_id = ?1",
        [id],
    )
    .unwrap();
    drop(conn);
    let (report, _) = verify(&target, &["t-fork"]);
    let delta: Vec<(String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"].as_str().unwrap().starts_with("delta."))
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_owned(),
                f["checkpoint_id"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        delta,
        vec![("delta.fork_ambiguous".to_owned(), parent.to_owned())]
    );
}

/// `verify --format ndjson` streams each thread's findings as it finishes (in thread order,
/// whatever `--jobs`): the lines are exactly the JSON document's findings, and the exit code
/// still says whether any is an error.
#[test]
fn streamed_ndjson_findings_equal_the_json_report() {
    for stem in ["forks_delta_k4", "deerflow_app", "aes_delta", "encrypted"] {
        let db = sqlite_fixture(stem).to_string_lossy().into_owned();
        let json = dfck_command()
            .args(["--db", &db, "verify", "--format", "json"])
            .output()
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let want: Vec<String> = doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| serde_json::to_string(f).unwrap())
            .collect();
        for jobs in ["1", "2"] {
            let out = dfck_command()
                .args(["--db", &db, "verify", "--format", "ndjson", "--jobs", jobs])
                .output()
                .unwrap();
            let got: Vec<String> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect();
            assert_eq!(got, want, "{stem} --jobs {jobs}");
            assert_eq!(
                out.status.code(),
                json.status.code(),
                "{stem} --jobs {jobs}"
            );
        }
    }
}
