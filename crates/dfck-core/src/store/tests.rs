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
