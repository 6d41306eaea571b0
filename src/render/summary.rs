//! The store summary (`dfck inspect` without a thread) as text, held whole
//! ([`summary_table`]) or written as its threads come ([`SummaryStream`]). Both write the
//! same bytes.

use super::grid::Grid;
use super::stream::RowStream;
use super::{Format, add_row, deerflow, escape, finish, human_bytes, opt, share, short_ts, space};
use crate::commands::inspect::{StoreSummary, ThreadSummary};
use dfck_core::error::Error;
use dfck_core::model::{ChannelMode, ThreadMode};
use escape::owned as esc;
use std::fmt::Write as _;

/// The summary's lines above its table: the store, its totals and notes, and the
/// "showing" line (or "(no threads)" when `shown` is 0). `delta`: how many of the shown
/// threads hold delta checkpoints.
fn head(s: &StoreSummary, shown: u64, delta: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "store:   {} ({})", esc(&s.location), s.backend);
    let _ = writeln!(out, "schema:  {}", esc(&s.schema));
    let _ = writeln!(
        out,
        "threads: {}  checkpoints: {}  writes: {}  bytes: {}",
        s.counts.threads,
        s.counts.checkpoints,
        s.counts.writes,
        human_bytes(s.bytes)
    );
    if let Some(c) = &s.config {
        let _ = writeln!(
            out,
            "config:  {} (checkpoint_channel_mode: {}, snapshot_frequency: {})",
            esc(&c.path),
            c.checkpoint_channel_mode,
            c.snapshot_frequency
        );
        if c.checkpoint_channel_mode == ChannelMode::Full && delta > 0 {
            let _ = writeln!(
                out,
                "note:    the config says full, but {delta} thread(s) hold delta checkpoints: a full-mode DeerFlow refuses them (convert with `dfck migrate delta-to-full`)"
            );
        }
    }
    space::summary_space(&mut out, s);
    deerflow::summary_deerflow(&mut out, s);
    if shown == 0 {
        let _ = writeln!(out, "(no threads)");
        return out;
    }
    if let Some(n) = s.top.filter(|n| *n < s.counts.threads) {
        let _ = writeln!(
            out,
            "showing: the first {n} of {} threads by {}",
            s.counts.threads,
            s.sort.as_str()
        );
    }
    out
}

/// The table's header (DeerFlow's columns with `deerflow`).
fn table(deerflow: bool) -> Vec<&'static str> {
    let mut headers = vec![
        "thread",
        "ns",
        "checkpoints",
        "writes",
        "bytes",
        "history",
        "mode",
        "head",
        "step",
        "ts",
        "first activity",
        "last activity",
    ];
    if deerflow {
        headers.extend(deerflow::HEADERS);
    }
    headers
}

/// One thread's row.
fn add_thread(t: &mut Grid, th: &ThreadSummary, deerflow: bool) {
    let mut row = vec![
        th.thread_id.clone(),
        th.namespaces.len().to_string(),
        th.checkpoints.to_string(),
        th.writes.to_string(),
        human_bytes(th.bytes),
        share(th.history_bytes, th.bytes),
        th.mode.as_str().to_owned(),
        th.head.checkpoint_id.clone(),
        opt(&th.head.step),
        short_ts(&th.head.ts),
        short_ts(&th.first_activity),
        short_ts(&th.last_activity),
    ];
    if deerflow {
        row.extend(deerflow::cells(th.deerflow.as_deref()));
    }
    add_row(t, row);
}

/// `dfck inspect` as text.
pub fn summary_table(s: &StoreSummary) -> String {
    let delta = s
        .threads
        .iter()
        .filter(|t| t.mode != ThreadMode::Full)
        .count();
    let mut out = head(s, s.threads.len() as u64, delta as u64);
    if s.threads.is_empty() {
        return finish(out);
    }
    let mut t = super::table(&table(s.deerflow.is_some()));
    for th in &s.threads {
        add_thread(&mut t, th, s.deerflow.is_some());
    }
    let _ = writeln!(out, "{t}");
    space::summary_channels(&mut out, s);
    space::summary_savings(&mut out, s);
    finish(out)
}

/// The store summary written as its threads come ([`RowStream`]: the plain table layout,
/// compact JSON, NDJSON or CSV).
pub struct SummaryStream {
    rows: RowStream,
    /// How many of the threads listed hold delta checkpoints.
    delta: u64,
    top: Option<u64>,
    deerflow: bool,
}

impl SummaryStream {
    /// Whether the summary can be streamed in `format` (otherwise it is held whole).
    pub fn streams(format: Format) -> bool {
        RowStream::streams(format)
    }

    /// A stream for `format` ([`SummaryStream::streams`]), listing the first `top` threads
    /// pushed, with DeerFlow's columns when `deerflow`.
    pub fn new(format: Format, top: Option<u64>, deerflow: bool) -> Result<Self, Error> {
        Ok(SummaryStream {
            rows: RowStream::new(format, "threads", &table(deerflow))?,
            delta: 0,
            top,
            deerflow,
        })
    }

    /// Renders one thread (past `top`, nothing).
    pub fn push(&mut self, t: &ThreadSummary) -> Result<(), Error> {
        if self.top.is_some_and(|n| self.rows.shown() >= n) {
            return Ok(());
        }
        self.delta += u64::from(t.mode != ThreadMode::Full);
        let deerflow = self.deerflow;
        self.rows.push(t, |g| add_thread(g, t, deerflow))
    }

    /// Writes the summary `s` (its threads those pushed) to stdout.
    pub fn finish(self, s: &StoreSummary) -> Result<(), Error> {
        debug_assert!(s.threads.is_empty());
        let (shown, delta) = (self.rows.shown(), self.delta);
        self.rows.finish(|| head(s, shown, delta), false, s)
    }
}
