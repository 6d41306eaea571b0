//! `dfck copy`: moves threads from one store to another — SQLite to PostgreSQL and back, or
//! within a backend — rows laid out in the target's own format, one verified transaction
//! per thread through the write engine ([`dfck_core::write`]). docs/copy.md describes it.
//!
//! Submodules: `convert` (reading a thread whole and laying its rows out for the target),
//! `digest` (the fingerprints an identical copy must share), `job` (the engine job and the
//! connection pairing the read-only source with the target), `run` (the command as a whole:
//! the request checked, the dry run, the connections of `--apply`).

mod convert;
mod digest;
mod job;
mod run;

pub use convert::{LaidNs, NsRows, lay_out, load_thread};
pub use digest::{ThreadDigest, difference, digest_thread};
pub use job::{Copy, CopyConn, TargetConn, decide};
pub use run::run;

use dfck_core::error::Error;
use dfck_core::progress::Progress;
use dfck_core::store::{Backend, Store};
use dfck_core::write::{Connections, RunOptions};
use serde::Serialize;

/// What happens (or happened) to one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyStatus {
    /// Copied.
    Done,
    /// Would be copied (dry run).
    Would,
    /// Refused, with a reason; the target is untouched.
    Refused,
    /// Nothing to do (already in the target, identical; or gone from the source).
    Skipped,
}

impl CopyStatus {
    /// The status as reports show it.
    pub fn as_str(self) -> &'static str {
        match self {
            CopyStatus::Done => "done",
            CopyStatus::Would => "would",
            CopyStatus::Refused => "refused",
            CopyStatus::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for CopyStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thread of a copy.
#[derive(Debug, Clone, Serialize)]
pub struct CopyThread {
    /// Thread id.
    pub thread_id: String,
    /// Done, would, refused or skipped.
    pub status: CopyStatus,
    /// Why refused or skipped; for a copy over an existing thread, that it was replaced.
    pub reason: Option<String>,
    /// Namespaces.
    pub namespaces: usize,
    /// Checkpoints.
    pub checkpoints: usize,
    /// Pending writes.
    pub writes: usize,
    /// Bytes of the rows written in the target's layout.
    pub bytes: u64,
}

impl CopyThread {
    /// A thread nothing was done to yet.
    pub fn new(thread_id: &str) -> Self {
        CopyThread {
            thread_id: thread_id.to_owned(),
            status: CopyStatus::Skipped,
            reason: None,
            namespaces: 0,
            checkpoints: 0,
            writes: 0,
            bytes: 0,
        }
    }

    /// With a status and reason.
    pub fn with(mut self, status: CopyStatus, reason: Option<String>) -> Self {
        self.status = status;
        self.reason = reason;
        self
    }
}

/// What a copy leaves behind: DeerFlow's own application tables.
pub const NOT_COPIED: &[&str] = &["threads_meta", "runs", "users"];

/// `dfck copy` (plan or result).
#[derive(Debug, Clone, Serialize)]
pub struct CopyReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// The source store (passwords redacted).
    pub source: String,
    /// The target store (passwords redacted).
    pub target: String,
    /// The target's backend.
    pub target_backend: Backend,
    /// Whether the target was (or would be) set up as an empty LangGraph store first.
    pub target_created: bool,
    /// Per thread.
    pub threads: Vec<CopyThread>,
    /// Threads copied (would be, in a dry run).
    pub copied: usize,
    /// Threads refused.
    pub refused: usize,
    /// Threads skipped.
    pub skipped: usize,
    /// Checkpoints copied (would be).
    pub checkpoints: usize,
    /// Writes copied (would be).
    pub writes: usize,
    /// Bytes copied (would be).
    pub bytes: u64,
    /// Tables a copy never touches (DeerFlow's own).
    pub not_copied: Vec<&'static str>,
}

impl CopyReport {
    /// Totals over `threads`.
    pub fn new(
        dry_run: bool,
        source: String,
        target: String,
        target_backend: Backend,
        target_created: bool,
        threads: Vec<CopyThread>,
    ) -> Self {
        let count = |s: CopyStatus| threads.iter().filter(|t| t.status == s).count();
        let moved = threads
            .iter()
            .filter(|t| matches!(t.status, CopyStatus::Done | CopyStatus::Would));
        let (mut checkpoints, mut writes, mut bytes) = (0, 0, 0);
        for t in moved {
            checkpoints += t.checkpoints;
            writes += t.writes;
            bytes += t.bytes;
        }
        CopyReport {
            dry_run,
            source,
            target,
            target_backend,
            target_created,
            copied: count(CopyStatus::Done) + count(CopyStatus::Would),
            refused: count(CopyStatus::Refused),
            skipped: count(CopyStatus::Skipped),
            checkpoints,
            writes,
            bytes,
            threads,
            not_copied: NOT_COPIED.to_vec(),
        }
    }
}

/// Options of a copy.
#[derive(Debug, Clone, Copy)]
pub struct CopyOptions {
    /// Replace a thread the target holds with different content.
    pub replace: bool,
    /// The target's backend (its layout).
    pub target: Backend,
}

/// The dry run: for every given thread (every thread with `all`), what a copy would do,
/// planned by the engine ([`dfck_core::write::dry_run`]). `target` is `None` when the
/// target does not exist yet or is empty.
pub fn plan(
    source: &dyn Store,
    target: Option<&dyn Store>,
    threads: &[String],
    all: bool,
    opts: &CopyOptions,
    progress: &dyn Progress,
) -> Result<Vec<CopyThread>, Error> {
    let job = Copy { opts };
    let conn = job::CopyPlanConn { source, target };
    dfck_core::write::dry_run(&job, &conn, if all { &[] } else { threads }, progress)
}

/// `copy --apply`: one engine transaction per thread on the target (see
/// [`dfck_core::write::run`]).
pub fn apply(
    conns: Connections<'_, CopyConn>,
    threads: &[String],
    all: bool,
    opts: &CopyOptions,
    run: &RunOptions<'_>,
) -> Result<Vec<CopyThread>, Error> {
    let job = Copy { opts };
    dfck_core::write::run(&job, conns, if all { &[] } else { threads }, run)
}
