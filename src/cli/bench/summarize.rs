//! `dfck bench summarize` (not implemented yet).

use crate::cli::GlobalArgs;
use crate::error::Error;
use clap::Args;

/// Arguments of `dfck bench summarize`.
#[derive(Debug, Args)]
pub struct SummarizeArgs {}

/// Runs `dfck bench summarize`.
pub fn run(_global: &GlobalArgs, _args: &SummarizeArgs) -> Result<i32, Error> {
    Err(Error::Usage(
        "dfck bench summarize is not implemented yet".into(),
    ))
}
