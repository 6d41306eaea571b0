//! Statements sent now and answered later: a group thread's `SAVEPOINT` and the `RELEASE`
//! (or `ROLLBACK TO`) that ends it need no answer before the next statement goes out, so
//! they cost no round trip of their own. A deferred statement is queued on the connection
//! when it is made, so every later statement follows it on the wire; its answer is checked
//! once it has come (free after any later statement was answered), and all answers are
//! checked before the transaction ends, so a failed one never passes for a commit (a
//! `COMMIT` of an aborted transaction rolls it back without an error).

use super::PostgresStore;
use crate::error::StoreError;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A statement sent and not yet answered: what it does, and its answer to come.
pub(super) struct Deferred {
    what: &'static str,
    answer: Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>,
}

impl PostgresStore {
    /// Sends `sql` (simple statements) without waiting for its answer.
    pub(super) fn send_deferred(&self, what: &'static str, sql: String) {
        let client = Arc::clone(&self.client);
        let mut answer: Pin<Box<dyn Future<Output = _> + Send>> =
            Box::pin(async move { client.batch_execute(&sql).await });
        // Polled once, the request is queued on the connection, ahead of any later one;
        // the connection task sends it the next time the runtime runs.
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        let sent = match answer.as_mut().poll(&mut cx) {
            Poll::Ready(r) => Box::pin(std::future::ready(r)),
            Poll::Pending => answer,
        };
        self.deferred
            .borrow_mut()
            .push(Deferred { what, answer: sent });
    }

    /// Checks the deferred statements already answered, in order (`wait`: every one,
    /// waiting for its answer); the first that failed is the error.
    pub(super) fn settle_deferred(&self, wait: bool) -> Result<(), StoreError> {
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        loop {
            let mut pending = self.deferred.borrow_mut();
            let Some(first) = pending.first_mut() else {
                return Ok(());
            };
            let what = first.what;
            let answer = if wait {
                self.rt.block_on(first.answer.as_mut())
            } else {
                match first.answer.as_mut().poll(&mut cx) {
                    Poll::Ready(r) => r,
                    Poll::Pending => return Ok(()),
                }
            };
            pending.remove(0);
            if let Err(e) = answer {
                // The rest answer in an aborted transaction: nothing more to learn.
                pending.clear();
                return Err(self.err(what, e));
            }
        }
    }
}
