//! A cursor read a batch ahead, with each batch's own queries answered beside the next
//! fetch ([`PostgresStore::cursor_answered_ahead`]): the server runs the next `FETCH` while
//! the caller reads a batch, then the batch's queries, so neither side waits for the other
//! to finish a batch before it starts on the next.

use super::PostgresStore;
use crate::error::StoreError;
use futures_util::future::{join, try_join_all};
use std::future::Future;
use std::pin::Pin;
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

/// A request in flight on the connection.
type InFlight<'a> = Pin<Box<dyn Future<Output = Result<Vec<Row>, tokio_postgres::Error>> + 'a>>;

/// A query a batch asks for: SQL and its one TEXT parameter.
pub(super) type Ask = (String, String);

/// Reads a fetched batch and names the queries it needs.
type ReadBatch<'f> = dyn FnMut(&[Row]) -> Result<Vec<Ask>, StoreError> + 'f;

/// Takes the answers to a batch's queries.
type Answered<'f> = dyn FnMut(Vec<Vec<Row>>) -> Result<(), StoreError> + 'f;

impl PostgresStore {
    /// Reads `sql` through a server-side cursor, `batch` rows a fetch. `read` sees each
    /// batch while the next fetch is in flight (it must not query this connection: such a
    /// query fails) and names the queries the batch needs; those are sent at once and
    /// answered beside that fetch, and `answered` gets their rows in the order asked, with
    /// nothing in flight (it may query).
    pub(super) fn cursor_answered_ahead(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        batch: usize,
        read: &mut ReadBatch<'_>,
        answered: &mut Answered<'_>,
    ) -> Result<(), StoreError> {
        let n = self.cursor_seq.get() + 1;
        self.cursor_seq.set(n);
        let name = format!("dfck_cursor_{n}");
        let typed: Vec<(&(dyn ToSql + Sync), Type)> =
            params.iter().map(|p| (*p, Type::TEXT)).collect();
        self.not_busy(what)?;
        self.rt
            .block_on(self.client.execute_typed(
                &format!("DECLARE {name} NO SCROLL CURSOR FOR {sql}"),
                &typed,
            ))
            .map_err(|e| self.err(what, e))?;
        let fetch = format!("FETCH {batch} FROM {name}");
        let result = self.answer_batches(what, &fetch, batch, read, answered);
        if self.in_write.get() {
            self.to_close.borrow_mut().push(name);
        } else {
            let _ = self
                .rt
                .block_on(self.client.batch_execute(&format!("CLOSE {name}")));
        }
        result
    }

    /// The loop of [`Self::cursor_answered_ahead`].
    fn answer_batches(
        &self,
        what: &str,
        fetch: &str,
        batch: usize,
        read: &mut ReadBatch<'_>,
        answered: &mut Answered<'_>,
    ) -> Result<(), StoreError> {
        let request = || -> InFlight<'_> { Box::pin(self.client.query_typed(fetch, &[])) };
        let mut rows = self.rt.block_on(request()).map_err(|e| self.err(what, e))?;
        while !rows.is_empty() {
            // A short batch is the last: no round trip for the empty one.
            let mut next = (rows.len() == batch).then(request);
            if let Some(next) = next.as_mut() {
                self.send(next);
            }
            self.fetching_ahead.set(true);
            let asked = read(&rows);
            self.fetching_ahead.set(false);
            let asked = match asked {
                Ok(asked) => asked,
                Err(e) => {
                    // The batch in flight is read and dropped, so the connection stays usable.
                    if let Some(next) = next {
                        let _ = self.rt.block_on(next);
                    }
                    return Err(e);
                }
            };
            drop(rows);
            let typed: Vec<[(&(dyn ToSql + Sync), Type); 1]> = asked
                .iter()
                .map(|(_, param)| [(param as &(dyn ToSql + Sync), Type::TEXT)])
                .collect();
            let queries = asked
                .iter()
                .zip(&typed)
                .map(|((sql, _), typed)| self.client.query_typed(sql, typed));
            let (fetched, answers) = self.rt.block_on(join(
                async {
                    match next {
                        Some(next) => next.await.map(Some),
                        None => Ok(None),
                    }
                },
                try_join_all(queries),
            ));
            let answers = answers.map_err(|e| self.err(what, e))?;
            let fetched = fetched.map_err(|e| self.err(what, e))?;
            answered(answers)?;
            rows = fetched.unwrap_or_default();
        }
        Ok(())
    }

    /// Polls `request` once, so that it is queued, and lets the connection send it.
    fn send(&self, request: &mut InFlight<'_>) {
        self.rt.block_on(async {
            std::future::poll_fn(|cx| {
                let _ = request.as_mut().poll(cx);
                std::task::Poll::Ready(())
            })
            .await;
            tokio::task::yield_now().await;
        });
    }
}
