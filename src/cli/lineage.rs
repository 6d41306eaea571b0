//! `dfck lineage THREAD [--checkpoint ID] [--ns NS] [--tree]`.

use super::{GlobalArgs, output};
use crate::render;
use clap::Args;
use dfck_core::error::Error;
use dfck_core::finding::Severity;
use dfck_core::model::thread::LoadedThread;
use dfck_core::outcome::Outcome;

/// Arguments of `dfck lineage`.
#[derive(Debug, Args)]
pub struct LineageArgs {
    /// The thread.
    pub thread: String,
    /// Start the chain here (default: the head).
    #[arg(long, value_name = "ID")]
    pub checkpoint: Option<String>,
    /// Namespace (default: the root graph, "").
    #[arg(long, value_name = "NS", default_value = "")]
    pub ns: String,
    /// Draw the whole (thread, ns) tree with its forks instead of one chain.
    #[arg(long, conflicts_with = "checkpoint")]
    pub tree: bool,
    /// Report `lineage.depth_exceeded` for a parent walk from the head longer than N
    /// checkpoints (no limit by default).
    #[arg(long, value_name = "N")]
    pub max_depth: Option<usize>,
}

/// Runs `dfck lineage`: exit 1 when the namespace has error-severity integrity findings.
pub fn run(global: &GlobalArgs, args: &LineageArgs) -> Result<Outcome, Error> {
    let (target, _) = global.resolve()?;
    let store = target.open_read_only()?;
    let mut inputs = dfck_core::lineage::TurnInputs::default();
    let t = LoadedThread::load_with(store.as_ref(), &args.thread, &args.ns, &mut inputs)?;
    if t.nodes.is_empty() {
        return Err(
            dfck_core::store::thread_not_found(store.as_ref(), &args.thread, &args.ns).into(),
        );
    }
    // A unique prefix names a checkpoint.
    let checkpoint = match &args.checkpoint {
        Some(c) => Some(dfck_core::address::checkpoint_id(
            store.as_ref(),
            &args.thread,
            &args.ns,
            c,
        )?),
        None => None,
    };
    let report = dfck_core::lineage::report(
        &t,
        checkpoint.as_deref(),
        args.tree,
        args.max_depth,
        Some(&inputs),
    )?;
    output(global.format(), &report, render::lineage_text)?;
    Ok(
        if report
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error)
        {
            Outcome::Findings
        } else {
            Outcome::Clean
        },
    )
}
