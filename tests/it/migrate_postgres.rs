//! `dfck migrate delta-to-full --apply` on a real PostgreSQL server: every delta, mixed and
//! DeerFlow fixture (restored from the real `PostgresSaver`'s dumps) shows exactly
//! LangGraph's delta view after conversion, with one plain `msgpack` blob per `messages`
//! version and no inline snapshot marker, delta counter or mode marker left; ids, parents
//! and every `checkpoint_writes` row are untouched; a re-run converts nothing; `--jobs`
//! gives the same result; killing dfck mid-conversion leaves each thread old or new; a
//! concurrent writer loses nothing; a thread another dfck holds, or with an active DeerFlow
//! run, is refused. Each test converts its own copy (`CREATE DATABASE … TEMPLATE`).

use crate::common::*;
use serde_json::Value as Json;
use std::sync::Mutex;

static CREATE_LOCK: Mutex<()> = Mutex::new(());

use crate::common::pg::{connect, runtime};

/// A fresh copy of the fixture database `dfck_<template>` (or `dfck_defect_<template>`);
/// returns its URI.
fn fresh_db(server: &str, template_db: &str, name: &str) -> String {
    let _guard = CREATE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime();
    let admin = connect(&rt, server);
    rt.block_on(async {
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\""))
            .await
            .unwrap();
        let mut tries = 0;
        loop {
            match admin
                .batch_execute(&format!(
                    "CREATE DATABASE \"{name}\" TEMPLATE \"{template_db}\""
                ))
                .await
            {
                Ok(()) => break,
                Err(e) if tries < 20 => {
                    tries += 1;
                    eprintln!("retrying CREATE DATABASE {name}: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                Err(e) => panic!("CREATE DATABASE {name}: {e}"),
            }
        }
    });
    with_db(server, name)
}

/// `migrate --all --apply`, accepting the delta view (the twin fixtures hold a thread the
/// real library itself contaminates; see [`apply_strict`]).
fn apply(uri: &str, extra: &[&str]) -> (Json, i32) {
    let mut all = vec!["--accept-delta-view"];
    all.extend_from_slice(extra);
    apply_strict(uri, &all)
}

/// `migrate --all --apply` as given: contaminated forks are refused.
fn apply_strict(uri: &str, extra: &[&str]) -> (Json, i32) {
    let mut args = vec![
        "migrate",
        "delta-to-full",
        "--all",
        "--apply",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = dfck(uri, &args);
    let j = serde_json::from_slice(&out.stdout).unwrap_or(Json::Null);
    (j, out.status.code().unwrap_or(-1))
}

/// Rows a conversion must not change: checkpoint keys and parents, every write row.
fn untouched(uri: &str) -> Vec<String> {
    let rt = runtime();
    let c = connect(&rt, uri);
    rt.block_on(async {
        let mut out = Vec::new();
        for sql in [
            "SELECT concat_ws('|', thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, \
             checkpoint -> 'channel_versions', checkpoint -> 'versions_seen', checkpoint ->> 'ts', \
             (checkpoint -> 'channel_values') - 'messages'::text) FROM checkpoints ORDER BY 1",
            "SELECT concat_ws('|', thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, \
             encode(blob, 'hex')) FROM checkpoint_writes ORDER BY 1",
            "SELECT concat_ws('|', thread_id, checkpoint_ns, channel, version, type, md5(blob)) \
             FROM checkpoint_blobs WHERE channel <> 'messages' ORDER BY 1",
        ] {
            for r in c.query(sql, &[]).await.unwrap() {
                out.push(r.get::<_, String>(0));
            }
        }
        out
    })
}

/// (thread, checkpoint, checkpoint JSONB text, metadata text, messages blob md5) rows.
fn thread_rows(uri: &str) -> Vec<(String, String)> {
    let rt = runtime();
    let c = connect(&rt, uri);
    rt.block_on(async {
        c.query(
            "SELECT c.thread_id, concat_ws('|', c.checkpoint_id, c.checkpoint::text, c.metadata::text, \
             (SELECT md5(b.blob) FROM checkpoint_blobs b WHERE b.thread_id = c.thread_id \
              AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = 'messages' \
              AND b.version = c.checkpoint -> 'channel_versions' ->> 'messages')) \
             FROM checkpoints c ORDER BY 1, 2",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
    })
}

/// No delta signal in the raw rows: no marker, no `messages` counter, no inline `true`, no
/// ext-7 snapshot blob (`c7/c8/c9 … 07` header).
fn assert_no_delta_rows(uri: &str, what: &str) {
    let rt = runtime();
    let c = connect(&rt, uri);
    let n: i64 = rt.block_on(async {
        c.query_one(
            "SELECT (SELECT count(*) FROM checkpoints WHERE metadata ? 'deerflow_checkpoint_channel_mode' \
                OR metadata -> 'counters_since_delta_snapshot' ? 'messages' \
                OR checkpoint -> 'channel_values' -> 'messages' = 'true'::jsonb) \
             + (SELECT count(*) FROM checkpoint_blobs WHERE channel = 'messages' AND ( \
                (get_byte(blob, 0) = 199 AND get_byte(blob, 2) = 7) \
                OR (get_byte(blob, 0) = 200 AND get_byte(blob, 3) = 7) \
                OR (get_byte(blob, 0) = 201 AND get_byte(blob, 5) = 7)))",
            &[],
        )
        .await
        .unwrap()
        .get(0)
    });
    assert_eq!(n, 0, "{what}: delta rows remain");
}

#[test]
fn converted_postgres_fixtures_show_the_delta_view_everywhere() {
    let Some(server) = pg_server() else { return };
    let mut total = 0;
    for (i, stem) in ["delta_k1", "delta_k3", "delta_k10", "mixed", "deerflow"]
        .into_iter()
        .enumerate()
    {
        let uri = fresh_db(
            &server,
            &format!("dfck_{stem}"),
            &format!("dfck_mig_{stem}"),
        );
        let before = untouched(&uri);
        // Alternate one and several connections: the result must not depend on it.
        let jobs = if i % 2 == 0 { "1" } else { "3" };
        let (report, exit) = apply(&uri, &["--jobs", jobs]);
        assert_eq!(exit, 0, "{stem}: {report}");
        assert_eq!(report["refused"], 0, "{stem}: {report}");
        assert!(report["converted"].as_u64().unwrap() > 0, "{stem}");
        let exp = expected_in("expected-pg", stem);
        let (tally, bad) = compare::check_fixture_as(stem, &uri, &exp, true);
        assert!(bad.is_empty(), "{stem}: {bad:#?}");
        total += tally.states;
        for t in exp["threads"].as_array().unwrap() {
            let tid = t["thread_id"].as_str().unwrap();
            let listing = dfck_json(&uri, &["inspect", tid, "--format", "json"]);
            for c in listing["checkpoints"].as_array().unwrap() {
                assert_eq!(c["mode"], "full", "{stem} {tid} {}", c["checkpoint_id"]);
                assert!(
                    c["messages_encoding"] == "plain" || c["messages_encoding"] == "unversioned",
                    "{stem} {tid}: {c}"
                );
            }
        }
        assert_no_delta_rows(&uri, stem);
        let out = dfck(&uri, &["verify"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stem}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(before, untouched(&uri), "{stem}: untouched rows changed");
        let (again, exit) = apply(&uri, &[]);
        assert_eq!(exit, 0);
        assert_eq!(again["converted"], 0, "{stem}: {again}");
    }
    println!(
        "migrate (postgres): {total} converted checkpoint states equal LangGraph's delta view"
    );
}

#[test]
fn postgres_contaminated_forks_are_refused_unless_the_delta_view_is_accepted() {
    let Some(server) = pg_server() else { return };
    let uri = fresh_db(
        &server,
        "dfck_defect_contaminated_fork",
        "dfck_mig_contaminated",
    );
    let before = thread_rows(&uri);
    let (report, exit) = apply_strict(&uri, &[]);
    assert_eq!(exit, 1, "{report}");
    assert_eq!(report["converted"], 0, "{report}");
    assert!(
        report["threads"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("#4458")
    );
    assert_eq!(before, thread_rows(&uri), "a refused thread was written");
    // With --accept-delta-view: exactly what delta mode showed, at every checkpoint.
    let tid = report["threads"][0]["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let listing = dfck_json(&uri, &["inspect", &tid, "--format", "json"]);
    let ids: Vec<String> = listing["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkpoint_id"].as_str().unwrap().to_owned())
        .collect();
    let state = |id: &str| {
        dfck_json(
            &uri,
            &[
                "inspect",
                &tid,
                "--checkpoint",
                id,
                "--state",
                "--format",
                "json",
            ],
        )["values"]
            .clone()
    };
    let views: Vec<Json> = ids.iter().map(|id| state(id)).collect();
    let (report, exit) = apply_strict(&uri, &["--accept-delta-view"]);
    assert_eq!(exit, 0, "{report}");
    assert_eq!(report["converted"], 1);
    assert!(
        !report["threads"][0]["accepted_delta_view"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    for (id, view) in ids.iter().zip(&views) {
        assert_eq!(&state(id), view, "checkpoint {id}");
    }
    assert_no_delta_rows(&uri, "contaminated_fork");
}

#[test]
fn killing_dfck_mid_postgres_conversion_leaves_each_thread_old_or_new() {
    let Some(server) = pg_server() else { return };
    for after in [1usize, 20, 45] {
        let uri = fresh_db(&server, "dfck_delta_k3", &format!("dfck_mig_crash_{after}"));
        let orig = thread_rows(&with_db(&server, "dfck_delta_k3"));
        let out = crate::common::dfck_command()
            .args([
                "--db",
                &uri,
                "migrate",
                "delta-to-full",
                "--all",
                "--apply",
                "--accept-delta-view",
            ])
            .env("DFCK_FAILPOINT", format!("migrate-abort-after:{after}"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), None, "the failpoint kills the process");
        // Per thread: rows identical to the original, or free of every delta signal.
        let now = thread_rows(&uri);
        let threads: std::collections::BTreeSet<&String> = now.iter().map(|(t, _)| t).collect();
        let mut converted = 0;
        for t in &threads {
            let a: Vec<_> = now.iter().filter(|(x, _)| x == *t).collect();
            let b: Vec<_> = orig.iter().filter(|(x, _)| x == *t).collect();
            if a == b {
                continue;
            }
            assert!(
                a.iter()
                    .all(|(_, r)| !r.contains("deerflow_checkpoint_channel_mode")
                        && !r.contains("\"messages\": true")
                        && !r.contains("\"counters_since_delta_snapshot\": {\"messages\"")),
                "after {after}: thread {t} is half converted"
            );
            converted += 1;
        }
        assert!(converted < threads.len(), "after {after}");
        let (report, exit) = apply(&uri, &[]);
        assert_eq!(exit, 0, "{report}");
        assert_eq!(
            report["converted"].as_u64().unwrap() as usize,
            threads.len() - converted,
            "after {after}: {report}"
        );
        assert_no_delta_rows(&uri, "crash re-run");
        let (again, _) = apply(&uri, &[]);
        assert_eq!(again["converted"], 0);
    }
}

#[test]
fn a_concurrent_postgres_writer_loses_nothing_and_locked_threads_wait_their_turn() {
    let Some(server) = pg_server() else { return };
    let uri = fresh_db(&server, "dfck_delta_k10", "dfck_mig_concurrent");
    // Another connection keeps writing a different thread during the whole migration.
    let w_uri = uri.clone();
    let writer = std::thread::spawn(move || {
        let rt = runtime();
        let c = connect(&rt, &w_uri);
        rt.block_on(async {
            for i in 0..200i32 {
                c.execute(
                    "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob) \
                     VALUES ('zz-other', '', 'c', 't', $1, 'x', 'null', '')",
                    &[&i],
                )
                .await
                .unwrap();
            }
        });
    });
    // A thread whose lock another dfck holds is refused, the rest converted.
    let rt = runtime();
    let holder = connect(&rt, &uri);
    rt.block_on(async {
        holder
            .batch_execute(
                "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('dfck migrate ' || 't-linear', 0))",
            )
            .await
            .unwrap();
    });
    let (report, exit) = apply(&uri, &["--jobs", "2"]);
    writer.join().unwrap();
    assert_eq!(exit, 1, "{report}");
    let find = |r: &Json, t: &str| {
        r["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["thread_id"] == t)
            .cloned()
            .unwrap()
    };
    let linear = find(&report, "t-linear");
    assert_eq!(linear["status"], "refused", "{report}");
    assert!(linear["reason"].as_str().unwrap().contains("another dfck"));
    assert_eq!(report["refused"], 1, "{report}");
    rt.block_on(async { holder.batch_execute("ROLLBACK").await.unwrap() });
    let n: i64 = rt.block_on(async {
        holder
            .query_one(
                "SELECT count(*) FROM checkpoint_writes WHERE thread_id = 'zz-other'",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    });
    assert_eq!(n, 200);
    // Once the lock is gone, a re-run converts the last thread.
    let (report, exit) = apply(&uri, &[]);
    assert_eq!(exit, 0, "{report}");
    assert_eq!(report["converted"], 1, "{report}");
    assert_no_delta_rows(&uri, "concurrent");
}

#[test]
fn an_active_deerflow_run_blocks_its_postgres_thread() {
    let Some(server) = pg_server() else { return };
    let uri = fresh_db(&server, "dfck_delta_k3", "dfck_mig_runs");
    let rt = runtime();
    let c = connect(&rt, &uri);
    rt.block_on(async {
        c.batch_execute(
            "CREATE TABLE runs (run_id TEXT PRIMARY KEY, thread_id TEXT, status TEXT);
             INSERT INTO runs VALUES ('r1', 't-linear', 'pending'), ('r2', 't-fork', 'error');",
        )
        .await
        .unwrap();
    });
    let (report, exit) = apply(&uri, &[]);
    assert_eq!(exit, 1, "{report}");
    assert_eq!(report["refused"], 1, "{report}");
    assert_eq!(report["converted"].as_u64().unwrap(), 7, "{report}");
}

#[test]
fn a_live_writer_holding_a_threads_rows_gets_that_thread_refused_not_the_run_failed() {
    let Some(server) = pg_server() else { return };
    let uri = fresh_db(&server, "dfck_delta_k3", "dfck_mig_rowlock");
    let rt = runtime();
    let holder = connect(&rt, &uri);
    rt.block_on(async {
        holder
            .batch_execute(
                "BEGIN; SELECT 1 FROM checkpoints WHERE thread_id = 't-linear' FOR UPDATE",
            )
            .await
            .unwrap();
    });
    let (report, exit) = apply(&uri, &[]);
    assert_eq!(exit, 1, "refused, not failed: {report}");
    let linear = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["thread_id"] == "t-linear")
        .cloned()
        .unwrap();
    assert_eq!(linear["status"], "refused", "{report}");
    assert!(
        linear["reason"]
            .as_str()
            .unwrap()
            .contains("another writer"),
        "{report}"
    );
    assert_eq!(report["refused"], 1, "{report}");
    rt.block_on(async { holder.batch_execute("ROLLBACK").await.unwrap() });
    let (report, exit) = apply(&uri, &[]);
    assert_eq!(exit, 0, "{report}");
    assert_eq!(report["converted"], 1, "{report}");
    assert_no_delta_rows(&uri, "row lock");
}
