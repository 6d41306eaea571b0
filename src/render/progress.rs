//! The indicatif progress bar, shown on stderr only when stderr is a terminal.

use crate::progress::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A progress sink that draws on stderr when it is a terminal and stays silent otherwise.
pub struct TerminalProgress {
    bar: Option<ProgressBar>,
}

impl TerminalProgress {
    /// A bar when stderr is a terminal, nothing otherwise.
    pub fn stderr() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{spinner} {msg}: {pos} [{elapsed}]")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            b
        });
        TerminalProgress { bar }
    }
}

impl Progress for TerminalProgress {
    fn start(&self, message: &str, total: Option<u64>) {
        if let Some(b) = &self.bar {
            b.reset();
            b.set_length(total.unwrap_or(0));
            if total.is_some() {
                b.set_style(
                    ProgressStyle::with_template("{msg} {wide_bar} {pos}/{len} [{eta}]")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
            }
            b.set_message(message.to_owned());
        }
    }

    fn inc(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
