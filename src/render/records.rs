//! The row formats of a report: NDJSON (one row per line) and CSV (flat rows), and the output
//! style chosen on the command line (`--pretty`, `--no-headers`, `--color`).

use dfck_core::error::Error;
use serde_json::{Map, Value};
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
    let flats: Vec<Map<String, Value>> = rows
        .iter()
        .map(|r| {
            flat(r)
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect()
        })
        .collect();
    if flats.is_empty() {
        return Ok(String::new());
    }
    let mut cols: Vec<&String> = Vec::new();
    for f in &flats {
        for k in f.keys() {
            if !cols.contains(&k) {
                cols.push(k);
            }
        }
    }
    let mut out = String::new();
    let mut line = |fields: Vec<String>| {
        out.push_str(&fields.join(","));
        out.push('\n');
    };
    if style().headers {
        line(cols.iter().map(|c| csv_field(c)).collect());
    }
    for f in &flats {
        line(
            cols.iter()
                .map(|c| csv_field(f.get(*c).and_then(Value::as_str).unwrap_or("")))
                .collect(),
        );
    }
    Ok(out)
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

    #[test]
    fn ndjson_is_one_row_per_line_or_the_document() {
        assert_eq!(ndjson(&json!({"findings": [1, 2]})).unwrap(), "1\n2\n");
        assert_eq!(ndjson(&json!({"a": 1})).unwrap(), "{\"a\":1}\n");
        assert!(csv(&json!({"a": 1})).is_err());
    }
}
