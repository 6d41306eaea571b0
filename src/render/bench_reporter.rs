//! What `dfck bench channels|production` print on stderr while they run: the `[i/N]` progress
//! line of each case, the interruption note and DeerFlow's summary line (the reporter of
//! [`crate::bench::controller::run_cases`]), plus the planning notes of the bench commands
//! (duplicate-value warnings, the safety cap, replayed threads).

use crate::bench::controller::{CasesOutcome, Reporter};
use serde_json::{Map, Value};
use std::path::Path;

/// The stderr reporter of the benchmark controllers.
#[derive(Debug, Default)]
pub struct StderrReporter;

impl Reporter for StderrReporter {
    fn case_started(&mut self, _index: usize, _total: usize, progress: &str) {
        eprintln!("{progress}");
    }

    fn row(&mut self, _row: &Map<String, Value>) {}

    fn interrupted(&mut self) {
        eprintln!("Interrupted; the running case was stopped and has no row.");
    }

    fn done(&mut self, outcome: &CasesOutcome, output: &Path) {
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
