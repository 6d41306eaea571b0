//! Findings: what `verify` and `lineage` report (fixed code vocabulary, severities).

use serde::Serialize;

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

/// One finding, located at a thread, namespace and (usually) checkpoint.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Code from the contract's vocabulary, e.g. `lineage.cycle`.
    pub code: &'static str,
    /// Severity fixed by the code.
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
