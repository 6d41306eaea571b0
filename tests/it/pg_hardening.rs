//! PostgreSQL, third hardening round: a write command against a hot standby (or a read-only
//! session) stops before any work with one line that says so; a thread whose lock another
//! dfck holds is refused naming the holder's command (from `application_name`, which every
//! dfck session sets to `dfck <command>`), never the refused command.

use crate::common::pg::{connect, runtime};
use crate::common::*;
use serde_json::Value as Json;
use std::process::Stdio;
use std::time::{Duration, Instant};

const WRITES: &[&[&str]] = &[
    &["prune", "--all", "--apply"],
    &["prune", "--all", "--older-than", "1s", "--apply"],
    &["migrate", "delta-to-full", "--all", "--apply"],
    &["migrate", "full-to-delta", "--all", "--apply"],
    &["reclaim", "--apply"],
];

#[test]
fn write_commands_refuse_a_hot_standby_up_front() {
    let Some(standby) = require_standby("standby refusal") else {
        return;
    };
    let target = with_db(&standby, "dfck_retention");
    for args in WRITES {
        let out = dfck(&target, args);
        assert_clean_failure(&out, "this server is a read-only standby");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("run write commands against the primary"),
            "{args:?}"
        );
    }
    let out = dfck(
        &sqlite_fixture("delta_k3").to_string_lossy(),
        &[
            "copy",
            "--all",
            "--apply",
            "--replace",
            "--to",
            &with_db(&standby, "dfck_delta_k3"),
        ],
    );
    assert_clean_failure(&out, "read-only standby");
    // Reads and dry runs are what a standby is for.
    for args in [&["inspect"][..], &["verify"], &["prune", "--all"]] {
        let out = dfck(&target, args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn write_commands_refuse_a_read_only_session_up_front() {
    let Some(server) = require_postgres("read-only session refusal") else {
        return;
    };
    let rt = runtime();
    let admin = connect(&rt, &server);
    let name = "dfck_read_only_session";
    for sql in [
        format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        format!("CREATE DATABASE \"{name}\" TEMPLATE \"dfck_retention\""),
        format!("ALTER DATABASE \"{name}\" SET default_transaction_read_only = on"),
    ] {
        rt.block_on(admin.batch_execute(&sql)).unwrap();
    }
    let target = with_db(&server, name);
    for args in WRITES {
        assert_clean_failure(&dfck(&target, args), "this session is read-only");
    }
}

/// dfck A holds a thread's lock (inside its transaction, at the `hold:` failpoint); dfck B's
/// `migrate` of the same thread is refused naming A's command, `prune`.
#[test]
fn a_lock_refusal_names_the_command_holding_the_lock() {
    let Some(server) = require_postgres("lock holder") else {
        return;
    };
    let rt = runtime();
    let admin = connect(&rt, &server);
    let name = "dfck_lock_holder";
    for sql in [
        format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        format!("CREATE DATABASE \"{name}\" TEMPLATE \"dfck_retention\""),
    ] {
        rt.block_on(admin.batch_execute(&sql)).unwrap();
    }
    let target = with_db(&server, name);
    let dir = tempfile::tempdir().unwrap();
    let hold = dir.path().join("hold");
    let mut a = crate::common::dfck_command()
        .args(["--db", &target, "prune", "r-linear-delta", "--apply"])
        .env("DFCK_FAILPOINT", format!("hold:{}", hold.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !hold.exists() {
        assert!(a.try_wait().unwrap().is_none(), "the holder ended early");
        assert!(start.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = dfck(
        &target,
        &[
            "migrate",
            "delta-to-full",
            "r-linear-delta",
            "--apply",
            "--format",
            "json",
        ],
    );
    std::fs::remove_file(&hold).unwrap();
    assert!(a.wait().unwrap().success());
    assert_eq!(out.status.code(), Some(1));
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    let reason = j["threads"][0]["reason"].as_str().unwrap().to_owned();
    assert!(
        reason.starts_with("another dfck prune (server process "),
        "{reason}"
    );
    assert!(!reason.contains("migrate"), "{reason}");
}
