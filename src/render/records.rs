//! The row formats of a report: NDJSON (one row per line) and CSV (flat rows), and the output
//! style chosen on the command line (`--pretty`, `--no-headers`, `--color`).

use super::spool::Spool;
use dfck_core::error::Error;
use serde_json::Value;
use std::sync::OnceLock;

/// How reports are written, beyond their format. Set once by the command line.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Indented JSON (`--pretty`).
    pub pretty: bool,
    /// Header lines of tables and CSV (off with `--no-headers`).
    pub headers: bool,
    /// Colored severities and status words in tables.
    pub color: bool,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            pretty: false,
            headers: true,
            color: false,
        }
    }
}

static STYLE: OnceLock<Style> = OnceLock::new();

/// Sets the output style of this process (the first call wins).
pub fn set_style(s: Style) {
    let _ = STYLE.set(s);
}

/// The output style of this process.
pub(crate) fn style() -> Style {
    STYLE.get().copied().unwrap_or_default()
}

/// The keys whose array holds a report's rows, in the order they are looked for: a lineage
/// report's rows are its checkpoints, a verify report's its findings, a store summary's and
/// every write command's its threads, an audit's its entries (the distinct imports).
const ROW_KEYS: [&str; 4] = ["checkpoints", "findings", "threads", "entries"];

/// The rows of a report: a top-level array, or the array under the first of [`ROW_KEYS`].
fn rows(doc: &Value) -> Option<&Vec<Value>> {
    match doc {
        Value::Array(a) => Some(a),
        Value::Object(o) => ROW_KEYS.iter().find_map(|k| match o.get(*k) {
            Some(Value::Array(a)) => Some(a),
            _ => None,
        }),
        _ => None,
    }
}

/// NDJSON: one row per line; a report without rows is one line.
pub(crate) fn ndjson(doc: &Value) -> Result<String, Error> {
    let mut out = String::new();
    let one = |v: &Value| serde_json::to_string(v).map_err(|e| Error::Render(e.to_string()));
    match rows(doc) {
        Some(rows) => {
            for r in rows {
                out.push_str(&one(r)?);
                out.push('\n');
            }
        }
        None => {
            out.push_str(&one(doc)?);
            out.push('\n');
        }
    }
    Ok(out)
}

/// A row's fields, nested objects flattened one level (`head.step`); deeper values and arrays
/// as compact JSON text.
fn flat(row: &Value) -> Vec<(String, String)> {
    let text = |v: &Value| match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match row {
        Value::Object(o) => o
            .iter()
            .flat_map(|(k, v)| match v {
                Value::Object(inner) => inner
                    .iter()
                    .map(|(k2, v2)| (format!("{k}.{k2}"), text(v2)))
                    .collect::<Vec<_>>(),
                other => vec![(k.clone(), text(other))],
            })
            .collect(),
        other => vec![("value".to_owned(), text(other))],
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// CSV of a report's rows: a header (unless `--no-headers`), then one line per row; the
/// columns are every field of any row, in first-seen order; nothing when there is no row. A
/// report without rows is refused.
pub(crate) fn csv(doc: &Value) -> Result<String, Error> {
    let Some(rows) = rows(doc) else {
        return Err(Error::Usage(
            "--format csv: this output has no flat rows; use --format json or ndjson".into(),
        ));
    };
    // Held whole: the spool never leaves memory.
    let mut out = CsvRows::new(Spool::new(usize::MAX));
    for r in rows {
        out.push_value(r)?;
    }
    let mut text = Vec::new();
    out.write(&mut text)?;
    String::from_utf8(text).map_err(|e| Error::Render(e.to_string()))
}

/// CSV rows as they come: each row's flat fields wait in a [`Spool`] (as column numbers and
/// text) while the columns are gathered, so that memory grows with the columns, not the
/// rows; [`CsvRows::write`] writes what [`csv`] writes for the same rows.
pub(crate) struct CsvRows {
    spool: Spool,
    /// Every field of any row so far, in first-seen order.
    cols: Vec<String>,
    rows: u64,
}

impl CsvRows {
    /// No rows yet, kept in `spool`.
    pub fn new(spool: Spool) -> Self {
        CsvRows {
            spool,
            cols: Vec::new(),
            rows: 0,
        }
    }

    /// Adds one row, as [`output`](super::output) would serialize it.
    pub fn push<T: serde::Serialize>(&mut self, row: &T) -> Result<(), Error> {
        let v = serde_json::to_value(row).map_err(|e| Error::Render(e.to_string()))?;
        self.push_value(&v)
    }

    fn push_value(&mut self, row: &Value) -> Result<(), Error> {
        let mut fields: Vec<(usize, String)> = Vec::new();
        for (k, text) in flat(row) {
            let col = match self.cols.iter().position(|c| *c == k) {
                Some(i) => i,
                None => {
                    self.cols.push(k);
                    self.cols.len() - 1
                }
            };
            fields.push((col, text));
        }
        let record = serde_json::to_vec(&fields).map_err(|e| Error::Render(e.to_string()))?;
        self.spool.push(&record);
        self.rows += 1;
        Ok(())
    }

    /// The first row that could not be kept ([`Spool::check`]).
    pub fn check(&self) -> std::io::Result<()> {
        self.spool.check()
    }

    /// Writes the header and every row (nothing when no row came).
    pub fn write(&mut self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let cols = &self.cols;
        let mut line = String::new();
        if style().headers {
            let header: Vec<String> = cols.iter().map(|c| csv_field(c)).collect();
            line.push_str(&header.join(","));
            line.push('\n');
            out.write_all(line.as_bytes())?;
        }
        let mut cells: Vec<Option<String>> = vec![None; cols.len()];
        self.spool.each(&mut |record| {
            let fields: Vec<(usize, String)> =
                serde_json::from_slice(record).map_err(std::io::Error::other)?;
            cells.iter_mut().for_each(|c| *c = None);
            // A field named twice keeps its last value, as a map of the row would.
            for (col, text) in fields {
                cells[col] = Some(text);
            }
            line.clear();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                line.push_str(&csv_field(c.as_deref().unwrap_or("")));
            }
            line.push('\n');
            out.write_all(line.as_bytes())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn csv_flattens_one_level_and_quotes() {
        let doc = json!({"threads": [{"id": "a,b", "head": {"step": 3}, "ns": ["", "x"]}]});
        assert_eq!(
            csv(&doc).unwrap(),
            "id,head.step,ns\n\"a,b\",3,\"[\"\"\"\",\"\"x\"\"]\"\n"
        );
    }

    /// Rows whose fields differ (a field first seen late, one missing, one named twice by
    /// flattening) stream to what the held report writes, kept in memory or in the file.
    #[test]
    fn streamed_csv_rows_are_the_held_ones() {
        let rows = json!([
            {"id": "a", "n": 1},
            {"id": "b\nc", "note": "x,y", "head": {"step": 2}},
            {"n": 3, "head.step": "flat", "head": {"step": 4}, "id": "\"q\""},
        ]);
        let held = csv(&json!({ "threads": rows })).unwrap();
        assert!(held.starts_with("id,n,note,head.step\n"), "{held}");
        for budget in [0, 8, 1 << 20] {
            let mut out = CsvRows::new(Spool::new(budget));
            for r in rows.as_array().unwrap() {
                out.push(r).unwrap();
            }
            let mut text = Vec::new();
            out.write(&mut text).unwrap();
            assert_eq!(String::from_utf8(text).unwrap(), held, "budget {budget}");
        }
        let mut none = CsvRows::new(Spool::new(0));
        let mut text = Vec::new();
        none.write(&mut text).unwrap();
        assert!(text.is_empty());
    }

    #[test]
    fn ndjson_is_one_row_per_line_or_the_document() {
        assert_eq!(ndjson(&json!({"findings": [1, 2]})).unwrap(), "1\n2\n");
        assert_eq!(ndjson(&json!({"a": 1})).unwrap(), "{\"a\":1}\n");
        assert!(csv(&json!({"a": 1})).is_err());
    }
}
