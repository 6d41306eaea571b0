//! `dfck copy`: every fixture store copied SQLite → PostgreSQL → SQLite shows, at every
//! checkpoint, the state the real LangGraph read from the original; the final SQLite copy
//! matches the original row for row (writes byte for byte; checkpoints equal as values,
//! byte-identical where no map order was lost, see docs/copy.md#byte-identity); encrypted
//! and pickled threads go SQLite → SQLite byte for byte and are refused, with the reason,
//! towards PostgreSQL; a rerun copies nothing; a differing thread is refused unless
//! `--replace`; targets that are not LangGraph stores are refused with one line.

use crate::common::compare::{Tally, check_fixture_as};
use crate::common::*;
use dfck_core::codec::{Value, decode, encode};
use rusqlite::Connection;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Stems whose PostgreSQL copy is also compared with the expected states (every copy was
/// verified against its source before commit; these cover delta, full, mixed, namespaces,
/// exit-mode and non-message values).
const PG_CHECKED: &[&str] = &[
    "deerflow", "delta_k3", "exit", "mixed", "subgraph", "values",
];

/// Stems whose threads are stored with a serializer PostgreSQL's layout cannot split.
const UNSPLITTABLE: &[&str] = &["encrypted", "pickle"];

fn copy(source: &str, args: &[&str]) -> Output {
    dfck(source, &[&["copy", "--format", "json"][..], args].concat())
}

fn json(out: &Output) -> Json {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A fresh empty database `dfck_copy_<name>` on the test server.
fn fresh_pg(uri: &str, name: &str) -> String {
    let rt = crate::common::pg::runtime();
    let client = crate::common::pg::connect(&rt, uri);
    let db = format!("dfck_copy_{name}");
    rt.block_on(client.batch_execute(&format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)")))
        .unwrap();
    rt.block_on(client.batch_execute(&format!("CREATE DATABASE \"{db}\"")))
        .unwrap();
    with_db(uri, &db)
}

/// Maps with their entries sorted by key, recursively: equality regardless of map order.
fn sorted(v: Value) -> Value {
    match v {
        Value::Map(m) => {
            let mut m: Vec<(Value, Value)> =
                m.into_iter().map(|(k, v)| (sorted(k), sorted(v))).collect();
            m.sort_by_key(|(k, _)| format!("{k:?}"));
            Value::Map(m)
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// `copy` without the channel values `orig` versions but does not store: PostgreSQL reads
/// them through the blob an earlier checkpoint stored at that version (docs/copy.md).
fn without_filled(copy: Value, orig: &Value) -> Value {
    let stored = |v: &Value| -> Vec<String> {
        v.get("channel_values")
            .and_then(Value::as_map)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, _)| k.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let keep = stored(orig);
    let Value::Map(entries) = copy else {
        return copy;
    };
    Value::Map(
        entries
            .into_iter()
            .map(|(k, v)| match (k.as_str(), v) {
                (Some("channel_values"), Value::Map(cv)) => (
                    k,
                    Value::Map(
                        cv.into_iter()
                            .filter(|(c, _)| {
                                c.as_str().is_some_and(|c| keep.iter().any(|x| x == c))
                            })
                            .collect(),
                    ),
                ),
                (_, v) => (k, v),
            })
            .collect(),
    )
}

/// `orig` with each stored channel value replaced by the first one (in id order) stored at
/// the same (thread, namespace, channel, version): PostgreSQL keeps one value per version.
fn one_value_per_version(
    first: &mut HashMap<(String, String, String, String), Value>,
    key: &(String, String, String),
    orig: Value,
) -> Value {
    let versions: Vec<(String, String)> = orig
        .get("channel_versions")
        .and_then(Value::as_map)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let Value::Map(entries) = orig else {
        return orig;
    };
    let mut out = Vec::new();
    for (k, v) in entries {
        let v = match (k.as_str(), v) {
            (Some("channel_values"), Value::Map(cv)) => Value::Map(
                cv.into_iter()
                    .map(|(c, val)| {
                        let name = c.as_str().unwrap_or_default().to_owned();
                        let Some((_, ver)) = versions.iter().find(|(n, _)| *n == name) else {
                            return (c, val);
                        };
                        let slot = (key.0.clone(), key.1.clone(), name, ver.clone());
                        let val = first.entry(slot).or_insert(val).clone();
                        (c, val)
                    })
                    .collect(),
            ),
            (_, v) => v,
        };
        out.push((k, v));
    }
    Value::Map(out)
}

type CheckpointCols = (Option<String>, Option<String>, Vec<u8>, Vec<u8>);

fn checkpoints(p: &Path) -> Vec<((String, String, String), CheckpointCols)> {
    let c = Connection::open(p).unwrap();
    let mut st = c
        .prepare(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, \
             metadata FROM checkpoints ORDER BY 1, 2, 3",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((
            (r.get(0)?, r.get(1)?, r.get(2)?),
            (r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?),
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

type WriteCols = Vec<(
    String,
    String,
    String,
    String,
    i64,
    String,
    Option<String>,
    Vec<u8>,
    String,
)>;

fn writes(p: &Path) -> WriteCols {
    let c = Connection::open(p).unwrap();
    let mut st = c
        .prepare(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, \
             task_path FROM writes ORDER BY 1, 2, 3, 4, 5",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// Compares the final copy with the original: (checkpoints, byte-identical bodies,
/// byte-identical metadata).
fn compare_rows(stem: &str, orig: &Path, copy: &Path) -> (usize, usize, usize) {
    assert_eq!(writes(orig), writes(copy), "{stem}: writes byte for byte");
    let (a, b) = (checkpoints(orig), checkpoints(copy));
    assert_eq!(a.len(), b.len(), "{stem}: checkpoint count");
    let (mut same_body, mut same_meta) = (0, 0);
    let mut first = HashMap::new();
    for ((ka, ca), (kb, cb)) in a.iter().zip(&b) {
        assert_eq!(ka, kb, "{stem}: ids");
        assert_eq!(ca.0, cb.0, "{stem} {ka:?}: parent");
        assert_eq!(ca.1, cb.1, "{stem} {ka:?}: type");
        let (pa, pb) = (
            opened(ca.1.as_deref(), &ca.2),
            opened(cb.1.as_deref(), &cb.2),
        );
        let a = one_value_per_version(&mut first, ka, decode(&pa).unwrap());
        if pa == pb {
            same_body += 1;
        } else {
            let b = without_filled(decode(&pb).unwrap(), &a);
            // Compared encoded: NaN is not equal to itself as a value.
            assert_eq!(
                encode(&sorted(a)),
                encode(&sorted(b)),
                "{stem} {ka:?}: checkpoint values"
            );
        }
        if ca.3 == cb.3 {
            same_meta += 1;
        } else {
            let mut ma: Json = serde_json::from_slice(&ca.3).unwrap();
            let mb: Json = serde_json::from_slice(&cb.3).unwrap();
            // PostgreSQL stores metadata without `writes`, as PostgresSaver does
            // (docs/copy.md#byte-identity): DeerFlow's duration-only records lose it.
            if mb.get("writes").is_none() {
                if let Some(m) = ma.as_object_mut() {
                    m.remove("writes");
                }
            }
            assert_eq!(ma, mb, "{stem} {ka:?}: metadata");
        }
    }
    (a.len(), same_body, same_meta)
}

/// The final SQLite copies against the expected states: every value equal; a checkpoint that
/// versions a channel without storing it may store the value PostgreSQL read at that
/// version (docs/copy.md#byte-identity), so encodings may differ.
fn check_final(targets: Vec<(String, String, Json)>) {
    let results: Vec<(Tally, Vec<String>)> = std::thread::scope(|sc| {
        let handles: Vec<_> = targets
            .iter()
            .map(|(stem, target, exp)| sc.spawn(move || check_fixture_as(stem, target, exp, true)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total = Tally::default();
    let mut bad = Vec::new();
    for (t, b) in results {
        total.add(&t);
        bad.extend(b);
    }
    assert!(bad.is_empty(), "final copies: {bad:#?}");
    println!(
        "copy sqlite→postgres→sqlite: compared {} checkpoint states and {} stored views with LangGraph's get_state",
        total.states, total.stored
    );
}

/// The PostgreSQL copies against the expected states. PostgreSQL reads a delta channel
/// through the blob at its version, so a checkpoint that SQLite shows as `absent` may show
/// the snapshot there: encodings may differ, values may not.
fn check_pg(targets: Vec<(String, String, Json)>) {
    let bad: Vec<String> = std::thread::scope(|sc| {
        let handles: Vec<_> = targets
            .iter()
            .map(|(stem, target, exp)| sc.spawn(move || check_fixture_as(stem, target, exp, true)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                let (t, b) = h.join().unwrap();
                assert!(t.states > 0);
                b
            })
            .collect()
    });
    assert!(bad.is_empty(), "postgres copies: {bad:#?}");
    println!(
        "copy sqlite→postgres: {} stores match the expected states",
        targets.len()
    );
}

#[test]
fn every_fixture_round_trips_sqlite_postgres_sqlite() {
    let Some(uri) = require_postgres("copy round trip") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut pg_targets = Vec::new();
    let mut final_targets = Vec::new();
    let mut direct_done = 0;
    let (mut total, mut bodies, mut metas) = (0, 0, 0);
    for stem in fixture_stems() {
        let orig = sqlite_fixture(&stem);
        let (_src_dir, src) = temp_copy(&orig);
        let exp = expected(&stem);
        // LangGraph's rows alone here; tests/it/deerflow_copy.rs copies DeerFlow's into
        // targets holding its schema.
        let only: &[&str] = if stem == "deerflow_app" {
            &["--checkpoints-only"]
        } else {
            &[]
        };
        let copy = |from: &str, args: &[&str]| copy(from, &[args, only].concat());
        // SQLite → SQLite: every row as stored, encrypted and pickled ones included.
        let direct = dir.path().join(format!("{stem}-direct.db"));
        let out = copy(s(&src), &["--to", s(&direct), "--all", "--apply"]);
        assert_eq!(out.status.code(), Some(0), "{stem}: {:?}", json(&out));
        assert_eq!(writes(&orig), writes(&direct), "{stem}: direct writes");
        assert_eq!(
            checkpoints(&orig),
            checkpoints(&direct),
            "{stem}: direct rows"
        );
        direct_done += 1;

        let pg = fresh_pg(&uri, &format!("rt_{stem}"));
        let out = copy(s(&src), &["--to", &pg, "--all", "--apply"]);
        let report = json(&out);
        if UNSPLITTABLE.contains(&stem.as_str()) {
            assert_eq!(out.status.code(), Some(1), "{stem}: refused threads exit 1");
            for t in report["threads"].as_array().unwrap() {
                assert_eq!(t["status"], "refused", "{stem}: {t}");
                assert!(
                    t["reason"].as_str().unwrap().contains("serializer"),
                    "{stem}: {t}"
                );
            }
            continue;
        }
        assert_eq!(out.status.code(), Some(0), "{stem}: {report}");
        assert_eq!(report["refused"], 0, "{stem}");
        assert_eq!(report["target_created"], true, "{stem}");
        if PG_CHECKED.contains(&stem.as_str()) {
            pg_targets.push((stem.clone(), pg.clone(), exp.clone()));
        }

        let back = dir.path().join(format!("{stem}-back.db"));
        let out = copy(&pg, &["--to", s(&back), "--all", "--apply"]);
        assert_eq!(out.status.code(), Some(0), "{stem}: {:?}", json(&out));
        let (n, b, m) = compare_rows(&stem, &orig, &back);
        let codes = |target: &str| -> Vec<Json> {
            let out = dfck(target, &["verify", "--format", "json"]);
            let mut v: Vec<Json> = json(&out)["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| !f["code"].as_str().unwrap().starts_with("deerflow."))
                .map(|f| serde_json::json!([f["code"], f["thread_id"], f["checkpoint_id"]]))
                .collect();
            v.sort_by_key(|f| f.to_string());
            v
        };
        assert_eq!(codes(s(&src)), codes(s(&back)), "{stem}: verify findings");
        total += n;
        bodies += b;
        metas += m;
        final_targets.push((stem.clone(), s(&back).to_owned(), exp));

        // A rerun copies nothing.
        let again = json(&copy(s(&src), &["--to", &pg, "--all", "--apply"]));
        assert_eq!(again["copied"], 0, "{stem}: rerun {again}");
        assert_eq!(again["checkpoints"], 0, "{stem}");
        assert_eq!(again["skipped"], again["threads"].as_array().unwrap().len());
    }
    // SQLite → SQLite copies are the original rows byte for byte (checked above).
    assert_eq!(direct_done, fixture_stems().len());
    check_pg(pg_targets);
    check_final(final_targets);
    println!(
        "copy round trip: {total} checkpoints back in SQLite, writes byte-identical, {bodies} bodies and {metas} metadata byte-identical, the rest equal as values (map order)"
    );
    assert!(bodies > 0 && total > bodies, "some bodies keep their bytes");
}

#[test]
fn dry_run_writes_nothing_and_counts_what_it_would_copy() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, src) = temp_copy(&sqlite_fixture("delta_k3"));
    let target = dir.path().join("new.db");
    let out = copy(s(&src), &["--to", s(&target), "t-linear", "t-fork"]);
    assert_eq!(out.status.code(), Some(0));
    let r = json(&out);
    assert_eq!(r["dry_run"], true);
    assert_eq!(r["copied"], 2);
    assert_eq!(r["checkpoints"], 16 + 23);
    assert_eq!(r["threads"][0]["status"], "would");
    assert!(r["bytes"].as_u64().unwrap() > 0);
    // A LangGraph store without DeerFlow's tables: nothing of DeerFlow's to copy or leave.
    assert_eq!(r["not_copied"], serde_json::json!([]));
    assert_eq!(r["deerflow"], Json::Null);
    assert!(!target.exists(), "a dry run creates nothing");
    let human = dfck(s(&src), &["copy", "--to", s(&target), "--all"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        !text.contains("not copied") && !text.contains("deerflow"),
        "{text}"
    );
    assert!(text.contains("dry run, nothing written"));
}

#[test]
fn a_differing_thread_is_refused_unless_replace() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, delta) = temp_copy(&sqlite_fixture("delta_k3"));
    let (_e, full) = temp_copy(&sqlite_fixture("full"));
    let target = dir.path().join("t.db");
    let out = copy(s(&delta), &["--to", s(&target), "t-linear", "--apply"]);
    assert_eq!(out.status.code(), Some(0));
    let before = checkpoints(&target);
    // The full-mode twin has the same thread id and different rows.
    let out = copy(s(&full), &["--to", s(&target), "t-linear", "--apply"]);
    assert_eq!(out.status.code(), Some(1));
    let r = json(&out);
    assert_eq!(r["threads"][0]["status"], "refused");
    assert!(
        r["threads"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("--replace")
    );
    assert_eq!(checkpoints(&target), before, "refused: untouched");
    let out = copy(
        s(&full),
        &["--to", s(&target), "t-linear", "--apply", "--replace"],
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", json(&out));
    let rows = checkpoints(&target);
    let orig: Vec<_> = checkpoints(&full)
        .into_iter()
        .filter(|(k, _)| k.0 == "t-linear")
        .collect();
    assert_eq!(rows, orig, "replaced by the full thread, byte for byte");
    let again = json(&copy(
        s(&full),
        &["--to", s(&target), "t-linear", "--apply"],
    ));
    assert_eq!(again["threads"][0]["status"], "skipped");
}

#[test]
fn a_postgres_target_in_a_schema_and_replace_there() {
    let Some(uri) = require_postgres("copy into a schema") else {
        return;
    };
    let pg = fresh_pg(&uri, "schema");
    let rt = crate::common::pg::runtime();
    let client = crate::common::pg::connect(&rt, &pg);
    rt.block_on(client.batch_execute("CREATE SCHEMA lg"))
        .unwrap();
    let (_d, delta) = temp_copy(&sqlite_fixture("delta_k3"));
    let (_e, full) = temp_copy(&sqlite_fixture("full"));
    let to = ["--to", pg.as_str(), "--to-pg-schema", "lg"];
    let out = copy(s(&delta), &[&to[..], &["t-linear", "--apply"]].concat());
    assert_eq!(out.status.code(), Some(0), "{:?}", json(&out));
    let migrations: i64 = rt
        .block_on(client.query_one("SELECT count(*) FROM lg.checkpoint_migrations", &[]))
        .unwrap()
        .get(0);
    assert_eq!(
        migrations, 10,
        "v0–v9 recorded, as PostgresSaver.setup() leaves them"
    );
    let out = copy(s(&full), &[&to[..], &["t-linear", "--apply"]].concat());
    assert_eq!(out.status.code(), Some(1));
    let out = copy(
        s(&full),
        &[&to[..], &["t-linear", "--apply", "--replace"]].concat(),
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", json(&out));
    let n: i64 = rt
        .block_on(client.query_one(
            "SELECT count(*) FROM lg.checkpoints WHERE thread_id = 't-linear'",
            &[],
        ))
        .unwrap()
        .get(0);
    let want = checkpoints(&full)
        .iter()
        .filter(|(k, _)| k.0 == "t-linear")
        .count();
    assert_eq!(n as usize, want);
}

#[test]
fn targets_that_are_not_langgraph_stores_are_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, src) = temp_copy(&sqlite_fixture("delta_k3"));
    let junk: PathBuf = dir.path().join("junk.db");
    std::fs::write(&junk, b"hello, not a database").unwrap();
    assert_clean_failure(
        &dfck(s(&src), &["copy", "--to", s(&junk), "--all", "--apply"]),
        "not a SQLite database",
    );
    assert_clean_failure(
        &dfck(s(&src), &["copy", "--to", s(&src), "--all"]),
        "source store itself",
    );
    assert_clean_failure(&dfck(s(&src), &["copy", "--to", s(&junk)]), "--all");
    let fresh = dir.path().join("fresh.db");
    assert_clean_failure(
        &dfck(s(&src), &["copy", "--to", s(&fresh), "t-nope", "--apply"]),
        "t-nope",
    );
    assert!(!fresh.exists(), "an unknown thread sets nothing up");
    if let Some(uri) = require_postgres("copy into non-LangGraph databases") {
        let rt = crate::common::pg::runtime();
        for (name, sql, needle) in [
            (
                "notlg",
                "CREATE TABLE users (id int)",
                "none of LangGraph's",
            ),
            (
                "future",
                "CREATE TABLE checkpoint_migrations (v INTEGER PRIMARY KEY); \
                 INSERT INTO checkpoint_migrations SELECT generate_series(0, 10)",
                "v10",
            ),
        ] {
            let pg = fresh_pg(&uri, name);
            let client = crate::common::pg::connect(&rt, &pg);
            rt.block_on(client.batch_execute(sql)).unwrap();
            let out = dfck(s(&src), &["copy", "--to", &pg, "--all", "--apply"]);
            assert_clean_failure(&out, needle);
            let n: i64 = rt
                .block_on(client.query_one(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
                    &[],
                ))
                .unwrap()
                .get(0);
            assert_eq!(n, 1, "{name}: nothing set up");
        }
        // A setup that stopped after v0 (killed) is finished as the saver's setup() would.
        let pg = fresh_pg(&uri, "halfsetup");
        let client = crate::common::pg::connect(&rt, &pg);
        rt.block_on(client.batch_execute(
            "CREATE TABLE checkpoint_migrations (v INTEGER PRIMARY KEY); \
             INSERT INTO checkpoint_migrations VALUES (0)",
        ))
        .unwrap();
        let out = dfck(s(&src), &["copy", "--to", &pg, "t-linear", "--apply"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: i64 = rt
            .block_on(client.query_one("SELECT count(*) FROM checkpoint_migrations", &[]))
            .unwrap()
            .get(0);
        assert_eq!(v, 10);
    }
}

fn pg_rows(uri: &str, sql: &str) -> Vec<Vec<Option<String>>> {
    let rt = crate::common::pg::runtime();
    let client = crate::common::pg::connect(&rt, uri);
    rt.block_on(client.query(sql, &[]))
        .unwrap()
        .iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.get::<_, Option<String>>(i))
                .collect()
        })
        .collect()
}

#[test]
fn postgres_to_postgres_with_jobs_keeps_every_row() {
    let Some(uri) = require_postgres("copy postgres → postgres --jobs") else {
        return;
    };
    let source = with_db(&uri, "dfck_delta_k3");
    let target = fresh_pg(&uri, "jobs");
    let out = copy(
        &source,
        &["--to", &target, "--all", "--apply", "--jobs", "3"],
    );
    assert_eq!(out.status.code(), Some(0), "{:?}", json(&out));
    assert_eq!(json(&out)["copied"], 8);
    for sql in [
        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint::text, \
         metadata::text FROM checkpoints ORDER BY 1, 2, 3",
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx::text, task_path, channel, type, \
         encode(blob, 'hex') FROM checkpoint_writes ORDER BY 1, 2, 3, 4, 5",
    ] {
        assert_eq!(pg_rows(&source, sql), pg_rows(&target, sql), "{sql}");
    }
    let blobs = "SELECT thread_id, checkpoint_ns, channel, version, type, encode(blob, 'hex') \
                 FROM checkpoint_blobs ORDER BY 1, 2, 3, 4";
    let (all, copied) = (pg_rows(&source, blobs), pg_rows(&target, blobs));
    assert!(!copied.is_empty());
    assert!(
        copied.iter().all(|b| all.contains(b)),
        "every copied blob is a source blob, byte for byte"
    );
    check_pg(vec![(
        "delta_k3".into(),
        target.clone(),
        expected_in("expected-pg", "delta_k3"),
    )]);
}

#[test]
fn human_output() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(sqlite_fixture("exit"), dir.path().join("src.db")).unwrap();
    let run = |args: &[&str]| {
        let out = crate::common::dfck_command()
            .current_dir(dir.path())
            .args(["--db", "src.db", "copy", "--to", "copy.db"])
            .args(args)
            .env_remove("DFCK_DB")
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    insta::assert_snapshot!("copy_dry_run", run(&["--all"]));
    insta::assert_snapshot!("copy_apply", run(&["--all", "--apply"]));
    insta::assert_snapshot!("copy_rerun", run(&["t-exit", "--apply"]));
}
