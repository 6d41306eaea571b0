//! Every serialized value of a thread, each read once ([`Store::scan_stored_values`]): the
//! `checkpoint_blobs` rows with the checkpoints whose `channel_versions` name their version,
//! then the pending writes. A blob shared by many checkpoints
//! is read once, not once per checkpoint as a thread scan reads it.
//!
//! [`Store::scan_stored_values`]: crate::store::Store::scan_stored_values

use super::PostgresStore;
use super::read::{get, versions_of_c};
use crate::error::StoreError;
use crate::store::{StoredValue, ValueRow};

const WHAT: &str = "reading a thread's stored values";

/// Rows per cursor fetch (a blob may be a whole conversation).
const FETCH_ROWS: usize = 64;

/// The blobs of (`$1`, `$2`), each with the ids of the checkpoints naming its version (none
/// when no checkpoint names it).
const BLOBS_SQL: &str = concat!(
    "WITH refs AS (SELECT cv.key AS channel, cv.value AS version, \
     array_agg(c.checkpoint_id::text) AS ids \
     FROM checkpoints c CROSS JOIN LATERAL ",
    versions_of_c!(),
    " cv WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 GROUP BY cv.key, cv.value) \
     SELECT b.channel::text, b.type::text, b.blob, r.ids \
     FROM checkpoint_blobs b LEFT JOIN refs r ON r.channel = b.channel AND r.version = b.version \
     WHERE b.thread_id = $1 AND b.checkpoint_ns = $2"
);

/// The pending writes of (`$1`, `$2`).
const WRITES_SQL: &str = "SELECT checkpoint_id, channel, type, blob FROM checkpoint_writes \
     WHERE thread_id = $1 AND checkpoint_ns = $2";

impl PostgresStore {
    /// [`crate::store::Store::scan_stored_values`] on PostgreSQL.
    pub(super) fn stored_values(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(StoredValue) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.cursor(WHAT, BLOBS_SQL, &[&thread_id, &ns], FETCH_ROWS, &mut |r| {
            f(StoredValue {
                row: ValueRow::Blob,
                channel: Some(get(r, 0, WHAT)?),
                type_tag: get(r, 1, WHAT)?,
                bytes: get(r, 2, WHAT)?,
                checkpoint_ids: get::<Option<Vec<String>>>(r, 3, WHAT)?.unwrap_or_default(),
            })
        })?;
        self.cursor(WHAT, WRITES_SQL, &[&thread_id, &ns], FETCH_ROWS, &mut |r| {
            f(StoredValue {
                row: ValueRow::Write,
                channel: Some(get(r, 1, WHAT)?),
                type_tag: get(r, 2, WHAT)?,
                bytes: get(r, 3, WHAT)?,
                checkpoint_ids: vec![get(r, 0, WHAT)?],
            })
        })
    }
}
