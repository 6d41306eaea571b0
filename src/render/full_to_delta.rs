//! `dfck migrate full-to-delta` as text.

use super::{add_row, finish, human_bytes, opt, table};
use crate::commands::migrate::to_delta::ToDeltaReport;
use std::fmt::Write as _;

/// The per-thread table, with the snapshots placed by reason.
pub fn full_to_delta_table(r: &ToDeltaReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}threads: {} {}, {} refused, {} skipped (nothing to convert); snapshot frequency {}",
        if r.dry_run {
            "dry run, nothing written — "
        } else {
            "applied — "
        },
        if r.dry_run { r.would } else { r.done },
        if r.dry_run { "to convert" } else { "converted" },
        r.refused,
        r.skipped,
        r.snapshot_frequency
    );
    let mut t = table(&[
        "thread",
        "status",
        "form",
        "checkpoints",
        "snapshots (cadence/fork/mismatch/overwrite/shared)",
        "bytes before",
        "bytes after",
        "reason",
    ]);
    for p in &r.threads {
        add_row(
            &mut t,
            vec![
                p.thread_id.clone(),
                p.status.as_str().to_owned(),
                p.form
                    .map(|f| match f {
                        crate::commands::migrate::to_delta::DeltaForm::Deerflow => "deerflow",
                        crate::commands::migrate::to_delta::DeltaForm::Langgraph => "langgraph",
                    })
                    .unwrap_or("-")
                    .to_owned(),
                p.checkpoints_rewritten.to_string(),
                format!(
                    "{}/{}/{}/{}/{}",
                    p.snapshots.cadence,
                    p.snapshots.fork,
                    p.snapshots.replay_mismatch,
                    p.snapshots.overwrite,
                    p.snapshots.shared_version
                ),
                human_bytes(p.bytes_before),
                human_bytes(p.bytes_after),
                opt(&p.reason),
            ],
        );
    }
    let _ = writeln!(out, "{t}");
    finish(out)
}
