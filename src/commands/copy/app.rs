//! DeerFlow's own tables in a copy (docs/copy.md, "DeerFlow's tables"): the check, before
//! anything is written, that the target holds DeerFlow's schema at the source's alembic
//! revision ([`prepare`]); the threads a copy works on ([`thread_ids`]: with `--all`, threads
//! that have DeerFlow rows and no checkpoints too); and one thread's rows in the
//! thread-scoped tables ([`ThreadApp`]): read from the source in the target's form, compared
//! with the target's, inserted and verified inside the thread's transaction. Row values are
//! never printed (credentials are among them): reasons name tables and counts.

use dfck_core::deerflow::AppSchema;
use dfck_core::error::{Error, StoreError};
use dfck_core::store::Store;
use dfck_core::store::app_copy::{AppRow, AppRows, RowScope, TableMap};
use dfck_core::write::{ApplyContext, Refusal};

/// What a copy does with DeerFlow's tables, decided before any row moves.
pub enum AppSetup {
    /// The source holds no DeerFlow tables: LangGraph's tables only.
    Absent,
    /// `--checkpoints-only`: the source's DeerFlow tables are left behind.
    Left(Vec<String>),
    /// Copied, table by table.
    Copy(AppCopy),
}

/// DeerFlow's tables of the source matched with the target's.
pub struct AppCopy {
    /// The alembic revision both hold.
    pub revision: Option<String>,
    /// Every table of the source but `alembic_version`, in fill order
    /// ([`dfck_core::deerflow::TABLES`]).
    pub maps: Vec<TableMap>,
}

/// Whether `schema` is DeerFlow's: a revision, or its thread list.
fn is_deerflow(schema: &AppSchema) -> bool {
    schema.revision.is_some() || schema.lists_threads()
}

fn app_schema(store: &dyn Store) -> Result<Option<AppSchema>, StoreError> {
    match store.app() {
        Some(app) => Ok(Some(app.app_schema()?).filter(is_deerflow)),
        None => Ok(None),
    }
}

/// The source's DeerFlow tables when it has any (`None`: a LangGraph store only).
pub fn source_schema(source: &dyn Store) -> Result<Option<AppSchema>, StoreError> {
    app_schema(source)
}

/// Checks the target (`target`: a connection reading its DeerFlow tables; `None`: it does
/// not exist yet) against the source's DeerFlow schema `schema`: same alembic revision,
/// same tables and columns. Errors end the copy before anything is written (exit 2).
pub fn prepare(
    source: &dyn Store,
    schema: &AppSchema,
    target: Option<&dyn Store>,
    shown: &str,
) -> Result<AppCopy, Error> {
    let revision = |r: &Option<String>| r.clone().unwrap_or_else(|| "none recorded".into());
    let want = revision(&schema.revision);
    let target_schema = match target {
        Some(t) => app_schema(t)?,
        None => None,
    };
    let Some(target_schema) = target_schema else {
        return Err(StoreError::Target(format!(
            "{shown} holds no DeerFlow tables, and the source holds DeerFlow's schema at alembic revision {want}: start DeerFlow once against the target so that it creates them, or pass --checkpoints-only to copy LangGraph's checkpoints alone"
        ))
        .into());
    };
    if target_schema.revision != schema.revision {
        let newer = schema
            .revision
            .as_deref()
            .is_some_and(|r| target_schema.at_least(r));
        let what = if newer {
            "the target is newer: start its DeerFlow version once against (a copy of) the source first, so that both are at the same revision"
        } else {
            "start DeerFlow once against the target (the version that wrote the source, which migrates it) so that both are at the same revision"
        };
        return Err(StoreError::Target(format!(
            "DeerFlow's schema differs: the source is at alembic revision {want}, the target ({shown}) at {}; {what}",
            revision(&target_schema.revision)
        ))
        .into());
    }
    let sources = source.app_rows().map(|a| a.app_tables()).transpose()?;
    let targets = target
        .and_then(|t| t.app_rows())
        .map(|a| a.app_tables())
        .transpose()?;
    let (Some(sources), Some(mut targets)) = (sources, targets) else {
        return Err(StoreError::Target("DeerFlow's tables cannot be read here".into()).into());
    };
    let mut maps = Vec::with_capacity(sources.len());
    for s in sources {
        let Some(i) = targets.iter().position(|t| t.name == s.name) else {
            return Err(StoreError::Target(format!(
                "{}: start DeerFlow once against the target so that its schema is complete",
                dfck_core::store::app_copy::AppCopyError::MissingTable { table: s.name }
            ))
            .into());
        };
        let t = targets.swap_remove(i);
        maps.push(TableMap::new(s, t).map_err(|e| StoreError::Target(e.to_string()))?);
    }
    Ok(AppCopy {
        revision: schema.revision.clone(),
        maps,
    })
}

/// The threads a copy works on: the given ones (each once; each must have checkpoints or,
/// when DeerFlow's tables are copied, rows in a thread-scoped table), or every thread with
/// checkpoints — and, with `app`, every thread DeerFlow's thread-scoped tables name —
/// sorted.
pub fn thread_ids(
    source: &dyn Store,
    app: Option<&AppCopy>,
    given: &[String],
) -> Result<Vec<String>, StoreError> {
    let rows = app.and_then(|a| source.app_rows().map(|r| (a, r)));
    let Some((app, rows)) = rows else {
        return dfck_core::store::select_threads(source, given);
    };
    if !given.is_empty() {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for t in given.iter().filter(|t| seen.insert(t.as_str())) {
            if source.namespaces(t)?.is_empty() && !has_rows(app, rows, t)? {
                return Err(dfck_core::store::thread_not_found(source, t, ""));
            }
            out.push(t.clone());
        }
        return Ok(out);
    }
    let mut ids = std::collections::BTreeSet::new();
    source.scan_thread_ids(&mut |t| {
        ids.insert(t);
        Ok(())
    })?;
    let tables: Vec<_> = app.maps.iter().map(|m| m.source.clone()).collect();
    rows.scan_app_thread_ids(&tables, &mut |t| {
        ids.insert(t);
        Ok(())
    })?;
    Ok(ids.into_iter().collect())
}

fn has_rows(app: &AppCopy, rows: &dyn AppRows, thread_id: &str) -> Result<bool, StoreError> {
    let mut any = false;
    for m in app.maps.iter().filter(|m| m.source.thread.is_some()) {
        rows.scan_app_rows(&m.source, RowScope::Thread(thread_id), &mut |_| {
            any = true;
            Ok(())
        })?;
        if any {
            return Ok(true);
        }
    }
    Ok(false)
}

/// One thread's rows in DeerFlow's thread-scoped tables, as the target stores them.
pub struct ThreadApp {
    /// Per table of [`AppCopy::maps`]: the rows (none for tables without a thread column).
    rows: Vec<Vec<AppRow>>,
    /// Per table: the rows' fingerprints, sorted.
    prints: Vec<Vec<u128>>,
}

/// How the target's rows of a thread compare with the source's.
pub enum AppState {
    /// The target has none.
    Absent,
    /// The same rows.
    Identical,
    /// Different rows: why.
    Differs(String),
}

/// The fingerprints the target's rows of a thread must show: per table, sorted.
pub type AppPrints = Vec<Vec<u128>>;

impl ThreadApp {
    /// Reads the thread's rows from the source, each in the target's column order and
    /// kinds; a value the target cannot hold refuses the thread.
    pub fn load(
        app: &AppCopy,
        source: &dyn AppRows,
        thread_id: &str,
    ) -> Result<Result<Self, Refusal>, StoreError> {
        let mut rows = Vec::with_capacity(app.maps.len());
        let mut prints = Vec::with_capacity(app.maps.len());
        let mut bad = None;
        for m in &app.maps {
            let mut these = Vec::new();
            source.scan_app_rows(&m.source, RowScope::Thread(thread_id), &mut |r| {
                match m.adopt(r) {
                    Ok(r) => these.push(r),
                    Err(e) => {
                        bad.get_or_insert_with(|| e.to_string());
                    }
                }
                Ok(())
            })?;
            let mut p: Vec<u128> = these.iter().map(|r| r.fingerprint(&m.target)).collect();
            p.sort_unstable();
            prints.push(p);
            rows.push(these);
        }
        Ok(match bad {
            Some(why) => Err(Refusal(why)),
            None => Ok(ThreadApp { rows, prints }),
        })
    }

    /// No rows in any table.
    pub fn is_empty(&self) -> bool {
        self.rows.iter().all(Vec::is_empty)
    }

    /// (table, rows) of the tables holding any, in fill order.
    pub fn counts(&self, app: &AppCopy) -> Vec<(String, u64)> {
        app.maps
            .iter()
            .zip(&self.rows)
            .filter(|(_, r)| !r.is_empty())
            .map(|(m, r)| (m.name().to_owned(), r.len() as u64))
            .collect()
    }

    /// Bytes of the rows, roughly.
    pub fn bytes(&self) -> u64 {
        self.rows.iter().flatten().map(AppRow::bytes).sum()
    }

    /// The fingerprints the copy must show.
    pub fn prints(&self) -> &AppPrints {
        &self.prints
    }

    /// How the target's rows of the thread compare with these.
    pub fn state(
        &self,
        app: &AppCopy,
        target: &dyn AppRows,
        thread_id: &str,
    ) -> Result<AppState, StoreError> {
        let got = target_prints(app, target, thread_id)?;
        if got.iter().all(Vec::is_empty) {
            return Ok(AppState::Absent);
        }
        Ok(match difference(app, &self.prints, &got) {
            None => AppState::Identical,
            Some(why) => AppState::Differs(why),
        })
    }

    /// Inside the thread's transaction: with `replace`, deletes the target's rows of the
    /// thread in every thread-scoped table first; inserts the rows; moves the sequences past
    /// the ids copied.
    pub fn insert(
        self,
        app: &AppCopy,
        target: &dyn AppRows,
        thread_id: &str,
        replace: bool,
        cx: &ApplyContext,
    ) -> Result<(), Refusal> {
        let e = |e: StoreError| Refusal(e.to_string());
        if replace {
            for m in app.maps.iter().filter(|m| m.target.thread.is_some()) {
                if target
                    .delete_app_thread_rows(&m.target, thread_id)
                    .map_err(e)?
                    > 0
                {
                    cx.row_written();
                }
            }
        }
        for (m, rows) in app.maps.iter().zip(self.rows) {
            if rows.is_empty() {
                continue;
            }
            for r in &rows {
                target.insert_app_row(&m.target, r).map_err(|err| {
                    let hint = if err.to_string().contains("foreign key") {
                        "; copy with --all, which brings the rows outside threads (channel connections, users) first"
                    } else {
                        ""
                    };
                    Refusal(format!("{err}{hint}"))
                })?;
                cx.row_written();
            }
            target.advance_sequences(&m.target).map_err(e)?;
        }
        Ok(())
    }
}

/// The target's fingerprints of a thread's rows, per table, sorted.
fn target_prints(
    app: &AppCopy,
    target: &dyn AppRows,
    thread_id: &str,
) -> Result<AppPrints, StoreError> {
    let mut out = Vec::with_capacity(app.maps.len());
    for m in &app.maps {
        let mut p = Vec::new();
        if m.target.thread.is_some() {
            target.scan_app_rows(&m.target, RowScope::Thread(thread_id), &mut |r| {
                p.push(m.target.fingerprint(&r));
                Ok(())
            })?;
        }
        p.sort_unstable();
        out.push(p);
    }
    Ok(out)
}

/// Why `got` differs from `want`, table by table (counts only), or `None`.
fn difference(app: &AppCopy, want: &AppPrints, got: &AppPrints) -> Option<String> {
    let tables: Vec<String> = app
        .maps
        .iter()
        .zip(want.iter().zip(got))
        .filter(|(_, (w, g))| w != g)
        .map(|(m, (w, g))| {
            let missing = w.iter().filter(|p| g.binary_search(p).is_err()).count();
            format!(
                "{}: {missing} of the source's {} rows not among the target's {}",
                m.name(),
                w.len(),
                g.len()
            )
        })
        .collect();
    (!tables.is_empty()).then(|| format!("DeerFlow's rows differ: {}", tables.join(", ")))
}

/// Inside the transaction, after the inserts: the target's rows of the thread must
/// fingerprint as the source's, table by table.
pub fn verify(
    app: &AppCopy,
    target: &dyn AppRows,
    thread_id: &str,
    want: &AppPrints,
) -> Result<(), Refusal> {
    let got = target_prints(app, target, thread_id)
        .map_err(|e| Refusal(format!("verification failed: {e}")))?;
    match difference(app, want, &got) {
        None => Ok(()),
        Some(why) => Err(Refusal(format!(
            "verification failed: the copy differs from the source ({why})"
        ))),
    }
}

/// (table, rows) pairs as one JSON object.
pub fn table_counts<S: serde::Serializer>(rows: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(rows.len()))?;
    for (t, n) in rows {
        m.serialize_entry(t, n)?;
    }
    m.end()
}
