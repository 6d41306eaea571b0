//! The indicatif progress bar, shown on stderr only when stderr is a terminal: a bar with
//! elapsed time and ETA when the amount of work is known, a spinner otherwise, and a summary
//! line when a phase ends. Nothing is drawn before a phase has a label.

use dfck_core::progress::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// The bar of a phase whose amount of work is known.
const BAR: &str = "{msg} {wide_bar} {pos}/{len} [{elapsed_precise} elapsed, ETA {eta}]";
/// The spinner of a phase of unknown length.
const SPINNER: &str = "{spinner} {msg}: {pos} [{elapsed}]";

/// A progress sink that draws on stderr when it is a terminal and stays silent otherwise.
pub struct TerminalProgress {
    bar: Option<ProgressBar>,
    /// Whether a phase's end leaves a [`summary_line`].
    summary: bool,
}

/// The line left on stderr when a phase ends: what, how many, how long.
pub(crate) fn summary_line(
    message: &str,
    done: u64,
    total: Option<u64>,
    elapsed: Duration,
) -> String {
    let count = match total {
        Some(t) if t != done => format!("{done} of {t}"),
        _ => done.to_string(),
    };
    format!(
        "dfck: {message}: {count} in {}",
        indicatif::HumanDuration(elapsed)
    )
}

impl TerminalProgress {
    /// A bar when stderr is a terminal, nothing otherwise.
    pub fn stderr() -> Self {
        Self::new(std::io::stderr().is_terminal())
    }

    /// [`TerminalProgress::stderr`] that leaves no summary line (inspect's quick reads).
    pub fn stderr_quiet() -> Self {
        TerminalProgress {
            summary: false,
            ..Self::stderr()
        }
    }

    /// A bar (hidden until a phase starts) when `shown`, nothing otherwise.
    pub fn new(shown: bool) -> Self {
        let bar = shown.then(|| ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()));
        TerminalProgress { bar, summary: true }
    }
}

impl Progress for TerminalProgress {
    fn start(&self, message: &str, total: Option<u64>) {
        let Some(b) = &self.bar else { return };
        if message.is_empty() {
            return;
        }
        // Label and style first: the first frame drawn already says what runs.
        b.set_draw_target(ProgressDrawTarget::hidden());
        b.reset();
        b.set_message(message.to_owned());
        b.set_style(match total {
            Some(_) => {
                ProgressStyle::with_template(BAR).unwrap_or_else(|_| ProgressStyle::default_bar())
            }
            None => ProgressStyle::with_template(SPINNER)
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        });
        match total {
            Some(t) => b.set_length(t),
            None => b.unset_length(),
        }
        b.set_draw_target(ProgressDrawTarget::stderr());
        b.enable_steady_tick(Duration::from_millis(200));
    }

    fn wants_total(&self) -> bool {
        self.bar.is_some()
    }

    fn inc(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    fn finish(&self) {
        let Some(b) = &self.bar else { return };
        if b.is_hidden() || b.message().is_empty() {
            return;
        }
        let line = summary_line(&b.message(), b.position(), b.length(), b.elapsed());
        b.disable_steady_tick();
        b.finish_and_clear();
        b.set_draw_target(ProgressDrawTarget::hidden());
        if self.summary {
            super::note(&line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_says_what_how_many_and_how_long() {
        let d = Duration::from_secs(75);
        assert_eq!(
            summary_line("verifying threads", 12, Some(12), d),
            "dfck: verifying threads: 12 in 75 seconds"
        );
        assert_eq!(
            summary_line("copying", 3, Some(5), Duration::from_secs(2)),
            "dfck: copying: 3 of 5 in 2 seconds"
        );
    }

    #[test]
    fn nothing_is_drawn_or_summarized_without_a_terminal() {
        let p = TerminalProgress::new(false);
        p.start("x", Some(3));
        p.inc(3);
        p.finish();
        assert!(p.bar.is_none());
    }
}
