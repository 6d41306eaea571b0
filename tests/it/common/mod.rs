//! Shared helpers for the integration tests: running the real `dfck` binary on the
//! committed fixtures and reading the expected JSON written by the real LangGraph.
#![allow(dead_code)]

pub mod capped;
pub mod compare;
pub mod pg;
pub mod rows;
pub mod store_rows;
pub mod summarize;

use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `fixtures/sqlite/<stem>.db`.
pub fn sqlite_fixture(stem: &str) -> PathBuf {
    root().join("fixtures/sqlite").join(format!("{stem}.db"))
}

/// The stems of the `.json` files in `fixtures/<dir>`, sorted.
pub fn stems_in(dir: &str) -> Vec<String> {
    let mut stems: Vec<String> = std::fs::read_dir(root().join("fixtures").join(dir))
        .expect("fixtures directory exists")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let p = e.path();
            if p.extension()? != "json" {
                return None;
            }
            Some(p.file_stem()?.to_string_lossy().into_owned())
        })
        .collect();
    stems.sort();
    stems
}

/// Every fixture stem that has an expected JSON file, sorted.
pub fn fixture_stems() -> Vec<String> {
    stems_in("expected")
}

/// `fixtures/<dir>/<stem>.json`.
pub fn expected_in(dir: &str, stem: &str) -> Json {
    let p = root()
        .join("fixtures")
        .join(dir)
        .join(format!("{stem}.json"));
    serde_json::from_slice(&std::fs::read(&p).expect("expected file")).expect("expected JSON")
}

/// The expected JSON of one fixture.
pub fn expected(stem: &str) -> Json {
    let p = root()
        .join("fixtures/expected")
        .join(format!("{stem}.json"));
    serde_json::from_slice(&std::fs::read(&p).expect("expected file")).expect("expected JSON")
}

/// The public test key of the encrypted fixtures (`fixtures/aes.key`, less its newline).
pub fn aes_test_key() -> String {
    std::fs::read_to_string(root().join("fixtures/aes.key"))
        .expect("fixtures/aes.key")
        .trim_end_matches('\n')
        .to_owned()
}

/// Installs [`aes_test_key`] in this test process, for tests that read the encrypted
/// fixtures through the library itself.
pub fn install_test_key() {
    let key = dfck_core::codec::aes::AesKey::from_env_value(&aes_test_key()).expect("test key");
    dfck_core::codec::aes::install_key(key);
}

/// The plaintext of a stored value (`<inner>+aes` opened with the test key).
pub fn opened(tag: Option<&str>, bytes: &[u8]) -> Vec<u8> {
    install_test_key();
    dfck_core::codec::aes::open(tag, bytes::Bytes::copy_from_slice(bytes))
        .expect("opens")
        .bytes
        .to_vec()
}

/// The one way the tests run the program: the `dfck` binary of this build, without a
/// `DFCK_DB` from the environment, with the encrypted fixtures' key in `LANGGRAPH_AES_KEY`
/// (as DeerFlow's environment holds it; tests of a missing key remove it). Chain
/// `.args(…)` and `.output()`, or [`RunExt::assert`].
pub fn dfck_command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dfck"));
    c.env_remove("DFCK_DB");
    c.env("LANGGRAPH_AES_KEY", aes_test_key());
    c
}

/// A finished run, for chained assertions: `dfck_command().args(…).assert().code(1)`.
pub struct Ran(pub Output);

/// Runs a command to completion for [`Ran`]'s assertions.
pub trait RunExt {
    /// Runs it (panics when it cannot start).
    fn assert(&mut self) -> Ran;
}

impl RunExt for Command {
    fn assert(&mut self) -> Ran {
        Ran(self.output().expect("run dfck"))
    }
}

impl Ran {
    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }

    /// The exit code is `code`.
    pub fn code(self, code: i32) -> Self {
        assert_eq!(
            self.0.status.code(),
            Some(code),
            "stderr: {}",
            self.stderr_text()
        );
        self
    }

    /// Stdout is exactly `want`.
    pub fn stdout(self, want: impl AsRef<str>) -> Self {
        assert_eq!(String::from_utf8_lossy(&self.0.stdout), want.as_ref());
        self
    }

    /// Stderr is exactly `want`.
    pub fn stderr(self, want: &str) -> Self {
        assert_eq!(self.stderr_text(), want);
        self
    }

    /// Stdout contains `needle`.
    pub fn stdout_contains(self, needle: &str) -> Self {
        let out = String::from_utf8_lossy(&self.0.stdout).into_owned();
        assert!(out.contains(needle), "stdout lacks {needle:?}: {out}");
        self
    }

    /// Stderr contains `needle`.
    pub fn stderr_contains(self, needle: &str) -> Self {
        let err = self.stderr_text();
        assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
        self
    }

    /// The run's output.
    pub fn get_output(&self) -> &Output {
        &self.0
    }
}

/// Runs `dfck ARGS` with `--db TARGET`.
pub fn dfck(target: &str, args: &[&str]) -> Output {
    dfck_command()
        .arg("--db")
        .arg(target)
        .args(args)
        .output()
        .expect("run dfck")
}

/// Runs dfck, asserts exit 0, parses stdout as JSON.
pub fn dfck_json(target: &str, args: &[&str]) -> Json {
    let out = dfck(target, args);
    assert!(
        out.status.success(),
        "dfck {args:?} on {target} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// Asserts a failure the way every bad input must fail: exit 2, one line on stderr that
/// names the problem, no panic.
pub fn assert_clean_failure(out: &Output, needle: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "exit code, stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    assert!(!stderr.contains("RUST_BACKTRACE"), "backtrace: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr:?}");
    assert!(
        stderr.to_lowercase().contains(&needle.to_lowercase()),
        "stderr should name '{needle}': {stderr}"
    );
    stderr
}

/// A copy of a file in a fresh temporary directory (for tests that modify a store).
pub fn temp_copy(src: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let dst = dir.path().join(src.file_name().expect("file name"));
    std::fs::copy(src, &dst).expect("copy fixture");
    (dir, dst)
}

/// A Postgres URI with another database name (query options kept).
pub fn with_db(uri: &str, db: &str) -> String {
    let (base, query) = match uri.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (uri, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[scheme_end..]
        .find('/')
        .map(|i| scheme_end + i)
        .unwrap_or(base.len());
    match query {
        Some(q) => format!("{}/{db}?{q}", &base[..host_end]),
        None => format!("{}/{db}", &base[..host_end]),
    }
}

/// The test server's URI (`TEST_POSTGRES_URI`), or `None` after
/// saying that `what` is skipped. With `DFCK_REQUIRE_POSTGRES` set (CI) a missing server fails
/// the test.
pub fn require_postgres(what: &str) -> Option<String> {
    let got = std::env::var("TEST_POSTGRES_URI")
        .ok()
        .filter(|u| !u.is_empty());
    if got.is_none() {
        require_or_skip("DFCK_REQUIRE_POSTGRES", "TEST_POSTGRES_URI", what);
    }
    got
}

/// The test server's hot standby (`TEST_POSTGRES_STANDBY_URI`, `scripts/pg-test-server.sh
/// standby`), or `None` after saying that `what` is skipped; required with
/// `DFCK_REQUIRE_POSTGRES`.
pub fn require_standby(what: &str) -> Option<String> {
    let got = std::env::var("TEST_POSTGRES_STANDBY_URI")
        .ok()
        .filter(|u| !u.is_empty());
    if got.is_none() {
        require_or_skip("DFCK_REQUIRE_POSTGRES", "TEST_POSTGRES_STANDBY_URI", what);
    }
    got
}

/// The test Redis server (`TEST_REDIS_URL`, started by scripts/test-all.sh), or `None` after
/// saying that `what` is skipped; required with `DFCK_REQUIRE_REDIS`.
pub fn require_redis(what: &str) -> Option<String> {
    let got = std::env::var("TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty());
    if got.is_none() {
        require_or_skip("DFCK_REQUIRE_REDIS", "TEST_REDIS_URL", what);
    }
    got
}

/// The pinned Python with LangGraph (`DFCK_TEST_PYTHON`), or `None` after saying that `what`
/// is skipped. With `DFCK_REQUIRE_PYTHON` set (CI) a missing Python fails the test.
pub fn require_python(what: &str) -> Option<PathBuf> {
    let got = std::env::var_os("DFCK_TEST_PYTHON")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    if got.is_none() {
        require_or_skip("DFCK_REQUIRE_PYTHON", "DFCK_TEST_PYTHON", what);
    }
    got
}

fn require_or_skip(require: &str, var: &str, what: &str) {
    if std::env::var_os(require).is_some_and(|v| !v.is_empty() && v != "0") {
        panic!(
            "{var} unset but {require} is set: {what} cannot be skipped (scripts/test-all.sh sets both up)"
        );
    }
    // One write of the whole line, on the real stderr (shown even when the harness captures
    // output), so that it does not interleave with the harness's own lines.
    use std::io::Write as _;
    let line = format!("{what} skipped: {var} unset\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// The older name of [`require_postgres`], still used by the bench and migrate tests: prints
/// "postgres tests skipped: TEST_POSTGRES_URI unset" when there is no server, and fails when
/// `DFCK_REQUIRE_POSTGRES` is set.
pub fn pg_server() -> Option<String> {
    require_postgres("postgres tests")
}

/// Free bytes on the file system holding `p`.
pub fn free_bytes(p: &Path) -> u64 {
    let s = nix::sys::statvfs::statvfs(p).unwrap();
    s.blocks_available() as u64 * s.fragment_size() as u64
}

/// A small tmpfs, unmounted on drop.
pub struct Tmpfs(pub tempfile::TempDir);

impl Tmpfs {
    pub fn mount(bytes: u64) -> Option<Tmpfs> {
        let uid = std::process::Command::new("id").arg("-u").output().ok()?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}
