//! `copy` writes its report as its threads come (a plain table, compact JSON, CSV or NDJSON),
//! so that its memory does not grow with the number of threads: byte-identical to the report
//! held whole (`report-held:1`), its rows in memory or in the temporary file
//! (`spool-bytes:0`), dry run and `--apply` (the target's rows the same too). A temporary
//! directory that does not exist fails the streamed run, which shows the stream was taken.

use crate::common::*;
use std::path::Path;
use std::process::Output;

fn copy(source: &str, to: &Path, extra: &[&str], failpoint: &str, tmp: Option<&str>) -> Output {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", to.display()));
    }
    let mut c = crate::common::dfck_command();
    c.arg("--db")
        .arg(source)
        .args(["copy", "--all", "--to"])
        .arg(to)
        .args(extra)
        .env_remove("DFCK_DB")
        .env_remove("COLUMNS")
        .env("DFCK_FAILPOINT", failpoint);
    if let Some(t) = tmp {
        c.env("TMPDIR", t);
    }
    c.output().expect("run dfck")
}

const FORMATS: [&str; 4] = ["table", "json", "csv", "ndjson"];

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
                // The stream was taken (NDJSON has no spool; CSV of no thread is empty).
                if format != "ndjson" && !text.is_empty() {
                    let missing = "/nonexistent-dfck-tmp";
                    let out = copy(source, &to, &extra, "spool-bytes:0", Some(missing));
                    let err = String::from_utf8_lossy(&out.stderr);
                    assert_eq!(out.status.code(), Some(2), "{stem} {extra:?}: {err}");
                    assert!(err.contains(missing), "{stem} {extra:?}: {err}");
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
