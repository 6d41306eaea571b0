//! `maintain --plan FILE` / `--apply-plan FILE`: the plan file (what a dry run would do,
//! per thread, with each thread's fingerprint), written atomically and read back with the
//! checks that refuse a plan made for another store or dfck version.

use super::select::Fingerprint;
use dfck_core::error::Error;
use dfck_core::target::Target;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The plan file's format tag.
pub const FORMAT: &str = "dfck-maintain-plan/1";

/// What happens to a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Deleted whole (`delete_idle`, `delete_older_than`).
    Delete,
    /// Pruned (the `prune` rule).
    Prune,
    /// Converted to delta form (`convert_over`).
    Convert,
}

impl Action {
    /// The action as reports show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Delete => "delete",
            Action::Prune => "prune",
            Action::Convert => "convert",
        }
    }
}

/// The options the plan was made with (applied as they are, whatever the policy says now).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanOptions {
    /// `prune.branches`.
    pub branches: bool,
    /// `prune.keep_last_turns`.
    pub keep_last_turns: Option<u32>,
    /// `delete_older_than`, in seconds.
    pub older_than: Option<u64>,
    /// `delete_idle`, in seconds.
    pub idle: Option<u64>,
    /// The clock ages were measured against (Unix seconds).
    pub now: i64,
    /// Snapshot cadence K of the conversion (`None`: no conversion step).
    pub snapshot_frequency: Option<u64>,
}

/// One thread of the plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedThread {
    /// Thread id.
    pub thread_id: String,
    /// What happens to it, in order.
    pub actions: Vec<Action>,
    /// What it looked like.
    pub fingerprint: Fingerprint,
}

/// A plan file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanFile {
    /// [`FORMAT`].
    pub format: String,
    /// The dfck version that wrote it.
    pub dfck_version: String,
    /// The store ([`identity`]).
    pub store: String,
    /// When it was made (Unix seconds).
    pub created_at: i64,
    /// The options.
    pub options: PlanOptions,
    /// The threads, in id order.
    pub threads: Vec<PlannedThread>,
    /// Whether the store is reclaimed after.
    pub reclaim: bool,
}

impl PlanFile {
    /// Writes the plan to `path`, whole or not at all, refusing a file of the store.
    pub fn write(&self, path: &Path, target: &Target) -> Result<(), Error> {
        let store = match target {
            Target::Sqlite(p) => Some(p.as_path()),
            Target::Postgres { .. } => None,
        };
        let mut text = serde_json::to_vec_pretty(self).unwrap_or_default();
        text.push(b'\n');
        dfck_core::store::files::replace_with_new_file(path, &text, store)
            .map_err(|e| Error::Usage(format!("--plan {}: {e}", path.display())))
    }

    /// Reads a plan and refuses it, whole, when it is not a plan, was made by another
    /// dfck version or for another store.
    pub fn read(path: &Path, target: &Target) -> Result<PlanFile, Error> {
        let bad = |why: String| Error::Usage(format!("--apply-plan {}: {why}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let tag: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("not JSON ({e})")))?;
        if tag.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(bad(format!("not a dfck maintain plan (format {FORMAT})")));
        }
        let plan: PlanFile =
            serde_json::from_value(tag).map_err(|e| bad(format!("malformed plan: {e}")))?;
        let ours = env!("CARGO_PKG_VERSION");
        if plan.dfck_version != ours {
            return Err(bad(format!(
                "made by dfck {}, this is dfck {ours}; make a new plan",
                plan.dfck_version
            )));
        }
        if plan.store != identity(target) {
            return Err(bad(format!(
                "made for another store ({}), not {}",
                plan.store,
                identity(target)
            )));
        }
        Ok(plan)
    }
}

/// The store as a plan names it: a SQLite file's canonical path, or the redacted URL.
pub fn identity(target: &Target) -> String {
    match target {
        Target::Sqlite(p) => std::fs::canonicalize(p)
            .unwrap_or_else(|_| p.clone())
            .display()
            .to_string(),
        t => t.display(),
    }
}
