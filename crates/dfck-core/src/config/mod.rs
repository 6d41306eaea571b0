//! DeerFlow config discovery: with no `--db`, find the checkpoint store the way DeerFlow does
//! (see docs/config.md).
//!
//! 1. The config file: `--config`, else `DEER_FLOW_CONFIG_PATH` (must exist), else
//!    `config.yaml` in `DEER_FLOW_PROJECT_ROOT` (must be a directory) or the current directory,
//!    else the source-tree fallbacks `./backend/config.yaml` and, run from `backend/`,
//!    `../config.yaml` (`locate`).
//! 2. The environment: the process environment, plus one `.env` file (`--env-file`, else the
//!    first of `.env` beside the config, at the project root, in the DeerFlow CWD) that never
//!    overrides a variable already set, as DeerFlow's `load_dotenv()` (`dotenv`). A YAML
//!    string starting with `$` is replaced whole by that variable, in the sections dfck reads
//!    (`database`, `checkpointer`); a missing variable is an error naming it.
//! 3. The store: the legacy top-level `checkpointer:` wins; else `database.backend`
//!    (`backend`).
//!
//! This module owns the types discovery returns; [`discover`] ties the steps together.
//! Library code: nothing here prints. Error messages are one line and never contain a
//! password (URLs go through [`crate::redact::redact_url`]).

mod app;
mod backend;
mod discover;
mod dotenv;
mod lines;
mod locate;
mod paths;
pub mod policy;
mod yaml;

#[cfg(test)]
mod app_tests;
#[cfg(test)]
mod tests;

pub use crate::error::ConfigError;
pub use app::AppConfig;
pub use backend::valid_schema;
pub use discover::discover;
pub use dotenv::parse_dotenv;
pub use lines::line_of_key;

use crate::model::ChannelMode;
use crate::store::Backend;
use crate::target::Target;
use std::path::{Path, PathBuf};

/// What discovery found.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovered {
    /// The config file read (absolute).
    pub config_path: PathBuf,
    /// Which rule chose it: `--config`, `DEER_FLOW_CONFIG_PATH`, `DEER_FLOW_PROJECT_ROOT`,
    /// `current directory` or `source-tree fallback`.
    pub config_rule: &'static str,
    /// The `.env` actually loaded.
    pub env_file: Option<PathBuf>,
    /// The directory taken as DeerFlow's process CWD (absolute).
    pub deerflow_cwd: PathBuf,
    /// The backend the config selects.
    pub backend: Backend,
    /// [`SOURCE_DATABASE`] or [`SOURCE_LEGACY`].
    pub source: &'static str,
    /// The store; `None` for the memory backend.
    pub target: Option<Target>,
    /// `database.checkpoint_channel_mode` (default full).
    pub checkpoint_channel_mode: ChannelMode,
    /// `database.checkpoint_delta.snapshot_frequency`.
    pub snapshot_frequency: u64,
    /// DeerFlow's settings beside the store: its history cache, the base directory of
    /// thread files, where run events live.
    pub app: AppConfig,
}

/// Inputs of [`discover`]; the environment is injected so tests never touch the process's.
pub struct DiscoverOptions<'a> {
    /// `--config FILE`.
    pub config: Option<&'a Path>,
    /// `--deerflow-cwd DIR`.
    pub deerflow_cwd: Option<&'a Path>,
    /// `--env-file FILE`.
    pub env_file: Option<&'a Path>,
    /// dfck's current directory (absolute); relative paths given to dfck resolve against it.
    pub cwd: &'a Path,
    /// The process environment.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// `source` of a store chosen by the legacy top-level `checkpointer:` section.
pub const SOURCE_LEGACY: &str = "checkpointer (legacy)";
/// `source` of a store chosen by the `database:` section.
pub const SOURCE_DATABASE: &str = "database";

/// A [`ConfigError::Invalid`] for `key` in the config file `cfg`.
fn invalid(cfg: &str, key: &str, reason: String) -> ConfigError {
    ConfigError::Invalid {
        path: cfg.to_owned(),
        key: key.to_owned(),
        reason,
    }
}
