//! PostgreSQL plumbing the integration tests share: a runtime and a plain client.

use tokio_postgres::{Client, NoTls};

/// A current-thread runtime for one test's client.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A client connected to `uri` without TLS (the test server listens on loopback).
pub fn connect(rt: &tokio::runtime::Runtime, uri: &str) -> Client {
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(uri, NoTls).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client
    })
}

/// A fresh database `name` made from the fixture database `template` on the server `uri`;
/// returns its URI.
pub fn clone_db(uri: &str, template: &str, name: &str) -> String {
    let rt = runtime();
    let admin = connect(&rt, uri);
    for sql in [
        format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        format!("CREATE DATABASE \"{name}\" TEMPLATE \"{template}\""),
    ] {
        rt.block_on(admin.batch_execute(&sql)).unwrap();
    }
    super::with_db(uri, name)
}
