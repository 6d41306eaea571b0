//! `inspect --state --last N`, `--message ID` and `--full`, checked against the real
//! library's values (fixtures/expected) and as insta snapshots.

use crate::common::{assert_clean_failure, dfck, dfck_json, expected, sqlite_fixture};
use serde_json::Value as Json;

fn head_values(stem: &str, thread: &str) -> Vec<Json> {
    let exp = expected(stem);
    let t = exp["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread_id"] == thread)
        .unwrap();
    t["namespaces"][0]["checkpoints"][0]["values"]["messages"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn last_and_message_select_what_the_library_holds() {
    let db = sqlite_fixture("forks_delta_k1");
    let db = db.to_str().unwrap();
    let all = head_values("forks_delta_k1", "f-copy");
    assert!(all.len() >= 4);
    let j = dfck_json(
        db,
        &[
            "inspect", "f-copy", "--state", "--last", "2", "--format", "json",
        ],
    );
    assert_eq!(
        j["values"]["messages"].as_array().unwrap(),
        &all[all.len() - 2..]
    );
    let j = dfck_json(
        db,
        &[
            "inspect",
            "f-copy",
            "--state",
            "--message",
            "ai-1",
            "--format",
            "json",
        ],
    );
    let one = j["values"]["messages"].as_array().unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0], *all.iter().find(|m| m["id"] == "ai-1").unwrap());
    // More than there are: all of them.
    let j = dfck_json(
        db,
        &[
            "inspect", "f-copy", "--state", "--last", "99", "--format", "json",
        ],
    );
    assert_eq!(j["values"]["messages"].as_array().unwrap(), &all);
    assert_clean_failure(
        &dfck(db, &["inspect", "f-copy", "--state", "--message", "ai"]),
        "is ambiguous: ai-1",
    );
    assert_clean_failure(
        &dfck(db, &["inspect", "f-copy", "--state", "--message", "ai-9"]),
        "did you mean",
    );
}

#[test]
fn full_shows_whole_content_and_tool_arguments() {
    let db = sqlite_fixture("forks_delta_k1");
    let db = db.to_str().unwrap();
    let text = |args: &[&str]| {
        let out = dfck(db, args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let full = text(&["inspect", "f-copy", "--state", "--full"]);
    assert!(full.contains("tool call add (call_1):") && full.contains("\"a\": 1"));
    insta::assert_snapshot!("state_full", full);
    insta::assert_snapshot!(
        "state_last_2",
        text(&["inspect", "f-copy", "--state", "--last", "2"])
    );
    // Long content is not cut.
    let db2 = sqlite_fixture("deerflow");
    let out = dfck(
        db2.to_str().unwrap(),
        &["inspect", "t-deerflow", "--state", "--full"],
    );
    let full = String::from_utf8(out.stdout).unwrap();
    let all = head_values("deerflow", "t-deerflow");
    for m in &all {
        if let Some(c) = m["content"].as_str() {
            for line in c.lines() {
                assert!(full.contains(line), "{line}");
            }
        }
    }
    assert!(!full.contains('…'));
}
