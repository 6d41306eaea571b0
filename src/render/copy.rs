//! The `copy` report: its totals, DeerFlow's rows (its shared rows and per thread) or what a
//! copy left behind, and a row per thread; held whole or written as the threads come
//! ([`CopyStream`]), byte for byte the same.

use super::grid::Grid;
use super::stream::RowStream;
use super::{Format, add_row, esc, finish, human_bytes, opt, table, table_counts};
use crate::commands::copy::{CopyReport, CopyThread};
use dfck_core::error::Error;
use std::fmt::Write as _;

/// The columns of the threads table, with DeerFlow's rows when they are copied.
fn header(deerflow: bool) -> Vec<&'static str> {
    let mut headers = vec![
        "thread",
        "status",
        "namespaces",
        "checkpoints",
        "writes",
        "bytes",
    ];
    if deerflow {
        headers.push("deerflow rows");
    }
    headers.push("reason");
    headers
}

fn add_thread(t: &mut Grid, p: &CopyThread, deerflow: bool) {
    let mut row = vec![
        p.thread_id.clone(),
        p.status.as_str().to_owned(),
        p.namespaces.to_string(),
        p.checkpoints.to_string(),
        p.writes.to_string(),
        human_bytes(p.bytes),
    ];
    if deerflow {
        row.push(table_counts(&p.deerflow_rows));
    }
    row.push(opt(&p.reason));
    add_row(t, row);
}

/// The lines above the threads table.
fn head(r: &CopyReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}{} \u{2192} {}{}",
        if r.dry_run {
            "dry run, nothing written — "
        } else {
            "applied — "
        },
        esc(&r.source),
        esc(&r.target),
        match (r.target_created, r.dry_run) {
            (true, true) => " (empty or missing: would be set up as a LangGraph store)",
            (true, false) => " (set up as a LangGraph store)",
            _ => "",
        }
    );
    let _ = writeln!(
        out,
        "threads: {} {}, {} refused, {} skipped; {} checkpoints, {} writes, {}",
        r.copied,
        if r.dry_run { "to copy" } else { "copied" },
        r.refused,
        r.skipped,
        r.checkpoints,
        r.writes,
        human_bytes(r.bytes)
    );
    if let Some(d) = &r.deerflow {
        let _ = writeln!(
            out,
            "deerflow: schema {}; rows {}: {}",
            d.revision.as_deref().unwrap_or("unrecorded"),
            if r.dry_run { "to copy" } else { "copied" },
            table_counts(&d.rows)
        );
        if let Some(s) = &d.shared {
            let what = match (s.rows.is_empty(), &s.reason) {
                (true, Some(why)) => esc(why),
                (false, Some(why)) => format!("{} ({})", table_counts(&s.rows), esc(why)),
                (_, None) => table_counts(&s.rows),
            };
            let _ = writeln!(out, "deerflow rows outside threads: {}: {what}", s.status);
        }
    }
    out
}

/// The lines below the threads table.
fn tail(r: &CopyReport) -> String {
    let mut out = String::new();
    if !r.not_copied.is_empty() {
        let _ = writeln!(
            out,
            "not copied (--checkpoints-only): DeerFlow's own tables ({})",
            r.not_copied.join(", ")
        );
    }
    out
}

/// The `copy` report as a table: totals, DeerFlow's rows (its shared rows and per thread),
/// or what a copy left behind.
pub fn copy_table(r: &CopyReport) -> String {
    let mut out = head(r);
    let mut t = table(&header(r.deerflow.is_some()));
    for p in &r.threads {
        add_thread(&mut t, p, r.deerflow.is_some());
    }
    let _ = writeln!(out, "{t}");
    out.push_str(&tail(r));
    finish(out)
}

/// The `copy` report written as its threads come ([`RowStream`]: the plain table layout,
/// compact JSON, NDJSON or CSV), so that memory does not grow with the threads.
pub struct CopyStream {
    rows: RowStream,
    deerflow: bool,
}

impl CopyStream {
    /// A stream for `format` ([`streams`](super::streams)), with the column of DeerFlow's rows
    /// when `deerflow`.
    pub fn new(format: Format, deerflow: bool) -> Result<Self, Error> {
        Ok(CopyStream {
            rows: RowStream::new(format, "threads", &header(deerflow))?,
            deerflow,
        })
    }

    /// Renders one thread.
    pub fn push(&mut self, t: &CopyThread) -> Result<(), Error> {
        let deerflow = self.deerflow;
        self.rows.push(t, |g| add_thread(g, t, deerflow))
    }

    /// Writes the report `r` (its threads those pushed) to stdout.
    pub fn finish(self, r: &CopyReport) -> Result<(), Error> {
        debug_assert!(r.threads.is_empty());
        self.rows.finish_around(|| head(r), true, || tail(r), r)
    }
}
