//! The environment of a benchmark run: git SHA, platform string, runtime version, peak RSS of
//! this process (VmHWM, else getrusage) and of a child (sampled VmHWM, RUSAGE_CHILDREN), and
//! the redaction every error text and stderr tail goes through (DeerFlow's `safe_error`,
//! docs/bench-rows.md#child-processes, plus URL passwords).

use std::path::{Path, PathBuf};

/// The environment variable through which the controller hands the git SHA to children.
pub const GIT_SHA_ENV: &str = "DFCK_BENCH_GIT_SHA";
/// DeerFlow's name for the same variable (also set, and read as a fallback).
pub const DEERFLOW_GIT_SHA_ENV: &str = "DEERFLOW_CHECKPOINT_BENCH_GIT_SHA";
/// The temporary-directory prefix of a channel case (docs/bench-rows.md#child-processes); redaction hides such paths.
pub const TEMP_PREFIX: &str = "deerflow-checkpoint-benchmark-";
/// Maximum length of a safe error text or a stderr tail, in characters.
pub const SAFE_ERROR_CHARS: usize = 2000;

/// The project directory dfck was built from (where the worker scripts are looked for).
pub fn build_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The git SHA: the controller's env var when set (a child), else the revision dfck was built
/// from (recorded by `build.rs`; `unknown` when it was built outside a git checkout).
pub fn git_sha() -> String {
    for var in [GIT_SHA_ENV, DEERFLOW_GIT_SHA_ENV] {
        if let Ok(v) = std::env::var(var) {
            if !v.trim().is_empty() {
                return v.trim().to_string();
            }
        }
    }
    BUILD_GIT_SHA.to_string()
}

/// The revision dfck was built from (`git rev-parse HEAD` at build time, or `unknown`).
pub const BUILD_GIT_SHA: &str = env!("DFCK_GIT_SHA");

/// A `platform.platform()`-like string: `Linux-<kernel release>-<arch>`.
pub fn platform() -> String {
    let os = match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Darwin",
        other => other,
    };
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    if release.is_empty() {
        format!("{os}-{}", std::env::consts::ARCH)
    } else {
        format!("{os}-{release}-{}", std::env::consts::ARCH)
    }
}

/// The native engine's runtime: `rustc <version>` when the build recorded one in
/// `DFCK_RUSTC_VERSION`, else `rust`.
pub fn rust_runtime_version() -> String {
    match option_env!("DFCK_RUSTC_VERSION") {
        Some(v) if !v.is_empty() => format!("rustc {v}"),
        _ => "rust".to_string(),
    }
}

/// `VmHWM` of `/proc/<pid>/status` (or `self`), in bytes.
pub fn vm_hwm(pid: Option<u32>) -> Option<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".to_string(),
    };
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn maxrss_bytes(who: nix::sys::resource::UsageWho) -> Option<u64> {
    let usage = nix::sys::resource::getrusage(who).ok()?;
    let v = u64::try_from(usage.max_rss()).ok()?;
    if cfg!(target_os = "macos") {
        Some(v)
    } else {
        Some(v * 1024)
    }
}

/// Peak RSS of this process and where it came from: `VmHWM`, else `getrusage`, else none.
pub fn peak_rss_self() -> (Option<u64>, Option<&'static str>) {
    if let Some(v) = vm_hwm(None) {
        return (Some(v), Some("VmHWM"));
    }
    match maxrss_bytes(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        Some(v) => (Some(v), Some("getrusage")),
        None => (None, None),
    }
}

/// `ru_maxrss` of the waited-for children of this process (the largest one), in bytes.
pub fn children_max_rss() -> Option<u64> {
    maxrss_bytes(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
}

pub use dfck_core::redact::url_password;

/// Replaces every URL password (`scheme://user:pw@`, `password=pw`) in free text with `***`.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        if token.contains("://") || token.to_ascii_lowercase().contains("password=") {
            out.push_str(&dfck_core::redact::redact_url(token));
        } else {
            out.push_str(token);
        }
        token.clear();
    };
    for ch in text.chars() {
        if ch.is_whitespace() || matches!(ch, '"' | '\'' | '`' | '<' | '>' | '(' | ')' | ',') {
            flush(&mut token, &mut out);
            out.push(ch);
        } else {
            token.push(ch);
        }
    }
    flush(&mut token, &mut out);
    out
}

/// Replaces any `<tmp>/deerflow-checkpoint-benchmark-XXXX` path with `<work-dir>`.
fn redact_temp_dirs(text: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        // Start of the path: back up over path characters before the prefix.
        let before = &rest[..i];
        let start = before
            .rfind(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | '<' | '=' | ':'))
            .map(|j| j + before[j..].chars().next().map_or(1, char::len_utf8))
            .unwrap_or(0);
        out.push_str(&rest[..start]);
        out.push_str("<work-dir>");
        let after = &rest[i + prefix.len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-'))
            .unwrap_or(after.len());
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Redacts free text: the work dir and any benchmark temp dir → `<work-dir>`, the home
/// directory → `<home>`, every given secret and URL password → `***`.
pub fn redact(text: &str, work_dir: Option<&Path>, secrets: &[&str]) -> String {
    let mut s = text.to_string();
    for secret in secrets.iter().filter(|x| !x.is_empty()) {
        s = s.replace(secret, "***");
    }
    if let Some(w) = work_dir {
        let w = w.to_string_lossy();
        if !w.is_empty() {
            s = s.replace(w.as_ref(), "<work-dir>");
        }
    }
    s = redact_temp_dirs(&s, TEMP_PREFIX);
    if let Some(home) = std::env::var_os("HOME") {
        let home = home.to_string_lossy().trim_end_matches('/').to_string();
        if home.len() > 1 {
            s = s.replace(&home, "<home>");
        }
    }
    redact_urls(&s)
}

/// DeerFlow's `safe_error` (docs/bench-rows.md#child-processes) plus URL redaction: the first 2000 characters of the
/// redacted text.
pub fn safe_error(text: &str, work_dir: Option<&Path>, secrets: &[&str]) -> String {
    redact(text, work_dir, secrets)
        .chars()
        .take(SAFE_ERROR_CHARS)
        .collect()
}

/// The last 2000 characters of a child's stderr, redacted like [`safe_error`].
pub fn stderr_tail(stderr: &str, secrets: &[&str]) -> String {
    let s = redact(stderr, None, secrets);
    let n = s.chars().count();
    s.chars().skip(n.saturating_sub(SAFE_ERROR_CHARS)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction() {
        let t = "connect postgresql://u:s3cret@h:5/db?sslmode=x failed; password=abc&x=1 in /tmp/deerflow-checkpoint-benchmark-AbC_12/x.sqlite";
        let r = redact(t, None, &[]);
        assert!(!r.contains("s3cret") && !r.contains("abc&"), "{r}");
        assert!(
            r.contains("u:***@h") && r.contains("<work-dir>/x.sqlite"),
            "{r}"
        );
        assert_eq!(url_password("postgres://a:b@c/d").as_deref(), Some("b"));
        assert_eq!(url_password("postgres://a@c/d"), None);
        let r = redact("x hunter2 y", None, &["hunter2"]);
        assert_eq!(r, "x *** y");
        let long = "e".repeat(5000);
        assert_eq!(safe_error(&long, None, &[]).len(), 2000);
        assert_eq!(stderr_tail(&format!("{long}END"), &[]).len(), 2000);
        assert!(stderr_tail(&format!("{long}END"), &[]).ends_with("END"));
    }

    #[test]
    fn rss_and_platform() {
        let (v, src) = peak_rss_self();
        assert!(v.unwrap_or(0) > 0);
        assert!(src.is_some());
        assert!(platform().contains(std::env::consts::ARCH));
    }
}
