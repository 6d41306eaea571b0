//! `dfck prune` as text: one line of totals, then a table per thread.

use super::{add_row, finish, human_bytes, table};
use crate::commands::prune::PruneReport;
use std::fmt::Write;

/// The prune report as text.
pub fn prune_table(r: &PruneReport) -> String {
    let mut out = String::new();
    if let Some(d) = &r.deerflow_delete {
        let _ = writeln!(
            out,
            "whole threads, deleted as DeerFlow deletes them (its thread list entry, history cache and files go too):"
        );
        out.push_str(&super::delete::delete_table(d));
        if r.threads.is_empty() {
            return out;
        }
        let _ = writeln!(out, "\nthe other threads:");
    }
    let _ = writeln!(
        out,
        "{}threads: {} {}, {} refused, {} skipped — {} checkpoints, {} {}",
        if r.dry_run {
            "dry run, nothing deleted — "
        } else {
            "applied — "
        },
        r.pruned,
        if r.dry_run { "to prune" } else { "pruned" },
        r.refused,
        r.skipped,
        r.checkpoints,
        human_bytes(r.bytes_freed),
        if r.dry_run { "to free" } else { "freed" },
    );
    let mut t = table(&[
        "thread",
        "status",
        "deleted",
        "duration leaves",
        "branch",
        "cut (turns)",
        "kept",
        "writes",
        "bytes",
        "reason",
    ]);
    for p in &r.threads {
        add_row(
            &mut t,
            vec![
                p.thread_id.clone(),
                p.status.as_str().to_owned(),
                if p.whole_thread {
                    format!("{} (whole thread)", p.checkpoints)
                } else {
                    p.checkpoints.to_string()
                },
                p.duration_leaves.to_string(),
                p.branch_checkpoints.to_string(),
                format!("{} ({})", p.cut_checkpoints, p.turns_cut),
                p.kept.to_string(),
                p.writes.to_string(),
                human_bytes(p.bytes_freed),
                p.reason
                    .clone()
                    .or_else(|| p.note.clone())
                    .unwrap_or_else(|| "-".into()),
            ],
        );
    }
    let _ = writeln!(out, "{t}");
    finish(out)
}
