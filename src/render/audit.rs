//! Rendering of `dfck audit`: the table (verdict, serializers, imports, notes) and the three
//! `--emit` artifacts: the Python allowlist, the `langgraph.json` fragment and the
//! environment line (docs/commands.md, docs/security.md).

use super::escape::owned as esc;
use super::{add_row, finish, table};
use crate::commands::audit::tally::NotAudited;
use crate::commands::audit::{AuditReport, Entry, Seen, Verdict};
use dfck_core::strict::Class;
use std::fmt::Write as _;

/// The line `--emit env` prints when the safe set alone reads every value.
pub const STRICT_ENV_LINE: &str = "LANGGRAPH_STRICT_MSGPACK=true";

fn not_audited_why(n: NotAudited) -> &'static str {
    match n {
        NotAudited::NoKey => "encrypted: set LANGGRAPH_AES_KEY or pass --aes-key-file",
        NotAudited::Cipher => "another cipher: dfck cannot open it",
        NotAudited::Pickle => {
            "pickle: only Python reads it (pickle_fallback), no allowlist applies"
        }
        NotAudited::UnknownTag => "not a serializer tag dfck knows",
    }
}

/// A checkpoint's time (or its id when it carries none) for a table cell.
fn seen(s: &Option<Seen>) -> String {
    match s {
        Some(s) => s
            .time
            .as_ref()
            .map(|t| t.trim_end_matches('Z').replacen('T', " ", 1))
            .unwrap_or_else(|| s.checkpoint_id.clone()),
        None => "-".into(),
    }
}

fn target(e: &Entry) -> String {
    match &e.method {
        Some(m) => format!("{}.{}", e.name, m),
        None => e.name.clone(),
    }
}

/// The verdict in one sentence.
pub fn verdict_line(r: &AuditReport) -> String {
    let s = &r.strict;
    let n = s.allowed_msgpack_modules.len();
    match s.verdict {
        Verdict::Reads if n == 0 => {
            "reads: the safe set alone reads every value (LANGGRAPH_STRICT_MSGPACK=true)".into()
        }
        Verdict::Reads => format!(
            "reads: every value reads back under strict mode with the allowlist of {n} entr{}; without it, {} value(s) come back as plain data (dicts, lists, values) instead of objects",
            if n == 1 { "y" } else { "ies" },
            s.rows_needing_allowlist
        ),
        Verdict::Breaks => format!(
            "breaks: {} value(s) hold an import that is never allowed (possible tampering): strict mode does not revive them, whatever the allowlist",
            s.rows_never_allowed
        ),
        Verdict::Unknown => format!(
            "unknown: {} value(s) could not be audited, {} did not decode: dfck cannot say they read back",
            s.rows_not_audited, s.rows_undecodable
        ),
    }
}

/// The notes under the table: what other switches the store needs, what was not audited.
pub fn notes(r: &AuditReport) -> Vec<String> {
    let s = &r.strict;
    let mut out = Vec::new();
    for e in r.entries.iter().filter(|e| e.class == Class::NeverAllowed) {
        let at = e
            .first_seen
            .as_ref()
            .map(|p| {
                format!(
                    " (first in thread {}, checkpoint {}{})",
                    p.thread_id,
                    p.checkpoint_id,
                    p.channel
                        .as_ref()
                        .map(|c| format!(", channel {c}"))
                        .unwrap_or_default()
                )
            })
            .unwrap_or_default();
        out.push(format!(
            "never allowed: {} {}.{}{at}: {}",
            e.via,
            e.module,
            target(e),
            e.reason
        ));
    }
    if !s.allowed_json_modules.is_empty() {
        let ids: Vec<String> = s
            .allowed_json_modules
            .iter()
            .map(|id| format!("{id:?}"))
            .collect();
        out.push(format!(
            "json rows: {} constructor(s) come back as dicts in every mode unless JsonPlusSerializer(allowed_json_modules=…) names them: {}",
            ids.len(),
            ids.join(", ")
        ));
    }
    if s.pickle_rows > 0 {
        out.push(format!(
            "pickle: {} value(s) read only with JsonPlusSerializer(pickle_fallback=True), which runs pickle.loads: no allowlist restricts what it imports",
            s.pickle_rows
        ));
    }
    for ser in r.serializers.iter().filter(|x| x.not_audited.is_some()) {
        let n = ser.rows - ser.audited - ser.undecodable;
        if let (Some(why), true) = (ser.not_audited, n > 0) {
            if why != NotAudited::Pickle {
                out.push(format!(
                    "not audited: {n} {} value(s): {}",
                    ser.type_tag,
                    not_audited_why(why)
                ));
            }
        }
    }
    for u in &r.undecodable {
        out.push(format!(
            "undecodable: thread {}, checkpoint {}{}: {} ({})",
            u.place.thread_id,
            u.place.checkpoint_id,
            u.place
                .channel
                .as_ref()
                .map(|c| format!(", channel {c}"))
                .unwrap_or_default(),
            u.error,
            u.type_tag
        ));
    }
    out
}

/// `dfck audit` as text.
pub fn audit_table(r: &AuditReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "store:   {} ({})", esc(&r.location), r.backend);
    let _ = writeln!(
        out,
        "read:    {} threads, {} values; classes of langgraph-checkpoint {} strict mode",
        r.threads_audited, r.values, r.langgraph_checkpoint
    );
    let _ = writeln!(out, "strict:  {}", verdict_line(r));
    let mut t = table(&["serializer", "rows", "audited", "undecodable"]);
    for s in &r.serializers {
        add_row(
            &mut t,
            vec![
                s.type_tag.clone(),
                s.rows.to_string(),
                s.audited.to_string(),
                s.undecodable.to_string(),
            ],
        );
    }
    let _ = writeln!(out, "\n{t}");
    if r.entries.is_empty() {
        let _ = writeln!(out, "(no value imports anything)");
    } else {
        let mut t = table(&[
            "module",
            "name",
            "via",
            "class",
            "rows",
            "checkpoints",
            "writes",
            "threads",
            "first seen",
            "last seen",
        ]);
        for e in &r.entries {
            add_row(
                &mut t,
                vec![
                    e.module.clone(),
                    target(e),
                    e.via.clone(),
                    e.class.label().to_owned(),
                    e.rows.to_string(),
                    e.checkpoints.to_string(),
                    e.writes.to_string(),
                    e.threads.to_string(),
                    seen(&e.first_seen),
                    seen(&e.last_seen),
                ],
            );
        }
        let _ = writeln!(out, "\n{t}");
    }
    if !r.strict.allowed_msgpack_modules.is_empty() {
        let _ = writeln!(
            out,
            "\nallowlist: allowed_msgpack_modules = {} (dfck audit --emit python|langgraph-json)",
            python_list(&r.strict.allowed_msgpack_modules, false)
        );
    }
    let notes = notes(r);
    if !notes.is_empty() {
        let _ = writeln!(out);
        for n in notes {
            let _ = writeln!(out, "note:    {}", esc(&n));
        }
    }
    if !r.threads_gone.is_empty() {
        let _ = writeln!(
            out,
            "gone:    {} (deleted before they were read)",
            esc(&r.threads_gone.join(", "))
        );
    }
    finish(out)
}

/// A Python (and JSON) string literal: JSON's escapes are Python's.
fn py_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// `[("mod", "Name"), …]`, one entry per line when `multiline`.
fn python_list(pairs: &[[String; 2]], multiline: bool) -> String {
    if pairs.is_empty() {
        return "[]".into();
    }
    let items: Vec<String> = pairs
        .iter()
        .map(|[m, n]| format!("({}, {})", py_str(m), py_str(n)))
        .collect();
    if multiline {
        format!("[\n    {},\n]", items.join(",\n    "))
    } else {
        format!("[{}]", items.join(", "))
    }
}

/// `--emit python`: `allowed_msgpack_modules = [("mod", "Name"), …]`, sorted, one entry a
/// line: Python source to exec, or `ast.literal_eval` what follows the `=`.
pub fn emit_python(r: &AuditReport) -> String {
    format!(
        "allowed_msgpack_modules = {}\n",
        python_list(&r.strict.allowed_msgpack_modules, true)
    )
}

/// `--emit langgraph-json`: the `langgraph.json` fragment
/// `{"checkpointer": {"serde": {"allowed_msgpack_modules": [["mod", "Name"], …]}}}`, with
/// `null` (the safe set alone) when nothing is needed.
pub fn emit_langgraph_json(r: &AuditReport) -> String {
    let list = &r.strict.allowed_msgpack_modules;
    let value = if list.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::json!(list)
    };
    let doc = serde_json::json!({"checkpointer": {"serde": {"allowed_msgpack_modules": value}}});
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

/// `--emit env`: [`STRICT_ENV_LINE`] when the safe set alone reads every value, else
/// nothing (the reason goes to stderr, see [`env_refusal`]).
pub fn emit_env(r: &AuditReport) -> String {
    if r.strict.safe_set_suffices {
        format!("{STRICT_ENV_LINE}\n")
    } else {
        String::new()
    }
}

/// Why `--emit env` printed nothing.
pub fn env_refusal(r: &AuditReport) -> Option<String> {
    if r.strict.safe_set_suffices {
        return None;
    }
    Some(if r.strict.allowed_msgpack_modules.is_empty() {
        format!(
            "dfck: audit: {STRICT_ENV_LINE} is not enough to promise every value reads back ({})",
            verdict_line(r)
        )
    } else {
        format!(
            "dfck: audit: the safe set alone is not enough: {} type(s) need the allowlist; put it into langgraph.json (dfck audit --emit langgraph-json) or JsonPlusSerializer(allowed_msgpack_modules=…) (dfck audit --emit python), which also turns strict mode on",
            r.strict.allowed_msgpack_modules.len()
        )
    })
}
