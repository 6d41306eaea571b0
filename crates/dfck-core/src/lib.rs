//! dfck's core: everything between a LangGraph checkpoint store and a report, and the write
//! engine, with no command line and no printing.
//!
//! From the store up: [`store`] reads and writes the SQLite and PostgreSQL layouts (the only
//! layer that speaks SQL), [`codec`] decodes LangGraph's serializer, [`model`] turns rows into
//! checkpoints and threads, [`materialize`] rebuilds state by replaying writes, [`lineage`]
//! analyses parent chains and forks into [`finding`]s. [`write`] is the engine every
//! store-changing command runs through (one verified transaction per thread, `--jobs` over
//! [`pool`]). [`deerflow`] knows DeerFlow's own tables beside LangGraph's. Beside them:
//! [`config`] (finding a DeerFlow store from its config), [`strict`] (LangGraph's strict
//! deserialization: the pinned safe set, dfck's denylist), [`target`]
//! (what `--db` names), [`address`] (ids as people type them), [`error`], and the leaves
//! [`failpoint`], [`progress`], [`outcome`], [`redact`], [`suggest`], [`time`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod address;
pub mod codec;
pub mod config;
pub mod deerflow;
pub mod error;
pub mod failpoint;
pub mod finding;
pub mod lineage;
pub mod maintenance;
pub mod materialize;
pub mod model;
pub mod outcome;
pub mod pool;
pub mod progress;
pub mod redact;
pub mod stop;
pub mod store;
pub mod strict;
pub mod suggest;
pub mod target;
pub mod time;
pub mod write;
