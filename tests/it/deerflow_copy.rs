//! `dfck copy` of a DeerFlow database moves DeerFlow's own tables with the checkpoints: the
//! DeerFlow fixture copied SQLite → SQLite and SQLite → PostgreSQL → SQLite into databases
//! holding DeerFlow's schema (fixtures/deerflow-schema plus the alembic row of its head)
//! comes back with every row of every DeerFlow table as stored; PostgreSQL's
//! `run_events_id_seq` moves past the copied ids; a rerun skips everything; a target at
//! another alembic revision, or without DeerFlow's tables, is refused with exit 2 before
//! anything is written (`--checkpoints-only` copies the checkpoints alone); a differing row
//! is refused (exit 1, target untouched) and overwritten with `--replace`, which purges the
//! replaced thread's keys from the target's history cache; credentials and password hashes
//! never reach stdout or stderr.

use crate::common::*;
use rusqlite::Connection;
use rusqlite::types::Value;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Thread A (alice, 27 checkpoints, runs, events, feedback, an MCP task).
pub(crate) const T_A: &str = "df0a0000-0000-4000-8000-000000000001";
/// Thread K: listed by DeerFlow, a pending run, no checkpoints.
pub(crate) const T_K: &str = "df0a0000-0000-4000-8000-00000000000b";

fn schema_dir() -> PathBuf {
    root().join("fixtures/deerflow-schema")
}

/// The alembic head DeerFlow's schema fixtures were rendered at.
pub(crate) fn head() -> String {
    let source = std::fs::read_to_string(schema_dir().join("SOURCE")).unwrap();
    source
        .lines()
        .find_map(|l| l.strip_prefix("alembic_head:"))
        .unwrap()
        .trim()
        .to_owned()
}

/// Every DeerFlow table of the schema fixture.
pub(crate) fn deerflow_tables() -> Vec<String> {
    std::fs::read_to_string(schema_dir().join("sqlite.sql"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("CREATE TABLE "))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect()
}

/// A SQLite file holding DeerFlow's schema at `revision` and no rows, as DeerFlow's bootstrap
/// leaves an empty database ("create_all + alembic stamp head").
pub(crate) fn sqlite_schema(path: &Path, revision: &str) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(&std::fs::read_to_string(schema_dir().join("sqlite.sql")).unwrap())
        .unwrap();
    c.execute("INSERT INTO alembic_version VALUES (?1)", [revision])
        .unwrap();
}

/// A fresh database `dfck_copy_df_<name>` holding DeerFlow's schema at the head, no rows.
pub(crate) fn pg_schema(uri: &str, name: &str) -> String {
    let rt = pg::runtime();
    let admin = pg::connect(&rt, uri);
    let db = format!("dfck_copy_df_{name}");
    for sql in [
        format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"),
        format!("CREATE DATABASE \"{db}\""),
    ] {
        rt.block_on(admin.batch_execute(&sql)).unwrap();
    }
    let url = with_db(uri, &db);
    let client = pg::connect(&rt, &url);
    let ddl: String = std::fs::read_to_string(schema_dir().join("postgres.sql"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('\\'))
        .map(|l| format!("{l}\n"))
        .collect();
    rt.block_on(client.batch_execute(&ddl)).unwrap();
    rt.block_on(client.execute("INSERT INTO public.alembic_version VALUES ($1)", &[&head()]))
        .unwrap();
    url
}

/// Every row of every DeerFlow table and of LangGraph's tables, as stored, sorted.
pub(crate) fn rows(path: &Path) -> BTreeMap<String, Vec<Vec<Value>>> {
    let c = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut out = BTreeMap::new();
    for t in deerflow_tables()
        .into_iter()
        .chain(["checkpoints".into(), "writes".into()])
    {
        let Ok(mut st) = c.prepare(&format!("SELECT * FROM \"{t}\"")) else {
            out.insert(t, Vec::new());
            continue;
        };
        let n = st.column_count();
        let mut v: Vec<Vec<Value>> = st
            .query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        v.sort_by_key(|r| format!("{r:?}"));
        out.insert(t, v);
    }
    out
}

/// The fixture's secret values: password hashes, encrypted channel credentials, OAuth state.
pub(crate) fn secrets() -> Vec<String> {
    let c = Connection::open_with_flags(
        sqlite_fixture("deerflow_app"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut out = Vec::new();
    for sql in [
        "SELECT password_hash FROM users",
        "SELECT encrypted_access_token FROM channel_credentials",
        "SELECT encrypted_refresh_token FROM channel_credentials",
        "SELECT encrypted_extra_json FROM channel_credentials",
        "SELECT code_verifier_encrypted FROM channel_oauth_states",
        "SELECT state_hash FROM channel_oauth_states",
        "SELECT nonce_hash FROM channel_oauth_states",
    ] {
        let mut st = c.prepare(sql).unwrap();
        out.extend(
            st.query_map([], |r| r.get::<_, Option<String>>(0))
                .unwrap()
                .filter_map(|v| v.unwrap()),
        );
    }
    assert!(out.len() >= 5, "the fixture has secrets: {}", out.len());
    out
}

/// Runs `dfck --db SOURCE copy ARGS`, and checks that no secret reached stdout or stderr.
pub(crate) fn copy(source: &str, args: &[&str]) -> Output {
    let out = dfck(source, &[&["copy"][..], args].concat());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for s in secrets() {
        assert!(!text.contains(&s), "a secret was printed by copy {args:?}");
    }
    out
}

pub(crate) fn json(out: &Output) -> Json {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub(crate) fn thread<'a>(report: &'a Json, id: &str) -> &'a Json {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {report}"))
}

#[test]
fn sqlite_to_sqlite_copies_every_deerflow_row_and_a_rerun_skips() {
    let (_d, src) = temp_copy(&sqlite_fixture("deerflow_app"));
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target.db");
    sqlite_schema(&target, &head());
    let dry = copy(s(&src), &["--to", s(&target), "--all", "--format", "json"]);
    assert_eq!(dry.status.code(), Some(0));
    let plan = json(&dry);
    assert_eq!(plan["deerflow"]["shared"]["status"], "would");
    assert_eq!(plan["deerflow"]["rows"]["run_events"], 104);
    assert_eq!(
        rows(&target).values().map(Vec::len).sum::<usize>(),
        1,
        "a dry run writes nothing (the alembic row only)"
    );

    let out = copy(
        s(&src),
        &["--to", s(&target), "--all", "--apply", "--format", "json"],
    );
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(
        report["target_created"], true,
        "LangGraph's tables set up beside DeerFlow's"
    );
    assert_eq!(report["deerflow"]["revision"], head());
    assert_eq!(report["deerflow"]["shared"]["status"], "done");
    assert_eq!(report["deerflow"]["shared"]["rows"]["users"], 3);
    assert_eq!(report["not_copied"], serde_json::json!([]));
    let a = thread(&report, T_A);
    assert_eq!(a["deerflow_rows"]["runs"], 7, "{a}");
    assert_eq!(a["deerflow_rows"]["run_events"], 42, "{a}");
    let k = thread(&report, T_K);
    assert_eq!(
        k["status"], "done",
        "a listed thread without checkpoints: {k}"
    );
    assert_eq!(k["checkpoints"], 0);
    assert_eq!(k["deerflow_rows"]["threads_meta"], 1);
    let want = rows(&sqlite_fixture("deerflow_app"));
    let got = rows(&target);
    for (t, r) in &want {
        let got = got.get(t).unwrap();
        assert_eq!(got.len(), r.len(), "{t}: rows");
        // Values as DeerFlow stores them (credentials compared, never printed).
        assert!(got == r, "{t}: rows differ from the original's");
    }

    let again = copy(
        s(&src),
        &["--to", s(&target), "--all", "--apply", "--format", "json"],
    );
    let r = json(&again);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(r["copied"], 0, "{r}");
    assert_eq!(r["skipped"], r["threads"].as_array().unwrap().len());
    assert_eq!(r["deerflow"]["shared"]["status"], "skipped");
    assert_eq!(r["deerflow"]["rows"], serde_json::json!({}));
    assert!(rows(&target) == got, "a rerun changes nothing");

    // The human report says what moved.
    let human = copy(s(&src), &["--to", s(&target), "--all"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains(&format!("deerflow: schema {}", head())),
        "{text}"
    );
    assert!(
        text.contains("deerflow rows outside threads: skipped"),
        "{text}"
    );
    assert!(!text.contains("not copied"), "{text}");
}

#[test]
fn sqlite_to_postgres_to_sqlite_gives_the_same_rows() {
    let Some(uri) = require_postgres("DeerFlow copy round trip") else {
        return;
    };
    let (_d, src) = temp_copy(&sqlite_fixture("deerflow_app"));
    let pg = pg_schema(&uri, "round");
    let out = copy(
        s(&src),
        &[
            "--to", &pg, "--all", "--apply", "--jobs", "2", "--format", "json",
        ],
    );
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert_eq!(report["deerflow"]["rows"]["run_events"], 104);

    let rt = pg::runtime();
    let client = pg::connect(&rt, &pg);
    let one = |sql: &str| -> i64 { rt.block_on(client.query_one(sql, &[])).unwrap().get(0) };
    let orig = rows(&sqlite_fixture("deerflow_app"));
    for t in deerflow_tables() {
        let n = one(&format!("SELECT count(*) FROM \"{t}\""));
        assert_eq!(n as usize, orig[&t].len(), "{t} on PostgreSQL");
    }
    // timestamptz holds the instants DeerFlow's SQLite text names (UTC).
    let times: Vec<Vec<Value>> = rt
        .block_on(client.query(
            "SELECT thread_id, to_char(created_at AT TIME ZONE 'UTC', \
             'YYYY-MM-DD HH24:MI:SS.US') FROM threads_meta ORDER BY 1",
            &[],
        ))
        .unwrap()
        .iter()
        .map(|r| vec![Value::Text(r.get(0)), Value::Text(r.get(1))])
        .collect();
    let c = Connection::open_with_flags(
        sqlite_fixture("deerflow_app"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut st = c
        .prepare("SELECT thread_id, created_at FROM threads_meta ORDER BY 1")
        .unwrap();
    let want: Vec<Vec<Value>> = st
        .query_map([], |r| Ok(vec![r.get(0)?, r.get(1)?]))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(times, want, "threads_meta.created_at on PostgreSQL");
    let max = one("SELECT max(id)::bigint FROM run_events");
    let next = one("SELECT nextval('run_events_id_seq')");
    assert!(
        next > max,
        "run_events_id_seq hands out {next}, max(id) is {max}"
    );

    let back_dir = tempfile::tempdir().unwrap();
    let back = back_dir.path().join("back.db");
    sqlite_schema(&back, &head());
    let out = copy(
        &pg,
        &["--to", s(&back), "--all", "--apply", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", json(&out));
    let got = rows(&back);
    for t in deerflow_tables().iter().chain(&["writes".to_owned()]) {
        assert!(
            got[t] == orig[t],
            "{t}: not the original's rows as stored after SQLite → PostgreSQL → SQLite"
        );
    }
    assert_eq!(got["checkpoints"].len(), orig["checkpoints"].len());

    // A rerun into PostgreSQL skips every thread and the shared rows.
    let again = json(&copy(
        s(&src),
        &["--to", &pg, "--all", "--apply", "--format", "json"],
    ));
    assert_eq!(again["copied"], 0, "{again}");
    assert_eq!(again["deerflow"]["shared"]["status"], "skipped");
}

#[test]
fn postgres_fixture_to_sqlite_keeps_every_table() {
    let Some(uri) = require_postgres("DeerFlow copy from PostgreSQL") else {
        return;
    };
    let source = with_db(&uri, "dfck_deerflow_app");
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.db");
    sqlite_schema(&target, &head());
    let out = copy(
        &source,
        &["--to", s(&target), "--all", "--apply", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", json(&out));
    let rt = pg::runtime();
    let client = pg::connect(&rt, &source);
    let got = rows(&target);
    for t in deerflow_tables() {
        let n: i64 = rt
            .block_on(client.query_one(&format!("SELECT count(*) FROM \"{t}\""), &[]))
            .unwrap()
            .get(0);
        assert_eq!(got[&t].len(), n as usize, "{t}");
    }
    assert!(
        !got["webhook_deliveries"].is_empty(),
        "PostgreSQL-only rows copied"
    );
    // Times as DeerFlow's SQLite stores them: UTC text with six fractional digits.
    for row in &got["webhook_deliveries"] {
        let Value::Text(t) = &row[4] else {
            panic!("first_seen is not text")
        };
        assert!(
            t.len() == 26 && t.as_bytes()[10] == b' ' && t.as_bytes()[19] == b'.',
            "{t}"
        );
    }
}

#[test]
fn another_revision_or_no_deerflow_schema_is_refused_before_anything_is_written() {
    let (_d, src) = temp_copy(&sqlite_fixture("deerflow_app"));
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.db");
    sqlite_schema(&old, "0012_mcp_task_results");
    let before = std::fs::read(&old).unwrap();
    let err = assert_clean_failure(
        &copy(s(&src), &["--to", s(&old), "--all", "--apply"]),
        "start DeerFlow once against the target",
    );
    assert!(
        err.contains(&head()) && err.contains("0012_mcp_task_results"),
        "{err}"
    );
    assert_eq!(std::fs::read(&old).unwrap(), before, "nothing written");

    let bare = dir.path().join("bare.db");
    let err = assert_clean_failure(
        &copy(s(&src), &["--to", s(&bare), "--all", "--apply"]),
        "--checkpoints-only",
    );
    assert!(err.contains("no DeerFlow tables"), "{err}");
    assert!(!bare.exists(), "nothing set up");
    let out = copy(
        s(&src),
        &[
            "--to",
            s(&bare),
            "--all",
            "--apply",
            "--checkpoints-only",
            "--format",
            "json",
        ],
    );
    let r = json(&out);
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(r["deerflow"], Json::Null);
    assert!(
        r["not_copied"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "users")
    );
    assert_eq!(r["checkpoints"], 79);

    if let Some(uri) = require_postgres("DeerFlow copy into another revision") {
        let pg = pg_schema(&uri, "oldrev");
        let rt = pg::runtime();
        let client = pg::connect(&rt, &pg);
        rt.block_on(
            client.batch_execute("UPDATE alembic_version SET version_num = '0011_mcp_tasks'"),
        )
        .unwrap();
        let err = assert_clean_failure(
            &copy(s(&src), &["--to", &pg, "--all", "--apply"]),
            "0011_mcp_tasks",
        );
        assert!(err.contains(&head()), "{err}");
        let n: i64 = rt
            .block_on(client.query_one(
                "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'checkpoint%'",
                &[],
            ))
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "LangGraph's tables not set up");
    }
}

#[test]
fn a_differing_row_is_refused_and_replaced_with_replace() {
    let (_d, src) = temp_copy(&sqlite_fixture("deerflow_app"));
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.db");
    sqlite_schema(&target, &head());
    assert_eq!(
        copy(s(&src), &["--to", s(&target), "--all", "--apply"])
            .status
            .code(),
        Some(0)
    );
    let copied = rows(&target);
    {
        let c = Connection::open(&target).unwrap();
        c.execute_batch(&format!(
            "UPDATE runs SET total_tokens = total_tokens + 1 WHERE thread_id = '{T_A}' \
             AND run_id = (SELECT min(run_id) FROM runs WHERE thread_id = '{T_A}'); \
             UPDATE channel_oauth_states SET redirect_after = 'https://elsewhere.example';"
        ))
        .unwrap();
    }
    let changed = rows(&target);
    let out = copy(
        s(&src),
        &["--to", s(&target), "--all", "--apply", "--format", "json"],
    );
    let r = json(&out);
    assert_eq!(out.status.code(), Some(1), "{r}");
    let a = thread(&r, T_A);
    assert_eq!(a["status"], "refused");
    let why = a["reason"].as_str().unwrap();
    assert!(why.contains("runs") && why.contains("--replace"), "{why}");
    assert_eq!(r["deerflow"]["shared"]["status"], "refused");
    let why = r["deerflow"]["shared"]["reason"].as_str().unwrap();
    assert!(why.contains("channel_oauth_states"), "{why}");
    assert_eq!(r["refused"], 1, "only the changed thread");
    assert!(rows(&target) == changed, "refused: the target is untouched");

    let out = copy(
        s(&src),
        &[
            "--to",
            s(&target),
            "--all",
            "--apply",
            "--replace",
            "--format",
            "json",
        ],
    );
    let r = json(&out);
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert_eq!(thread(&r, T_A)["status"], "done");
    assert_eq!(r["deerflow"]["shared"]["replaced"], 1);
    assert!(rows(&target) == copied, "replaced by the source's rows");
    let again = json(&copy(
        s(&src),
        &["--to", s(&target), "--all", "--apply", "--format", "json"],
    ));
    assert_eq!(again["copied"], 0);
    assert_eq!(again["refused"], 0);
}

#[test]
fn named_threads_carry_their_rows_and_a_value_the_target_cannot_hold_refuses() {
    let (_d, src) = temp_copy(&sqlite_fixture("deerflow_app"));
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.db");
    sqlite_schema(&target, &head());
    let out = copy(
        s(&src),
        &["--to", s(&target), T_A, T_K, "--apply", "--format", "json"],
    );
    let r = json(&out);
    assert_eq!(out.status.code(), Some(0), "{r}");
    assert!(
        r["deerflow"]["shared"].is_null(),
        "named threads: no shared rows"
    );
    let got = rows(&target);
    assert!(got["users"].is_empty());
    assert_eq!(got["threads_meta"].len(), 2);
    assert_eq!(got["run_events"].len(), 42);

    // A time the target cannot hold refuses the thread, naming the column, not the value.
    let c = Connection::open(&src).unwrap();
    c.execute(
        "UPDATE users SET created_at = 'not-a-time-7f3a' WHERE email = 'bob@example.com'",
        [],
    )
    .unwrap();
    drop(c);
    let out = copy(
        s(&src),
        &["--to", s(&target), "--all", "--apply", "--format", "json"],
    );
    let r = json(&out);
    assert_eq!(out.status.code(), Some(1), "{r}");
    let why = r["deerflow"]["shared"]["reason"].as_str().unwrap();
    assert!(
        why.contains("users.created_at") && !why.contains("7f3a"),
        "{why}"
    );
    assert!(
        rows(&target)["users"].is_empty(),
        "refused: no shared row written"
    );
}

fn redis_exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<u64>(con).unwrap() == 1
}

#[test]
fn replace_purges_the_replaced_threads_cache_keys_only() {
    let Some(url) = require_redis("copy --replace purging the history cache") else {
        return;
    };
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let prefix = format!("dfck-it-copy-{}", std::process::id());
    let (_d, src) = temp_copy(&sqlite_fixture("deerflow_app"));
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.db");
    sqlite_schema(&target, &head());
    let t_b = "df0a0000-0000-4000-8000-000000000002";
    assert_eq!(
        copy(s(&src), &["--to", s(&target), T_A, t_b, "--apply"])
            .status
            .code(),
        Some(0)
    );
    Connection::open(&target)
        .unwrap()
        .execute(
            "UPDATE threads_meta SET display_name = 'renamed' WHERE thread_id = ?1",
            [T_A],
        )
        .unwrap();
    for t in [T_A, t_b] {
        let _: () = redis::cmd("SET")
            .arg(format!("{prefix}:{t}:history"))
            .arg("x")
            .query(&mut con)
            .unwrap();
    }
    let to = [
        "--to",
        s(&target),
        "--redis-url",
        &url,
        "--cache-key-prefix",
        &prefix,
    ];
    let out = copy(
        s(&src),
        &[&to[..], &[T_A, t_b, "--apply", "--replace"]].concat(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !redis_exists(&mut con, &format!("{prefix}:{T_A}:history")),
        "replaced: purged"
    );
    let kept = format!("{prefix}:{t_b}:history");
    assert!(redis_exists(&mut con, &kept), "skipped: kept");
    let _: () = redis::cmd("DEL").arg(&kept).query(&mut con).unwrap();
}
