//! One output vocabulary: every command accepts each `--format` it documents (table, json,
//! ndjson, csv where its rows are flat), the JSON is one compact document (indented with
//! `--pretty`), every NDJSON line parses, CSV has a header unless `--no-headers`, and
//! contradictory format flags are a usage error. Write commands run as dry runs on copies.

use serde_json::Value as Json;
use std::path::Path;

const ALL: [&str; 4] = ["table", "json", "ndjson", "csv"];
const NO_CSV: [&str; 3] = ["table", "json", "ndjson"];

/// Runs `dfck ARGS` in `cwd`; exit code and stdout.
fn run(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = crate::common::dfck_command()
        .args(args)
        .current_dir(cwd)
        .env_remove("DFCK_DB")
        .env_remove("COLUMNS")
        .env_remove("DEER_FLOW_CONFIG_PATH")
        .env_remove("DEER_FLOW_PROJECT_ROOT")
        .output()
        .expect("run dfck");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Checks the output of one command in one format.
fn check(cwd: &Path, args: &[&str], format: &str) {
    let mut full: Vec<&str> = args.to_vec();
    full.extend(["--format", format]);
    let (code, out, err) = run(cwd, &full);
    assert!(code == 0 || code == 1, "{full:?}: exit {code}: {err}");
    // No rows (a clean verify) is no NDJSON line and no CSV.
    assert!(
        !out.is_empty() || matches!(format, "ndjson" | "csv"),
        "{full:?}: no output"
    );
    assert!(!out.contains('\x1b'), "{full:?}: escape codes in a pipe");
    match format {
        "json" => {
            assert_eq!(out.lines().count(), 1, "{full:?}: JSON is compact: {out}");
            serde_json::from_str::<Json>(&out).unwrap_or_else(|e| panic!("{full:?}: {e}"));
        }
        "ndjson" => {
            for line in out.lines() {
                let v: Json =
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("{full:?}: {e}: {line}"));
                assert!(v.is_object(), "{full:?}: {line}");
            }
        }
        "csv" => {
            if let Some(header) = out.lines().next() {
                assert!(header.contains(',') && !header.starts_with('{'), "{out}");
            }
        }
        _ => assert!(
            !out.contains(['┆', '┌', '╞']),
            "{full:?}: box drawing in a pipe"
        ),
    }
}

#[test]
fn every_command_accepts_its_formats() {
    let (dir, _) = crate::common::temp_copy(&crate::common::sqlite_fixture("forks_full"));
    let cwd = dir.path();
    let db = ["--db", "forks_full.db"];
    let (_, json, _) = run(
        cwd,
        &[&db[..], &["inspect", "f-copy", "--format", "json"]].concat(),
    );
    let doc: Json = serde_json::from_str(&json).expect("thread JSON");
    let ids: Vec<&str> = doc["checkpoints"]
        .as_array()
        .expect("checkpoints")
        .iter()
        .filter_map(|c| c["checkpoint_id"].as_str())
        .collect();
    let (a, b) = (ids[ids.len() - 1], ids[0]);
    let bench = crate::common::root().join("fixtures/bench/deerflow-v1-channels.jsonl");
    let bench = bench.to_str().expect("path");
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (vec!["inspect"], &ALL),
        (vec!["inspect", "f-copy"], &ALL),
        (vec!["inspect", "f-copy", "--state"], &NO_CSV),
        (vec!["verify"], &ALL),
        (vec!["lineage", "f-copy", "--tree"], &ALL),
        (vec!["migrate", "delta-to-full", "--all"], &ALL),
        (vec!["migrate", "full-to-delta", "--all"], &ALL),
        (vec!["prune", "--all", "--branches"], &ALL),
        (vec!["copy", "--to", "copy.db", "--all"], &ALL),
        (vec!["reclaim"], &NO_CSV),
        (vec!["diff", "f-copy", a, b], &NO_CSV),
    ];
    let before = std::fs::read(cwd.join("forks_full.db")).expect("read");
    for (args, formats) in &cases {
        let args: Vec<&str> = [&db[..], &args[..]].concat();
        for f in *formats {
            check(cwd, &args, f);
        }
        if !formats.contains(&"csv") {
            let (code, _, err) = run(cwd, &[&args[..], &["--format", "csv"]].concat());
            assert_eq!(code, 2, "{args:?}: csv of a report without rows: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
    assert_eq!(
        before,
        std::fs::read(cwd.join("forks_full.db")).expect("read"),
        "a dry run changed the store"
    );
    assert!(!cwd.join("copy.db").exists(), "a dry-run copy wrote a file");
    for f in ALL {
        check(cwd, &["explain"], f);
        check(cwd, &["bench", "summarize", bench], f);
    }
    for f in NO_CSV {
        check(cwd, &["explain", "cycle"], f);
    }
}

#[test]
fn ndjson_is_one_row_per_line_and_csv_has_no_header_on_request() {
    let root = crate::common::root();
    let db = ["--db", "fixtures/sqlite/forks_full.db"];
    let (_, json, _) = run(&root, &[&db[..], &["inspect", "--format", "json"]].concat());
    let doc: Json = serde_json::from_str(&json).expect("JSON");
    let threads = doc["threads"].as_array().expect("threads").len();
    let (_, nd, _) = run(
        &root,
        &[&db[..], &["inspect", "--format", "ndjson"]].concat(),
    );
    assert_eq!(nd.lines().count(), threads, "{nd}");
    let (_, csv, _) = run(&root, &[&db[..], &["inspect", "--format", "csv"]].concat());
    assert!(csv.starts_with("thread_id,"), "{csv}");
    assert_eq!(csv.lines().count(), threads + 1, "{csv}");
    let args = [&db[..], &["inspect", "--format", "csv", "--no-headers"]].concat();
    let (_, bare, _) = run(&root, &args);
    assert_eq!(bare.lines().count(), threads, "{bare}");
    assert_eq!(bare.lines().next(), csv.lines().nth(1));
    let (_, table, _) = run(&root, &[&db[..], &["inspect", "--no-headers"]].concat());
    assert!(!table.lines().any(|l| l.starts_with("thread ")), "{table}");
    let (_, pretty, _) = run(
        &root,
        &[&db[..], &["inspect", "--format", "json", "--pretty"]].concat(),
    );
    assert!(pretty.lines().count() > 1);
    assert_eq!(serde_json::from_str::<Json>(&pretty).expect("JSON"), doc);
}

#[test]
fn contradictory_format_flags_are_usage_errors() {
    let root = crate::common::root();
    let bench = "fixtures/bench/deerflow-v1-channels.jsonl";
    for args in [
        vec!["bench", "summarize", bench, "--json", "--format", "csv"],
        vec!["bench", "summarize", bench, "--csv", "--format", "json"],
        vec!["bench", "summarize", bench, "--csv", "--format", "table"],
        vec!["--db", "fixtures/sqlite/full.db", "inspect", "--pretty"],
        vec![
            "--db",
            "fixtures/sqlite/full.db",
            "verify",
            "--format",
            "ndjson",
            "--no-headers",
        ],
    ] {
        let (code, out, err) = run(&root, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // Agreeing flags are fine.
    let (code, out, _) = run(
        &root,
        &["bench", "summarize", bench, "--json", "--format", "json"],
    );
    assert_eq!(code, 0);
    serde_json::from_str::<Json>(&out).expect("JSON");
}

#[test]
fn colors_only_when_asked_and_never_in_json() {
    let root = crate::common::root();
    let db = ["--db", "fixtures/defects/contaminated_fork.db", "verify"];
    let (_, plain, _) = run(&root, &db);
    assert!(!plain.contains('\x1b'), "{plain}");
    let (_, colored, _) = run(&root, &[&db[..], &["--color", "always"]].concat());
    assert!(colored.contains("\x1b[38;5;9merror"), "{colored}");
    let (_, json, _) = run(
        &root,
        &[&db[..], &["--color", "always", "--format", "json"]].concat(),
    );
    assert!(!json.contains('\x1b'), "{json}");
}
