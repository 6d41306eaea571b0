//! Human text of conversation views: `inspect --state --full` (every message whole, tool-call
//! arguments included) and `dfck diff`.

use super::{esc, finish, ns_label, opt};
use crate::commands::inspect::StateReport;
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
        let j = dfck_core::codec::to_json(v);
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

/// A value on one line, cut at `max` characters.
fn short(v: &Json, max: usize) -> String {
    let s = match v {
        Json::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    if s.chars().count() > max {
        let cut: String = s.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// `dfck diff` as text: both sides, a summary line, then each message and channel that
/// differs (`+` added in B, `-` removed from A, `~` changed).
pub fn diff_text(d: &crate::commands::diff::DiffReport) -> String {
    use crate::commands::diff::Change;
    let mut out = String::new();
    for (label, s) in [("A", &d.a), ("B", &d.b)] {
        let _ = write!(
            out,
            "{label}: thread {}  namespace {}  checkpoint {}  ({} messages)",
            esc(&s.thread_id),
            esc(&ns_label(&s.checkpoint_ns)),
            esc(&s.checkpoint_id),
            s.messages
        );
        if d.a.store != d.b.store {
            let _ = write!(out, "  store {}", esc(&s.store));
        }
        out.push('\n');
    }
    if d.identical {
        out.push_str("identical\n");
        return finish(out);
    }
    let count = |c: Change| d.messages.iter().filter(|m| m.change == c).count();
    let mut parts = Vec::new();
    for (c, word) in [
        (Change::Added, "added"),
        (Change::Removed, "removed"),
        (Change::Changed, "changed"),
    ] {
        let n = count(c);
        if n > 0 {
            parts.push(format!(
                "{n} message{} {word}",
                if n == 1 { "" } else { "s" }
            ));
        }
    }
    if d.reordered {
        parts.push("messages reordered".into());
    }
    if !d.channels.is_empty() {
        let n = d.channels.len();
        parts.push(format!(
            "{n} channel{} changed",
            if n == 1 { "" } else { "s" }
        ));
    }
    let _ = writeln!(out, "{}", parts.join(", "));
    if !d.messages.is_empty() {
        out.push_str("\nmessages:\n");
    }
    for m in &d.messages {
        let (sign, at) = match m.change {
            Change::Added => ('+', format!("B[{}]", opt(&m.index_b))),
            Change::Removed => ('-', format!("A[{}]", opt(&m.index_a))),
            Change::Changed => (
                '~',
                format!("A[{}] B[{}]", opt(&m.index_a), opt(&m.index_b)),
            ),
        };
        let _ = write!(
            out,
            "{sign} {at} {}  id={}",
            esc(m.kind.as_deref().unwrap_or("?")),
            esc(m.id.as_deref().unwrap_or("(none)"))
        );
        if !m.fields.is_empty() {
            let _ = write!(out, "  fields: {}", esc(&m.fields.join(", ")));
        }
        out.push('\n');
        match m.change {
            Change::Added | Change::Removed => {
                let msg = m.b.as_ref().or(m.a.as_ref());
                if let Some(msg) = msg {
                    let mut block = String::new();
                    message_block(&mut block, None, msg);
                    // The block's first line repeats the header.
                    for line in block.lines().skip(1) {
                        let _ = writeln!(out, "  {line}");
                    }
                }
            }
            Change::Changed => {
                if let Some(cd) = &m.content_diff {
                    let _ = writeln!(out, "{}", indent(cd.trim_end_matches('\n'), "    "));
                }
                for f in m.fields.iter().filter(|f| *f != "content") {
                    let a =
                        m.a.as_ref()
                            .and_then(|x| x.get(f))
                            .cloned()
                            .unwrap_or(Json::Null);
                    let b =
                        m.b.as_ref()
                            .and_then(|x| x.get(f))
                            .cloned()
                            .unwrap_or(Json::Null);
                    let _ = writeln!(
                        out,
                        "    {}: {} -> {}",
                        esc(f),
                        esc(&short(&a, 60)),
                        esc(&short(&b, 60))
                    );
                }
            }
        }
    }
    if !d.channels.is_empty() {
        out.push_str("\nchannels:\n");
    }
    for c in &d.channels {
        let sign = match c.change {
            Change::Added => '+',
            Change::Removed => '-',
            Change::Changed => '~',
        };
        if c.keys.is_empty() {
            let a =
                c.a.as_ref()
                    .map(|v| short(v, 60))
                    .unwrap_or_else(|| "-".into());
            let b =
                c.b.as_ref()
                    .map(|v| short(v, 60))
                    .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "{sign} {}: {} -> {}",
                esc(&c.channel),
                esc(&a),
                esc(&b)
            );
            continue;
        }
        let _ = writeln!(out, "{sign} {}", esc(&c.channel));
        for k in &c.keys {
            let ks = match k.change {
                Change::Added => '+',
                Change::Removed => '-',
                Change::Changed => '~',
            };
            let a =
                k.a.as_ref()
                    .map(|v| short(v, 50))
                    .unwrap_or_else(|| "-".into());
            let b =
                k.b.as_ref()
                    .map(|v| short(v, 50))
                    .unwrap_or_else(|| "-".into());
            let _ = writeln!(out, "    {ks} {}: {} -> {}", esc(&k.key), esc(&a), esc(&b));
        }
    }
    finish(out)
}
