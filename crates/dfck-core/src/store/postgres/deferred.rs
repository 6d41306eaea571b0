//! Statements sent now and answered later: a group thread's `SAVEPOINT` and the `RELEASE`
//! (or `ROLLBACK TO`) that ends it need no answer before the next statement goes out, so
//! they cost no round trip of their own. A deferred statement is queued on the connection
//! when it is made, so every later statement follows it on the wire, and a task of the
//! runtime reads its answer as it comes (the connection reads nothing further while an
//! answer waits to be taken); its answer is checked
//! once it has come (free after any later statement was answered), and all answers are
//! checked before the transaction ends, so a failed one never passes for a commit (a
//! `COMMIT` of an aborted transaction rolls it back without an error). A query may be sent
//! the same way, its rows read when the caller needs them ([`PostgresStore::query_later`]).

use super::PostgresStore;
use crate::error::StoreError;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::task::JoinHandle;
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

/// Rows sent for and not yet read ([`PostgresStore::query_later`]).
pub(super) type LaterRows<'a> = Box<dyn FnOnce() -> Result<Vec<Row>, StoreError> + 'a>;

/// A statement sent and not yet answered: what it does, and the task reading its answer.
pub(super) struct Deferred {
    what: &'static str,
    answer: JoinHandle<Result<(), tokio_postgres::Error>>,
}

impl PostgresStore {
    /// Sends `answer`'s request now (one poll queues it on the connection, ahead of any later
    /// one) and leaves the rest to a task of the runtime, which reads the answer as it comes
    /// while the caller's later statements run. Read by nobody, an answer would stop the
    /// connection from reading any later one: the driver hands each request its answer over
    /// a channel of one message.
    fn spawn_sent<T: Send + 'static>(
        &self,
        mut answer: Pin<Box<dyn Future<Output = T> + Send>>,
    ) -> JoinHandle<T> {
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        match answer.as_mut().poll(&mut cx) {
            Poll::Ready(r) => self.rt.spawn(std::future::ready(r)),
            Poll::Pending => self.rt.spawn(answer),
        }
    }

    /// The answer of a task of [`Self::spawn_sent`], waited for.
    fn joined<T>(&self, what: &str, task: JoinHandle<T>) -> Result<T, StoreError> {
        self.rt.block_on(task).map_err(|e| StoreError::Query {
            what: format!("{}: {what}", self.info.location),
            reason: e.to_string(),
        })
    }

    /// Sends `sql` (simple statements) without waiting for its answer.
    pub(super) fn send_deferred(&self, what: &'static str, sql: String) {
        let client = Arc::clone(&self.client);
        let answer = self.spawn_sent(Box::pin(async move { client.batch_execute(&sql).await }));
        self.deferred.borrow_mut().push(Deferred { what, answer });
    }

    /// `sql` with TEXT parameters, sent now (inside a write transaction prepared once, as
    /// [`Self::query_reused`] does) and read when the returned closure is called: its rows
    /// are the store's as it is now, whatever this connection sends meanwhile. Unread, the
    /// answer is dropped when it comes.
    pub(super) fn query_later(
        &self,
        what: &'static str,
        sql: &str,
        params: &[&str],
    ) -> Result<LaterRows<'_>, StoreError> {
        self.not_busy(what)?;
        let client = Arc::clone(&self.client);
        let params: Vec<String> = params.iter().map(|p| (*p).to_owned()).collect();
        let types = vec![Type::TEXT; params.len()];
        let answer: Pin<Box<dyn Future<Output = _> + Send>> =
            match self.reused_statement(what, sql, &types)? {
                Some(st) => Box::pin(async move {
                    let refs: Vec<&(dyn ToSql + Sync)> =
                        params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                    client.query(&st, &refs).await
                }),
                None => {
                    let sql = sql.to_owned();
                    Box::pin(async move {
                        let typed: Vec<(&(dyn ToSql + Sync), Type)> = params
                            .iter()
                            .map(|p| (p as &(dyn ToSql + Sync), Type::TEXT))
                            .collect();
                        client.query_typed(&sql, &typed).await
                    })
                }
            };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = self.spawn_sent(Box::pin(async move {
            let _ = tx.send(answer.await);
        }));
        // Only the tasks still running are kept: the list follows what is in flight, not
        // the threads read (a read-only run never ends a write transaction to join them).
        let mut later = self.later.borrow_mut();
        later.retain(|t| !t.is_finished());
        later.push(task);
        if crate::failpoint::Failpoints::from_env("read")
            .later_most()
            .is_some_and(|most| later.len() > most)
        {
            return Err(StoreError::Query {
                what: format!("{}: {what}", self.info.location),
                reason: format!("{} queries sent ahead at once", later.len()),
            });
        }
        drop(later);
        Ok(Box::new(move || {
            let answer = self.rt.block_on(rx).map_err(|e| StoreError::Query {
                what: format!("{}: {what}", self.info.location),
                reason: e.to_string(),
            })?;
            answer.map_err(|e| self.err(what, e))
        }))
    }

    /// Waits for every query sent ahead, read or not ([`Self::query_later`]).
    pub(super) fn join_later(&self) {
        let tasks = std::mem::take(&mut *self.later.borrow_mut());
        for task in tasks {
            let _ = self.rt.block_on(task);
        }
    }

    /// Checks the deferred statements already answered, in order (`wait`: every one,
    /// waiting for its answer); the first that failed is the error.
    pub(super) fn settle_deferred(&self, wait: bool) -> Result<(), StoreError> {
        loop {
            let first = {
                let mut pending = self.deferred.borrow_mut();
                match pending.first() {
                    Some(d) if wait || d.answer.is_finished() => pending.remove(0),
                    _ => return Ok(()),
                }
            };
            let failed = match self.joined(first.what, first.answer) {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => self.err(first.what, e),
                Err(e) => e,
            };
            // The rest answer in an aborted transaction: nothing more to learn.
            self.deferred.borrow_mut().clear();
            return Err(failed);
        }
    }
}
