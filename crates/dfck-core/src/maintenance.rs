//! What `dfck maintain` keeps in its one table, `dfck_maintenance` (the only table dfck ever
//! creates): the sweeper lease (who holds it, until when), the cursor a limited run resumes
//! from, and the record of the last finished run (what it deleted, converted and
//! reclaimed, how long each step took, the findings of its verify pass), which
//! `inspect --format openmetrics` exposes. The SQL lives in `store::maintenance`.

use serde::{Deserialize, Serialize};

/// The table's name.
pub const TABLE: &str = "dfck_maintenance";

/// The one lease row's key: one sweeper per store.
pub const SWEEPER: &str = "sweeper";

/// Who holds (or last held) the lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The host name of the holder's machine.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The dfck version it runs.
    pub version: String,
    /// When the lease expires unless renewed (Unix seconds, the database's clock).
    pub expires_at: i64,
}

impl Holder {
    /// `host pid 123 (dfck 0.1.0)`.
    pub fn describe(&self) -> String {
        format!("{} pid {} (dfck {})", self.host, self.pid, self.version)
    }
}

/// What taking the lease gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// The lease is this run's; `cursor` is the last thread the previous limited run handled.
    Granted {
        /// Resume after this thread (`None`: from the first thread).
        cursor: Option<String>,
    },
    /// Another sweeper holds it; nothing was changed.
    Held(Holder),
}

/// How many findings of one code the last verify pass reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingCount {
    /// The finding code (`lineage.missing_parent`).
    pub code: String,
    /// Its severity word.
    pub severity: String,
    /// How many.
    pub count: u64,
}

/// How long one step of a run took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTime {
    /// `prune`, `convert`, `reclaim`, `verify`.
    pub step: String,
    /// Seconds.
    pub seconds: f64,
}

/// The record of one finished `maintain` run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    /// When it started (Unix seconds).
    pub started_at: i64,
    /// Its whole duration in seconds.
    pub seconds: f64,
    /// How it ended: `complete`, `sweep limit`, `time budget`, `stopped`.
    pub ended: String,
    /// Threads looked at.
    pub threads_examined: u64,
    /// Threads deleted whole (age or idleness).
    pub threads_deleted: u64,
    /// Threads that had checkpoints pruned.
    pub threads_pruned: u64,
    /// Checkpoints deleted, whole threads included.
    pub checkpoints_deleted: u64,
    /// Threads converted to delta mode.
    pub threads_converted: u64,
    /// Threads refused (left untouched).
    pub threads_refused: u64,
    /// Bytes `reclaim` gave back.
    pub reclaimed_bytes: u64,
    /// Each step's duration.
    pub steps: Vec<StepTime>,
    /// Findings of the run's verify pass, by code (`None`: no verify pass).
    pub findings: Option<Vec<FindingCount>>,
}

/// What the table holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MaintenanceState {
    /// The current or last holder; `None` when the lease is free.
    pub holder: Option<Holder>,
    /// Where the next limited run resumes.
    pub cursor: Option<String>,
    /// The last finished run.
    pub last_run: Option<LastRun>,
}
