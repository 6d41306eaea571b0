//! What `dfck bench channels|production` print on stderr while they run: a progress bar over
//! the cases with elapsed time and ETA when stderr is a terminal, else the plain `[i/N]` line
//! of each case, the interruption note and DeerFlow's summary line (the reporter of
//! [`dfck_bench::controller::run_cases`]), plus the planning notes of the bench commands
//! (duplicate-value warnings, the safety cap, replayed threads).

use dfck_bench::controller::{CasesOutcome, Reporter};
use dfck_bench::production::estimate::MatrixEstimate;
use dfck_bench::summarize::replay::ReplayAggregate;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Map, Value};
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

/// The stderr reporter of the benchmark controllers.
pub struct StderrReporter {
    /// The bar over the cases, when stderr is a terminal.
    bar: Option<ProgressBar>,
}

impl StderrReporter {
    /// A bar when stderr is a terminal, plain lines otherwise.
    pub fn new() -> Self {
        StderrReporter {
            bar: std::io::stderr()
                .is_terminal()
                .then(|| ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden())),
        }
    }
}

impl Default for StderrReporter {
    fn default() -> Self {
        Self::new()
    }
}

impl Reporter for StderrReporter {
    fn case_started(&mut self, index: usize, total: usize, progress: &str) {
        let Some(b) = &self.bar else {
            eprintln!("{progress}");
            return;
        };
        if b.length().is_none() {
            b.set_message(progress.to_owned());
            b.set_style(
                ProgressStyle::with_template(
                    "{wide_msg} {bar:20} {pos}/{len} [{elapsed_precise} elapsed, ETA {eta}]",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b.set_length(total as u64);
            b.set_draw_target(ProgressDrawTarget::stderr());
            b.enable_steady_tick(Duration::from_millis(500));
        }
        b.set_position(index.saturating_sub(1) as u64);
        b.set_message(progress.to_owned());
    }

    fn row(&mut self, _row: &Map<String, Value>) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    fn interrupted(&mut self) {
        let line = "Interrupted; the running case was stopped and has no row.";
        match &self.bar {
            Some(b) => b.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    fn done(&mut self, outcome: &CasesOutcome, output: &Path) {
        if let Some(b) = &self.bar {
            let line = super::progress::summary_line(
                "benchmark cases",
                b.position(),
                b.length(),
                b.elapsed(),
            );
            b.disable_steady_tick();
            b.finish_and_clear();
            if b.length().is_some() {
                eprintln!("{line}");
            }
        }
        eprintln!(
            "Wrote {} result row(s) to {}; failures={}",
            outcome.rows.len(),
            output.display(),
            outcome.failures()
        );
    }
}

/// A note of a bench command on stderr (warnings, the safety cap, replay progress).
pub fn note(text: &str) {
    eprintln!("{text}");
}

/// The matrix size and estimate `bench production` prints before its first case.
pub fn report_estimate(e: &MatrixEstimate) {
    eprintln!(
        "Matrix: {} case(s); estimated {} written (largest full case {}), about {}",
        e.cases,
        human_bytes(e.bytes),
        human_bytes(e.largest_full_bytes),
        human_seconds(e.seconds)
    );
}

fn human_bytes(b: u128) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {} ({b} bytes)", UNITS[unit])
    }
}

fn human_seconds(s: u128) -> String {
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s.div_ceil(60)),
        _ => format!("{:.1} h", s as f64 / 3600.0),
    }
}

/// The one-line aggregate of replay rows across their source threads.
pub fn replay_aggregate_line(a: &ReplayAggregate) -> String {
    let who = match (a.engine.as_str(), a.backend.as_str()) {
        ("", "") => String::new(),
        (e, b) => format!(" ({e} {b})"),
    };
    let sizes = if a.cadences.is_empty() {
        "n/a".to_string()
    } else {
        a.cadences
            .iter()
            .map(|c| {
                let ratio = if c.full_bytes > 0.0 {
                    format!("{:.3}", c.delta_bytes / c.full_bytes)
                } else {
                    "-".into()
                };
                format!(
                    "K={} full {} vs delta {} (ratio {ratio})",
                    c.snapshot_frequency, c.full_bytes as u128, c.delta_bytes as u128
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let r = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    format!(
        "Replay aggregate over {} source thread(s){who}: durable bytes {sizes}; median cold read ratio delta/full: state {}, history {}",
        a.threads,
        r(a.state_cold_ratio),
        r(a.history_cold_ratio)
    )
}

/// Prints every replay aggregate line on stderr.
pub fn report_replay_aggregates(aggregates: &[ReplayAggregate]) {
    for a in aggregates {
        eprintln!("{}", replay_aggregate_line(a));
    }
}
