//! DeerFlow's view of a store as text: its schema, thread list and runs beside the store
//! summary, and the columns DeerFlow adds to the thread table.

use super::{escape::cell as esc, human_bytes};
use crate::commands::deerflow_view::ThreadApp;
use crate::commands::inspect::StoreSummary;
use std::fmt::Write;

/// The summary's DeerFlow lines (nothing for a store without DeerFlow's tables).
pub fn summary_deerflow(out: &mut String, s: &StoreSummary) {
    let Some(d) = &s.deerflow else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| i64::try_from(t.as_secs()).unwrap_or(i64::MAX));
    let stale = d
        .active_runs
        .iter()
        .filter(|r| r.lease_expired(now))
        .count();
    let _ = writeln!(
        out,
        "deerflow: schema {}; {} listed thread(s), {} without checkpoints; {} checkpoint thread(s) unlisted; {} active run(s), {} with an expired lease",
        esc(d.revision.as_deref().unwrap_or("(no alembic_version)")),
        d.listed_threads,
        d.listed_without_checkpoints.len(),
        d.unlisted_threads.len(),
        d.active_runs.len(),
        stale
    );
    let tables: Vec<String> = d
        .tables
        .iter()
        .map(|t| format!("{} {} ({})", t.table, t.rows, human_bytes(t.bytes)))
        .collect();
    let _ = writeln!(out, "tables:   {}", tables.join(", "));
}

/// The thread table's DeerFlow columns.
pub const HEADERS: [&str; 6] = ["title", "owner", "status", "runs", "last run", "tokens"];

/// One thread's DeerFlow cells.
pub fn cells(app: Option<&ThreadApp>) -> Vec<String> {
    let Some(a) = app else {
        return vec!["-".into(); HEADERS.len()];
    };
    if !a.listed {
        return vec![
            "(unlisted)".into(),
            "-".into(),
            "-".into(),
            a.runs.to_string(),
            a.last_run_status.clone().unwrap_or_else(|| "-".into()),
            a.tokens.to_string(),
        ];
    }
    let title = a.title.clone().unwrap_or_default();
    vec![
        if a.pinned {
            format!("{title} (pinned)")
        } else {
            title
        },
        a.user_id.clone().unwrap_or_else(|| "(shared)".into()),
        a.status.clone().unwrap_or_else(|| "-".into()),
        a.runs.to_string(),
        match (&a.last_run_status, &a.last_run_at) {
            (Some(st), Some(at)) => {
                format!("{st} {}", at.get(..19).unwrap_or(at).replace('T', " "))
            }
            (Some(st), None) => st.clone(),
            _ => "-".into(),
        },
        a.tokens.to_string(),
    ]
}
