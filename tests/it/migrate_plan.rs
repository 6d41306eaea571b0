//! `dfck migrate delta-to-full` plans (dry run): which threads convert, which are refused
//! and why, what is skipped — on the real-library fixtures and the defect stores; nothing
//! is written.

use crate::common::*;
use serde_json::Value as Json;

fn plan(target: &str, args: &[&str]) -> (Json, i32) {
    let mut all = vec!["migrate", "delta-to-full", "--format", "json"];
    all.extend_from_slice(args);
    let out = dfck(target, &all);
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "{target}: exit {code}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).expect("JSON"), code)
}

fn status_of<'a>(report: &'a Json, thread: &str) -> &'a Json {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == thread)
        .unwrap_or_else(|| panic!("{thread} not in the plan"))
}

#[test]
fn delta_threads_convert_and_full_threads_are_skipped() {
    for stem in [
        "delta_k1",
        "delta_k3",
        "delta_k10",
        "mixed",
        "deerflow",
        "full",
    ] {
        let db = sqlite_fixture(stem).to_string_lossy().into_owned();
        let before = std::fs::read(&db).unwrap();
        let (report, exit) = plan(&db, &["--all"]);
        // At K=3 and K=10 the real library leaks a later resume's note into the first branch
        // of t-resume-old-update (tests/twins.rs): that thread is refused, nothing else.
        let leaks = matches!(stem, "delta_k3" | "delta_k10");
        assert_eq!(exit, i32::from(leaks), "{stem}: {report}");
        assert_eq!(report["dry_run"], true);
        assert_eq!(report["refused"], u64::from(leaks), "{stem}: {report}");
        let exp = expected(stem);
        for t in exp["threads"].as_array().unwrap() {
            let tid = t["thread_id"].as_str().unwrap();
            let p = status_of(&report, tid);
            if leaks && tid == "t-resume-old-update" {
                assert_eq!(p["status"], "refused", "{stem} {tid}");
                assert!(p["reason"].as_str().unwrap().contains("#4458"), "{p}");
            } else if t["mode"] == "full" && stem == "full" {
                assert_eq!(p["status"], "skipped", "{stem} {tid}");
                assert_eq!(p["checkpoints_rewritten"], 0);
            } else if t["mode"] != "full" {
                assert_eq!(p["status"], "converted", "{stem} {tid}");
                assert!(p["checkpoints_rewritten"].as_u64().unwrap() > 0);
                assert!(p["bytes_after"].as_u64().unwrap() > p["bytes_before"].as_u64().unwrap());
            }
        }
        assert_eq!(
            before,
            std::fs::read(&db).unwrap(),
            "{stem}: the plan wrote"
        );
    }
}

#[test]
fn refusals_name_their_reason() {
    let defect = |name: &str| {
        root()
            .join("fixtures/defects")
            .join(format!("{name}.db"))
            .to_string_lossy()
            .into_owned()
    };
    let (r, exit) = plan(&defect("contaminated_fork"), &["--all"]);
    assert_eq!(exit, 1);
    let p = status_of(&r, "t-fork");
    assert_eq!(p["status"], "refused");
    assert!(p["reason"].as_str().unwrap().contains("#4458"), "{p}");
    // With --accept-delta-view it converts exactly what delta mode shows, and says where.
    let (r, exit) = plan(
        &defect("contaminated_fork"),
        &["--all", "--accept-delta-view"],
    );
    assert_eq!(exit, 0);
    let p = status_of(&r, "t-fork");
    assert_eq!(p["status"], "converted");
    let exp = expected_in("defects", "expected");
    let d = exp["defects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "contaminated_fork")
        .unwrap();
    let mut want: Vec<&str> = d["expect"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["checkpoint_id"].as_str().unwrap())
        .collect();
    let mut got: Vec<&str> = p["accepted_delta_view"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);

    let (r, _) = plan(&defect("dangling_parent"), &["--all"]);
    assert!(
        status_of(&r, "t-linear")["reason"]
            .as_str()
            .unwrap()
            .contains("lineage.dangling_parent")
    );
    let (r, _) = plan(&defect("cycle"), &["--all"]);
    assert!(
        status_of(&r, "t-linear")["reason"]
            .as_str()
            .unwrap()
            .contains("lineage.cycle")
    );
    let (r, _) = plan(
        &sqlite_fixture("encrypted").to_string_lossy(),
        &["t-enc-delta"],
    );
    assert!(
        status_of(&r, "t-enc-delta")["reason"]
            .as_str()
            .unwrap()
            .contains("msgpack+xor")
    );
    let (r, _) = plan(
        &sqlite_fixture("subgraph").to_string_lossy(),
        &["t-subgraph-delta"],
    );
    assert!(
        status_of(&r, "t-subgraph-delta")["reason"]
            .as_str()
            .unwrap()
            .contains("namespace")
    );
}

#[test]
fn usage_errors() {
    let db = sqlite_fixture("delta_k3").to_string_lossy().into_owned();
    assert_clean_failure(
        &dfck(
            &db,
            &["migrate", "delta-to-full", "--all", "--backup", "/tmp/x.db"],
        ),
        "--backup goes with --apply",
    );
    assert_clean_failure(&dfck(&db, &["migrate", "delta-to-full"]), "pass --all");
    assert_clean_failure(
        &dfck(&db, &["migrate", "delta-to-full", "nope"]),
        "thread 'nope' not found",
    );
}

#[test]
fn postgres_plans_match_sqlite() {
    let Some(uri) = pg_server() else { return };
    for stem in ["delta_k3", "deerflow", "mixed"] {
        let (pg, exit) = plan(&with_db(&uri, &format!("dfck_{stem}")), &["--all"]);
        let (lite, lite_exit) = plan(&sqlite_fixture(stem).to_string_lossy(), &["--all"]);
        assert_eq!(exit, lite_exit, "{stem}: {pg}");
        for key in ["converted", "refused", "skipped"] {
            assert_eq!(pg[key], lite[key], "{stem} {key}");
        }
    }
}
