//! Snapshots of every human (table) output, produced by the real `dfck` binary on the
//! committed fixtures: store summary, thread listing, state, verify (with findings and clean),
//! lineage chain and tree, the migrate plan and the bench summaries. A change to any of these
//! texts (column, wording, width, order, exit code) shows up as a snapshot diff
//! (`cargo insta review`).
//!
//! Outputs are deterministic as they stand: paths are passed relative to the directory the
//! binary runs in (so no machine path shows), `COLUMNS=200` fixes the width, and no filter
//! rewrites anything.

mod common;

use std::path::Path;
use std::process::Command;

/// Runs `dfck ARGS` in `cwd` and renders exit code, stdout and stderr as one text.
fn run_in(cwd: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dfck"))
        .args(args)
        .current_dir(cwd)
        .env("COLUMNS", "200")
        .env_remove("DFCK_DB")
        .env_remove("DEER_FLOW_CONFIG_PATH")
        .env_remove("DEER_FLOW_PROJECT_ROOT")
        .env_remove("RUST_LOG")
        .output()
        .expect("run dfck");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().map_or("signal".into(), |c| c.to_string()),
        String::from_utf8_lossy(&out.stdout),
        stderr
    )
}

/// Runs `dfck ARGS` at the repository root (fixture paths relative to it).
fn run(args: &[&str]) -> String {
    run_in(&common::root(), args)
}

#[test]
fn store_summary() {
    let text = run(&["--db", "fixtures/sqlite/deerflow.db", "inspect"]);
    assert!(text.starts_with("exit: 0\n"), "{text}");
    insta::assert_snapshot!("store_summary", text);
}

#[test]
fn thread_listing() {
    let text = run(&[
        "--db",
        "fixtures/sqlite/deerflow.db",
        "inspect",
        "t-deerflow",
    ]);
    assert!(text.starts_with("exit: 0\n"), "{text}");
    insta::assert_snapshot!("thread_listing", text);
}

#[test]
fn thread_state() {
    let text = run(&[
        "--db",
        "fixtures/sqlite/deerflow.db",
        "inspect",
        "t-deerflow",
        "--state",
    ]);
    assert!(text.starts_with("exit: 0\n"), "{text}");
    insta::assert_snapshot!("thread_state", text);
}

#[test]
fn verify_with_findings() {
    let text = run(&["--db", "fixtures/defects/contaminated_fork.db", "verify"]);
    assert!(
        text.starts_with("exit: 1\n"),
        "error findings give exit 1: {text}"
    );
    insta::assert_snapshot!("verify_with_findings", text);
}

#[test]
fn verify_clean() {
    let text = run(&["--db", "fixtures/sqlite/full.db", "verify"]);
    assert!(text.starts_with("exit: 0\n"), "{text}");
    insta::assert_snapshot!("verify_clean", text);
}

#[test]
fn lineage_chain() {
    let text = run(&["--db", "fixtures/sqlite/delta_k3.db", "lineage", "t-fork"]);
    assert!(text.starts_with("exit: 0\n"), "{text}");
    insta::assert_snapshot!("lineage_chain", text);
}

#[test]
fn lineage_tree() {
    let text = run(&[
        "--db",
        "fixtures/sqlite/delta_k3.db",
        "lineage",
        "t-fork",
        "--tree",
    ]);
    assert!(text.starts_with("exit: 0\n"), "{text}");
    insta::assert_snapshot!("lineage_tree", text);
}

#[test]
fn lineage_tree_contaminated() {
    let text = run(&[
        "--db",
        "fixtures/defects/contaminated_fork.db",
        "lineage",
        "t-fork",
        "--tree",
    ]);
    assert!(text.starts_with("exit: 1\n"), "{text}");
    insta::assert_snapshot!("lineage_tree_contaminated", text);
}

#[test]
fn migrate_plan_dry_run() {
    let (dir, db) = common::temp_copy(&common::sqlite_fixture("delta_k3"));
    let before = std::fs::read(&db).unwrap();
    let text = run_in(
        dir.path(),
        &["--db", "delta_k3.db", "migrate", "delta-to-full", "--all"],
    );
    // t-resume-old-update is refused: the real library leaks a later resume's note into
    // its first branch (tests/twins.rs).
    assert!(text.starts_with("exit: 1\n"), "{text}");
    assert_eq!(
        before,
        std::fs::read(&db).unwrap(),
        "a dry run changed the store"
    );
    insta::assert_snapshot!("migrate_plan_dry_run", text);
}

#[test]
fn bench_summary_channels() {
    let text = run(&[
        "bench",
        "summarize",
        "fixtures/bench/deerflow-v1-channels.jsonl",
    ]);
    assert!(text.starts_with("exit: 0\n"), "{text}");
    insta::assert_snapshot!("bench_summary_channels", text);
}

#[test]
fn bench_summary_production() {
    let text = run(&[
        "bench",
        "summarize",
        "fixtures/bench/deerflow-v1-production.jsonl",
    ]);
    assert!(text.starts_with("exit: 0\n"), "{text}");
    insta::assert_snapshot!("bench_summary_production", text);
}

#[test]
fn prune_plan_dry_run() {
    let text = run(&[
        "--db",
        "fixtures/sqlite/retention.db",
        "prune",
        "--all",
        "--branches",
    ]);
    assert!(text.starts_with("exit: 0\n"), "{text}");
    insta::assert_snapshot!("prune_plan_dry_run", text);
}
