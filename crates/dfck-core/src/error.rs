//! Error types per domain (store, model, materialize, config, usage, I/O). The codec's error
//! lives in [`crate::codec`] and is re-exported here.

pub use crate::codec::CodecError;
use thiserror::Error;

/// Config discovery failed.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    /// No config file was found by any rule.
    #[error(
        "no store given: pass --db TARGET, set DFCK_DB, or point --config at a DeerFlow config.yaml (none found: looked for {searched})"
    )]
    NotFound {
        /// The candidate files, comma-separated.
        searched: String,
    },
    /// A config file named explicitly (`--config`, `DEER_FLOW_CONFIG_PATH`) does not exist.
    #[error("config file {path} (from {rule}) does not exist or is not a file")]
    ConfigMissing {
        /// The absolute path.
        path: String,
        /// Which rule named it.
        rule: &'static str,
    },
    /// `DEER_FLOW_PROJECT_ROOT` is set to something that is not a directory.
    #[error("DEER_FLOW_PROJECT_ROOT is set to '{value}', but {path} {problem}")]
    ProjectRoot {
        /// The variable's value.
        value: String,
        /// The absolute path.
        path: String,
        /// "does not exist" / "is not a directory".
        problem: &'static str,
    },
    /// `--deerflow-cwd` is not a directory.
    #[error("--deerflow-cwd {path} is not a directory")]
    DeerflowCwd {
        /// The absolute path.
        path: String,
    },
    /// `--env-file` does not exist.
    #[error("env file {path} (from --env-file) does not exist or is not a file")]
    EnvFileMissing {
        /// The absolute path.
        path: String,
    },
    /// A file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// The config file is not valid YAML.
    #[error("{path}: invalid YAML: {reason}")]
    Yaml {
        /// The config file.
        path: String,
        /// The parser's message.
        reason: String,
    },
    /// A `$VAR` value names a variable that is not set.
    #[error(
        "{path}: environment variable {var} (for {key}) is not set in the environment or in {env_file}"
    )]
    MissingEnv {
        /// The config file.
        path: String,
        /// The variable name (never its value).
        var: String,
        /// The dotted key holding `$VAR`.
        key: String,
        /// The `.env` file consulted, or "no .env file".
        env_file: String,
    },
    /// A value in the config is missing or wrong.
    #[error("{path}: {key}: {reason}")]
    Invalid {
        /// The config file.
        path: String,
        /// The dotted key.
        key: String,
        /// What is wrong (URLs redacted).
        reason: String,
    },
    /// The resolved SQLite store does not exist.
    #[error("sqlite store {path} does not exist (from {how} in {config}){hint}")]
    StoreMissing {
        /// The resolved store file.
        path: String,
        /// Which setting produced it.
        how: String,
        /// The config file.
        config: String,
        /// A hint about `--deerflow-cwd` / `DEER_FLOW_HOME`, or "".
        hint: String,
    },
}

/// Opening or reading a store failed.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The target names no usable store.
    #[error("{0}")]
    Target(String),
    /// The file cannot be opened as a database.
    #[error("cannot open {path}: {reason}")]
    Open {
        /// The path or redacted URL.
        path: String,
        /// Why.
        reason: String,
    },
    /// The database is readable but is not a LangGraph checkpoint store.
    #[error("{path} is not a LangGraph checkpoint store: {reason}")]
    NotLangGraph {
        /// The path or redacted URL.
        path: String,
        /// What is missing or wrong.
        reason: String,
    },
    /// A query failed.
    #[error("{what}: {reason}")]
    Query {
        /// What was being read.
        what: String,
        /// The database's message.
        reason: String,
    },
    /// A write command against a server that cannot write.
    #[error("{path}: {reason}: run write commands against the primary")]
    ReadOnlyServer {
        /// The redacted URL.
        path: String,
        /// "this server is a read-only standby", or why the session is read-only.
        reason: String,
    },
    /// No checkpoint of this thread exists.
    #[error("thread '{thread_id}' not found (no checkpoints in namespace '{checkpoint_ns}')")]
    ThreadNotFound {
        /// Thread id.
        thread_id: String,
        /// Namespace.
        checkpoint_ns: String,
    },
    /// The checkpoint id names no checkpoint of the thread.
    #[error(
        "checkpoint '{checkpoint_id}' not found in thread '{thread_id}' namespace '{checkpoint_ns}'"
    )]
    CheckpointNotFound {
        /// Thread id.
        thread_id: String,
        /// Namespace.
        checkpoint_ns: String,
        /// Checkpoint id.
        checkpoint_id: String,
    },
    /// A checkpoint id prefix matches more than one checkpoint.
    #[error(
        "checkpoint id prefix '{prefix}' is ambiguous in thread '{thread_id}' namespace '{checkpoint_ns}': {candidates}"
    )]
    AmbiguousCheckpoint {
        /// Thread id.
        thread_id: String,
        /// Namespace.
        checkpoint_ns: String,
        /// The prefix given.
        prefix: String,
        /// The matching ids, comma-separated (the first few).
        candidates: String,
    },
    /// An error with a "did you mean" hint.
    #[error("{error}; did you mean {hint}?")]
    Suggested {
        /// The error.
        error: Box<StoreError>,
        /// The suggestions, comma-separated.
        hint: String,
    },
}

/// A checkpoint's data could not be interpreted.
#[derive(Debug, Error)]
pub enum ModelError {
    /// A stored value does not decode.
    #[error("{what}: {source}")]
    Decode {
        /// Which value (thread, checkpoint, channel…).
        what: String,
        /// The codec's error.
        source: CodecError,
    },
    /// A decoded checkpoint lacks what every checkpoint has.
    #[error("{what}: {reason}")]
    Malformed {
        /// Which value.
        what: String,
        /// What is wrong.
        reason: String,
    },
}

impl ModelError {
    /// The same error, its text unchanged (a codec error kept as its message): a stored
    /// error handed out again.
    pub fn restated(&self) -> ModelError {
        match self {
            ModelError::Decode { what, source } => ModelError::Malformed {
                what: what.clone(),
                reason: source.to_string(),
            },
            ModelError::Malformed { what, reason } => ModelError::Malformed {
                what: what.clone(),
                reason: reason.clone(),
            },
        }
    }
}

/// Materializing a checkpoint's state failed.
#[derive(Debug, Error)]
pub enum MaterializeError {
    /// The stored data is unreadable.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Following parents returned to a visited checkpoint.
    #[error("lineage cycle in thread '{thread_id}': parent walk from {from} returns to {at}")]
    Cycle {
        /// Thread id.
        thread_id: String,
        /// Where the walk started.
        from: String,
        /// The repeated checkpoint.
        at: String,
    },
    /// A parent id names no checkpoint.
    #[error(
        "dangling parent in thread '{thread_id}': checkpoint {child} names parent {parent}, which does not exist"
    )]
    DanglingParent {
        /// Thread id.
        thread_id: String,
        /// The checkpoint whose parent is missing.
        child: String,
        /// The missing parent id.
        parent: String,
    },
    /// The reducer rejected the writes (as LangGraph/DeerFlow would raise).
    #[error("reducer error at checkpoint {checkpoint_id} of thread '{thread_id}': {reason}")]
    Reducer {
        /// Thread id.
        thread_id: String,
        /// Checkpoint being materialized.
        checkpoint_id: String,
        /// The reducer's message.
        reason: String,
    },
}

/// Any library error, as the binary sees it.
#[derive(Debug, Error)]
pub enum Error {
    /// See [`StoreError`].
    #[error(transparent)]
    Store(#[from] StoreError),
    /// See [`ModelError`].
    #[error(transparent)]
    Model(#[from] ModelError),
    /// See [`MaterializeError`].
    #[error(transparent)]
    Materialize(#[from] MaterializeError),
    /// See [`ConfigError`].
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Bad input that the command line's parser cannot catch.
    #[error("{0}")]
    Usage(String),
    /// Writing output failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A value could not be rendered (undecodable data met while writing output).
    #[error("cannot render the output: {0}")]
    Render(String),
}
