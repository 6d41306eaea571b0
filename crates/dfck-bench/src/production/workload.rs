//! The production-shaped workload: per turn a DeerFlow-shaped exchange — HumanMessage →
//! AIMessage with a tool call → ToolMessage → final AIMessage — plus the ThreadState channels
//! DeerFlow carries (thread_data, sandbox, uploaded_files, skill_context, artifacts, todos,
//! delegations, viewed_images, title), spread over the several checkpoints a middleware-heavy
//! graph writes per turn. Deterministic, no date dependence (docs/bench-rows.md#workloads): the
//! `<current_date>` reminder DeerFlow inserts carries a fixed date. A replayed thread
//! ([`replay_turns`]) contributes its own messages, turn by turn.

use crate::messages::{ai_message, message};
use crate::messages::{map, s};
use dfck_core::codec::Value;

/// One task's writes: the node and `(channel, value)` pairs in write order.
#[derive(Debug, Clone)]
pub struct Step {
    /// The node that ran (`__input__` for the run's input).
    pub node: &'static str,
    /// Writes in order.
    pub writes: Vec<(&'static str, Value)>,
}

/// The steps of one turn; the first is the run's input.
pub type Turn = Vec<Step>;

/// The fixed date of the reminder message (DeerFlow puts today's date there, which made its
/// digests change every day).
pub const FIXED_DATE: &str = "2026-01-01, Thursday";

/// Turn `t` of the generated workload (payload = exact content size of each text).
pub fn generated_turn(t: u64, payload: u64) -> Turn {
    let p = payload as usize;
    let call_id = format!("call-{t:08}");
    let path = format!("/mnt/user-data/outputs/turn-{t:08}.md");
    let mut input = Vec::new();
    if t == 0 {
        // DeerFlow's DynamicContextMiddleware: a reminder takes the first human id, the
        // human message is re-identified with `__user`.
        input.push(message(
            "system",
            "bench-h-00000000",
            s(&format!(
                "<system-reminder><current_date>{FIXED_DATE}</current_date></system-reminder>"
            )),
            vec![],
        ));
        input.push(message(
            "human",
            "bench-h-00000000__user",
            s(&"y".repeat(p)),
            vec![],
        ));
    } else {
        input.push(message(
            "human",
            &format!("bench-h-{t:08}"),
            s(&"y".repeat(p)),
            vec![],
        ));
    }
    let mut before = vec![(
        "skill_context",
        Value::Array(vec![map(vec![
            ("name", s("bench-skill")),
            ("path", s("/mnt/skills/public/bench/SKILL.md")),
            ("description", s("deterministic benchmark skill")),
            ("loaded_at", Value::Int(t as i64)),
        ])]),
    )];
    if t == 0 {
        before.insert(
            0,
            (
                "thread_data",
                map(vec![
                    ("workspace_path", s("/mnt/user-data/workspace")),
                    ("uploads_path", s("/mnt/user-data/uploads")),
                    ("outputs_path", s("/mnt/user-data/outputs")),
                ]),
            ),
        );
        before.insert(1, ("uploaded_files", Value::Array(vec![])));
        before.insert(
            2,
            ("sandbox", map(vec![("sandbox_id", s("bench-sandbox"))])),
        );
    }
    let tool_call = map(vec![
        ("name", s("write_file")),
        ("args", map(vec![("path", s(&path))])),
        ("id", s(&call_id)),
        ("type", s("tool_call")),
    ]);
    let mut after_model = vec![(
        "todos",
        Value::Array(vec![map(vec![
            ("content", s(&format!("turn {t}"))),
            ("status", s("completed")),
        ])]),
    )];
    if t % 5 == 0 {
        after_model.push((
            "delegations",
            Value::Array(vec![map(vec![
                ("id", s(&format!("delegation-{t:08}"))),
                ("status", s("completed")),
                ("run_id", s("bench-run")),
            ])]),
        ));
    }
    let mut after_agent = vec![(
        "viewed_images",
        map(vec![(
            path.as_str(),
            map(vec![
                ("mime_type", s("text/markdown")),
                ("size", Value::Int(p as i64)),
            ]),
        )]),
    )];
    if t == 0 {
        after_agent.push(("title", s("Benchmark conversation")));
    }
    vec![
        Step {
            node: "__input__",
            writes: vec![("messages", Value::Array(input))],
        },
        Step {
            node: "before_agent",
            writes: before,
        },
        Step {
            node: "model",
            writes: vec![(
                "messages",
                ai_message(&format!("bench-ai-{t:08}-call"), s(""), vec![tool_call]),
            )],
        },
        Step {
            node: "tools",
            writes: vec![
                (
                    "messages",
                    message(
                        "tool",
                        &format!("bench-tool-{t:08}"),
                        s(&"z".repeat(p)),
                        vec![
                            ("tool_call_id", s(&call_id)),
                            ("artifact", Value::Nil),
                            ("status", s("success")),
                        ],
                    ),
                ),
                ("artifacts", Value::Array(vec![s(&path)])),
            ],
        },
        Step {
            node: "model",
            writes: vec![(
                "messages",
                ai_message(&format!("bench-ai-{t:08}"), s(&"x".repeat(p)), vec![]),
            )],
        },
        Step {
            node: "after_model",
            writes: after_model,
        },
        Step {
            node: "after_agent",
            writes: after_agent,
        },
    ]
}

/// The LangChain type of a stored message (`human`, `ai`, …), from its `type` field or class.
pub fn message_type(m: &Value) -> Option<&str> {
    m.model_field_str("type").or_else(|| {
        m.ext_class().map(|(_, class)| match class {
            "HumanMessage" | "HumanMessageChunk" => "human",
            "AIMessage" | "AIMessageChunk" => "ai",
            "ToolMessage" | "ToolMessageChunk" => "tool",
            "SystemMessage" | "SystemMessageChunk" => "system",
            other => other,
        })
    })
}

/// A real thread's messages as turns: a turn starts at each human message (leading
/// non-human messages join the first turn); its first step is the input, every further
/// message one model or tools step.
pub fn replay_turns(messages: Vec<Value>) -> Vec<Turn> {
    let mut turns: Vec<Vec<Value>> = Vec::new();
    for m in messages {
        let human = message_type(&m) == Some("human");
        match turns.last_mut() {
            Some(cur) if !human || cur.iter().all(|x| message_type(x) != Some("human")) => {
                cur.push(m)
            }
            _ => turns.push(vec![m]),
        }
    }
    turns
        .into_iter()
        .map(|msgs| {
            let first_human = msgs
                .iter()
                .position(|m| message_type(m) == Some("human"))
                .map(|i| i + 1)
                .unwrap_or(1);
            let mut it = msgs.into_iter();
            let input: Vec<Value> = it.by_ref().take(first_human).collect();
            let mut steps = vec![Step {
                node: "__input__",
                writes: vec![("messages", Value::Array(input))],
            }];
            for m in it {
                let node = if message_type(&m) == Some("tool") {
                    "tools"
                } else {
                    "model"
                };
                steps.push(Step {
                    node,
                    writes: vec![("messages", m)],
                });
            }
            steps
        })
        .collect()
}

/// Every message the turns write, in order (the expected materialized list: ids are unique).
pub fn written_messages(turns: &[Turn]) -> Vec<Value> {
    let mut out = Vec::new();
    for step in turns.iter().flatten() {
        for (ch, v) in &step.writes {
            if *ch == "messages" {
                match v {
                    Value::Array(items) => out.extend(items.iter().cloned()),
                    other => out.push(other.clone()),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_turns_are_deterministic_and_four_messages_each() {
        let turns: Vec<Turn> = (0..3).map(|t| generated_turn(t, 16)).collect();
        let msgs = written_messages(&turns);
        assert_eq!(msgs.len(), 4 * 3 + 1);
        assert_eq!(message_type(&msgs[0]), Some("system"));
        assert_eq!(
            msgs[1].model_field_str("id"),
            Some("bench-h-00000000__user")
        );
        let again: Vec<Turn> = (0..3).map(|t| generated_turn(t, 16)).collect();
        assert_eq!(
            dfck_core::codec::encode(&Value::Array(msgs)),
            dfck_core::codec::encode(&Value::Array(written_messages(&again)))
        );
    }

    #[test]
    fn replay_splits_at_human_messages() {
        let turns: Vec<Turn> = (0..4).map(|t| generated_turn(t, 8)).collect();
        let msgs = written_messages(&turns);
        let replay = replay_turns(msgs.clone());
        assert_eq!(replay.len(), 4);
        assert_eq!(replay[0][0].writes.len(), 1);
        assert_eq!(written_messages(&replay), msgs);
        assert_eq!(replay[1].len(), 4);
    }
}
