//! A dry run on one connection in two stages: the connection's thread reads each batch of
//! threads (in a read transaction of its own), a second thread plans the batch's threads
//! from their rows held in memory ([`HeldStore`]) while the next batch is read. A plan
//! that needs any other read (a thread the batch left out, PostgreSQL's checkpoint times, a
//! second read of a namespace) is thrown away and made again on the connection, as
//! [`super::dry_run::dry_run_each`] makes it; so is the check for DeerFlow's active runs of
//! a thread the command would write. At most two batches are in flight; reports, and a
//! failure, reach the sink in thread order ([`crate::pool::two_stage`]).

use super::{Planned, ThreadPlan};
use crate::error::Error;
use crate::progress::Progress;
use crate::store::batch::ThreadRows;
use crate::store::held::{HeldStore, StoreShape};
use crate::store::{PlanStore, ReadOnly, Store};

/// Threads a dry run reads ahead at a time, where the store reads threads in batches.
pub(super) const AHEAD_THREADS: usize = 128;

/// What planning a thread from its batch gave.
enum Outcome<R> {
    /// Its report, and whether the command would write the thread.
    Planned(R, bool),
    /// A read the batch does not hold: planned again on the connection.
    Again,
    /// The plan failed: the run's error (the batch's later threads are not planned).
    Failed(Error),
}

/// Plans `job` on every thread of `ids`, reading on `store` and planning on a second
/// thread; each report to `sink` in thread order (see the module header).
pub(super) fn plan_ahead<J, R>(
    job: &J,
    store: &dyn Store,
    ids: &[String],
    values: bool,
    budget: usize,
    progress: &dyn Progress,
    sink: &mut dyn FnMut(R) -> Result<(), Error>,
) -> Result<(), Error>
where
    J: for<'a> ThreadPlan<ReadOnly<'a>, Report = R> + Sync,
    R: Send,
{
    let chunks: Vec<&[String]> = ids.chunks(AHEAD_THREADS).collect();
    let shape = StoreShape::of(store);
    let conn = ReadOnly(store);
    // Each batch's plans finished in a read transaction of their own.
    let mut finish_batch = |k: usize, planned: Vec<Outcome<R>>| -> Result<(), Error> {
        conn.begin_read()?;
        let done = (|| -> Result<(), Error> {
            for (id, outcome) in chunks[k].iter().zip(planned) {
                let report = match outcome {
                    Outcome::Planned(report, write) => finish(job, store, id, report, write)?,
                    Outcome::Again => again(job, &conn, id)?,
                    Outcome::Failed(e) => return Err(e),
                };
                sink(report)?;
                progress.inc(1);
            }
            Ok(())
        })();
        let ended = conn.end_read();
        done?;
        Ok(ended?)
    };
    // A stop asked of the process does not cut a dry run short (it never did).
    crate::pool::two_stage(
        chunks.len(),
        false,
        &mut |k| read_batch(store, chunks[k], budget, values),
        &|k, rows| Ok(plan_batch(job, &shape, chunks[k], rows, values)),
        &mut finish_batch,
        &stopped,
    )
}

fn stopped() -> Error {
    Error::Io(std::io::Error::other(
        "the dry run's planning thread stopped",
    ))
}

/// Reads a batch in a read transaction of its own (one snapshot for all its statements).
fn read_batch(
    store: &dyn Store,
    ids: &[String],
    budget: usize,
    values: bool,
) -> Result<Option<Vec<ThreadRows>>, Error> {
    store.begin_read_transaction()?;
    let read = store.read_threads(ids, budget, values);
    let ended = store.end_read_transaction();
    let read = read?;
    ended?;
    Ok(read)
}

/// Plans each thread of a batch from its rows (none held: each is planned again).
fn plan_batch<J, R>(
    job: &J,
    shape: &StoreShape,
    ids: &[String],
    rows: Option<Vec<ThreadRows>>,
    values: bool,
) -> Vec<Outcome<R>>
where
    J: for<'a> ThreadPlan<ReadOnly<'a>, Report = R> + Sync,
{
    let Some(rows) = rows else {
        return ids.iter().map(|_| Outcome::Again).collect();
    };
    let held = HeldStore::new(shape.clone(), rows, values);
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let planned = job.plan(&ReadOnly(&held), id);
        let outcome = match planned {
            _ if held.take_missed() => Outcome::Again,
            Ok(Planned::Done(report)) => Outcome::Planned(report, false),
            Ok(Planned::Write { report, .. }) => Outcome::Planned(report, true),
            Err(e) => Outcome::Failed(e),
        };
        let failed = matches!(outcome, Outcome::Failed(_));
        out.push(outcome);
        if failed {
            break;
        }
    }
    out
}

/// A planned thread's dry-run report, as the engine's dry run makes it: the active-run
/// check ([`super::active_run_refusal`]), then [`ThreadPlan::would`] for a write.
fn finish<J, R>(job: &J, store: &dyn Store, id: &str, report: R, write: bool) -> Result<R, Error>
where
    J: for<'a> ThreadPlan<ReadOnly<'a>, Report = R> + Sync,
{
    let planned = match write {
        false => Planned::Done(report),
        true => Planned::Write {
            report,
            work: (),
            growth: 0,
            written: 0,
        },
    };
    let checked = super::active_run_refusal::<ReadOnly<'_>, J, ()>(job, store, id, planned)?;
    Ok(dry_report(job, checked))
}

/// The report a dry run shows of a planned thread.
fn dry_report<J, R, W>(job: &J, planned: Planned<R, W>) -> R
where
    J: for<'a> ThreadPlan<ReadOnly<'a>, Report = R> + Sync,
{
    match planned {
        Planned::Done(report) => report,
        Planned::Write { report, .. } => ThreadPlan::<ReadOnly<'_>>::would(job, report),
    }
}

/// Plans a thread again on the connection (inside its batch's read transaction).
fn again<J, R>(job: &J, conn: &ReadOnly<'_>, id: &str) -> Result<R, Error>
where
    J: for<'a> ThreadPlan<ReadOnly<'a>, Report = R> + Sync,
{
    let planned = job.plan(conn, id)?;
    let checked = super::active_run_refusal::<ReadOnly<'_>, J, _>(job, conn.0, id, planned)?;
    Ok(dry_report(job, checked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteStore;
    use crate::write::Refusal;

    /// A job whose report is a thread's checkpoint count; `head` asks the connection for a
    /// thread's head as well (a read no batch holds); `fail` fails a thread's plan.
    struct Count {
        head: &'static str,
        fail: &'static str,
    }

    impl<'a> ThreadPlan<ReadOnly<'a>> for Count {
        type Report = (String, usize, bool);
        type Work = ();
        fn name(&self) -> &'static str {
            "count"
        }
        fn verb(&self) -> &'static str {
            "counting"
        }
        fn untouched(&self, thread_id: &str) -> Self::Report {
            (thread_id.into(), 0, false)
        }
        fn refuse(&self, report: Self::Report, _: Refusal) -> Self::Report {
            report
        }
        fn plan(&self, conn: &ReadOnly<'a>, id: &str) -> Result<Planned<Self::Report, ()>, Error> {
            if id == self.fail {
                return Err(Error::Io(std::io::Error::other(format!("plan of {id}"))));
            }
            let store = conn.store();
            let mut n = 0;
            for ns in store.namespaces(id)? {
                store.scan_thread_values(id, &ns, &mut |_| {
                    n += 1;
                    Ok(())
                })?;
                store.thread_writes(id, &ns)?;
            }
            let head = id == self.head && store.head_id(id, "")?.is_some();
            Ok(Planned::Write {
                report: (id.into(), n, head),
                work: (),
                growth: 0,
                written: 0,
            })
        }
        fn would(&self, mut report: Self::Report) -> Self::Report {
            report.0.push('?');
            report
        }
        fn reads_whole_threads(&self) -> Option<bool> {
            Some(true)
        }
    }

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        std::fs::copy(fixtures.join("sqlite/delta_k3.db"), &db).unwrap();
        let wal = fixtures.join("sqlite/delta_k3.db-wal");
        if wal.exists() {
            std::fs::copy(wal, db.with_extension("db-wal")).unwrap();
        }
        let store = SqliteStore::open_read_only(&db).unwrap();
        (dir, store)
    }

    /// Every thread of the store 40 times over (a thread may be named again), in batches.
    fn run(job: &Count, store: &SqliteStore) -> (Vec<(String, usize, bool)>, Option<String>) {
        let mut ids = Vec::new();
        store
            .scan_thread_ids(&mut |t| {
                ids.push(t);
                Ok(())
            })
            .unwrap();
        let ids: Vec<String> = (0..40).flat_map(|_| ids.clone()).collect();
        let mut out = Vec::new();
        let progress = crate::progress::NoProgress;
        let ran = plan_ahead(job, store, &ids, true, 1 << 20, &progress, &mut |r| {
            out.push(r);
            Ok(())
        });
        (out, ran.err().map(|e| e.to_string()))
    }

    #[test]
    fn plans_from_the_batch_equal_plans_on_the_connection_in_thread_order() {
        let (_dir, store) = store();
        let (all, e) = run(&Count { head: "", fail: "" }, &store);
        assert_eq!(e, None);
        assert_eq!(all.len(), 320);
        assert!(all.iter().all(|(id, n, _)| id.ends_with('?') && *n > 0));
        // A thread whose plan reads what no batch holds is planned again on the connection:
        // the same count, and the head found there.
        let (again, e) = run(
            &Count {
                head: "t-fork",
                fail: "",
            },
            &store,
        );
        assert_eq!(e, None);
        for (a, b) in all.iter().zip(&again) {
            assert_eq!((&a.0, a.1), (&b.0, b.1));
            assert_eq!(b.2, b.0 == "t-fork?");
        }
        // A failed plan ends the run after every report before it.
        let (before, e) = run(
            &Count {
                head: "",
                fail: "t-linear",
            },
            &store,
        );
        assert!(e.unwrap().contains("plan of t-linear"));
        let first = all.iter().position(|r| r.0 == "t-linear?").unwrap();
        assert_eq!(before, all[..first]);
    }
}
