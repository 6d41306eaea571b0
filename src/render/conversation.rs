//! Human text of conversation views: `inspect --state --full` (every message whole, tool-call
//! arguments included) and `dfck diff`.

use super::{esc, finish, ns_label, opt};
use crate::inspect::StateReport;
use serde_json::Value as Json;
use std::fmt::Write as _;

/// Indents every line of `text` by `pad`.
fn indent(text: &str, pad: &str) -> String {
    text.lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A JSON value as text: strings as they are, anything else as pretty JSON.
fn text_of(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// One message as a block: `[i] type  id  (name)`, its whole content, its tool calls with
/// their arguments.
pub fn message_block(out: &mut String, index: Option<usize>, m: &Json) {
    let field = |k: &str| m.get(k).map(text_of).unwrap_or_default();
    let mut head = String::new();
    if let Some(i) = index {
        let _ = write!(head, "[{i}] ");
    }
    let _ = write!(head, "{}", esc(&field("type")));
    let id = field("id");
    if !id.is_empty() {
        let _ = write!(head, "  id={}", esc(&id));
    }
    for k in ["name", "tool_call_id", "status"] {
        if let Some(Json::String(v)) = m.get(k) {
            let _ = write!(head, "  {k}={}", esc(v));
        }
    }
    let _ = writeln!(out, "{head}");
    let content = m.get("content").map(text_of).unwrap_or_default();
    if !content.is_empty() {
        let _ = writeln!(out, "{}", indent(&content, "    "));
    }
    if let Some(Json::Array(calls)) = m.get("tool_calls") {
        for c in calls {
            let name = c.get("name").map(text_of).unwrap_or_default();
            let id = c.get("id").map(text_of).unwrap_or_default();
            let args = c
                .get("args")
                .map(|a| serde_json::to_string_pretty(a).unwrap_or_default())
                .unwrap_or_default();
            let _ = writeln!(out, "    tool call {} ({}):", esc(&name), esc(&id));
            let _ = writeln!(out, "{}", indent(&args, "      "));
        }
    }
}

/// `dfck inspect THREAD --state --full`: the header, every channel's whole value, and the
/// conversation without truncation.
pub fn state_full_text(r: &StateReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "thread: {}  namespace: {}  checkpoint: {}",
        esc(&r.thread_id),
        esc(&ns_label(&r.checkpoint_ns)),
        esc(&r.checkpoint_id)
    );
    let _ = writeln!(
        out,
        "parent: {}  mode: {}  view: {}  reducer: {}  replay depth: {}",
        esc(&opt(&r.parent_checkpoint_id)),
        r.mode.as_str(),
        r.view,
        r.reducer,
        r.replay_depth
    );
    let mut messages = None;
    for (k, v) in &r.values.0 {
        let j = crate::codec::to_json(v);
        if k == "messages" {
            if let Json::Array(a) = j {
                messages = Some(a);
                continue;
            }
        }
        let _ = writeln!(out, "\n{}:", esc(k));
        let _ = writeln!(out, "{}", indent(&text_of(&j), "    "));
    }
    if let Some(msgs) = messages {
        let offset = r.messages_shown.map(|(first, _)| first).unwrap_or(0);
        let _ = match r.messages_shown {
            Some((first, total)) => writeln!(
                out,
                "\nmessages {}-{} of {total}:",
                first,
                (first + msgs.len()).saturating_sub(1)
            ),
            None => writeln!(out, "\nmessages ({}):", msgs.len()),
        };
        for (i, m) in msgs.iter().enumerate() {
            message_block(&mut out, Some(i + offset), m);
        }
    }
    finish(out)
}
