//! Progress on stderr: nothing drawn (no escape codes, no summary line) when stderr is not a
//! terminal; on a terminal (a pseudo-terminal from `script`), a labelled bar with elapsed time
//! and ETA, and a summary line when the phase ends. The inspect spinner never starts unlabelled.

use std::process::Command;

fn dfck() -> &'static str {
    env!("CARGO_BIN_EXE_dfck")
}

#[test]
fn no_bar_and_no_summary_without_a_terminal() {
    let (dir, _) = crate::common::temp_copy(&crate::common::sqlite_fixture("deerflow"));
    for args in [
        vec!["verify"],
        vec!["prune", "--all", "--branches"],
        vec!["migrate", "full-to-delta", "--all"],
        vec!["copy", "--to", "c.db", "--all"],
        vec!["inspect"],
    ] {
        let out = Command::new(dfck())
            .args(["--db", "deerflow.db"])
            .args(&args)
            .current_dir(dir.path())
            .env_remove("DFCK_DB")
            .output()
            .expect("run dfck");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains('\x1b') && !err.contains('\r'),
            "{args:?}: {err}"
        );
        assert!(!err.contains(" threads: "), "{args:?}: summary line: {err}");
    }
}

/// Runs `dfck ARGS` under a pseudo-terminal; its stderr (stdout discarded), or `None` when
/// `script` is not installed.
fn on_a_terminal(cwd: &std::path::Path, args: &str) -> Option<String> {
    let cmd = format!("{} {args} 2>&1 >/dev/null", dfck());
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(cwd)
        .env_remove("DFCK_DB")
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_terminal_gets_a_bar_with_eta_and_a_summary_line() {
    let (dir, _) = crate::common::temp_copy(&crate::common::sqlite_fixture("deerflow"));
    let Some(err) = on_a_terminal(dir.path(), "--db deerflow.db verify") else {
        eprintln!("skipped: no `script` to make a pseudo-terminal");
        return;
    };
    assert!(err.contains("verifying threads"), "{err}");
    assert!(err.contains("elapsed, ETA"), "{err}");
    assert!(err.contains("dfck: verifying threads: 2 in "), "{err}");
    let err =
        on_a_terminal(dir.path(), "--db deerflow.db prune --all --branches").unwrap_or_default();
    assert!(err.contains("dfck: planning threads: 2 in "), "{err}");
    // inspect: labelled from its first frame, and no summary line.
    let err = on_a_terminal(dir.path(), "--db deerflow.db inspect").unwrap_or_default();
    assert!(!err.contains(" : "), "a frame without a label: {err:?}");
    assert!(!err.contains("dfck: scanning"), "{err:?}");
}
