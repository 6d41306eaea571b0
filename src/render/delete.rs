//! `dfck delete` as text: one line of totals, where DeerFlow's history cache is, then a table
//! per thread.

use super::{add_row, finish, human_bytes, table};
use crate::commands::delete::DeleteReport;
use std::fmt::Write;

/// The delete report as text.
pub fn delete_table(r: &DeleteReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}threads: {} {}, {} refused, {} skipped — {} checkpoints{}",
        if r.dry_run {
            "dry run, nothing deleted — "
        } else {
            "applied — "
        },
        r.deleted,
        match (r.dry_run, r.erase) {
            (true, true) => "to erase",
            (true, false) => "to delete",
            (false, true) => "erased",
            (false, false) => "deleted",
        },
        r.refused,
        r.skipped,
        r.checkpoints,
        if r.erase {
            " (with every DeerFlow row of the thread)"
        } else {
            " (with DeerFlow's thread list entry; runs, events and feedback stay, as DeerFlow's own delete keeps them)"
        },
    );
    let cache = match (&r.cache.key_prefix, r.cache.prefix_from) {
        (Some(p), Some(from)) => format!("redis, keys {p}:<thread>:* (prefix from {from})"),
        _ => r.cache.kind.to_owned(),
    };
    let _ = writeln!(
        out,
        "deerflow: schema {}; history cache: {cache}",
        r.revision.as_deref().unwrap_or("unrecorded"),
    );
    if let Some(note) = &r.cache.note {
        let _ = writeln!(out, "note: {note}");
    }
    let mut t = table(&[
        "thread",
        "status",
        "owner",
        "checkpoints",
        "writes",
        "bytes",
        "deerflow rows",
        "cache keys",
        "files",
        "reason",
    ]);
    for d in &r.threads {
        let rows = if d.app_rows.is_empty() {
            "-".to_owned()
        } else {
            d.app_rows
                .iter()
                .map(|(table, n)| format!("{table} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        add_row(
            &mut t,
            vec![
                d.thread_id.clone(),
                d.status.as_str().to_owned(),
                d.user_id.clone().unwrap_or_else(|| "-".into()),
                d.checkpoints.to_string(),
                d.writes.to_string(),
                human_bytes(d.bytes),
                rows,
                d.cache_keys.map_or_else(|| "-".into(), |n| n.to_string()),
                d.files.len().to_string(),
                d.reason
                    .clone()
                    .or_else(|| d.note.clone())
                    .unwrap_or_else(|| "-".into()),
            ],
        );
    }
    let _ = writeln!(out, "{t}");
    finish(out)
}
