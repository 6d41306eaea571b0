//! `dfck verify [THREAD …]`.

use super::{GlobalArgs, output};
use crate::commands::verify::{VerifyOptions, verify_store};
use crate::render::{self, TerminalProgress};
use clap::Args;
use dfck_core::error::Error;
use dfck_core::outcome::Outcome;

/// Arguments of `dfck verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Threads to check (default: every thread in the store).
    pub threads: Vec<String>,
    /// The threads this DeerFlow user owns (`threads_meta.user_id`).
    #[arg(long, value_name = "ID", conflicts_with = "threads")]
    pub user: Option<String>,
    /// Report `lineage.depth_exceeded` for a parent walk from the head longer than N
    /// checkpoints (no limit by default: cycle detection bounds every walk).
    #[arg(long, value_name = "N")]
    pub max_depth: Option<usize>,
    /// Check threads concurrently over N connections.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
}

/// Runs `dfck verify`: exit 1 when any finding is an error.
pub fn run(global: &GlobalArgs, args: &VerifyArgs) -> Result<Outcome, Error> {
    let (target, _) = global.resolve()?;
    let store = target.open_read_only()?;
    let opts = VerifyOptions {
        max_depth: args.max_depth,
        jobs: args.jobs as usize,
    };
    let open = || target.open_read_only();
    let threads = match &args.user {
        Some(u) => crate::commands::deerflow_view::user_threads(store.as_ref(), u)?,
        None => args.threads.clone(),
    };
    // Findings are written as each thread finishes (the plain table layout, compact JSON,
    // NDJSON, CSV): memory stays flat whatever their number. A terminal's table and
    // `--pretty` JSON lay the whole report out.
    let format = global.format();
    let mut stream = match super::report::streamed("verify", format, false) {
        true => Some(render::FindingStream::new(format)?),
        false => None,
    };
    let streamed = stream.is_some();
    let mut write_row = |f: &dfck_core::finding::Finding| match stream.as_mut() {
        Some(s) => s.push(f),
        None => Ok(()),
    };
    let report = verify_store(
        store.as_ref(),
        &open,
        &threads,
        &opts,
        &TerminalProgress::stderr(),
        streamed.then_some(&mut write_row as crate::commands::verify::FindingSink<'_>),
    )?;
    match stream {
        Some(s) => s.finish(&report)?,
        None => output(format, &report, render::verify_table)?,
    }
    Ok(if report.has_errors() {
        Outcome::Findings
    } else {
        Outcome::Clean
    })
}
