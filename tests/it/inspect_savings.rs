//! `dfck inspect --savings`: the projection of what prune (each shape) and migrate
//! full-to-delta would give back equals those commands' own dry runs, thread by thread.

use crate::common::*;
use serde_json::Value as Json;

fn dry(target: &str, args: &[&str]) -> Json {
    let out = dfck(target, args);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{args:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn bytes_of(report: &Json, field: &str) -> u64 {
    report["threads"][0][field].as_u64().unwrap_or(0)
}

#[test]
fn savings_equal_the_dry_runs() {
    let db = sqlite_fixture("retention");
    let target = db.to_string_lossy().into_owned();
    let s = dfck_json(&target, &["inspect", "--savings", "--format", "json"]);
    let sv = &s["savings"];
    assert_eq!(sv["snapshot_frequency"], 10);
    let threads = sv["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 8);
    let mut total = 0;
    for t in threads {
        let id = t["thread_id"].as_str().unwrap();
        let e1 = dry(&target, &["prune", id, "--format", "json"]);
        let e2 = dry(&target, &["prune", id, "--branches", "--format", "json"]);
        assert_eq!(t["duration_leaves"], bytes_of(&e1, "bytes_freed"), "{id}");
        assert_eq!(
            t["branches"].as_u64().unwrap(),
            bytes_of(&e2, "bytes_freed") - bytes_of(&e1, "bytes_freed"),
            "{id}"
        );
        let f2d = dry(
            &target,
            &["migrate", "full-to-delta", id, "--format", "json"],
        );
        let saved = bytes_of(&f2d, "bytes_before").saturating_sub(bytes_of(&f2d, "bytes_after"));
        assert_eq!(t["full_to_delta"], saved, "{id}");
        // Full threads shrink; delta threads have nothing to convert.
        assert_eq!(saved > 0, id.ends_with("-full"), "{id}: {f2d}");
        total += t["duration_leaves"].as_u64().unwrap();
    }
    assert_eq!(sv["duration_leaves"], total);
    let text = dfck(&target, &["inspect", "--savings"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("savings (threads shown; logical bytes): prune "),
        "{text}"
    );
}
