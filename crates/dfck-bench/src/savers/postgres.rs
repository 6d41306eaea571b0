//! The PostgreSQL backend: a native `PostgresSaver` — `setup()`'s migrations (recorded in
//! `checkpoint_migrations`), `put` as the blob upserts of the channels in `new_versions` that are
//! not inline primitives plus the JSONB checkpoint upsert (`type` left NULL, `writes` never in
//! metadata), `put_writes` as `ON CONFLICT DO NOTHING` inserts. Statements of one call are
//! pipelined on an autocommit connection, as psycopg's pipeline mode does. Each case writes a
//! thread of its own and deletes only that thread.

use super::{SaverError, WriteRecord};
use dfck_core::store::postgres::describe_error;
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

/// Connect timeout unless the URL sets one.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

const UPSERT_BLOB: &str = "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) \
     VALUES ($1, '', $2, $3, $4, $5) ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING";
const UPSERT_CHECKPOINT: &str = "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, \
     parent_checkpoint_id, checkpoint, metadata) VALUES ($1, '', $2, $3, $4, $5) \
     ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET checkpoint = EXCLUDED.checkpoint, \
     metadata = EXCLUDED.metadata";
const INSERT_WRITE: &str = "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, \
     task_path, idx, channel, type, blob) VALUES ($1, '', $2, $3, $4, $5, $6, $7, $8) \
     ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING";

/// Per-table sizes of one thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PgStats {
    /// Checkpoint rows.
    pub checkpoint_rows: u64,
    /// Σ `octet_length(checkpoint::text) + octet_length(metadata::text)`.
    pub checkpoint_bytes: u64,
    /// `checkpoint_blobs` rows.
    pub blob_rows: u64,
    /// Σ `octet_length(blob)`.
    pub blob_bytes: u64,
    /// `checkpoint_writes` rows.
    pub write_rows: u64,
    /// Σ `octet_length(blob)`.
    pub write_bytes: u64,
}

/// A native Postgres saver on one connection.
pub struct PgSaver {
    rt: Runtime,
    client: Client,
    password: Option<String>,
    statements: Option<[Statement; 3]>,
}

/// One checkpoint row: ids, the JSONB checkpoint and metadata, and the channel blobs
/// `(channel, version, msgpack bytes)` of its new versions.
#[derive(Debug, Clone)]
pub struct PgCheckpoint<'a> {
    /// Checkpoint id.
    pub id: &'a str,
    /// Parent checkpoint id.
    pub parent: Option<&'a str>,
    /// The JSONB checkpoint (non-primitive channel values live in blobs).
    pub checkpoint: serde_json::Value,
    /// The JSONB metadata.
    pub metadata: serde_json::Value,
    /// The blobs to upsert.
    pub blobs: Vec<(&'a str, &'a str, &'a [u8])>,
}

/// Total on-disk size of each checkpoint table (`pg_total_relation_size`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PgTableTotals {
    /// `checkpoints`.
    pub checkpoints: u64,
    /// `checkpoint_blobs`.
    pub checkpoint_blobs: u64,
    /// `checkpoint_writes`.
    pub checkpoint_writes: u64,
}

impl PgSaver {
    /// `PostgresSaver.from_conn_string(url)` + `setup()`, connected like every dfck
    /// PostgreSQL session ([`dfck_core::store::postgres::connect_client`]).
    pub fn open(url: &str) -> Result<Self, SaverError> {
        let dfck_core::store::postgres::PgClient {
            rt,
            client,
            password,
            ..
        } = dfck_core::store::postgres::connect_client(url, "dfck-bench", CONNECT_TIMEOUT)
            .map_err(|e| SaverError(e.to_string()))?;
        let mut saver = PgSaver {
            rt,
            client,
            password,
            statements: None,
        };
        saver.setup()?;
        let prepared = saver.rt.block_on(async {
            let c = &saver.client;
            futures_util::future::try_join3(
                c.prepare(UPSERT_BLOB),
                c.prepare(UPSERT_CHECKPOINT),
                c.prepare(INSERT_WRITE),
            )
            .await
        });
        let (a, b, w) = prepared.map_err(saver.err("prepare"))?;
        saver.statements = Some([a, b, w]);
        Ok(saver)
    }

    fn err(&self, what: &str) -> impl Fn(tokio_postgres::Error) -> SaverError + '_ {
        let what = what.to_owned();
        move |e| {
            SaverError(format!(
                "postgres {what}: {}",
                describe_error(&e, self.password.as_deref())
            ))
        }
    }

    fn setup(&self) -> Result<(), SaverError> {
        self.rt.block_on(async {
            self.client
                .batch_execute(dfck_core::store::schema::POSTGRES_MIGRATIONS[0])
                .await
                .map_err(self.err("setup"))?;
            let row = self
                .client
                .query_one("SELECT max(v) FROM checkpoint_migrations", &[])
                .await
                .map_err(self.err("setup"))?;
            let done: Option<i32> = row.get(0);
            let start = done.map_or(0, |v| v + 1).max(0) as usize;
            for (v, stmt) in dfck_core::store::schema::POSTGRES_MIGRATIONS
                .iter()
                .enumerate()
                .skip(start)
            {
                self.client
                    .batch_execute(stmt)
                    .await
                    .map_err(self.err("setup"))?;
                self.client
                    .execute(
                        "INSERT INTO checkpoint_migrations (v) VALUES ($1) ON CONFLICT DO NOTHING",
                        &[&(v as i32)],
                    )
                    .await
                    .map_err(self.err("setup"))?;
            }
            Ok(())
        })
    }

    /// `put`: the new-version blobs and the checkpoint row, pipelined.
    pub fn put_checkpoint(
        &self,
        thread_id: &str,
        rec: &PgCheckpoint<'_>,
    ) -> Result<(), SaverError> {
        let checkpoint = &rec.checkpoint;
        let metadata = &rec.metadata;
        let blobs = &rec.blobs;
        self.rt.block_on(async {
            let [blob_st, ck_st, _] = self
                .statements
                .as_ref()
                .ok_or_else(|| SaverError("postgres put: not set up".into()))?;
            let parent: Option<&str> = rec.parent;
            let thread_id = &thread_id;
            let msgpack = &"msgpack";
            let blob_params: Vec<[&(dyn ToSql + Sync); 5]> = blobs
                .iter()
                .map(|(ch, ver, bytes)| {
                    [
                        thread_id as &(dyn ToSql + Sync),
                        ch as &(dyn ToSql + Sync),
                        ver as &(dyn ToSql + Sync),
                        msgpack as &(dyn ToSql + Sync),
                        bytes as &(dyn ToSql + Sync),
                    ]
                })
                .collect();
            let ck_params: [&(dyn ToSql + Sync); 5] =
                [thread_id, &rec.id, &parent, checkpoint, metadata];
            let mut futs = Vec::with_capacity(blobs.len() + 1);
            for p in &blob_params {
                futs.push(self.client.execute(blob_st, &p[..]));
            }
            futs.push(self.client.execute(ck_st, &ck_params[..]));
            futures_util::future::try_join_all(futs)
                .await
                .map_err(self.err("put"))?;
            Ok(())
        })
    }

    /// `put_writes`: one insert per write, pipelined.
    pub fn insert_writes(
        &self,
        thread_id: &str,
        checkpoint_id: &str,
        writes: &[WriteRecord],
    ) -> Result<(), SaverError> {
        self.rt.block_on(async {
            let [_, _, st] = self
                .statements
                .as_ref()
                .ok_or_else(|| SaverError("postgres put_writes: not set up".into()))?;
            let idx: Vec<i32> = writes.iter().map(|w| w.idx as i32).collect();
            let thread_id = &thread_id;
            let checkpoint_id = &checkpoint_id;
            let params: Vec<[&(dyn ToSql + Sync); 8]> = writes
                .iter()
                .zip(&idx)
                .map(|(w, i)| {
                    [
                        thread_id as &(dyn ToSql + Sync),
                        checkpoint_id as &(dyn ToSql + Sync),
                        &w.task_id,
                        &w.task_path,
                        i,
                        &w.channel,
                        &w.type_tag,
                        &w.value,
                    ]
                })
                .collect();
            let mut futs = Vec::with_capacity(writes.len());
            for p in &params {
                futs.push(self.client.execute(st, &p[..]));
            }
            futures_util::future::try_join_all(futs)
                .await
                .map_err(self.err("put_writes"))?;
            Ok(())
        })
    }

    /// Per-table counts and bytes of one thread.
    pub fn stats(&self, thread_id: &str) -> Result<PgStats, SaverError> {
        self.rt.block_on(async {
            let q = |sql: &'static str| async move {
                let r = self
                    .client
                    .query_one(sql, &[&thread_id])
                    .await
                    .map_err(self.err("storage stats"))?;
                let a: i64 = r.get(0);
                let b: i64 = r.get(1);
                Ok::<_, SaverError>((a.max(0) as u64, b.max(0) as u64))
            };
            let (cr, cb) = q(
                "SELECT count(*)::int8, coalesce(sum(octet_length(checkpoint::text) + \
                 octet_length(metadata::text)), 0)::int8 FROM checkpoints WHERE thread_id = $1",
            )
            .await?;
            let (br, bb) = q(
                "SELECT count(*)::int8, coalesce(sum(coalesce(octet_length(blob), 0)), 0)::int8 \
                 FROM checkpoint_blobs WHERE thread_id = $1",
            )
            .await?;
            let (wr, wb) = q(
                "SELECT count(*)::int8, coalesce(sum(octet_length(blob)), 0)::int8 \
                 FROM checkpoint_writes WHERE thread_id = $1",
            )
            .await?;
            Ok(PgStats {
                checkpoint_rows: cr,
                checkpoint_bytes: cb,
                blob_rows: br,
                blob_bytes: bb,
                write_rows: wr,
                write_bytes: wb,
            })
        })
    }

    /// `pg_total_relation_size` (heap, indexes and TOAST) of `checkpoints`,
    /// `checkpoint_blobs` and `checkpoint_writes`, in that order.
    pub fn table_totals(&self) -> Result<PgTableTotals, SaverError> {
        self.rt.block_on(async {
            let r = self
                .client
                .query_one(
                    "SELECT pg_total_relation_size('checkpoints')::int8, \
                     pg_total_relation_size('checkpoint_blobs')::int8, \
                     pg_total_relation_size('checkpoint_writes')::int8",
                    &[],
                )
                .await
                .map_err(self.err("table sizes"))?;
            let get = |i: usize| r.get::<_, i64>(i).max(0) as u64;
            Ok(PgTableTotals {
                checkpoints: get(0),
                checkpoint_blobs: get(1),
                checkpoint_writes: get(2),
            })
        })
    }

    /// Deletes every row of one thread (and nothing else).
    pub fn delete_thread(&self, thread_id: &str) -> Result<(), SaverError> {
        self.rt.block_on(async {
            for sql in [
                "DELETE FROM checkpoints WHERE thread_id = $1",
                "DELETE FROM checkpoint_blobs WHERE thread_id = $1",
                "DELETE FROM checkpoint_writes WHERE thread_id = $1",
            ] {
                self.client
                    .execute(sql, &[&thread_id])
                    .await
                    .map_err(self.err("cleanup"))?;
            }
            Ok(())
        })
    }
}
