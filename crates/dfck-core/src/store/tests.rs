//! Unit tests of the store layer's shared types.

use super::*;

#[test]
fn a_postgres_row_counts_the_blobs_read_with_it_against_a_budget() {
    let row = |body| CheckpointRow {
        thread_id: "t".into(),
        checkpoint_ns: String::new(),
        checkpoint_id: "c".into(),
        parent_checkpoint_id: None,
        body,
        metadata: b"{}".to_vec(),
        bytes: 40,
    };
    let blob = |n: usize| BlobRow {
        channel: "messages".into(),
        type_tag: "msgpack".into(),
        blob: Some(vec![0x90; n]),
        complete: true,
    };
    let pg = row(CheckpointBody::Postgres {
        checkpoint: serde_json::json!({}),
        blobs: vec![blob(1_000_000), blob(24)],
    });
    assert_eq!(pg.read_bytes(), 40 + 1_000_024);
    let sqlite = row(CheckpointBody::Serialized {
        type_tag: Some("msgpack".into()),
        bytes: vec![0x80; 40],
    });
    assert_eq!(sqlite.read_bytes(), 40);
}

#[test]
fn a_runs_table_another_connection_makes_is_asked_for_the_next_thread() {
    use crate::store::sqlite::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sqlite/delta_k3.db"),
        &db,
    )
    .unwrap();
    let store = SqliteStore::open_read_write(&db).unwrap();
    // No `runs` table: no thread has an active run (and the answer is kept).
    assert!(!store.active_run("t-linear").unwrap());
    assert!(!store.active_run("t-linear").unwrap());
    let deerflow = rusqlite::Connection::open(&db).unwrap();
    deerflow
        .execute_batch(
            "CREATE TABLE runs (run_id TEXT, thread_id TEXT, status TEXT); \
             INSERT INTO runs VALUES ('r1', 't-linear', 'running')",
        )
        .unwrap();
    // The schema changed: the kept answer is not used.
    assert!(store.active_run("t-linear").unwrap());
    assert!(!store.active_run("t-other").unwrap());
    deerflow.execute_batch("DROP TABLE runs").unwrap();
    assert!(!store.active_run("t-linear").unwrap());
}
