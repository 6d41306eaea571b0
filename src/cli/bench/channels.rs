//! `dfck bench channels` (not implemented yet).

use crate::cli::GlobalArgs;
use crate::error::Error;
use clap::Args;

/// Arguments of `dfck bench channels`.
#[derive(Debug, Args)]
pub struct ChannelsArgs {}

/// Runs `dfck bench channels`.
pub fn run(_global: &GlobalArgs, _args: &ChannelsArgs) -> Result<i32, Error> {
    Err(Error::Usage(
        "dfck bench channels is not implemented yet".into(),
    ))
}
