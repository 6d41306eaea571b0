//! Copying DeerFlow's own tables between stores (`dfck copy`, docs/copy.md, "DeerFlow's
//! tables"): each table as the store's catalog describes it ([`AppTable`]: columns and their
//! kinds, the primary key, the thread column, the sequences its columns own), its rows as
//! backend-neutral values ([`AppRow`]), what a row becomes in another store's table
//! ([`TableMap`]: columns matched by name, values converted to the target column's kind), a
//! row's fingerprint over decoded values (SQLite's DATETIME text and PostgreSQL's
//! `timestamptz` fingerprint alike, JSON by its parsed value), and the [`AppRows`] trait both
//! backends implement. Values are never printed: credentials and password hashes are among
//! them, so `Debug` shows kinds only and errors name tables and columns, never values.

use crate::error::StoreError;
use thiserror::Error;
use xxhash_rust::xxh3::Xxh3;

/// How a column's values are read, written and compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// Text (`VARCHAR`, `TEXT`; `character varying`, `text`).
    Text,
    /// Integers (`INTEGER`; `integer`, `bigint`, `smallint`).
    Integer,
    /// Floating point numbers.
    Float,
    /// Booleans (SQLite `BOOLEAN` 0/1; `boolean`).
    Bool,
    /// JSON documents (SQLite text; PostgreSQL `json`, which keeps the text as written).
    Json,
    /// PostgreSQL `jsonb`.
    Jsonb,
    /// A UTC time (SQLite `DATETIME` text `YYYY-MM-DD HH:MM:SS.ffffff`; `timestamptz`).
    Time,
    /// PostgreSQL `timestamp without time zone`, read and written as UTC.
    NaiveTime,
}

impl ColumnKind {
    /// Kinds whose values carry over one to the other (integers and booleans convert).
    fn family(self) -> u8 {
        match self {
            ColumnKind::Text => 0,
            ColumnKind::Integer | ColumnKind::Bool => 1,
            ColumnKind::Float => 2,
            ColumnKind::Json | ColumnKind::Jsonb => 3,
            ColumnKind::Time | ColumnKind::NaiveTime => 4,
        }
    }

    /// The kind as errors name it.
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnKind::Text => "text",
            ColumnKind::Integer => "integer",
            ColumnKind::Float => "float",
            ColumnKind::Bool => "boolean",
            ColumnKind::Json => "json",
            ColumnKind::Jsonb => "jsonb",
            ColumnKind::Time => "time",
            ColumnKind::NaiveTime => "time without time zone",
        }
    }
}

/// One column of a DeerFlow table.
#[derive(Debug, Clone)]
pub struct AppColumn {
    /// Its name, from the catalog.
    pub name: String,
    /// How its values are handled.
    pub kind: ColumnKind,
}

/// A DeerFlow table as one store's catalog describes it.
#[derive(Debug, Clone)]
pub struct AppTable {
    /// The table (one of [`crate::deerflow::TABLES`]).
    pub name: &'static str,
    /// Its columns, in the catalog's order.
    pub columns: Vec<AppColumn>,
    /// The primary key's columns (indexes into `columns`); every column when there is none.
    pub key: Vec<usize>,
    /// The column naming the row's thread ([`crate::deerflow::THREAD_TABLES`]).
    pub thread: Option<usize>,
    /// Sequences the table's columns own (PostgreSQL serial and identity columns), as
    /// (sequence name as the catalog prints it, column index).
    pub sequences: Vec<(String, usize)>,
    /// A `GENERATED ALWAYS` identity column: inserts say `OVERRIDING SYSTEM VALUE`.
    pub identity_always: bool,
}

impl AppTable {
    /// The table's fixed name among [`crate::deerflow::TABLES`], and its thread column.
    pub fn known(name: &str) -> Option<(&'static str, Option<&'static str>)> {
        let name = crate::deerflow::TABLES.iter().find(|t| **t == name)?;
        let thread = crate::deerflow::THREAD_TABLES
            .iter()
            .find(|(t, _)| t == name)
            .map(|(_, c)| *c);
        Some((name, thread))
    }

    /// The values of `row`'s key columns.
    pub fn key_of(&self, row: &AppRow) -> Vec<AppValue> {
        self.key
            .iter()
            .map(|&i| row.0.get(i).cloned().unwrap_or(AppValue::Null))
            .collect()
    }

    /// `row` (in this table's column order) with every value converted to its column's kind.
    pub fn conform(&self, row: AppRow) -> Result<AppRow, AppCopyError> {
        let values = row
            .0
            .into_iter()
            .zip(&self.columns)
            .map(|(v, c)| {
                v.into_kind(c.kind).map_err(|why| AppCopyError::Value {
                    table: self.name,
                    column: c.name.clone(),
                    why,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AppRow(values))
    }

    /// The fingerprint of a row of this table as read from its store: its values conformed
    /// to the columns' kinds (as read, when they do not conform: such a row never equals a
    /// conforming one).
    pub fn fingerprint(&self, row: &AppRow) -> u128 {
        match self.conform(row.clone()) {
            Ok(r) => r.fingerprint(self),
            Err(_) => row.fingerprint(self) ^ 1,
        }
    }
}

/// Which rows of a table a scan reads.
#[derive(Debug, Clone, Copy)]
pub enum RowScope<'a> {
    /// Every row.
    All,
    /// The rows whose thread column is NULL (rows of a thread-scoped table that belong to no
    /// thread, e.g. a scheduled task that starts a fresh thread per run).
    NoThread,
    /// The rows of one thread.
    Thread(&'a str),
}

/// One value, decoded from its store's representation.
#[derive(Clone, PartialEq)]
pub enum AppValue {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A floating point number.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// Text.
    Text(String),
    /// A JSON document, as its text (written as read; compared by its parsed value).
    Json(String),
    /// A time: Unix microseconds, UTC.
    Time(i64),
    /// Bytes that are not UTF-8 text (a value DeerFlow never writes).
    Blob(Vec<u8>),
}

impl std::fmt::Debug for AppValue {
    /// The kind only: values may be credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AppValue::Null => "Null",
            AppValue::Int(_) => "Int(..)",
            AppValue::Float(_) => "Float(..)",
            AppValue::Bool(_) => "Bool(..)",
            AppValue::Text(_) => "Text(..)",
            AppValue::Json(_) => "Json(..)",
            AppValue::Time(_) => "Time(..)",
            AppValue::Blob(_) => "Blob(..)",
        })
    }
}

fn field(h: &mut Xxh3, bytes: &[u8]) {
    h.update(&(bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

impl AppValue {
    /// The value as a column of `kind` holds it; `Err` says why it cannot.
    pub fn into_kind(self, kind: ColumnKind) -> Result<AppValue, &'static str> {
        use AppValue as V;
        use ColumnKind as K;
        Ok(match (self, kind) {
            (V::Null, _) => V::Null,
            (V::Blob(_), _) => return Err("it holds bytes that are not UTF-8 text"),
            (V::Text(s) | V::Json(s), K::Text) => V::Text(s),
            (V::Int(i), K::Text) => V::Text(i.to_string()),
            (V::Float(x), K::Text) => V::Text(x.to_string()),
            (V::Bool(b), K::Text) => V::Text(if b { "1" } else { "0" }.into()),
            (V::Time(t), K::Text) => V::Text(crate::time::deerflow_text(t)),
            (V::Int(i), K::Integer) => V::Int(i),
            (V::Bool(b), K::Integer) => V::Int(i64::from(b)),
            (V::Float(x), K::Integer) if x.fract() == 0.0 && x.abs() < 9.0e18 => V::Int(x as i64),
            (V::Text(s), K::Integer) => V::Int(s.trim().parse().map_err(|_| "not an integer")?),
            (V::Float(x), K::Float) => V::Float(x),
            (V::Int(i), K::Float) => V::Float(i as f64),
            (V::Text(s), K::Float) => V::Float(s.trim().parse().map_err(|_| "not a number")?),
            (V::Bool(b), K::Bool) => V::Bool(b),
            (V::Int(i), K::Bool) => V::Bool(i != 0),
            (V::Text(s), K::Bool) => V::Bool(match s.trim() {
                "1" | "true" | "t" | "TRUE" | "True" => true,
                "0" | "false" | "f" | "FALSE" | "False" => false,
                _ => return Err("not a boolean"),
            }),
            (V::Json(s) | V::Text(s), K::Json | K::Jsonb) => V::Json(s),
            (V::Int(i), K::Json | K::Jsonb) => V::Json(i.to_string()),
            (V::Float(x), K::Json | K::Jsonb) => V::Json(x.to_string()),
            (V::Bool(b), K::Json | K::Jsonb) => V::Json(b.to_string()),
            (V::Time(t), K::Time | K::NaiveTime) => V::Time(t),
            (V::Text(s), K::Time | K::NaiveTime) => {
                V::Time(parse_time(&s).ok_or("not a time DeerFlow writes")?)
            }
            _ => return Err("its kind does not convert to the column's"),
        })
    }

    /// Feeds the value's canonical form to `h`: JSON by its parsed value (keys sorted),
    /// times by their instant.
    fn hash_into(&self, h: &mut Xxh3) {
        match self {
            AppValue::Null => h.update(&[0]),
            AppValue::Int(i) => {
                h.update(&[1]);
                h.update(&i.to_le_bytes());
            }
            AppValue::Float(x) => {
                h.update(&[2]);
                let bits = if x.is_nan() {
                    f64::NAN.to_bits()
                } else {
                    x.to_bits()
                };
                h.update(&bits.to_le_bytes());
            }
            AppValue::Bool(b) => h.update(&[3, u8::from(*b)]),
            AppValue::Text(s) => {
                h.update(&[4]);
                field(h, s.as_bytes());
            }
            AppValue::Json(s) => match serde_json::from_str::<serde_json::Value>(s) {
                Ok(v) => {
                    h.update(&[5]);
                    let canonical = serde_json::to_vec(&crate::codec::pyjson::sort_keys(&v))
                        .unwrap_or_default();
                    field(h, &canonical);
                }
                Err(_) => {
                    h.update(&[6]);
                    field(h, s.as_bytes());
                }
            },
            AppValue::Time(t) => {
                h.update(&[7]);
                h.update(&t.to_le_bytes());
            }
            AppValue::Blob(b) => {
                h.update(&[8]);
                field(h, b);
            }
        }
    }
}

/// One row, its values in its table's column order.
#[derive(Clone, PartialEq)]
pub struct AppRow(pub Vec<AppValue>);

impl std::fmt::Debug for AppRow {
    /// The number of values only: values may be credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AppRow({} values)", self.0.len())
    }
}

impl AppRow {
    /// The row's fingerprint: every column's name and canonical value, in `table`'s order.
    pub fn fingerprint(&self, table: &AppTable) -> u128 {
        let mut h = Xxh3::new();
        for (c, v) in table.columns.iter().zip(&self.0) {
            field(&mut h, c.name.as_bytes());
            v.hash_into(&mut h);
        }
        h.digest128()
    }

    /// Bytes of its values, roughly (for the free-space guard).
    pub fn bytes(&self) -> u64 {
        self.0
            .iter()
            .map(|v| match v {
                AppValue::Text(s) | AppValue::Json(s) => s.len() as u64 + 8,
                AppValue::Blob(b) => b.len() as u64 + 8,
                _ => 8,
            })
            .sum()
    }
}

/// Unix microseconds of a time as DeerFlow's SQLite stores it (`2026-08-20 08:12:01.250000`,
/// UTC) or as ISO 8601 with an offset; `None` when it is neither.
pub fn parse_time(text: &str) -> Option<i64> {
    let t = text.trim();
    let secs = crate::time::unix_seconds(t)?;
    let frac = match t.get(19..).and_then(|r| r.strip_prefix('.')) {
        Some(r) => {
            let digits: String = r.chars().take_while(char::is_ascii_digit).take(6).collect();
            format!("{digits:0<6}").parse::<i64>().ok()?
        }
        None => 0,
    };
    secs.checked_mul(1_000_000)?.checked_add(frac)
}

/// Why DeerFlow's tables cannot be copied as they are. Names tables and columns, never values.
#[derive(Debug, Error)]
pub enum AppCopyError {
    /// The target lacks a table the source has.
    #[error("the target has no DeerFlow table '{table}'")]
    MissingTable {
        /// The table.
        table: &'static str,
    },
    /// A table's columns differ between the stores.
    #[error("DeerFlow's table '{table}' has other columns in the target ({detail})")]
    Columns {
        /// The table.
        table: &'static str,
        /// Which columns.
        detail: String,
    },
    /// A column's kind in the target cannot hold the source's values.
    #[error(
        "column {table}.{column} is {source_kind} in the source and {target_kind} in the target"
    )]
    Kinds {
        /// The table.
        table: &'static str,
        /// The column.
        column: String,
        /// Its kind in the source.
        source_kind: &'static str,
        /// Its kind in the target.
        target_kind: &'static str,
    },
    /// A value cannot be stored in its target column.
    #[error("a value of {table}.{column} cannot be copied: {why}")]
    Value {
        /// The table.
        table: &'static str,
        /// The column.
        column: String,
        /// Why.
        why: &'static str,
    },
}

/// How one table's rows go from the source's columns to the target's.
#[derive(Debug, Clone)]
pub struct TableMap {
    /// The table in the source.
    pub source: AppTable,
    /// The table in the target.
    pub target: AppTable,
    /// For each target column, the source column holding its values.
    order: Vec<usize>,
}

impl TableMap {
    /// Matches the two tables' columns by name: both must have the same columns, of kinds
    /// that convert.
    pub fn new(source: AppTable, target: AppTable) -> Result<Self, AppCopyError> {
        let names = |t: &AppTable| t.columns.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        let (s, t) = (names(&source), names(&target));
        let only = |a: &[String], b: &[String]| {
            a.iter()
                .filter(|c| !b.contains(c))
                .cloned()
                .collect::<Vec<_>>()
        };
        let (lacks, extra) = (only(&s, &t), only(&t, &s));
        if !lacks.is_empty() || !extra.is_empty() {
            let mut parts = Vec::new();
            if !lacks.is_empty() {
                parts.push(format!("missing {}", lacks.join(", ")));
            }
            if !extra.is_empty() {
                parts.push(format!("extra {}", extra.join(", ")));
            }
            return Err(AppCopyError::Columns {
                table: target.name,
                detail: parts.join("; "),
            });
        }
        let mut order = Vec::with_capacity(t.len());
        for c in &target.columns {
            let i = s.iter().position(|n| *n == c.name).unwrap_or_default();
            let from = source.columns[i].kind;
            if from.family() != c.kind.family() {
                return Err(AppCopyError::Kinds {
                    table: target.name,
                    column: c.name.clone(),
                    source_kind: from.as_str(),
                    target_kind: c.kind.as_str(),
                });
            }
            order.push(i);
        }
        Ok(TableMap {
            source,
            target,
            order,
        })
    }

    /// The table's name.
    pub fn name(&self) -> &'static str {
        self.target.name
    }

    /// A source row as the target stores it: the target's column order and kinds.
    pub fn adopt(&self, row: AppRow) -> Result<AppRow, AppCopyError> {
        let mut values: Vec<Option<AppValue>> = row.0.into_iter().map(Some).collect();
        let reordered = self
            .order
            .iter()
            .map(|&i| {
                values
                    .get_mut(i)
                    .and_then(Option::take)
                    .unwrap_or(AppValue::Null)
            })
            .collect();
        self.target.conform(AppRow(reordered))
    }
}

/// Reading and writing DeerFlow's tables row by row, for `dfck copy` (the SQL is each
/// backend's). Writes run inside the connection's open transaction.
pub trait AppRows {
    /// The DeerFlow tables the store holds (`alembic_version` aside), as its catalog
    /// describes them, in [`crate::deerflow::TABLES`] order.
    fn app_tables(&self) -> Result<Vec<AppTable>, StoreError>;

    /// Streams `scope`'s rows of `table`, ordered by its key, in the table's column order.
    fn scan_app_rows(
        &self,
        table: &AppTable,
        scope: RowScope<'_>,
        f: &mut dyn FnMut(AppRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Streams every thread id the thread-scoped tables among `tables` name, sorted, each
    /// once.
    fn scan_app_thread_ids(
        &self,
        tables: &[AppTable],
        f: &mut dyn FnMut(String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// The row of `table` whose key columns hold `key`.
    fn app_row(&self, table: &AppTable, key: &[AppValue]) -> Result<Option<AppRow>, StoreError>;

    /// Inserts `row` (in `table`'s column order and kinds).
    fn insert_app_row(&self, table: &AppTable, row: &AppRow) -> Result<(), StoreError>;

    /// Overwrites the row with `row`'s key with `row` (an update, so that no
    /// `ON DELETE CASCADE` reaches the rows referencing it).
    fn update_app_row(&self, table: &AppTable, row: &AppRow) -> Result<(), StoreError>;

    /// Deletes one thread's rows of a thread-scoped table; how many.
    fn delete_app_thread_rows(&self, table: &AppTable, thread_id: &str) -> Result<u64, StoreError>;

    /// Moves every sequence the table's columns own past the largest value the table holds
    /// (never backwards), so that the next row the application inserts gets a free id.
    fn advance_sequences(&self, table: &AppTable) -> Result<(), StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(cols: &[(&str, ColumnKind)]) -> AppTable {
        AppTable {
            name: "runs",
            columns: cols
                .iter()
                .map(|(n, k)| AppColumn {
                    name: (*n).into(),
                    kind: *k,
                })
                .collect(),
            key: vec![0],
            thread: None,
            sequences: Vec::new(),
            identity_always: false,
        }
    }

    #[test]
    fn times_parse_as_deerflow_writes_them() {
        let t = parse_time("2026-08-20 08:12:01.250000").unwrap();
        assert_eq!(crate::time::deerflow_text(t), "2026-08-20 08:12:01.250000");
        assert_eq!(parse_time("2026-08-20T16:12:01.25+08:00"), Some(t));
        assert_eq!(parse_time("2026-08-20 08:12:01"), Some(t - 250_000));
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn rows_fingerprint_by_decoded_value_across_backends() {
        use ColumnKind as K;
        let sqlite = table(&[
            ("id", K::Text),
            ("at", K::Time),
            ("meta", K::Json),
            ("ok", K::Bool),
        ]);
        let pg = table(&[
            ("ok", K::Bool),
            ("id", K::Text),
            ("meta", K::Json),
            ("at", K::Time),
        ]);
        let map = TableMap::new(sqlite.clone(), pg.clone()).unwrap();
        let from_sqlite = AppRow(vec![
            AppValue::Text("r1".into()),
            AppValue::Text("2026-08-20 08:12:01.250000".into()),
            AppValue::Json(r#"{"b": 1, "a": [true]}"#.into()),
            AppValue::Int(1),
        ]);
        let adopted = map.adopt(from_sqlite).unwrap();
        let from_pg = AppRow(vec![
            AppValue::Bool(true),
            AppValue::Text("r1".into()),
            AppValue::Json(r#"{"a":[true],"b":1}"#.into()),
            AppValue::Time(parse_time("2026-08-20T08:12:01.25+00:00").unwrap()),
        ]);
        assert_eq!(adopted.fingerprint(&pg), pg.fingerprint(&from_pg));
        let mut other = from_pg;
        other.0[0] = AppValue::Bool(false);
        assert_ne!(adopted.fingerprint(&pg), pg.fingerprint(&other));
        assert_eq!(format!("{adopted:?}"), "AppRow(4 values)");
    }

    #[test]
    fn tables_with_other_columns_or_kinds_do_not_map() {
        use ColumnKind as K;
        let a = table(&[("id", K::Text), ("at", K::Time)]);
        let b = table(&[("id", K::Text), ("at", K::Json)]);
        let c = table(&[("id", K::Text)]);
        assert!(matches!(
            TableMap::new(a.clone(), b),
            Err(AppCopyError::Kinds { .. })
        ));
        let e = TableMap::new(a, c).unwrap_err().to_string();
        assert!(e.contains("missing at"), "{e}");
        let bad = AppRow(vec![
            AppValue::Text("x".into()),
            AppValue::Text("soon".into()),
        ]);
        let t = table(&[("id", K::Text), ("at", K::Time)]);
        assert!(t.conform(bad).is_err());
    }
}
