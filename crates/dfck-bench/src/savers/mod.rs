//! The SQL of dfck's own LangGraph-format savers (the system under test of the benchmarks,
//! `crate::native`): [`sqlite`] and [`postgres`] lay rows out exactly like LangGraph's
//! `SqliteSaver` / `PostgresSaver`. The bench side builds the bytes; these modules only store
//! and measure them.

pub mod postgres;
pub mod sqlite;

/// A saver statement failed; the text names the operation and is already redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SaverError(pub String);

impl From<SaverError> for String {
    fn from(e: SaverError) -> String {
        e.0
    }
}

/// One pending write as both savers store it.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteRecord {
    /// Task id.
    pub task_id: String,
    /// Task path (`~__pregel_pull, <node>`).
    pub task_path: String,
    /// Position in the task's batch.
    pub idx: i64,
    /// Channel written.
    pub channel: String,
    /// Serializer tag (`msgpack` or `null`).
    pub type_tag: &'static str,
    /// Serialized value (empty for `null`).
    pub value: Vec<u8>,
}
