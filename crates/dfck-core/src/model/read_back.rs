//! One walk over a thread loaded without its values ([`LoadedThread::load_bounded`] past its
//! budget): its checkpoints read back as the walk reaches them. Where the store reads several
//! checkpoints in one round trip ([`Store::reads_several_at_once`], PostgreSQL), a read also
//! brings the next checkpoints by id that the walk has not had yet, as many as fit in
//! [`AHEAD_BYTES`] by the sizes the load read them at, so a thread of thousands of
//! checkpoints costs tens of round trips, not thousands; memory follows that window, not the
//! thread.

use super::Checkpoint;
use super::thread::LoadedThread;
use crate::error::{Error, StoreError};
use crate::store::{CheckpointKey, CheckpointRow, Store};
use std::borrow::Cow;
use std::collections::HashMap;

/// Bytes of rows (as the load read them) a walk reads ahead of itself at most; a single
/// checkpoint may be larger, and is then read alone.
pub const AHEAD_BYTES: u64 = 8 << 20;

/// Checkpoints a walk reads ahead of itself at most.
const AHEAD_ROWS: usize = 64;

/// The read-back of one walk over `thread` (see the module header). Each checkpoint is had
/// once per walk; the walk goes in any order, and is fastest in id order.
pub struct ReadBack<'t> {
    thread: &'t LoadedThread,
    store: &'t dyn Store,
    /// Checkpoints this walk has had: never read ahead again.
    had: Vec<bool>,
    /// Rows read ahead of the walk, by node index.
    ahead: HashMap<usize, CheckpointRow>,
}

impl<'t> ReadBack<'t> {
    /// A walk over `thread`, reading from `store` what it does not hold.
    pub fn new(thread: &'t LoadedThread, store: &'t dyn Store) -> Self {
        ReadBack {
            thread,
            store,
            had: Vec::new(),
            ahead: HashMap::new(),
        }
    }

    /// Checkpoint `i` with `messages` standing in unvalidated, and its stored bytes
    /// ([`LoadedThread::checkpoint_lazy_messages`]).
    pub fn lazy_messages(
        &mut self,
        i: usize,
    ) -> Result<(Cow<'t, Checkpoint>, Option<Vec<u8>>), Error> {
        let t = self.thread;
        if t.values {
            return t.checkpoint_lazy_messages(self.store, i);
        }
        let row = self.row(i)?;
        t.lazy_messages_of(row)
    }

    /// The stored row of checkpoint `i`: read ahead, or read now with the next ones.
    fn row(&mut self, i: usize) -> Result<CheckpointRow, StoreError> {
        let t = self.thread;
        if self.had.is_empty() {
            self.had = vec![false; t.nodes.len()];
        }
        self.had[i] = true;
        if let Some(row) = self.ahead.remove(&i) {
            return Ok(row);
        }
        // What was read ahead and skipped goes: memory stays within one window.
        self.ahead.clear();
        if !self.store.reads_several_at_once() {
            return t.read_back(self.store, i);
        }
        // `i`, then the next checkpoints the walk has not had while their rows fit.
        let mut bytes = t.nodes[i].read_bytes;
        let mut window = vec![i];
        for j in (i + 1..t.nodes.len()).filter(|&j| !self.had[j]) {
            bytes = bytes.saturating_add(t.nodes[j].read_bytes);
            if window.len() == AHEAD_ROWS || bytes > AHEAD_BYTES {
                break;
            }
            window.push(j);
        }
        let keys: Vec<CheckpointKey> = window
            .iter()
            .map(|&j| CheckpointKey {
                thread_id: t.thread_id.clone(),
                checkpoint_ns: t.checkpoint_ns.clone(),
                checkpoint_id: t.nodes[j].id.clone(),
            })
            .collect();
        let mut wanted = None;
        let ahead = &mut self.ahead;
        self.store.checkpoints_in_window(&keys, &mut |row| {
            if row.thread_id != t.thread_id || row.checkpoint_ns != t.checkpoint_ns {
                return Ok(());
            }
            match t.index.get(&row.checkpoint_id) {
                Some(&j) if j == i => wanted = Some(row),
                Some(&j) if window.contains(&j) => {
                    ahead.insert(j, row);
                }
                _ => {}
            }
            Ok(())
        })?;
        wanted.ok_or_else(|| t.gone(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::thread::Metadata;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{
        CheckpointMetaRow, CheckpointWriteTotals, StoreInfo, WriteRow, WriteTotals, space,
    };
    use std::cell::Cell;

    /// A SQLite store that says it reads several checkpoints at once, and counts those reads.
    struct Batched<'a> {
        inner: &'a SqliteStore,
        reads: Cell<usize>,
        largest_read: Cell<usize>,
    }

    impl Store for Batched<'_> {
        fn info(&self) -> &StoreInfo {
            self.inner.info()
        }
        fn reads_several_at_once(&self) -> bool {
            true
        }
        fn checkpoints_in_window(
            &self,
            keys: &[CheckpointKey],
            f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
        ) -> Result<(), StoreError> {
            self.reads.set(self.reads.get() + 1);
            self.largest_read
                .set(self.largest_read.get().max(keys.len()));
            self.inner.checkpoints_at(keys, f)
        }
        fn scan_checkpoint_meta(
            &self,
            f: &mut dyn FnMut(CheckpointMetaRow) -> Result<(), StoreError>,
        ) -> Result<(), StoreError> {
            self.inner.scan_checkpoint_meta(f)
        }
        fn write_totals(&self) -> Result<(u64, u64), StoreError> {
            self.inner.write_totals()
        }
        fn write_totals_of(
            &self,
            threads: &[String],
            f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
        ) -> Result<(), StoreError> {
            self.inner.write_totals_of(threads, f)
        }
        fn space(&self) -> Result<space::StoreSpace, StoreError> {
            self.inner.space()
        }
        fn scan_write_channels(
            &self,
            f: &mut dyn FnMut(space::ChannelTotals) -> Result<(), StoreError>,
        ) -> Result<(), StoreError> {
            self.inner.scan_write_channels(f)
        }
        fn scan_thread_ids(
            &self,
            f: &mut dyn FnMut(String) -> Result<(), StoreError>,
        ) -> Result<(), StoreError> {
            self.inner.scan_thread_ids(f)
        }
        fn thread_ids_after(
            &self,
            after: Option<&str>,
            limit: usize,
        ) -> Result<Vec<String>, StoreError> {
            self.inner.thread_ids_after(after, limit)
        }
        fn thread_writes(&self, thread_id: &str, ns: &str) -> Result<Vec<WriteRow>, StoreError> {
            self.inner.thread_writes(thread_id, ns)
        }
        fn namespaces(&self, thread_id: &str) -> Result<Vec<String>, StoreError> {
            self.inner.namespaces(thread_id)
        }
        fn checkpoint_ids_with_prefix(
            &self,
            thread_id: &str,
            ns: &str,
            prefix: &str,
            limit: usize,
        ) -> Result<Vec<String>, StoreError> {
            self.inner
                .checkpoint_ids_with_prefix(thread_id, ns, prefix, limit)
        }
        fn checkpoints_with_prefix(
            &self,
            prefix: &str,
            limit: usize,
        ) -> Result<Vec<(String, String, String)>, StoreError> {
            self.inner.checkpoints_with_prefix(prefix, limit)
        }
        fn head_id(&self, thread_id: &str, ns: &str) -> Result<Option<String>, StoreError> {
            self.inner.head_id(thread_id, ns)
        }
        fn checkpoint(
            &self,
            thread_id: &str,
            ns: &str,
            checkpoint_id: &str,
        ) -> Result<Option<CheckpointRow>, StoreError> {
            self.inner.checkpoint(thread_id, ns, checkpoint_id)
        }
        fn metadata(
            &self,
            thread_id: &str,
            ns: &str,
            checkpoint_id: &str,
        ) -> Result<Option<Vec<u8>>, StoreError> {
            self.inner.metadata(thread_id, ns, checkpoint_id)
        }
        fn scan_thread(
            &self,
            thread_id: &str,
            ns: &str,
            f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
        ) -> Result<(), StoreError> {
            self.inner.scan_thread(thread_id, ns, f)
        }
        fn writes(
            &self,
            thread_id: &str,
            ns: &str,
            checkpoint_id: &str,
            channel: Option<&str>,
        ) -> Result<Vec<WriteRow>, StoreError> {
            self.inner.writes(thread_id, ns, checkpoint_id, channel)
        }
        fn write_totals_by_checkpoint(
            &self,
            thread_id: &str,
            ns: &str,
        ) -> Result<Vec<CheckpointWriteTotals>, StoreError> {
            self.inner.write_totals_by_checkpoint(thread_id, ns)
        }
    }

    /// Every walk order reads back exactly what point reads read; in id order, a thread of
    /// many checkpoints takes a few reads, never more rows at once than the window holds.
    #[test]
    fn a_walk_reads_ahead_and_gets_what_point_reads_get() {
        let (_dir, db) = crate::model::fixture_copy("full.db");
        let inner = SqliteStore::open_read_write(&db).unwrap();
        let store = Batched {
            inner: &inner,
            reads: Cell::new(0),
            largest_read: Cell::new(0),
        };
        let t = LoadedThread::load_bounded(&store, "t-fork", "", 0, Metadata::Whole).unwrap();
        assert!(
            !t.values,
            "loaded as structure: its checkpoints are read back"
        );
        let n = t.nodes.len();
        assert!(n > 10, "{n} checkpoints");
        let ascending: Vec<usize> = (0..n).collect();
        let mixed: Vec<usize> = (0..n).rev().chain([n / 2]).collect();
        for order in [ascending, mixed] {
            store.reads.set(0);
            let mut lazy = ReadBack::new(&t, &store);
            for &i in &order {
                let (want, want_raw) = t.checkpoint_lazy_messages(store.inner, i).unwrap();
                let (got, got_raw) = lazy.lazy_messages(i).unwrap();
                assert_eq!(format!("{got:?}"), format!("{want:?}"), "checkpoint {i}");
                assert_eq!(got_raw, want_raw, "checkpoint {i}");
            }
        }
        // In id order: one read brings them all.
        store.reads.set(0);
        let mut reads = ReadBack::new(&t, &store);
        for i in 0..n {
            reads.lazy_messages(i).unwrap();
        }
        assert_eq!(store.reads.get(), 1, "reads for {n} checkpoints");
        // Rows as large as half the window: two a read, whatever their count.
        let mut t = t;
        for node in t.nodes.iter_mut() {
            node.read_bytes = AHEAD_BYTES / 2;
        }
        store.reads.set(0);
        store.largest_read.set(0);
        let mut reads = ReadBack::new(&t, &store);
        for i in 0..n {
            reads.lazy_messages(i).unwrap();
        }
        assert_eq!(
            store.reads.get(),
            n.div_ceil(2),
            "reads for {n} checkpoints"
        );
        assert_eq!(store.largest_read.get(), 2);
    }
}
