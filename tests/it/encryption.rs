//! Stores encrypted by LangGraph's `EncryptedSerializer` (AES-EAX, `<inner>+aes`): the key
//! from `LANGGRAPH_AES_KEY` or `--aes-key-file`, the refusal without it, the verify findings
//! of a wrong key, a damaged value and plaintext beside ciphertext, and writes that keep each
//! value's protection (`--encrypt-all` to encrypt everything). The states themselves are
//! compared with the real library's in the fixture tests (`aes_*` stems) and read back and
//! continued by the real library in scripts/check_*.py.

use crate::common::*;
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `dfck` without any key in the environment.
fn dfck_no_key(args: &[&str]) -> Output {
    dfck_command()
        .env_remove("LANGGRAPH_AES_KEY")
        .args(args)
        .output()
        .unwrap()
}

/// Rows per (table, serializer type) of a SQLite store.
fn types(db: &Path) -> BTreeMap<(String, String), i64> {
    let c = Connection::open(db).unwrap();
    let mut out = BTreeMap::new();
    for table in ["checkpoints", "writes"] {
        let mut st = c
            .prepare(&format!("SELECT type, COUNT(*) FROM {table} GROUP BY type"))
            .unwrap();
        let rows = st
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .unwrap();
        for r in rows {
            let (t, n) = r.unwrap();
            out.insert((table.to_owned(), t), n);
        }
    }
    out
}

fn codes(report: &serde_json::Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn without_a_key_encrypted_values_are_refused_naming_the_variable() {
    let db = s(&sqlite_fixture("aes_delta"));
    let out = dfck_no_key(&["--db", &db, "inspect", "t-aes-enc", "--state"]);
    let line = assert_clean_failure(&out, "LANGGRAPH_AES_KEY");
    assert!(line.contains("msgpack+aes"), "{line}");
    // verify reports every encrypted value, and nothing for the plaintext thread.
    let out = dfck_no_key(&["--db", &db, "verify", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = report["findings"].as_array().unwrap();
    assert!(findings.iter().any(|f| {
        f["code"] == "value.unsupported_serializer"
            && f["message"].as_str().unwrap().contains("--aes-key-file")
    }));
    assert!(!findings.iter().any(|f| f["thread_id"] == "t-aes-plain"));
    // With the key from the environment (dfck_command's default), the store is clean.
    let report = dfck_json(&db, &["verify", "--format", "json"]);
    assert!(
        !codes(&report)
            .iter()
            .any(|c| c == "value.unsupported_serializer" || c == "value.decrypt_failed"),
        "{report}"
    );
}

#[test]
fn key_file_rules_and_the_key_never_printed() {
    let db = s(&sqlite_fixture("aes_full"));
    let dir = tempfile::tempdir().unwrap();
    // One trailing newline (or CRLF) is not part of the key.
    let crlf = dir.path().join("crlf.key");
    std::fs::write(&crlf, format!("{}\r\n", aes_test_key())).unwrap();
    let out = dfck_no_key(&[
        "--aes-key-file",
        &s(&crlf),
        "--db",
        &db,
        "inspect",
        "t-aes-enc",
        "--state",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A key of another length: exit 2 naming the file and the length, never the bytes.
    let secret = "not-a-valid-length-secret-XYZ";
    let bad = dir.path().join("bad.key");
    std::fs::write(&bad, secret).unwrap();
    let out = dfck_no_key(&["--aes-key-file", &s(&bad), "--db", &db, "inspect"]);
    let line = assert_clean_failure(&out, "must be exactly 16, 24 or 32 bytes");
    assert!(
        line.contains("bad.key") && line.contains("29 bytes"),
        "{line}"
    );
    assert!(!line.contains(secret));
    let out = dfck_command()
        .env("LANGGRAPH_AES_KEY", secret)
        .args(["--db", &db, "inspect"])
        .output()
        .unwrap();
    let line = assert_clean_failure(&out, "LANGGRAPH_AES_KEY");
    assert!(!line.contains(secret), "{line}");
    // A missing file.
    let out = dfck_no_key(&["--aes-key-file", "/nonexistent/key", "--db", &db, "inspect"]);
    assert_clean_failure(&out, "--aes-key-file /nonexistent/key");
    // The file wins over the variable.
    let out = dfck_command()
        .env("LANGGRAPH_AES_KEY", "x".repeat(32))
        .args(["--aes-key-file", &s(&root().join("fixtures/aes.key"))])
        .args(["--db", &db, "inspect", "t-aes-enc", "--state"])
        .output()
        .unwrap();
    assert!(out.status.success());
    // The key appears in no output of a full verify, JSON or table.
    for format in ["json", "table"] {
        let out = dfck_command()
            .args(["--db", &db, "verify", "--format", format])
            .output()
            .unwrap();
        let all = [out.stdout, out.stderr].concat();
        assert!(!String::from_utf8_lossy(&all).contains(&aes_test_key()));
    }
}

#[test]
fn a_wrong_key_and_a_damaged_value_are_decrypt_findings() {
    let (_d, db) = temp_copy(&sqlite_fixture("aes_delta"));
    let before = std::fs::read(&db).unwrap();
    let out = dfck_command()
        .env("LANGGRAPH_AES_KEY", "0123456789abcdef0123456789abcdef")
        .args(["--db", &s(&db), "verify", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(codes(&report).iter().any(|c| c == "value.decrypt_failed"));
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["thread_id"] != "t-aes-plain")
    );
    assert_eq!(std::fs::read(&db).unwrap(), before, "verify is read-only");
    // One write truncated to less than its nonce and tag, one with a flipped byte.
    let c = Connection::open(&db).unwrap();
    let (cid, task, idx): (String, String, i64) = c
        .query_row(
            "SELECT checkpoint_id, task_id, idx FROM writes WHERE thread_id = 't-aes-enc' \
             AND type = 'msgpack+aes' ORDER BY checkpoint_id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    c.execute(
        "UPDATE writes SET value = substr(value, 1, 20) WHERE thread_id = 't-aes-enc' \
         AND checkpoint_id = ?1 AND task_id = ?2 AND idx = ?3",
        rusqlite::params![cid, task, idx],
    )
    .unwrap();
    c.execute(
        "UPDATE checkpoints SET checkpoint = substr(checkpoint, 1, 40) || \
         CAST(X'00' AS BLOB) || substr(checkpoint, 42) WHERE thread_id = 't-aes-pending' \
         AND checkpoint_id = (SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = 't-aes-pending')",
        [],
    )
    .unwrap();
    drop(c);
    let out = dfck(&s(&db), &["verify", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let decrypt: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "value.decrypt_failed")
        .collect();
    assert!(decrypt.iter().any(|f| f["thread_id"] == "t-aes-enc"
        && f["message"].as_str().unwrap().contains("shorter than")));
    assert!(decrypt.iter().any(|f| {
        f["thread_id"] == "t-aes-pending"
            && f["message"]
                .as_str()
                .unwrap()
                .contains("tag does not match")
    }));
    // Elsewhere a damaged value is a one-line error.
    let out = dfck(&s(&db), &["inspect", "t-aes-pending", "--state"]);
    assert_clean_failure(&out, "cannot decrypt");
    // A write command refuses the thread and leaves it as it was.
    let before = types(&db);
    let out = dfck(
        &s(&db),
        &["migrate", "delta-to-full", "t-aes-pending", "--apply"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(types(&db), before);
}

#[test]
fn plaintext_beside_ciphertext_is_a_warning() {
    let db = s(&sqlite_fixture("aes_delta"));
    let report = dfck_json(&db, &["verify", "--format", "json"]);
    let f: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "value.plaintext_in_encrypted_thread")
        .collect();
    // Only the thread whose encryption was switched on later; its plaintext is older.
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["thread_id"], "t-aes-switch");
    assert_eq!(f[0]["severity"], "warning");
    assert!(
        f[0]["message"]
            .as_str()
            .unwrap()
            .contains("before encryption was switched on")
    );
    // A plaintext row written after (the LangGraph #8938 shape): "newer".
    let (_d, copy) = temp_copy(&sqlite_fixture("aes_delta"));
    let c = Connection::open(&copy).unwrap();
    let (cid, plain): (String, Vec<u8>) = c
        .query_row(
            "SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id = 't-aes-enc' \
             ORDER BY checkpoint_id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let plain = opened(Some("msgpack+aes"), &plain);
    c.execute(
        "UPDATE checkpoints SET type = 'msgpack', checkpoint = ?1 WHERE thread_id = 't-aes-enc' \
         AND checkpoint_id = ?2",
        rusqlite::params![plain, cid],
    )
    .unwrap();
    drop(c);
    let report = dfck_json(&s(&copy), &["verify", "--format", "json"]);
    let forged = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["code"] == "value.plaintext_in_encrypted_thread" && f["thread_id"] == "t-aes-enc"
        })
        .expect("the forged plaintext row is reported");
    assert_eq!(forged["checkpoint_id"], cid.as_str());
    assert!(
        forged["message"]
            .as_str()
            .unwrap()
            .contains("1 of them newer")
    );
    // `explain` documents both codes.
    for code in [
        "value.decrypt_failed",
        "value.plaintext_in_encrypted_thread",
    ] {
        dfck_command()
            .args(["explain", code])
            .assert()
            .code(0)
            .stdout_contains("What to do");
    }
}

#[test]
fn rewrites_keep_each_values_protection_and_encrypt_all_encrypts() {
    let (_d, db) = temp_copy(&sqlite_fixture("aes_delta"));
    let before = types(&db);
    dfck_command()
        .args([
            "--db",
            &s(&db),
            "migrate",
            "delta-to-full",
            "--all",
            "--apply",
        ])
        .assert()
        .code(0);
    // Same row counts per type: encrypted rewrites stay encrypted, plaintext stays plain.
    assert_eq!(types(&db), before);
    let c = Connection::open(&db).unwrap();
    let (plain_switch, enc_switch): (i64, i64) = c
        .query_row(
            "SELECT SUM(type = 'msgpack'), SUM(type = 'msgpack+aes') FROM checkpoints \
             WHERE thread_id = 't-aes-switch'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(plain_switch > 0 && enc_switch > 0);
    drop(c);
    // --encrypt-all: the rewritten plaintext checkpoints are encrypted too.
    let (_d2, db2) = temp_copy(&sqlite_fixture("aes_full"));
    dfck_command()
        .args([
            "--db",
            &s(&db2),
            "migrate",
            "full-to-delta",
            "--all",
            "--encrypt-all",
        ])
        .args(["--apply"])
        .assert()
        .code(0);
    let after = types(&db2);
    assert_eq!(
        after.get(&("checkpoints".into(), "msgpack".into())),
        None,
        "{after:?}"
    );
    // A copy under --encrypt-all holds no plaintext value at all; without the key it is refused.
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("all.db");
    dfck_command()
        .args(["--db", &s(&sqlite_fixture("aes_delta")), "copy", "--all"])
        .args(["--to", &s(&to), "--encrypt-all", "--apply"])
        .assert()
        .code(0);
    let t = types(&to);
    assert!(t.keys().all(|(_, ty)| ty.ends_with("+aes")), "{t:?}");
    let out = dfck_no_key(&[
        "--db",
        &s(&sqlite_fixture("aes_delta")),
        "copy",
        "--all",
        "--to",
        &s(&dir.path().join("x.db")),
        "--encrypt-all",
    ]);
    assert_clean_failure(&out, "--encrypt-all needs the AES key");
}

#[test]
fn postgres_keeps_metadata_and_inline_values_plaintext() {
    let Some(uri) = require_postgres("encrypted copy to PostgreSQL") else {
        return;
    };
    let name = "dfck_it_aes_copy";
    let rt = crate::common::pg::runtime();
    let admin = crate::common::pg::connect(&rt, &uri);
    for sql in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        rt.block_on(admin.batch_execute(&sql)).unwrap();
    }
    let target = with_db(&uri, name);
    dfck_command()
        .args(["--db", &s(&sqlite_fixture("aes_delta")), "copy", "--all"])
        .args(["--to", &target, "--checkpoints-only", "--apply"])
        .assert()
        .code(0);
    let c = crate::common::pg::connect(&rt, &target);
    let q = |sql: &str| -> i64 { rt.block_on(c.query_one(sql, &[])).unwrap().get(0) };
    // Every blob and write of the wholly encrypted thread is encrypted…
    assert_eq!(
        q(
            "SELECT COUNT(*) FROM checkpoint_blobs WHERE thread_id = 't-aes-enc' \
           AND type NOT LIKE '%+aes' AND type <> 'empty'"
        ),
        0
    );
    assert!(
        q(
            "SELECT COUNT(*) FROM checkpoint_writes WHERE thread_id = 't-aes-enc' AND type LIKE '%+aes'"
        ) > 0
    );
    // …the plaintext thread's are not, and metadata stays readable JSONB.
    assert_eq!(
        q(
            "SELECT COUNT(*) FROM checkpoint_blobs WHERE thread_id = 't-aes-plain' AND type LIKE '%+aes'"
        ),
        0
    );
    assert!(
        q("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 't-aes-enc' AND metadata ? 'step'")
            > 0
    );
    drop(c);
    rt.block_on(admin.batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)")))
        .unwrap();
}

#[test]
fn prune_rewrites_new_roots_encrypted_and_refuses_an_unknown_age() {
    // History trimming of delta threads rewrites each new root with its whole list: encrypted
    // roots stay encrypted (the row counts per type can only go down).
    let (_d, db) = temp_copy(&sqlite_fixture("aes_delta"));
    let before = types(&db);
    dfck_command()
        .args(["--db", &s(&db), "prune", "--all", "--keep-last-turns", "1"])
        .args(["--branches", "--apply"])
        .assert()
        .code(0);
    let after = types(&db);
    for (k, n) in &after {
        assert!(
            before.get(k).is_some_and(|b| n <= b),
            "{k:?}: {after:?} vs {before:?}"
        );
    }
    let out = dfck_no_key(&["--db", &s(&db), "inspect", "t-aes-enc", "--state"]);
    assert_clean_failure(&out, "LANGGRAPH_AES_KEY");
    // Without the key the age of an encrypted SQLite thread is unknown: refused, not kept.
    let (_d2, db2) = temp_copy(&sqlite_fixture("aes_delta"));
    let before = types(&db2);
    let out = dfck_no_key(&[
        "--db",
        &s(&db2),
        "prune",
        "--all",
        "--older-than",
        "1s",
        "--apply",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let enc = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == "t-aes-enc")
        .unwrap();
    assert_eq!(enc["status"], "refused");
    assert!(
        enc["reason"]
            .as_str()
            .unwrap()
            .contains("LANGGRAPH_AES_KEY")
    );
    let after = types(&db2);
    assert_eq!(
        after.get(&("checkpoints".into(), "msgpack+aes".into())),
        before.get(&("checkpoints".into(), "msgpack+aes".into()))
    );
}

#[test]
fn channel_bytes_of_encrypted_checkpoints_count_by_their_plaintext() {
    let db = s(&sqlite_fixture("aes_delta"));
    let with_key = dfck_command()
        .args(["--db", &db, "inspect", "--channels"])
        .output()
        .unwrap();
    assert!(with_key.status.success());
    assert!(!String::from_utf8_lossy(&with_key.stdout).contains("(undecoded)"));
    let without = dfck_no_key(&["--db", &db, "inspect", "--channels"]);
    assert!(without.status.success());
    assert!(String::from_utf8_lossy(&without.stdout).contains("(undecoded)"));
}
