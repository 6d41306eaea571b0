//! The codec's error: why a stored value could not be decoded.

use super::MAX_DEPTH;
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
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("msgpack nesting deeper than {MAX_DEPTH} at byte {offset}")]
    TooDeep {
        /// Byte offset.
        offset: usize,
    },
    /// A serializer tag dfck cannot read (`pickle`, `msgpack+aes`, …).
    #[error("unsupported serializer type '{0}' ({why})", why = unsupported_why(.0))]
    UnsupportedSerializer(String),
    /// An `<inner>+aes` value that does not decrypt with the key: a wrong key, a truncated
    /// body or a failed tag.
    #[error("cannot decrypt: {0}")]
    Decrypt(String),
    /// A value could not be encrypted for writing (no random nonce from the system).
    #[error("cannot encrypt: {0}")]
    Encrypt(String),
    /// A legacy `json` row that is not JSON.
    #[error("invalid legacy JSON value: {0}")]
    InvalidJson(String),
}

fn unsupported_why(tag: &str) -> &'static str {
    if tag.ends_with("+aes") {
        "encrypted by LangGraph's EncryptedSerializer (AES): set LANGGRAPH_AES_KEY or pass --aes-key-file"
    } else if tag.contains('+') {
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
