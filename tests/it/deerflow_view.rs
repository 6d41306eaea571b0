//! The DeerFlow database as `inspect` and `verify` show it (docs/deerflow-database.md), on the
//! DeerFlow fixture in SQLite and PostgreSQL: DeerFlow's tables in the space report, each
//! thread's title, owner, status, runs (operation_kind 'run' only), last run and tokens; the
//! `deerflow.*` findings; `--user` selecting a user's threads.

use crate::common::*;
use serde_json::Value as Json;

const DB: &str = "fixtures/sqlite/deerflow_app.db";
const BOB: &str = "a0000000-0000-4000-8000-000000000003";

fn sqlite() -> String {
    sqlite_fixture("deerflow_app").display().to_string()
}

fn per_thread(summary: &Json) -> Vec<(String, Json)> {
    summary["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["thread_id"].as_str().unwrap().to_owned(),
                t["deerflow"].clone(),
            )
        })
        .collect()
}

#[test]
fn the_summary_shows_threads_as_deerflow_lists_them() {
    let s = dfck_json(&sqlite(), &["inspect", "--format", "json"]);
    let d = &s["deerflow"];
    assert_eq!(d["revision"], "0013_mcp_task_notifications");
    let tables: Vec<&str> = d["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(tables.len(), 15, "{tables:?}");
    assert_eq!(d["tables"][3]["table"], "run_events");
    assert_eq!(d["tables"][3]["rows"], 104);
    let threads = per_thread(&s);
    let t05 = &threads.iter().find(|(t, _)| t.ends_with("0005")).unwrap().1;
    // Thread 05 has three runs rows, one of them DeerFlow's pending delete reservation.
    assert_eq!(t05["runs"], 2, "reservations are not runs");
    assert_eq!(t05["title"], "Meeting notes");
    let t01 = &threads.iter().find(|(t, _)| t.ends_with("0001")).unwrap().1;
    assert_eq!(
        (t01["tokens"].as_u64(), t01["pinned"].as_bool()),
        (Some(2293), Some(true))
    );
    let unlisted = &threads
        .iter()
        .find(|(t, _)| t == "legacy.thread.0001")
        .unwrap()
        .1;
    assert_eq!(unlisted["listed"], false);
}

#[test]
fn postgres_shows_the_same_deerflow_threads() {
    let Some(server) = require_postgres("the DeerFlow summary on PostgreSQL") else {
        return;
    };
    let pg = dfck_json(
        &with_db(&server, "dfck_deerflow_app"),
        &["inspect", "--format", "json"],
    );
    let lite = dfck_json(&sqlite(), &["inspect", "--format", "json"]);
    assert_eq!(per_thread(&pg), per_thread(&lite));
    for k in [
        "revision",
        "listed_threads",
        "listed_without_checkpoints",
        "unlisted_threads",
        "active_runs",
    ] {
        assert_eq!(pg["deerflow"][k], lite["deerflow"][k], "{k}");
    }
}

#[test]
fn verify_names_what_deerflow_cannot_show_or_run() {
    let out = dfck(&sqlite(), &["verify", "--format", "json"]);
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    let mut got: Vec<(String, String)> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"].as_str().unwrap().starts_with("deerflow."))
        .map(|f| {
            let t = f["thread_id"].as_str().unwrap();
            (
                f["code"].as_str().unwrap().to_owned(),
                t[t.len() - 4..].to_owned(),
            )
        })
        .collect();
    got.sort();
    let want = [
        ("deerflow.listed_without_checkpoints", "000b"),
        ("deerflow.listed_without_checkpoints", "000c"),
        // 04: a running run whose lease expired; 05: a pending delete reservation whose lease
        // expired; 0b: a pending run with no lease. 03's lease is live.
        ("deerflow.stale_run_lease", "0004"),
        ("deerflow.stale_run_lease", "0005"),
        ("deerflow.stale_run_lease", "000b"),
        ("deerflow.unlisted_thread", "0001"),
        ("deerflow.unlisted_thread", "0007"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(c, t)| ((*c).into(), (*t).into()))
        .collect();
    assert_eq!(got, want);
    for code in [
        "deerflow.listed_without_checkpoints",
        "deerflow.unlisted_thread",
        "deerflow.stale_run_lease",
    ] {
        let e = dfck_command().args(["explain", code]).output().unwrap();
        assert!(e.status.success() && !e.stdout.is_empty(), "explain {code}");
    }
}

#[test]
fn user_selects_the_threads_deerflow_lists_for_them() {
    let r = dfck_json(DB, &["verify", "--user", BOB, "--format", "json"]);
    assert_eq!(
        r["threads_checked"], 1,
        "bob owns one thread with checkpoints"
    );
    let plan = dfck_json(
        DB,
        &[
            "migrate",
            "delta-to-full",
            "--user",
            BOB,
            "--format",
            "json",
        ],
    );
    let ids: Vec<&str> = plan["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["df0a0000-0000-4000-8000-000000000006"]);
    let out = dfck(DB, &["verify", "--user", "nobody-at-all"]);
    assert_clean_failure(&out, "nobody-at-all");
}

/// The ids of one `deerflow.*` finding code in a `verify --format ndjson` output, in order.
fn ids_of(out: &[u8], code: &str) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap())
        .filter(|f| f["code"] == code)
        .map(|f| f["thread_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The two mismatch lists stream in byte order of the thread ids, as the SQLite store and a
/// `C` database give them, also where `thread_id` sorts by a linguistic collation (ICU
/// `en-US`, which puts `ta` before `tA`; `COLLATE "C"` in the anti-joins).
#[test]
fn deerflow_mismatches_come_in_byte_order_under_a_linguistic_collation() {
    let Some(server) = require_postgres("DeerFlow mismatches under an ICU collation") else {
        return;
    };
    let target = crate::common::pg::clone_db(&server, "dfck_deerflow_app", "dfck_deerflow_icu");
    let rt = crate::common::pg::runtime();
    let c = crate::common::pg::connect(&rt, &target);
    let run = |sql: &str| rt.block_on(c.batch_execute(sql)).unwrap();
    for table in ["threads_meta", "checkpoints"] {
        let ty: String = rt
            .block_on(c.query_one(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
                 WHERE attrelid = $1::text::regclass AND attname = 'thread_id'",
                &[&table],
            ))
            .unwrap()
            .get(0);
        run(&format!(
            "ALTER TABLE {table} ALTER COLUMN thread_id TYPE {ty} COLLATE \"en-US-x-icu\""
        ));
    }
    let ids = ["t-b", "tA", "ta"];
    for id in ids {
        // Listed without checkpoints, and with checkpoints but unlisted.
        run(&format!(
            "INSERT INTO threads_meta SELECT (jsonb_populate_record(NULL::threads_meta, \
             to_jsonb(t) || jsonb_build_object('thread_id', 'l{id}'))).* \
             FROM threads_meta t LIMIT 1; \
             INSERT INTO checkpoints SELECT (jsonb_populate_record(NULL::checkpoints, \
             to_jsonb(k) || jsonb_build_object('thread_id', 'u{id}'))).* \
             FROM checkpoints k WHERE k.parent_checkpoint_id IS NULL LIMIT 1"
        ));
    }
    // The server's own order of the new ids is not byte order: the test can tell.
    let linguistic: Vec<String> = rt
        .block_on(c.query(
            "SELECT thread_id::text FROM threads_meta WHERE thread_id LIKE 'lt%' \
             ORDER BY thread_id",
            &[],
        ))
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut bytewise = linguistic.clone();
    bytewise.sort();
    assert_ne!(linguistic, bytewise);
    let out = dfck(&target, &["verify", "--format", "ndjson"]);
    for (code, prefix) in [
        ("deerflow.listed_without_checkpoints", "l"),
        ("deerflow.unlisted_thread", "u"),
    ] {
        let got = ids_of(&out.stdout, code);
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(got, sorted, "{code}");
        for id in ids {
            assert!(got.contains(&format!("{prefix}{id}")), "{code} {got:?}");
        }
    }
}
