//! Findings: what `verify` and `lineage` report. The code vocabulary is a type that knows its
//! contract string and default severity (docs/findings.md explains every code).

use serde::{Serialize, Serializer};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something is wrong: `verify` exits 1.
    Error,
    /// Worth a look; not wrong by itself.
    Warning,
    /// For information.
    Info,
}

impl Severity {
    /// The contract's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

macro_rules! finding_codes {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $sev:ident; )*) => {
        /// A finding code of the contract's fixed vocabulary.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum FindingCode {
            $( $(#[$doc])* $variant, )*
        }

        impl FindingCode {
            /// Every code, in the contract's order.
            pub const ALL: &'static [FindingCode] = &[$(FindingCode::$variant),*];

            /// The contract string, e.g. `lineage.cycle`.
            pub fn as_str(self) -> &'static str {
                match self { $(FindingCode::$variant => $code,)* }
            }

            /// The severity the contract gives this code (a few codes may be raised per case,
            /// see [`Finding::with_severity`]).
            pub fn severity(self) -> Severity {
                match self { $(FindingCode::$variant => Severity::$sev,)* }
            }

            /// Parses a contract string.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($code => Some(FindingCode::$variant),)* _ => None }
            }
        }
    };
}

finding_codes! {
    /// `parent_checkpoint_id` names no checkpoint in the same (thread, ns).
    LineageDanglingParent = "lineage.dangling_parent", Error;
    /// Following parents returns to a checkpoint already visited.
    LineageCycle = "lineage.cycle", Error;
    /// A parent walk longer than the user's `--max-depth` without reaching a root.
    LineageDepthExceeded = "lineage.depth_exceeded", Error;
    /// DeerFlow's 400-checkpoint regenerate walk cannot reach older (or any) human turns.
    LineageRegenerateBudget = "lineage.regenerate_budget", Warning;
    /// More than one parentless checkpoint in a (thread, ns).
    LineageMultipleRoots = "lineage.multiple_roots", Warning;
    /// A child id sorts at or below its parent's, or the head is not a leaf.
    LineageOrderAnomaly = "lineage.order_anomaly", Warning;
    /// The head has pending tasks.
    LineageUnsettledHead = "lineage.unsettled_head", Warning;
    /// A duration-only checkpoint (DeerFlow's run-duration writer).
    LineageDurationOnly = "lineage.duration_only", Info;
    /// A delta checkpoint with neither marker nor counters.
    ModeUnmarkedDelta = "mode.unmarked_delta", Error;
    /// A snapshot without the marker in a DeerFlow-marked thread.
    ModeUnmarkedSnapshot = "mode.unmarked_snapshot", Warning;
    /// The marker present on a plainly stored list.
    ModeMarkerWithoutDelta = "mode.marker_without_delta", Warning;
    /// The marker has a value other than `"delta"`.
    ModeUnknownMarker = "mode.unknown_marker", Warning;
    /// Full checkpoints followed by delta ones.
    ModeMixedThread = "mode.mixed_thread", Info;
    /// Delta replay picks up writes that belong to a sibling branch.
    DeltaForkContaminated = "delta.fork_contaminated", Error;
    /// A fork point whose write ownership cannot be decided from the store.
    DeltaForkAmbiguous = "delta.fork_ambiguous", Warning;
    /// A stored `langgraph.types.Overwrite` wrapper.
    ValueLiteralOverwrite = "value.literal_overwrite", Error;
    /// A stored `messages` value that is not a list (nor a snapshot of one).
    ValueMessagesNotAList = "value.messages_not_a_list", Error;
    /// A blob or write value that cannot be decoded.
    ValueUndecodable = "value.undecodable", Error;
    /// A serializer tag dfck cannot read.
    ValueUnsupportedSerializer = "value.unsupported_serializer", Error;
    /// An `<inner>+aes` value that does not decrypt with the key given.
    ValueDecryptFailed = "value.decrypt_failed", Error;
    /// Plaintext serialized values in a thread that also holds encrypted ones.
    ValuePlaintextInEncryptedThread = "value.plaintext_in_encrypted_thread", Warning;
    /// A message without an id inside a persisted `messages` write.
    MessageMissingId = "message.missing_id", Warning;
    /// DeerFlow lists a thread (`threads_meta`) that has no checkpoints.
    DeerflowListedWithoutCheckpoints = "deerflow.listed_without_checkpoints", Warning;
    /// A thread has checkpoints but no `threads_meta` row: no DeerFlow user can see or delete it.
    DeerflowUnlistedThread = "deerflow.unlisted_thread", Warning;
    /// A `pending`/`running` `runs` row whose lease is NULL or expired.
    DeerflowStaleRunLease = "deerflow.stale_run_lease", Warning;
}

impl std::fmt::Display for FindingCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FindingCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One finding, located at a thread, namespace and (usually) checkpoint.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Code from the contract's vocabulary.
    pub code: FindingCode,
    /// Severity (the code's, unless raised or lowered for this case).
    pub severity: Severity,
    /// Thread id.
    pub thread_id: String,
    /// Namespace.
    pub checkpoint_ns: String,
    /// The checkpoint concerned (`None` for findings about a whole thread).
    pub checkpoint_id: Option<String>,
    /// What is wrong and what it means for DeerFlow.
    pub message: String,
}

impl Finding {
    /// A finding with its code's severity.
    pub fn new(
        code: FindingCode,
        thread_id: &str,
        checkpoint_ns: &str,
        checkpoint_id: Option<&str>,
        message: String,
    ) -> Self {
        Finding {
            code,
            severity: code.severity(),
            thread_id: thread_id.to_owned(),
            checkpoint_ns: checkpoint_ns.to_owned(),
            checkpoint_id: checkpoint_id.map(str::to_owned),
            message,
        }
    }

    /// The same finding with another severity (codes whose severity depends on the case).
    pub fn with_severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_contract_string() {
        for &c in FindingCode::ALL {
            assert_eq!(FindingCode::parse(c.as_str()), Some(c));
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{c}\""));
        }
        assert_eq!(FindingCode::LineageCycle.severity(), Severity::Error);
        assert_eq!(FindingCode::parse("lineage.nope"), None);
    }
}
