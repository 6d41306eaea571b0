//! `dfck bench channels` end to end (docs/bench-rows.md#matrix-and-gate, docs/bench-rows.md#child-processes, docs/bench-rows.md#channel-rows): flag validation,
//! matrix order, the safety cap, child failures (timeout, no result, malformed JSON, bad exit),
//! streamed rows, Ctrl-C, process-group kills and the cross-mode gate.
//!
//! Most tests use `--engine langgraph` with a fake "python" (a small shell script) so that the
//! controller is tested without Python or the native engine. The real engines (native, and the
//! pinned LangGraph through `DFCK_TEST_PYTHON`) are tested in `tests/bench_channels_engines.rs`.

use serde_json::{Map, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A fake interpreter: called as `<fake> <worker script> --worker-case JSON` (or `--identity`,
/// answered with fake versions). Behaviour from
/// env FAKE_MODE: `ok` (default; prints noise then a successful row made of the case plus a
/// digest that is `b` for delta cases when FAKE_MISMATCH=1), `none` (prints nothing, exit 3),
/// `bad` (prints a non-JSON last line), `rcfail` (successful row, exit 1), `hang` (starts a
/// grandchild `sleep`, records its pid in $FAKE_DIR/gc.pid, and waits), `hang3` (like `ok` for
/// the first two calls, then `hang`). Always writes its argv to $FAKE_DIR/argv and whether
/// DFCK_BENCH_PG_URL was set to $FAKE_DIR/env.
const FAKE: &str = r#"#!/bin/sh
if [ "$2" = "--identity" ]; then
  echo '{"python_version":"9.9.9","langgraph_version":"0.0.fake","engine_version":"0.0.fake","runtime_version":"FakePython 9.9.9"}'
  exit 0
fi
case_json="$3"
printf '%s\n' "$@" >> "$FAKE_DIR/argv"
printf 'pg=%s\n' "$DFCK_BENCH_PG_URL" >> "$FAKE_DIR/env"
echo "fake stderr: connect postgresql://u:hunter2@h/db from $HOME/x" >&2
n=$(cat "$FAKE_DIR/count" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$FAKE_DIR/count"
mode="${FAKE_MODE:-ok}"
if [ "$mode" = hang3 ]; then
  if [ "$n" -ge 3 ]; then mode=hang; else mode=ok; fi
fi
sha=a
case "$case_json" in
  *'"mode":"delta"'*) if [ "${FAKE_MISMATCH:-0}" = 1 ]; then sha=b; fi ;;
esac
rest=$(printf '%s' "$case_json" | cut -c2-)
row="{\"success\":true,\"error\":null,\"actual_message_count\":1,\"content_sha256\":\"$sha\",$rest"
case "$mode" in
  ok) echo "noise"; printf '%s\n\n' "$row"; exit 0 ;;
  none) exit 3 ;;
  bad) printf '%s\n' "$row"; echo "{not json"; exit 0 ;;
  rcfail) printf '%s\n' "$row"; exit 1 ;;
  hang) sleep 300 & echo $! > "$FAKE_DIR/gc.pid"; wait; exit 0 ;;
esac
"#;

struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("fake-python");
        std::fs::write(&p, FAKE).expect("write fake");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Fake { dir }
    }
    fn python(&self) -> PathBuf {
        self.dir.path().join("fake-python")
    }
    fn out(&self) -> PathBuf {
        self.dir.path().join("sub/dir/rows.jsonl")
    }
    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }
    /// `dfck bench channels --engine langgraph` on the fake, memory backend, 1 repetition.
    fn cmd(&self, mode: &str) -> Command {
        let mut c = crate::common::dfck_command();
        c.env("FAKE_DIR", self.dir.path())
            .env("FAKE_MODE", mode)
            .env_remove("TEST_POSTGRES_URI")
            .args(["bench", "channels", "--engine", "langgraph", "--python"])
            .arg(self.python())
            .arg("--worker-script")
            .arg(self.python())
            .args(["--backends", "memory", "--repetitions", "1", "--output"])
            .arg(self.out());
        c
    }
}

fn rows(path: &Path) -> Vec<Map<String, Value>> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| match serde_json::from_str(l) {
            Ok(Value::Object(m)) => m,
            _ => panic!("not a JSON object row: {l}"),
        })
        .collect()
}

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn csv_and_flag_validation_exit_2() {
    let fake = Fake::new();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--updates", "1,,2"],
            "--updates must be a comma-separated list of positive integers",
        ),
        (
            &["--updates", ",1"],
            "--updates must be a comma-separated list of positive integers",
        ),
        (
            &["--payload-bytes", "128,0"],
            "--payload-bytes values must be positive integers",
        ),
        (
            &["--snapshot-frequencies", "x"],
            "--snapshot-frequencies must be a comma-separated list of positive integers",
        ),
        (
            &["--modes", "full,bogus"],
            "--modes contains unsupported value 'bogus'; expected: full, delta",
        ),
        (
            &["--modes", ""],
            "--modes must contain one or more of: full, delta",
        ),
        (
            &["--backends", "memory,redis"],
            "--backends contains unsupported value 'redis'; expected: memory, sqlite, postgres",
        ),
        (
            &["--backends", "postgres"],
            "--backends postgres needs a PostgreSQL server",
        ),
        (&["--repetitions", "0"], "--repetitions must be positive"),
        (&["--repetitions", "-2"], "--repetitions must be positive"),
        (
            &["--timeout-seconds", "0"],
            "--timeout-seconds must be positive",
        ),
        (
            &["--max-estimated-full-bytes", "0"],
            "--max-estimated-full-bytes must be positive",
        ),
    ];
    for (extra, msg) in cases {
        let o = fake.cmd("ok").args(*extra).output().expect("run");
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr_of(&o));
        assert!(stderr_of(&o).contains(msg), "{extra:?}: {}", stderr_of(&o));
        assert!(!fake.out().exists(), "{extra:?} wrote the output file");
    }
    let o = crate::common::dfck_command()
        .args(["bench", "channels"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr_of(&o).contains("--output is required"));
    assert_eq!(fake.read("count"), "", "no child ran");
}

#[test]
fn help_mentions_delta_only() {
    let o = crate::common::dfck_command()
        .args(["bench", "channels", "--help"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&o.stdout).to_lowercase();
    assert!(text.contains("delta-only"), "{text}");
    assert!(!text.contains("worker-case"), "hidden flag shown");
}

#[test]
fn pinned_matrix_order_and_duplicate_warning() {
    let fake = Fake::new();
    let o = fake
        .cmd("ok")
        .args(["--updates", "10,100,10", "--repetitions", "2"])
        .output()
        .expect("run");
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains(
        "--updates: ignored duplicate value(s): 10; use --repetitions for repeated samples."
    ));
    let expected = [
        "[1/8] memory full updates=10 payload=128 repetition=0",
        "[2/8] memory delta freq=10 updates=10 payload=128 repetition=0",
        "[3/8] memory delta freq=10 updates=100 payload=128 repetition=0",
        "[4/8] memory full updates=100 payload=128 repetition=0",
        "[5/8] memory delta freq=10 updates=10 payload=128 repetition=1",
        "[6/8] memory full updates=10 payload=128 repetition=1",
        "[7/8] memory full updates=100 payload=128 repetition=1",
        "[8/8] memory delta freq=10 updates=100 payload=128 repetition=1",
    ];
    let progress: Vec<&str> = err.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(progress, expected);
    let got: Vec<(u64, u64, String)> = rows(&fake.out())
        .iter()
        .map(|r| {
            (
                r["repetition"].as_u64().unwrap_or(99),
                r["update_count"].as_u64().unwrap_or(0),
                r["mode"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want: Vec<(u64, u64, String)> = [
        (0, 10, "full"),
        (0, 10, "delta"),
        (0, 100, "delta"),
        (0, 100, "full"),
        (1, 10, "delta"),
        (1, 10, "full"),
        (1, 100, "full"),
        (1, 100, "delta"),
    ]
    .iter()
    .map(|(a, b, c)| (*a, *b, c.to_string()))
    .collect();
    assert_eq!(got, want);
    assert!(err.contains(&format!(
        "Wrote 8 result row(s) to {}; failures=0",
        fake.out().display()
    )));
    // every row got child_process_ms; no failure tail on successes
    for r in rows(&fake.out()) {
        assert!(r["child_process_ms"].as_f64().is_some_and(|v| v > 0.0));
        assert!(!r.contains_key("stderr_tail"));
    }
}

#[test]
fn alternation_continues_across_backends() {
    let fake = Fake::new();
    let o = fake
        .cmd("ok")
        .args(["--backends", "memory,sqlite", "--updates", "1,2,3"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    let modes: Vec<String> = rows(&fake.out())
        .iter()
        .map(|r| r["mode"].as_str().unwrap_or("").to_string())
        .collect();
    // six cells, each starts with the other mode than the previous one
    let firsts: Vec<&str> = modes.chunks(2).map(|c| c[0].as_str()).collect();
    assert_eq!(firsts, ["full", "delta", "full", "delta", "full", "delta"]);
}

#[test]
fn cap_boundary_and_exact_skip_counts() {
    let fake = Fake::new();
    let o = fake
        .cmd("ok")
        .args(["--updates", "4095,4096"])
        .output()
        .expect("run");
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains(
        "Skipping 1 oversized comparable case pair(s); use --allow-large-cases to run them."
    ));
    let r = rows(&fake.out());
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|x| x["update_count"] == 4095));

    // a cadence sweep: 1 full + 3 deltas = 3 exact pairs (DeerFlow said 2)
    let fake = Fake::new();
    let o = fake
        .cmd("ok")
        .args([
            "--updates",
            "4095,4096",
            "--snapshot-frequencies",
            "5,10,25",
        ])
        .output()
        .expect("run");
    assert!(stderr_of(&o).contains("Skipping 3 oversized comparable case pair(s)"));
    assert_eq!(rows(&fake.out()).len(), 4);

    // nothing left: exit 2, message, no file
    let fake = Fake::new();
    let o = fake
        .cmd("ok")
        .args(["--updates", "4096"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr_of(&o).contains("No benchmark cases remain after applying the safety cap."));
    assert!(!fake.out().exists());

    // delta-only runs are never capped; --allow-large-cases disables the cap
    let fake = Fake::new();
    let o = fake
        .cmd("ok")
        .args(["--updates", "4096", "--modes", "delta"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0));
    assert!(!stderr_of(&o).contains("Skipping"));
    let fake = Fake::new();
    let o = fake
        .cmd("ok")
        .args([
            "--updates",
            "4096",
            "--allow-large-cases",
            "--max-estimated-full-bytes",
            "0",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert_eq!(rows(&fake.out()).len(), 2);
}

fn assert_failure_rows(fake: &Fake, mode: &str, error: &str, has_child_ms: bool) {
    let o = fake
        .cmd(mode)
        .args(["--updates", "2", "--modes", "full"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{mode}: {}", stderr_of(&o));
    let r = rows(&fake.out());
    assert_eq!(r.len(), 1, "{mode}");
    let row = &r[0];
    assert_eq!(row["success"], false, "{mode}");
    assert_eq!(row["error"], error, "{mode}");
    assert_eq!(row.contains_key("child_process_ms"), has_child_ms, "{mode}");
    if !has_child_ms {
        assert_eq!(row["schema_version"], 2, "controller-built row");
    }
    let tail = row["stderr_tail"].as_str().unwrap_or("");
    assert!(tail.contains("fake stderr"), "{tail}");
    let home_set = std::env::var("HOME").is_ok_and(|h| h.trim_end_matches('/').len() > 1);
    if home_set {
        assert!(tail.contains("<home>/x"), "{tail}");
    }
    assert!(!tail.contains("hunter2"), "{tail}");
    assert!(stderr_of(&o).contains("failures=1"));
}

#[test]
fn malformed_child_output_becomes_failure_rows() {
    assert_failure_rows(
        &Fake::new(),
        "none",
        "child process returned 3 without a result",
        false,
    );
    assert_failure_rows(
        &Fake::new(),
        "bad",
        "child process returned 0 with malformed JSON",
        false,
    );
    assert_failure_rows(
        &Fake::new(),
        "rcfail",
        "child process exited with status 1",
        true,
    );
    // identity fields of a controller-built failure row (docs/bench-rows.md#child-processes)
    let fake = Fake::new();
    fake.cmd("none")
        .args(["--updates", "2", "--modes", "full"])
        .output()
        .expect("run");
    let r = rows(&fake.out());
    assert_eq!(r[0]["langgraph_version"], "0.0.fake");
    assert_eq!(r[0]["engine_version"], "0.0.fake");
    assert_eq!(r[0]["runtime_version"], "FakePython 9.9.9");
    let keys: Vec<&str> = r[0].keys().map(String::as_str).collect();
    let mut want = crate::common::rows::IDENTITY_KEYS.to_vec();
    want.push("stderr_tail");
    assert_eq!(keys, want);
}

fn gone(pid: &str) -> bool {
    // SIGKILLed processes may linger as zombies until reaped by init.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        match stat {
            Err(_) => return true,
            Ok(s) => {
                let state = s.rsplit(')').next().unwrap_or("").trim_start();
                if state.starts_with('Z') || state.starts_with('X') {
                    return true;
                }
            }
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn timeout_kills_the_process_group() {
    let fake = Fake::new();
    let start = Instant::now();
    let o = fake
        .cmd("hang")
        .args([
            "--updates",
            "2",
            "--modes",
            "full",
            "--timeout-seconds",
            "1",
        ])
        .output()
        .expect("run");
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    let r = rows(&fake.out());
    assert_eq!(r[0]["error"], "child process timed out after 1 seconds");
    assert!(!r[0].contains_key("child_process_ms"));
    let pid = fake.read("gc.pid");
    assert!(!pid.trim().is_empty(), "grandchild never started");
    assert!(gone(&pid), "grandchild {pid} survived the timeout");
}

#[test]
fn rows_stream_and_ctrl_c_keeps_finished_rows() {
    let fake = Fake::new();
    let mut cmd = crate::common::dfck_command();
    cmd.env("FAKE_DIR", fake.dir.path())
        .env("FAKE_MODE", "hang3")
        .env_remove("TEST_POSTGRES_URI")
        .args(["bench", "channels", "--engine", "langgraph", "--python"])
        .arg(fake.python())
        .arg("--worker-script")
        .arg(fake.python())
        .args([
            "--backends",
            "memory",
            "--updates",
            "1,2",
            "--repetitions",
            "1",
        ])
        .arg("--output")
        .arg(fake.out())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    // two finished cases are on disk while the third is still running
    let deadline = Instant::now() + Duration::from_secs(30);
    while fake.read("gc.pid").trim().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(rows(&fake.out()).len(), 2, "rows not streamed");
    assert!(child.try_wait().expect("try_wait").is_none());
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("Wrote 2 result row(s)"));
    assert_eq!(rows(&fake.out()).len(), 2);
    assert!(gone(&fake.read("gc.pid")), "grandchild survived Ctrl-C");
}

#[test]
fn cross_mode_gate_rejects_mismatched_digests() {
    let fake = Fake::new();
    let o = fake
        .cmd("ok")
        .env("FAKE_MISMATCH", "1")
        .args(["--updates", "3", "--snapshot-frequencies", "5,10"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    let r = rows(&fake.out());
    assert_eq!(r.len(), 3, "file rewritten with every row");
    for row in &r {
        assert_eq!(row["success"], false);
        assert_eq!(row["error"], "cross-mode materialized state mismatch");
        assert!(row.contains_key("child_process_ms"), "metrics kept");
    }
    assert!(stderr_of(&o).contains("failures=3"));
}

#[test]
fn pg_url_reaches_children_only_through_the_environment() {
    let fake = Fake::new();
    let url = "postgresql://u:hunter2@127.0.0.1:1/db";
    let o = fake
        .cmd("ok")
        .args(["--backends", "postgres", "--updates", "2", "--pg-url", url])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert!(!fake.read("argv").contains("hunter2"));
    assert!(fake.read("env").contains(url));
    let text = std::fs::read_to_string(fake.out()).unwrap_or_default();
    assert!(!text.contains("hunter2") && text.contains("\"backend\":\"postgres\""));
    assert!(!stderr_of(&o).contains("hunter2"));
}

#[test]
fn bench_takes_the_store_flag_like_every_command() {
    // `--db` (and DFCK_DB) name the server as `--pg-url` does.
    let fake = Fake::new();
    let url = "postgresql://u:hunter2@127.0.0.1:1/db";
    let o = fake
        .cmd("ok")
        .env_remove("DFCK_DB")
        .args(["--backends", "postgres", "--updates", "2", "--db", url])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert!(fake.read("env").contains(url));
    assert!(!stderr_of(&o).contains("hunter2"));
    // A SQLite --db cannot serve the postgres backend: one usage line.
    let o = fake
        .cmd("ok")
        .env("DFCK_DB", "store.db")
        .args(["--backends", "postgres", "--updates", "2"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr_of(&o).contains("--db must name a PostgreSQL server"),
        "{}",
        stderr_of(&o)
    );
}

/// The output file is truncated: a SQLite database or a sidecar name is refused (exit 2)
/// and left as it was.
#[test]
fn output_onto_a_store_is_refused() {
    use crate::common::{assert_clean_failure, dfck_command, sqlite_fixture};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    std::fs::copy(sqlite_fixture("full"), &db).unwrap();
    let bytes = std::fs::read(&db).unwrap();
    for (target, needle) in [
        (db.clone(), "is a SQLite database"),
        (dir.path().join("s.db-wal"), "named like a SQLite sidecar"),
    ] {
        let out = dfck_command()
            .args([
                "bench",
                "channels",
                "--backends",
                "memory",
                "--updates",
                "5",
            ])
            .arg("--output")
            .arg(&target)
            .output()
            .unwrap();
        assert_clean_failure(&out, needle);
    }
    assert_eq!(std::fs::read(&db).unwrap(), bytes);
    assert!(!dir.path().join("s.db-wal").exists());
}
