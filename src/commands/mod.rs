//! The commands: each reads (or changes) a store through `dfck_core` and returns a report
//! value that `crate::render` prints. `audit` (what the stored values import, strict mode),
//! `inspect` (store summary, thread listing, state, with
//! `space` and `savings`), `metrics` (the summary's metrics for node_exporter, their file), `conversation` views and `diff`, `verify`, `explain`, the write
//! commands `migrate` (both directions), `prune`, `copy` and `reclaim`.

pub mod audit;
pub mod cache;
pub mod conversation;
pub mod copy;
pub mod deerflow_view;
pub mod delete;
pub mod diff;
pub mod explain;
pub mod inspect;
pub mod maintain;
pub mod metrics;
pub mod migrate;
pub mod prune;
pub mod reclaim;
pub mod savings;
pub mod space;
pub mod summary;
pub mod verify;
pub mod wiring;
