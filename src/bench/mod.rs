//! Benchmarks (bench-harness.md): the paired full/delta channel benchmark, the production-shaped
//! benchmark, their case models and JSONL rows, and the summarizers. The library computes rows
//! and summaries; the CLI (`crate::cli::bench`) parses flags and prints.
//!
//! Layout: [`case`] (case models and the identity part of every row, shared by controller and
//! workers), [`stats`] (DeerFlow's statistics), [`digest`] (correctness digests), [`native`]
//! (dfck's own LangGraph-format writer as the system under test), [`production`] (the
//! production-shaped workload, reads and replays), [`summarize`] and [`plot`] (paired summaries
//! and SVG figures), [`channels`] (matrix, cap, gate), [`controller`] (child processes), [`env`]
//! (identity, RSS, redaction) and [`worker`] (the child side, and the v2 channel row schema).

pub mod case;
pub mod channels;
pub mod controller;
pub mod digest;
pub mod env;
pub mod error;
pub mod launcher;
pub mod messages;
pub mod native;
pub mod plot;
pub mod production;
pub mod pyfmt;
pub mod rows;
pub mod stats;
pub mod summarize;
pub mod worker;
