//! Opening a SQLite store in a bad state says what the state is (a hot journal, a full disk),
//! in one line with exit 2, never "not a LangGraph store".

use crate::common::{assert_clean_failure, dfck, sqlite_fixture, temp_copy};
use std::process::Command;

#[test]
fn a_hot_journal_is_named_not_called_a_foreign_file() {
    let (_dir, db) = temp_copy(&sqlite_fixture("full"));
    // A writer that dies mid-transaction in rollback-journal mode leaves a hot journal.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
        conn.pragma_update(None, "cache_size", 1).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE; UPDATE writes SET channel = 'x'; UPDATE checkpoints SET checkpoint_ns = 'y';")
            .unwrap();
        let journal = db.with_file_name("full.db-journal");
        assert!(
            journal.exists(),
            "the journal exists while the transaction is open"
        );
        // Keep the journal as a crash would: copy the files while the transaction is open.
        let crashed = db.with_file_name("crashed.db");
        std::fs::copy(&db, &crashed).unwrap();
        std::fs::copy(&journal, db.with_file_name("crashed.db-journal")).unwrap();
        drop(conn);
    }
    let crashed = db.with_file_name("crashed.db");
    let before = std::fs::read(&crashed).unwrap();
    let out = dfck(crashed.to_str().unwrap(), &["inspect"]);
    let line = assert_clean_failure(&out, "hot journal");
    assert!(!line.contains("not a LangGraph"), "{line}");
    assert_eq!(
        before,
        std::fs::read(&crashed).unwrap(),
        "dfck rolled it back itself"
    );
}

#[test]
fn a_full_disk_at_open_is_named() {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !is_root {
        eprintln!("full-disk open test skipped: needs root to mount a small tmpfs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=600k", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("full-disk open test skipped: cannot mount a tmpfs here");
        return;
    }
    let result = std::panic::catch_unwind(|| {
        let db = mnt.join("delta_k3.db");
        std::fs::copy(sqlite_fixture("delta_k3"), &db).unwrap();
        // Fill the filesystem.
        let mut fill = std::fs::File::create(mnt.join("fill")).unwrap();
        let block = vec![0u8; 4096];
        while std::io::Write::write_all(&mut fill, &block).is_ok() {}
        drop(fill);
        let out = dfck(db.to_str().unwrap(), &["inspect"]);
        let line = assert_clean_failure(&out, "disk is full");
        assert!(!line.contains("not a LangGraph"), "{line}");
    });
    let _ = Command::new("umount").arg(&mnt).status();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// `host=… port=… user=… password=… dbname=…` from a `postgresql://user:pw@host:port/db` URI.
fn keyword_dsn(uri: &str, db: &str, password: &str) -> String {
    let rest = uri.split_once("://").unwrap().1;
    let (auth, hostpart) = rest.split_once('@').unwrap();
    let user = auth.split(':').next().unwrap();
    let hostport = hostpart.split(['/', '?']).next().unwrap();
    let (host, port) = hostport.split_once(':').unwrap_or((hostport, "5432"));
    format!("host={host} port={port} user={user} password='{password}' dbname={db} sslmode=disable")
}

#[test]
fn a_keyword_dsn_in_dfck_db_is_postgres_and_its_password_never_shows() {
    let Some(uri) = crate::common::require_postgres("keyword DSN test") else {
        return;
    };
    let real_pw = uri
        .split_once("://")
        .and_then(|(_, r)| r.split_once('@'))
        .and_then(|(a, _)| a.split_once(':'))
        .map(|(_, p)| p.to_owned())
        .expect("the test server's URI has a password");
    let run = |dsn: &str| {
        crate::common::dfck_command()
            .args(["inspect", "--format", "json"])
            .env("DFCK_DB", dsn)
            .output()
            .expect("run dfck")
    };
    let good = run(&keyword_dsn(&uri, "dfck_delta_k3", &real_pw));
    assert_eq!(
        good.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&good.stdout).unwrap();
    assert_eq!(j["backend"], "postgres");
    let bad = run(&keyword_dsn(&uri, "dfck_delta_k3", "wrong pw 'x"));
    let line = assert_clean_failure(&bad, "password");
    assert!(!line.contains("wrong pw"), "{line}");
    assert!(!line.contains(&real_pw), "{line}");
}
