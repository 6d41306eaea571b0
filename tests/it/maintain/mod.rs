//! `dfck maintain` on SQLite and PostgreSQL: a policy gives the same rows in every table as
//! the same commands run by hand; one sweeper at a time (a held lease is named and nothing
//! done; of two runs started together one works); a run stopped at its sweep limit resumes
//! after the last thread; a plan applies only to unchanged threads and only on its store;
//! `--watch` survives a failed cycle and stops on SIGTERM; SIGTERM during VACUUM leaves the
//! store as it was; policy mistakes are one-line errors. This file holds the scratch stores
//! and the runners the test files share.

use crate::common::pg::{clone_db, connect, runtime};
use crate::common::*;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;

mod by_hand;
mod plan;
mod proxy;
mod signals;

const T01: &str = "df0a0000-0000-4000-8000-000000000001";
const T02: &str = "df0a0000-0000-4000-8000-000000000002";
const T06: &str = "df0a0000-0000-4000-8000-000000000006";

/// A scratch store on one backend.
enum Db {
    Sqlite(#[allow(dead_code)] tempfile::TempDir, PathBuf),
    Pg(String),
}

impl Db {
    fn sqlite(stem: &str) -> Db {
        let (dir, path) = temp_copy(&sqlite_fixture(stem));
        Db::Sqlite(dir, path)
    }

    fn pg(server: &str, stem: &str, name: &str) -> Db {
        Db::Pg(clone_db(server, &format!("dfck_{stem}"), name))
    }

    fn target(&self) -> String {
        match self {
            Db::Sqlite(_, p) => p.display().to_string(),
            Db::Pg(uri) => uri.clone(),
        }
    }

    /// Every row of every table but dfck's own, as sorted text lines.
    fn dump(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self {
            Db::Sqlite(_, p) => {
                let c = rusqlite::Connection::open(p).unwrap();
                let tables: Vec<String> = c
                    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'dfck_maintenance' ORDER BY name")
                    .unwrap()
                    .query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                for t in tables {
                    let mut st = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
                    let n = st.column_count();
                    let rows = st
                        .query_map([], |r| {
                            let cells: Vec<String> = (0..n)
                                .map(|i| match r.get_ref(i).unwrap() {
                                    rusqlite::types::ValueRef::Text(t) => {
                                        String::from_utf8_lossy(t).into_owned()
                                    }
                                    v => format!("{v:?}"),
                                })
                                .collect();
                            Ok(format!("{t}|{}", cells.join("|")))
                        })
                        .unwrap();
                    out.extend(rows.map(Result::unwrap));
                }
            }
            Db::Pg(uri) => {
                let rt = runtime();
                let c = connect(&rt, uri);
                let tables: Vec<String> = rt
                    .block_on(c.query(
                        "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'dfck_maintenance' ORDER BY 1",
                        &[],
                    ))
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                for t in tables {
                    let rows = rt
                        .block_on(c.query(&format!("SELECT t::text FROM \"{t}\" t"), &[]))
                        .unwrap();
                    out.extend(
                        rows.iter()
                            .map(|r| format!("{t}|{}", r.get::<_, String>(0))),
                    );
                }
            }
        }
        out.sort();
        out
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

    fn threads(&self) -> Vec<String> {
        let j = dfck_json(&self.target(), &["inspect", "--format", "json"]);
        j["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["thread_id"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// A policy file in `dir`.
fn policy(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("policy.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

/// `dfck maintain` with the policy, without DeerFlow's environment: (report, exit, stderr).
fn maintain(db: &Db, policy: &Path, args: &[&str]) -> (Json, i32, String) {
    let out = maintain_cmd(db, policy, args).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let j = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("maintain {args:?} exited {code} without JSON: {stderr}"));
    (j, code, stderr)
}

fn maintain_cmd(db: &Db, policy: &Path, args: &[&str]) -> Command {
    maintain_as(db, policy, args, "json")
}

fn maintain_as(db: &Db, policy: &Path, args: &[&str], format: &str) -> Command {
    let mut c = dfck_command();
    c.env_remove("DEER_FLOW_HOME")
        .env_remove("DFCK_CACHE_REDIS_URL")
        .env_remove("DFCK_FAILPOINT")
        .args(["--db", &db.target(), "maintain", "--policy"])
        .arg(policy)
        .args(args)
        .args(["--format", format]);
    c
}

fn by_hand(db: &Db, args: &[&str]) {
    let out = dfck_command()
        .env_remove("DEER_FLOW_HOME")
        .env_remove("DFCK_CACHE_REDIS_URL")
        .args(["--db", &db.target()])
        .args(args)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
