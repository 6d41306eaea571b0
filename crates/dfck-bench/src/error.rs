//! The benchmarks' errors: what stops a `dfck bench` command before or while it runs (bad
//! flags, missing worker scripts, no case left, a worker that could not use its case). Case
//! failures are not errors: they become failure rows. Functions that also meet the core's
//! errors (a store, the output) return [`RunError`], which holds either.

use thiserror::Error;

/// Why a benchmark command stopped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BenchError {
    /// A flag value the benchmark cannot use (exit 2, like a usage error).
    #[error("{0}")]
    Usage(String),
    /// An engine name that is neither `native` nor `langgraph`.
    #[error("unsupported engine: '{0}'")]
    UnknownEngine(String),
    /// The langgraph worker script given does not exist.
    #[error("langgraph worker script {0} does not exist")]
    MissingScript(std::path::PathBuf),
    /// No worker script was given and none was found.
    #[error("cannot find {relative}; pass --worker-script PATH or set {env_var}")]
    ScriptNotFound {
        /// The script's path relative to the repository.
        relative: String,
        /// The environment variable naming it.
        env_var: String,
    },
    /// The safety cap removed every case.
    #[error("No benchmark cases remain after applying the safety cap.")]
    NoCasesLeft,
    /// A worker child could not decode or validate its case (its minimal row was printed).
    #[error("the benchmark case is unusable: {0}")]
    BadCase(String),
    /// A case that fails its checks (DeerFlow's messages, e.g. `turns must exceed the 2-turn
    /// warm-up`).
    #[error("{0}")]
    InvalidCase(String),
    /// The native engine failed while running a case; the text becomes the row's `error`.
    #[error("{0}")]
    Engine(String),
}

impl From<String> for BenchError {
    fn from(text: String) -> BenchError {
        BenchError::Engine(text)
    }
}

impl From<&str> for BenchError {
    fn from(text: &str) -> BenchError {
        BenchError::Engine(text.to_owned())
    }
}

impl From<crate::savers::SaverError> for BenchError {
    fn from(e: crate::savers::SaverError) -> BenchError {
        BenchError::Engine(e.0)
    }
}

/// What stops a benchmark run: the benchmark's own error, or the core's (a store, the
/// output).
#[derive(Debug, Error)]
pub enum RunError {
    /// See [`BenchError`].
    #[error(transparent)]
    Bench(#[from] BenchError),
    /// See [`dfck_core::error::Error`].
    #[error(transparent)]
    Core(#[from] dfck_core::error::Error),
}

macro_rules! via_core {
    ($($t:ty),*) => {$(
        impl From<$t> for RunError {
            fn from(e: $t) -> RunError {
                RunError::Core(e.into())
            }
        }
    )*};
}

via_core!(
    dfck_core::error::StoreError,
    dfck_core::error::ModelError,
    dfck_core::error::MaterializeError,
    std::io::Error
);
