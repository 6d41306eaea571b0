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

/// Every `.db` of `dir` (a committed fixture folder), copied with its WAL into `to`.
fn fixture_copies(dir: &str, to: &std::path::Path) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(dir);
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|e| e != "db") {
            continue;
        }
        let copy = to.join(path.file_name().unwrap());
        std::fs::copy(&path, &copy).unwrap();
        let wal = path.with_extension("db-wal");
        if wal.exists() {
            std::fs::copy(&wal, copy.with_extension("db-wal")).unwrap();
        }
        out.push(copy);
    }
    out.sort();
    out
}

/// The write bytes and thread totals the summary's scan gives each row it reads whole, and
/// the store's write totals where it counted them: each must be what the point reads (and
/// [`Store::write_totals`]) give. (Whether it read any row whole, whether it counted the
/// store's write totals.)
fn scan_agrees_with_point_reads(store: &dyn Store) -> (bool, bool) {
    let mut rows = Vec::new();
    let scan = store
        .scan_checkpoints_whole(u64::MAX, &mut |meta, row| {
            rows.push((meta.keys_of(row.as_ref()).0.to_owned(), row));
            Ok(())
        })
        .unwrap();
    let counted = match scan {
        WholeScan::Read {
            write_totals: Some(totals),
        } => {
            assert_eq!(totals, store.write_totals().unwrap(), "the store's writes");
            true
        }
        _ => false,
    };
    let mut any = false;
    let mut asked = std::collections::HashSet::new();
    for (thread, row) in rows {
        let Some(row) = row else { continue };
        any = true;
        let key = CheckpointKey {
            thread_id: row.row.thread_id.clone(),
            checkpoint_ns: row.row.checkpoint_ns.clone(),
            checkpoint_id: row.row.checkpoint_id.clone(),
        };
        let point = store.write_bytes_at(std::slice::from_ref(&key)).unwrap();
        assert_eq!(vec![row.write_bytes], point, "{key:?}");
        if let Some(totals) = row.thread_writes {
            assert!(asked.insert(thread.clone()), "{thread}: totals given twice");
            let mut queried = (0, 0);
            store
                .write_totals_of(std::slice::from_ref(&thread), &mut |t| {
                    queried = (t.writes, t.bytes);
                    Ok(())
                })
                .unwrap();
            assert_eq!(totals, queried, "{thread}");
        }
    }
    (any, counted)
}

#[test]
fn the_sqlite_summary_scan_reads_the_write_bytes_the_point_reads_read() {
    use crate::store::sqlite::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let (mut read, mut counted) = (0, 0);
    for (i, folder) in ["sqlite", "defects", "tampered"].iter().enumerate() {
        let to = dir.path().join(i.to_string());
        std::fs::create_dir(&to).unwrap();
        for path in fixture_copies(folder, &to) {
            if let Ok(store) = SqliteStore::open_read_only(&path) {
                let (any, totals) = scan_agrees_with_point_reads(&store);
                read += usize::from(any);
                counted += usize::from(totals);
            }
        }
    }
    assert!(read > 20, "{read} fixtures read");
    assert!(
        counted > 20,
        "{counted} fixtures' write totals counted by the scan"
    );
}

/// A store with keys and values of every storage class, and writes of threads, namespaces
/// and checkpoints that have no checkpoint row; `pragma` run first, `thread_type`: how
/// `writes.thread_id` is declared (LangGraph: `TEXT`).
fn odd_store(path: &std::path::Path, pragma: &str, thread_type: &str) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(&format!(
        "{pragma} CREATE TABLE checkpoints (thread_id TEXT NOT NULL, \
         checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id TEXT NOT NULL, \
         parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB, \
         PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)); \
         CREATE TABLE writes (thread_id {thread_type} NOT NULL, \
         checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id TEXT NOT NULL, \
         task_id TEXT NOT NULL, task_path TEXT NOT NULL DEFAULT '', idx INTEGER NOT NULL, \
         channel TEXT NOT NULL, type TEXT, value BLOB, \
         PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx));"
    ))
    .unwrap();
    let cp = "INSERT INTO checkpoints VALUES (?1, ?2, ?3, NULL, 'msgpack', x'80', '{}')";
    for (t, ns, id) in [
        ("42", "", "1"),
        ("a", "", "1"),
        ("a", "", "2"),
        ("a", "sub", "1"),
        ("B", "", "1"),
        ("c", "", "1"),
        ("é", "", "1"),
        ("ā", "", "1"),
    ] {
        c.execute(cp, rusqlite::params![t, ns, id]).unwrap();
    }
    for odd in ["x'61'", "CAST(x'ff61' AS TEXT)"] {
        c.execute(
            &format!(
                "INSERT INTO checkpoints VALUES ({odd}, '', '3', NULL, 'msgpack', x'80', '{{}}')"
            ),
            [],
        )
        .unwrap();
    }
    let w = "INSERT INTO writes VALUES (?1, ?2, ?3, ?4, '', ?5, 'messages', 'msgpack', ?6)";
    let blob = |n: usize| rusqlite::types::Value::Blob(vec![0x90; n]);
    let text = |s: &str| rusqlite::types::Value::Text(s.into());
    let int = rusqlite::types::Value::Integer;
    for (t, ns, id, task, idx, value) in [
        ("0", "", "1", "k", int(0), blob(3)),
        ("42", "", "1", "k", int(0), blob(41)),
        ("a", "", "1", "k", int(0), blob(5)),
        ("a", "", "1", "k", int(1), text("héllo")),
        ("a", "", "1", "m", text("2"), rusqlite::types::Value::Null),
        ("a", "", "1", "n", text("x"), blob(7)),
        ("a", "", "1", "o", int(0), rusqlite::types::Value::Real(1.5)),
        ("a", "", "0", "k", int(0), blob(11)),
        ("a", "", "9", "k", int(0), blob(13)),
        ("a", "other", "1", "k", int(0), blob(17)),
        ("a", "sub", "1", "k", int(0), blob(19)),
        ("B", "", "1", "k", int(0), blob(23)),
        ("b", "", "1", "k2", int(0), blob(29)),
        ("é", "", "1", "k", int(0), blob(31)),
        ("ā", "", "1", "k", int(0), blob(43)),
        ("zz", "", "1", "k", int(0), blob(37)),
        // After the last thread with checkpoints, in the writes' order.
        ("～", "", "1", "k", int(0), blob(47)),
        ("～", "", "2", "k", int(0), blob(53)),
    ] {
        c.execute(w, rusqlite::params![t, ns, id, task, idx, value])
            .unwrap();
    }
    c.execute(
        "INSERT INTO writes VALUES (x'61', '', '1', 'k', '', 0, 'messages', 'msgpack', x'00')",
        [],
    )
    .unwrap();
}

/// Each row of the summary's scan: its thread, and (write bytes, thread totals) when read whole.
#[allow(clippy::type_complexity)]
fn scanned(store: &dyn Store) -> Vec<(String, Option<(u64, Option<(u64, u64)>)>)> {
    let mut out = Vec::new();
    store
        .scan_checkpoints_whole(u64::MAX, &mut |meta, row| {
            out.push((
                meta.keys_of(row.as_ref()).0.to_owned(),
                row.map(|r| (r.write_bytes, r.thread_writes)),
            ));
            Ok(())
        })
        .unwrap();
    out
}

#[test]
fn the_sqlite_summary_scan_merges_writes_of_every_storage_class() {
    use crate::store::sqlite::SqliteStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd.db");
    odd_store(&path, "", "TEXT");
    let store = SqliteStore::open_read_only(&path).unwrap();
    // Orphan writes, numbers, NULLs and a blob thread id counted as `write_totals` counts them.
    assert_eq!(scan_agrees_with_point_reads(&store), (true, true));
    let rows = scanned(&store);
    assert!(rows.iter().all(|(_, r)| r.is_some()), "{rows:?}");
    // Text ids are merged; the blob id and the non-UTF-8 one read their bytes on their own.
    let merged = rows.iter().filter(|(_, r)| r.unwrap().1.is_some()).count();
    assert_eq!(merged, 6, "{rows:?}");
    assert!(rows.contains(&("a".into(), Some((5 + 6 + 34 + 34, Some((9, 80)))))));
    // What the merge cannot compare by bytes is not merged: every row reads its bytes on
    // its own, and the totals are asked for (a declared collation, UTF-16 text, a number-like
    // thread id stored as a number).
    for (name, pragma, thread_type) in [
        ("nocase", "", "TEXT COLLATE NOCASE"),
        ("utf16", "PRAGMA encoding = 'UTF-16le';", "TEXT"),
        ("integer", "", "INTEGER"),
    ] {
        let path = dir.path().join(format!("{name}.db"));
        odd_store(&path, pragma, thread_type);
        let store = SqliteStore::open_read_only(&path).unwrap();
        // Not merged: the store's write totals are left to their own pass.
        assert_eq!(
            scan_agrees_with_point_reads(&store),
            (true, false),
            "{name}"
        );
        let rows = scanned(&store);
        assert!(
            rows.iter().all(|(_, r)| r.is_some_and(|r| r.1.is_none())),
            "{name}: {rows:?}"
        );
    }
}
