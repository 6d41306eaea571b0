//! `verify` on one connection in two stages: the connection's thread reads each chunk of
//! threads ([`super::read_chunk`]: one batch read, and the threads it leaves read and checked
//! on their own), a second thread checks the batch's threads from their rows
//! ([`super::check_slots`]) while the next chunk is read. At most two chunks are in flight;
//! results reach the sink in chunk order, and a failure reaches it in its place, after every
//! chunk before it. Without a second thread the chunks are read and checked in turn.

use super::{Checked, Slot};
use dfck_core::error::StoreError;
use dfck_core::store::Store;
use std::sync::mpsc;

/// Reads a chunk of thread ids on the connection.
type Read<'a> = dyn Fn(&dyn Store, &[String]) -> Result<Vec<Slot>, StoreError> + 'a;
/// Checks a chunk's slots without a connection.
type Check<'a> = dyn Fn(&[String], Vec<Slot>) -> Result<Vec<Checked>, StoreError> + Sync + 'a;
/// Takes each chunk's results, in chunk order.
type Sink<'a> = dyn FnMut(usize, Vec<Checked>) -> Result<(), StoreError> + Send + 'a;

fn stopped() -> StoreError {
    StoreError::Query {
        what: "checking threads".into(),
        reason: "the checking thread stopped".into(),
    }
}

/// Runs every chunk of `chunks` through `read` on `store` and `check` on a second thread.
pub(super) fn run(
    store: &dyn Store,
    chunks: &[&[String]],
    read: &Read<'_>,
    check: &Check<'_>,
    sink: &mut Sink<'_>,
) -> Result<(), StoreError> {
    std::thread::scope(|scope| {
        let (to_checker, inbox) = mpsc::sync_channel::<(usize, Result<Vec<Slot>, StoreError>)>(1);
        let (outbox, from_checker) = mpsc::channel();
        let checker = std::thread::Builder::new()
            .name("dfck-verify".into())
            .spawn_scoped(scope, move || {
                for (k, read) in inbox {
                    let checked = read.and_then(|slots| check(chunks[k], slots));
                    let failed = checked.is_err();
                    if outbox.send((k, checked)).is_err() || failed {
                        return;
                    }
                }
            });
        if checker.is_err() {
            drop(to_checker);
            return in_turn(store, chunks, read, check, sink);
        }
        let mut in_flight = 0usize;
        // The next result due, and hands it to the sink.
        let mut take = |in_flight: &mut usize| -> Result<(), StoreError> {
            let (k, checked) = from_checker.recv().map_err(|_| stopped())?;
            *in_flight -= 1;
            sink(k, checked?)
        };
        for (k, ids) in chunks.iter().enumerate() {
            // A stop asked of the process starts no new chunk.
            if dfck_core::stop::requested() {
                break;
            }
            let slots = read(store, ids);
            let failed = slots.is_err();
            if to_checker.send((k, slots)).is_err() {
                // The checker stopped on a failure: it is among the results still due.
                while in_flight > 0 {
                    take(&mut in_flight)?;
                }
                return Err(stopped());
            }
            in_flight += 1;
            while in_flight >= 2 || (failed && in_flight > 0) {
                take(&mut in_flight)?;
            }
        }
        drop(to_checker);
        while in_flight > 0 {
            take(&mut in_flight)?;
        }
        Ok(())
    })
}

/// [`run`] on the connection's thread alone.
fn in_turn(
    store: &dyn Store,
    chunks: &[&[String]],
    read: &Read<'_>,
    check: &Check<'_>,
    sink: &mut Sink<'_>,
) -> Result<(), StoreError> {
    for (k, ids) in chunks.iter().enumerate() {
        if dfck_core::stop::requested() {
            break;
        }
        let checked = check(ids, read(store, ids)?)?;
        sink(k, checked)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dfck_core::store::sqlite::SqliteStore;

    fn err(what: &str) -> StoreError {
        StoreError::Query {
            what: what.into(),
            reason: "test".into(),
        }
    }

    /// Runs 40 chunks of one id each; `fail_read` / `fail_check`: the chunk that fails
    /// there. The chunks the sink saw, and the run's error.
    fn run_with(fail_read: usize, fail_check: usize) -> (Vec<usize>, Option<String>) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sqlite/delta_k3.db");
        std::fs::copy(fixture, &db).unwrap();
        let store = SqliteStore::open_read_only(&db).unwrap();
        let ids: Vec<Vec<String>> = (0..40).map(|i| vec![i.to_string()]).collect();
        let chunks: Vec<&[String]> = ids.iter().map(Vec::as_slice).collect();
        let mut seen = Vec::new();
        let ran = run(
            &store,
            &chunks,
            &|_, ids| match ids[0].parse::<usize>().unwrap() {
                k if k == fail_read => Err(err("read")),
                _ => Ok(vec![Slot::Given(dfck_core::store::batch::ThreadRows {
                    thread_id: ids[0].clone(),
                    namespaces: Vec::new(),
                })]),
            },
            &|ids, _| {
                let k: usize = ids[0].parse().unwrap();
                // Checks take longer than reads now and then: the order still holds.
                if k % 7 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(3));
                }
                match k {
                    k if k == fail_check => Err(err("check")),
                    k => Ok(vec![Some((Vec::new(), k as u64))]),
                }
            },
            &mut |k, checked| {
                let counts: Vec<Option<u64>> =
                    checked.into_iter().map(|c| c.map(|(_, n)| n)).collect();
                assert_eq!(counts, vec![Some(k as u64)]);
                seen.push(k);
                Ok(())
            },
        );
        (seen, ran.err().map(|e| e.to_string()))
    }

    #[test]
    fn chunks_reach_the_sink_in_order_and_a_failure_after_every_chunk_before_it() {
        let (seen, e) = run_with(usize::MAX, usize::MAX);
        assert_eq!(seen, (0..40).collect::<Vec<_>>());
        assert_eq!(e, None);
        for at in [0, 1, 5, 21, 39] {
            let (seen, e) = run_with(at, usize::MAX);
            assert_eq!(seen, (0..at).collect::<Vec<_>>(), "read fails at {at}");
            assert!(e.unwrap().contains("read"));
            let (seen, e) = run_with(usize::MAX, at);
            assert_eq!(seen, (0..at).collect::<Vec<_>>(), "check fails at {at}");
            assert!(e.unwrap().contains("check"));
        }
    }
}
