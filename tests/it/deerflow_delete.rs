//! `dfck delete` on the DeerFlow fixture (fixtures/deerflow-schema/README.md), SQLite and
//! PostgreSQL: deleted as DeerFlow's own thread delete does (docs/deerflow-database.md) — the
//! thread list entry with the checkpoints, runs and events kept, active threads refused and
//! untouched, dfck's reservation gone afterwards, files removed without following links out;
//! `--erase` and its receipt; a crashed delete resumed; the schema revision it needs; the
//! history-cache keys in a real Redis; `prune --idle` on a DeerFlow store going through it.

use crate::common::pg::{clone_db, connect, runtime};
use crate::common::*;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

const T01: &str = "df0a0000-0000-4000-8000-000000000001";
const T02: &str = "df0a0000-0000-4000-8000-000000000002";
const T03: &str = "df0a0000-0000-4000-8000-000000000003";
const T05: &str = "df0a0000-0000-4000-8000-000000000005";
const T06: &str = "df0a0000-0000-4000-8000-000000000006";
const T09: &str = "df0a0000-0000-4000-8000-000000000009";
const ALICE: &str = "a0000000-0000-4000-8000-000000000002";
const BOB: &str = "a0000000-0000-4000-8000-000000000003";

/// A scratch copy of the DeerFlow fixture on one backend.
enum Db {
    Sqlite(#[allow(dead_code)] tempfile::TempDir, PathBuf),
    Pg(String),
}

impl Db {
    fn sqlite() -> Db {
        let (dir, path) = temp_copy(&sqlite_fixture("deerflow_app"));
        Db::Sqlite(dir, path)
    }

    fn pg(server: &str, name: &str) -> Db {
        Db::Pg(clone_db(server, "dfck_deerflow_app", name))
    }

    fn target(&self) -> String {
        match self {
            Db::Sqlite(_, p) => p.display().to_string(),
            Db::Pg(uri) => uri.clone(),
        }
    }

    /// The first column of `sql` (written to run on both backends, text results).
    fn texts(&self, sql: &str) -> Vec<String> {
        match self {
            Db::Sqlite(_, p) => {
                let c = rusqlite::Connection::open(p).unwrap();
                let mut st = c.prepare(sql).unwrap();
                st.query_map([], |r| r.get::<_, Option<String>>(0))
                    .unwrap()
                    .map(|r| r.unwrap().unwrap_or_default())
                    .collect()
            }
            Db::Pg(uri) => {
                let rt = runtime();
                let c = connect(&rt, uri);
                rt.block_on(c.query(sql, &[]))
                    .unwrap()
                    .iter()
                    .map(|r| r.get::<_, Option<String>>(0).unwrap_or_default())
                    .collect()
            }
        }
    }

    fn count(&self, sql: &str) -> u64 {
        self.texts(&format!("SELECT CAST(count(*) AS TEXT) FROM {sql}"))[0]
            .parse()
            .unwrap()
    }

    fn exec(&self, sql: &str) {
        match self {
            Db::Sqlite(_, p) => rusqlite::Connection::open(p)
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            Db::Pg(uri) => {
                let rt = runtime();
                rt.block_on(connect(&rt, uri).batch_execute(sql)).unwrap();
            }
        }
    }

    /// Rows of a thread in a table.
    fn rows_of(&self, table: &str, thread: &str) -> u64 {
        self.count(&format!("{table} WHERE thread_id = '{thread}'"))
    }

    fn checkpoints_of(&self, thread: &str) -> u64 {
        self.rows_of("checkpoints", thread)
    }
}

/// Runs `dfck --db T delete ARGS --format json` without DeerFlow's environment; (report, exit).
fn delete(db: &Db, args: &[&str]) -> (Json, i32) {
    let out = dfck_command()
        .env_remove("DEER_FLOW_HOME")
        .env_remove("DFCK_CACHE_REDIS_URL")
        .args(["--db", &db.target(), "delete"])
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let j = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "delete {args:?} exited {code} without JSON: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (j, code)
}

fn thread<'a>(report: &'a Json, tid: &str) -> &'a Json {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == tid)
        .unwrap_or_else(|| panic!("{tid} not in the report"))
}

/// A DeerFlow home with the files of thread 01 (its owner's and the legacy directory) and
/// a link in one of them to a directory outside, which must survive.
fn deerflow_home() -> (tempfile::TempDir, tempfile::TempDir, PathBuf, PathBuf) {
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep.txt"), b"not DeerFlow's").unwrap();
    let owned = home.path().join(format!("users/{ALICE}/threads/{T01}"));
    let legacy = home.path().join(format!("threads/{T01}"));
    std::fs::create_dir_all(owned.join("user-data/outputs")).unwrap();
    std::fs::write(owned.join("user-data/outputs/report.md"), b"# out").unwrap();
    std::os::unix::fs::symlink(outside.path(), owned.join("user-data/escape")).unwrap();
    std::fs::create_dir_all(&legacy).unwrap();
    let other = home.path().join(format!("users/{ALICE}/threads/{T09}"));
    std::fs::create_dir_all(&other).unwrap();
    (home, outside, owned, legacy)
}

/// Deletes 01, 02 (deleted), 03 (a running run) and 05 (DeerFlow's own pending delete) and
/// checks what DeerFlow would see afterwards.
fn delete_as_deerflow_does(db: &Db) {
    let before_03 = db.checkpoints_of(T03);
    let before_05 = db.checkpoints_of(T05);
    let runs_01 = db.rows_of("runs", T01);
    let events_01 = db.rows_of("run_events", T01);
    let (dry, code) = delete(db, &[T01, T02, T03, T05]);
    assert_eq!(code, 1, "refused threads exit 1");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(thread(&dry, T01)["status"], "would");
    assert_eq!(thread(&dry, T01)["app_rows"]["threads_meta"], 1);
    assert_eq!(db.checkpoints_of(T01), 27, "a dry run changes nothing");

    let (home, outside, owned, legacy) = deerflow_home();
    let home_arg = home.path().display().to_string();
    let (r, code) = delete(
        db,
        &[T01, T02, T03, T05, "--apply", "--deerflow-home", &home_arg],
    );
    assert_eq!(code, 1);
    assert_eq!(
        (r["deleted"].as_u64(), r["refused"].as_u64()),
        (Some(2), Some(2))
    );
    for t in [T01, T02] {
        assert_eq!(thread(&r, t)["status"], "done");
        assert_eq!(db.checkpoints_of(t), 0, "{t}: checkpoints gone");
        assert_eq!(db.rows_of("threads_meta", t), 0, "{t}: no longer listed");
    }
    assert_eq!(
        db.rows_of("runs", T01),
        runs_01,
        "DeerFlow's delete keeps runs"
    );
    assert_eq!(
        db.rows_of("run_events", T01),
        events_01,
        "and the message feed"
    );
    for (t, n) in [(T03, before_03), (T05, before_05)] {
        let why = thread(&r, t)["reason"].as_str().unwrap().to_owned();
        assert!(why.contains("work in flight"), "{t}: {why}");
        assert_eq!(db.checkpoints_of(t), n, "{t} untouched");
        assert_eq!(db.rows_of("threads_meta", t), 1, "{t} still listed");
    }
    assert_eq!(
        db.count("runs WHERE owner_worker_id LIKE 'dfck:%'"),
        0,
        "dfck's reservations are released"
    );
    assert!(
        !owned.exists() && !legacy.exists(),
        "the thread's directories are gone"
    );
    assert!(
        outside.path().join("keep.txt").exists(),
        "a link out is not followed"
    );
    assert!(
        home.path()
            .join(format!("users/{ALICE}/threads/{T09}"))
            .exists(),
        "another thread's files stay"
    );
    assert_eq!(thread(&r, T01)["files"].as_array().unwrap().len(), 2);
}

#[test]
fn delete_removes_what_deerflows_delete_removes_sqlite() {
    delete_as_deerflow_does(&Db::sqlite());
}

#[test]
fn delete_removes_what_deerflows_delete_removes_postgres() {
    let Some(server) = require_postgres("delete on the PostgreSQL DeerFlow fixture") else {
        return;
    };
    delete_as_deerflow_does(&Db::pg(&server, "dfck_it_delete_pg"));
}

#[test]
fn a_users_erasure_leaves_nothing_of_their_threads_and_writes_a_receipt() {
    let db = Db::sqlite();
    let receipt_dir = tempfile::tempdir().unwrap();
    let receipt = receipt_dir.path().join("erasure.json");
    let receipt_arg = receipt.display().to_string();
    let out = dfck(
        &db.target(),
        &["delete", "--user", BOB, "--erase", "--apply"],
    );
    assert_clean_failure(&out, "--receipt");
    assert_eq!(db.checkpoints_of(T06), 11, "and nothing was deleted");

    let (r, code) = delete(
        &db,
        &[
            "--user",
            BOB,
            "--erase",
            "--apply",
            "--receipt",
            &receipt_arg,
        ],
    );
    assert_eq!(code, 0, "{r}");
    for table in [
        "checkpoints",
        "writes",
        "threads_meta",
        "runs",
        "run_events",
        "feedback",
        "mcp_tasks",
        "channel_conversations",
        "scheduled_tasks",
        "scheduled_task_runs",
    ] {
        assert_eq!(
            db.rows_of(table, T06),
            0,
            "{table} keeps rows of an erased thread"
        );
    }
    assert_eq!(
        db.rows_of("run_events", T01),
        42,
        "other users' threads keep theirs"
    );
    let text = std::fs::read_to_string(&receipt).unwrap();
    let doc: Json = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["kind"], "dfck.erasure-receipt");
    assert_eq!(doc["user_id"], BOB);
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["threads_erased"], 1);
    assert_eq!(doc["totals"]["run_events"], 13);
    assert_eq!(doc["totals"]["checkpoints"], 11);
    assert_eq!(doc["dfck_version"], env!("CARGO_PKG_VERSION"));
    assert!(
        !text.contains("hi from Slack"),
        "a receipt holds no content"
    );

    let out = dfck(
        &db.target(),
        &[
            "delete",
            "--user",
            BOB,
            "--erase",
            "--apply",
            "--receipt",
            &receipt_arg,
        ],
    );
    assert_clean_failure(&out, "a receipt is never overwritten");
}

#[test]
fn delete_needs_deerflows_schema_at_the_reservation_revision() {
    let (_d, old) = temp_copy(&sqlite_fixture("deerflow_app_0007"));
    // The fixture holds DeerFlow's tables alone: add LangGraph's, as its saver's setup() does.
    let ddl: Vec<String> = {
        let c = rusqlite::Connection::open(sqlite_fixture("delta_k3")).unwrap();
        let mut st = c
            .prepare("SELECT sql FROM sqlite_master WHERE name IN ('checkpoints', 'writes')")
            .unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let c = rusqlite::Connection::open(&old).unwrap();
    for sql in ddl {
        c.execute_batch(&sql).unwrap();
    }
    drop(c);
    let out = dfck(old.to_str().unwrap(), &["delete", "any-thread"]);
    let msg = assert_clean_failure(&out, "0007_scheduled_run_active_index");
    assert!(msg.contains("0008_thread_operation_kind"), "{msg}");
    let (_d, bare) = temp_copy(&sqlite_fixture("delta_k3"));
    let out = dfck(bare.to_str().unwrap(), &["delete", "t-linear"]);
    assert_clean_failure(&out, "needs DeerFlow's tables");
}

/// A delete reservation of dfck process `pid` on this host, its lease live.
fn reserve(db: &Db, run_id: &str, thread: &str, pid: u32) {
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    db.exec(&format!(
        "INSERT INTO runs (run_id, thread_id, user_id, status, operation_kind, \
         multitask_strategy, metadata_json, kwargs_json, message_count, total_input_tokens, \
         total_output_tokens, total_tokens, llm_call_count, lead_agent_tokens, subagent_tokens, \
         middleware_tokens, token_usage_by_model, owner_worker_id, lease_expires_at, \
         created_at, updated_at) VALUES ('{run_id}', '{thread}', NULL, 'pending', 'delete', \
         'reject', '{{}}', '{{}}', 0, 0, 0, 0, 0, 0, 0, 0, '{{}}', 'dfck:{host}:{pid}', \
         '2099-01-01 00:00:00.000000', '2026-08-20 08:00:00.000000', \
         '2026-08-20 08:00:00.000000')"
    ));
}

#[test]
fn a_delete_left_by_a_crashed_dfck_is_finished_and_a_live_ones_refused() {
    let db = Db::sqlite();
    // 02: dfck killed inside the thread's transaction, its reservation committed before.
    let out = dfck_command()
        .env("DFCK_FAILPOINT", "delete-abort-after:1")
        .args(["--db", &db.target(), "delete", T02, "--apply"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "the failpoint aborts the process");
    assert_eq!(
        db.checkpoints_of(T02),
        7,
        "the thread's transaction rolled back"
    );
    assert_eq!(
        db.count("runs WHERE operation_kind = 'delete' AND owner_worker_id LIKE 'dfck:%'"),
        1,
        "the reservation a crash leaves, as DeerFlow's own crashed delete leaves one"
    );
    // 09: a reservation held by a dfck that is alive (this test's process), its lease live.
    reserve(&db, "live-0000", T09, std::process::id());
    let (r, code) = delete(&db, &[T02, T09, "--apply"]);
    assert_eq!(code, 1, "{r}");
    assert_eq!(thread(&r, T02)["status"], "done");
    assert_eq!(db.checkpoints_of(T02), 0);
    assert_eq!(db.rows_of("threads_meta", T02), 0);
    assert_eq!(thread(&r, T09)["status"], "refused");
    assert_eq!(db.checkpoints_of(T09), 4);
    assert_eq!(
        db.count("runs WHERE operation_kind = 'delete' AND owner_worker_id LIKE 'dfck:%'"),
        1,
        "the crashed dfck's reservation taken over and released; the live one's kept"
    );
    assert_eq!(db.count("runs WHERE run_id = 'live-0000'"), 1);
}

#[test]
fn prune_by_age_on_a_deerflow_store_deletes_the_way_delete_does() {
    let db = Db::sqlite();
    let out = dfck(
        &db.target(),
        &[
            "prune", "--all", "--idle", "1d", "--apply", "--format", "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "03, 04, 05 have work in flight");
    let r: Json = serde_json::from_slice(&out.stdout).unwrap();
    let d = &r["deerflow_delete"];
    assert_eq!(thread(d, T01)["status"], "done");
    assert_eq!(
        db.rows_of("threads_meta", T01),
        0,
        "no listed thread without checkpoints"
    );
    assert_eq!(db.rows_of("threads_meta", T03), 1);
    assert!(db.checkpoints_of(T03) > 0);
    assert_eq!(
        db.count("threads_meta t WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = t.thread_id)"),
        2,
        "only the fixture's own two listed threads without checkpoints"
    );
}

/// Keys as DeerFlow's Redis history cache names them.
fn set_keys(con: &mut redis::Connection, keys: &[String]) {
    for k in keys {
        let _: () = redis::cmd("SET").arg(k).arg("x").query(con).unwrap();
    }
}

fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<u64>(con).unwrap() == 1
}

#[test]
fn the_history_cache_keys_of_deleted_threads_go_and_the_others_stay() {
    let Some(url) = require_redis("the Redis history-cache purge") else {
        return;
    };
    let db = Db::sqlite();
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    // A prefix with glob characters: `ckpt[t]` unescaped would also match `ckptt`.
    let prefix = format!("dfck-it-{}-ckpt[t]", std::process::id());
    let plain = format!("dfck-it-{}-ckptt", std::process::id());
    let gone = [format!("{prefix}:{T01}:a1"), format!("{prefix}:{T01}:b2")];
    let kept = [
        format!("{prefix}:{T02}:a1"),
        format!("{plain}:{T01}:a1"),
        format!("{prefix}:{T01}x:a1"),
    ];
    set_keys(&mut con, &gone);
    set_keys(&mut con, &kept);
    let (dry, _) = delete(
        &db,
        &[T01, "--redis-url", &url, "--cache-key-prefix", &prefix],
    );
    assert_eq!(
        dry["cache"]["key_prefix"],
        prefix.as_str(),
        "the dry run names the prefix"
    );
    assert!(
        gone.iter().all(|k| exists(&mut con, k)),
        "a dry run purges nothing"
    );
    let (r, code) = delete(
        &db,
        &[
            T01,
            "--apply",
            "--redis-url",
            &url,
            "--cache-key-prefix",
            &prefix,
        ],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(thread(&r, T01)["cache_keys"], 2);
    for k in &gone {
        assert!(!exists(&mut con, k), "{k} left");
    }
    for k in &kept {
        assert!(exists(&mut con, k), "{k} purged");
    }
    let _: () = redis::cmd("DEL").arg(&kept[..]).query(&mut con).unwrap();

    // Without --cache-key-prefix: the prefix DeerFlow computes from the database identity.
    let (dry, _) = delete(&db, &[T02, "--redis-url", &url]);
    let path = std::fs::canonicalize(Path::new(&db.target())).unwrap();
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(format!("sqlite:{}", path.display())));
    assert_eq!(
        dry["cache"]["key_prefix"],
        format!("ckpt-hist:v1:{}", &digest[..12])
    );
}

#[test]
fn a_reservation_of_a_live_dfck_of_another_user_is_not_taken_over() {
    // pid 1 lives on every machine; a process that may not signal it (EPERM, any user but
    // root) must still take it for alive, and leave its live reservation alone.
    let db = Db::sqlite();
    reserve(&db, "init-0000", T09, 1);
    let (r, code) = delete(&db, &[T09, "--apply"]);
    assert_eq!(code, 1, "{r}");
    assert_eq!(thread(&r, T09)["status"], "refused");
    assert_eq!(db.checkpoints_of(T09), 4);
    assert_eq!(db.count("runs WHERE run_id = 'init-0000'"), 1);
}
