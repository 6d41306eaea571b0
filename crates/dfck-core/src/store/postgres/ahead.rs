//! A cursor read a batch ahead, with each batch's own queries answered beside the next
//! fetch ([`PostgresStore::cursor_answered_ahead`]): the server runs the next `FETCH` while
//! the caller reads a batch, then the batch's queries; only while the caller hands a batch
//! on (with nothing in flight, so that it may query) does the server wait. Also the request
//! sent ahead ([`Fetch`], [`PostgresStore::send`]) that [`PostgresStore::cursor_ahead`] uses.

use super::PostgresStore;
use crate::error::StoreError;
use futures_util::future::{MaybeDone, join, maybe_done, try_join_all};
use std::future::Future;
use std::pin::Pin;
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

/// A request sent ahead: its answer is kept if it comes at the first poll (a closed
/// connection answers at once), so that it is never polled again once done.
pub(super) type Fetch<'a> =
    MaybeDone<Pin<Box<dyn Future<Output = Result<Vec<Row>, tokio_postgres::Error>> + 'a>>>;

/// A query a batch asks for: SQL and its one TEXT parameter.
pub(super) type Ask = (String, String);

/// Reads a fetched batch and names the queries it needs.
type ReadBatch<'f> = dyn FnMut(&[Row]) -> Result<Vec<Ask>, StoreError> + 'f;

/// Takes the answers to a batch's queries.
type Answered<'f> = dyn FnMut(Vec<Vec<Row>>) -> Result<(), StoreError> + 'f;

impl PostgresStore {
    /// Reads `sql` through a server-side cursor, `batch` rows a fetch. `read` sees each
    /// batch while the next fetch is in flight (none after a short batch, the last; it must
    /// not query this connection: such a query fails) and names the queries the batch needs;
    /// those are sent at once and answered beside that fetch, and `answered` gets their rows
    /// in the order asked, with nothing in flight (it may query). Errors of those queries are
    /// labelled `what`.
    pub(super) fn cursor_answered_ahead(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        batch: usize,
        read: &mut ReadBatch<'_>,
        answered: &mut Answered<'_>,
    ) -> Result<(), StoreError> {
        let name = self.cursor_name();
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
        self.close_cursor(name);
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
        let request = || -> Fetch<'_> { maybe_done(Box::pin(self.client.query_typed(fetch, &[]))) };
        let mut rows = self
            .rt
            .block_on(self.client.query_typed(fetch, &[]))
            .map_err(|e| self.err(what, e))?;
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
                    if let Some(next) = next.as_mut() {
                        self.rt.block_on(next);
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
            let ((), answers) = self.rt.block_on(join(
                async {
                    if let Some(next) = next.as_mut() {
                        next.await;
                    }
                },
                try_join_all(queries),
            ));
            // A failed fetch aborts the transaction, and the queries after it fail for that
            // reason: its own error is the one to give.
            let fetched = match next.as_mut() {
                Some(next) => Some(self.answer(what, next)?),
                None => None,
            };
            let answers = answers.map_err(|e| self.err(what, e))?;
            answered(answers)?;
            rows = fetched.unwrap_or_default();
        }
        Ok(())
    }

    /// Polls `request` once, so that it is queued, and lets the connection send it.
    pub(super) fn send(&self, request: &mut Fetch<'_>) {
        self.rt.block_on(async {
            std::future::poll_fn(|cx| {
                let _ = Pin::new(&mut *request).poll(cx);
                std::task::Poll::Ready(())
            })
            .await;
            tokio::task::yield_now().await;
        });
    }

    /// The answer to `request`, waited for; an answer already taken is an error, not a
    /// poll of a finished request.
    pub(super) fn answer(
        &self,
        what: &str,
        request: &mut Fetch<'_>,
    ) -> Result<Vec<Row>, StoreError> {
        if !matches!(request, MaybeDone::Gone) {
            self.rt.block_on(&mut *request);
        }
        match Pin::new(request).take_output() {
            Some(answer) => answer.map_err(|e| self.err(what, e)),
            None => Err(StoreError::Query {
                what: format!("{}: {what}", self.info.location),
                reason: "a fetch's answer was taken twice".into(),
            }),
        }
    }
}
