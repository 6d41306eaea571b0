//! Where the bytes go, in `dfck inspect`: `--sort` and `--top`, each thread's first and last
//! activity, the store's on-disk facts (SQLite pages, free pages and WAL; PostgreSQL tables
//! with TOAST, indexes and dead rows) and `--channels` (bytes per channel, stored values and
//! writes), each checked against a direct computation on SQLite and PostgreSQL fixtures.

use crate::common::*;
use dfck_core::codec::{self, Value};
use rusqlite::{Connection, OpenFlags};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::Path;

type Channels = BTreeMap<(String, String), (u64, u64)>;

fn ro(db: &Path) -> Connection {
    Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

/// The `ts` of a SQLite checkpoint, decoded directly.
fn sqlite_ts(c: &Connection, thread: &str, newest: bool) -> String {
    let sql = format!(
        "SELECT checkpoint FROM checkpoints WHERE thread_id = ?1 ORDER BY checkpoint_id {} LIMIT 1",
        if newest { "DESC" } else { "ASC" }
    );
    let body: Vec<u8> = c.query_row(&sql, [thread], |r| r.get(0)).unwrap();
    let v = codec::decode(&body).unwrap();
    v.get("ts").and_then(Value::as_str).unwrap().to_owned()
}

/// Per (thread, channel): the encoded size of every checkpoint's stored value (each decoded
/// and encoded again) and the bytes of the writes.
fn sqlite_channels(db: &Path) -> Channels {
    let c = ro(db);
    let mut out = Channels::new();
    let mut st = c
        .prepare("SELECT thread_id, checkpoint FROM checkpoints")
        .unwrap();
    let rows = st
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })
        .unwrap();
    for row in rows {
        let (thread, body) = row.unwrap();
        let v = codec::decode(&body).unwrap();
        for (k, val) in v.get("channel_values").and_then(Value::as_map).unwrap() {
            let name = k.as_str().unwrap().to_owned();
            out.entry((thread.clone(), name)).or_default().0 += codec::encode(val).len() as u64;
        }
    }
    let mut st = c
        .prepare("SELECT thread_id, channel, sum(length(value)) FROM writes GROUP BY 1, 2")
        .unwrap();
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (t, ch, n) = row.unwrap();
        out.entry((t, ch)).or_default().1 += n as u64;
    }
    out
}

/// The per-channel bytes a `--channels` report shows, and checks each thread's list is
/// largest first and `bytes` adds up.
fn reported_channels(s: &Json) -> Channels {
    let mut out = Channels::new();
    for t in s["threads"].as_array().unwrap() {
        let list = t["channels"].as_array().unwrap();
        let mut last = u64::MAX;
        for c in list {
            let (v, w, b) = (
                c["values_bytes"].as_u64().unwrap(),
                c["writes_bytes"].as_u64().unwrap(),
                c["bytes"].as_u64().unwrap(),
            );
            assert_eq!(v + w, b);
            assert!(b <= last, "largest first");
            last = b;
            let key = (
                t["thread_id"].as_str().unwrap().to_owned(),
                c["channel"].as_str().unwrap().to_owned(),
            );
            out.insert(key, (v, w));
        }
    }
    // The store's totals are the sums over the threads listed.
    let mut sums: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for ((_, ch), (v, w)) in &out {
        let e = sums.entry(ch.clone()).or_default();
        e.0 += v;
        e.1 += w;
    }
    for c in s["channel_totals"].as_array().unwrap() {
        let ch = c["channel"].as_str().unwrap();
        assert_eq!(
            sums.remove(ch),
            Some((
                c["values_bytes"].as_u64().unwrap(),
                c["writes_bytes"].as_u64().unwrap()
            )),
            "{ch}"
        );
    }
    assert!(sums.is_empty(), "totals miss {sums:?}");
    out
}

fn names(s: &Json) -> Vec<String> {
    s["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap().to_owned())
        .collect()
}

/// `--sort` orders and `--top` cuts the list; the counts stay the store's.
fn check_sorting(target: &str) {
    let all = dfck_json(target, &["inspect", "--format", "json"]);
    let threads = all["threads"].as_array().unwrap().clone();
    assert!(threads.len() >= 3);
    let n = threads.len() as u64;
    let by = |key: &str| -> Vec<String> {
        let mut v = threads.clone();
        v.sort_by(|a, b| {
            let name = a["thread_id"].as_str().cmp(&b["thread_id"].as_str());
            match key {
                "bytes" => b["bytes"].as_u64().cmp(&a["bytes"].as_u64()).then(name),
                "checkpoints" => b["checkpoints"]
                    .as_u64()
                    .cmp(&a["checkpoints"].as_u64())
                    .then(name),
                "age" => a["last_activity"]
                    .as_str()
                    .cmp(&b["last_activity"].as_str())
                    .then(name),
                _ => name,
            }
        });
        v.iter()
            .map(|t| t["thread_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&all), by("name"));
    assert_eq!(all["sort"], "name");
    for key in ["bytes", "checkpoints", "age", "name"] {
        let s = dfck_json(target, &["inspect", "--sort", key, "--format", "json"]);
        assert_eq!(names(&s), by(key), "--sort {key}");
        let top = dfck_json(
            target,
            &["inspect", "--sort", key, "--top", "2", "--format", "json"],
        );
        assert_eq!(names(&top), by(key)[..2].to_vec(), "--sort {key} --top 2");
        assert_eq!(top["counts"]["threads"], n);
        assert_eq!(top["bytes"], all["bytes"]);
        assert_eq!(top["top"], 2);
    }
    // Largest first, really.
    let s = dfck_json(target, &["inspect", "--sort", "bytes", "--format", "json"]);
    let bytes: Vec<u64> = s["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["bytes"].as_u64().unwrap())
        .collect();
    assert!(bytes.windows(2).all(|w| w[0] >= w[1]), "{bytes:?}");
}

#[test]
fn sqlite_activity_and_disk() {
    let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
    let d = db.to_str().unwrap();
    check_sorting(d);
    let s = dfck_json(d, &["inspect", "--format", "json"]);
    let c = ro(&db);
    for t in s["threads"].as_array().unwrap() {
        let id = t["thread_id"].as_str().unwrap();
        assert_eq!(t["first_activity"], sqlite_ts(&c, id, false), "{id}");
        assert_eq!(t["last_activity"], sqlite_ts(&c, id, true), "{id}");
        assert!(t["first_activity"].as_str() <= t["last_activity"].as_str());
        assert!(
            t.get("channels").is_none(),
            "no channels without --channels"
        );
    }
    drop(c);
    assert!(s.get("channel_totals").is_none());
    // Disk facts: the file, no free page, then free pages and a WAL after a deletion that a
    // still-open writer keeps in the WAL.
    let disk = &s["space"];
    assert_eq!(disk["file_bytes"], std::fs::metadata(&db).unwrap().len());
    assert_eq!(disk["freelist_pages"], 0);
    assert_eq!(
        disk["page_count"].as_u64().unwrap() * disk["page_size"].as_u64().unwrap(),
        disk["file_bytes"].as_u64().unwrap()
    );
    let w = Connection::open(&db).unwrap();
    w.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    w.execute_batch(
        "DELETE FROM checkpoints WHERE thread_id = 't-fork'; DELETE FROM writes WHERE thread_id = 't-fork'",
    )
    .unwrap();
    let s = dfck_json(d, &["inspect", "--format", "json"]);
    let disk = &s["space"];
    let free: i64 = w
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    let pages: i64 = w.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    assert!(free > 0);
    assert_eq!(disk["freelist_pages"], free);
    assert_eq!(disk["page_count"], pages);
    assert_eq!(disk["free_page_bytes"], free as u64 * 4096);
    let wal = std::fs::metadata(format!("{d}-wal")).unwrap().len();
    assert!(wal > 0);
    assert_eq!(disk["wal_bytes"], wal);
    assert_eq!(
        disk["total_bytes"].as_u64().unwrap(),
        disk["file_bytes"].as_u64().unwrap() + wal + disk["shm_bytes"].as_u64().unwrap()
    );
    drop(w);
}

/// The store's write totals, whether the summary's scan counts them in its writes merge or,
/// where it cannot merge (a declared collation), they take a pass of their own: both are
/// what SQL counts, orphan writes after the last thread with checkpoints included.
#[test]
fn sqlite_write_totals_with_and_without_the_merge() {
    let mut reported = Vec::new();
    for collate in ["", " COLLATE NOCASE"] {
        let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
        let w = Connection::open(&db).unwrap();
        w.execute_batch(&format!(
            "CREATE TABLE w2 (thread_id TEXT{collate} NOT NULL, \
             checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id TEXT NOT NULL, \
             task_id TEXT NOT NULL, task_path TEXT NOT NULL DEFAULT '', idx INTEGER NOT NULL, \
             channel TEXT NOT NULL, type TEXT, value BLOB, \
             PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)); \
             INSERT INTO w2 SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, \
               idx, channel, type, value FROM writes; \
             INSERT INTO w2 VALUES ('zz-orphan', '', '1', 'k', '', 0, 'messages', 'msgpack', x'9000'), \
               ('zz-orphan', '', '2', 'k', '', 0, 'messages', 'msgpack', x'900000'); \
             DROP TABLE writes; ALTER TABLE w2 RENAME TO writes;"
        ))
        .unwrap();
        let (rows, bytes): (u64, u64) = w
            .query_row(
                "SELECT count(*), coalesce(sum(length(value)), 0) FROM writes",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        drop(w);
        let s = dfck_json(db.to_str().unwrap(), &["inspect", "--format", "json"]);
        assert_eq!(s["counts"]["writes"], rows, "{collate}");
        assert_eq!(s["table_bytes"]["writes"], bytes, "{collate}");
        reported.push((rows, bytes));
    }
    assert_eq!(reported[0], reported[1]);
}

#[test]
fn sqlite_channel_bytes() {
    for stem in ["deerflow", "subgraph", "full"] {
        let db = sqlite_fixture(stem);
        let d = db.to_str().unwrap();
        let s = dfck_json(d, &["inspect", "--channels", "--format", "json"]);
        assert_eq!(reported_channels(&s), sqlite_channels(&db), "{stem}");
    }
    // DeerFlow's channels are all there, messages the largest.
    let s = dfck_json(
        sqlite_fixture("deerflow").to_str().unwrap(),
        &["inspect", "--channels", "--format", "json"],
    );
    let totals: Vec<&str> = s["channel_totals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["channel"].as_str().unwrap())
        .collect();
    assert_eq!(totals[0], "messages");
    for ch in ["artifacts", "todos", "title", "thread_data", "sandbox"] {
        assert!(totals.contains(&ch), "{ch} in {totals:?}");
    }
    // Checkpoints dfck cannot read (a pickle serializer) count whole under `(undecoded)`.
    let db = sqlite_fixture("pickle");
    let s = dfck_json(
        db.to_str().unwrap(),
        &["inspect", "--channels", "--format", "json"],
    );
    let c = Connection::open_with_flags(
        format!("file:{}?immutable=1", db.display()),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    let pickled: i64 = c
        .query_row(
            "SELECT sum(length(checkpoint)) FROM checkpoints WHERE type <> 'msgpack'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(pickled > 0);
    let undecoded = s["channel_totals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["channel"] == "(undecoded)")
        .expect("an (undecoded) entry");
    assert_eq!(undecoded["values_bytes"], pickled);
    // --top: channels of the listed threads only.
    let s = dfck_json(
        sqlite_fixture("full").to_str().unwrap(),
        &[
            "inspect",
            "--channels",
            "--sort",
            "bytes",
            "--top",
            "1",
            "--format",
            "json",
        ],
    );
    let all = sqlite_channels(&sqlite_fixture("full"));
    let first = s["threads"][0]["thread_id"].as_str().unwrap().to_owned();
    let want: Channels = all.into_iter().filter(|((t, _), _)| *t == first).collect();
    assert_eq!(reported_channels(&s), want);
}

/// What the heads need, from each namespace's `inspect THREAD` listing (row and write bytes
/// per checkpoint): the head, and for a delta thread every ancestor back to the nearest one
/// storing `messages`.
fn needed_from_listings(target: &str, t: &Json) -> u64 {
    let id = t["thread_id"].as_str().unwrap();
    let mut needed = 0;
    for ns in t["namespaces"].as_array().unwrap() {
        let ns = ns.as_str().unwrap();
        let l = dfck_json(target, &["inspect", id, "--ns", ns, "--format", "json"]);
        let cks = l["checkpoints"].as_array().unwrap();
        let by_id: BTreeMap<&str, &Json> = cks
            .iter()
            .map(|c| (c["checkpoint_id"].as_str().unwrap(), c))
            .collect();
        let mut cur = Some(&cks[0]);
        while let Some(c) = cur.take() {
            needed += c["bytes"].as_u64().unwrap();
            if t["mode"] != "full" && c["messages_encoding"] == "absent" {
                cur = c["parent_checkpoint_id"]
                    .as_str()
                    .and_then(|p| by_id.get(p).copied());
            }
        }
    }
    needed
}

#[test]
fn sqlite_history_share() {
    let mut seen_delta_chain = false;
    for stem in ["deerflow", "subgraph", "delta_k3", "full"] {
        let db = sqlite_fixture(stem);
        let d = db.to_str().unwrap();
        let s = dfck_json(d, &["inspect", "--format", "json"]);
        for t in s["threads"].as_array().unwrap() {
            let needed = needed_from_listings(d, t);
            let bytes = t["bytes"].as_u64().unwrap();
            assert_eq!(
                t["history_bytes"].as_u64().unwrap(),
                bytes - needed,
                "{stem} {}",
                t["thread_id"]
            );
            assert!(needed > 0);
            let head = dfck_json(
                d,
                &[
                    "inspect",
                    t["thread_id"].as_str().unwrap(),
                    "--format",
                    "json",
                ],
            );
            seen_delta_chain |= head["checkpoints"][0]["messages_encoding"] == "absent";
        }
    }
    assert!(seen_delta_chain, "some delta head replays from an ancestor");
}

fn pg_one(
    rt: &tokio::runtime::Runtime,
    c: &tokio_postgres::Client,
    sql: &str,
) -> Vec<tokio_postgres::Row> {
    rt.block_on(c.query(sql, &[])).unwrap()
}

#[test]
fn postgres_space_and_channels() {
    let Some(uri) = require_postgres("postgres inspect space") else {
        return;
    };
    let url = with_db(&uri, "dfck_deerflow");
    let s = dfck_json(&url, &["inspect", "--channels", "--format", "json"]);
    let rt = crate::common::pg::runtime();
    let c = crate::common::pg::connect(&rt, &url);
    // Channels: blobs plus inline values, and writes, summed directly.
    let mut want = Channels::new();
    for r in pg_one(
        &rt,
        &c,
        "SELECT thread_id, channel, sum(coalesce(octet_length(blob), 0))::int8 FROM checkpoint_blobs GROUP BY 1, 2",
    ) {
        want.entry((r.get(0), r.get(1))).or_default().0 += r.get::<_, i64>(2) as u64;
    }
    for r in pg_one(
        &rt,
        &c,
        "SELECT c.thread_id, kv.key, octet_length(kv.value::text)::int8 \
         FROM checkpoints c, jsonb_each(c.checkpoint -> 'channel_values') kv",
    ) {
        want.entry((r.get(0), r.get(1))).or_default().0 += r.get::<_, i64>(2) as u64;
    }
    for r in pg_one(
        &rt,
        &c,
        "SELECT thread_id, channel, sum(octet_length(blob))::int8 FROM checkpoint_writes GROUP BY 1, 2",
    ) {
        want.entry((r.get(0), r.get(1))).or_default().1 += r.get::<_, i64>(2) as u64;
    }
    assert_eq!(reported_channels(&s), want);
    // Tables: totals with TOAST and indexes as the server reports them.
    let tables = s["space"]["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 3);
    let mut sum = 0;
    for t in tables {
        let name = t["table"].as_str().unwrap();
        let r = &pg_one(
            &rt,
            &c,
            &format!(
                "SELECT pg_total_relation_size('{name}'), pg_relation_size('{name}'), pg_indexes_size('{name}'), \
                 coalesce((SELECT pg_total_relation_size(reltoastrelid) FROM pg_class WHERE oid = '{name}'::regclass AND reltoastrelid <> 0), 0)"
            ),
        )[0];
        assert_eq!(t["total_bytes"], r.get::<_, i64>(0), "{name}");
        assert_eq!(t["heap_bytes"], r.get::<_, i64>(1), "{name}");
        assert_eq!(t["index_bytes"], r.get::<_, i64>(2), "{name}");
        assert_eq!(t["toast_bytes"], r.get::<_, i64>(3), "{name}");
        assert!(t["dead_tuples"].is_u64() && t["live_tuples"].is_u64());
        sum += t["total_bytes"].as_i64().unwrap();
    }
    assert_eq!(s["space"]["total_bytes"], sum);
    // Activity: the ts of the least and greatest checkpoint id.
    for t in s["threads"].as_array().unwrap() {
        let id = t["thread_id"].as_str().unwrap();
        for (field, order) in [("first_activity", "ASC"), ("last_activity", "DESC")] {
            let r = &rt
                .block_on(c.query(
                    &format!(
                        "SELECT checkpoint ->> 'ts' FROM checkpoints WHERE thread_id = $1 \
                         ORDER BY checkpoint_id {order} LIMIT 1"
                    ),
                    &[&id],
                ))
                .unwrap()[0];
            assert_eq!(t[field], r.get::<_, String>(0), "{id} {field}");
        }
    }
    // History of a full-mode thread: everything but the head (its row, every blob at its
    // versions, its writes).
    let t = s["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == "t-deerflow-full")
        .unwrap();
    assert_eq!(t["mode"], "full");
    let r = &pg_one(
        &rt,
        &c,
        "WITH h AS (SELECT * FROM checkpoints WHERE thread_id = 't-deerflow-full' \
            AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1) \
         SELECT ((SELECT pg_column_size(checkpoint) + pg_column_size(metadata) FROM h) \
          + (SELECT coalesce(sum(octet_length(b.blob)), 0) FROM h CROSS JOIN LATERAL jsonb_each_text(h.checkpoint -> 'channel_versions') v \
             JOIN checkpoint_blobs b ON b.thread_id = h.thread_id AND b.checkpoint_ns = h.checkpoint_ns \
             AND b.channel = v.key AND b.version = v.value) \
          + (SELECT coalesce(sum(octet_length(w.blob)), 0) FROM h JOIN checkpoint_writes w \
             ON w.thread_id = h.thread_id AND w.checkpoint_ns = h.checkpoint_ns AND w.checkpoint_id = h.checkpoint_id))::int8",
    )[0];
    let needed = r.get::<_, i64>(0) as u64;
    assert_eq!(
        t["history_bytes"].as_u64().unwrap(),
        t["bytes"].as_u64().unwrap() - needed
    );
    check_sorting(&with_db(&uri, "dfck_delta_k3"));
}

/// The human summary with `--channels`, largest thread only.
#[test]
fn channels_human_output() {
    let out = crate::common::dfck_command()
        .args([
            "--db",
            "fixtures/sqlite/deerflow.db",
            "inspect",
            "--channels",
            "--sort",
            "bytes",
            "--top",
            "1",
        ])
        .current_dir(root())
        .env("COLUMNS", "200")
        .env_remove("DFCK_DB")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!(
        "inspect_channels_top1",
        String::from_utf8_lossy(&out.stdout)
    );
}
