//! Usage errors end in exactly one stderr line and exit 2; help and version still print in full.

use std::process::Command;

fn dfck(args: &[&str]) -> std::process::Output {
    crate::common::dfck_command()
        .args(args)
        .env_remove("DFCK_DB")
        .output()
        .expect("run dfck")
}

#[test]
fn every_usage_error_is_one_line_and_exit_2() {
    let cases: &[&[&str]] = &[
        &[],
        &["inspect", "--bogus"],
        &["inspect", "--format", "xml"],
        &["verify", "--jobs"],
        &["verify", "--jobs", "zero"],
        &["migrate"],
        &["migrate", "delta-to-full", "--backup"],
        &["bench"],
        &["nosuchcommand"],
    ];
    for args in cases {
        let o = dfck(args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr:?}");
        assert!(stderr.starts_with("dfck: error: "), "{args:?}: {stderr:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn help_and_version_print_in_full_and_succeed() {
    let o = dfck(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.lines().count() > 5, "{help}");
    assert!(help.contains("inspect"));
    let o = dfck(&["--version"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("dfck "));
}

#[test]
fn a_closed_stdout_is_an_error_not_a_silent_success() {
    let db = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/sqlite/deerflow.db");
    for format in ["table", "json"] {
        let o = Command::new("sh")
            .args(["-c", r#"exec "$0" "$@" >&-"#, env!("CARGO_BIN_EXE_dfck")])
            .args(["--db", db, "inspect", "--format", format])
            .output()
            .expect("run dfck");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{format}: {stderr}");
        assert!(stderr.contains("standard output is closed"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    // Output sent to /dev/null on purpose still succeeds.
    let o = Command::new("sh")
        .args([
            "-c",
            r#"exec "$0" "$@" >/dev/null"#,
            env!("CARGO_BIN_EXE_dfck"),
        ])
        .args(["--db", db, "inspect"])
        .output()
        .expect("run dfck");
    assert_eq!(o.status.code(), Some(0));
}

/// A `/dev/null` the parent opened on purpose is an ordinary stdout, whatever its access
/// mode: `verify` keeps its exit code (0 clean, 1 findings) for scripts that discard the
/// output and read the code. Only a stdout closed at exec is an error.
#[test]
fn output_discarded_to_dev_null_keeps_the_exit_code_in_every_spawn_form() {
    let root = env!("CARGO_MANIFEST_DIR");
    let clean = format!("{root}/fixtures/sqlite/deerflow.db");
    let findings = format!("{root}/fixtures/defects/cycle.db");
    let bin = env!("CARGO_BIN_EXE_dfck");
    for (db, want) in [(&clean, 0), (&findings, 1)] {
        for format in ["table", "json"] {
            let args = ["--db", db.as_str(), "verify", "--format", format];
            // Python's subprocess.DEVNULL and systemd's StandardOutput=null: /dev/null
            // opened read-write, or write-only, by the parent.
            for write_only in [false, true] {
                let null = std::fs::OpenOptions::new()
                    .read(!write_only)
                    .write(true)
                    .open("/dev/null")
                    .unwrap();
                let o = Command::new(bin).args(args).stdout(null).output().unwrap();
                assert_eq!(
                    o.status.code(),
                    Some(want),
                    "{db} {format} write_only={write_only}"
                );
            }
            // A shell's `>/dev/null`.
            let o = Command::new("sh")
                .args(["-c", r#"exec "$0" "$@" >/dev/null"#, bin])
                .args(args)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(want), "{db} {format} >/dev/null");
            // `>&-`: closed at exec.
            let o = Command::new("sh")
                .args(["-c", r#"exec "$0" "$@" >&-"#, bin])
                .args(args)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(2), "{db} {format} >&-");
        }
    }
    if let Some(python) = crate::common::require_python("Python DEVNULL spawn form") {
        let o = Command::new(python)
            .args([
                "-c",
                "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode)",
                bin,
                "--db",
                &findings,
                "verify",
            ])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn verify_and_lineage_take_no_reducer_flag_they_would_ignore() {
    // Their checks are structural: a --reducer there would be accepted and do nothing.
    for args in [
        &["verify", "--reducer", "deerflow"][..],
        &["lineage", "t", "--reducer", "langgraph"][..],
    ] {
        let o = dfck(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("--reducer"));
    }
}
