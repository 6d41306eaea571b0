//! `dfck prune`, third hardening round (docs/reliability.md, "Prune never moves the
//! conversation"): the protected head on the `retention_race` fixture, where DeerFlow's run
//! worker wrote its duration-only checkpoint after the user had edited an older message
//! (so the newest checkpoint, the one LangGraph resumes, sits on the older branch);
//! `--protect` values that name nothing or several checkpoints; durations without a unit.

use crate::common::pg::{connect, runtime};
use crate::common::*;
use serde_json::Value as Json;

const THREADS: [&str; 2] = ["r-late-duration-full", "r-late-duration-delta"];

/// What `get_state` without a checkpoint id shows: the latest state's message ids.
fn latest_ids(target: &str, thread: &str) -> Vec<String> {
    let j = dfck_json(target, &["inspect", thread, "--state", "--format", "json"]);
    j["values"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

fn prune(target: &str, args: &[&str]) -> (Json, i32) {
    let out = dfck(target, &[&["prune"], args, &["--format", "json"]].concat());
    let j = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "prune {args:?}: no JSON: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (j, out.status.code().unwrap_or(-1))
}

fn thread<'a>(report: &'a Json, tid: &str) -> &'a Json {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == tid)
        .unwrap_or_else(|| panic!("{tid} in {report}"))
}

/// The default prune and `--branches` keep the late duration-only checkpoint (and both
/// lineages), so the latest state stays the conversation the user was on; the report says
/// why. `--keep-last-turns` refuses such a thread.
fn late_duration(target: &str) {
    let before: Vec<Vec<String>> = THREADS.iter().map(|t| latest_ids(target, t)).collect();
    for t in &before {
        assert!(
            t.contains(&"h-1".to_owned()),
            "the fixture resumes on h-1: {t:?}"
        );
    }
    for args in [
        &["--all", "--apply"][..],
        &["--all", "--branches", "--apply"],
    ] {
        let (r, code) = prune(target, args);
        assert_eq!(code, 0, "{r}");
        for (tid, want) in THREADS.iter().zip(&before) {
            let p = thread(&r, tid);
            assert!(
                p["note"]
                    .as_str()
                    .unwrap_or("")
                    .contains("newest checkpoint"),
                "{args:?}: {p}"
            );
            assert_eq!(&latest_ids(target, tid), want, "{args:?} moved {tid}");
        }
    }
    let (r, code) = prune(target, &["--all", "--keep-last-turns", "1", "--apply"]);
    assert_eq!(code, 1, "{r}");
    for (tid, want) in THREADS.iter().zip(&before) {
        let p = thread(&r, tid);
        assert_eq!(p["status"], "refused", "{p}");
        assert!(
            p["reason"].as_str().unwrap().contains("newest checkpoint"),
            "{p}"
        );
        assert_eq!(&latest_ids(target, tid), want);
    }
    let v = dfck(target, &["verify", "--format", "json"]);
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );
}

#[test]
fn sqlite_prune_never_moves_the_latest_state() {
    let (_d, db) = temp_copy(&sqlite_fixture("retention_race"));
    late_duration(db.to_str().unwrap());
}

#[test]
fn postgres_prune_never_moves_the_latest_state() {
    let Some(server) = require_postgres("postgres protected head") else {
        return;
    };
    let rt = runtime();
    let admin = connect(&rt, &server);
    let name = "dfck_prune_race";
    for sql in [
        format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        format!("CREATE DATABASE \"{name}\" TEMPLATE \"dfck_retention_race\""),
    ] {
        rt.block_on(admin.batch_execute(&sql)).unwrap();
    }
    late_duration(&with_db(&server, name));
}

/// Every `--protect` value must name exactly one checkpoint; otherwise exit 2 before any
/// work, the store unchanged. A value with surrounding blanks is the id it names.
#[test]
fn protect_values_that_name_nothing_or_several_checkpoints_are_usage_errors() {
    let (_d, db) = temp_copy(&sqlite_fixture("retention"));
    let target = db.to_str().unwrap();
    let listing = dfck_json(target, &["inspect", "r-branch-delta", "--format", "json"]);
    let ids: Vec<String> = listing["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkpoint_id"].as_str().unwrap().to_owned())
        .collect();
    let oldest_leaf = ids.last().unwrap().clone();
    let bytes = std::fs::read(&db).unwrap();
    let typo = format!("{}x", &oldest_leaf[..20]);
    for (value, needle) in [
        (oldest_leaf.to_uppercase(), "names no checkpoint"),
        (oldest_leaf.replace('-', ""), "names no checkpoint"),
        (typo, "names no checkpoint"),
        ("1f".to_owned(), "names several checkpoints"),
        (String::new(), "names no checkpoint"),
    ] {
        let out = dfck(
            target,
            &[
                "prune",
                "--all",
                "--branches",
                "--protect",
                &value,
                "--apply",
            ],
        );
        assert_clean_failure(&out, needle);
        assert_eq!(
            std::fs::read(&db).unwrap(),
            bytes,
            "--protect {value:?} wrote"
        );
    }
    // The superseded branch's first checkpoint, with a trailing blank, is protected: the
    // branch stays.
    let branch = dfck_json(
        target,
        &["prune", "r-branch-delta", "--branches", "--format", "json"],
    );
    let deleted_before = branch["threads"][0]["branch_checkpoints"].as_u64().unwrap();
    assert!(deleted_before > 0, "{branch}");
    let mut superseded = None;
    for id in &ids {
        let with = format!("{id} ");
        let (r, code) = prune(
            target,
            &["r-branch-delta", "--branches", "--protect", &with],
        );
        assert_eq!(code, 0, "{r}");
        if r["threads"][0]["branch_checkpoints"].as_u64().unwrap() < deleted_before {
            superseded = Some(id.clone());
            break;
        }
    }
    assert!(
        superseded.is_some(),
        "no --protect value kept a branch checkpoint"
    );
}

#[test]
fn durations_need_a_unit() {
    let db = sqlite_fixture("retention");
    for (flag, value) in [("--older-than", "90"), ("--idle", "3600"), ("--idle", "3y")] {
        let out = dfck(&db.to_string_lossy(), &["prune", "--all", flag, value]);
        let e = assert_clean_failure(&out, flag);
        assert!(e.contains("s, m, h, d or w"), "{e}");
    }
    let out = dfck(
        &db.to_string_lossy(),
        &["prune", "--all", "--older-than", "90d"],
    );
    assert_eq!(out.status.code(), Some(0));
}
