//! `dfck verify` and `dfck lineage` on the real-library fixtures (no error finding on any
//! healthy store, SQLite and Postgres) and on the defect fixtures (exactly the codes each
//! injected defect causes).

mod common;

use common::*;
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

#[test]
fn healthy_sqlite_fixtures_have_no_error_findings() {
    let mut threads = 0;
    let mut checkpoints = 0;
    for stem in fixture_stems() {
        let (report, exit) = verify(&sqlite_fixture(&stem).to_string_lossy(), &[]);
        threads += report["threads_checked"].as_u64().unwrap();
        checkpoints += report["checkpoints_checked"].as_u64().unwrap();
        let errors: BTreeSet<String> = codes(&report)
            .into_iter()
            .filter(|(s, _)| s == "error")
            .map(|(_, c)| c)
            .collect();
        if UNREADABLE.contains(&stem.as_str()) {
            assert_eq!(
                errors,
                BTreeSet::from(["value.unsupported_serializer".to_string()]),
                "{stem}"
            );
            assert_eq!(exit, 1, "{stem}");
        } else {
            assert!(errors.is_empty(), "{stem}: {errors:?}");
            assert_eq!(exit, 0, "{stem}");
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

fn pg_server() -> Option<String> {
    std::env::var("TEST_POSTGRES_URI")
        .ok()
        .filter(|u| !u.is_empty())
}

fn pg_db(uri: &str, db: &str) -> String {
    let (base, query) = match uri.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (uri, None),
    };
    let cut = base.rfind('/').unwrap_or(base.len());
    match query {
        Some(q) => format!("{}/{db}?{q}", &base[..cut]),
        None => format!("{}/{db}", &base[..cut]),
    }
}

#[test]
fn healthy_postgres_fixtures_have_no_error_findings() {
    let Some(uri) = pg_server() else {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "postgres tests skipped: TEST_POSTGRES_URI unset"
        );
        return;
    };
    let mut checkpoints = 0;
    for stem in stems_in("expected-pg") {
        let (report, exit) = verify(&pg_db(&uri, &format!("dfck_{stem}")), &["--jobs", "2"]);
        checkpoints += report["checkpoints_checked"].as_u64().unwrap();
        let errors: Vec<_> = codes(&report)
            .into_iter()
            .filter(|(s, _)| s == "error")
            .collect();
        assert!(errors.is_empty(), "{stem}: {errors:?}");
        assert_eq!(exit, 0);
    }
    println!("verify (postgres): {checkpoints} checkpoints, no error findings");
    assert!(checkpoints > 500);
}
