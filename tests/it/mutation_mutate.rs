//! Deterministic mutations of a copied fixture store: byte flips and truncations in blobs,
//! values of the wrong storage class, parents rewired to self / another checkpoint / a
//! missing id, deleted rows, NULLs, duplicated ids and random metadata JSON.

use rusqlite::types::Value as Sql;
use rusqlite::{Connection, params};

/// SplitMix64: a small deterministic generator (no dependency, same sequence everywhere).
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A table row, by rowid, with the thread it belongs to.
struct Target {
    table: &'static str,
    rowid: i64,
    thread: String,
}

fn random_row(c: &Connection, rng: &mut Rng, table: &'static str) -> Option<Target> {
    let n: i64 = c
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .ok()?;
    if n == 0 {
        return None;
    }
    let off = rng.below(n as usize) as i64;
    c.query_row(
        &format!("SELECT rowid, CAST(thread_id AS TEXT) FROM {table} LIMIT 1 OFFSET ?1"),
        [off],
        |r| {
            Ok(Target {
                table,
                rowid: r.get(0)?,
                thread: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            })
        },
    )
    .ok()
}

fn blob_col(t: &Target) -> &'static str {
    if t.table == "checkpoints" {
        "checkpoint"
    } else {
        "value"
    }
}

fn get_blob(c: &Connection, t: &Target, col: &str) -> Vec<u8> {
    c.query_row(
        &format!(
            "SELECT CAST({col} AS BLOB) FROM {} WHERE rowid = ?1",
            t.table
        ),
        [t.rowid],
        |r| r.get::<_, Option<Vec<u8>>>(0),
    )
    .ok()
    .flatten()
    .unwrap_or_default()
}

fn set(c: &Connection, t: &Target, col: &str, v: Sql) -> rusqlite::Result<usize> {
    c.execute(
        &format!("UPDATE {} SET {col} = ?1 WHERE rowid = ?2", t.table),
        params![v, t.rowid],
    )
}

/// A random JSON text: objects, arrays, odd numbers, control characters, deep nesting,
/// DeerFlow's metadata keys with the wrong types, or not JSON at all.
fn random_json(rng: &mut Rng, depth: usize) -> String {
    let leaf = |rng: &mut Rng| -> String {
        match rng.below(9) {
            0 => "null".into(),
            1 => "true".into(),
            2 => format!("{}", rng.next() as i64),
            3 => "1e400".into(),
            4 => "-0.0".into(),
            5 => "\"\\u001b]52;c;AAAA\\u0007\\u202e\"".into(),
            6 => "NaN".into(),
            7 => format!("\"{}\"", "x".repeat(rng.below(300))),
            _ => "\"delta\"".into(),
        }
    };
    if depth > 4 || rng.below(3) == 0 {
        return leaf(rng);
    }
    match rng.below(4) {
        0 => {
            let n = rng.below(4);
            let items: Vec<String> = (0..n).map(|_| random_json(rng, depth + 1)).collect();
            format!("[{}]", items.join(","))
        }
        _ => {
            let keys = [
                "source",
                "step",
                "writes",
                "parents",
                "__deerflow_mode",
                "__delta_counters",
                "run_durations",
                "thread_id",
                "x",
            ];
            let n = 1 + rng.below(4);
            let items: Vec<String> = (0..n)
                .map(|_| format!("\"{}\":{}", rng.pick(&keys), random_json(rng, depth + 1)))
                .collect();
            format!("{{{}}}", items.join(","))
        }
    }
}

/// Applies one random mutation; returns what it did.
fn mutate_once(c: &Connection, rng: &mut Rng) -> rusqlite::Result<(String, String)> {
    let table = if rng.below(3) == 0 {
        "writes"
    } else {
        "checkpoints"
    };
    let Some(t) = random_row(c, rng, table) else {
        return Ok(("nothing (empty table)".into(), String::new()));
    };
    let kind = rng.below(12);
    let what = match kind {
        0 | 1 => {
            let col = blob_col(&t);
            let mut b = get_blob(c, &t, col);
            let flips = 1 + rng.below(8);
            for _ in 0..flips {
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] ^= 1 << rng.below(8);
                }
            }
            set(c, &t, col, Sql::Blob(b))?;
            format!("{flips} bit flip(s) in {}.{col}", t.table)
        }
        2 => {
            let col = blob_col(&t);
            let b = get_blob(c, &t, col);
            let n = rng.below(b.len().max(1));
            set(c, &t, col, Sql::Blob(b[..n].to_vec()))?;
            format!("{}.{col} truncated to {n} bytes", t.table)
        }
        3 if rng.below(4) == 0 => {
            // Ids and tags stored as BLOBs (TEXT affinity keeps a BLOB a BLOB).
            let cols: &[&str] = if t.table == "checkpoints" {
                &["thread_id", "checkpoint_id", "parent_checkpoint_id", "type"]
            } else {
                &["checkpoint_id", "task_id", "channel", "type"]
            };
            let col = *rng.pick(cols);
            c.execute(
                &format!(
                    "UPDATE {tb} SET {col} = CAST({col} AS BLOB) WHERE rowid = ?1",
                    tb = t.table
                ),
                [t.rowid],
            )?;
            format!("{}.{col} stored as a BLOB", t.table)
        }
        3 => {
            let cols: &[&str] = if t.table == "checkpoints" {
                &["checkpoint", "metadata"]
            } else {
                &["value", "idx"]
            };
            let col = *rng.pick(cols);
            let v = match rng.below(4) {
                0 => Sql::Integer(rng.next() as i64),
                1 => Sql::Real(2.5),
                2 => Sql::Text("not a blob \u{1b}[2J".into()),
                _ => Sql::Blob(vec![0xc1, 0xff]),
            };
            let shown = format!("{v:?}");
            set(c, &t, col, v)?;
            format!("{}.{col} = {shown}", t.table)
        }
        4 | 5 if t.table == "checkpoints" => {
            let v = match rng.below(4) {
                0 => {
                    c.execute(
                        "UPDATE checkpoints SET parent_checkpoint_id = checkpoint_id WHERE rowid = ?1",
                        [t.rowid],
                    )?;
                    return Ok(("parent = self".into(), t.thread));
                }
                1 => c
                    .query_row(
                        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?1 ORDER BY random() LIMIT 1",
                        [&t.thread],
                        |r| r.get::<_, String>(0),
                    )
                    .map(Sql::Text)?,
                2 => Sql::Text("1f000000-0000-6000-8000-000000000000".into()),
                _ => Sql::Null,
            };
            let shown = format!("{v:?}");
            set(c, &t, "parent_checkpoint_id", v)?;
            format!("parent = {shown}")
        }
        6 => {
            let n = 1 + rng.below(3);
            for _ in 0..n {
                if let Some(r) = random_row(c, rng, t.table) {
                    c.execute(
                        &format!("DELETE FROM {} WHERE rowid = ?1", r.table),
                        [r.rowid],
                    )?;
                }
            }
            format!("{n} {} row(s) deleted", t.table)
        }
        7 => {
            let cols: &[&str] = if t.table == "checkpoints" {
                &["checkpoint", "metadata", "type", "parent_checkpoint_id"]
            } else {
                &["value", "type"]
            };
            let col = *rng.pick(cols);
            set(c, &t, col, Sql::Null)?;
            format!("{}.{col} = NULL", t.table)
        }
        8 => {
            // Duplicate ids: drop the primary key, then copy a row (or give it another's id).
            let cols = c
                .prepare(&format!("SELECT * FROM {} LIMIT 0", t.table))?
                .column_names()
                .join(", ");
            c.execute_batch(&format!(
                "CREATE TABLE dup AS SELECT {cols} FROM {tb}; DROP TABLE {tb}; ALTER TABLE dup RENAME TO {tb};",
                tb = t.table
            ))?;
            let n = c.execute(
                &format!("INSERT INTO {tb} SELECT * FROM {tb} WHERE rowid = (SELECT rowid FROM {tb} LIMIT 1 OFFSET ?1)", tb = t.table),
                [rng.below(8) as i64],
            )?;
            if rng.below(2) == 0 {
                c.execute(
                    &format!("UPDATE {tb} SET checkpoint_id = (SELECT checkpoint_id FROM {tb} WHERE thread_id = ?1 ORDER BY random() LIMIT 1) WHERE rowid = (SELECT rowid FROM {tb} WHERE thread_id = ?1 ORDER BY random() LIMIT 1)", tb = t.table),
                    [&t.thread],
                )?;
            }
            format!("{} without primary key, {n} row(s) duplicated", t.table)
        }
        9 if t.table == "checkpoints" => {
            let j = random_json(rng, 0);
            let shown: String = j.chars().take(80).collect();
            set(c, &t, "metadata", Sql::Blob(j.into_bytes()))?;
            format!("metadata = {shown}")
        }
        10 => {
            let tag = *rng.pick(&[
                "pickle",
                "msgpack+aes",
                "json",
                "null",
                "bytes",
                "",
                "msgpack\u{1b}",
            ]);
            set(c, &t, "type", Sql::Text(tag.into()))?;
            format!("{}.type = {tag:?}", t.table)
        }
        _ if t.table == "writes" => {
            let ch = *rng.pick(&[
                "messages",
                "__pregel_tasks",
                "branch:to:x",
                "\u{1b}]0;t\u{7}",
                "__interrupt__",
            ]);
            set(c, &t, "channel", Sql::Text(ch.into()))?;
            if rng.below(2) == 0 {
                set(
                    c,
                    &t,
                    "task_id",
                    Sql::Text("00000000-0000-0000-0000-000000000000".into()),
                )?;
            }
            format!("writes.channel = {ch:?}")
        }
        _ => {
            let j = random_json(rng, 0);
            let shown: String = j.chars().take(80).collect();
            set(c, &t, "metadata", Sql::Text(j))?;
            format!("metadata (TEXT) = {shown}")
        }
    };
    Ok((what, t.thread))
}

/// Applies 1–3 mutations to the store at `db`; returns their descriptions and a thread the
/// last one touched.
pub fn mutate(db: &std::path::Path, rng: &mut Rng) -> (Vec<String>, String) {
    let c = Connection::open(db).expect("open copy");
    let n = 1 + rng.below(3);
    let mut done = Vec::new();
    let mut thread = String::new();
    for _ in 0..n {
        match mutate_once(&c, rng) {
            Ok((what, t)) => {
                done.push(what);
                if !t.is_empty() {
                    thread = t;
                }
            }
            Err(e) => done.push(format!("(mutation failed: {e})")),
        }
    }
    if thread.is_empty() {
        thread = c
            .query_row(
                "SELECT CAST(thread_id AS TEXT) FROM checkpoints LIMIT 1",
                [],
                |r| r.get(0),
            )
            .unwrap_or_else(|_| "t-none".into());
    }
    (done, thread)
}
