//! The materializer: fuzzed write values replayed by both messages reducers (the delta
//! replay, one super-step update), and a fuzzed lineage (parents may dangle or loop)
//! materialized whole and analysed for forks and integrity.
#![no_main]

use dfck_core::codec::{self, Value};
use dfck_core::materialize::{Reducer, for_each_stored_messages, replay_writes, update_messages};
use dfck_core::model::thread::{LoadedThread, Node};
use dfck_core::model::{Checkpoint, MESSAGES, NULL_TASK_ID};
use dfck_core::store::WriteRow;
use dfck_fuzz::fields;
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;

fn checkpoint(id: &str, parent: Option<String>, stored: Option<Value>) -> Checkpoint {
    Checkpoint {
        thread_id: "t".into(),
        checkpoint_ns: String::new(),
        checkpoint_id: id.into(),
        parent_checkpoint_id: parent,
        v: Some(4),
        ts: None,
        channel_values: stored
            .map(|v| vec![(MESSAGES.to_owned(), v)])
            .unwrap_or_default(),
        channel_versions: vec![(MESSAGES.to_owned(), "1".into())],
        versions_seen: Vec::new(),
        metadata: serde_json::Map::new().into(),
        bytes: 0,
        sealing: Default::default(),
    }
}

fuzz_target!(|data: &[u8]| {
    let f = fields(data);
    let Some((shape, rest)) = f.split_first() else {
        return;
    };
    // Write values: every field that decodes.
    let values: Vec<(usize, Vec<u8>, Value)> = rest
        .iter()
        .enumerate()
        .filter_map(|(i, b)| Some((i, b.to_vec(), codec::decode(b).ok()?)))
        .collect();
    let refs: Vec<&Value> = values.iter().map(|(_, _, v)| v).collect();
    for r in [Reducer::Langgraph, Reducer::Deerflow] {
        let _ = replay_writes(Vec::new(), &refs, r);
        let _ = update_messages(Vec::new(), &refs, r);
    }
    // A lineage of up to 16 checkpoints: byte k of `shape` names checkpoint k's parent
    // (>= n: a root), its high bit says whether it stores the first value.
    let n = shape.len().min(16);
    let mut nodes: Vec<Node> = Vec::new();
    for k in 0..n {
        let p = (shape[k] & 0x3f) as usize;
        let parent = (p < n).then(|| format!("c{p:02}"));
        let stored = (shape[k] & 0x40 != 0)
            .then(|| values.first().map(|v| v.2.clone()))
            .flatten();
        let id = format!("c{k:02}");
        let ck = checkpoint(&id, parent.clone(), stored);
        let mut md = serde_json::Map::new();
        let src = ["loop", "update", "input", "fork"][(shape[k] >> 6) as usize % 4];
        md.insert("source".into(), src.into());
        nodes.push(Node {
            id,
            parent,
            bytes: 0,
            read_bytes: 0,
            facts: dfck_core::model::thread::MetaFacts::of(&md),
            metadata: md.into(),
            messages_encoding: Some(ck.messages_encoding()),
            checkpoint: Ok(ck),
            writes: Vec::new(),
            children: Vec::new(),
            parent_index: None,
        });
    }
    for (i, raw, _) in &values {
        if n == 0 {
            break;
        }
        let at = i % n;
        let checkpoint_id = nodes[at].id.clone();
        nodes[at].writes.push(WriteRow {
            checkpoint_id,
            task_id: if i % 3 == 0 {
                NULL_TASK_ID.into()
            } else {
                format!("task{i}")
            },
            task_path: String::new(),
            idx: *i as i64,
            channel: MESSAGES.into(),
            type_tag: Some("msgpack".into()),
            value: raw.clone(),
        });
    }
    let index: HashMap<String, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.clone(), i))
        .collect();
    for i in 0..nodes.len() {
        if let Some(p) = nodes[i].parent.as_ref().and_then(|p| index.get(p)).copied() {
            nodes[i].parent_index = Some(p);
            nodes[p].children.push(i);
        }
    }
    let t = LoadedThread {
        thread_id: "t".into(),
        checkpoint_ns: String::new(),
        nodes,
        index,
        values: true,
    };
    for r in [Reducer::Langgraph, Reducer::Deerflow] {
        let _ = for_each_stored_messages(&t, r, &mut |i, stored| {
            let _ = dfck_core::materialize::with_own_writes(&t, i, stored, r);
            Ok(())
        });
    }
    let analysis = dfck_core::lineage::fork_analysis(&t);
    let _ = dfck_core::lineage::fork_findings(&t, &analysis);
    let _ = dfck_core::lineage::integrity(&t, Some(8));
    let _ = dfck_core::lineage::integrity(&t, None);
    let _ = dfck_core::lineage::regenerate_findings(&t, None);
    let _ = dfck_core::lineage::report(&t, None, true, None, None);
    let _ = dfck_core::lineage::report(&t, None, false, Some(8), None);
});
