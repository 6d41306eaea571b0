//! The connections a store-changing command hands the write engine, by backend: one place
//! for the per-backend rules of `--jobs` and `--backup`.

use crate::error::Error;
use crate::store::postgres::PostgresStore;
use crate::store::sqlite::SqliteStore;
use crate::target::Target;
use crate::write::Connections;

/// Opens the engine's connections on `target` and runs the backend's half of a command.
/// SQLite has one writer at a time (no `--jobs`) and a spare connection that copies WAL
/// frames into the file in the background; PostgreSQL opens one connection per job and
/// has no `--backup` (pg_dump does that).
pub(super) fn with_connections<R>(
    target: &Target,
    jobs: u16,
    backup: bool,
    sqlite: impl FnOnce(Connections<'_, SqliteStore>) -> Result<R, Error>,
    postgres: impl FnOnce(Connections<'_, PostgresStore>) -> Result<R, Error>,
) -> Result<R, Error> {
    match target {
        Target::Sqlite(path) => {
            if jobs > 1 {
                return Err(Error::Usage(
                    "--jobs applies to PostgreSQL stores (SQLite has one writer at a time)".into(),
                ));
            }
            let store = SqliteStore::open_read_write(path)?;
            let open = || SqliteStore::open_read_write(path);
            sqlite(Connections {
                first: &store,
                open: &open,
                spare: SqliteStore::open_read_write(path).ok(),
            })
        }
        Target::Postgres { url, schema } => {
            if backup {
                return Err(Error::Usage(
                    "--backup is for SQLite stores; back a PostgreSQL store up with pg_dump first"
                        .into(),
                ));
            }
            let open = || PostgresStore::open_read_write(url, schema.as_deref());
            let first = open()?;
            postgres(Connections {
                first: &first,
                open: &open,
                spare: None,
            })
        }
    }
}
