//! `write_sums_between` against the reads it stands in for.

use crate::store::batch::WriteSums;
use crate::store::sqlite::SqliteStore;
use crate::store::{CheckpointKey, Store};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A copy of `fixture` (and its WAL) in `dir`.
fn copy_of(fixture: &Path, dir: &Path) -> PathBuf {
    let copy = dir.join(fixture.file_name().unwrap());
    std::fs::copy(fixture, &copy).unwrap();
    if fixture.with_extension("db-wal").exists() {
        std::fs::copy(
            fixture.with_extension("db-wal"),
            copy.with_extension("db-wal"),
        )
        .unwrap();
    }
    copy
}

fn sums_of(store: &SqliteStore, first: &str, last: &str) -> Vec<WriteSums> {
    let mut out = Vec::new();
    let read = store
        .write_sums_between(first, last, &mut |s| {
            out.push(s);
            Ok(())
        })
        .unwrap();
    assert!(read);
    out
}

/// Every thread's totals and every keyed checkpoint's bytes agree with
/// `write_totals_of` and `write_bytes_at`; returns how many sums were checked.
fn agrees(store: &SqliteStore) -> usize {
    let mut ids = Vec::new();
    store
        .scan_thread_ids(&mut |t| {
            ids.push(t);
            Ok(())
        })
        .unwrap();
    let (Some(first), Some(last)) = (ids.iter().min(), ids.iter().max()) else {
        return 0;
    };
    let sums = sums_of(store, first, last);
    let mut totals: HashMap<String, (u64, u64)> = HashMap::new();
    for s in &sums {
        let t = totals.entry(s.key.thread_id.clone()).or_default();
        t.0 += s.writes;
        t.1 += s.bytes;
    }
    let mut expected = HashMap::new();
    store
        .write_totals_of(&ids, &mut |t| {
            expected.insert(t.thread_id, (t.writes, t.bytes));
            Ok(())
        })
        .unwrap();
    totals.retain(|t, _| ids.contains(t));
    assert_eq!(totals, expected);
    let keyed: Vec<&WriteSums> = sums.iter().filter(|s| s.keyed).collect();
    let keys: Vec<CheckpointKey> = keyed.iter().map(|s| s.key.clone()).collect();
    let bytes = store.write_bytes_at(&keys).unwrap();
    for (s, b) in keyed.iter().zip(bytes) {
        assert_eq!(s.read_bytes, b, "{:?}", s.key);
    }
    sums.len()
}

#[test]
fn write_sums_agree_with_the_totals_and_point_reads_on_every_sqlite_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for sub in ["sqlite", "defects", "tampered"] {
        for entry in std::fs::read_dir(root.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "db") {
                continue;
            }
            let Ok(store) = SqliteStore::open_read_only(&copy_of(&path, dir.path())) else {
                continue;
            };
            checked += agrees(&store);
        }
    }
    assert!(checked > 100, "{checked} sums checked");
}

#[test]
fn write_sums_keep_values_that_only_read_alike_apart() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sqlite");
    let copy = copy_of(&root.join("retention.db"), dir.path());
    {
        let conn = rusqlite::Connection::open(&copy).unwrap();
        conn.execute_batch(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value) VALUES
               ('zz', x'6e73', 'c1', 't', 0, 'a', 'msgpack', x'0102'),
               ('zz', 'ns', 'c1', 't', 0, 'a', 'msgpack', x'010203'),
               ('zz', 'ns', 'c1', 't', 'x', 'a', 'msgpack', 'text'),
               ('zz', 'ns', 'c1', 't', 1, 'a', 'msgpack', NULL),
               ('zz', 'ns', 'c1', 't', 2, 'a', 'msgpack', 42),
               ('zz', 'ns', 'c1', 't', 3, 'a', 'msgpack', 'é'),
               ('zz', x'ff', 'c1', 't', 0, 'a', 'msgpack', x'01'),
               (x'7a7a', 'ns', 'c1', 't', 0, 'a', 'msgpack', x'01'),
               ('zz-no-checkpoints', '', 'c1', 't', 0, 'a', 'msgpack', x'01');
             INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, metadata)
               SELECT 'zz', '', 'c0', type, checkpoint, metadata FROM checkpoints LIMIT 1;",
        )
        .unwrap();
    }
    let store = SqliteStore::open_read_only(&copy).unwrap();
    let sums = sums_of(&store, "zz", "zz");
    // The blob namespace and the text one are two checkpoints; the blob is not keyed.
    let at: Vec<(&str, bool, u64, u64, u64)> = sums
        .iter()
        .map(|s| {
            let k = &s.key;
            (
                k.checkpoint_ns.as_str(),
                s.keyed,
                s.writes,
                s.bytes,
                s.read_bytes,
            )
        })
        .collect();
    let undecodable = super::UNDECODABLE.len() as u64;
    assert_eq!(
        at,
        [
            // bytes: 3 + 4 + 0 (NULL) + 2 ("42") + 1 ("é", one character); read: 3, an idx that
            // is no number, NULL, a number, "é" in two bytes
            ("ns", true, 5, 10, 3 + undecodable + undecodable + 2),
            ("ns", false, 1, 2, 2),
            ("\u{FFFD}", false, 1, 1, 1),
        ]
    );
    assert!(agrees(&store) > 3);
}
