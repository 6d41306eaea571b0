//! DeerFlow's tables row by row in a PostgreSQL store ([`AppRows`], for `dfck copy`): columns,
//! kinds, primary keys and owned sequences from the catalog of the session's schema; values
//! read as text (times as UTC `YYYY-MM-DD HH24:MI:SS.US` whatever the session's time zone)
//! and written as text parameters cast to the column's kind (`timestamptz` from a `+00`
//! time, `json` from its text, which `json` keeps as written). Also a read-only connection
//! to a database holding DeerFlow's tables whether or not LangGraph's are there yet.

use super::PostgresStore;
use super::read::get;
use crate::error::StoreError;
use crate::store::app_copy::{
    AppColumn, AppRow, AppRows, AppTable, AppValue, ColumnKind, RowScope,
};
use tokio_postgres::types::{ToSql, Type};

/// Rows fetched per round trip when a whole table is streamed.
const BATCH: usize = 500;

/// The kind of a column from its type (`format_type` without modifiers); `None`: a type
/// dfck copy does not handle.
fn kind(ty: &str) -> Option<ColumnKind> {
    Some(match ty {
        "text" | "character varying" | "character" | "name" => ColumnKind::Text,
        "integer" | "bigint" | "smallint" => ColumnKind::Integer,
        "double precision" | "real" => ColumnKind::Float,
        "boolean" => ColumnKind::Bool,
        "json" => ColumnKind::Json,
        "jsonb" => ColumnKind::Jsonb,
        "timestamp with time zone" => ColumnKind::Time,
        "timestamp without time zone" => ColumnKind::NaiveTime,
        _ => return None,
    })
}

/// The type a text parameter is cast to for a column of `kind` (assignment casts do the
/// rest: `bigint` to `integer`, `text` to `character varying(n)`).
fn cast(kind: ColumnKind) -> &'static str {
    match kind {
        ColumnKind::Text => "text",
        ColumnKind::Integer => "bigint",
        ColumnKind::Float => "double precision",
        ColumnKind::Bool => "boolean",
        ColumnKind::Json => "json",
        ColumnKind::Jsonb => "jsonb",
        ColumnKind::Time => "timestamptz",
        ColumnKind::NaiveTime => "timestamp",
    }
}

/// An identifier in double quotes (names come from DeerFlow's fixed table list and the
/// catalog, never from input).
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The expression reading a column as text: times as UTC text in DeerFlow's SQLite form
/// (infinite ones as PostgreSQL prints them, which no copy accepts).
fn read_expr(c: &AppColumn) -> String {
    let col = ident(&c.name);
    match c.kind {
        ColumnKind::Time => format!(
            "CASE WHEN isfinite({col}) THEN to_char({col} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') ELSE {col}::text END"
        ),
        ColumnKind::NaiveTime => format!(
            "CASE WHEN isfinite({col}) THEN to_char({col}, 'YYYY-MM-DD HH24:MI:SS.US') ELSE {col}::text END"
        ),
        _ => format!("{col}::text"),
    }
}

/// A value read as text, decoded by its column's kind (kept as text when it does not
/// parse: the copy then refuses it).
fn value(text: Option<String>, kind: ColumnKind) -> AppValue {
    let Some(s) = text else {
        return AppValue::Null;
    };
    match kind {
        ColumnKind::Integer => s.parse().map_or(AppValue::Text(s), AppValue::Int),
        ColumnKind::Float => s.parse().map_or(AppValue::Text(s), AppValue::Float),
        ColumnKind::Bool => match s.as_str() {
            "true" => AppValue::Bool(true),
            "false" => AppValue::Bool(false),
            _ => AppValue::Text(s),
        },
        ColumnKind::Json | ColumnKind::Jsonb => AppValue::Json(s),
        ColumnKind::Time | ColumnKind::NaiveTime => {
            crate::store::app_copy::parse_time(&s).map_or(AppValue::Text(s), AppValue::Time)
        }
        ColumnKind::Text => AppValue::Text(s),
    }
}

/// A value as the text parameter its column's cast reads.
fn param(v: &AppValue) -> Result<Option<String>, StoreError> {
    Ok(match v {
        AppValue::Null => None,
        AppValue::Int(i) => Some(i.to_string()),
        AppValue::Float(x) if x.is_nan() => Some("NaN".into()),
        AppValue::Float(x) if x.is_infinite() => {
            Some(if *x > 0.0 { "Infinity" } else { "-Infinity" }.into())
        }
        AppValue::Float(x) => Some(format!("{x:?}")),
        AppValue::Bool(b) => Some(b.to_string()),
        AppValue::Text(s) | AppValue::Json(s) => Some(s.clone()),
        AppValue::Time(t) => Some(format!("{}+00", crate::time::deerflow_text(*t))),
        AppValue::Blob(_) => {
            return Err(StoreError::Target(
                "a DeerFlow value that is not UTF-8 text cannot be stored in PostgreSQL".into(),
            ));
        }
    })
}

/// The catalog's name for a table of the session's schema, as a `regclass` expression of
/// parameter `$n`.
fn regclass(n: usize) -> String {
    format!("to_regclass(quote_ident(current_schema()) || '.' || quote_ident(${n}))")
}

/// `"k1" = CAST($N AS …) AND …`, numbered from `first`.
fn key_match(t: &AppTable, first: usize) -> String {
    t.key
        .iter()
        .enumerate()
        .map(|(n, &i)| {
            let c = &t.columns[i];
            format!(
                "{} = CAST(${} AS {})",
                ident(&c.name),
                first + n,
                cast(c.kind)
            )
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

impl PostgresStore {
    /// Connects read-only to read DeerFlow's tables (in `schema`, else the default
    /// search_path), whether or not LangGraph's tables exist there (a copy target before
    /// it is set up).
    pub fn open_app_read_only(url: &str, schema: Option<&str>) -> Result<Self, StoreError> {
        let store = Self::connect(url, schema)?;
        store.set_session_limits()?;
        store.begin(schema)?;
        Ok(store)
    }

    fn table(&self, name: &'static str, thread: Option<&str>) -> Result<AppTable, StoreError> {
        let what = "reading DeerFlow's schema";
        let sql = format!(
            "SELECT a.attname::text, format_type(a.atttypid, NULL), a.attidentity::text, \
             coalesce((SELECT k.n FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(att, n) \
             WHERE k.att = a.attnum), 0)::int \
             FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary \
             WHERE a.attrelid = {} AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            regclass(1)
        );
        let mut columns = Vec::new();
        let mut pk: Vec<(i32, usize)> = Vec::new();
        let mut identity_always = false;
        for (i, r) in self.query(what, &sql, &[&name])?.iter().enumerate() {
            let col: String = get(r, 0, what)?;
            let ty: String = get(r, 1, what)?;
            identity_always |= get::<String>(r, 2, what)? == "a";
            let pos: i32 = get(r, 3, what)?;
            if pos > 0 {
                pk.push((pos, i));
            }
            let kind = kind(&ty).ok_or_else(|| {
                StoreError::Target(format!(
                    "DeerFlow's column {name}.{col} is of type {ty}, which dfck copy does not handle"
                ))
            })?;
            columns.push(AppColumn { name: col, kind });
        }
        pk.sort_unstable();
        let key = if pk.is_empty() {
            (0..columns.len()).collect()
        } else {
            pk.into_iter().map(|(_, i)| i).collect()
        };
        let sql = format!(
            "SELECT s.oid::regclass::text, a.attname::text FROM pg_depend d \
             JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S' \
             JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid \
             WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass \
             AND d.deptype IN ('a', 'i') AND d.refobjid = {} ORDER BY 1",
            regclass(1)
        );
        let mut sequences = Vec::new();
        for r in self.query(what, &sql, &[&name])? {
            let seq: String = get(&r, 0, what)?;
            let col: String = get(&r, 1, what)?;
            if let Some(i) = columns.iter().position(|c| c.name == col) {
                sequences.push((seq, i));
            }
        }
        let thread = thread.and_then(|t| columns.iter().position(|c| c.name == t));
        Ok(AppTable {
            name,
            columns,
            key,
            thread,
            sequences,
            identity_always,
        })
    }

    fn select(t: &AppTable) -> String {
        let exprs: Vec<String> = t.columns.iter().map(read_expr).collect();
        format!("SELECT {} FROM {}", exprs.join(", "), ident(t.name))
    }

    fn app_value_row(t: &AppTable, r: &tokio_postgres::Row) -> Result<AppRow, StoreError> {
        let what = "reading DeerFlow's rows";
        let mut values = Vec::with_capacity(t.columns.len());
        for (i, c) in t.columns.iter().enumerate() {
            values.push(value(get(r, i, what)?, c.kind));
        }
        Ok(AppRow(values))
    }

    /// Runs a statement with text parameters; the rows it affected.
    fn execute_text(
        &self,
        what: &str,
        sql: &str,
        params: &[Option<String>],
    ) -> Result<u64, StoreError> {
        let typed: Vec<(&(dyn ToSql + Sync), Type)> = params
            .iter()
            .map(|p| (p as &(dyn ToSql + Sync), Type::TEXT))
            .collect();
        self.rt
            .block_on(self.client.execute_typed(sql, &typed))
            .map_err(|e| self.err(what, e))
    }
}

impl AppRows for PostgresStore {
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
        let what = "reading DeerFlow's rows";
        let select = Self::select(table);
        match (scope, &thread) {
            (RowScope::Thread(id), Some(c)) => {
                let sql = format!("{select} WHERE {c} = $1 ORDER BY {order}");
                for r in self.query(what, &sql, &[&id])? {
                    f(Self::app_value_row(table, &r)?)?;
                }
                Ok(())
            }
            (RowScope::All, _) | (RowScope::NoThread, Some(_)) => {
                let filter = match (scope, &thread) {
                    (RowScope::NoThread, Some(c)) => format!(" WHERE {c} IS NULL"),
                    _ => String::new(),
                };
                let sql = format!("{select}{filter} ORDER BY {order}");
                self.cursor(what, &sql, &[], BATCH, &mut |r| {
                    f(Self::app_value_row(table, r)?)
                })
            }
            (_, None) => Ok(()),
        }
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
                    "SELECT {c}::text FROM {} WHERE {c} IS NOT NULL",
                    ident(t.name)
                ))
            })
            .collect();
        if parts.is_empty() {
            return Ok(());
        }
        let what = "reading DeerFlow's thread ids";
        let sql = format!(
            "SELECT t FROM ({}) u(t) ORDER BY t COLLATE \"C\"",
            parts.join(" UNION ")
        );
        self.cursor(what, &sql, &[], BATCH * 10, &mut |r| f(get(r, 0, what)?))
    }

    fn app_row(&self, table: &AppTable, key: &[AppValue]) -> Result<Option<AppRow>, StoreError> {
        let sql = format!("{} WHERE {}", Self::select(table), key_match(table, 1));
        let params = key.iter().map(param).collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&(dyn ToSql + Sync)> =
            params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let rows = self.query("reading a DeerFlow row", &sql, &refs)?;
        rows.first()
            .map(|r| Self::app_value_row(table, r))
            .transpose()
    }

    fn insert_app_row(&self, table: &AppTable, row: &AppRow) -> Result<(), StoreError> {
        let values = table
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| format!("CAST(${} AS {})", i + 1, cast(c.kind)))
            .collect::<Vec<_>>()
            .join(", ");
        let names = table
            .columns
            .iter()
            .map(|c| ident(&c.name))
            .collect::<Vec<_>>()
            .join(", ");
        let overriding = if table.identity_always {
            " OVERRIDING SYSTEM VALUE"
        } else {
            ""
        };
        let sql = format!(
            "INSERT INTO {} ({names}){overriding} VALUES ({values})",
            ident(table.name)
        );
        let params = row.0.iter().map(param).collect::<Result<Vec<_>, _>>()?;
        let what = format!("inserting a row into DeerFlow's {}", table.name);
        self.execute_text(&what, &sql, &params).map(|_| ())
    }

    fn update_app_row(&self, table: &AppTable, row: &AppRow) -> Result<(), StoreError> {
        let n = table.columns.len();
        let set = table
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{} = CAST(${} AS {})", ident(&c.name), i + 1, cast(c.kind)))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "UPDATE {} SET {set} WHERE {}",
            ident(table.name),
            key_match(table, n + 1)
        );
        let mut params = row.0.iter().map(param).collect::<Result<Vec<_>, _>>()?;
        for k in table.key_of(row) {
            params.push(param(&k)?);
        }
        let what = format!("replacing a row of DeerFlow's {}", table.name);
        self.execute_text(&what, &sql, &params).map(|_| ())
    }

    fn delete_app_thread_rows(&self, table: &AppTable, thread_id: &str) -> Result<u64, StoreError> {
        let Some(c) = table.thread else {
            return Ok(0);
        };
        let sql = format!(
            "DELETE FROM {} WHERE {} = $1",
            ident(table.name),
            ident(&table.columns[c].name)
        );
        self.execute_text(
            "deleting a thread's DeerFlow rows",
            &sql,
            &[Some(thread_id.to_owned())],
        )
    }

    fn advance_sequences(&self, table: &AppTable) -> Result<(), StoreError> {
        for (seq, col) in &table.sequences {
            // Never backwards: only when the table holds a value past the sequence's last.
            let sql = format!(
                "SELECT setval(to_regclass($1), x.m) FROM (SELECT max({})::bigint AS m FROM {}) x \
                 WHERE x.m IS NOT NULL AND x.m > coalesce(pg_sequence_last_value(to_regclass($1)), 0)",
                ident(&table.columns[*col].name),
                ident(table.name)
            );
            self.query("advancing DeerFlow's sequences", &sql, &[seq])?;
        }
        Ok(())
    }
}
