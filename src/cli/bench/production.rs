//! `dfck bench production` (not implemented yet).

use crate::cli::GlobalArgs;
use crate::error::Error;
use clap::Args;

/// Arguments of `dfck bench production`.
#[derive(Debug, Args)]
pub struct ProductionArgs {}

/// Runs `dfck bench production`.
pub fn run(_global: &GlobalArgs, _args: &ProductionArgs) -> Result<i32, Error> {
    Err(Error::Usage(
        "dfck bench production is not implemented yet".into(),
    ))
}
