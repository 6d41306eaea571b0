//! The red team's databases: a private copy of the `delta_k3` fixture database per case
//! (`CREATE DATABASE … TEMPLATE`, dropped with the value), and plain client sessions.

use crate::common::{pg_server, with_db};
use crate::postgres_hostile::VICTIM;
use std::sync::Mutex;
use std::time::Duration;
use tokio_postgres::{Client, NoTls};

static CREATE_LOCK: Mutex<()> = Mutex::new(());

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A client on its own runtime (the runtime must outlive the client).
pub struct Session {
    pub rt: tokio::runtime::Runtime,
    pub client: Client,
}

impl Session {
    pub fn open(uri: &str) -> Session {
        let rt = runtime();
        let client = rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(uri, NoTls).await.unwrap();
            tokio::spawn(async move {
                let _ = conn.await;
            });
            client
        });
        Session { rt, client }
    }

    pub fn exec(&self, sql: &str) {
        self.rt
            .block_on(self.client.batch_execute(sql))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    pub fn strings(&self, sql: &str) -> Vec<String> {
        self.rt
            .block_on(self.client.query(sql, &[]))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    pub fn count(&self, sql: &str) -> i64 {
        self.rt
            .block_on(self.client.query_one(sql, &[]))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .get(0)
    }
}

/// A private copy of `dfck_delta_k3`, dropped with the value.
pub struct Db {
    server: String,
    pub name: String,
    pub uri: String,
}

fn admin(server: &str, sql: &str) {
    let _guard = CREATE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let s = Session::open(server);
    for tries in 0.. {
        match s.rt.block_on(s.client.batch_execute(sql)) {
            Ok(()) => return,
            Err(e) if tries < 20 => {
                eprintln!("retrying {sql}: {e}");
                std::thread::sleep(Duration::from_millis(250));
            }
            Err(e) => panic!("{sql}: {e}"),
        }
    }
}

impl Db {
    pub fn fresh(tag: &str) -> Option<Db> {
        let server = pg_server()?;
        let name = format!("dfck_hostile_{tag}");
        admin(
            &server,
            &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        );
        admin(
            &server,
            &format!("CREATE DATABASE \"{name}\" TEMPLATE \"dfck_delta_k3\""),
        );
        let uri = with_db(&server, &name);
        let db = Db { server, name, uri };
        // The twin store's one thread that the real library itself contaminates
        // (tests/twins.rs) would make every clean-run assertion here about that leak.
        for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
            db.exec(&format!(
                "DELETE FROM {table} WHERE thread_id = 't-resume-old-update'"
            ));
        }
        Some(db)
    }

    pub fn session(&self) -> Session {
        Session::open(&self.uri)
    }

    pub fn exec(&self, sql: &str) {
        self.session().exec(sql);
    }

    /// Every row of a thread's checkpoints, writes and blobs, as text.
    pub fn thread_rows(&self, thread: &str) -> Vec<String> {
        let s = self.session();
        let mut out = Vec::new();
        for sql in [
            "SELECT concat_ws('|', checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint::text, \
             metadata::text) FROM checkpoints WHERE thread_id = $1 ORDER BY 1",
            "SELECT concat_ws('|', checkpoint_ns, checkpoint_id, task_id, idx, channel, type, encode(blob, 'hex')) \
             FROM checkpoint_writes WHERE thread_id = $1 ORDER BY 1",
            "SELECT concat_ws('|', checkpoint_ns, channel, version, type, encode(blob, 'hex')) \
             FROM checkpoint_blobs WHERE thread_id = $1 ORDER BY 1",
        ] {
            for r in s.rt.block_on(s.client.query(sql, &[&thread])).unwrap() {
                out.push(r.get(0));
            }
        }
        out
    }

    /// Saves the victim's rows in schema `bak`, to put them back once the case is over.
    pub fn save_victim(&self) {
        self.exec(&format!(
            "CREATE SCHEMA bak; \
             CREATE TABLE bak.c AS SELECT * FROM checkpoints WHERE thread_id = '{VICTIM}'; \
             CREATE TABLE bak.b AS SELECT * FROM checkpoint_blobs WHERE thread_id = '{VICTIM}'; \
             CREATE TABLE bak.w AS SELECT * FROM checkpoint_writes WHERE thread_id = '{VICTIM}';"
        ));
    }

    /// The cause is gone: the victim's rows as they were.
    pub fn restore_victim(&self) {
        self.exec(&format!(
            "BEGIN; \
             DELETE FROM checkpoints WHERE thread_id = '{VICTIM}'; \
             DELETE FROM checkpoint_blobs WHERE thread_id = '{VICTIM}'; \
             DELETE FROM checkpoint_writes WHERE thread_id = '{VICTIM}'; \
             INSERT INTO checkpoints SELECT * FROM bak.c; \
             INSERT INTO checkpoint_blobs SELECT * FROM bak.b; \
             INSERT INTO checkpoint_writes SELECT * FROM bak.w; \
             DROP SCHEMA bak CASCADE; COMMIT;"
        ));
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            admin(
                &self.server,
                &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
            );
        }
    }
}
