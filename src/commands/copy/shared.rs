//! DeerFlow's rows that belong to no thread — `users`, `agents`, the channel tables,
//! `webhook_deliveries`, and rows of thread-scoped tables whose thread column is NULL — copied
//! by `copy --all` as one job of the write engine, in one verified transaction of their own
//! before the threads (whose rows reference them: `threads_meta.user_id`,
//! `channel_conversations.connection_id`). Rows are streamed table by table and matched by
//! primary key: a row the target lacks is inserted, an identical one skipped (a rerun
//! resumes), a different one refused unless `--replace`, which overwrites it in place (an
//! update: no `ON DELETE CASCADE` reaches the rows referencing it). Verified before commit:
//! every source row read back by key with the same fingerprint.

use super::CopyStatus;
use super::app::{AppCopy, table_counts};
use super::job::{CopyConn, CopySides};
use dfck_core::error::{Error, StoreError};
use dfck_core::store::PlanStore;
use dfck_core::store::app_copy::{AppRow, AppRows, RowScope, TableMap};
use dfck_core::write::{ApplyContext, Planned, Refusal, ThreadJob, ThreadPlan};
use serde::Serialize;

/// The key the engine locks and reports this job under (no thread has it: DeerFlow's thread
/// ids are UUIDs or `[A-Za-z0-9_-]`).
pub const KEY: &str = "dfck copy: DeerFlow's shared tables";

/// What happened (or would) to DeerFlow's rows outside threads.
#[derive(Debug, Clone, Serialize)]
pub struct SharedReport {
    /// Done, would, refused or skipped.
    pub status: CopyStatus,
    /// Why refused or skipped.
    pub reason: Option<String>,
    /// Rows copied (would be) per table, inserted or overwritten.
    #[serde(serialize_with = "table_counts")]
    pub rows: Vec<(String, u64)>,
    /// Rows the target already held, identical.
    pub identical: u64,
    /// Rows of the target overwritten (`--replace`).
    pub replaced: u64,
}

impl SharedReport {
    fn new() -> Self {
        SharedReport {
            status: CopyStatus::Skipped,
            reason: None,
            rows: Vec::new(),
            identical: 0,
            replaced: 0,
        }
    }

    fn with(mut self, status: CopyStatus, reason: Option<String>) -> Self {
        self.status = status;
        self.reason = reason;
        self
    }
}

/// The job: DeerFlow's shared rows of `app`'s tables.
pub struct Shared<'a> {
    /// The tables.
    pub app: &'a AppCopy,
    /// Overwrite rows the target holds with other values.
    pub replace: bool,
}

/// Rows outside threads: every row of a table without a thread column, the NULL-thread rows
/// of the others.
fn scope(m: &TableMap) -> RowScope<'static> {
    if m.source.thread.is_some() {
        RowScope::NoThread
    } else {
        RowScope::All
    }
}

/// What one pass over a table found, per source row.
#[derive(Default, Clone, Copy)]
struct Tally {
    missing: u64,
    identical: u64,
    differ: u64,
    bytes: u64,
}

/// Streams `m`'s shared rows of the source, each in the target's form with the target's row
/// under the same key (`None`: the target lacks it, or there is no target yet). A value the
/// target cannot hold ends the pass with a refusal.
fn each_row(
    m: &TableMap,
    source: &dyn AppRows,
    target: Option<&dyn AppRows>,
    f: &mut dyn FnMut(AppRow, Option<AppRow>) -> Result<(), StoreError>,
) -> Result<Result<(), Refusal>, StoreError> {
    let mut bad = None;
    source.scan_app_rows(&m.source, scope(m), &mut |row| {
        if bad.is_some() {
            return Ok(());
        }
        match m.adopt(row) {
            Ok(row) => {
                let theirs = match target {
                    Some(t) => t.app_row(&m.target, &m.target.key_of(&row))?,
                    None => None,
                };
                f(row, theirs)
            }
            Err(e) => {
                bad = Some(Refusal(e.to_string()));
                Ok(())
            }
        }
    })?;
    Ok(bad.map_or(Ok(()), Err))
}

/// "1 row", "3 rows".
fn rows(n: u64) -> String {
    format!("{n} row{}", if n == 1 { "" } else { "s" })
}

/// Whether the target's row `theirs` equals `row` (both of `m`'s target table).
fn same(m: &TableMap, row: &AppRow, theirs: &AppRow) -> bool {
    m.target.fingerprint(theirs) == row.fingerprint(&m.target)
}

impl Shared<'_> {
    /// Counts, per table, what the copy finds in the target.
    fn survey(
        &self,
        source: &dyn AppRows,
        target: Option<&dyn AppRows>,
    ) -> Result<Result<Vec<Tally>, Refusal>, StoreError> {
        let mut out = Vec::with_capacity(self.app.maps.len());
        for m in &self.app.maps {
            let mut t = Tally::default();
            let pass = each_row(m, source, target, &mut |row, theirs| {
                t.bytes += row.bytes();
                match theirs {
                    None => t.missing += 1,
                    Some(theirs) if same(m, &row, &theirs) => t.identical += 1,
                    Some(_) => t.differ += 1,
                }
                Ok(())
            })?;
            if let Err(r) = pass {
                return Ok(Err(Refusal(format!("{}: {r}", m.name()))));
            }
            out.push(t);
        }
        Ok(Ok(out))
    }

    fn rows(&self, tallies: &[Tally]) -> Vec<(String, u64)> {
        self.app
            .maps
            .iter()
            .zip(tallies)
            .map(|(m, t)| {
                let n = t.missing + if self.replace { t.differ } else { 0 };
                (m.name().to_owned(), n)
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

impl<C: PlanStore + CopySides + ?Sized> ThreadPlan<C> for Shared<'_> {
    type Report = SharedReport;
    type Work = ();

    fn name(&self) -> &'static str {
        "copy"
    }

    fn verb(&self) -> &'static str {
        "copying DeerFlow's tables"
    }

    fn untouched(&self, _: &str) -> SharedReport {
        SharedReport::new()
    }

    fn refuse(&self, report: SharedReport, reason: Refusal) -> SharedReport {
        report.with(CopyStatus::Refused, Some(reason.0))
    }

    fn guards_active_runs(&self) -> bool {
        false
    }

    fn would(&self, report: SharedReport) -> SharedReport {
        report.with(CopyStatus::Would, None)
    }

    fn plan(&self, conn: &C, _: &str) -> Result<Planned<SharedReport, ()>, Error> {
        let Some(source) = conn.source().app_rows() else {
            return Ok(Planned::Done(SharedReport::new()));
        };
        let tallies = match self.survey(source, conn.app_target())? {
            Ok(t) => t,
            Err(r) => {
                return Ok(Planned::Done(
                    SharedReport::new().with(CopyStatus::Refused, Some(r.0)),
                ));
            }
        };
        let mut report = SharedReport::new();
        report.rows = self.rows(&tallies);
        report.identical = tallies.iter().map(|t| t.identical).sum();
        let differ: Vec<String> = self
            .app
            .maps
            .iter()
            .zip(&tallies)
            .filter(|(_, t)| t.differ > 0)
            .map(|(m, t)| format!("{} of {}", rows(t.differ), m.name()))
            .collect();
        if !differ.is_empty() && !self.replace {
            let why = format!(
                "the target holds other values under the same keys ({}); pass --replace to overwrite them",
                differ.join(", ")
            );
            return Ok(Planned::Done(report.with(CopyStatus::Refused, Some(why))));
        }
        if self.replace {
            report.replaced = tallies.iter().map(|t| t.differ).sum();
        }
        if report.rows.is_empty() {
            let why = if report.identical > 0 {
                "already in the target, identical"
            } else {
                "no rows outside threads"
            };
            return Ok(Planned::Done(
                report.with(CopyStatus::Skipped, Some(why.into())),
            ));
        }
        let bytes = tallies.iter().map(|t| t.bytes).sum();
        Ok(Planned::Write {
            report,
            work: (),
            growth: bytes,
            written: bytes,
        })
    }
}

impl ThreadJob<CopyConn> for Shared<'_> {
    type Expect = ();

    fn apply(&self, conn: &CopyConn, _: &str, _: (), cx: &ApplyContext) -> Result<(), Refusal> {
        let e = |e: StoreError| Refusal(e.to_string());
        let (Some(source), Some(target)) = (conn.source().app_rows(), conn.app_target()) else {
            return Err(Refusal("DeerFlow's tables cannot be read here".into()));
        };
        for m in &self.app.maps {
            let mut wrote = false;
            each_row(m, source, Some(target), &mut |row, theirs| {
                match theirs {
                    None => target.insert_app_row(&m.target, &row)?,
                    Some(theirs) if same(m, &row, &theirs) => return Ok(()),
                    Some(_) if self.replace => target.update_app_row(&m.target, &row)?,
                    Some(_) => {
                        return Err(StoreError::Target(
                            "a row changed in the target since it was planned".into(),
                        ));
                    }
                }
                wrote = true;
                cx.row_written();
                Ok(())
            })
            .map_err(e)?
            .map_err(|r| Refusal(format!("{}: {r}", m.name())))?;
            if wrote {
                target.advance_sequences(&m.target).map_err(e)?;
            }
        }
        Ok(())
    }

    /// Every source row is in the target under its key, with the same fingerprint.
    fn verify(&self, conn: &CopyConn, _: &str, _: &()) -> Result<(), Refusal> {
        let e = |e: StoreError| Refusal(format!("verification failed: {e}"));
        let (Some(source), Some(target)) = (conn.source().app_rows(), conn.app_target()) else {
            return Err(Refusal("DeerFlow's tables cannot be read here".into()));
        };
        for m in &self.app.maps {
            let (mut rows, mut differ) = (0u64, 0u64);
            each_row(m, source, Some(target), &mut |row, theirs| {
                rows += 1;
                if !theirs.is_some_and(|t| same(m, &row, &t)) {
                    differ += 1;
                }
                Ok(())
            })
            .map_err(e)?
            .map_err(|r| Refusal(format!("verification failed: {}: {r}", m.name())))?;
            if differ > 0 {
                return Err(Refusal(format!(
                    "verification failed: {} of the source's {rows} {} rows are not in the target as copied",
                    differ,
                    m.name()
                )));
            }
        }
        Ok(())
    }

    fn committed(&self, report: SharedReport, _: ()) -> SharedReport {
        let reason = (report.replaced > 0)
            .then(|| format!("overwrote the target's different {}", rows(report.replaced)));
        report.with(CopyStatus::Done, reason)
    }
}
