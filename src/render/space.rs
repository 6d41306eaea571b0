//! Rendering of the space reports: `dfck reclaim`, and the store's on-disk facts and
//! per-channel bytes that `dfck inspect` adds to its summary.

use super::escape::owned as esc;
use super::{add_row, finish, human_bytes, table};
use crate::commands::inspect::StoreSummary;
use crate::commands::reclaim::{ReclaimReport, ReclaimStatus};
use crate::commands::space::ChannelBytes;
use dfck_core::store::space::{PgSpace, SqliteSpace, StoreSpace};
use std::fmt::Write as _;

/// One line about a SQLite file: bytes on disk, then its pages.
pub fn sqlite_line(s: &SqliteSpace) -> String {
    format!(
        "{} on disk (file {}, WAL {}, SHM {}); {} pages of {} B, {} free ({})",
        human_bytes(s.total_bytes),
        human_bytes(s.file_bytes),
        human_bytes(s.wal_bytes),
        human_bytes(s.shm_bytes),
        s.page_count,
        s.page_size,
        s.freelist_pages,
        human_bytes(s.free_page_bytes)
    )
}

/// The tables of a PostgreSQL store, one row each.
pub fn pg_tables(p: &PgSpace) -> String {
    let mut t = table(&[
        "table",
        "total",
        "heap",
        "toast",
        "indexes",
        "live rows",
        "dead rows",
    ]);
    for x in &p.tables {
        add_row(
            &mut t,
            vec![
                x.table.clone(),
                human_bytes(x.total_bytes),
                human_bytes(x.heap_bytes),
                human_bytes(x.toast_bytes),
                human_bytes(x.index_bytes),
                x.live_tuples.to_string(),
                x.dead_tuples.to_string(),
            ],
        );
    }
    t.to_string()
}

fn space_lines(out: &mut String, label: &str, s: &StoreSpace) {
    match s {
        StoreSpace::Sqlite(s) => {
            let _ = writeln!(out, "{label:<8} {}", sqlite_line(s));
        }
        StoreSpace::Postgres(p) => {
            let _ = writeln!(out, "{label:<8} {} in tables", human_bytes(p.total_bytes));
            let _ = writeln!(out, "{}", pg_tables(p));
        }
    }
}

/// `dfck reclaim` as text.
pub fn reclaim_table(r: &ReclaimReport) -> String {
    let mut out = String::new();
    let head = match (r.status, r.dry_run) {
        (ReclaimStatus::Would, _) => "dry run, nothing changed (--apply to do it)",
        (ReclaimStatus::Done, _) => "done",
        (ReclaimStatus::Refused, true) => "dry run: it would be refused",
        (ReclaimStatus::Refused, false) => "refused, nothing changed",
        (ReclaimStatus::Interrupted, _) => "interrupted, nothing changed",
    };
    let _ = writeln!(out, "reclaim: {head}");
    let _ = writeln!(out, "store:   {} ({})", esc(&r.location), r.backend);
    let _ = writeln!(out, "action:  {}", r.action.describe());
    if let Some(into) = &r.into {
        let _ = writeln!(out, "into:    {}", esc(into));
    }
    space_lines(&mut out, "before:", &r.before);
    if let Some(a) = &r.after {
        space_lines(&mut out, "after:", a);
    }
    if let Some(f) = r.bytes_freed {
        let shown = if f >= 0 {
            human_bytes(f as u64)
        } else {
            format!("-{} (the store grew)", human_bytes(f.unsigned_abs()))
        };
        let _ = writeln!(out, "freed:   {shown}");
    }
    if let Some(n) = r.needed_bytes {
        let _ = writeln!(
            out,
            "room:    needs about {} free, {} available",
            human_bytes(n),
            r.available_bytes
                .map_or_else(|| "unknown".to_owned(), human_bytes)
        );
    }
    if let Some(reason) = &r.reason {
        let _ = writeln!(out, "reason:  {}", esc(reason));
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {}", esc(w));
    }
    if let Some(a) = &r.advice {
        let _ = writeln!(out, "advice:  {a}");
    }
    finish(out)
}

/// The store's on-disk lines of `dfck inspect`.
pub fn summary_space(out: &mut String, s: &StoreSummary) {
    match &s.space {
        Some(StoreSpace::Sqlite(x)) => {
            let _ = writeln!(out, "disk:    {}", sqlite_line(x));
        }
        Some(StoreSpace::Postgres(p)) => {
            let _ = writeln!(out, "disk:    {} in tables", human_bytes(p.total_bytes));
            let _ = writeln!(out, "{}", pg_tables(p));
        }
        None => {}
    }
}

/// The per-channel tables of `dfck inspect --channels`: the store's channels (over the
/// threads shown), then each thread's.
pub fn summary_channels(out: &mut String, s: &StoreSummary) {
    let Some(totals) = &s.channel_totals else {
        return;
    };
    let share = |part: u64, whole: u64| {
        if whole == 0 {
            "-".to_owned()
        } else {
            format!("{:.1}%", part as f64 * 100.0 / whole as f64)
        }
    };
    let rows = |t: &mut super::grid::Grid, thread: Option<&str>, chans: &[ChannelBytes]| {
        let whole: u64 = chans.iter().map(|c| c.bytes).sum();
        for c in chans {
            let mut cells = Vec::new();
            if let Some(th) = thread {
                cells.push(th.to_owned());
            }
            cells.extend([
                c.channel.clone(),
                human_bytes(c.values_bytes),
                human_bytes(c.writes_bytes),
                human_bytes(c.bytes),
                share(c.bytes, whole),
            ]);
            add_row(t, cells);
        }
    };
    let _ = writeln!(out, "channels (threads shown):");
    let mut t = table(&["channel", "stored", "writes", "bytes", "share"]);
    rows(&mut t, None, totals);
    let _ = writeln!(out, "{t}");
    let mut t = table(&["thread", "channel", "stored", "writes", "bytes", "share"]);
    for th in &s.threads {
        if let Some(chans) = &th.channels {
            rows(&mut t, Some(&th.thread_id), chans);
        }
    }
    let _ = writeln!(out, "{t}");
}

/// The projection of `dfck inspect --savings`.
pub fn summary_savings(out: &mut String, s: &StoreSummary) {
    let Some(sv) = &s.savings else {
        return;
    };
    let _ = writeln!(
        out,
        "savings (threads shown; logical bytes): prune {}, prune --branches {} more, migrate full-to-delta (K={}) {}",
        human_bytes(sv.duration_leaves),
        human_bytes(sv.branches),
        sv.snapshot_frequency,
        human_bytes(sv.full_to_delta)
    );
    let mut t = table(&["thread", "prune", "--branches", "full-to-delta"]);
    for th in &sv.threads {
        add_row(
            &mut t,
            vec![
                th.thread_id.clone(),
                human_bytes(th.duration_leaves),
                human_bytes(th.branches),
                human_bytes(th.full_to_delta),
            ],
        );
    }
    let _ = writeln!(out, "{t}");
}
