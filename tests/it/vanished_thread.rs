//! A thread DeerFlow deletes after a read command listed it is skipped and named, never the
//! end of the run (the listing failpoint gives the test time to delete it).

use crate::common::{sqlite_fixture, temp_copy};
use serde_json::Value as Json;
use std::process::Stdio;
use std::time::Duration;

#[test]
fn verify_skips_and_names_a_thread_deleted_after_the_listing() {
    for format in ["json", "table"] {
        let (_dir, db) = temp_copy(&sqlite_fixture("delta_k3"));
        let child = crate::common::dfck_command()
            .arg("--db")
            .arg(&db)
            .args(["verify", "--format", format])
            .env_remove("DFCK_DB")
            .env("DFCK_FAILPOINT", "pause-after-listing:1500")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run dfck");
        std::thread::sleep(Duration::from_millis(500));
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "DELETE FROM writes WHERE thread_id = 't-fork'; DELETE FROM checkpoints WHERE thread_id = 't-fork';",
        )
        .unwrap();
        drop(conn);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(2), "{format}: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if format == "json" {
            let j: Json = serde_json::from_str(&stdout).unwrap();
            assert_eq!(j["threads_gone"], serde_json::json!(["t-fork"]), "{j}");
            assert_eq!(j["threads_checked"], 7, "{j}");
        } else {
            assert!(
                stdout.contains("skipped: thread t-fork was deleted after the listing"),
                "{stdout}"
            );
        }
    }
}
