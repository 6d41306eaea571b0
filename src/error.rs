//! The command line's error: the core's ([`dfck_core::error::Error`]) or the benchmark
//! harness's ([`dfck_bench::error::RunError`]). Every one ends the command with one line on
//! stderr and exit code 2.

pub use dfck_core::error::{ConfigError, MaterializeError, ModelError, StoreError};

/// Any error a command ends with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// See [`dfck_core::error::Error`].
    #[error(transparent)]
    Core(#[from] dfck_core::error::Error),
    /// See [`dfck_bench::error::RunError`].
    #[error(transparent)]
    Bench(#[from] dfck_bench::error::RunError),
}

impl Error {
    /// A usage error: bad input the command line's parser cannot catch.
    pub fn usage(message: impl Into<String>) -> Self {
        Error::Core(dfck_core::error::Error::Usage(message.into()))
    }

    /// A value that could not be rendered.
    pub fn render(message: impl Into<String>) -> Self {
        Error::Core(dfck_core::error::Error::Render(message.into()))
    }
}

macro_rules! via_core {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error::Core(e.into())
            }
        }
    )*};
}

via_core!(
    StoreError,
    ModelError,
    MaterializeError,
    ConfigError,
    std::io::Error
);

impl From<dfck_bench::error::BenchError> for Error {
    fn from(e: dfck_bench::error::BenchError) -> Error {
        Error::Bench(e.into())
    }
}
