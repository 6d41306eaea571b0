//! The threads a run works on ([`Selection`]): the named ones, listed once and checked to
//! exist, or every thread of the store, read a page at a time as the run goes so that no
//! list of a whole store's threads is held (docs/write-engine.md, "Threads").

use crate::error::Error;
use crate::failpoint::Failpoints;
use crate::progress::Progress;
use crate::store::{PlanStore, THREAD_PAGE, for_each_page};

/// The threads of one run.
pub enum Selection {
    /// Exactly these, in this order.
    Listed(Vec<String>),
    /// Every thread of the store, in pages of this many ids.
    All(usize),
}

impl Selection {
    /// `threads` as they are (`exact`), the named ones checked to exist
    /// ([`PlanStore::list_threads`]), or every thread when none are named.
    pub fn of<C: PlanStore + ?Sized>(
        conn: &C,
        threads: &[String],
        exact: bool,
    ) -> Result<Self, Error> {
        Ok(if exact {
            Selection::Listed(threads.to_vec())
        } else if !threads.is_empty() {
            Selection::Listed(conn.list_threads(threads)?)
        } else {
            Selection::All(Failpoints::from_env("list").thread_page(THREAD_PAGE))
        })
    }

    /// Hands `f` the threads, a page at a time (the listed ones in one).
    pub fn each<C: PlanStore + ?Sized>(
        &self,
        conn: &C,
        f: &mut dyn FnMut(&[String]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        match self {
            Selection::Listed(ids) => f(ids),
            Selection::All(size) => for_each_page(|a, n| conn.thread_page(a, n), *size, f),
        }
    }

    /// How many threads, where `progress` shows a total: the listed ones, or every thread
    /// counted a page at a time; `None` when it shows none.
    pub fn total<C: PlanStore + ?Sized>(
        &self,
        conn: &C,
        progress: &dyn Progress,
    ) -> Result<Option<u64>, Error> {
        match self {
            Selection::Listed(ids) => Ok(Some(ids.len() as u64)),
            Selection::All(_) if !progress.wants_total() => Ok(None),
            Selection::All(_) => {
                let mut n = 0u64;
                self.each(conn, &mut |page| {
                    n += page.len() as u64;
                    Ok(())
                })?;
                Ok(Some(n))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{ReadOnly, Store, for_each_page};

    #[test]
    fn pages_hand_over_every_id_once_in_order_however_they_fall() {
        let all: Vec<String> = (0..7).map(|i| format!("t{i}")).collect();
        for size in 1..=8 {
            let (mut seen, mut pages, mut reads) = (Vec::new(), 0, 0);
            let page = |after: Option<&str>, n: usize| {
                reads += 1;
                Ok(all
                    .iter()
                    .filter(|t| after.is_none_or(|a| t.as_str() > a))
                    .take(n)
                    .cloned()
                    .collect())
            };
            for_each_page::<crate::error::Error>(page, size, |ids| {
                assert!(ids.len() <= size);
                pages += 1;
                seen.extend_from_slice(ids);
                Ok(())
            })
            .unwrap();
            assert_eq!(seen, all, "pages of {size}");
            assert_eq!(pages, all.len().div_ceil(size), "pages of {size}");
            // A last full page takes one more read to find nothing after it.
            assert_eq!(reads, all.len() / size + 1, "pages of {size}");
        }
    }

    #[test]
    fn a_store_read_in_pages_lists_every_thread_its_scan_does() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/sqlite/retention.db");
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("retention.db");
        std::fs::copy(&fixture, &copy).unwrap();
        if fixture.with_extension("db-wal").exists() {
            std::fs::copy(
                fixture.with_extension("db-wal"),
                copy.with_extension("db-wal"),
            )
            .unwrap();
        }
        let store = SqliteStore::open_read_only(&copy).unwrap();
        let mut scanned = Vec::new();
        store
            .scan_thread_ids(&mut |t| {
                scanned.push(t);
                Ok(())
            })
            .unwrap();
        assert!(scanned.len() >= 3, "{scanned:?}");
        let conn = ReadOnly(&store);
        for size in [1, 2, 3, THREAD_PAGE] {
            let (mut paged, mut pages) = (Vec::new(), 0);
            Selection::All(size)
                .each(&conn, &mut |ids| {
                    pages += 1;
                    paged.extend_from_slice(ids);
                    Ok(())
                })
                .unwrap();
            assert_eq!(paged, scanned, "pages of {size}");
            assert_eq!(pages, scanned.len().div_ceil(size), "pages of {size}");
        }
        let named = ["b".to_owned(), scanned[0].clone()];
        assert!(Selection::of(&conn, &named, false).is_err());
        let one = Selection::of(&conn, &named[1..], false).unwrap();
        assert!(matches!(one, Selection::Listed(ref v) if v == &named[1..]));
    }
}
