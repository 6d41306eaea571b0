//! Rendering of report values: tables (comfy-table) and JSON for stdout (`audit.rs`: the
//! audit's table and its `--emit` artifacts; `openmetrics.rs`: the store's metrics), the progress bar
//! and notes for stderr, and the writing of them ([`emit`], [`output`], [`note`]).
//! Nothing in the runtime library depends on this module.

pub mod audit;
pub mod conversation;
pub mod deerflow;
pub mod escape;
pub mod full_to_delta;
pub(crate) mod grid;
mod json;
pub mod maintain;
pub mod meta;
pub mod migrate;
pub mod openmetrics;
mod output;
mod progress;

mod copy;
mod records;
pub mod space;
mod spool;
mod stream;
mod summary;
mod verify;

pub use copy::{CopyStream, copy_table};
pub use full_to_delta::full_to_delta_table;
pub use output::{RowWriter, emit, note, output, stdout_closed_at_exec, write_event};
pub use progress::TerminalProgress;
pub use records::{Style, set_style};
pub(crate) use stream::ReportStream;
pub use summary::{SummaryStream, summary_table};
pub use verify::{FindingStream, verify_table};
use verify::{findings_table, severity_counts};

/// Whether a report of many threads is written as its threads come in `format` (the plain
/// table layout, compact JSON, NDJSON, CSV), not held whole.
pub fn streams(format: Format) -> bool {
    stream::RowStream::streams(format)
}

/// Before a write command streams its report in `format` ([`streams`]): fails, naming the
/// temporary directory, when its rows could not wait in a temporary file there, so that the
/// command knows before its first write (it then holds its report instead).
pub fn check_stream_before_writes(format: Format) -> Result<(), dfck_core::error::Error> {
    stream::RowStream::check_before_writes(format)
}

use crate::commands::inspect::{StateReport, ThreadReport};
use dfck_core::lineage::{LineageEntry, LineageReport};
use escape::owned as esc;
use grid::Grid;
use serde_json::Value as Json;
use std::fmt::Write as _;

/// Output format of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Human tables.
    Table,
    /// One JSON document.
    Json,
    /// One JSON row (thread, checkpoint, finding) per line.
    Ndjson,
    /// Comma-separated flat rows.
    Csv,
    /// OpenMetrics text (the store summary only: [`openmetrics`]).
    Openmetrics,
}

/// Bytes in binary units (`1.5 MiB`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A table with this header, laid out for the terminal ([`grid::layout`]).
pub(crate) fn table(header: &[&str]) -> Grid {
    Grid::new(header)
}

/// Adds a row of store-supplied text, every cell escaped for the terminal.
pub(crate) fn add_row(t: &mut Grid, mut cells: Vec<String>) {
    for c in &mut cells {
        // Most cells need no escape: they are kept, not copied.
        if let std::borrow::Cow::Owned(e) = escape::cell(c) {
            *c = e;
        }
    }
    t.row(cells);
}

/// The last line of defence of a human output: controls that slipped past [`escape::cell`]
/// (line breaks stay), and prose lines wrapped to the width ([`grid::wrap_text`]).
pub(crate) fn finish(out: String) -> String {
    let escaped = if records::style().color {
        escape::text_keeping_colors(&out)
    } else {
        escape::text(&out)
    };
    let out = match escaped {
        std::borrow::Cow::Borrowed(_) => out,
        std::borrow::Cow::Owned(o) => o,
    };
    grid::wrap_text(&out)
}

/// Rows per table as reports show them (`threads_meta 1, runs 2`), `-` for none.
fn table_counts(rows: &[(String, u64)]) -> String {
    if rows.is_empty() {
        return "-".to_owned();
    }
    let each: Vec<String> = rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
    each.join(", ")
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(T::to_string).unwrap_or_else(|| "-".into())
}

/// `part` as a percentage of `whole` (`-` for nothing).
fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.0}%", part as f64 * 100.0 / whole as f64)
    }
}

/// A checkpoint `ts` to the second (`2026-12-02 10:24:32`), or `-`.
fn short_ts(ts: &Option<String>) -> String {
    match ts {
        Some(t) if t.len() >= 19 && t.is_char_boundary(19) => t[..19].replacen('T', " ", 1),
        Some(t) => t.clone(),
        None => "-".into(),
    }
}

fn ns_label(ns: &str) -> String {
    if ns.is_empty() {
        "(root)".into()
    } else {
        ns.to_owned()
    }
}

/// `dfck inspect THREAD` as text.
pub fn thread_table(r: &ThreadReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "thread: {}  namespace: {}  checkpoints: {}",
        esc(&r.thread_id),
        esc(&ns_label(&r.checkpoint_ns)),
        r.checkpoints.len()
    );
    let mut t = table(&[
        "checkpoint",
        "parent",
        "source",
        "step",
        "mode",
        "messages",
        "writes",
        "bytes",
    ]);
    for c in &r.checkpoints {
        add_row(
            &mut t,
            vec![
                c.checkpoint_id.clone(),
                opt(&c.parent_checkpoint_id),
                opt(&c.source),
                opt(&c.step),
                c.mode.as_str().to_owned(),
                match (&c.messages_encoding, &c.error) {
                    (Some(e), _) => e.as_str().to_owned(),
                    (None, Some(_)) => "unreadable".to_owned(),
                    (None, None) => "-".to_owned(),
                },
                c.writes.to_string(),
                human_bytes(c.bytes),
            ],
        );
    }
    let _ = writeln!(out, "{t}");
    for c in r.checkpoints.iter().filter(|c| c.error.is_some()) {
        let _ = writeln!(
            out,
            "unreadable: {}: {}",
            esc(&c.checkpoint_id),
            esc(&opt(&c.error))
        );
    }
    finish(out)
}

fn preview(j: &Json, max: usize) -> String {
    let s = match j {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    };
    let s = s.replace(['\n', '\r', '\t'], " ");
    if s.chars().count() > max {
        let cut: String = s.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// `dfck inspect THREAD --state` as text: one row per channel, and one per message.
pub fn state_table(r: &StateReport) -> String {
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
    let values: serde_json::Map<String, Json> = r
        .values
        .0
        .iter()
        .map(|(k, v)| (k.clone(), dfck_core::codec::to_json(v)))
        .collect();
    let mut t = table(&["channel", "value"]);
    for (k, v) in &values {
        let shown = match v {
            Json::Array(items) if k == "messages" => format!("{} messages (below)", items.len()),
            other => preview(other, 100),
        };
        add_row(&mut t, vec![k.clone(), shown]);
    }
    let _ = writeln!(out, "{t}");
    if let Some(Json::Array(msgs)) = values.get("messages") {
        let offset = shown_messages_note(&mut out, r);
        let mut t = table(&["#", "type", "id", "content"]);
        for (i, m) in msgs.iter().enumerate() {
            let i = i + offset;
            let field = |k: &str| m.get(k).cloned().unwrap_or(Json::Null);
            let mut content = preview(&field("content"), 80);
            if let Some(Json::Array(calls)) = m.get("tool_calls") {
                if !calls.is_empty() {
                    let names: Vec<String> = calls
                        .iter()
                        .map(|c| preview(&c.get("name").cloned().unwrap_or(Json::Null), 30))
                        .collect();
                    content = format!("{content} [tool calls: {}]", names.join(", "));
                }
            }
            add_row(
                &mut t,
                vec![
                    i.to_string(),
                    preview(&field("type"), 12),
                    preview(&field("id"), 40),
                    content,
                ],
            );
        }
        let _ = writeln!(out, "{t}");
    }
    finish(out)
}

/// Writes "messages N–M of T" when only part of the conversation is shown; returns the index
/// of the first message shown.
fn shown_messages_note(out: &mut String, r: &StateReport) -> usize {
    match r.messages_shown {
        Some((first, total)) => {
            let n = r
                .values
                .0
                .iter()
                .find(|(k, _)| k == "messages")
                .and_then(|(_, v)| match v {
                    dfck_core::codec::Value::Array(a) => Some(a.len()),
                    _ => None,
                })
                .unwrap_or(0);
            let _ = writeln!(
                out,
                "messages {}-{} of {total}",
                first,
                (first + n).saturating_sub(1)
            );
            first
        }
        None => 0,
    }
}

fn lineage_label(e: &LineageEntry) -> String {
    let mut s = format!(
        "{}  {} step {}  {}  messages {}  writes {}",
        e.checkpoint_id,
        e.source.as_deref().unwrap_or("-"),
        opt(&e.step),
        e.mode.as_str(),
        e.messages_encoding
            .map(|m| m.as_str())
            .unwrap_or("unreadable"),
        e.writes
    );
    if e.duration_only {
        s.push_str("  [duration-only]");
    }
    if !e.pending_tasks.is_empty() {
        s.push_str(&format!("  [pending: {}]", e.pending_tasks.join(", ")));
    }
    if e.contaminated {
        s.push_str("  [CONTAMINATED]");
    }
    // One line: ids, sources and task names are store data.
    esc(&s)
}

/// `dfck lineage` as text: the chain one line per checkpoint, or the tree with its forks.
pub fn lineage_text(r: &LineageReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "thread: {}  namespace: {}  view: {}  checkpoints: {}",
        esc(&r.thread_id),
        esc(&ns_label(&r.checkpoint_ns)),
        r.view,
        r.checkpoints.len()
    );
    if r.view == "chain" {
        for e in &r.checkpoints {
            let _ = writeln!(out, "{}", lineage_label(e));
        }
        let _ = writeln!(out, "(end: {})", r.end.unwrap_or("-"));
    } else {
        let index: std::collections::HashMap<&str, &LineageEntry> = r
            .checkpoints
            .iter()
            .map(|e| (e.checkpoint_id.as_str(), e))
            .collect();
        let mut roots: Vec<&LineageEntry> = r
            .checkpoints
            .iter()
            .filter(|e| {
                e.parent_checkpoint_id
                    .as_deref()
                    .is_none_or(|p| !index.contains_key(p))
            })
            .collect();
        roots.sort_by(|a, b| a.checkpoint_id.cmp(&b.checkpoint_id));
        // Depth-first, iteratively (threads can be thousands of checkpoints deep):
        // a straight chain stays in its column, a fork opens one branch per child.
        let mut printed = std::collections::HashSet::new();
        let mut stack: Vec<(&LineageEntry, String, &str)> = roots
            .into_iter()
            .rev()
            .map(|e| (e, String::new(), ""))
            .collect();
        while let Some((e, prefix, marker)) = stack.pop() {
            if !printed.insert(e.checkpoint_id.as_str()) {
                continue;
            }
            let _ = writeln!(out, "{prefix}{marker}{}", lineage_label(e));
            let cont = match marker {
                "├─ " => "│  ",
                "└─ " => "   ",
                _ => "",
            };
            let kids: Vec<&LineageEntry> = e
                .children
                .iter()
                .filter_map(|c| index.get(c.as_str()).copied())
                .collect();
            let next_prefix = format!("{prefix}{cont}");
            if kids.len() == 1 {
                stack.push((kids[0], next_prefix, ""));
            } else {
                for (i, k) in kids.iter().enumerate().rev() {
                    let m = if i + 1 == kids.len() {
                        "└─ "
                    } else {
                        "├─ "
                    };
                    stack.push((k, next_prefix.clone(), m));
                }
            }
        }
        // Checkpoints on a cycle have no root above them.
        for e in &r.checkpoints {
            if !printed.contains(e.checkpoint_id.as_str()) {
                let _ = writeln!(out, "(in a cycle) {}", lineage_label(e));
            }
        }
    }
    if !r.findings.is_empty() {
        let _ = writeln!(out, "findings: {}", severity_counts(&r.findings));
        let _ = writeln!(out, "{}", findings_table(&r.findings));
    }
    finish(out)
}

pub mod bench;
pub mod bench_reporter;
pub mod delete;
pub mod prune;
