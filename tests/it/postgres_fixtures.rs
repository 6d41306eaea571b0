//! The same fixture comparison as the SQLite suite, through a real PostgreSQL server: the
//! stores in fixtures/postgres/*.sql were written by the real `PostgresSaver`, and
//! fixtures/expected-pg/*.json hold what its `get_state` returned. Plus the failures an
//! operator meets first: wrong password, unreachable server, not a LangGraph database,
//! unknown schema version, the shallow saver's layout.
//!
//! Needs `TEST_POSTGRES_URI` (see scripts/pg-test-server.sh); without it each test prints
//! "<what> skipped: TEST_POSTGRES_URI unset" and passes, unless `DFCK_REQUIRE_POSTGRES` is set
//! (scripts/test-all.sh, CI), which makes that a failure.

use crate::common::*;

#[test]
fn every_postgres_fixture_checkpoint_matches_langgraph() {
    let Some(uri) = require_postgres("postgres fixture comparison with LangGraph") else {
        return;
    };
    let stems = stems_in("expected-pg");
    assert!(stems.len() >= 6, "postgres fixtures missing: {stems:?}");
    let targets = stems
        .iter()
        .map(|s| {
            (
                s.clone(),
                with_db(&uri, &format!("dfck_{s}")),
                expected_in("expected-pg", s),
            )
        })
        .collect();
    let total = compare::check_all("postgres", targets);
    assert!(
        total.states > 400,
        "too few checkpoints compared: {}",
        total.states
    );
}

#[test]
fn postgres_summary_counts_blobs_and_reads_schema_version() {
    let Some(uri) = require_postgres("postgres store summary") else {
        return;
    };
    let j = dfck_json(
        &with_db(&uri, "dfck_delta_k3"),
        &["inspect", "--format", "json"],
    );
    assert_eq!(j["backend"], "postgres");
    assert!(
        j["schema"].as_str().unwrap().contains("v9"),
        "{}",
        j["schema"]
    );
    assert!(j["counts"]["blobs"].as_u64().unwrap() > 0);
    assert!(!j["location"].as_str().unwrap().contains("dfck-test-pw"));
    // The password never shows in table output either.
    let out = dfck(&with_db(&uri, "dfck_delta_k3"), &["inspect"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("dfck-test-pw"), "{text}");
    assert!(
        text.contains(":***@") && text.contains("/dfck_delta_k3 (postgres)"),
        "the store line names the masked URL: {text}"
    );
    assert!(text.contains("threads: 8 "), "{text}");
}

#[test]
fn postgres_failures_are_one_line_without_the_password() {
    let Some(uri) = require_postgres("postgres connection failures") else {
        return;
    };
    let check = |target: &str, needle: &str| {
        let line = assert_clean_failure(&dfck(target, &["inspect"]), needle);
        assert!(!line.contains("dfck-test-pw"), "password leaked: {line}");
        assert!(!line.contains("wrong-pw-123"), "password leaked: {line}");
    };
    let wrong = with_db(&uri, "dfck_full").replace("dfck-test-pw", "wrong-pw-123");
    check(&wrong, "password authentication failed");
    // Unreachable: nothing listens on port 1.
    check(
        "postgresql://dfck:dfck-test-pw@127.0.0.1:1/dfck_full?connect_timeout=3",
        "cannot open",
    );
    check(&with_db(&uri, "dfck_no_such_db"), "does not exist");
    check(
        &with_db(&uri, "dfck_notlg"),
        "not a LangGraph checkpoint store",
    );
    check(&with_db(&uri, "dfck_future"), "unknown schema version");
    check(&with_db(&uri, "dfck_shallow"), "ShallowPostgresSaver");
    let out = dfck(
        &with_db(&uri, "dfck_full"),
        &["--pg-schema", "nope", "inspect"],
    );
    assert_clean_failure(&out, "schema 'nope' does not exist");
}

#[test]
fn postgres_unknown_thread_and_checkpoint() {
    let Some(uri) = require_postgres("postgres unknown thread/checkpoint") else {
        return;
    };
    let db = with_db(&uri, "dfck_full");
    assert_clean_failure(
        &dfck(&db, &["inspect", "nope", "--state"]),
        "thread 'nope' not found",
    );
    assert_clean_failure(
        &dfck(
            &db,
            &[
                "inspect",
                "t-linear",
                "--state",
                "--checkpoint",
                "1f000000-0000-6000-8000-000000000000",
            ],
        ),
        "not found",
    );
}

#[test]
fn postgres_over_tls() {
    let Some(uri) = require_postgres("postgres over TLS") else {
        return;
    };
    // Role dfck_tls may only connect over TLS (hostssl in the test server's pg_hba.conf).
    let tls = with_db(&uri, "dfck_delta_k3").replacen("://dfck:", "://dfck_tls:", 1);
    let sep = if tls.contains('?') { '&' } else { '?' };
    let required = format!("{tls}{sep}sslmode=require");
    let j = dfck_json(&required, &["inspect", "--format", "json"]);
    assert_eq!(j["counts"]["threads"], 8);
    // The default (prefer) also negotiates TLS.
    let j = dfck_json(
        &tls,
        &["inspect", "t-linear", "--state", "--format", "json"],
    );
    assert!(!j["values"]["messages"].as_array().unwrap().is_empty());
    // Without TLS the server refuses, in one line, without the password.
    let line = assert_clean_failure(
        &dfck(&format!("{tls}{sep}sslmode=disable"), &["inspect"]),
        "no encryption",
    );
    assert!(!line.contains("dfck-test-pw"), "{line}");
}
