//! The PostgreSQL backend: a native `PostgresSaver` — `setup()`'s migrations (recorded in
//! `checkpoint_migrations`), `put` as the blob upserts of the channels in `new_versions` that are
//! not inline primitives plus the JSONB checkpoint upsert (`type` left NULL, `writes` never in
//! metadata), `put_writes` as `ON CONFLICT DO NOTHING` inserts. Statements of one call are
//! pipelined on an autocommit connection, as psycopg's pipeline mode does. Each case writes a
//! thread of its own and deletes only that thread.

use super::writer::{CheckpointRecord, WriteRecord};
use std::str::FromStr;
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio_postgres::config::SslMode;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, Statement};

/// `PostgresSaver`'s migrations, index = version (langgraph-storage.md §3.1).
const MIGRATIONS: [&str; 10] = [
    "CREATE TABLE IF NOT EXISTS checkpoint_migrations (v INTEGER PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', \
     checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT, checkpoint JSONB NOT NULL, \
     metadata JSONB NOT NULL DEFAULT '{}', PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))",
    "CREATE TABLE IF NOT EXISTS checkpoint_blobs (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', \
     channel TEXT NOT NULL, version TEXT NOT NULL, type TEXT NOT NULL, blob BYTEA, \
     PRIMARY KEY (thread_id, checkpoint_ns, channel, version))",
    "CREATE TABLE IF NOT EXISTS checkpoint_writes (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', \
     checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL, \
     type TEXT, blob BYTEA NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))",
    "ALTER TABLE checkpoint_blobs ALTER COLUMN blob DROP NOT NULL",
    "SELECT 1",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_thread_id_idx ON checkpoints(thread_id)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_blobs_thread_id_idx ON checkpoint_blobs(thread_id)",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_writes_thread_id_idx ON checkpoint_writes(thread_id)",
    "ALTER TABLE checkpoint_writes ADD COLUMN IF NOT EXISTS task_path TEXT NOT NULL DEFAULT ''",
];

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

/// A one-line driver error without the password.
fn describe(e: &tokio_postgres::Error, password: Option<&str>) -> String {
    let mut msg = match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => {
            let mut m = e.to_string();
            if let Some(s) = std::error::Error::source(e) {
                m.push_str(": ");
                m.push_str(&s.to_string());
            }
            m
        }
    };
    if let Some(p) = password.filter(|p| !p.is_empty()) {
        msg = msg.replace(p, "***");
    }
    msg.replace(['\n', '\r'], " ")
}

impl PgSaver {
    /// `PostgresSaver.from_conn_string(url)` + `setup()`.
    pub fn open(url: &str) -> Result<Self, String> {
        let mut config = Config::from_str(url)
            .map_err(|e| format!("invalid PostgreSQL URL: {}", describe(&e, None)))?;
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        config.application_name("dfck-bench");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the I/O runtime: {e}"))?;
        let pw = password.clone();
        let client = rt.block_on(async move {
            let fail = |e: tokio_postgres::Error| {
                format!(
                    "cannot connect to PostgreSQL: {}",
                    describe(&e, pw.as_deref())
                )
            };
            // Like dfck's store reader: TLS (encryption only) unless sslmode=disable.
            if config.get_ssl_mode() == SslMode::Disable {
                let (client, conn) = config.connect(NoTls).await.map_err(fail)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok::<_, String>(client)
            } else {
                let tls = crate::store::tls::encrypt_only_connector()
                    .map_err(|e| format!("cannot set up TLS: {e}"))?;
                let (client, conn) = config.connect(tls).await.map_err(fail)?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok(client)
            }
        })?;
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

    fn err(&self, what: &str) -> impl Fn(tokio_postgres::Error) -> String + '_ {
        let what = what.to_owned();
        move |e| {
            format!(
                "postgres {what}: {}",
                describe(&e, self.password.as_deref())
            )
        }
    }

    fn setup(&self) -> Result<(), String> {
        self.rt.block_on(async {
            self.client
                .batch_execute(MIGRATIONS[0])
                .await
                .map_err(self.err("setup"))?;
            let row = self
                .client
                .query_one("SELECT max(v) FROM checkpoint_migrations", &[])
                .await
                .map_err(self.err("setup"))?;
            let done: Option<i32> = row.get(0);
            let start = done.map_or(0, |v| v + 1).max(0) as usize;
            for (v, stmt) in MIGRATIONS.iter().enumerate().skip(start) {
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
    pub fn put(&self, thread_id: &str, rec: &CheckpointRecord) -> Result<(), String> {
        let checkpoint = rec.pg_checkpoint();
        let metadata = serde_json::Value::Object(rec.metadata_json());
        let blobs = rec.pg_blobs();
        self.rt.block_on(async {
            let [blob_st, ck_st, _] = self.statements.as_ref().ok_or("postgres put: not set up")?;
            let parent: Option<&str> = rec.parent.as_deref();
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
                [thread_id, &rec.id, &parent, &checkpoint, &metadata];
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
    pub fn put_writes(
        &self,
        thread_id: &str,
        checkpoint_id: &str,
        writes: &[WriteRecord],
    ) -> Result<(), String> {
        self.rt.block_on(async {
            let [_, _, st] = self
                .statements
                .as_ref()
                .ok_or("postgres put_writes: not set up")?;
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
    pub fn stats(&self, thread_id: &str) -> Result<PgStats, String> {
        self.rt.block_on(async {
            let q = |sql: &'static str| async move {
                let r = self
                    .client
                    .query_one(sql, &[&thread_id])
                    .await
                    .map_err(self.err("storage stats"))?;
                let a: i64 = r.get(0);
                let b: i64 = r.get(1);
                Ok::<_, String>((a.max(0) as u64, b.max(0) as u64))
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

    /// Deletes every row of one thread (and nothing else).
    pub fn delete_thread(&self, thread_id: &str) -> Result<(), String> {
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
