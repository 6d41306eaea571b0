//! `dfck bench production` decides on the right size and cleans up after itself: rows carry
//! `durable_db_bytes` (after the WAL is folded in) that differ between modes and summarize to
//! a storage ratio below 1; the default matrix prints its estimate and is refused without
//! `--allow-large-cases`; and no temporary store survives a case that fails, times out or is
//! interrupted (SIGINT / SIGTERM to the controller). Every run gets its own `TMPDIR`, which
//! must be empty afterwards.

use serde_json::Value as Json;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn dfck(tmp: &Path) -> Command {
    let mut c = crate::common::dfck_command();
    c.env("TMPDIR", tmp).env_remove("TEST_POSTGRES_URI");
    c
}

fn rows(path: &Path) -> Vec<Json> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("row is JSON"))
        .collect()
}

fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Everything left in `tmp` (recursively listed names, for the failure message).
fn leftovers(tmp: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![tmp.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            out.push(e.path().display().to_string());
            if e.path().is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

/// True once some case's SQLite store exists under `tmp` (a case is mid-run).
fn store_exists(tmp: &Path) -> bool {
    leftovers(tmp)
        .iter()
        .any(|p| p.ends_with("production-benchmark.sqlite"))
}

#[test]
fn durable_sizes_differ_between_modes_and_summarize_below_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    let out = dir.path().join("rows.jsonl");
    let o = dfck(&tmp)
        .args(["bench", "production", "--turns", "10,30"])
        .args(["--snapshot-frequencies", "10", "--repetitions", "1"])
        .args(["--read-repetitions", "1", "--history-limits", "10"])
        .arg("--output")
        .arg(&out)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("Matrix: 4 case(s); estimated"));
    let r = rows(&out);
    assert_eq!(r.len(), 4);
    for turns in [10, 30] {
        let size = |mode: &str| {
            r.iter()
                .find(|x| x["turns"] == turns && x["mode"] == mode)
                .and_then(|x| x["durable_db_bytes"].as_u64())
                .unwrap_or_else(|| panic!("no durable size for {mode} at {turns}"))
        };
        assert_ne!(size("full"), size("delta"), "turns={turns}");
        assert!(size("delta") < size("full"), "turns={turns}");
    }
    for x in &r {
        assert!(x["pg_checkpoints_total_bytes"].is_null(), "{x}");
    }
    let s = dfck(&tmp)
        .args(["bench", "summarize", "--json"])
        .arg(&out)
        .output()
        .expect("summarize");
    assert_eq!(s.status.code(), Some(0), "{}", stderr_of(&s));
    let v: Json = serde_json::from_slice(&s.stdout).expect("json");
    let at30 = v
        .as_array()
        .and_then(|a| a.iter().find(|g| g["turns"] == 30))
        .expect("a 30-turn group");
    let ratio = at30["ratio_durable_db_bytes"].as_f64().expect("ratio");
    assert!(ratio < 1.0, "{at30}");
    // the table shows it too
    let t = dfck(&tmp)
        .args(["bench", "summarize"])
        .arg(&out)
        .output()
        .expect("summarize");
    let text = String::from_utf8_lossy(&t.stdout);
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("durable_db_bytes"))
            && text.contains("ratio"),
        "{text}"
    );
    assert!(leftovers(&tmp).is_empty(), "{:?}", leftovers(&tmp));
}

#[test]
fn the_default_matrix_prints_its_estimate_and_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("rows.jsonl");
    let o = dfck(dir.path())
        .args(["bench", "production", "--output"])
        .arg(&out)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("Matrix: 90 case(s); estimated "),
        "{err}"
    );
    assert!(lines[1].contains("--allow-large-cases"), "{err}");
    assert!(lines[1].contains("--max-estimated-full-bytes"), "{err}");
    assert!(!out.exists(), "no case ran");
    // a lower cap refuses a small matrix too; --allow-large-cases lifts it
    let small = |extra: &[&str]| {
        dfck(dir.path())
            .args(["bench", "production", "--turns", "3", "--modes", "full"])
            .args(["--repetitions", "1", "--read-repetitions", "1"])
            .args(["--history-limits", "2", "--max-estimated-full-bytes", "1"])
            .args(extra)
            .arg("--output")
            .arg(&out)
            .output()
            .expect("run")
    };
    assert_eq!(small(&[]).status.code(), Some(2));
    let o = small(&["--allow-large-cases"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert_eq!(rows(&out).len(), 1);
}

#[test]
fn a_failed_case_leaves_no_temporary_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    let out = dir.path().join("rows.jsonl");
    let o = dfck(&tmp)
        .args(["bench", "production", "--turns", "3", "--modes", "full"])
        .args(["--backends", "postgres", "--repetitions", "1"])
        .args(["--pg-url", "postgresql://u:pw@127.0.0.1:1/db"])
        .arg("--output")
        .arg(&out)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert_eq!(rows(&out)[0]["success"], false);
    assert!(leftovers(&tmp).is_empty(), "{:?}", leftovers(&tmp));
}

#[test]
fn a_timed_out_case_leaves_no_temporary_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    let out = dir.path().join("rows.jsonl");
    let o = dfck(&tmp)
        .args(["bench", "production", "--turns", "400", "--modes", "full"])
        .args(["--repetitions", "1", "--timeout-seconds", "1.5"])
        .arg("--output")
        .arg(&out)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    let r = rows(&out);
    assert!(
        r[0]["error"].as_str().unwrap_or("").contains("timed out"),
        "{}",
        r[0]
    );
    assert!(leftovers(&tmp).is_empty(), "{:?}", leftovers(&tmp));
}

fn interrupted_mid_case(signal: nix::sys::signal::Signal) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    let out = dir.path().join("rows.jsonl");
    let mut child = dfck(&tmp)
        .args(["bench", "production", "--turns", "400", "--modes", "full"])
        .args(["--repetitions", "1"])
        .arg("--output")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !store_exists(&tmp) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(store_exists(&tmp), "the case never created its store");
    assert!(child.try_wait().expect("try_wait").is_none(), "mid-case");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, signal).expect("signal");
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(130), "{}", stderr_of(&o));
    assert!(rows(&out).is_empty());
    assert!(leftovers(&tmp).is_empty(), "{:?}", leftovers(&tmp));
}

#[test]
fn an_interrupted_case_leaves_no_temporary_store_sigint() {
    interrupted_mid_case(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn an_interrupted_case_leaves_no_temporary_store_sigterm() {
    interrupted_mid_case(nix::sys::signal::Signal::SIGTERM);
}

#[test]
fn replay_ends_with_one_aggregate_line_that_summarize_repeats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    let out = dir.path().join("replay.jsonl");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sqlite/deerflow.db");
    let o = dfck(&tmp)
        .args(["bench", "production", "--replay-from"])
        .arg(&source)
        .args(["--sample", "2", "--snapshot-frequencies", "2,3"])
        .args(["--repetitions", "1", "--read-repetitions", "2"])
        .args(["--history-limits", "5", "--output"])
        .arg(&out)
        .output()
        .expect("run");
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let line = err.lines().last().expect("a last line").to_string();
    assert!(
        line.starts_with(
            "Replay aggregate over 2 source thread(s) (native sqlite): durable bytes K=2 full "
        ),
        "{err}"
    );
    assert!(line.contains(", K=3 full "), "{line}");
    assert!(
        line.contains("; median cold read ratio delta/full: state "),
        "{line}"
    );
    assert!(
        !line.contains("state -") && !line.contains("history -"),
        "{line}"
    );
    assert_eq!(err.matches("Replay aggregate").count(), 1, "{err}");
    let s = dfck(&tmp)
        .args(["bench", "summarize"])
        .arg(&out)
        .output()
        .expect("summarize");
    assert_eq!(s.status.code(), Some(0), "{}", stderr_of(&s));
    assert_eq!(stderr_of(&s).trim_end(), line, "the same aggregate");
    assert!(leftovers(&tmp).is_empty(), "{:?}", leftovers(&tmp));
}

#[test]
fn postgres_rows_carry_the_per_table_totals() {
    let Some(url) = std::env::var("TEST_POSTGRES_URI")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("skipping: TEST_POSTGRES_URI is not set");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    let out = dir.path().join("rows.jsonl");
    let o = dfck(&tmp)
        .args([
            "bench",
            "production",
            "--backends",
            "postgres",
            "--turns",
            "3",
        ])
        .args(["--snapshot-frequencies", "2", "--repetitions", "1"])
        .args(["--read-repetitions", "1", "--history-limits", "2"])
        .args(["--pg-url", &url, "--output"])
        .arg(&out)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    let r = rows(&out);
    assert_eq!(r.len(), 2);
    for x in &r {
        assert!(x["durable_db_bytes"].is_null(), "{x}");
        for k in [
            "pg_checkpoints_total_bytes",
            "pg_checkpoint_blobs_total_bytes",
            "pg_checkpoint_writes_total_bytes",
        ] {
            assert!(x[k].as_u64().is_some_and(|b| b > 0), "{k}: {x}");
        }
    }
    assert!(leftovers(&tmp).is_empty(), "{:?}", leftovers(&tmp));
}
