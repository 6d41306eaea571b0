//! `copy` and `delete` write their reports as their threads come (a plain table, compact
//! JSON, CSV or NDJSON), so that their memory does not grow with the number of threads:
//! byte-identical to the report held whole (`report-held:1`), its rows in memory or in the
//! temporary file (`spool-bytes:0`), dry run and `--apply` (the rows written the same too). A
//! temporary directory that does not exist fails the streamed run, which shows the stream
//! was taken.

use crate::common::pg::clone_db;
use crate::common::*;
use crate::streamed_reports::run;
use std::path::Path;
use std::process::Output;

fn copy(source: &str, to: &Path, extra: &[&str], failpoint: &str, tmp: Option<&str>) -> Output {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", to.display()));
    }
    let to = to.to_str().unwrap();
    let mut args = vec!["copy", "--all", "--to", to];
    args.extend_from_slice(extra);
    run(source, &args, failpoint, tmp)
}

const FORMATS: [&str; 4] = ["table", "json", "csv", "ndjson"];

/// A temporary directory that is not there.
const MISSING: &str = "/nonexistent-dfck-tmp";

/// A run whose report's rows cannot wait in a temporary file (`TMPDIR` missing): a dry run
/// fails, exit 2 with one line naming the directory (the stream was taken, and failed); a
/// run that writes (`apply`) checks first and holds its report instead, saying so on stderr,
/// and ends as the held run `held` did.
fn held_when_no_file(out: &Output, apply: bool, held: &Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    if apply {
        assert_eq!(
            (out.status.code(), &out.stdout),
            (held.status.code(), &held.stdout),
            "{what}: {err}"
        );
        assert!(
            err.contains(MISSING) && err.contains("the report is held in memory instead"),
            "{what}: {err}"
        );
    } else {
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(
            err.contains("temporary file") && err.contains(MISSING) && err.lines().count() == 1,
            "{what}: {err}"
        );
    }
}

#[test]
fn copy_reports_stream_what_they_would_hold() {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("target.db");
    let (mut compared, mut deerflow, mut left, mut applied) = (0, false, false, 0);
    for db in crate::sqlite_batch_reads::stores(dir.path()) {
        let source = db.to_str().unwrap();
        let stem = db.file_stem().unwrap().to_string_lossy().into_owned();
        // Dry runs on every store; writes on two fixtures, and DeerFlow's database copied
        // without its own tables (a target without DeerFlow's schema), which the report says
        // below its threads.
        let modes: &[&[&str]] = match stem.as_str() {
            "sqlite-deerflow" | "sqlite-retention" => &[&[], &["--apply"]],
            "sqlite-deerflow_app" => &[
                &[],
                &["--checkpoints-only"],
                &["--apply", "--checkpoints-only"],
            ],
            _ => &[&[]],
        };
        for format in FORMATS {
            for mode in modes {
                let mut extra = vec!["--format", format];
                extra.extend_from_slice(mode);
                let held = copy(source, &to, &extra, "report-held:1", None);
                // A store dfck refuses to copy from: nothing to compare.
                if !matches!(held.status.code(), Some(0 | 1)) {
                    continue;
                }
                let rows = |applied: bool| match applied {
                    true => store_rows::sqlite_rows(to.to_str().unwrap()),
                    false => Vec::new(),
                };
                let apply = mode.contains(&"--apply");
                let held_rows = rows(apply);
                let text = String::from_utf8_lossy(&held.stdout).into_owned();
                deerflow |= text.contains("deerflow rows") || text.contains("deerflow_rows");
                left |= text.contains("not copied (--checkpoints-only)");
                compared += 1;
                applied += usize::from(apply);
                for failpoint in ["", "spool-bytes:0"] {
                    let out = copy(source, &to, &extra, failpoint, None);
                    assert_eq!(
                        (out.status.code(), String::from_utf8_lossy(&out.stdout)),
                        (held.status.code(), text.as_str().into()),
                        "{stem} {extra:?} {failpoint}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    assert_eq!(rows(apply), held_rows, "{stem} {extra:?}");
                }
                // The stream was taken (NDJSON has no spool; CSV of no thread is empty);
                // a write holds its report instead ([`held_when_no_file`]).
                if format != "ndjson" && !text.is_empty() {
                    let out = copy(source, &to, &extra, "spool-bytes:0", Some(MISSING));
                    held_when_no_file(&out, apply, &held, &format!("{stem} {extra:?}"));
                }
            }
        }
    }
    assert!(
        compared >= 80 && applied >= 12,
        "{compared} reports, {applied} applied"
    );
    assert!(deerflow, "no report showed DeerFlow's rows");
    assert!(left, "no table said what --checkpoints-only left");
}

fn delete(target: &str, args: &[&str], failpoint: &str, tmp: Option<&str>) -> Output {
    let mut all = vec!["delete"];
    all.extend_from_slice(args);
    run(target, &all, failpoint, tmp)
}

/// The selections of `delete` compared: every thread due, none due (each a skipped row), one
/// user's threads, named threads; dry runs and `--apply`.
const DELETES: [&[&str]; 6] = [
    &["--older-than", "1s"],
    &["--older-than", "36500d"],
    &["--user", "a0000000-0000-4000-8000-000000000003"],
    &["--older-than", "1s", "--apply"],
    &["--user", "a0000000-0000-4000-8000-000000000003", "--apply"],
    &[
        "df0a0000-0000-4000-8000-000000000001",
        "df0a0000-0000-4000-8000-000000000002",
        "--apply",
    ],
];

/// Compares `delete`'s streamed reports with the held ones on fresh copies `fresh` makes
/// (with a reader of their rows); how many reports were compared.
fn compare_deletes(fresh: &mut dyn FnMut() -> (String, Box<dyn Fn() -> Vec<String>>)) -> usize {
    let mut compared = 0;
    for args in DELETES {
        for format in FORMATS {
            let mut args = args.to_vec();
            args.extend(["--format", format]);
            let (target, rows) = fresh();
            let held = delete(&target, &args, "report-held:1", None);
            assert!(
                matches!(held.status.code(), Some(0 | 1)),
                "{args:?}: {}",
                String::from_utf8_lossy(&held.stderr)
            );
            let held_rows = rows();
            if args.contains(&"--apply") {
                // The reports compared are of real deletions.
                let (_, untouched) = fresh();
                assert_ne!(held_rows, untouched(), "{args:?} deleted nothing");
            }
            let text = String::from_utf8_lossy(&held.stdout).into_owned();
            compared += 1;
            for failpoint in ["", "spool-bytes:0"] {
                let (target, rows) = fresh();
                let out = delete(&target, &args, failpoint, None);
                assert_eq!(
                    (out.status.code(), String::from_utf8_lossy(&out.stdout)),
                    (held.status.code(), text.as_str().into()),
                    "{args:?} {failpoint}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(rows(), held_rows, "{args:?} {failpoint}");
            }
            if format != "ndjson" {
                let (target, rows) = fresh();
                let out = delete(&target, &args, "spool-bytes:0", Some(MISSING));
                let apply = args.contains(&"--apply");
                held_when_no_file(&out, apply, &held, &format!("{args:?}"));
                if apply {
                    assert_eq!(rows(), held_rows, "{args:?}");
                }
            }
        }
    }
    compared
}

#[test]
fn delete_reports_stream_what_they_would_hold_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    let mut fresh = || -> (String, Box<dyn Fn() -> Vec<String>>) {
        n += 1;
        let into = dir.path().join(n.to_string());
        std::fs::create_dir_all(&into).unwrap();
        let db = crate::sqlite_batch_reads::copy_store("sqlite", "deerflow_app", &into);
        let path = db.to_str().unwrap().to_owned();
        let read = path.clone();
        (path, Box::new(move || store_rows::sqlite_rows(&read)))
    };
    assert_eq!(compare_deletes(&mut fresh), DELETES.len() * FORMATS.len());
}

#[test]
fn delete_reports_stream_what_they_would_hold_on_postgres() {
    let Some(uri) = require_postgres("the streamed delete reports") else {
        return;
    };
    let mut fresh = || -> (String, Box<dyn Fn() -> Vec<String>>) {
        let target = clone_db(&uri, "dfck_deerflow_app", "dfck_streamed_delete");
        let read = target.clone();
        (target, Box::new(move || store_rows::pg_rows(&read)))
    };
    assert_eq!(compare_deletes(&mut fresh), DELETES.len() * FORMATS.len());
}

/// A write command whose streamed report could not wait in a temporary file (`TMPDIR`
/// missing) finds out before its first write and holds its report in memory instead, however
/// small: it writes what the held run writes and prints what it prints, with a note on
/// stderr, rather than losing its report after its last write. NDJSON waits for nothing.
#[test]
fn a_write_whose_report_cannot_wait_in_a_file_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("copied.db");
    let to = to.to_str().unwrap();
    let commands: [(&str, &[&str]); 5] = [
        ("retention", &["prune", "--all", "--branches", "--apply"]),
        (
            "delta_k3",
            &["migrate", "delta-to-full", "--all", "--apply"],
        ),
        ("full", &["migrate", "full-to-delta", "--all", "--apply"]),
        ("delta_k3", &["copy", "--all", "--to", to, "--apply"]),
        ("deerflow_app", &["delete", "--older-than", "1s", "--apply"]),
    ];
    // Each run on a fresh copy of `stem` at the same path (and no copy target): its exit,
    // stdout, stderr and the rows of the store and the target after it.
    let run_on = |stem: &str, args: &[&str], failpoint: &str, tmp: Option<&str>| {
        let into = dir.path().join("work");
        let _ = std::fs::remove_dir_all(&into);
        std::fs::create_dir_all(&into).unwrap();
        let db = crate::sqlite_batch_reads::copy_store("sqlite", stem, &into);
        let db = db.to_str().unwrap().to_owned();
        let before = store_rows::sqlite_rows(&db);
        let _ = std::fs::remove_file(to);
        let out = run(&db, args, failpoint, tmp);
        let mut rows = store_rows::sqlite_rows(&db);
        if std::path::Path::new(to).exists() {
            rows.extend(store_rows::sqlite_rows(to));
        }
        assert!(rows != before, "{stem} {args:?} wrote nothing");
        (out, rows)
    };
    for (stem, args) in commands {
        for format in FORMATS {
            let mut args = args.to_vec();
            args.extend(["--format", format]);
            let (held, held_rows) = run_on(stem, &args, "report-held:1", None);
            let (out, rows) = run_on(stem, &args, "", Some(MISSING));
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                (out.status.code(), String::from_utf8_lossy(&out.stdout)),
                (held.status.code(), String::from_utf8_lossy(&held.stdout)),
                "{args:?}: {err}"
            );
            assert!(rows == held_rows, "{args:?}: other rows written");
            let noted = err.contains(MISSING) && err.contains("the report is held in memory");
            assert_eq!(noted, format != "ndjson", "{args:?}: {err}");
        }
    }
}

/// A row that cannot be kept in the temporary file (`spool-fail`, as in a full disk) stops a
/// write command at the next thread, with a one-line error naming the directory: it does not
/// go on writing every thread while its report is already lost. What it committed before
/// stays committed (each thread is its own all-or-nothing unit).
#[test]
fn a_report_row_that_cannot_be_kept_stops_the_writes() {
    let dir = tempfile::tempdir().unwrap();
    let prune = |failpoint: &str| {
        let into = dir.path().join("work");
        let _ = std::fs::remove_dir_all(&into);
        std::fs::create_dir_all(&into).unwrap();
        let db = crate::sqlite_batch_reads::copy_store("sqlite", "retention", &into);
        let db = db.to_str().unwrap().to_owned();
        let args = [
            "prune",
            "--all",
            "--branches",
            "--apply",
            "--format",
            "json",
        ];
        (
            run(&db, &args, failpoint, None),
            store_rows::sqlite_rows(&db),
        )
    };
    let (whole, all_pruned) = prune("group-threads:2");
    assert_eq!(whole.status.code(), Some(0));
    let (out, rows) = prune("group-threads:2,spool-bytes:0,spool-fail:3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("temporary file") && err.lines().count() == 1,
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert!(
        rows != all_pruned,
        "the run went on after its report failed"
    );
}
