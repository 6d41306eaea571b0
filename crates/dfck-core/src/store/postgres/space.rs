//! Space accounting and `reclaim` on PostgreSQL: per-table sizes with TOAST and indexes,
//! dead tuples, per-channel bytes summed in SQL, and `VACUUM (ANALYZE)` of the store's
//! tables (docs/space.md).

use super::PostgresStore;
use super::read::{get, nonneg};
use crate::error::StoreError;
use crate::store::WriteTotals;
use crate::store::space::{ChannelTotals, PG_TABLES, PgSpace, PgTableSpace};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;

/// How a `VACUUM` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgVacuumEnd {
    /// Every table vacuumed and analyzed.
    Done,
    /// Refused before anything ran, or a lock was not granted in time: the reason.
    Refused(String),
    /// A stop was asked ([`crate::stop`]): the server cancelled it, nothing changed in the
    /// table it was working on.
    Interrupted,
}

/// How long `VACUUM` waits for its table lock (another `VACUUM` or a schema change holds it).
const VACUUM_LOCK_TIMEOUT: &str = "10s";

fn int(r: &Row, i: usize, what: &str) -> Result<u64, StoreError> {
    r.try_get::<_, Option<i64>>(i)
        .map(|v| v.unwrap_or(0).max(0) as u64)
        .map_err(|e| StoreError::Query {
            what: what.to_owned(),
            reason: e.to_string(),
        })
}

fn text(r: &Row, i: usize, what: &str) -> Result<String, StoreError> {
    r.try_get::<_, Option<String>>(i)
        .map(Option::unwrap_or_default)
        .map_err(|e| StoreError::Query {
            what: what.to_owned(),
            reason: e.to_string(),
        })
}

impl PostgresStore {
    /// Row count and `blob` bytes of one table.
    pub(super) fn totals(&self, table: &'static str, what: &str) -> Result<(u64, u64), StoreError> {
        let sql = format!(
            "SELECT count(*)::int8, coalesce(sum(octet_length(blob)), 0)::int8 FROM {table}"
        );
        let rows = self.query(what, &sql, &[])?;
        let r = rows.first().ok_or_else(|| StoreError::Query {
            what: what.to_owned(),
            reason: "no row".into(),
        })?;
        Ok((nonneg(get(r, 0, what)?), nonneg(get(r, 1, what)?)))
    }

    /// Row counts and `blob` bytes per thread of one table, of `ids` only, in one statement.
    pub(super) fn totals_in(
        &self,
        table: &'static str,
        ids: &[String],
        f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "summing a batch's rows";
        let sql = format!(
            "SELECT thread_id, count(*)::int8, coalesce(sum(octet_length(blob)), 0)::int8 \
             FROM {table} WHERE {} GROUP BY thread_id",
            super::batch::IN_BATCH
        );
        let list = super::batch::json_list(ids.iter());
        for r in self.query(what, &sql, &[&list])? {
            f(WriteTotals {
                thread_id: get(&r, 0, what)?,
                writes: nonneg(get(&r, 1, what)?),
                bytes: nonneg(get(&r, 2, what)?),
            })?;
        }
        Ok(())
    }

    /// Whether `checkpoints.thread_id` sorts bytewise: its collation (the database's when
    /// it has none of its own) is `C`, `POSIX` or `C.UTF-8` of the C library.
    pub(super) fn thread_ids_bytewise(&self) -> bool {
        let sql = "SELECT CASE WHEN co.collname = 'default' THEN \
              (SELECT CASE WHEN coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') = 'c' \
               THEN d.datcollate END FROM pg_database d WHERE d.datname = current_database()) \
              WHEN co.collprovider = 'c' THEN co.collcollate END \
            FROM pg_attribute a JOIN pg_collation co ON co.oid = a.attcollation \
            WHERE a.attrelid = to_regclass('checkpoints') AND a.attname = 'thread_id'";
        let name = self
            .query("reading the thread id collation", sql, &[])
            .ok()
            .and_then(|rows| rows.first().and_then(|r| r.get::<_, Option<String>>(0)));
        matches!(name.as_deref(), Some("C" | "POSIX" | "C.UTF-8" | "C.utf8"))
    }

    /// Sizes and tuple counts of the store's tables (those that exist), resolved through the
    /// session's `search_path`.
    pub fn pg_space(&self) -> Result<PgSpace, StoreError> {
        let what = "measuring the tables";
        let sql = "SELECT coalesce(pg_total_relation_size(c.oid), 0)::int8, \
            coalesce(pg_relation_size(c.oid), 0)::int8, \
            coalesce(CASE WHEN c.reltoastrelid <> 0 THEN pg_total_relation_size(c.reltoastrelid) END, 0)::int8, \
            coalesce(pg_indexes_size(c.oid), 0)::int8, \
            coalesce(s.n_live_tup, 0)::int8, coalesce(s.n_dead_tup, 0)::int8 \
            FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid \
            WHERE c.oid = to_regclass($1)";
        let mut out = PgSpace::default();
        for table in PG_TABLES {
            let rows = self.query(what, sql, &[&table])?;
            let Some(r) = rows.first() else { continue };
            let t = PgTableSpace {
                table: table.to_owned(),
                total_bytes: int(r, 0, what)?,
                heap_bytes: int(r, 1, what)?,
                toast_bytes: int(r, 2, what)?,
                index_bytes: int(r, 3, what)?,
                live_tuples: int(r, 4, what)?,
                dead_tuples: int(r, 5, what)?,
            };
            out.total_bytes += t.total_bytes;
            out.tables.push(t);
        }
        Ok(out)
    }

    /// `VACUUM (ANALYZE)` of the store's tables, outside any transaction. Refused, with the
    /// reason, when the role may not vacuum a table (PostgreSQL would skip it with a mere
    /// warning) or when a table lock is not granted within [`VACUUM_LOCK_TIMEOUT`].
    pub fn vacuum_analyze(&self) -> Result<PgVacuumEnd, StoreError> {
        let what = "checking who may vacuum the tables";
        let sql = "SELECT c.oid::regclass::text, \
            (pg_has_role(c.relowner, 'USAGE') \
             OR coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false) \
             OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')) \
            FROM pg_class c WHERE c.oid = to_regclass($1)";
        let mut names = Vec::new();
        for table in PG_TABLES {
            let rows = self.query(what, sql, &[&table])?;
            let Some(r) = rows.first() else { continue };
            let name = text(r, 0, what)?;
            let allowed: bool = r
                .try_get::<_, Option<bool>>(1)
                .ok()
                .flatten()
                .unwrap_or(false);
            if !allowed {
                return Ok(PgVacuumEnd::Refused(format!(
                    "this role may not vacuum {name}: VACUUM needs the table's owner (or a superuser, or the database owner); connect as that role"
                )));
            }
            names.push(name);
        }
        if names.is_empty() {
            return Ok(PgVacuumEnd::Refused(
                "none of the store's tables was found in the search path".into(),
            ));
        }
        // Each setting alone: several statements in one message would form a transaction
        // block, where VACUUM cannot run.
        for set in [
            format!("SET lock_timeout = '{VACUUM_LOCK_TIMEOUT}'"),
            "SET statement_timeout = 0".to_owned(),
        ] {
            self.rt
                .block_on(self.client.batch_execute(&set))
                .map_err(|e| self.err("preparing the session for VACUUM", e))?;
        }
        // The names come from `regclass` output: quoted by the server where needed.
        let sql = format!("VACUUM (ANALYZE) {}", names.join(", "));
        let r = self.vacuum_until_stopped(&sql)?;
        let _ = self.rt.block_on(self.client.batch_execute(&format!(
            "SET lock_timeout = 0; SET statement_timeout = {}",
            super::STATEMENT_TIMEOUT_MS
        )));
        match r {
            Ok(()) => Ok(PgVacuumEnd::Done),
            Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                Ok(PgVacuumEnd::Refused(format!(
                    "another session (a VACUUM, autovacuum or a schema change) held a table lock for {VACUUM_LOCK_TIMEOUT}; re-run when it is done"
                )))
            }
            Err(e) if e.code() == Some(&SqlState::QUERY_CANCELED) && crate::stop::requested() => {
                Ok(PgVacuumEnd::Interrupted)
            }
            Err(e) => Err(self.err("vacuuming the tables", e)),
        }
    }

    /// Runs `sql` (a `VACUUM`), and when a stop is asked meanwhile, has the server cancel it
    /// (`pg_cancel_backend` from a connection of its own: this one is busy).
    fn vacuum_until_stopped(
        &self,
        sql: &str,
    ) -> Result<Result<(), tokio_postgres::Error>, StoreError> {
        let what = "reading this session's process id";
        let rows = self.query(what, "SELECT pg_backend_pid()::text", &[])?;
        let pid = rows.first().map(|r| text(r, 0, what)).transpose()?;
        let mut run = std::pin::pin!(self.client.batch_execute(sql));
        let mut cancelled = false;
        loop {
            let tick = self.rt.block_on(async {
                tokio::time::timeout(std::time::Duration::from_millis(100), run.as_mut()).await
            });
            match tick {
                Ok(r) => return Ok(r),
                Err(_) if crate::stop::requested() && !cancelled => {
                    cancelled = true;
                    if let Some(pid) = &pid {
                        let (url, schema) = &*self.reconnect;
                        let other = PostgresStore::connect(url, schema.as_deref())?;
                        other.query(
                            "cancelling the VACUUM",
                            "SELECT pg_cancel_backend($1::int)",
                            &[pid],
                        )?;
                    }
                }
                Err(_) => {}
            }
        }
    }

    /// Streams pending-write bytes per (thread, channel).
    pub(super) fn scan_write_channels_pg(
        &self,
        f: &mut dyn FnMut(ChannelTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "summing pending writes by channel";
        self.cursor(
            what,
            "SELECT thread_id, channel, coalesce(sum(octet_length(blob)), 0)::int8 \
             FROM checkpoint_writes GROUP BY thread_id, channel ORDER BY thread_id, channel",
            &[],
            2000,
            &mut |r| {
                f(ChannelTotals {
                    thread_id: text(r, 0, what)?,
                    channel: text(r, 1, what)?,
                    values_bytes: 0,
                    writes_bytes: int(r, 2, what)?,
                })
            },
        )
    }

    /// Streams stored-value bytes per (thread, channel): every blob, plus the values stored
    /// inline in the checkpoint JSONB (their text length).
    pub(super) fn scan_value_channels_pg(
        &self,
        f: &mut dyn FnMut(ChannelTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "summing stored values by channel";
        self.cursor(
            what,
            "SELECT thread_id, channel, sum(bytes)::int8 FROM ( \
                SELECT thread_id, channel, coalesce(octet_length(blob), 0) AS bytes \
                FROM checkpoint_blobs \
                UNION ALL \
                SELECT c.thread_id, kv.key, octet_length(kv.value::text) \
                FROM checkpoints c CROSS JOIN LATERAL jsonb_each( \
                    CASE WHEN jsonb_typeof(c.checkpoint -> 'channel_values') = 'object' \
                    THEN c.checkpoint -> 'channel_values' ELSE '{}'::jsonb END) kv \
             ) u GROUP BY thread_id, channel ORDER BY thread_id, channel",
            &[],
            2000,
            &mut |r| {
                f(ChannelTotals {
                    thread_id: text(r, 0, what)?,
                    channel: text(r, 1, what)?,
                    values_bytes: int(r, 2, what)?,
                    writes_bytes: 0,
                })
            },
        )
    }
}

impl PostgresStore {
    /// One page of [`crate::store::Store::thread_ids_after`].
    pub(super) fn thread_ids_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let what = "listing threads";
        // Every parameter goes as text (`PostgresStore::query`).
        let limit = limit.to_string();
        // Two statements, so that the page seeks the index from `after`.
        let rows = match after {
            None => self.query(
                what,
                "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id LIMIT $1::text::bigint",
                &[&limit],
            )?,
            Some(a) => self.query(
                what,
                "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > $1 \
                 ORDER BY thread_id LIMIT $2::text::bigint",
                &[&a, &limit],
            )?,
        };
        rows.iter().map(|r| get(r, 0, what)).collect()
    }
}
