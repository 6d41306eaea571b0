//! Plan files (a changed thread refused, another store or version refused whole) and policy
//! errors.

use super::*;

/// A pending write on T02's newest checkpoint, as a live run would leave one.
fn late_write(db: &Db) {
    let (table, blob, value) = match db {
        Db::Sqlite(..) => ("writes", "value", "X'7B7D'"),
        Db::Pg(_) => ("checkpoint_writes", "blob", "'\\x7b7d'::bytea"),
    };
    db.exec(&format!(
        "INSERT INTO {table} (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, {blob}) \
         SELECT thread_id, checkpoint_ns, checkpoint_id, 'late', 0, 'x', 'json', {value} FROM checkpoints \
         WHERE thread_id = '{T02}' ORDER BY checkpoint_id DESC LIMIT 1"
    ));
}

#[test]
fn a_thread_changed_since_the_plan_is_refused_sqlite() {
    a_thread_changed_since_the_plan_is_refused(
        &Db::sqlite("deerflow_app"),
        &Db::sqlite("deerflow_app"),
    );
}

#[test]
fn a_thread_changed_since_the_plan_is_refused_postgres() {
    let Some(server) = require_postgres("maintain plan files") else {
        return;
    };
    a_thread_changed_since_the_plan_is_refused(
        &Db::pg(&server, "deerflow_app", "dfck_maint_plan"),
        &Db::pg(&server, "deerflow_app", "dfck_maint_plan_other"),
    );
}

fn a_thread_changed_since_the_plan_is_refused(db: &Db, other: &Db) {
    let dir = tempfile::tempdir().unwrap();
    let p = policy(dir.path(), "delete:\n  idle: 30d\n");
    let plan = dir.path().join("plan.json");
    let (r, _, _) = maintain(db, &p, &["--plan", plan.to_str().unwrap()]);
    assert_eq!(r["dry_run"], true);
    let planned: Json = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    let ids: Vec<&str> = planned["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&T02) && ids.contains(&T06), "{ids:?}");
    // T02 gets a pending write after the plan.
    late_write(db);
    let (r, code, _) = maintain(db, &p, &["--apply-plan", plan.to_str().unwrap()]);
    assert_eq!(code, 1);
    let t02 = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == T02)
        .unwrap();
    assert_eq!(t02["status"], "refused");
    assert!(
        t02["reason"].as_str().unwrap().contains("pending writes"),
        "{t02}"
    );
    assert!(db.dump().iter().any(|l| l.contains(T02)), "T02 untouched");
    assert!(
        !db.dump()
            .iter()
            .any(|l| l.starts_with("checkpoints|") && l.contains(T06))
    );
    // Another store, or another dfck version: the whole plan is refused.
    let out = maintain_cmd(other, &p, &["--apply-plan", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert_clean_failure(&out, "made for another store");
    let text = std::fs::read_to_string(&plan)
        .unwrap()
        .replace(env!("CARGO_PKG_VERSION"), "0.0.1-old");
    std::fs::write(&plan, text).unwrap();
    let out = maintain_cmd(db, &p, &["--apply-plan", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert_clean_failure(&out, "made by dfck 0.0.1-old");
}

#[test]
fn policy_mistakes_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::sqlite("deerflow_app");
    let p = policy(dir.path(), "prune:\n  brances: true\n");
    let out = maintain_cmd(&db, &p, &[]).output().unwrap();
    assert_clean_failure(
        &out,
        "policy.yaml:2: prune.brances: unknown key (did you mean branches?)",
    );
    let p = policy(dir.path(), "sweep:\n  limit: many\n");
    assert_clean_failure(&maintain_cmd(&db, &p, &[]).output().unwrap(), "sweep.limit");
    let out = dfck_command()
        .env_remove("DEER_FLOW_HOME")
        .args(["--db", &db.target(), "maintain"])
        .output()
        .unwrap();
    assert_clean_failure(&out, "maintain needs a policy");
    let p = policy(dir.path(), "delete:\n  idle: 30d\n");
    let out = maintain_cmd(&db, &p, &["--watch", "soon"])
        .output()
        .unwrap();
    assert_clean_failure(&out, "--watch");
    let Db::Sqlite(_, store) = &db else {
        unreachable!()
    };
    let out = maintain_cmd(&db, &p, &["--metrics-file", store.to_str().unwrap()])
        .output()
        .unwrap();
    assert_clean_failure(&out, "the store itself");
    let wal = format!("{}-wal", store.display());
    let out = maintain_cmd(&db, &p, &["--plan", &wal]).output().unwrap();
    assert_clean_failure(&out, "the store's -wal file");
    // An output file nowhere to go is refused before the run changes anything.
    let before = db.dump();
    let missing = dir.path().join("no/such/dir/dfck.prom");
    let out = maintain_cmd(
        &db,
        &p,
        &["--apply", "--metrics-file", missing.to_str().unwrap()],
    )
    .output()
    .unwrap();
    assert_clean_failure(&out, "no directory");
    assert_eq!(db.dump(), before);
}
