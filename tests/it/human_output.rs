//! Snapshots of every human (table) output, produced by the real `dfck` binary on the
//! committed fixtures: store summary, thread listing, state, verify (with findings and clean),
//! lineage chain and tree, the migrate plan, audit (clean and tampered) and the bench
//! summaries. A change to any of these
//! texts (column, wording, width, order, exit code) shows up as a snapshot diff
//! (`cargo insta review`).
//!
//! Every output is taken at `COLUMNS=80` and `COLUMNS=200` (snapshots `NAME@80`, `NAME@200`),
//! and no line of it may be wider than that, except a line holding one unbreakable token.
//! Outputs are deterministic as they stand: paths are passed relative to the directory the
//! binary runs in (so no machine path shows), and no filter rewrites anything.

use std::path::Path;

/// The widths every output is taken at.
const WIDTHS: [usize; 2] = [80, 200];

/// Runs `dfck ARGS` in `cwd` at each width, checks that the output fits it, and snapshots it
/// as `NAME@WIDTH`; returns the text at 200 columns.
fn snap_in(name: &str, cwd: &Path, args: &[&str]) -> String {
    let mut last = String::new();
    for w in WIDTHS {
        let text = run_at(cwd, args, w);
        assert_fits(&text, w);
        let text = redact_room(&text);
        insta::assert_snapshot!(format!("{name}@{w}"), text);
        last = text;
    }
    last
}

/// [`snap_in`] at the repository root (fixture paths relative to it).
fn snap(name: &str, args: &[&str]) -> String {
    snap_in(name, &crate::common::root(), args)
}

/// reclaim's room line (free space varies by machine), with its wrapped continuation lines,
/// redacted.
fn redact_room(text: &str) -> String {
    let mut out = Vec::new();
    let mut in_room = false;
    for l in text.lines() {
        if l.starts_with("room:") {
            in_room = true;
            out.push("room:    [redacted]");
        } else if in_room && l.starts_with("  ") {
        } else {
            in_room = false;
            out.push(l);
        }
    }
    out.join("\n") + "\n"
}

/// No stdout line is wider than `w` columns, unless it is one unbreakable token.
fn assert_fits(text: &str, w: usize) {
    let out = text
        .split("--- stdout\n")
        .nth(1)
        .and_then(|t| t.split("--- stderr\n").next())
        .unwrap_or_default();
    for line in out.lines() {
        let width = line.chars().count();
        let token = line
            .trim()
            .trim_start_matches(['│', '├', '└', '─', ' '])
            .split(' ')
            .count()
            == 1;
        assert!(
            width <= w || token,
            "line of {width} > {w} columns:\n{line}"
        );
    }
}

/// Runs `dfck ARGS` in `cwd` with `COLUMNS=width` and renders exit code, stdout and stderr as
/// one text.
fn run_at(cwd: &Path, args: &[&str], width: usize) -> String {
    let out = crate::common::dfck_command()
        .args(args)
        .current_dir(cwd)
        .env("COLUMNS", width.to_string())
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

#[test]
fn store_summary() {
    let text = snap(
        "store_summary",
        &["--db", "fixtures/sqlite/deerflow.db", "inspect"],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn thread_listing() {
    let text = snap(
        "thread_listing",
        &[
            "--db",
            "fixtures/sqlite/deerflow.db",
            "inspect",
            "t-deerflow",
        ],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn thread_state() {
    let text = snap(
        "thread_state",
        &[
            "--db",
            "fixtures/sqlite/deerflow.db",
            "inspect",
            "t-deerflow",
            "--state",
        ],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn verify_with_findings() {
    let text = snap(
        "verify_with_findings",
        &["--db", "fixtures/defects/contaminated_fork.db", "verify"],
    );
    assert!(
        text.starts_with("exit: 1\n"),
        "error findings give exit 1: {text}"
    );
}

#[test]
fn verify_clean() {
    let text = snap(
        "verify_clean",
        &["--db", "fixtures/sqlite/full.db", "verify"],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn audit_apptypes() {
    let text = snap(
        "audit_apptypes",
        &["--db", "fixtures/sqlite/apptypes.db", "audit"],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn audit_tampered() {
    let text = snap(
        "audit_tampered",
        &["--db", "fixtures/tampered/apptypes_module.db", "audit"],
    );
    assert!(
        text.starts_with("exit: 1\n"),
        "a value never allowed gives exit 1: {text}"
    );
}

#[test]
fn lineage_chain() {
    let text = snap(
        "lineage_chain",
        &["--db", "fixtures/sqlite/delta_k3.db", "lineage", "t-fork"],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn lineage_tree() {
    let text = snap(
        "lineage_tree",
        &[
            "--db",
            "fixtures/sqlite/delta_k3.db",
            "lineage",
            "t-fork",
            "--tree",
        ],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn lineage_tree_contaminated() {
    let text = snap(
        "lineage_tree_contaminated",
        &[
            "--db",
            "fixtures/defects/contaminated_fork.db",
            "lineage",
            "t-fork",
            "--tree",
        ],
    );
    assert!(text.starts_with("exit: 1\n"), "{text}");
}

#[test]
fn migrate_plan_dry_run() {
    let (dir, db) = crate::common::temp_copy(&crate::common::sqlite_fixture("delta_k3"));
    let before = std::fs::read(&db).unwrap();
    let text = snap_in(
        "migrate_plan_dry_run",
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
}

#[test]
fn bench_summary_channels() {
    let text = snap(
        "bench_summary_channels",
        &[
            "bench",
            "summarize",
            "fixtures/bench/deerflow-v1-channels.jsonl",
        ],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn bench_summary_production() {
    let text = snap(
        "bench_summary_production",
        &[
            "bench",
            "summarize",
            "fixtures/bench/deerflow-v1-production.jsonl",
        ],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn prune_plan_dry_run() {
    let text = snap(
        "prune_plan_dry_run",
        &[
            "--db",
            "fixtures/sqlite/retention.db",
            "prune",
            "--all",
            "--branches",
        ],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn bench_summary_wide() {
    let text = snap(
        "bench_summary_wide",
        &[
            "bench",
            "summarize",
            "fixtures/bench/deerflow-v1-channels.jsonl",
            "--wide",
            "--metrics",
            "durable_db_bytes",
        ],
    );
    assert!(text.starts_with("exit: 0\n"), "{text}");
}

#[test]
fn plain_tables_in_a_pipe() {
    // No COLUMNS and stdout a pipe: no box drawing, columns aligned with spaces.
    let out = crate::common::dfck_command()
        .args(["--db", "fixtures/sqlite/deerflow.db", "inspect"])
        .current_dir(crate::common::root())
        .env_remove("COLUMNS")
        .env_remove("DFCK_DB")
        .output()
        .expect("run dfck");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(['│', '┆', '┌', '╞', '└']), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("thread ") && l.contains("  checkpoints  ")),
        "{text}"
    );
}

#[test]
fn narrow_summary_turns_into_records() {
    let text = run_at(
        &crate::common::root(),
        &["--db", "fixtures/sqlite/deerflow.db", "inspect"],
        60,
    );
    assert_fits(&text, 60);
    assert!(
        text.contains("[ 1 ]") && text.contains("│ checkpoints"),
        "{text}"
    );
}

#[test]
fn more_outputs() {
    let db = "fixtures/sqlite/deerflow.db";
    for (name, args) in [
        (
            "summary_channels_savings",
            vec!["--db", db, "inspect", "--channels", "--savings"],
        ),
        (
            "state_full",
            vec!["--db", db, "inspect", "t-deerflow", "--state", "--full"],
        ),
        (
            "full_to_delta_dry_run",
            vec!["--db", db, "migrate", "full-to-delta", "--all"],
        ),
        ("explain_cycle", vec!["explain", "cycle"]),
    ] {
        let text = snap(name, &args);
        assert!(!text.contains("panicked"), "{text}");
    }
    let (dir, _) = crate::common::temp_copy(&crate::common::sqlite_fixture("deerflow"));
    for (name, args) in [
        ("reclaim_dry_run", vec!["--db", "deerflow.db", "reclaim"]),
        (
            "copy_dry_run",
            vec!["--db", "deerflow.db", "copy", "--to", "copy.db", "--all"],
        ),
    ] {
        let text = snap_in(name, dir.path(), &args);
        assert!(text.starts_with("exit: 0\n"), "{text}");
    }
}

#[test]
fn deerflow_store_summary() {
    let text = snap(
        "deerflow_store_summary",
        &["--db", "fixtures/sqlite/deerflow_app.db", "inspect"],
    );
    assert!(
        text.contains("title") && text.contains("Kyoto trip"),
        "{text}"
    );
}

#[test]
fn deerflow_delete_dry_run() {
    let text = snap(
        "deerflow_delete_dry_run",
        &[
            "--db",
            "fixtures/sqlite/deerflow_app.db",
            "delete",
            "df0a0000-0000-4000-8000-000000000001",
            "df0a0000-0000-4000-8000-000000000003",
            "legacy.thread.0001",
        ],
    );
    assert!(text.starts_with("exit: 1\n"), "{text}");
}
