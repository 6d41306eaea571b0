//! Addressing as people type: unique checkpoint id prefixes, ambiguous prefixes listed, and
//! "did you mean" for unknown threads, on SQLite and PostgreSQL.

use crate::common::{
    assert_clean_failure, dfck, dfck_json, require_postgres, sqlite_fixture, with_db,
};

/// Checks prefix addressing on one target holding the `deerflow` fixture.
fn check(target: &str) {
    let listing = dfck_json(target, &["inspect", "t-deerflow", "--format", "json"]);
    let ids: Vec<String> = listing["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkpoint_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(ids.len() > 5);
    // The shortest prefix that names one checkpoint alone.
    let id = &ids[2];
    let unique = (1..id.len())
        .map(|n| &id[..n])
        .find(|p| ids.iter().filter(|i| i.starts_with(p)).count() == 1)
        .unwrap();
    let full = dfck_json(
        target,
        &[
            "inspect",
            "t-deerflow",
            "--state",
            "--checkpoint",
            id,
            "--format",
            "json",
        ],
    );
    let by_prefix = dfck_json(
        target,
        &[
            "inspect",
            "t-deerflow",
            "--state",
            "--checkpoint",
            unique,
            "--format",
            "json",
        ],
    );
    assert_eq!(full, by_prefix);
    assert_eq!(by_prefix["checkpoint_id"], id.as_str());
    let chain = dfck_json(
        target,
        &[
            "lineage",
            "t-deerflow",
            "--checkpoint",
            unique,
            "--format",
            "json",
        ],
    );
    assert!(chain.to_string().contains(id.as_str()));
    // A prefix shared by several: exit 2, one line listing them.
    let shared = &id[..unique.len() - 1];
    let out = dfck(
        target,
        &["inspect", "t-deerflow", "--state", "--checkpoint", shared],
    );
    let line = assert_clean_failure(&out, "is ambiguous");
    let listed = ids.iter().filter(|i| line.contains(i.as_str())).count();
    assert!(listed >= 2, "{line}");
    assert_clean_failure(
        &dfck(
            target,
            &["inspect", "t-deerflow", "--state", "--checkpoint", "zz"],
        ),
        "checkpoint 'zz' not found",
    );
    // A mistyped thread: the nearest ids.
    for args in [
        &["inspect", "t-deerflw"][..],
        &["inspect", "t-deerflw", "--state"],
        &["lineage", "t-deerflw"],
        &["verify", "t-deerflw"],
    ] {
        assert_clean_failure(&dfck(target, args), "did you mean t-deerflow");
    }
}

#[test]
fn sqlite_prefixes_and_suggestions() {
    check(sqlite_fixture("deerflow").to_str().unwrap());
}

#[test]
fn postgres_prefixes_and_suggestions() {
    let Some(uri) = require_postgres("addressing on postgres") else {
        return;
    };
    check(&with_db(&uri, "dfck_deerflow"));
}
