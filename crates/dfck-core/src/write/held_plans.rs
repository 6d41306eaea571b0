//! Plans made ahead inside a group transaction (`super::group`): the group reads its threads
//! whole under its locks ([`crate::store::Store::read_threads`]) in pieces of 4, 8, 16, ...
//! threads, all before it writes, and a second thread plans each from those rows held in
//! memory ([`HeldStore`]), from the first piece on, while the connection reads the rest and
//! then writes the threads before it. Nothing else changes the group's threads from that read
//! to the commit (their locks are held throughout) and a thread's writes touch its own rows
//! only, so a plan made there is the one the connection would make at the thread's turn: a
//! plan that failed ends the run there, as it would on the connection. A plan that needs any
//! other read is made again on the connection at the thread's turn, as is the plan of a
//! thread the read left out (past its budget) and of an id the group lists twice. (A job's
//! `plan_held` may also do ahead what its verification needs of the plan alone: a prune's
//! plan made here carries the checked outcome of what its deletions leave.) The
//! contract is in `docs/write-engine.md`, "Group transactions".

use super::{Planned, ThreadJob};
use crate::error::Error;
use crate::store::batch::ThreadRows;
use crate::store::held::{HeldStore, StoreShape};
use crate::store::{ReadOnly, WriteStore};
use std::collections::HashSet;
use std::sync::mpsc::{Receiver, channel, sync_channel};
use std::thread::Scope;

/// The threads of a group's first read: the second thread plans them while the connection
/// reads the rest, each read twice as many threads as the one before.
const FIRST_READ: usize = 4;

/// `ids` in the reads [`start`] makes of them: [`FIRST_READ`] threads, then twice as many
/// each time.
fn chunks(ids: &[String]) -> impl Iterator<Item = &[String]> {
    let mut rest = ids;
    let mut size = FIRST_READ;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (chunk, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        size *= 2;
        Some(chunk)
    })
}

/// One thread's plan as it comes: made ahead, to make on the connection (`None`), or failed.
type Made<R, W> = Result<Option<Planned<R, W>>, Error>;

/// The plans of a group's threads, in the group's order.
pub(super) struct HeldPlans<R, W> {
    rx: Receiver<Made<R, W>>,
}

/// The plans of a job's group, when made ahead.
type Ahead<R, W> = Result<Option<HeldPlans<R, W>>, Error>;

impl<R, W> HeldPlans<R, W> {
    /// The next thread's plan, when it was made ahead (`None`: plan it on the connection);
    /// `Err`: the plan failed, as it would on the connection, which ends the run.
    pub(super) fn next(&self) -> Made<R, W> {
        self.rx.recv().unwrap_or(Ok(None))
    }
}

/// Reads `ids` whole (under the group's locks) and starts planning them on a thread of
/// `scope`, where the job plans from held rows and the store reads threads in batches;
/// `None` otherwise (the caller reads them ahead on the connection).
pub(super) fn start<'scope, 'env, C, J>(
    scope: &'scope Scope<'scope, 'env>,
    job: &'env J,
    conn: &C,
    ids: &'env [String],
    budget: usize,
    values: bool,
) -> Ahead<J::Report, J::Work>
where
    C: WriteStore,
    J: ThreadJob<C>,
    J::Report: 'scope,
    J::Work: 'scope,
{
    if !job.plans_held() {
        return Ok(None);
    }
    let store = conn.store();
    let mut chunks = chunks(ids);
    let Some(first) = chunks.next() else {
        return Ok(None);
    };
    let Some(rows) = store.read_threads(first, budget, values)? else {
        return Ok(None);
    };
    let mut held_bytes: usize = rows.iter().map(ThreadRows::held_bytes).sum();
    let shape = StoreShape::of(store);
    // Plans made ahead waiting, at most (one more may be under way on the second thread,
    // and one applied on the connection): each holds its thread's planned work, all of it
    // made from the group's rows, which the read's budget bounds.
    let (tx, rx) = sync_channel(job.plans_waiting());
    let (more_tx, more_rx) = channel::<Vec<ThreadRows>>();
    scope.spawn(move || {
        let mut held = HeldStore::new(shape.clone(), rows, values);
        // Where each later read starts: its rows replace the held ones there.
        let mut pieces = self::chunks(ids).map(<[String]>::len);
        let mut next = pieces.next().unwrap_or(0);
        let mut seen: HashSet<&str> = HashSet::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            if i == next {
                // Nothing when the read failed: the group then ends, every thread a miss.
                let rows = more_rx.recv().unwrap_or_default();
                held = HeldStore::new(shape.clone(), rows, values);
                next += pieces.next().unwrap_or(0);
            }
            // An id listed twice (a thread id stored as TEXT and as a BLOB) is planned on the
            // connection its second time: a later read holds its rows from before its first
            // turn wrote, and a read in the same piece holds none.
            let made = match seen.insert(id.as_str()) {
                false => Ok(None),
                true => match job.plan_held(&ReadOnly(&held), id) {
                    _ if held.take_missed() => Ok(None),
                    Ok(planned) => Ok(Some(planned)),
                    Err(e) => Err(e),
                },
            };
            // The group ended early: the rest is planned again in the next.
            if tx.send(made).is_err() {
                break;
            }
        }
    });
    // The rest is read while the second thread plans the first threads; past the budget,
    // the threads are left to the connection.
    for chunk in chunks {
        let left = budget.saturating_sub(held_bytes);
        let rows = match left {
            0 => Vec::new(),
            _ => store.read_threads(chunk, left, values)?.unwrap_or_default(),
        };
        held_bytes += rows.iter().map(ThreadRows::held_bytes).sum::<usize>();
        if more_tx.send(rows).is_err() {
            break;
        }
    }
    Ok(Some(HeldPlans { rx }))
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::progress::NoProgress;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{PlanStore, ReadOnly, Store};
    use crate::write::{
        ApplyContext, Connections, Planned, Refusal, RunOptions, ThreadJob, ThreadPlan, run,
    };

    /// Counts a thread's checkpoints and writes, reading it whole; `held` plans ahead, and
    /// the report says which plans were made from the rows held.
    struct Count {
        held: bool,
    }

    impl<C: PlanStore + ?Sized> ThreadPlan<C> for Count {
        type Report = (String, usize, bool);
        type Work = bool;
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
        fn plan(&self, conn: &C, id: &str) -> Result<Planned<Self::Report, bool>, Error> {
            let store = conn.store();
            let mut n = 0;
            for ns in store.namespaces(id)? {
                store.scan_thread_values(id, &ns, &mut |_| {
                    n += 1;
                    Ok(())
                })?;
                n += store.thread_writes(id, &ns)?.len();
            }
            Ok(Planned::Write {
                report: (id.into(), n, false),
                work: false,
                growth: 0,
                written: 0,
            })
        }
        fn reads_whole_threads(&self) -> Option<bool> {
            Some(true)
        }
    }

    impl ThreadJob<SqliteStore> for Count {
        type Expect = bool;
        fn apply(
            &self,
            _: &SqliteStore,
            _: &str,
            held: bool,
            _: &ApplyContext,
        ) -> Result<bool, Refusal> {
            Ok(held)
        }
        fn verify(&self, _: &SqliteStore, _: &str, _: &bool) -> Result<(), Refusal> {
            Ok(())
        }
        fn committed(&self, report: Self::Report, held: bool) -> Self::Report {
            (report.0, report.1, held)
        }
        fn plans_held(&self) -> bool {
            self.held
        }
        fn plan_held(
            &self,
            held: &ReadOnly<'_>,
            id: &str,
        ) -> Result<Planned<Self::Report, bool>, Error> {
            Ok(match ThreadPlan::<ReadOnly<'_>>::plan(self, held, id)? {
                Planned::Write {
                    report,
                    growth,
                    written,
                    ..
                } => Planned::Write {
                    report,
                    work: true,
                    growth,
                    written,
                },
                done => done,
            })
        }
    }

    /// A group is read in reads of 4, 8, 16, ... threads, in order, every thread once.
    #[test]
    fn a_group_is_read_in_doubling_reads() {
        let ids: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        let reads: Vec<&[String]> = super::chunks(&ids).collect();
        assert_eq!(
            reads.iter().map(|r| r.len()).collect::<Vec<_>>(),
            [4, 8, 16, 12]
        );
        assert_eq!(reads.concat(), ids);
        assert_eq!(super::chunks(&[]).count(), 0);
    }

    /// The reports of `Count` (`held`: planned ahead) over delta_k3's threads and three
    /// copies of them (32 threads), as `ids` lists them, one group.
    fn counted(
        held: bool,
        ids: impl FnOnce(Vec<String>) -> Vec<String>,
    ) -> Vec<(String, usize, bool)> {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        std::fs::copy(fixtures.join("sqlite/delta_k3.db"), &db).unwrap();
        // Three more copies of its 8 threads under new ids: 32 threads, four reads.
        let sql = rusqlite::Connection::open(&db).unwrap();
        sql.execute_batch("CREATE TEMP TABLE o AS SELECT DISTINCT thread_id FROM checkpoints")
            .unwrap();
        for copy in ["-b", "-c", "-d"] {
            sql.execute_batch(&format!(
                "CREATE TEMP TABLE c AS SELECT * FROM checkpoints WHERE thread_id IN o;
                 CREATE TEMP TABLE w AS SELECT * FROM writes WHERE thread_id IN o;
                 UPDATE c SET thread_id = thread_id || '{copy}';
                 UPDATE w SET thread_id = thread_id || '{copy}';
                 INSERT INTO checkpoints SELECT * FROM c;
                 INSERT INTO writes SELECT * FROM w;
                 DROP TABLE c; DROP TABLE w;"
            ))
            .unwrap();
        }
        drop(sql);
        let store = SqliteStore::open_read_write(&db).unwrap();
        let open = || SqliteStore::open_read_write(&db);
        let opts = RunOptions {
            jobs: 1,
            cache: None,
            // As listed, an id listed twice too.
            exact_threads: true,
            backup: None,
            phase: "counting",
            progress: &NoProgress,
            events: &|_| {},
        };
        let conns = Connections {
            first: &store,
            open: &open,
            spare: None,
        };
        let all = store.thread_ids_after(None, 1000).unwrap();
        run(&Count { held }, conns, &ids(all), &opts).unwrap()
    }

    /// Every thread of a group (32 threads, one group, four reads) is planned by
    /// the job's `plan_held`, which only the second thread calls, from the rows read under
    /// the group's lock, to the plan the connection makes, in thread order.
    #[test]
    fn a_groups_plans_made_ahead_equal_the_connections() {
        let on_the_connection = counted(false, |ids| ids);
        let ahead = counted(true, |ids| ids);
        assert_eq!(ahead.len(), 32);
        assert_eq!(ahead.len(), on_the_connection.len());
        assert!(on_the_connection.iter().all(|r| r.1 > 0 && !r.2));
        for (a, c) in ahead.iter().zip(&on_the_connection) {
            assert_eq!((&a.0, a.1), (&c.0, c.1));
            assert!(a.2, "{} planned ahead", a.0);
        }
    }

    /// An id the group lists twice (SQLite lists a thread id stored as TEXT and as a BLOB
    /// twice) is read again by a later read before its first turn writes: its second turn is
    /// planned on the connection, not from those rows.
    #[test]
    fn an_id_listed_twice_is_planned_on_the_connection_the_second_time() {
        let twice = |mut ids: Vec<String>| {
            ids.push(ids[0].clone());
            ids
        };
        let ahead = counted(true, twice);
        assert_eq!(ahead.len(), 33);
        assert!(ahead[..32].iter().all(|r| r.2));
        assert_eq!((&ahead[32].0, ahead[32].1), (&ahead[0].0, ahead[0].1));
        assert!(
            !ahead[32].2,
            "the second turn of {} planned ahead",
            ahead[32].0
        );
    }
}
