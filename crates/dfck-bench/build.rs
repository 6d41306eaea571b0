//! Build script: records what benchmark rows say about the build — the compiler's version for
//! `runtime_version` (`DFCK_RUSTC_VERSION`, e.g. `1.95.0`) and the project's git revision for
//! `git_sha` (`DFCK_GIT_SHA`: `git rev-parse HEAD`, or `unknown` without git or `.git`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_string));
    if let Some(v) = version {
        println!("cargo:rustc-env=DFCK_RUSTC_VERSION={v}");
    }
    // The repository root: this crate lives in crates/dfck-bench.
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()))
        .join("../..");
    watch_git(&root);
    let sha = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && root.join(".git").exists())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=DFCK_GIT_SHA={sha}");
}

/// Reruns the script when HEAD moves: `.git/HEAD`, the branch it names and `packed-refs`
/// (`.git` may be a file pointing at a worktree's git directory).
fn watch_git(root: &Path) {
    let dot_git = root.join(".git");
    println!("cargo:rerun-if-changed={}", dot_git.display());
    let git_dir = if dot_git.is_file() {
        std::fs::read_to_string(&dot_git).ok().and_then(|t| {
            t.trim()
                .strip_prefix("gitdir:")
                .map(|p| root.join(p.trim()))
        })
    } else {
        Some(dot_git)
    };
    let Some(git_dir) = git_dir else { return };
    let head = git_dir.join("HEAD");
    println!("cargo:rerun-if-changed={}", head.display());
    // A worktree keeps its refs in the common directory.
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .map(|c| git_dir.join(c.trim()))
        .unwrap_or_else(|_| git_dir.clone());
    if let Some(reference) = std::fs::read_to_string(&head)
        .ok()
        .and_then(|h| h.trim().strip_prefix("ref:").map(|r| r.trim().to_string()))
    {
        println!(
            "cargo:rerun-if-changed={}",
            common.join(&reference).display()
        );
    }
    println!(
        "cargo:rerun-if-changed={}",
        common.join("packed-refs").display()
    );
}
