//! `dfck verify` rendered: the findings table and its summary line, held whole or written as
//! the threads finish ([`FindingStream`]), byte for byte the same.

use super::stream::RowStream;
use super::{Format, add_row, esc, finish, ns_label, opt, table};
use crate::commands::verify::VerifyReport;
use dfck_core::error::Error;
use dfck_core::finding::{Finding, Severity};
use std::fmt::Write as _;

/// The columns of a findings table.
const HEADER: [&str; 6] = ["severity", "code", "thread", "ns", "checkpoint", "message"];

fn cells(f: &Finding) -> Vec<String> {
    vec![
        f.severity.as_str().to_owned(),
        f.code.to_string(),
        f.thread_id.clone(),
        ns_label(&f.checkpoint_ns),
        opt(&f.checkpoint_id),
        f.message.clone(),
    ]
}

pub(super) fn findings_table(findings: &[Finding]) -> super::Grid {
    let mut t = table(&HEADER);
    for f in findings {
        add_row(&mut t, cells(f));
    }
    t
}

/// How many findings of each severity, counted as they come.
#[derive(Default)]
struct Counts([u64; 3]);

impl Counts {
    fn add(&mut self, s: Severity) {
        self.0[match s {
            Severity::Error => 0,
            Severity::Warning => 1,
            Severity::Info => 2,
        }] += 1;
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [e, w, i] = self.0;
        write!(f, "{e} error(s), {w} warning(s), {i} info")
    }
}

pub(super) fn severity_counts(findings: &[Finding]) -> String {
    let mut n = Counts::default();
    findings.iter().for_each(|f| n.add(f.severity));
    n.to_string()
}

/// The lines above the findings table.
fn head(r: &VerifyReport, counts: &Counts) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "threads checked: {}  checkpoints checked: {}  findings: {counts}",
        r.threads_checked, r.checkpoints_checked,
    );
    for t in &r.threads_gone {
        let _ = writeln!(
            out,
            "skipped: thread {} was deleted after the listing (by DeerFlow?) before it was read",
            esc(t)
        );
    }
    out
}

/// `dfck verify` as text.
pub fn verify_table(r: &VerifyReport) -> String {
    let mut counts = Counts::default();
    r.findings.iter().for_each(|f| counts.add(f.severity));
    let mut out = head(r, &counts);
    if !r.findings.is_empty() {
        let _ = writeln!(out, "{}", findings_table(&r.findings));
    }
    finish(out)
}

/// The findings of `dfck verify` written as they come ([`RowStream`]: the plain table
/// layout, compact JSON, NDJSON or CSV), so that memory does not grow with them.
pub struct FindingStream {
    rows: RowStream,
    counts: Counts,
}

impl FindingStream {
    /// A stream for `format` ([`streams`](super::streams)).
    pub fn new(format: Format) -> Result<Self, Error> {
        Ok(FindingStream {
            rows: RowStream::new(format, "findings", &HEADER)?,
            counts: Counts::default(),
        })
    }

    /// Renders one finding.
    pub fn push(&mut self, f: &Finding) -> Result<(), Error> {
        self.counts.add(f.severity);
        self.rows.push(f, |g| add_row(g, cells(f)))
    }

    /// Writes the report `r` (its findings those pushed) to stdout.
    pub fn finish(self, r: &VerifyReport) -> Result<(), Error> {
        debug_assert!(r.findings.is_empty());
        let counts = self.counts;
        self.rows.finish(|| head(r, &counts), false, r)
    }
}
