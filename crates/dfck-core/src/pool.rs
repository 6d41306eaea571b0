//! The worker pool: a list of items worked on by `jobs` OS threads, each over its own
//! connection. The calling thread works too, on the connection it already has; every extra
//! worker opens one. Items are handed out in order; results come back in item order. The
//! first error stops every worker (items already started finish) and is returned.
//! `verify --jobs` and the write engine's `--jobs` both run on it.

use std::borrow::Borrow;
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
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<(usize, T)>> = Mutex::new(Vec::new());
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
        if i >= count || failure.lock().map(|f| f.is_some()).unwrap_or(true) {
            return;
        }
        match work(conn, i) {
            Ok(t) => {
                if let Ok(mut r) = results.lock() {
                    r.push((i, t));
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
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|r| r.0);
    Ok(results.into_iter().map(|(_, t)| t).collect())
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
    fn spare_connections_go_to_the_items() {
        assert_eq!(connections_per_item(1, 1), 1);
        assert_eq!(connections_per_item(1, 4), 4);
        assert_eq!(connections_per_item(2, 5), 2);
        assert_eq!(connections_per_item(3, 4), 1);
        assert_eq!(connections_per_item(10, 4), 1);
        assert_eq!(connections_per_item(0, 3), 3);
    }
}
