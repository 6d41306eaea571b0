//! The receipt of a user's erasure (`dfck delete --user ID --erase --apply --receipt PATH`):
//! what was deleted, how many rows of each kind, when and by which dfck — never any content.
//! Written as a new file, whole or not at all.

use super::{DeleteReport, DeleteStatus};
use dfck_core::error::Error;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// One thread of the receipt.
#[derive(Debug, Serialize)]
pub struct ReceiptThread {
    /// Thread id.
    pub thread_id: String,
    /// `done`, `refused` or `skipped`.
    pub status: &'static str,
    /// Why it was refused or skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Checkpoints deleted.
    pub checkpoints: u64,
    /// Write rows deleted.
    pub writes: u64,
    /// DeerFlow rows deleted, per table.
    pub rows: BTreeMap<String, u64>,
    /// Files and directories removed.
    pub files: usize,
    /// History-cache keys purged (`null`: no cache reached).
    pub cache_keys: Option<u64>,
}

/// The erasure receipt.
#[derive(Debug, Serialize)]
pub struct Receipt {
    /// `dfck.erasure-receipt`.
    pub kind: &'static str,
    /// The receipt format's version.
    pub format: u32,
    /// The user erased.
    pub user_id: String,
    /// When the receipt was written (UTC).
    pub finished_at: String,
    /// The dfck version that did it.
    pub dfck_version: &'static str,
    /// DeerFlow's alembic revision of the store.
    pub schema_revision: Option<String>,
    /// Whether every thread of the user is gone (none refused).
    pub complete: bool,
    /// Threads erased.
    pub threads_erased: usize,
    /// Threads refused (they keep every row; rerun after their work finishes).
    pub threads_refused: usize,
    /// Rows deleted over every thread: checkpoints, writes and each DeerFlow table.
    pub totals: BTreeMap<String, u64>,
    /// Per thread.
    pub threads: Vec<ReceiptThread>,
}

impl Receipt {
    /// The receipt of `report`, an applied erasure of `user_id`'s threads.
    pub fn new(user_id: &str, report: &DeleteReport) -> Self {
        let mut totals = BTreeMap::new();
        let threads = report
            .threads
            .iter()
            .map(|t| {
                let done = t.status == DeleteStatus::Done;
                let rows: BTreeMap<String, u64> = if done {
                    t.app_rows.iter().cloned().collect()
                } else {
                    BTreeMap::new()
                };
                if done {
                    *totals.entry("checkpoints".into()).or_insert(0) += t.checkpoints;
                    *totals.entry("writes".into()).or_insert(0) += t.writes;
                    for (table, n) in &rows {
                        *totals.entry(table.clone()).or_insert(0) += n;
                    }
                }
                ReceiptThread {
                    thread_id: t.thread_id.clone(),
                    status: t.status.as_str(),
                    reason: t.reason.clone(),
                    checkpoints: if done { t.checkpoints } else { 0 },
                    writes: if done { t.writes } else { 0 },
                    rows,
                    files: if done { t.files.len() } else { 0 },
                    cache_keys: t.cache_keys,
                }
            })
            .collect();
        let micros = dfck_core::time::now_micros();
        Receipt {
            kind: "dfck.erasure-receipt",
            format: 1,
            user_id: user_id.to_owned(),
            finished_at: format!(
                "{}Z",
                dfck_core::time::deerflow_text(micros).replacen(' ', "T", 1)
            ),
            dfck_version: env!("CARGO_PKG_VERSION"),
            schema_revision: report.revision.clone(),
            complete: report.refused == 0,
            threads_erased: report
                .threads
                .iter()
                .filter(|t| t.status == DeleteStatus::Done)
                .count(),
            threads_refused: report.refused,
            totals,
            threads,
        }
    }
}

/// Writes `receipt` to `path`, a new file: through a temporary file beside it, synced, then
/// linked into place without replacing anything.
pub fn write(path: &Path, receipt: &Receipt) -> Result<(), Error> {
    let dir = dfck_core::store::files::parent_dir(path);
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
    let text = serde_json::to_string_pretty(receipt).map_err(|e| Error::Render(e.to_string()))?;
    tmp.write_all(text.as_bytes())?;
    tmp.write_all(b"\n")?;
    tmp.as_file().sync_all()?;
    tmp.persist_noclobber(path)
        .map_err(|e| Error::Usage(format!("--receipt {}: {}", path.display(), e.error)))?;
    dfck_core::store::files::sync_dir(&dir);
    Ok(())
}
