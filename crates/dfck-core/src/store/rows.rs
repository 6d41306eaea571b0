//! The backend-neutral rows a [`super::Store`] hands over: checkpoints with their bodies and
//! blobs, pending writes, stored values, per-checkpoint facts and totals, and their keys.

/// How a checkpoint's body is stored.
#[derive(Debug, Clone)]
pub enum CheckpointBody {
    /// SQLite: the whole `Checkpoint` dict, serialized with the row's type tag.
    Serialized {
        /// The `type` column.
        type_tag: Option<String>,
        /// The `checkpoint` column.
        bytes: Vec<u8>,
    },
    /// Postgres: the JSONB checkpoint (primitives inline) and the `checkpoint_blobs` rows
    /// at the checkpoint's channel versions.
    Postgres {
        /// The `checkpoint` JSONB.
        checkpoint: serde_json::Value,
        /// Blob rows matching `channel_versions`.
        blobs: Vec<BlobRow>,
    },
}

/// One `checkpoint_blobs` row (Postgres).
#[derive(Debug, Clone)]
pub struct BlobRow {
    /// Channel name.
    pub channel: String,
    /// Serializer tag (`empty` is a tombstone readers ignore).
    pub type_tag: String,
    /// Serialized value (`None` when SQL NULL).
    pub blob: Option<Vec<u8>>,
    /// False when `blob` holds only the first bytes of a value the parent checkpoint
    /// shares (thread scans read each shared blob in full once).
    pub complete: bool,
}

/// One `checkpoints` row.
#[derive(Debug, Clone)]
pub struct CheckpointRow {
    /// Thread id.
    pub thread_id: String,
    /// Namespace (`""` for the root graph).
    pub checkpoint_ns: String,
    /// Checkpoint id (UUIDv6 text).
    pub checkpoint_id: String,
    /// Parent checkpoint id, `None` for a root.
    pub parent_checkpoint_id: Option<String>,
    /// The stored checkpoint.
    pub body: CheckpointBody,
    /// Metadata as JSON bytes.
    pub metadata: Vec<u8>,
    /// Bytes the checkpoint occupies (checkpoint + metadata, and on Postgres the blobs it
    /// introduced).
    pub bytes: u64,
}

/// One pending-write row (`writes` / `checkpoint_writes`).
#[derive(Debug, Clone)]
pub struct WriteRow {
    /// The checkpoint the write is stored on.
    pub checkpoint_id: String,
    /// Task id (opaque; `NULL_TASK_ID` for the checkpoint's own writes).
    pub task_id: String,
    /// Task path (`""` when the schema predates it).
    pub task_path: String,
    /// Index inside the task's write batch (negative for special channels).
    pub idx: i64,
    /// Target channel.
    pub channel: String,
    /// Serializer tag.
    pub type_tag: Option<String>,
    /// Serialized value.
    pub value: Vec<u8>,
}

impl CheckpointRow {
    /// Bytes the row holds as read: [`CheckpointRow::bytes`] and, on PostgreSQL, the blobs
    /// read with it (a full-mode checkpoint's `messages` blob is shared by version, so the
    /// stored size does not count it). What an in-memory budget counts.
    pub fn read_bytes(&self) -> u64 {
        match &self.body {
            CheckpointBody::Serialized { .. } => self.bytes,
            CheckpointBody::Postgres { blobs, .. } => {
                self.bytes
                    + blobs
                        .iter()
                        .map(|b| b.blob.as_ref().map_or(0, Vec::len) as u64)
                        .sum::<u64>()
            }
        }
    }
}

impl WriteRow {
    /// LangGraph's canonical order inside one checkpoint: `(task_path, task_id, idx)`.
    pub fn sort_key(&self) -> (&str, &str, i64) {
        (&self.task_path, &self.task_id, self.idx)
    }
}

/// Which row a serialized value is stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueRow {
    /// A SQLite `checkpoints` row (the whole serialized checkpoint).
    Checkpoint,
    /// A PostgreSQL `checkpoint_blobs` row (one channel value at one version).
    Blob,
    /// A pending write (`writes` / `checkpoint_writes`).
    Write,
}

/// One serialized value as stored, each read once ([`Store::scan_stored_values`](super::Store::scan_stored_values)).
#[derive(Debug, Clone)]
pub struct StoredValue {
    /// The row it is stored in.
    pub row: ValueRow,
    /// The channel of a blob or write (`None` for a whole checkpoint).
    pub channel: Option<String>,
    /// The serializer tag (`None` when SQL NULL).
    pub type_tag: Option<String>,
    /// The serialized bytes (`None` when SQL NULL).
    pub bytes: Option<Vec<u8>>,
    /// The checkpoints holding it, in no particular order: a checkpoint row's own id, the
    /// checkpoints whose `channel_versions` name a blob's version (none when no checkpoint
    /// does: LangGraph never reads that blob), the checkpoint a write is stored on.
    pub checkpoint_ids: Vec<String>,
}

/// Sorts writes in LangGraph's canonical order.
pub fn sort_writes(writes: &mut [WriteRow]) {
    writes.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
}

/// Metadata-level facts about one checkpoint, as the store summary streams them.
#[derive(Debug, Clone)]
pub struct CheckpointMetaRow {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// Checkpoint id.
    pub checkpoint_id: String,
    /// Bytes (checkpoint + metadata).
    pub bytes: u64,
    /// Metadata JSON bytes.
    pub metadata: Vec<u8>,
    /// The checkpoint's `ts` when the scan reads it for free (PostgreSQL: inline JSONB);
    /// `None` on SQLite, where it sits inside the serialized checkpoint.
    pub ts: Option<String>,
}

impl CheckpointMetaRow {
    /// (thread, namespace, id, metadata) of a row [`Store::scan_checkpoints_whole`](super::Store::scan_checkpoints_whole)
    /// gave, from its facts `row` when it gave them (the meta row's may be empty then).
    pub fn keys_of<'a>(
        &'a self,
        row: Option<&'a FactsRow>,
    ) -> (&'a str, &'a str, &'a str, &'a [u8]) {
        match row {
            Some(r) => (
                &r.row.thread_id,
                &r.row.checkpoint_ns,
                &r.row.checkpoint_id,
                &r.row.metadata,
            ),
            None => (
                &self.thread_id,
                &self.checkpoint_ns,
                &self.checkpoint_id,
                &self.metadata,
            ),
        }
    }
}

/// A checkpoint's identity, time and size, without its values ([`Store::checkpoint_times`](super::Store::checkpoint_times)).
#[derive(Debug, Clone)]
pub struct CheckpointTime {
    /// Checkpoint id.
    pub checkpoint_id: String,
    /// The checkpoint's `ts`.
    pub ts: Option<String>,
    /// Bytes of the checkpoint row (checkpoint and metadata).
    pub bytes: u64,
    /// Pending writes stored on it.
    pub writes: u64,
}

/// Per-thread write totals.
#[derive(Debug, Clone, Default)]
pub struct WriteTotals {
    /// Thread id.
    pub thread_id: String,
    /// Number of write rows.
    pub writes: u64,
    /// Bytes of write values.
    pub bytes: u64,
}

/// Where one checkpoint is: thread, namespace, id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CheckpointKey {
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// Checkpoint id.
    pub checkpoint_id: String,
}

/// Which of the optional facts a caller needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct FactsWanted {
    /// how the checkpoint stores `messages`.
    pub encoding: bool,
    /// The keys are heads: the bytes of every channel's blob (else
    /// `messages`'s may do) and the `ts`.
    pub head: bool,
    /// the bytes of the pending writes (else 0).
    pub writes: bool,
}

/// One checkpoint as [`Store::checkpoint_facts_at`](super::Store::checkpoint_facts_at) read it (`crate::model::facts` makes
/// it into facts).
#[derive(Debug, Clone)]
pub struct FactsRow {
    /// The row; when not `whole`, its blobs hold only their first bytes, and (PostgreSQL's
    /// [`Store::scan_checkpoints_whole`](super::Store::scan_checkpoints_whole)) its checkpoint JSON only the keys the facts read.
    pub row: CheckpointRow,
    /// Bytes of the pending-write values stored on it.
    pub write_bytes: u64,
    /// (every blob's, `messages`'s) lengths when the row's blobs are not whole.
    pub blob_lengths: Option<(u64, u64)>,
    /// Every value complete.
    pub whole: bool,
    /// (writes, bytes) of the row's whole thread, as
    /// [`Store::write_totals_of`](super::Store::write_totals_of) counts them, where the scan
    /// read them: once a thread, on its first row given with facts (SQLite: the first row
    /// the writes merge answers).
    pub thread_writes: Option<(u64, u64)>,
    /// (blobs, bytes) of the row's whole thread, as
    /// [`Store::blob_totals_of`](super::Store::blob_totals_of) counts them, where the scan
    /// read them (PostgreSQL), with [`FactsRow::thread_writes`].
    pub thread_blobs: Option<(u64, u64)>,
}

/// Per-checkpoint write totals inside one (thread, ns).
#[derive(Debug, Clone, Default)]
pub struct CheckpointWriteTotals {
    /// Checkpoint id.
    pub checkpoint_id: String,
    /// Number of write rows.
    pub writes: u64,
    /// Bytes of write values.
    pub bytes: u64,
}

/// What [`Store::scan_checkpoints_whole`](super::Store::scan_checkpoints_whole) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WholeScan {
    /// The backend has no such scan: nothing was read.
    Unsupported,
    /// Every row was given, with the store's (writes, bytes) totals as
    /// [`Store::write_totals`](super::Store::write_totals) counts them where the scan read
    /// every write on the way (SQLite's merge), else `None`.
    Read {
        /// The store's write totals, counted by the scan.
        write_totals: Option<(u64, u64)>,
    },
}
