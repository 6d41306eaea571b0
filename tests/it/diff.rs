//! `dfck diff` against the real library: for fork siblings and `update_state` edits, the
//! messages added, removed and changed and the channels (and keys) changed are exactly what a
//! diff of LangGraph's own `get_state` values (fixtures/expected) says.

use crate::common::{dfck, expected, require_postgres, sqlite_fixture, with_db};
use serde_json::{Map, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

/// One checkpoint of the expected file: (thread, id, parent, source, values).
struct Cp {
    thread: String,
    id: String,
    parent: Option<String>,
    source: String,
    values: Map<String, Json>,
}

fn checkpoints(stem: &str) -> Vec<Cp> {
    let exp = expected(stem);
    let mut out = Vec::new();
    for t in exp["threads"].as_array().unwrap() {
        for ns in t["namespaces"].as_array().unwrap() {
            if ns["checkpoint_ns"] != "" {
                continue;
            }
            for c in ns["checkpoints"].as_array().unwrap() {
                out.push(Cp {
                    thread: t["thread_id"].as_str().unwrap().to_owned(),
                    id: c["checkpoint_id"].as_str().unwrap().to_owned(),
                    parent: c["parent_checkpoint_id"].as_str().map(str::to_owned),
                    source: c["source"].as_str().unwrap_or_default().to_owned(),
                    values: c["values"].as_object().unwrap().clone(),
                });
            }
        }
    }
    out
}

/// What the diff must say, computed independently from the library's values: message ids by
/// change, and channel → changed keys (empty for whole-value changes).
#[derive(Debug, PartialEq, Default)]
struct Expect {
    messages: BTreeMap<String, BTreeSet<String>>,
    channels: BTreeMap<String, BTreeSet<String>>,
}

fn expect(a: &Map<String, Json>, b: &Map<String, Json>) -> Expect {
    let mut e = Expect::default();
    let by_id = |v: &Map<String, Json>| -> BTreeMap<String, Json> {
        v.get("messages")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .map(|m| (m["id"].as_str().unwrap().to_owned(), m.clone()))
            .collect()
    };
    let (ma, mb) = (by_id(a), by_id(b));
    for (id, m) in &ma {
        match mb.get(id) {
            None => e
                .messages
                .entry("removed".into())
                .or_default()
                .insert(id.clone()),
            Some(n) if n != m => e
                .messages
                .entry("changed".into())
                .or_default()
                .insert(id.clone()),
            Some(_) => false,
        };
    }
    for id in mb.keys().filter(|id| !ma.contains_key(*id)) {
        e.messages
            .entry("added".into())
            .or_default()
            .insert(id.clone());
    }
    let names: BTreeSet<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| *k != "messages")
        .collect();
    for k in names {
        let (x, y) = (a.get(k), b.get(k));
        if x == y {
            continue;
        }
        let keys = match (x, y) {
            (Some(Json::Object(x)), Some(Json::Object(y))) => x
                .keys()
                .chain(y.keys())
                .filter(|key| x.get(*key) != y.get(*key))
                .cloned()
                .collect(),
            _ => BTreeSet::new(),
        };
        e.channels.insert(k.clone(), keys);
    }
    e
}

fn observed(j: &Json) -> Expect {
    let mut e = Expect::default();
    for m in j["messages"].as_array().unwrap() {
        e.messages
            .entry(m["change"].as_str().unwrap().to_owned())
            .or_default()
            .insert(m["id"].as_str().unwrap().to_owned());
    }
    for c in j["channels"].as_array().unwrap() {
        let keys = c["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["key"].as_str().unwrap().to_owned())
            .collect();
        e.channels
            .insert(c["channel"].as_str().unwrap().to_owned(), keys);
    }
    e
}

/// Runs `dfck diff` for every pair and compares; returns how many pairs differed.
fn check_pairs(target: &str, pairs: &[(&Cp, &Cp)]) -> usize {
    let mut differing = 0;
    for (a, b) in pairs {
        let want = expect(&a.values, &b.values);
        let mut args = vec!["diff", &a.thread, &a.id, &b.id, "--format", "json"];
        if b.thread != a.thread {
            args.extend(["--thread2", &b.thread]);
        }
        let out = dfck(target, &args);
        let same = want == Expect::default();
        assert_eq!(
            out.status.code(),
            Some(if same { 0 } else { 1 }),
            "{} {} {}: {}",
            a.thread,
            a.id,
            b.id,
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Json = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["identical"], same);
        assert_eq!(observed(&j), want, "{} {} → {}", a.thread, a.id, b.id);
        differing += usize::from(!same);
    }
    differing
}

/// Fork siblings (children of one parent) and `update_state` edits (an `update` child against
/// its parent) of a fixture.
/// Pairs of checkpoints to diff.
type Pairs<'a> = Vec<(&'a Cp, &'a Cp)>;

fn pairs(cps: &[Cp]) -> (Pairs<'_>, Pairs<'_>) {
    let by_id: BTreeMap<(&str, &str), &Cp> = cps
        .iter()
        .map(|c| ((c.thread.as_str(), c.id.as_str()), c))
        .collect();
    let mut children: BTreeMap<(&str, &str), Vec<&Cp>> = BTreeMap::new();
    for c in cps {
        if let Some(p) = &c.parent {
            children
                .entry((c.thread.as_str(), p.as_str()))
                .or_default()
                .push(c);
        }
    }
    let siblings = children
        .values()
        .filter(|kids| kids.len() > 1)
        .map(|kids| (kids[0], kids[1]))
        .collect();
    let updates = cps
        .iter()
        .filter(|c| c.source == "update")
        .filter_map(|c| {
            let p = by_id.get(&(c.thread.as_str(), c.parent.as_deref()?))?;
            (p.source != "input").then_some((*p, c))
        })
        .collect();
    (siblings, updates)
}

#[test]
fn diff_agrees_with_the_real_library_on_forks_and_edits() {
    let cps = checkpoints("forks_delta_k1");
    let (siblings, updates) = pairs(&cps);
    assert!(
        siblings.len() >= 4 && updates.len() >= 3,
        "{} {}",
        siblings.len(),
        updates.len()
    );
    let target = sqlite_fixture("forks_delta_k1");
    let target = target.to_str().unwrap();
    assert!(check_pairs(target, &siblings) >= 4);
    assert!(check_pairs(target, &updates) >= 3);
    // Channels other than messages, key by key: the values fixture's update_state edit.
    let vals = checkpoints("values");
    let (_, edits) = pairs(&vals);
    let all: Vec<(&Cp, &Cp)> = vals
        .iter()
        .filter_map(|c| {
            let p = vals.iter().find(|p| Some(&p.id) == c.parent.as_ref())?;
            (p.source != "input" && c.source != "input").then_some((p, c))
        })
        .chain(edits)
        .collect();
    assert!(!all.is_empty());
    let target = sqlite_fixture("values");
    check_pairs(target.to_str().unwrap(), &all);
    // Across threads: the two update forks of f-update and f-update-twice at their heads.
    let head = |t: &str| cps.iter().find(|c| c.thread == t).unwrap();
    check_pairs(
        sqlite_fixture("forks_delta_k1").to_str().unwrap(),
        &[(head("f-update"), head("f-update-twice"))],
    );
}

#[test]
fn diff_across_stores_and_human_output() {
    let db = sqlite_fixture("forks_delta_k1");
    let db = db.to_str().unwrap();
    let cps = checkpoints("forks_delta_k1");
    let (siblings, _) = pairs(&cps);
    let (a, b) = *siblings
        .iter()
        .find(|(a, _)| a.thread == "f-update")
        .unwrap();
    let out = dfck(db, &["diff", &a.thread, &a.id[..13], &b.id[..13]]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    insta::assert_snapshot!("diff_fork_siblings", text);
    let Some(uri) = require_postgres("diff across stores") else {
        return;
    };
    // The same thread written by the real library on SQLite and on PostgreSQL: equal states
    // where the checkpoint is the same logical one (both heads).
    let pg = with_db(&uri, "dfck_forks_delta_k1");
    let head = |target: &str| {
        let j = crate::common::dfck_json(target, &["inspect", "f-update", "--format", "json"]);
        j["checkpoints"][0]["checkpoint_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (h_sqlite, h_pg) = (head(db), head(&pg));
    let out = dfck(
        db,
        &[
            "diff", "f-update", &h_sqlite, &h_pg, "--db2", &pg, "--format", "json",
        ],
    );
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["identical"], true, "{j}");
    assert_eq!(out.status.code(), Some(0));
    assert!(!j["b"]["store"].as_str().unwrap().contains("dfck-test-pw"));
}

#[test]
fn diff_and_conversation_views_change_nothing() {
    let (_dir, db) = crate::common::temp_copy(&sqlite_fixture("deerflow"));
    let before = std::fs::read(&db).unwrap();
    let target = db.to_str().unwrap();
    let listing = crate::common::dfck_json(target, &["inspect", "t-deerflow", "--format", "json"]);
    let ids: Vec<&str> = listing["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkpoint_id"].as_str().unwrap())
        .collect();
    let out = dfck(target, &["diff", "t-deerflow", ids[0], ids[ids.len() / 2]]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = dfck(
        target,
        &["inspect", "t-deerflow", "--state", "--full", "--last", "2"],
    );
    assert!(out.status.success());
    assert!(std::fs::read(&db).unwrap() == before, "the store changed");
}
