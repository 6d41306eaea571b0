//! `dfck migrate full-to-delta` as text: one line of totals, then a table per thread; held
//! whole ([`full_to_delta_table`]) or written as its threads are done ([`stream`]).

use super::grid::Grid;
use super::stream::ReportStream;
use super::{Format, add_row, finish, human_bytes, opt, table};
use crate::commands::migrate::to_delta::{DeltaForm, ToDeltaReport, ToDeltaThread};
use dfck_core::error::Error;
use std::fmt::Write as _;

const HEADER: [&str; 8] = [
    "thread",
    "status",
    "form",
    "checkpoints",
    "snapshots (cadence/fork/mismatch/overwrite/shared)",
    "bytes before",
    "bytes after",
    "reason",
];

/// The per-thread table, with the snapshots placed by reason.
pub fn full_to_delta_table(r: &ToDeltaReport) -> String {
    let mut out = head(r);
    let mut t = table(&HEADER);
    for p in &r.threads {
        cells(&mut t, p);
    }
    let _ = writeln!(out, "{t}");
    finish(out)
}

/// The line above the table of `r`.
pub(crate) fn head(r: &ToDeltaReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}threads: {} {}, {} refused, {} skipped (nothing to convert); snapshot frequency {}",
        if r.dry_run {
            "dry run, nothing written — "
        } else {
            "applied — "
        },
        if r.dry_run { r.would } else { r.done },
        if r.dry_run { "to convert" } else { "converted" },
        r.refused,
        r.skipped,
        r.snapshot_frequency
    );
    out
}

/// One thread's row.
fn cells(t: &mut Grid, p: &ToDeltaThread) {
    add_row(
        t,
        vec![
            p.thread_id.clone(),
            p.status.as_str().to_owned(),
            p.form
                .map(|f| match f {
                    DeltaForm::Deerflow => "deerflow",
                    DeltaForm::Langgraph => "langgraph",
                })
                .unwrap_or("-")
                .to_owned(),
            p.checkpoints_rewritten.to_string(),
            format!(
                "{}/{}/{}/{}/{}",
                p.snapshots.cadence,
                p.snapshots.fork,
                p.snapshots.replay_mismatch,
                p.snapshots.overwrite,
                p.snapshots.shared_version
            ),
            human_bytes(p.bytes_before),
            human_bytes(p.bytes_after),
            opt(&p.reason),
        ],
    );
}

/// The conversion report written as its threads are done ([`ReportStream`]); [`head`] gives
/// its line of totals.
pub(crate) fn stream(format: Format) -> Result<ReportStream<ToDeltaThread>, Error> {
    ReportStream::new(format, &HEADER, cells)
}
