//! DeerFlow's tables row by row in a SQLite store ([`AppRows`], for `dfck copy`): columns and
//! kinds from `pragma_table_info` (declared types: `DATETIME` text, `BOOLEAN` 0/1, `JSON`
//! text), rows written the way DeerFlow's SQLAlchemy stores them (times as
//! `YYYY-MM-DD HH:MM:SS.ffffff` UTC text, booleans as 0/1, JSON as its text). Also a
//! read-only connection to a file holding DeerFlow's tables whether or not LangGraph's are
//! there yet (a copy target before its setup).

use super::SqliteStore;
use crate::error::StoreError;
use crate::store::app_copy::{
    AppColumn, AppRow, AppRows, AppTable, AppValue, ColumnKind, RowScope,
};
use rusqlite::types::{Value, ValueRef};
use rusqlite::{OpenFlags, params_from_iter};
use std::path::Path;

fn q(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Query {
        what: what.to_owned(),
        reason: e.to_string(),
    }
}

/// The kind of a column from its declared type, as SQLAlchemy declares DeerFlow's columns;
/// other declarations by SQLite's affinity rules (`None`: not one dfck copies).
fn kind(declared: &str) -> Option<ColumnKind> {
    let d = declared.to_ascii_uppercase();
    Some(if d.contains("JSON") {
        ColumnKind::Json
    } else if d.contains("BOOL") {
        ColumnKind::Bool
    } else if d.contains("DATE") || d.contains("TIME") {
        ColumnKind::Time
    } else if d.contains("INT") {
        ColumnKind::Integer
    } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
        ColumnKind::Text
    } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
        ColumnKind::Float
    } else {
        return None;
    })
}

/// An identifier in double quotes (names come from DeerFlow's fixed table list and the
/// catalog, never from input).
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A stored value as the column's kind reads it: text of a time or JSON column decoded
/// (kept as text when it does not parse: the copy then refuses it), bytes that are not
/// UTF-8 kept apart.
fn value(v: ValueRef<'_>, kind: ColumnKind) -> AppValue {
    match v {
        ValueRef::Null => AppValue::Null,
        ValueRef::Integer(i) => AppValue::Int(i),
        ValueRef::Real(x) => AppValue::Float(x),
        ValueRef::Text(b) | ValueRef::Blob(b) => match std::str::from_utf8(b) {
            Err(_) => AppValue::Blob(b.to_vec()),
            Ok(s) => match kind {
                ColumnKind::Json | ColumnKind::Jsonb => AppValue::Json(s.to_owned()),
                ColumnKind::Time | ColumnKind::NaiveTime => {
                    match crate::store::app_copy::parse_time(s) {
                        Some(t) => AppValue::Time(t),
                        None => AppValue::Text(s.to_owned()),
                    }
                }
                _ => AppValue::Text(s.to_owned()),
            },
        },
    }
}

/// A value as DeerFlow's SQLAlchemy stores it in SQLite.
fn stored(v: &AppValue) -> Value {
    match v {
        AppValue::Null => Value::Null,
        AppValue::Int(i) => Value::Integer(*i),
        AppValue::Float(x) => Value::Real(*x),
        AppValue::Bool(b) => Value::Integer(i64::from(*b)),
        AppValue::Text(s) | AppValue::Json(s) => Value::Text(s.clone()),
        AppValue::Time(t) => Value::Text(crate::time::deerflow_text(*t)),
        AppValue::Blob(b) => Value::Blob(b.clone()),
    }
}

fn columns(t: &AppTable) -> String {
    t.columns
        .iter()
        .map(|c| ident(&c.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `"k1" = ?N AND "k2" = ?N+1 …`, numbered from `first`.
fn key_match(t: &AppTable, first: usize) -> String {
    t.key
        .iter()
        .enumerate()
        .map(|(n, &i)| format!("{} = ?{}", ident(&t.columns[i].name), first + n))
        .collect::<Vec<_>>()
        .join(" AND ")
}

impl SqliteStore {
    /// Opens `path` read-only to read DeerFlow's tables, whether or not LangGraph's tables
    /// exist there (a copy target before it is set up).
    pub fn open_app_read_only(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let conn = rusqlite::Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| StoreError::Open {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
        Ok(SqliteStore::with_conn(
            conn,
            shown,
            "sqlite (DeerFlow's tables)",
            true,
        ))
    }

    fn table(&self, name: &'static str, thread: Option<&str>) -> Result<AppTable, StoreError> {
        let what = "reading DeerFlow's schema";
        let mut st = self
            .conn
            .prepare("SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid")
            .map_err(q(what))?;
        let cols: Vec<(String, String, i64)> = st
            .query_map([name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .and_then(|rows| rows.collect())
            .map_err(q(what))?;
        let mut columns = Vec::with_capacity(cols.len());
        for (col, declared, _) in &cols {
            let kind = kind(declared).ok_or_else(|| {
                StoreError::Target(format!(
                    "DeerFlow's column {name}.{col} is declared {declared}, a type dfck copy does not handle"
                ))
            })?;
            columns.push(AppColumn {
                name: col.clone(),
                kind,
            });
        }
        let mut pk: Vec<(i64, usize)> = cols
            .iter()
            .enumerate()
            .filter(|(_, c)| c.2 > 0)
            .map(|(i, c)| (c.2, i))
            .collect();
        pk.sort_unstable();
        let key = if pk.is_empty() {
            (0..columns.len()).collect()
        } else {
            pk.into_iter().map(|(_, i)| i).collect()
        };
        let thread = thread.and_then(|t| columns.iter().position(|c| c.name == t));
        Ok(AppTable {
            name,
            columns,
            key,
            thread,
            sequences: Vec::new(),
            identity_always: false,
        })
    }

    fn rows(
        &self,
        sql: &str,
        params: &[Value],
        table: &AppTable,
        f: &mut dyn FnMut(AppRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let what = "reading DeerFlow's rows";
        let mut st = self.conn.prepare_cached(sql).map_err(q(what))?;
        let mut rows = st.query(params_from_iter(params)).map_err(q(what))?;
        while let Some(r) = rows.next().map_err(q(what))? {
            let mut values = Vec::with_capacity(table.columns.len());
            for (i, c) in table.columns.iter().enumerate() {
                values.push(value(r.get_ref(i).map_err(q(what))?, c.kind));
            }
            f(AppRow(values))?;
        }
        Ok(())
    }
}

impl AppRows for SqliteStore {
    fn app_tables(&self) -> Result<Vec<AppTable>, StoreError> {
        let schema = crate::store::app::AppTables::app_schema(self)?;
        let mut out = Vec::new();
        for name in &schema.tables {
            match AppTable::known(name) {
                Some((n, thread)) if n != "alembic_version" => out.push(self.table(n, thread)?),
                _ => {}
            }
        }
        Ok(out)
    }

    fn scan_app_rows(
        &self,
        table: &AppTable,
        scope: RowScope<'_>,
        f: &mut dyn FnMut(AppRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let order = table
            .key
            .iter()
            .map(|&i| ident(&table.columns[i].name))
            .collect::<Vec<_>>()
            .join(", ");
        let thread = table.thread.map(|i| ident(&table.columns[i].name));
        let (filter, params) = match (scope, thread) {
            (RowScope::All, _) => (String::new(), Vec::new()),
            (RowScope::NoThread, Some(c)) => (format!(" WHERE {c} IS NULL"), Vec::new()),
            (RowScope::Thread(id), Some(c)) => {
                (format!(" WHERE {c} = ?1"), vec![Value::Text(id.to_owned())])
            }
            (_, None) => return Ok(()),
        };
        let sql = format!(
            "SELECT {} FROM {}{filter} ORDER BY {order}",
            columns(table),
            ident(table.name)
        );
        self.rows(&sql, &params, table, f)
    }

    fn scan_app_thread_ids(
        &self,
        tables: &[AppTable],
        f: &mut dyn FnMut(String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let parts: Vec<String> = tables
            .iter()
            .filter_map(|t| {
                let c = ident(&t.columns[t.thread?].name);
                Some(format!(
                    "SELECT {c} FROM {} WHERE {c} IS NOT NULL",
                    ident(t.name)
                ))
            })
            .collect();
        if parts.is_empty() {
            return Ok(());
        }
        let what = "reading DeerFlow's thread ids";
        let sql = format!("{} ORDER BY 1", parts.join(" UNION "));
        let mut st = self.conn.prepare(&sql).map_err(q(what))?;
        let mut rows = st.query([]).map_err(q(what))?;
        while let Some(r) = rows.next().map_err(q(what))? {
            if let AppValue::Text(id) = value(r.get_ref(0).map_err(q(what))?, ColumnKind::Text) {
                f(id)?;
            }
        }
        Ok(())
    }

    fn app_row(&self, table: &AppTable, key: &[AppValue]) -> Result<Option<AppRow>, StoreError> {
        let sql = format!(
            "SELECT {} FROM {} WHERE {}",
            columns(table),
            ident(table.name),
            key_match(table, 1)
        );
        let params: Vec<Value> = key.iter().map(stored).collect();
        let mut found = None;
        self.rows(&sql, &params, table, &mut |r| {
            found.get_or_insert(r);
            Ok(())
        })?;
        Ok(found)
    }

    fn insert_app_row(&self, table: &AppTable, row: &AppRow) -> Result<(), StoreError> {
        let marks = (1..=table.columns.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({marks})",
            ident(table.name),
            columns(table)
        );
        let params: Vec<Value> = row.0.iter().map(stored).collect();
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| st.execute(params_from_iter(params)))
            .map(|_| ())
            .map_err(|e| StoreError::Query {
                what: format!("inserting a row into DeerFlow's {}", table.name),
                reason: e.to_string(),
            })
    }

    fn update_app_row(&self, table: &AppTable, row: &AppRow) -> Result<(), StoreError> {
        let n = table.columns.len();
        let set = table
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{} = ?{}", ident(&c.name), i + 1))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "UPDATE {} SET {set} WHERE {}",
            ident(table.name),
            key_match(table, n + 1)
        );
        let mut params: Vec<Value> = row.0.iter().map(stored).collect();
        params.extend(table.key_of(row).iter().map(stored));
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| st.execute(params_from_iter(params)))
            .map(|_| ())
            .map_err(|e| StoreError::Query {
                what: format!("replacing a row of DeerFlow's {}", table.name),
                reason: e.to_string(),
            })
    }

    fn delete_app_thread_rows(&self, table: &AppTable, thread_id: &str) -> Result<u64, StoreError> {
        let Some(c) = table.thread else {
            return Ok(0);
        };
        let sql = format!(
            "DELETE FROM {} WHERE {} = ?1",
            ident(table.name),
            ident(&table.columns[c].name)
        );
        self.conn
            .execute(&sql, [thread_id])
            .map(|n| n as u64)
            .map_err(q("deleting a thread's DeerFlow rows"))
    }

    /// SQLite needs nothing: an `INTEGER PRIMARY KEY` hands out max(rowid) + 1, and an
    /// `AUTOINCREMENT` table's `sqlite_sequence` follows explicit ids by itself.
    fn advance_sequences(&self, _table: &AppTable) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_map_as_sqlalchemy_declares_them() {
        assert_eq!(kind("DATETIME"), Some(ColumnKind::Time));
        assert_eq!(kind("JSON"), Some(ColumnKind::Json));
        assert_eq!(kind("BOOLEAN"), Some(ColumnKind::Bool));
        assert_eq!(kind("VARCHAR(64)"), Some(ColumnKind::Text));
        assert_eq!(kind("INTEGER"), Some(ColumnKind::Integer));
        assert_eq!(kind("BLOB"), None);
    }

    #[test]
    fn deerflow_fixture_rows_read_and_round_trip() {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/sqlite/deerflow_app.db");
        let store = SqliteStore::open_app_read_only(&fixture).unwrap_or_else(|e| panic!("{e}"));
        let tables = store.app_tables().unwrap_or_else(|e| panic!("{e}"));
        assert!(tables.iter().all(|t| t.name != "alembic_version"));
        let runs = tables.iter().find(|t| t.name == "runs").cloned();
        let runs = runs.unwrap_or_else(|| panic!("no runs table"));
        assert_eq!(
            runs.thread.map(|i| runs.columns[i].name.as_str()),
            Some("thread_id")
        );
        let mut n = 0;
        store
            .scan_app_rows(&runs, RowScope::All, &mut |row| {
                let key = runs.key_of(&row);
                let again = store.app_row(&runs, &key)?;
                assert_eq!(again.as_ref(), Some(&row));
                assert!(row.0.iter().any(|v| matches!(v, AppValue::Time(_))));
                n += 1;
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(n > 5, "{n} runs");
        let mut ids = Vec::new();
        store
            .scan_app_thread_ids(&tables, &mut |t| {
                ids.push(t);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ids, sorted);
        assert!(ids.len() >= 11, "{ids:?}");
    }
}
