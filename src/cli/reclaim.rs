//! `dfck reclaim [--into PATH] [--apply]`.

use super::{GlobalArgs, output};
use crate::commands::reclaim::{ReclaimOptions, ReclaimStatus, reclaim_postgres, reclaim_sqlite};
use crate::render;
use clap::Args;
use dfck_core::error::Error;
use dfck_core::outcome::Outcome;
use dfck_core::target::Target;
use std::path::PathBuf;

/// Arguments of `dfck reclaim`.
#[derive(Debug, Args)]
pub struct ReclaimArgs {
    /// Write a compacted copy of a SQLite store to PATH (a new file) and leave the store
    /// untouched, instead of vacuuming it in place.
    #[arg(long, value_name = "PATH")]
    pub into: Option<PathBuf>,
    /// Do it (without --apply: a dry run that says what would be done and changes nothing).
    #[arg(long)]
    pub apply: bool,
}

/// Runs `dfck reclaim`.
pub fn run(global: &GlobalArgs, args: &ReclaimArgs) -> Result<Outcome, Error> {
    // Refused before anything is done: the report is one record, not rows.
    if global.format == super::FormatArg::Csv {
        return Err(Error::Usage(
            "--format csv: reclaim's report has no flat rows; use --format json or ndjson".into(),
        ));
    }
    let (target, _) = global.resolve()?;
    let opts = ReclaimOptions {
        apply: args.apply,
        into: args.into.as_deref(),
    };
    let report = match &target {
        Target::Sqlite(path) => reclaim_sqlite(path, &opts)?,
        Target::Postgres { url, schema } => reclaim_postgres(url, schema.as_deref(), &opts)?,
    };
    output(global.format(), &report, render::space::reclaim_table)?;
    Ok(if report.status == ReclaimStatus::Refused {
        Outcome::Refused
    } else {
        Outcome::Clean
    })
}
