//! Whole threads read together on SQLite ([`crate::store::Store::read_threads`],
//! [`crate::store::Store::read_ahead`]):
//! a batch of short threads costs two statements in one read transaction instead of three
//! statements, each its own read transaction, per thread. The rows are those the
//! per-thread reads give; a batch holds about a byte budget, and the threads past it are
//! read one by one as before. A dry run's batch read ahead keeps its read transaction open
//! until the next batch (or until it is forgotten), so every plan of the batch reads the
//! snapshot its rows came from.

use super::rows::{checkpoint_row, len_col, text_col, write_row};
use super::{CHECKPOINT_COLS, SqliteStore, q};
use crate::error::StoreError;
use crate::store::WriteTotals;
use crate::store::batch::{NamespaceRows, ReadAhead, ThreadRows, add_gone, row_bytes};
use std::collections::{HashMap, HashSet};

const WHAT: &str = "reading a batch of threads";

impl SqliteStore {
    /// Write totals per thread of `ids` (in any order, [`crate::store::Store::write_totals_of`]).
    pub(super) fn write_totals_in(
        &self,
        ids: &[String],
        f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "summing writes";
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT thread_id, count(*), coalesce(sum(length(value)), 0) FROM writes \
                 WHERE thread_id IN (SELECT value FROM json_each(?1)) GROUP BY thread_id",
            )
            .map_err(q(what))?;
        let mut rows = st
            .query([serde_json::Value::from(ids.to_vec()).to_string()])
            .map_err(q(what))?;
        while let Some(r) = rows.next().map_err(q(what))? {
            f(WriteTotals {
                thread_id: text_col(r, 0).map_err(q(what))?,
                writes: len_col(r, 1).map_err(q(what))?,
                bytes: len_col(r, 2).map_err(q(what))?,
            })?;
        }
        Ok(())
    }

    /// [`crate::store::Store::write_totals`]: one pass over the table in its own order.
    pub(super) fn write_totals_all(&self) -> Result<(u64, u64), StoreError> {
        let what = "summing writes";
        self.conn
            .query_row(
                "SELECT count(*), coalesce(sum(length(value)), 0) FROM writes",
                [],
                |r| Ok((len_col(r, 0)?, len_col(r, 1)?)),
            )
            .map_err(q(what))
    }

    /// The threads of `ids` read whole within about `budget` bytes (see
    /// [`crate::store::Store::read_threads`]): the threads whose rows were all read, and, when every
    /// thread was reached, the gone ones without namespaces.
    pub(super) fn read_thread_batch(
        &self,
        ids: &[String],
        budget: usize,
    ) -> Result<Vec<ThreadRows>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut held = 0;
        let (mut threads, mut cut) = self.batch_checkpoints(ids, budget, &mut held)?;
        cut |= self.batch_writes(&mut threads, budget, &mut held)?;
        if !cut {
            add_gone(&mut threads, ids);
        }
        Ok(threads)
    }

    /// The checkpoints of `ids` in key order, grouped by thread and namespace (threads in
    /// byte order of their ids, namespaces sorted); whether the budget cut the scan short
    /// (the thread it stopped in is left out).
    fn batch_checkpoints(
        &self,
        ids: &[String],
        budget: usize,
        held: &mut usize,
    ) -> Result<(Vec<ThreadRows>, bool), StoreError> {
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT {CHECKPOINT_COLS} FROM checkpoints \
                 WHERE thread_id IN (SELECT value FROM json_each(?1)) \
                 ORDER BY thread_id, checkpoint_ns, checkpoint_id"
            ))
            .map_err(q(WHAT))?;
        let list = serde_json::Value::from(ids.to_vec()).to_string();
        let mut rows = st.query([list]).map_err(q(WHAT))?;
        let mut threads: Vec<ThreadRows> = Vec::new();
        while let Some(r) = rows.next().map_err(q(WHAT))? {
            let row = checkpoint_row(r).map_err(q(WHAT))?;
            let new = threads.last().is_none_or(|t| t.thread_id != row.thread_id);
            if *held > budget {
                if !new {
                    threads.pop();
                }
                return Ok((threads, true));
            }
            *held += row_bytes(&row);
            if new {
                threads.push(ThreadRows {
                    thread_id: row.thread_id.clone(),
                    namespaces: Vec::new(),
                });
            }
            let Some(t) = threads.last_mut() else {
                continue;
            };
            match t.namespaces.last_mut() {
                Some(ns) if ns.checkpoint_ns == row.checkpoint_ns => ns.checkpoints.push(row),
                _ => t.namespaces.push(NamespaceRows {
                    checkpoint_ns: row.checkpoint_ns.clone(),
                    checkpoints: vec![row],
                    writes: Vec::new(),
                }),
            }
        }
        Ok((threads, false))
    }

    /// Attaches the pending writes of `threads` to their namespaces (writes of a namespace
    /// without checkpoints are not the thread's, as the per-thread reads go); whether the
    /// budget cut the scan short (then only the threads whose writes were all read stay).
    fn batch_writes(
        &self,
        threads: &mut Vec<ThreadRows>,
        budget: usize,
        held: &mut usize,
    ) -> Result<bool, StoreError> {
        if threads.is_empty() {
            return Ok(false);
        }
        let sql = format!(
            "SELECT checkpoint_id, task_id, {tp}, idx, channel, type, value, thread_id, \
             checkpoint_ns FROM writes WHERE thread_id IN (SELECT value FROM json_each(?1)) \
             ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
            tp = self.task_path_expr()
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(q(WHAT))?;
        let list = serde_json::Value::from(
            threads
                .iter()
                .map(|t| t.thread_id.clone())
                .collect::<Vec<_>>(),
        )
        .to_string();
        let mut rows = st.query([list]).map_err(q(WHAT))?;
        let at: HashMap<String, usize> = threads
            .iter()
            .enumerate()
            .map(|(i, t)| (t.thread_id.clone(), i))
            .collect();
        // A thread's writes come together: the threads passed are complete.
        let mut finished: HashSet<usize> = HashSet::new();
        let mut current: Option<usize> = None;
        while let Some(r) = rows.next().map_err(q(WHAT))? {
            let thread = text_col(r, 7).map_err(q(WHAT))?;
            let Some(&t) = at.get(&thread) else {
                continue;
            };
            if current != Some(t) {
                finished.extend(current.replace(t));
            }
            if *held > budget {
                let mut i = 0;
                threads.retain(|_| {
                    i += 1;
                    finished.contains(&(i - 1))
                });
                return Ok(true);
            }
            let ns = text_col(r, 8).map_err(q(WHAT))?;
            if let Some(n) = threads[t]
                .namespaces
                .iter_mut()
                .find(|n| n.checkpoint_ns == ns)
            {
                let w = write_row(r).map_err(q(WHAT))?;
                *held += w.value.len() + 64;
                n.writes.push(w);
            }
        }
        Ok(false)
    }

    /// [`crate::store::Store::read_ahead`]: the batch's rows, read in a read transaction that stays open
    /// while its threads are planned (none is opened inside a caller's transaction, a
    /// write group's); no ids: forgets them and ends that transaction.
    pub(super) fn read_batch_ahead(&self, ids: &[String], budget: usize) -> Result<(), StoreError> {
        if self.ahead_reading.replace(false) {
            self.conn
                .execute_batch("ROLLBACK")
                .map_err(q("ending a read transaction"))?;
        }
        let read = if ids.is_empty() {
            Vec::new()
        } else {
            if self.conn.is_autocommit() {
                self.conn
                    .execute_batch("BEGIN")
                    .map_err(q("starting a read transaction"))?;
                self.ahead_reading.set(true);
            }
            self.read_thread_batch(ids, budget)?
        };
        // SQLite reads values inside each checkpoint: a scan and a value scan are the same.
        *self.ahead.borrow_mut() = ReadAhead::new(read, false, !ids.is_empty());
        Ok(())
    }
}
