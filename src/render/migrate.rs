//! `dfck migrate delta-to-full` as text: one line of totals, then a table per thread; held
//! whole ([`migrate_table`]) or written as its threads are done ([`stream`]).

use super::grid::Grid;
use super::stream::ReportStream;
use super::{Format, add_row, finish, human_bytes, opt, table};
use crate::commands::migrate::{MigrateReport, ThreadPlan};
use dfck_core::error::Error;
use std::fmt::Write;

const HEADER: [&str; 6] = [
    "thread",
    "status",
    "checkpoints",
    "bytes before",
    "bytes after",
    "reason",
];

/// The conversion report as text.
pub fn migrate_table(r: &MigrateReport) -> String {
    let mut out = head(r);
    let mut t = table(&HEADER);
    for p in &r.threads {
        cells(&mut t, p);
    }
    let _ = writeln!(out, "{t}");
    finish(out)
}

/// The line above the table of `r`.
pub(crate) fn head(r: &MigrateReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}threads: {} {}, {} refused, {} skipped (no delta checkpoint)",
        if r.dry_run {
            "dry run, nothing written — "
        } else {
            "applied — "
        },
        r.converted,
        if r.dry_run { "to convert" } else { "converted" },
        r.refused,
        r.skipped
    );
    out
}

/// One thread's row.
fn cells(t: &mut Grid, p: &ThreadPlan) {
    add_row(
        t,
        vec![
            p.thread_id.clone(),
            p.status.as_str().to_owned(),
            p.checkpoints_rewritten.to_string(),
            human_bytes(p.bytes_before),
            human_bytes(p.bytes_after),
            opt(&p.reason),
        ],
    );
}

/// The conversion report written as its threads are done ([`ReportStream`]); [`head`] gives
/// its line of totals.
pub(crate) fn stream(format: Format) -> Result<ReportStream<ThreadPlan>, Error> {
    ReportStream::new(format, &HEADER, cells)
}
