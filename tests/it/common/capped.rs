//! Running dfck on hostile stores: a memory cap, a timeout (the child is killed on expiry),
//! and the checks every run must pass whatever the store holds.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Address-space cap of every run, in KiB (`ulimit -v`).
pub const MEMORY_KIB: u64 = 1 << 20;

/// How one run ended.
#[derive(Debug)]
pub struct Run {
    /// Exit code (`None`: killed by a signal, or by the timeout).
    pub code: Option<i32>,
    /// Whether the timeout killed it.
    pub timed_out: bool,
    /// Stdout.
    pub stdout: Vec<u8>,
    /// Stderr, lossily decoded.
    pub stderr: String,
    /// Wall time.
    pub elapsed: Duration,
}

/// Runs `dfck --db DB ARGS…` under the memory cap, killing it after `timeout`.
pub fn dfck_capped(db: &str, args: &[&str], timeout: Duration) -> Run {
    let start = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {MEMORY_KIB} 2>/dev/null; exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_dfck"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("DFCK_DB")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dfck");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > timeout {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait after kill");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned();
    Run {
        code: if timed_out { None } else { status.code() },
        timed_out,
        stdout,
        stderr,
        elapsed: start.elapsed(),
    }
}

/// What is wrong with a run by the hostile-input contract, if anything: no hang, no
/// signal, no panic, exit 0/1/2, one stderr line on exit 2, JSON on stdout for
/// `--format json` with exit 0/1.
pub fn contract_violation(run: &Run, json: bool) -> Option<String> {
    if run.timed_out {
        return Some(format!("timed out after {:?}", run.elapsed));
    }
    let Some(code) = run.code else {
        return Some(format!("killed by a signal; stderr: {}", run.stderr));
    };
    if run.stderr.contains("panicked") || run.stderr.contains("RUST_BACKTRACE") {
        return Some(format!("panic: {}", run.stderr));
    }
    if run.stderr.contains("memory allocation") {
        return Some(format!("out of memory: {}", run.stderr));
    }
    match code {
        0 | 1 => {
            if json && serde_json::from_slice::<serde_json::Value>(&run.stdout).is_err() {
                return Some(format!(
                    "exit {code} but stdout is not JSON: {}",
                    String::from_utf8_lossy(&run.stdout[..run.stdout.len().min(300)])
                ));
            }
            None
        }
        2 => {
            let lines = run.stderr.trim_end().lines().count();
            (lines != 1).then(|| format!("exit 2 with {lines} stderr lines: {:?}", run.stderr))
        }
        other => Some(format!("exit {other}; stderr: {}", run.stderr)),
    }
}
