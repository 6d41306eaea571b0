//! Which threads a `maintain` run examines: the store's threads in id order after the
//! cursor the last run left, minus the policy's exemptions (pinned threads, named threads,
//! users and a metadata key of DeerFlow's thread list), each with what the plan file
//! fingerprints.

use crate::commands::inspect::{StoreSummary, ThreadSummary};
use dfck_core::config::policy::Policy;
use dfck_core::deerflow::ThreadMeta;
use dfck_core::model::ThreadMode;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// What a thread looked like when planned; a thread whose fingerprint differs at apply
/// time is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// The newest checkpoint id (the head of the root namespace, else of any).
    pub newest_checkpoint_id: String,
    /// Checkpoints over every namespace.
    pub checkpoints: u64,
    /// Pending-write rows.
    pub pending_writes: u64,
    /// A `pending` or `running` row of DeerFlow's `runs` table.
    pub active_run: bool,
}

/// A thread the run examines.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Thread id.
    pub thread_id: String,
    /// Stored bytes.
    pub bytes: u64,
    /// `full`, `delta` or `mixed`.
    pub mode: ThreadMode,
    /// Its fingerprint (without the active-run bit, which is read when planned).
    pub fingerprint: Fingerprint,
}

/// Why threads were left out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Exempted {
    /// Pinned by their owner.
    pub pinned: u64,
    /// Named in `exempt.threads`.
    pub threads: u64,
    /// Owned by a user in `exempt.users`.
    pub users: u64,
    /// Carrying `exempt.metadata_key`.
    pub metadata_key: u64,
}

impl Exempted {
    /// Threads exempted in all.
    pub fn total(&self) -> u64 {
        self.pinned + self.threads + self.users + self.metadata_key
    }
}

/// The fingerprint of a summarized thread.
pub fn fingerprint(t: &ThreadSummary, active_run: bool) -> Fingerprint {
    Fingerprint {
        newest_checkpoint_id: t.head.checkpoint_id.clone(),
        checkpoints: t.checkpoints,
        pending_writes: t.writes,
        active_run,
    }
}

/// The threads after `cursor` (all when `None`), in id order, minus the exemptions.
pub fn candidates(
    summary: &StoreSummary,
    metas: &[ThreadMeta],
    policy: &Policy,
    cursor: Option<&str>,
) -> (Vec<Candidate>, Exempted) {
    let by_id: HashMap<&str, &ThreadMeta> =
        metas.iter().map(|m| (m.thread_id.as_str(), m)).collect();
    let mut ex = Exempted::default();
    let mut out: Vec<Candidate> = Vec::new();
    for t in &summary.threads {
        if cursor.is_some_and(|c| t.thread_id.as_str() <= c) {
            continue;
        }
        if policy.exempt_threads.contains(&t.thread_id) {
            ex.threads += 1;
            continue;
        }
        if let Some(m) = by_id.get(t.thread_id.as_str()) {
            if policy.exempt_pinned && m.pinned {
                ex.pinned += 1;
                continue;
            }
            if m.user_id
                .as_ref()
                .is_some_and(|u| policy.exempt_users.contains(u))
            {
                ex.users += 1;
                continue;
            }
            if policy
                .exempt_metadata_key
                .as_ref()
                .is_some_and(|k| m.metadata_keys.contains(k))
            {
                ex.metadata_key += 1;
                continue;
            }
        }
        out.push(Candidate {
            thread_id: t.thread_id.clone(),
            bytes: t.bytes,
            mode: t.mode,
            fingerprint: fingerprint(t, false),
        });
    }
    out.sort_by(|a, b| a.thread_id.cmp(&b.thread_id));
    (out, ex)
}
