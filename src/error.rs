//! Error types per domain, and the one place that maps them to exit codes.

use thiserror::Error;

/// A value could not be decoded.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CodecError {
    /// The document ends before a value it announces.
    #[error("truncated msgpack at byte {offset} (needs {wanted} more bytes)")]
    Truncated {
        /// Byte offset where the read started.
        offset: usize,
        /// Bytes wanted.
        wanted: usize,
    },
    /// A byte that starts no msgpack value.
    #[error("invalid msgpack marker 0x{byte:02x} at byte {offset}")]
    InvalidMarker {
        /// Byte offset.
        offset: usize,
        /// The marker byte.
        byte: u8,
    },
    /// A msgpack string that is not UTF-8.
    #[error("msgpack string at byte {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// Byte offset.
        offset: usize,
    },
    /// Bytes left over after one complete document.
    #[error("trailing bytes after msgpack value (value ends at byte {offset} of {len})")]
    TrailingBytes {
        /// End of the decoded value.
        offset: usize,
        /// Length of the buffer.
        len: usize,
    },
    /// Nesting deeper than [`crate::codec::MAX_DEPTH`].
    #[error(
        "msgpack nesting deeper than {} at byte {offset}",
        crate::codec::MAX_DEPTH
    )]
    TooDeep {
        /// Byte offset.
        offset: usize,
    },
    /// A serializer tag dfck cannot read (`pickle`, `msgpack+aes`, …).
    #[error("unsupported serializer type '{0}' ({why})", why = unsupported_why(.0))]
    UnsupportedSerializer(String),
    /// A legacy `json` row that is not JSON.
    #[error("invalid legacy JSON value: {0}")]
    InvalidJson(String),
}

fn unsupported_why(tag: &str) -> &'static str {
    if tag.contains('+') {
        "encrypted by an EncryptedSerializer: needs the key and Python"
    } else if tag == "pickle" {
        "Python pickle: cannot be read without Python"
    } else {
        "not a LangGraph serializer tag dfck reads"
    }
}

impl CodecError {
    /// The same error with its byte offsets moved by `by` (errors inside ext payloads).
    pub fn shifted(self, by: usize) -> Self {
        match self {
            CodecError::Truncated { offset, wanted } => CodecError::Truncated {
                offset: offset + by,
                wanted,
            },
            CodecError::InvalidMarker { offset, byte } => CodecError::InvalidMarker {
                offset: offset + by,
                byte,
            },
            CodecError::InvalidUtf8 { offset } => CodecError::InvalidUtf8 {
                offset: offset + by,
            },
            CodecError::TrailingBytes { offset, len } => CodecError::TrailingBytes {
                offset: offset + by,
                len: len + by,
            },
            CodecError::TooDeep { offset } => CodecError::TooDeep {
                offset: offset + by,
            },
            other => other,
        }
    }
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
    /// See [`crate::config::ConfigError`].
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// Bad command-line input that clap cannot catch.
    #[error("{0}")]
    Usage(String),
    /// See [`crate::bench::error::BenchError`].
    #[error(transparent)]
    Bench(#[from] crate::bench::error::BenchError),
    /// Writing output failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A value could not be rendered (undecodable data met while writing output).
    #[error("cannot render the output: {0}")]
    Render(String),
}

/// Exit code: the command ran and found nothing wrong.
pub const EXIT_OK: i32 = 0;
/// Exit code: the command ran and found problems or refused work.
pub const EXIT_FINDINGS: i32 = 1;
/// Exit code: usage error, unreadable/unsupported store, connection failure, I/O error.
pub const EXIT_ERROR: i32 = 2;

impl Error {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> i32 {
        // Every error that stops a command is a usage, store, data or I/O failure.
        EXIT_ERROR
    }
}
