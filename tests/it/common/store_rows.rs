//! Every row of a store's LangGraph tables as text, in key order: two stores hold the same
//! rows when these are equal.

use super::pg::{connect, runtime};
use rusqlite::Connection;

/// Every checkpoint and write row of a SQLite store, as text.
pub fn sqlite_rows(path: &str) -> Vec<String> {
    let c = Connection::open(path).expect("open");
    let mut out = Vec::new();
    for sql in [
        "SELECT quote(thread_id) || quote(checkpoint_ns) || quote(checkpoint_id) || quote(type) \
         || quote(parent_checkpoint_id) || quote(checkpoint) || quote(metadata) FROM checkpoints ORDER BY 1",
        "SELECT quote(thread_id) || quote(checkpoint_ns) || quote(checkpoint_id) || quote(task_id) \
         || quote(idx) || quote(channel) || quote(type) || quote(value) FROM writes ORDER BY 1",
    ] {
        let mut st = c.prepare(sql).expect("prepare");
        let rows = st.query_map([], |r| r.get::<_, String>(0)).expect("query");
        out.extend(rows.map(|r| r.expect("row")));
    }
    out
}

/// Every checkpoint, blob and write row of a PostgreSQL store, as text.
pub fn pg_rows(uri: &str) -> Vec<String> {
    let rt = runtime();
    let c = connect(&rt, uri);
    let mut out = Vec::new();
    for sql in [
        "SELECT concat_ws('|', thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
         checkpoint::text, metadata::text) FROM checkpoints ORDER BY 1",
        "SELECT concat_ws('|', thread_id, checkpoint_ns, channel, version, type, md5(blob)) \
         FROM checkpoint_blobs ORDER BY 1",
        "SELECT concat_ws('|', thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, \
         type, md5(blob)) FROM checkpoint_writes ORDER BY 1",
    ] {
        let rows = rt.block_on(c.query(sql, &[])).expect("query");
        out.extend(rows.iter().map(|r| r.get::<_, String>(0)));
    }
    out
}
