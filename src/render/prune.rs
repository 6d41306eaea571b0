//! `dfck prune` as text: one line of totals, then a table per thread.

use super::grid::Grid;
use super::stream::ReportStream;
use super::{Format, add_row, finish, human_bytes, table};
use crate::commands::prune::{PruneReport, ThreadPrune};
use dfck_core::error::Error;
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
    totals(&mut out, r);
    let mut t = table(&HEADER);
    for p in &r.threads {
        cells(&mut t, p);
    }
    let _ = writeln!(out, "{t}");
    finish(out)
}

const HEADER: [&str; 10] = [
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
];

/// The line of totals above the table.
fn totals(out: &mut String, r: &PruneReport) {
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
}

/// One thread's row.
fn cells(t: &mut Grid, p: &ThreadPrune) {
    add_row(
        t,
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

/// The prune report written as its threads are done ([`ReportStream`]), for a prune that
/// deletes no thread whole; [`head`] gives its line of totals.
pub(crate) fn stream(format: Format) -> Result<ReportStream<ThreadPrune>, Error> {
    ReportStream::new(format, &HEADER, cells)
}

/// The line above the table of `r`.
pub(crate) fn head(r: &PruneReport) -> String {
    let mut out = String::new();
    totals(&mut out, r);
    out
}
