//! Reading a row's columns whatever SQLite storage class they hold: a hand-edited or corrupt
//! store may have an INTEGER where LangGraph writes a BLOB, and one such value must make one
//! checkpoint or write undecodable, not fail the whole scan.

use crate::store::{CheckpointBody, CheckpointRow, WriteRow};
use rusqlite::Row;

/// What a row reader makes of a value of the wrong SQLite storage class in a BLOB column.
#[derive(Clone, Copy)]
pub(super) enum Blob {
    /// Checkpoint bodies and write values: bytes no LangGraph decoder reads, so the one
    /// checkpoint or write is reported undecodable instead of the whole scan failing.
    Serialized,
    /// Metadata: the number's text (valid JSON, but not the object metadata must be).
    Json,
}

/// A document no serializer decodes: `0xc1` is never a msgpack marker, nor JSON.
pub(super) const UNDECODABLE: &[u8] = b"\xc1 dfck: wrong SQLite storage class";

/// Reads a column that LangGraph stores as BLOB or TEXT (metadata is JSON text in a BLOB
/// column). INTEGER and REAL values (a corrupt or hand-edited store) do not fail the row:
/// see [`Blob`].
pub(super) fn bytes_col(row: &Row<'_>, i: usize, kind: Blob) -> rusqlite::Result<Vec<u8>> {
    use rusqlite::types::ValueRef;
    let number = |text: String| match kind {
        Blob::Serialized => UNDECODABLE.to_vec(),
        Blob::Json => text.into_bytes(),
    };
    Ok(match row.get_ref(i)? {
        ValueRef::Null => Vec::new(),
        ValueRef::Blob(b) | ValueRef::Text(b) => b.to_vec(),
        ValueRef::Integer(n) => number(n.to_string()),
        ValueRef::Real(f) => number(f.to_string()),
    })
}

/// The length of what [`bytes_col`] reads of a serialized value, without copying it.
pub(super) fn serialized_len(row: &Row<'_>, i: usize) -> rusqlite::Result<usize> {
    use rusqlite::types::ValueRef;
    Ok(match row.get_ref(i)? {
        ValueRef::Null => 0,
        ValueRef::Blob(b) | ValueRef::Text(b) => b.len(),
        ValueRef::Integer(_) | ValueRef::Real(_) => UNDECODABLE.len(),
    })
}

/// Reads a TEXT column (ids, channel, type tag) whatever its storage class: non-UTF-8 text
/// and BLOBs are decoded lossily, numbers are written out, NULL is empty.
pub(super) fn text_col(row: &Row<'_>, i: usize) -> rusqlite::Result<String> {
    Ok(opt_text_col(row, i)?.unwrap_or_default())
}

/// [`text_col`] keeping NULL apart.
pub(super) fn opt_text_col(row: &Row<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    use rusqlite::types::ValueRef;
    Ok(match row.get_ref(i)? {
        ValueRef::Null => None,
        // Checked whole first: faster than the lossy walk when the text is valid.
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(match std::str::from_utf8(b) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(b).into_owned(),
        }),
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
    })
}

/// Reads `writes.idx`; `None` when it holds no integer (the write is then undecodable).
pub(super) fn idx_col(row: &Row<'_>, i: usize) -> rusqlite::Result<Option<i64>> {
    use rusqlite::types::ValueRef;
    Ok(match row.get_ref(i)? {
        ValueRef::Integer(n) => Some(n),
        ValueRef::Real(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Some(f as i64),
        ValueRef::Text(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|t| t.trim().parse().ok()),
        _ => None,
    })
}

pub(super) fn len_col(row: &Row<'_>, i: usize) -> rusqlite::Result<u64> {
    Ok(row.get::<_, Option<i64>>(i)?.unwrap_or(0).max(0) as u64)
}

/// A `checkpoints` row as LangGraph's SqliteSaver lays it out.
pub(super) fn checkpoint_row(r: &Row<'_>) -> rusqlite::Result<CheckpointRow> {
    let bytes = bytes_col(r, 5, Blob::Serialized)?;
    let metadata = bytes_col(r, 6, Blob::Json)?;
    Ok(CheckpointRow {
        thread_id: text_col(r, 0)?,
        checkpoint_ns: text_col(r, 1)?,
        checkpoint_id: text_col(r, 2)?,
        parent_checkpoint_id: opt_text_col(r, 3)?,
        bytes: (bytes.len() + metadata.len()) as u64,
        body: CheckpointBody::Serialized {
            type_tag: opt_text_col(r, 4)?,
            bytes,
        },
        metadata,
    })
}

/// `idx` of a write whose stored idx is not an integer.
const BAD_IDX: i64 = i64::MIN;

/// A `writes` row as LangGraph's SqliteSaver lays it out.
pub(super) fn write_row(r: &Row<'_>) -> rusqlite::Result<WriteRow> {
    let idx = idx_col(r, 3)?;
    let value = bytes_col(r, 6, Blob::Serialized)?;
    Ok(WriteRow {
        checkpoint_id: text_col(r, 0)?,
        task_id: text_col(r, 1)?,
        task_path: text_col(r, 2)?,
        idx: idx.unwrap_or(BAD_IDX),
        channel: text_col(r, 4)?,
        type_tag: opt_text_col(r, 5)?,
        // A write whose key is unreadable is not replayed as if it were valid.
        value: if idx.is_some() {
            value
        } else {
            UNDECODABLE.to_vec()
        },
    })
}
