//! `dfck audit` (docs/commands.md, docs/security.md): on the real-library `apptypes` store
//! (application types outside LangGraph's safe set), its tampered copies, the xor-encrypted
//! and pickle stores; SQLite and PostgreSQL. The table is snapshotted in `human_output.rs`
//! (`audit_apptypes`, `audit_tampered`); scripts/check_audit.py checks the emitted allowlist
//! against the real library in strict mode.

use crate::common::pg::{connect, runtime};
use crate::common::{
    assert_clean_failure, dfck, dfck_command, require_postgres, root, sqlite_fixture, temp_copy,
    with_db,
};
use dfck_core::codec::{Value, decode_typed};
use serde_json::{Value as Json, json};
use std::collections::BTreeMap;
use std::process::Output;

const ALLOWLIST: [[&str; 2]; 4] = [
    ["fixture_types", "Color"],
    ["fixture_types", "Point"],
    ["fixture_types", "Profile"],
    ["fixture_types", "Span"],
];

fn audit(target: &str, args: &[&str]) -> Output {
    let mut all = vec!["audit"];
    all.extend_from_slice(args);
    dfck(target, &all)
}

/// `audit --format json` with the exit code it must have.
fn audit_json(target: &str, args: &[&str], code: i32) -> Json {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = audit(target, &all);
    assert_eq!(
        out.status.code(),
        Some(code),
        "audit {target}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn path(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The entries keyed `via module.name[.method]`.
fn entries(doc: &Json) -> BTreeMap<String, Json> {
    doc["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            let method = e["method"]
                .as_str()
                .map(|m| format!(".{m}"))
                .unwrap_or_default();
            (
                format!(
                    "{} {}.{}{method}",
                    e["via"].as_str().unwrap(),
                    e["module"].as_str().unwrap(),
                    e["name"].as_str().unwrap()
                ),
                e.clone(),
            )
        })
        .collect()
}

/// Every (ext code, module, name, method) inside a decoded value.
fn exts_in(v: &Value, out: &mut Vec<(i8, String, String, Option<String>)>) {
    match v {
        Value::Array(items) => items.iter().for_each(|x| exts_in(x, out)),
        Value::Map(m) => m.iter().for_each(|(k, x)| {
            exts_in(k, out);
            exts_in(x, out)
        }),
        Value::Ext(e) => {
            let Some(inner) = e.inner() else { return };
            exts_in(inner, out);
            let items = inner.as_array().unwrap_or_default();
            let s = |i: usize| items.get(i).and_then(Value::as_str).map(str::to_owned);
            match e.code {
                0..=5 => out.push((
                    e.code,
                    s(0).unwrap(),
                    s(1).unwrap(),
                    if e.code == 3 { s(3) } else { None },
                )),
                6 => out.push((6, "numpy".into(), "ndarray".into(), None)),
                _ => {}
            }
        }
        _ => {}
    }
}

/// Per import: (rows, checkpoints, writes, first checkpoint id, last checkpoint id), counted
/// from a full decode of every row of a SQLite store (a path independent of the audit's
/// byte walk).
fn decoded_counts(db: &std::path::Path) -> BTreeMap<String, (u64, u64, u64, String, String)> {
    let conn = rusqlite::Connection::open_with_flags(
        format!("file:{}?immutable=1", db.display()),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    let mut out: BTreeMap<String, (u64, u64, u64, String, String)> = BTreeMap::new();
    for (table, col) in [("checkpoints", "checkpoint"), ("writes", "value")] {
        let mut st = conn
            .prepare(&format!("SELECT checkpoint_id, type, {col} FROM {table}"))
            .unwrap();
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                ))
            })
            .unwrap();
        for row in rows {
            let (id, tag, bytes) = row.unwrap();
            let v = decode_typed(tag.as_deref(), bytes).unwrap();
            let mut found = Vec::new();
            exts_in(&v, &mut found);
            found.sort();
            found.dedup();
            for (code, module, name, method) in found {
                let method = method.map(|m| format!(".{m}")).unwrap_or_default();
                let key = format!("ext {code} {module}.{name}{method}");
                let e = out.entry(key).or_insert((0, 0, 0, id.clone(), id.clone()));
                e.0 += 1;
                if table == "writes" {
                    e.2 += 1;
                } else {
                    e.1 += 1;
                }
                e.3 = e.3.clone().min(id.clone());
                e.4 = e.4.clone().max(id.clone());
            }
        }
    }
    out
}

#[test]
fn apptypes_lists_every_import_with_its_class_and_counts() {
    let db = sqlite_fixture("apptypes");
    let doc = audit_json(&path(&db), &[], 0);
    assert_eq!(doc["langgraph_checkpoint"], "4.3.2");
    assert_eq!(doc["threads_audited"], 2);
    assert_eq!(doc["strict"]["verdict"], "reads");
    assert_eq!(doc["strict"]["allowed_msgpack_modules"], json!(ALLOWLIST));
    assert_eq!(doc["strict"]["safe_set_suffices"], false);
    assert_eq!(doc["strict"]["rows_never_allowed"], 0);
    assert_eq!(doc["strict"]["rows_not_audited"], 0);
    let got = entries(&doc);
    let want = decoded_counts(&db);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "the audit lists exactly the imports a full decode finds"
    );
    for (key, (rows, checkpoints, writes, first, last)) in &want {
        let e = &got[key];
        assert_eq!(
            (&e["rows"], &e["checkpoints"], &e["writes"]),
            (&json!(rows), &json!(checkpoints), &json!(writes)),
            "{key}"
        );
        assert_eq!(e["first_seen"]["checkpoint_id"], json!(first), "{key}");
        assert_eq!(e["last_seen"]["checkpoint_id"], json!(last), "{key}");
        assert!(
            e["first_seen"]["time"]
                .as_str()
                .is_some_and(|t| t.len() == 20 && t.ends_with('Z')),
            "{key}: {}",
            e["first_seen"]
        );
    }
    for [m, n] in ALLOWLIST {
        let e = got
            .iter()
            .find(|(_, e)| e["module"] == m && e["name"] == n)
            .unwrap()
            .1;
        assert_eq!(e["class"], "needs_allowlist");
        assert_eq!(e["allowlist"], "allowed_msgpack_modules");
        assert_eq!(e["threads"], 2, "{m}.{n} is in both threads");
    }
    assert_eq!(got["ext 0 fixture_types.Color"]["ext"], 0);
    assert_eq!(got["ext 5 fixture_types.Profile"]["ext"], 5);
    for safe in [
        "ext 3 datetime.datetime.fromisoformat",
        "ext 5 langchain_core.messages.ai.AIMessage",
        "ext 2 langgraph.types.Interrupt",
    ] {
        assert_eq!(got[safe]["class"], "safe", "{safe}");
        assert_eq!(got[safe]["allowlist"], Json::Null);
    }
    // Serializer rows: every value once.
    let values: u64 = doc["serializers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            assert_eq!(s["rows"], s["audited"], "{s}");
            s["rows"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(json!(values), doc["values"]);
    // NDJSON: one entry per line.
    let nd = audit(&path(&db), &["--format", "ndjson"]);
    assert_eq!(stdout(&nd).lines().count(), got.len());
}

#[test]
fn postgres_apptypes_lists_what_sqlite_lists() {
    let Some(uri) = require_postgres("audit on PostgreSQL") else {
        return;
    };
    let pg = audit_json(&with_db(&uri, "dfck_apptypes"), &[], 0);
    let lite = audit_json(&path(&sqlite_fixture("apptypes")), &[], 0);
    assert_eq!(pg["backend"], "postgres");
    assert_eq!(pg["strict"]["verdict"], "reads");
    assert_eq!(
        pg["strict"]["allowed_msgpack_modules"],
        lite["strict"]["allowed_msgpack_modules"]
    );
    let same = |e: &Json| {
        json!([
            e["via"],
            e["module"],
            e["name"],
            e["method"],
            e["class"],
            e["allowlist"],
            e["threads"],
            e["writes"]
        ])
    };
    let (p, l) = (entries(&pg), entries(&lite));
    assert_eq!(
        p.values().map(same).collect::<Vec<_>>(),
        l.values().map(same).collect::<Vec<_>>()
    );
    // Blobs shared by version count once as rows, once per checkpoint naming them.
    let profile = &p["ext 5 fixture_types.Profile"];
    assert!(
        profile["rows"].as_u64() < profile["checkpoints"].as_u64(),
        "{profile}"
    );
    assert_eq!(
        profile["checkpoints"],
        l["ext 5 fixture_types.Profile"]["checkpoints"]
    );
    // --jobs 2 over two connections: the same report.
    let two = audit_json(&with_db(&uri, "dfck_apptypes"), &["--jobs", "2"], 0);
    assert_eq!(two, pg);
}

#[test]
fn emit_forms_print_only_the_artifact() {
    let db = path(&sqlite_fixture("apptypes"));
    let py = audit(&db, &["--emit", "python"]);
    assert_eq!(py.status.code(), Some(0), "{}", stderr(&py));
    assert_eq!(
        stdout(&py),
        "allowed_msgpack_modules = [\n    (\"fixture_types\", \"Color\"),\n    (\"fixture_types\", \"Point\"),\n    (\"fixture_types\", \"Profile\"),\n    (\"fixture_types\", \"Span\"),\n]\n"
    );
    assert_eq!(stderr(&py), "");
    let lg = audit(&db, &["--emit", "langgraph-json"]);
    assert_eq!(lg.status.code(), Some(0));
    let doc: Json = serde_json::from_slice(&lg.stdout).unwrap();
    assert_eq!(
        doc,
        json!({"checkpointer": {"serde": {"allowed_msgpack_modules": ALLOWLIST}}})
    );
    // The safe set is not enough here: no env line, the reason on stderr.
    let env = audit(&db, &["--emit", "env"]);
    assert_eq!(env.status.code(), Some(0));
    assert_eq!(stdout(&env), "");
    assert!(
        stderr(&env).contains("langgraph.json") && stderr(&env).contains("allowed_msgpack_modules"),
        "{}",
        stderr(&env)
    );
    // A store of safe types alone.
    let full = path(&sqlite_fixture("full"));
    let env = audit(&full, &["--emit", "env"]);
    assert_eq!(env.status.code(), Some(0));
    assert_eq!(stdout(&env), "LANGGRAPH_STRICT_MSGPACK=true\n");
    assert_eq!(stderr(&env), "");
    assert_eq!(
        stdout(&audit(&full, &["--emit", "python"])),
        "allowed_msgpack_modules = []\n"
    );
    let lg: Json =
        serde_json::from_slice(&audit(&full, &["--emit", "langgraph-json"]).stdout).unwrap();
    assert_eq!(
        lg,
        json!({"checkpointer": {"serde": {"allowed_msgpack_modules": null}}})
    );
    // --emit decides the output: a format beside it is a usage error.
    assert_clean_failure(
        &audit(&db, &["--emit", "python", "--format", "json"]),
        "--emit",
    );
    assert_clean_failure(&audit(&db, &["--emit", "yaml"]), "yaml");
}

#[test]
fn exit_codes() {
    assert_eq!(
        audit(&path(&sqlite_fixture("apptypes")), &[]).status.code(),
        Some(0)
    );
    assert_eq!(
        audit(&path(&sqlite_fixture("full")), &[]).status.code(),
        Some(0)
    );
    let tampered = root().join("fixtures/tampered/apptypes_method.db");
    assert_eq!(audit(&path(&tampered), &[]).status.code(), Some(1));
    // With --emit too: the artifact on stdout, the reason on stderr, exit 1.
    let e = audit(&path(&tampered), &["--emit", "python"]);
    assert_eq!(e.status.code(), Some(1));
    assert!(stdout(&e).starts_with("allowed_msgpack_modules = ["));
    assert!(stderr(&e).contains("never allowed"), "{}", stderr(&e));
    let missing = root().join("fixtures/sqlite/no-such-store.db");
    assert_clean_failure(&audit(&path(&missing), &[]), "no-such-store.db");
    assert_clean_failure(
        &audit(&path(&sqlite_fixture("apptypes")), &["--thread", "t-nope"]),
        "t-nope",
    );
    assert_clean_failure(
        &audit(&path(&sqlite_fixture("apptypes")), &["--jobs", "0"]),
        "--jobs",
    );
}

#[test]
fn thread_selection() {
    let db = path(&sqlite_fixture("apptypes"));
    let doc = audit_json(&db, &["--thread", "t-apptypes-delta"], 0);
    assert_eq!(doc["threads_audited"], 1);
    let got = entries(&doc);
    // The interrupt (and its Point payload) happened in the other thread only.
    assert!(!got.contains_key("ext 2 langgraph.types.Interrupt"));
    assert_eq!(got["ext 2 fixture_types.Point"]["threads"], 1);
    let both = audit_json(
        &db,
        &["--thread", "t-apptypes", "--thread", "t-apptypes-delta"],
        0,
    );
    assert_eq!(both, audit_json(&db, &[], 0));
}

/// The tampered copies (fixtures/tampered/expected.json): exit 1, the rewritten value's import
/// never allowed, located where the generator put it; SQLite files and PostgreSQL copies of
/// `dfck_apptypes` with the `.pg.sql` rewrite applied.
#[test]
fn tampered_stores_are_never_allowed() {
    let spec: Json = serde_json::from_slice(
        &std::fs::read(root().join("fixtures/tampered/expected.json")).unwrap(),
    )
    .unwrap();
    let pg = require_postgres("audit of tampered PostgreSQL stores");
    let list = spec["tampered"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    for t in list {
        let want = &t["never_allowed"];
        let mut targets = vec![(
            path(
                &root()
                    .join("fixtures/tampered")
                    .join(t["sqlite"]["file"].as_str().unwrap()),
            ),
            &t["sqlite"],
        )];
        if let Some(uri) = &pg {
            let name = format!("dfck_audit_{}", t["name"].as_str().unwrap());
            let db = restore_fixture(uri, "apptypes", &name);
            let sql = std::fs::read_to_string(
                root()
                    .join("fixtures/tampered")
                    .join(t["postgres"]["file"].as_str().unwrap()),
            )
            .unwrap();
            let rt = runtime();
            rt.block_on(connect(&rt, &db).batch_execute(&sql)).unwrap();
            targets.push((db, &t["postgres"]));
        }
        for (target, place) in targets {
            let doc = audit_json(&target, &[], 1);
            assert_eq!(doc["strict"]["verdict"], "breaks", "{target}");
            assert_eq!(doc["strict"]["rows_never_allowed"], 1, "{target}");
            let never: Vec<&Json> = doc["entries"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["class"] == "never_allowed")
                .collect();
            assert_eq!(never.len(), 1, "{target}: {never:?}");
            let e = never[0];
            assert_eq!(
                json!([e["ext"], e["module"], e["name"], e["method"]]),
                json!([want["ext"], want["module"], want["name"], want["method"]]),
                "{target}"
            );
            assert!(
                e["reason"]
                    .as_str()
                    .unwrap()
                    .contains(if want["method"].is_null() {
                        "denylist"
                    } else {
                        "SAFE_MSGPACK_METHODS"
                    })
            );
            for k in ["thread_id", "checkpoint_id", "channel", "row"] {
                assert_eq!(e["first_seen"][k], place[k], "{target}: {k}");
            }
            // Never emitted: the allowlist is the untampered store's.
            assert_eq!(doc["strict"]["allowed_msgpack_modules"], json!(ALLOWLIST));
            let text = audit(&target, &[]);
            assert!(stdout(&text).contains("never allowed"), "{}", stdout(&text));
        }
    }
}

/// A fresh database `name` restored from `fixtures/postgres/<stem>.sql` (the dumps replay
/// through a client's simple-query batch), not cloned from `dfck_<stem>`: a template copy waits
/// for every other session reading the fixture database.
fn restore_fixture(uri: &str, stem: &str, name: &str) -> String {
    let rt = runtime();
    let admin = connect(&rt, uri);
    for sql in [
        format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        format!("CREATE DATABASE \"{name}\""),
    ] {
        rt.block_on(admin.batch_execute(&sql)).unwrap();
    }
    let db = with_db(uri, name);
    let dump =
        std::fs::read_to_string(root().join(format!("fixtures/postgres/{stem}.sql"))).unwrap();
    rt.block_on(connect(&rt, &db).batch_execute(&dump)).unwrap();
    db
}

#[test]
fn encrypted_rows_are_not_audited() {
    let doc = audit_json(&path(&sqlite_fixture("encrypted")), &[], 1);
    assert_eq!(doc["strict"]["verdict"], "unknown");
    assert_eq!(doc["entries"], json!([]));
    let ser = doc["serializers"].as_array().unwrap();
    assert_eq!(
        ser.iter()
            .map(|s| s["type"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["msgpack+xor", "null+xor"]
    );
    for s in ser {
        assert_eq!(s["audited"], 0, "{s}");
        assert_eq!(s["not_audited"], "cipher", "{s}");
    }
    assert_eq!(doc["strict"]["rows_not_audited"], doc["values"]);
    let text = stdout(&audit(&path(&sqlite_fixture("encrypted")), &[]));
    assert!(text.contains("not audited: 56 msgpack+xor"), "{text}");
}

#[test]
fn pickle_rows_are_a_note_of_their_own() {
    let doc = audit_json(&path(&sqlite_fixture("pickle")), &[], 1);
    assert_eq!(doc["strict"]["verdict"], "unknown");
    assert_eq!(doc["strict"]["pickle_rows"], 4);
    assert_eq!(doc["strict"]["allowed_msgpack_modules"], json!([]));
    let text = stdout(&audit(&path(&sqlite_fixture("pickle")), &[]));
    assert!(text.contains("pickle_fallback=True"), "{text}");
}

/// Legacy `json` rows: `lc: 2` constructors need `allowed_json_modules` (not the msgpack list),
/// a denied module in one is never allowed. The rows are added to a copy by hand.
#[test]
fn json_rows_need_their_own_switch() {
    let (_dir, db) = temp_copy(&sqlite_fixture("full"));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let insert = |idx: i64, value: &str| {
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value) \
             SELECT thread_id, checkpoint_ns, checkpoint_id, 'json-task', '', ?1, 'legacy', 'json', ?2 \
             FROM checkpoints WHERE thread_id = 't-linear' ORDER BY checkpoint_id LIMIT 1",
            rusqlite::params![idx, value.as_bytes()],
        )
        .unwrap();
    };
    insert(
        0,
        r#"{"lc": 2, "type": "constructor", "id": ["app", "models", "Point"], "kwargs": {"when": {"lc": 2, "type": "constructor", "id": ["uuid", "UUID"], "args": ["12345678123456781234567812345678"]}}}"#,
    );
    let doc = audit_json(&path(&db), &[], 0);
    let got = entries(&doc);
    let point = &got["json lc:2 app.models.Point"];
    assert_eq!(point["class"], "needs_allowlist");
    assert_eq!(point["allowlist"], "allowed_json_modules");
    assert_eq!(point["ext"], Json::Null);
    assert_eq!(got["json lc:2 uuid.UUID"]["class"], "safe");
    assert_eq!(
        doc["strict"]["allowed_json_modules"],
        json!([["app", "models", "Point"]])
    );
    assert_eq!(doc["strict"]["allowed_msgpack_modules"], json!([]));
    assert!(
        doc["serializers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["type"] == "json" && s["audited"] == 1)
    );
    let text = stdout(&audit(&path(&db), &[]));
    assert!(text.contains("allowed_json_modules"), "{text}");
    insert(
        1,
        r#"{"lc": 2, "type": "constructor", "id": ["os", "system"], "args": ["true"]}"#,
    );
    let doc = audit_json(&path(&db), &[], 1);
    assert_eq!(
        entries(&doc)["json lc:2 os.system"]["class"],
        "never_allowed"
    );
}

#[test]
fn jobs_give_the_same_report() {
    for stem in ["apptypes", "full", "deerflow"] {
        let db = path(&sqlite_fixture(stem));
        let one = audit_json(&db, &["--jobs", "1"], 0);
        let two = audit_json(&db, &["--jobs", "2"], 0);
        let four = audit_json(&db, &["--jobs", "4"], 0);
        assert_eq!(one, two, "{stem}");
        assert_eq!(one, four, "{stem}");
    }
}

#[test]
fn audit_changes_no_byte() {
    let (dir, db) = temp_copy(&sqlite_fixture("apptypes"));
    let before = std::fs::read(&db).unwrap();
    let out = dfck_command()
        .args(["--db", &path(&db), "audit", "--jobs", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the store file changed"
    );
    drop(dir);
}

/// `+aes` values are audited when the key is given (`LANGGRAPH_AES_KEY` or `--aes-key-file`),
/// counted as not audited without it, with the variable to set named.
#[test]
fn aes_values_are_audited_with_the_key_only() {
    let db = path(&sqlite_fixture("aes_full"));
    let run = |key: Option<&str>, args: &[&str]| {
        let mut c = dfck_command();
        c.env_remove("LANGGRAPH_AES_KEY");
        if let Some(k) = key {
            c.env("LANGGRAPH_AES_KEY", k);
        }
        c.args(["--db", &db]).args(args).output().unwrap()
    };
    let without = run(None, &["audit", "--format", "json"]);
    assert_eq!(without.status.code(), Some(1), "{}", stderr(&without));
    let doc: Json = serde_json::from_slice(&without.stdout).unwrap();
    assert_eq!(doc["strict"]["verdict"], "unknown");
    let aes: Vec<&Json> = doc["serializers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"].as_str().unwrap().ends_with("+aes"))
        .collect();
    assert!(!aes.is_empty());
    for s in &aes {
        assert_eq!(s["audited"], 0, "{s}");
        assert_eq!(s["not_audited"], "no_key", "{s}");
    }
    let text = stdout(&run(None, &["audit"]));
    assert!(
        text.contains("set LANGGRAPH_AES_KEY or pass --aes-key-file"),
        "{text}"
    );
    let key = crate::common::aes_test_key();
    let with_env = run(Some(&key), &["audit", "--format", "json"]);
    assert_eq!(with_env.status.code(), Some(0), "{}", stderr(&with_env));
    let doc: Json = serde_json::from_slice(&with_env.stdout).unwrap();
    assert_eq!(doc["strict"]["verdict"], "reads");
    for s in doc["serializers"].as_array().unwrap() {
        assert_eq!(s["rows"], s["audited"], "{s}");
    }
    assert!(entries(&doc).len() > entries(&serde_json::from_slice(&without.stdout).unwrap()).len());
    let key_file = path(&root().join("fixtures/aes.key"));
    let with_file = run(
        None,
        &["--aes-key-file", &key_file, "audit", "--format", "json"],
    );
    assert_eq!(with_file.stdout, with_env.stdout);
    if let Some(uri) = require_postgres("audit of an encrypted PostgreSQL store") {
        let pg = with_db(&uri, "dfck_aes_full");
        let out = dfck_command()
            .args([
                "--db",
                &pg,
                "--aes-key-file",
                &key_file,
                "audit",
                "--format",
                "json",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let p: Json = serde_json::from_slice(&out.stdout).unwrap();
        let names = |d: &Json| entries(d).into_keys().collect::<Vec<_>>();
        assert_eq!(names(&p), names(&doc));
    }
}
