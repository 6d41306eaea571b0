//! The channel workload (docs/bench-rows.md#workloads) on top of the format writer: the deterministic
//! messages, and the one-node graph (`__start__` → `noop` → end) whose every invoke LangGraph
//! persists as three checkpoints — `input` (pending writes `messages` + `branch:to:noop` of the
//! `__start__` task), `loop` (pending `__no_writes__` of the `noop` task) and `loop` (none).
//! Full mode keeps `messages` as a plain list in every checkpoint that has it; delta mode
//! keeps it out of checkpoints except for `_DeltaSnapshot`s every F updates, with
//! `counters_since_delta_snapshot` and DeerFlow's mode marker in the metadata.

use super::writer::{
    ChannelKind, CheckpointRecord, Clock, GraphState, Stored, WriteRecord, encode_list,
    pull_task_path, task_id,
};
use crate::case::ChannelMode;
use crate::error::BenchError;
use dfck_core::codec::{Value, encode};
use dfck_core::materialize::Reducer;
use dfck_core::model::{MESSAGES, MODE_MARKER};

/// The graph's only node.
pub const NODE: &str = "noop";
/// The entry channel.
pub const START: &str = "__start__";
/// The trigger channel of the node.
pub const BRANCH: &str = "branch:to:noop";
/// The special channel of a task that wrote nothing.
pub const NO_WRITES: &str = "__no_writes__";

fn s(x: &str) -> Value {
    Value::Str(x.to_owned())
}

/// A LangChain message as LangGraph's serializer writes it (ext 5, langchain-core 1.8 field
/// order): `HumanMessage` or `AIMessage` with string content.
pub fn message(human: bool, id: &str, content: &str) -> Value {
    let content = Value::Str(content.to_owned());
    if human {
        crate::messages::message("human", id, content, Vec::new())
    } else {
        crate::messages::ai_message(id, content, Vec::new())
    }
}

/// The N workload messages: `bench-message-{i:08}`, content `x` × payload, human when `i`
/// is even, AI when odd.
pub fn workload_messages(update_count: u64, payload_bytes: u64) -> Vec<Value> {
    let content = "x".repeat(payload_bytes as usize);
    (0..update_count)
        .map(|i| message(i % 2 == 0, &format!("bench-message-{i:08}"), &content))
        .collect()
}

/// What one update (one `graph.invoke`) persists, in the order LangGraph saves it:
/// `put(input)`, `put_writes(input)`, `put(loop)`, `put_writes(loop)`, `put(loop)`.
#[derive(Debug, Clone)]
pub struct UpdateRows {
    /// The three checkpoints.
    pub checkpoints: [CheckpointRecord; 3],
    /// The pending writes stored on `checkpoints[0]` (the `__start__` task).
    pub input_writes: Vec<WriteRecord>,
    /// The pending writes stored on `checkpoints[1]` (the `noop` task).
    pub loop_writes: Vec<WriteRecord>,
}

/// The one-node graph's saver-visible behaviour, one update at a time.
pub struct ChannelWorkload {
    mode: ChannelMode,
    state: GraphState,
    messages: Vec<Value>,
}

impl ChannelWorkload {
    /// A fresh thread in `mode` (delta: `DeltaChannel` at `snapshot_frequency`, marker in the
    /// metadata).
    pub fn new(mode: ChannelMode, snapshot_frequency: u64, clock: Clock) -> Self {
        let kind = match mode {
            ChannelMode::Full => ChannelKind::Plain,
            ChannelMode::Delta => ChannelKind::Delta { snapshot_frequency },
        };
        let channels = vec![
            (MESSAGES.to_owned(), kind),
            (START.to_owned(), ChannelKind::Plain),
            (BRANCH.to_owned(), ChannelKind::Plain),
        ];
        let extra = match mode {
            ChannelMode::Full => Vec::new(),
            ChannelMode::Delta => vec![(MODE_MARKER.to_owned(), "delta".to_owned())],
        };
        ChannelWorkload {
            mode,
            state: GraphState::new(channels, extra, clock),
            messages: Vec::new(),
        }
    }

    /// The in-memory channel value (the live `messages` list).
    pub fn messages(&self) -> &[Value] {
        &self.messages
    }

    /// The stored form of `messages` at a checkpoint whose superstep updated `updated`, or
    /// `None` when the checkpoint leaves it out.
    fn messages_value(&self, updated: &[&str]) -> Option<Stored> {
        if self.state.version(MESSAGES).is_none() && !updated.contains(&MESSAGES) {
            return None;
        }
        match self.mode {
            ChannelMode::Full => Some(Stored::Encoded(encode_list(&self.messages))),
            ChannelMode::Delta => self
                .state
                .snapshot_due(MESSAGES, updated)
                .then(|| Stored::snapshot_of(&encode_list(&self.messages))),
        }
    }

    /// One `graph.invoke({"messages": [msg]})`: runs the reducer on the live value and
    /// returns the rows to persist.
    pub fn update(&mut self, msg: &Value) -> Result<UpdateRows, BenchError> {
        let one = Value::Array(vec![msg.clone()]);
        let write_bytes = encode(&one);

        // 1. Input checkpoint: the input sits in `__start__`.
        let mut values = Vec::with_capacity(2);
        let upd: [&str; 1] = [START];
        if let Some(v) = self.messages_value(&upd) {
            values.push((MESSAGES.to_owned(), v));
        }
        let mut start_value = Vec::with_capacity(write_bytes.len() + 12);
        start_value.push(0x81);
        dfck_core::codec::write_value(&mut start_value, &s(MESSAGES));
        start_value.extend_from_slice(&write_bytes);
        values.push((START.to_owned(), Stored::Encoded(start_value)));
        let input = self.state.save("input", &upd, &upd, values);
        let start_task = task_id(&input.id, input.step, START);
        let input_writes = vec![
            WriteRecord {
                task_id: start_task.clone(),
                task_path: pull_task_path(START),
                idx: 0,
                channel: MESSAGES.to_owned(),
                type_tag: "msgpack",
                value: write_bytes,
            },
            WriteRecord {
                task_id: start_task,
                task_path: pull_task_path(START),
                idx: 1,
                channel: BRANCH.to_owned(),
                type_tag: "null",
                value: Vec::new(),
            },
        ];

        // 2. The `__start__` task's writes applied: messages reduced, node triggered.
        let state = std::mem::take(&mut self.messages);
        self.messages = Reducer::Deerflow.apply(state, &[&one])?;
        self.state.mark_seen(START, START);
        let upd: [&str; 2] = [BRANCH, MESSAGES];
        let mut values = Vec::with_capacity(2);
        if let Some(v) = self.messages_value(&upd) {
            values.push((MESSAGES.to_owned(), v));
        }
        values.push((BRANCH.to_owned(), Stored::Nil));
        let step = self
            .state
            .save("loop", &upd, &[START, MESSAGES, BRANCH], values);
        let noop_task = task_id(&step.id, step.step, NODE);
        let loop_writes = vec![WriteRecord {
            task_id: noop_task,
            task_path: pull_task_path(NODE),
            idx: 0,
            channel: NO_WRITES.to_owned(),
            type_tag: "null",
            value: Vec::new(),
        }];

        // 3. The node ran (no writes): its trigger is consumed.
        self.state.mark_seen(NODE, BRANCH);
        let mut values = Vec::with_capacity(1);
        if let Some(v) = self.messages_value(&[]) {
            values.push((MESSAGES.to_owned(), v));
        }
        let done = self.state.save("loop", &[], &[BRANCH], values);

        Ok(UpdateRows {
            checkpoints: [input, step, done],
            input_writes,
            loop_writes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::writer::Rng;

    fn run(mode: ChannelMode, n: u64, f: u64) -> Vec<UpdateRows> {
        let mut w = ChannelWorkload::new(mode, f, Clock::new(Rng::seeded(1)));
        workload_messages(n, 8)
            .iter()
            .map(|m| w.update(m).unwrap())
            .collect()
    }

    fn vnum(v: &str) -> u64 {
        v.split('.').next().unwrap().parse().unwrap()
    }

    /// The structure recorded from LangGraph 1.2.22 (scripts/dump_langgraph_rows.py, N=5,
    /// F=3, payload 8): channel order, versions pattern, metadata keys, writes, snapshots.
    #[test]
    fn matches_langgraph_dump_structure() {
        let rows = run(ChannelMode::Delta, 5, 3);
        let cks: Vec<&CheckpointRecord> = rows.iter().flat_map(|r| r.checkpoints.iter()).collect();
        assert_eq!(cks.len(), 15);
        let steps: Vec<i64> = cks.iter().map(|c| c.step).collect();
        assert_eq!(steps, (-1..14).collect::<Vec<_>>());
        for (i, c) in cks.iter().enumerate() {
            assert_eq!(c.source, if i % 3 == 0 { "input" } else { "loop" });
            if i > 0 {
                assert_eq!(c.parent.as_deref(), Some(cks[i - 1].id.as_str()));
            }
        }
        // Metadata texts, byte for byte (LangGraph: 146, 144, 144, 145 ... bytes).
        let meta: Vec<String> = cks
            .iter()
            .map(|c| String::from_utf8(c.metadata_text()).unwrap())
            .collect();
        assert_eq!(
            meta[0],
            r#"{"source": "input", "step": -1, "parents": {}, "counters_since_delta_snapshot": {"messages": [0, 1]}, "deerflow_checkpoint_channel_mode": "delta"}"#
        );
        assert_eq!(
            meta[7],
            r#"{"source": "loop", "step": 6, "parents": {}, "deerflow_checkpoint_channel_mode": "delta"}"#
        );
        let ctr: Vec<Option<(u64, u64)>> = cks
            .iter()
            .map(|c| c.counters.first().map(|(_, p)| *p))
            .collect();
        let want = [
            Some((0, 1)),
            Some((1, 2)),
            Some((1, 3)),
            Some((1, 4)),
            Some((2, 5)),
            Some((2, 6)),
            Some((2, 7)),
            None,
            Some((0, 1)),
            Some((0, 2)),
            Some((1, 3)),
            Some((1, 4)),
            Some((1, 5)),
            Some((2, 6)),
            Some((2, 7)),
        ];
        assert_eq!(ctr, want);
        let lens: Vec<usize> = meta.iter().map(String::len).collect();
        assert_eq!(&lens[..8], &[146, 144, 144, 145, 144, 144, 145, 89]);
        // Versions: input i -> __start__ 3i+1; loop -> all three 3i+2; loop -> branch 3i+3.
        for (u, r) in rows.iter().enumerate() {
            let b = 3 * u as u64;
            let [a, l, d] = &r.checkpoints;
            let ver = |c: &CheckpointRecord, ch: &str| {
                c.channel_versions
                    .iter()
                    .find(|(k, _)| k == ch)
                    .map(|(_, v)| vnum(v))
            };
            assert_eq!(ver(a, START), Some(b + 1));
            assert_eq!(ver(l, START), Some(b + 2));
            assert_eq!(ver(l, MESSAGES), Some(b + 2));
            assert_eq!(ver(l, BRANCH), Some(b + 2));
            assert_eq!(ver(d, BRANCH), Some(b + 3));
            assert_eq!(ver(d, MESSAGES), Some(b + 2));
            let keys: Vec<&str> = l.channel_versions.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, [START, MESSAGES, BRANCH]);
            assert_eq!(a.updated_channels, [START]);
            assert_eq!(l.updated_channels, [BRANCH, MESSAGES]);
            assert!(d.updated_channels.is_empty());
            let seen: Vec<&str> = d.versions_seen.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(seen, ["__input__", START, NODE]);
            // Writes.
            let w: Vec<(&str, i64, &str, &str)> = r
                .input_writes
                .iter()
                .map(|w| (w.task_path.as_str(), w.idx, w.channel.as_str(), w.type_tag))
                .collect();
            assert_eq!(
                w,
                [
                    ("~__pregel_pull, __start__", 0, MESSAGES, "msgpack"),
                    ("~__pregel_pull, __start__", 1, BRANCH, "null")
                ]
            );
            assert_eq!(r.loop_writes.len(), 1);
            assert_eq!(r.loop_writes[0].channel, NO_WRITES);
            assert_eq!(r.loop_writes[0].task_path, "~__pregel_pull, noop");
            // Snapshot only at the loop checkpoint of update 2 (F=3).
            let snap = l
                .channel_values
                .iter()
                .any(|(k, v)| k == MESSAGES && matches!(v, Stored::Snapshot(_)));
            assert_eq!(snap, u == 2);
            let keys: Vec<&str> = l.channel_values.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(
                keys,
                if u == 2 {
                    vec![MESSAGES, BRANCH]
                } else {
                    vec![BRANCH]
                }
            );
            assert!(d.channel_values.is_empty());
            let keys: Vec<&str> = a.channel_values.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, [START]);
        }
        // Write sizes: human 167 bytes, AI 206 bytes at payload 8 (as LangGraph).
        assert_eq!(rows[0].input_writes[0].value.len(), 167);
        assert_eq!(rows[1].input_writes[0].value.len(), 206);
        // The snapshot of 3 messages (LangGraph: 538-byte ext payload).
        let [_, l, _] = &rows[2].checkpoints;
        let Stored::Snapshot(b) = &l.channel_values[0].1 else {
            panic!("no snapshot")
        };
        assert_eq!(b.len(), 538 + 4);
    }

    #[test]
    fn full_mode_sizes_match_langgraph() {
        let rows = run(ChannelMode::Full, 2, 10);
        // SQLite checkpoint blob lengths seen with LangGraph at payload 8:
        // 420, 643, 677, 913 (+/-2 from the random version fractions), metadata 46, 44, 44, 45.
        let lens: Vec<usize> = rows
            .iter()
            .flat_map(|r| r.checkpoints.iter())
            .map(|c| c.encode(true).len())
            .collect();
        for (got, want) in lens.iter().zip([420usize, 643, 677, 913]) {
            assert!(got.abs_diff(want) <= 6, "{lens:?}");
        }
        let meta: Vec<usize> = rows
            .iter()
            .flat_map(|r| r.checkpoints.iter())
            .map(|c| c.metadata_text().len())
            .collect();
        assert_eq!(&meta[..4], &[46, 44, 44, 45]);
        let [a, l, d] = &rows[1].checkpoints;
        let keys = |c: &CheckpointRecord| {
            c.channel_values
                .iter()
                .map(|(k, _)| k.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(a), [MESSAGES, START]);
        assert_eq!(keys(l), [MESSAGES, BRANCH]);
        assert_eq!(keys(d), [MESSAGES]);
        // Postgres blobs: __start__ at input, messages at the loop step, none after.
        assert_eq!(a.pg_blobs().len(), 1);
        assert_eq!(l.pg_blobs().len(), 1);
        assert_eq!(l.pg_blobs()[0].0, MESSAGES);
        assert!(d.pg_blobs().is_empty());
    }

    #[test]
    fn messages_digest_matches_vectors() {
        for (n, p) in [(1u64, 128u64), (4, 16), (100, 128)] {
            let msgs = workload_messages(n, p);
            assert_eq!(
                crate::native::digest_of(&msgs).unwrap(),
                crate::digest::channel_workload_sha256(n, p)
            );
        }
        let m = workload_messages(4, 128);
        // ext16 header (4) + 323-byte payload, as LangGraph encodes an AIMessage at 128 B.
        assert_eq!(encode(&m[3]).len(), 327);
    }
}
