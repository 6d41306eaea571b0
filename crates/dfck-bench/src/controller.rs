//! The generic child runner of the benchmark controllers (docs/bench-rows.md#child-processes), shared
//! by `bench channels` and (later) `bench production`.
//!
//! [`run_child`] starts one child in its own process group with stdin closed, drains its stdout
//! and stderr on two threads (keeping the last 4 MiB / 64 KiB), and waits for it on a third. On
//! timeout, or when the caller's interrupt flag is raised (Ctrl-C), it sends SIGTERM to the
//! whole group, waits a grace period, then SIGKILL. After the child exits it SIGKILLs whatever
//! is left of the group, so a grandchild holding the pipes cannot hang the controller.
//! `child_process_ms` runs from just before spawn to the moment the waiter sees the exit.
//!
//! The parent's view of the child's peak RSS: `RUSAGE_CHILDREN`'s `ru_maxrss` (exact when it
//! grew while this child ran) else the child's `VmHWM` sampled every 20 ms (a lower bound).
//! The crate forbids `unsafe`, which rules out calling `wait4` directly.
//!
//! [`interpret`] turns a [`ChildRun`] into a row (docs/bench-rows.md#child-processes): the last non-blank stdout line must
//! be a JSON object; otherwise, or on timeout, the caller's base row becomes a failure row.

use crate::env;
use crate::error::RunError as Error;
use crate::pyfmt::fmt_g;
use crate::rows::FailureRowSource;
use dfck_core::error::Error as CoreError;
use dfck_core::outcome::Outcome;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Map, Value, json};
use std::ffi::OsString;
use std::io::Read;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes of stdout kept (the row is the last line).
const STDOUT_KEEP: usize = 4 << 20;
/// Bytes of stderr kept (only the tail goes into failure rows).
const STDERR_KEEP: usize = 64 << 10;
/// How long to wait for the pipes to close after the group was killed.
const DRAIN_WAIT: Duration = Duration::from_secs(5);

/// One child to run.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables set on top of the parent's environment.
    pub env_set: Vec<(String, String)>,
    /// Variables removed from the child's environment.
    pub env_remove: Vec<String>,
    /// `None`: no timeout.
    pub timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEnd {
    /// It exited by itself (exit code, or minus the signal number as Python reports it).
    Exited(i32),
    /// The timeout expired and the group was killed.
    TimedOut,
    /// The interrupt flag was raised and the group was killed.
    Interrupted,
}

/// What a child did.
#[derive(Debug, Clone)]
pub struct ChildRun {
    /// How it ended.
    pub end: ChildEnd,
    /// The exit code (or minus the signal) even when it was killed.
    pub rc: i32,
    /// Spawn to exit, in ms.
    pub elapsed_ms: f64,
    /// The kept tail of stdout (lossy UTF-8).
    pub stdout: String,
    /// The kept tail of stderr (lossy UTF-8).
    pub stderr: String,
    /// The parent's view of the child's peak RSS, and how it was measured.
    pub peak_rss: Option<(u64, &'static str)>,
}

#[derive(Default)]
struct Tail {
    buf: Vec<u8>,
    done: bool,
}

fn drain<R: Read + Send + 'static>(
    mut r: R,
    keep: usize,
    tail: Arc<Mutex<Tail>>,
    done_tx: mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match r.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    if let Ok(mut t) = tail.lock() {
                        t.buf.extend_from_slice(&chunk[..n]);
                        if t.buf.len() > 2 * keep {
                            let cut = t.buf.len() - keep;
                            t.buf.drain(..cut);
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if let Ok(mut t) = tail.lock() {
            t.done = true;
        }
        let _ = done_tx.send(());
    });
}

fn take_tail(tail: &Arc<Mutex<Tail>>, keep: usize) -> String {
    let bytes = match tail.lock() {
        Ok(t) => {
            let start = t.buf.len().saturating_sub(keep);
            t.buf[start..].to_vec()
        }
        Err(_) => Vec::new(),
    };
    String::from_utf8_lossy(&bytes).into_owned()
}

fn status_code(s: ExitStatus) -> i32 {
    match (s.code(), s.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => -sig,
        _ => -1,
    }
}

fn signal_group(pgid: Pid, sig: Signal) {
    // ESRCH (group gone) is the normal case after the child exited.
    let _ = killpg(pgid, sig);
}

/// Runs one child to completion (or kills it); see the module header.
pub fn run_child(spec: &ChildSpec, interrupt: &AtomicBool) -> std::io::Result<ChildRun> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for k in &spec.env_remove {
        cmd.env_remove(k);
    }
    for (k, v) in &spec.env_set {
        cmd.env(k, v);
    }
    let rss_before = env::children_max_rss();
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let pgid = Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
    let (done_tx, done_rx) = mpsc::channel();
    let out_tail = Arc::new(Mutex::new(Tail::default()));
    let err_tail = Arc::new(Mutex::new(Tail::default()));
    let mut streams = 0;
    if let Some(o) = child.stdout.take() {
        drain(o, STDOUT_KEEP, out_tail.clone(), done_tx.clone());
        streams += 1;
    }
    if let Some(e) = child.stderr.take() {
        drain(e, STDERR_KEEP, err_tail.clone(), done_tx.clone());
        streams += 1;
    }
    drop(done_tx);
    let (exit_tx, exit_rx) = mpsc::channel::<(std::io::Result<ExitStatus>, Instant)>();
    std::thread::spawn(move || {
        let r = child.wait();
        let _ = exit_tx.send((r, Instant::now()));
    });

    let deadline = spec.timeout.map(|t| start + t);
    let mut sampled_hwm: Option<u64> = None;
    let mut killed: Option<ChildEnd> = None;
    let mut kill_at: Option<Instant> = None;
    let (status, ended_at) = loop {
        match exit_rx.recv_timeout(Duration::from_millis(20)) {
            Ok(x) => break x,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break (
                    Err(std::io::Error::other("waiter thread vanished")),
                    Instant::now(),
                );
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if killed.is_none() {
            if let Some(v) = env::vm_hwm(Some(pid)) {
                sampled_hwm = Some(sampled_hwm.map_or(v, |s| s.max(v)));
            }
            let why = if interrupt.load(Ordering::SeqCst) {
                Some(ChildEnd::Interrupted)
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                Some(ChildEnd::TimedOut)
            } else {
                None
            };
            if let Some(why) = why {
                signal_group(pgid, Signal::SIGTERM);
                killed = Some(why);
                kill_at = Some(Instant::now() + spec.grace);
            }
        } else if kill_at.is_some_and(|k| Instant::now() >= k) {
            signal_group(pgid, Signal::SIGKILL);
            kill_at = None;
        }
    };
    // Whatever is left of the group (grandchildren) goes too.
    signal_group(pgid, Signal::SIGKILL);
    let elapsed_ms = ended_at.duration_since(start).as_secs_f64() * 1000.0;
    let drain_deadline = Instant::now() + DRAIN_WAIT;
    for _ in 0..streams {
        let left = drain_deadline.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    let rc = match &status {
        Ok(s) => status_code(*s),
        Err(_) => -1,
    };
    let rss_after = env::children_max_rss();
    let peak_rss = match (rss_before, rss_after) {
        (Some(b), Some(a)) if a > b => Some((a, "parent:rusage")),
        _ => sampled_hwm.map(|v| (v, "parent:VmHWM")),
    };
    status?;
    Ok(ChildRun {
        end: killed.unwrap_or(ChildEnd::Exited(rc)),
        rc,
        elapsed_ms,
        stdout: take_tail(&out_tail, STDOUT_KEEP),
        stderr: take_tail(&err_tail, STDERR_KEEP),
        peak_rss,
    })
}

/// A controller-built failure row: the base (identity) row with `success: false`, the safe
/// error and the child's redacted stderr tail (docs/bench-rows.md#child-processes plus `stderr_tail`).
pub fn failure_row(
    base: &dyn FailureRowSource,
    error: &str,
    stderr: &str,
    secrets: &[&str],
) -> Map<String, Value> {
    base.failure_row(
        env::safe_error(error, None, secrets),
        env::stderr_tail(stderr, secrets),
    )
}

/// Turns a finished child into its row (docs/bench-rows.md#child-processes): a timeout or a missing/malformed result is a
/// failure row built from `base`; a parsed row gets `child_process_ms`, is failed when the
/// exit code is non-zero but the row says success, gets the parent's peak RSS when it has none,
/// and keeps a redacted `stderr_tail` when it is a failure. `timeout_secs` is only used in the
/// timeout message. An interrupted child also gives a failure row (callers usually drop it).
pub fn interpret(
    run: &ChildRun,
    base: &dyn FailureRowSource,
    timeout_secs: f64,
    secrets: &[&str],
) -> Map<String, Value> {
    match run.end {
        ChildEnd::TimedOut => {
            return failure_row(
                base,
                &format!(
                    "child process timed out after {} seconds",
                    fmt_g(timeout_secs)
                ),
                &run.stderr,
                secrets,
            );
        }
        ChildEnd::Interrupted => {
            return failure_row(
                base,
                "child process interrupted (the controller was stopped)",
                &run.stderr,
                secrets,
            );
        }
        ChildEnd::Exited(_) => {}
    }
    let rc = run.rc;
    let Some(last) = run.stdout.lines().rev().find(|l| !l.trim().is_empty()) else {
        return failure_row(
            base,
            &format!("child process returned {rc} without a result"),
            &run.stderr,
            secrets,
        );
    };
    let mut row = match serde_json::from_str::<Value>(last.trim()) {
        Ok(Value::Object(m)) => m,
        _ => {
            return failure_row(
                base,
                &format!("child process returned {rc} with malformed JSON"),
                &run.stderr,
                secrets,
            );
        }
    };
    row.insert("child_process_ms".into(), json!(run.elapsed_ms));
    let success = row.get("success") == Some(&Value::Bool(true));
    if rc != 0 && success {
        row.insert("success".into(), Value::Bool(false));
        row.insert(
            "error".into(),
            Value::String(format!("child process exited with status {rc}")),
        );
    } else if success && row.get("peak_rss_bytes").is_none_or(Value::is_null) {
        if let Some((bytes, source)) = run.peak_rss {
            row.insert("peak_rss_bytes".into(), json!(bytes));
            row.insert("rss_source".into(), json!(source));
        }
    }
    if row.get("success") != Some(&Value::Bool(true)) {
        row.insert(
            "stderr_tail".into(),
            Value::String(env::stderr_tail(&run.stderr, secrets)),
        );
    }
    row
}

/// Refuses an output path that is a SQLite database or named like one of its sidecars: the
/// output is truncated, which would destroy a store. (The controller holds no SQLite
/// connection — the cases run in child processes — so looking at a file's header here
/// drops no lock of its own.)
fn refuse_store_file(path: &Path) -> Result<(), Error> {
    let refuse = |what: &str| {
        Err(crate::error::BenchError::Usage(format!(
            "--output {} is {what}; the output file is truncated: name another file",
            path.display()
        ))
        .into())
    };
    if dfck_core::store::files::is_sidecar_name(path) {
        return refuse("named like a SQLite sidecar");
    }
    let mut head = [0u8; 16];
    let is_db = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"SQLite format 3\0");
    if is_db {
        return refuse("a SQLite database");
    }
    Ok(())
}

/// The JSONL output file (parents created, truncated), rows appended one by one.
pub struct JsonlOutput {
    path: PathBuf,
    file: std::fs::File,
}

impl JsonlOutput {
    /// Creates (truncates) the file and its parent directories.
    pub fn create(path: &Path) -> Result<JsonlOutput, Error> {
        let named = |e: std::io::Error| {
            Error::Core(CoreError::Io(std::io::Error::new(
                e.kind(),
                format!("cannot create the output file {}: {e}", path.display()),
            )))
        };
        refuse_store_file(path)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(named)?;
        }
        let file = std::fs::File::create(path).map_err(named)?;
        Ok(JsonlOutput {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Appends one row and flushes it.
    pub fn append(&mut self, row: &Map<String, Value>) -> Result<(), Error> {
        let mut line = serde_json::to_string(row)
            .map_err(|e| Error::Core(CoreError::Render(e.to_string())))?;
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.flush()?;
        Ok(())
    }

    /// Replaces the file with `rows` (temp file in the same directory + rename).
    pub fn rewrite(&mut self, rows: &[Map<String, Value>]) -> Result<(), Error> {
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut tmp = tempfile::Builder::new()
            .prefix(".dfck-bench-")
            .suffix(".jsonl.tmp")
            .tempfile_in(dir)?;
        for row in rows {
            let mut line = serde_json::to_string(row)
                .map_err(|e| Error::Core(CoreError::Render(e.to_string())))?;
            line.push('\n');
            tmp.write_all(line.as_bytes())?;
        }
        tmp.flush()?;
        tmp.as_file().sync_all()?;
        // The renamed file's own handle, at its end, takes the rows appended next: the
        // path is not opened again.
        self.file = tmp
            .persist(&self.path)
            .map_err(|e| Error::Core(CoreError::Io(e.error)))?;
        Ok(())
    }
}

/// A flag raised by SIGINT / SIGTERM, for [`run_child`] and [`run_cases`].
pub fn interrupt_flag() -> Result<Arc<AtomicBool>, Error> {
    let interrupt = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupt.clone())?;
    }
    Ok(interrupt)
}

/// A cross-mode gate: marks mismatching rows failed, returns how many it changed.
pub type Gate = dyn Fn(&mut [Map<String, Value>]) -> usize;

/// One case for [`run_cases`]: how to start its child, its identity row, its progress line.
pub struct PlannedCase {
    /// The child.
    pub spec: ChildSpec,
    /// The identity row (the controller's failure rows are built from it).
    pub base: Box<dyn FailureRowSource>,
    /// The progress line reported before the case runs.
    pub progress: String,
}

/// What a controller run produced.
pub struct CasesOutcome {
    /// Every finished row, gated, in execution order.
    pub rows: Vec<Map<String, Value>>,
    /// Ctrl-C / SIGTERM stopped the run.
    pub interrupted: bool,
}

impl CasesOutcome {
    /// Rows that are not successful.
    pub fn failures(&self) -> usize {
        self.rows.iter().filter(|r| !row_succeeded(r)).count()
    }

    /// `Interrupted` when Ctrl-C / SIGTERM stopped the run, `Failed` when a row failed, else
    /// `Clean`.
    pub fn outcome(&self) -> Outcome {
        if self.interrupted {
            Outcome::Interrupted
        } else if self.failures() > 0 {
            Outcome::Failed
        } else {
            Outcome::Clean
        }
    }
}

/// Whether a row says `success: true`.
pub fn row_succeeded(row: &Map<String, Value>) -> bool {
    row.get("success") == Some(&Value::Bool(true))
}

/// What the controller loop tells its caller while it runs (the runner/reporter split: the
/// loop decides, a reporter in `crate::render` prints).
pub trait Reporter {
    /// Case `index` (1-based) of `total` is about to run; `progress` is its progress line.
    fn case_started(&mut self, index: usize, total: usize, progress: &str);
    /// A case finished with this row (successful or not), already appended to the output.
    fn row(&mut self, row: &Map<String, Value>);
    /// The row just reported is a failure row (the case failed, timed out or gave no result).
    fn case_failed(&mut self, _row: &Map<String, Value>) {}
    /// Ctrl-C / SIGTERM stopped the run; the running case has no row.
    fn interrupted(&mut self);
    /// The run is over: every row (gated) and the output file.
    fn done(&mut self, outcome: &CasesOutcome, output: &Path);
}

/// The controller loop shared by the benchmarks (docs/bench-rows.md#matrix-and-gate, docs/bench-rows.md#child-processes): one child per case,
/// in order; each row appended and flushed to `output` as its case finishes; Ctrl-C / SIGTERM
/// kills the running child's group and keeps every finished row; at the end `gate` runs over
/// all rows and the file is rewritten atomically when it changed one.
pub fn run_cases(
    cases: Vec<PlannedCase>,
    output: &Path,
    timeout_secs: f64,
    secrets: &[&str],
    interrupt: &AtomicBool,
    gate: &Gate,
    reporter: &mut dyn Reporter,
) -> Result<CasesOutcome, Error> {
    let mut out = JsonlOutput::create(output)?;
    let total = cases.len();
    let mut rows: Vec<Map<String, Value>> = Vec::with_capacity(cases.len());
    let mut interrupted = false;
    for (i, case) in cases.into_iter().enumerate() {
        if interrupt.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        reporter.case_started(i + 1, total, &case.progress);
        // The case's temporary stores live under a directory of its own, removed when the
        // case ends, fails, times out or is interrupted (even when the child was killed).
        let scope = CaseScope::create();
        let spec = scope.spec(&case.spec);
        let row = match run_child(&spec, interrupt) {
            Ok(r) if r.end == ChildEnd::Interrupted => {
                interrupted = true;
                break;
            }
            Ok(r) => interpret(&r, case.base.as_ref(), timeout_secs, secrets),
            Err(e) => failure_row(
                case.base.as_ref(),
                &format!(
                    "cannot start child process {}: {e}",
                    case.spec.program.display()
                ),
                "",
                secrets,
            ),
        };
        out.append(&row)?;
        reporter.row(&row);
        if !row_succeeded(&row) {
            reporter.case_failed(&row);
        }
        rows.push(row);
        drop(scope);
    }
    if interrupted {
        reporter.interrupted();
    }
    if gate(&mut rows) > 0 {
        out.rewrite(&rows)?;
    }
    let done = CasesOutcome { rows, interrupted };
    reporter.done(&done, output);
    Ok(done)
}

/// Prefix of a case's own temporary directory; it contains the benchmark prefix so that
/// error texts naming it are redacted like the children's work directories.
pub const CASE_SCOPE_PREFIX: &str = "deerflow-checkpoint-benchmark-case-";

/// A directory the child of one case gets as `TMPDIR`: the child's work directory (native
/// or Python `tempfile`) is created inside it, and dropping it removes everything the case
/// left, whatever way the child ended.
struct CaseScope(Option<tempfile::TempDir>);

impl CaseScope {
    fn create() -> CaseScope {
        CaseScope(
            tempfile::Builder::new()
                .prefix(CASE_SCOPE_PREFIX)
                .tempdir()
                .ok(),
        )
    }

    /// `spec` with `TMPDIR` pointing into the scope (unchanged when there is none, or its path
    /// is not UTF-8).
    fn spec(&self, spec: &ChildSpec) -> ChildSpec {
        let mut spec = spec.clone();
        if let Some(dir) = self.0.as_ref().and_then(|d| d.path().to_str()) {
            spec.env_set.push(("TMPDIR".into(), dir.to_string()));
        }
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Map<String, Value> {
        match json!({"schema_version": 2, "success": true, "error": null, "seed": 1}) {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn run(stdout: &str, rc: i32, end: ChildEnd) -> ChildRun {
        ChildRun {
            end,
            rc,
            elapsed_ms: 12.5,
            stdout: stdout.into(),
            stderr: "boom at /tmp/deerflow-checkpoint-benchmark-xyz/db postgres://u:pw@h/d".into(),
            peak_rss: Some((4096, "parent:VmHWM")),
        }
    }

    #[test]
    fn interpretation() {
        let r = interpret(&run("", 3, ChildEnd::Exited(3)), &base(), 1.0, &[]);
        assert_eq!(r["error"], "child process returned 3 without a result");
        assert!(r.get("child_process_ms").is_none());
        let tail = r["stderr_tail"].as_str().unwrap_or("");
        assert!(
            tail.contains("<work-dir>/db") && !tail.contains(":pw@"),
            "{tail}"
        );
        let r = interpret(
            &run("x\n{bad\n\n", 0, ChildEnd::Exited(0)),
            &base(),
            1.0,
            &[],
        );
        assert_eq!(r["error"], "child process returned 0 with malformed JSON");
        let r = interpret(&run("[1]", 0, ChildEnd::Exited(0)), &base(), 1.0, &[]);
        assert_eq!(r["error"], "child process returned 0 with malformed JSON");
        let r = interpret(&run("", -9, ChildEnd::TimedOut), &base(), 1.5, &[]);
        assert_eq!(r["error"], "child process timed out after 1.5 seconds");
        let r = interpret(
            &run(
                "noise\n{\"success\":true,\"error\":null}\n",
                1,
                ChildEnd::Exited(1),
            ),
            &base(),
            1.0,
            &[],
        );
        assert_eq!(r["success"], false);
        assert_eq!(r["error"], "child process exited with status 1");
        assert_eq!(r["child_process_ms"], 12.5);
        let r = interpret(
            &run("{\"success\":true,\"error\":null}", 0, ChildEnd::Exited(0)),
            &base(),
            1.0,
            &[],
        );
        assert_eq!(r["peak_rss_bytes"], 4096);
        assert_eq!(r["rss_source"], "parent:VmHWM");
        assert!(r.get("stderr_tail").is_none());
    }
}
