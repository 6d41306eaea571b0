//! The `dfck` binary: parse, dispatch, and map outcomes and errors to exit codes in this one
//! place. Nothing else.

use clap::error::ErrorKind;
use dfck::cli::{help, run};
use dfck::outcome::Outcome;

/// mimalloc keeps freed memory for reuse: reading a store allocates and frees a buffer per
/// checkpoint, each larger than the last on a growing thread, which glibc's malloc serves
/// with a fresh mmap every time (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let code = match help::parse() {
        Ok(cli) => match run(cli) {
            Ok(Outcome::Clean) => 0,
            Ok(Outcome::Findings | Outcome::Refused | Outcome::Failed) => 1,
            Ok(Outcome::Interrupted) => 130,
            Err(e) => fail(&e.to_string()),
        },
        Err(e) => match e.kind() {
            // --help and --version print in full, on stdout, and succeed.
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                let _ = e.print();
                0
            }
            _ => fail(&usage_line(&e)),
        },
    };
    std::process::exit(code);
}

/// Prints one error line on stderr; exit code 2.
fn fail(msg: &str) -> i32 {
    // One line, and no terminal control sequences from store data.
    let msg = msg.replace(['\n', '\r'], " ");
    let msg = dfck::render::escape::cell(&msg);
    eprintln!("dfck: error: {msg}");
    2
}

/// A clap usage error as one line: its message, its tips, and where to read more.
fn usage_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("Usage:") || line.starts_with("For more information")
        {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        parts.push(line.to_owned());
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        parts = vec!["a subcommand is required".to_owned()];
    }
    let mut out = parts.join("; ");
    if out.is_empty() {
        out = "invalid arguments".to_owned();
    }
    out.push_str(" (see dfck --help)");
    out
}
