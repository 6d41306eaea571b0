//! `dfck delete` as text: one line of totals, where DeerFlow's history cache is, then a table
//! per thread; held whole or written as the threads come ([`DeleteStream`]), byte for byte
//! the same.

use super::grid::Grid;
use super::stream::RowStream;
use super::{Format, add_row, finish, human_bytes, table, table_counts};
use crate::commands::delete::{DeleteReport, ThreadDelete};
use dfck_core::error::Error;
use std::fmt::Write;

/// The columns of the threads table.
const HEADER: [&str; 10] = [
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
];

/// The lines above the threads table.
fn head(r: &DeleteReport) -> String {
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
    out
}

fn add_thread(t: &mut Grid, d: &ThreadDelete) {
    let rows = table_counts(&d.app_rows);
    add_row(
        t,
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

/// The delete report as text.
pub fn delete_table(r: &DeleteReport) -> String {
    let mut out = head(r);
    let mut t = table(&HEADER);
    for d in &r.threads {
        add_thread(&mut t, d);
    }
    let _ = writeln!(out, "{t}");
    finish(out)
}

/// The delete report written as its threads come ([`RowStream`]: the plain table layout,
/// compact JSON, NDJSON or CSV), so that its memory does not grow with the threads.
pub struct DeleteStream {
    rows: RowStream,
}

impl DeleteStream {
    /// A stream for `format` ([`streams`](super::streams)).
    pub fn new(format: Format) -> Result<Self, Error> {
        Ok(DeleteStream {
            rows: RowStream::new(format, "threads", &HEADER)?,
        })
    }

    /// Renders one thread.
    pub fn push(&mut self, d: &ThreadDelete) -> Result<(), Error> {
        self.rows.push(d, |g| add_thread(g, d))
    }

    /// Writes the report `r` (its threads those pushed) to stdout.
    pub fn finish(self, r: &DeleteReport) -> Result<(), Error> {
        debug_assert!(r.threads.is_empty());
        self.rows.finish(|| head(r), true, r)
    }
}
