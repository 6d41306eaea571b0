//! The worker pool: a list of items worked on by `jobs` OS threads, each over its own
//! connection. The calling thread works too, on the connection it already has; every extra
//! worker opens one. Items are handed out in order; results come back in item order, all at
//! once or streamed to a sink as they complete. The first error stops every worker (items
//! already started finish) and is returned.
//! `verify --jobs` and the write engine's `--jobs` both run on it. With one connection,
//! [`two_stage`] splits each item's work over the connection's thread and a helper.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Connections each of `count` items may use when they run on `jobs` connections: the
/// connections left over once every item has its worker, shared out evenly (at least one).
pub fn connections_per_item(count: usize, jobs: usize) -> usize {
    (jobs / count.max(1)).max(1)
}

/// Works `work(connection, index)` for every index in `0..count` on `jobs` workers.
///
/// `first` is the caller's connection; `open` makes one for each extra worker, inside that
/// worker's thread (so connections need not be `Send`). `jobs` is clamped to `1..=count`.
pub fn run<C, O, T, E>(
    count: usize,
    jobs: usize,
    first: &C,
    open: &(dyn Fn() -> Result<O, E> + Sync),
    work: &(dyn Fn(&C, usize) -> Result<T, E> + Sync),
) -> Result<Vec<T>, E>
where
    C: ?Sized,
    O: Borrow<C>,
    T: Send,
    E: Send,
{
    let mut out = Vec::with_capacity(count);
    run_ordered(count, jobs, first, open, work, &mut |_, t| {
        out.push(t);
        Ok(())
    })?;
    Ok(out)
}

/// Results not yet handed over (finished before an earlier one), the next index due, and the
/// sink they go to.
type Ready<'a, T, E> = (
    BTreeMap<usize, T>,
    usize,
    &'a mut (dyn FnMut(usize, T) -> Result<(), E> + Send),
);

/// [`run`] handing each result to `sink` in index order as soon as every earlier one has
/// been handed over, so a caller that streams results holds only those finished out of
/// order (about one per worker), never all of them. A sink error stops the work like a
/// work error.
pub fn run_ordered<C, O, T, E>(
    count: usize,
    jobs: usize,
    first: &C,
    open: &(dyn Fn() -> Result<O, E> + Sync),
    work: &(dyn Fn(&C, usize) -> Result<T, E> + Sync),
    sink: &mut (dyn FnMut(usize, T) -> Result<(), E> + Send),
) -> Result<(), E>
where
    C: ?Sized,
    O: Borrow<C>,
    T: Send,
    E: Send,
{
    let next = Mutex::new(0usize);
    let ready: Mutex<Ready<'_, T, E>> = Mutex::new((BTreeMap::new(), 0, sink));
    let failure: Mutex<Option<E>> = Mutex::new(None);
    let fail = |e: E| {
        if let Ok(mut f) = failure.lock() {
            f.get_or_insert(e);
        }
    };
    let worker = |conn: &C| loop {
        let i = {
            let Ok(mut n) = next.lock() else { return };
            let i = *n;
            *n += 1;
            i
        };
        // A stop asked of the process starts no new item: the results are then the items
        // started, a prefix of `0..count`.
        if i >= count
            || crate::stop::requested()
            || failure.lock().map(|f| f.is_some()).unwrap_or(true)
        {
            return;
        }
        match work(conn, i) {
            Ok(t) => {
                let Ok(mut guard) = ready.lock() else { return };
                let (pending, due, sink) = &mut *guard;
                pending.insert(i, t);
                while let Some(t) = pending.remove(due) {
                    let at = *due;
                    *due += 1;
                    if let Err(e) = sink(at, t) {
                        fail(e);
                        return;
                    }
                }
            }
            Err(e) => {
                fail(e);
                return;
            }
        }
    };
    let jobs = jobs.max(1).min(count.max(1));
    std::thread::scope(|scope| {
        for _ in 1..jobs {
            scope.spawn(|| match open() {
                Ok(c) => worker(c.borrow()),
                Err(e) => fail(e),
            });
        }
        worker(first);
    });
    match failure.into_inner().ok().flatten() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Runs items `0..count` in two stages: `first` on the calling thread (it may use what only
/// that thread holds, a connection), `second` on a helper thread while the caller goes on
/// with the next item, then `last` on the calling thread, in item order. At most two items
/// are in flight. The first error, in item order, stops the run after every earlier item's
/// `last`; with `stops`, a stop asked of the process starts no new item. Without a helper
/// thread, each item goes through the three in turn. `stopped`: the error of a helper that
/// went away.
pub fn two_stage<A, B, E>(
    count: usize,
    stops: bool,
    first: &mut dyn FnMut(usize) -> Result<A, E>,
    second: &(dyn Fn(usize, A) -> Result<B, E> + Sync),
    last: &mut dyn FnMut(usize, B) -> Result<(), E>,
    stopped: &dyn Fn() -> E,
) -> Result<(), E>
where
    A: Send,
    B: Send,
    E: Send,
{
    std::thread::scope(|scope| {
        let (to_helper, inbox) = std::sync::mpsc::sync_channel::<(usize, Result<A, E>)>(1);
        let (outbox, from_helper) = std::sync::mpsc::channel::<(usize, Result<B, E>)>();
        let helper = std::thread::Builder::new()
            .name("dfck-stage".into())
            .spawn_scoped(scope, move || {
                for (k, a) in inbox {
                    let b = a.and_then(|a| second(k, a));
                    let failed = b.is_err();
                    if outbox.send((k, b)).is_err() || failed {
                        return;
                    }
                }
            });
        if helper.is_err() {
            drop(to_helper);
            for k in 0..count {
                if stops && crate::stop::requested() {
                    break;
                }
                let b = second(k, first(k)?)?;
                last(k, b)?;
            }
            return Ok(());
        }
        let mut in_flight = 0usize;
        let mut take = |in_flight: &mut usize| -> Result<(), E> {
            let (k, b) = from_helper.recv().map_err(|_| stopped())?;
            *in_flight -= 1;
            last(k, b?)
        };
        for k in 0..count {
            if stops && crate::stop::requested() {
                break;
            }
            let a = first(k);
            let failed = a.is_err();
            if to_helper.send((k, a)).is_err() {
                // The helper stopped on a failure: it is among the results still due.
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
        drop(to_helper);
        while in_flight > 0 {
            take(&mut in_flight)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_item_order_and_the_first_error_wins() {
        let open = || Ok::<u32, String>(7);
        let out = run(50, 4, &0u32, &open, &|_, i| Ok::<_, String>(i * 2)).unwrap();
        assert_eq!(out, (0..50).map(|i| i * 2).collect::<Vec<_>>());
        let e = run(50, 1, &0u32, &open, &|_, i| {
            if i == 3 {
                Err(format!("item {i}"))
            } else {
                Ok(i)
            }
        })
        .unwrap_err();
        assert_eq!(e, "item 3");
        let fails = || Err::<u32, String>("no connection".into());
        let e = run(5, 3, &0u32, &fails, &|_, i| Ok::<_, String>(i)).unwrap_err();
        assert_eq!(e, "no connection");
    }

    #[test]
    fn ordered_results_reach_the_sink_in_item_order_and_a_sink_error_stops() {
        let open = || Ok::<u32, String>(7);
        let mut seen = Vec::new();
        run_ordered(
            200,
            4,
            &0u32,
            &open,
            &|_, i| {
                // Later items finish first now and then: the sink still sees item order.
                if i % 7 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Ok::<_, String>(i)
            },
            &mut |i, t| {
                assert_eq!(i, t);
                seen.push(t);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, (0..200).collect::<Vec<_>>());
        let mut handed = 0;
        let e = run_ordered(
            100,
            2,
            &0u32,
            &open,
            &|_, i| Ok::<_, String>(i),
            &mut |i, _| {
                handed += 1;
                if i == 10 {
                    Err("sink full".to_string())
                } else {
                    Ok(())
                }
            },
        )
        .unwrap_err();
        assert_eq!(e, "sink full");
        assert!(handed <= 20, "the work stopped soon after: {handed}");
    }

    #[test]
    fn spare_connections_go_to_the_items() {
        assert_eq!(connections_per_item(1, 1), 1);
        assert_eq!(connections_per_item(1, 4), 4);
        assert_eq!(connections_per_item(2, 5), 2);
        assert_eq!(connections_per_item(3, 4), 1);
        assert_eq!(connections_per_item(10, 4), 1);
        assert_eq!(connections_per_item(0, 3), 3);
    }

    /// 40 items through [`two_stage`]; `fail_first` / `fail_second`: the item that fails
    /// there. The items `last` saw, and the run's error.
    fn staged(fail_first: usize, fail_second: usize) -> (Vec<usize>, Option<String>) {
        let mut seen = Vec::new();
        let ran = two_stage(
            40,
            true,
            &mut |k| match k == fail_first {
                true => Err(format!("first {k}")),
                false => Ok(k * 2),
            },
            &|k, a| {
                // The helper is slower than the caller now and then: the order still holds.
                if k % 7 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(3));
                }
                match k == fail_second {
                    true => Err(format!("second {k}")),
                    false => Ok(a + 1),
                }
            },
            &mut |k, b| {
                assert_eq!(b, k * 2 + 1);
                seen.push(k);
                Ok(())
            },
            &|| "helper gone".to_string(),
        );
        (seen, ran.err())
    }

    #[test]
    fn two_stages_keep_item_order_and_a_failure_comes_after_every_item_before_it() {
        assert_eq!(staged(99, 99), ((0..40).collect(), None));
        for at in [0, 1, 5, 21, 39] {
            assert_eq!(
                staged(at, 99),
                ((0..at).collect(), Some(format!("first {at}")))
            );
            assert_eq!(
                staged(99, at),
                ((0..at).collect(), Some(format!("second {at}")))
            );
        }
    }
}
