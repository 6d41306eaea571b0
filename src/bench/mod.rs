//! Benchmarks (bench-harness.md): the paired full/delta channel benchmark, the production-shaped
//! benchmark, their case models and JSONL rows, and the summarizers. The library computes rows
//! and summaries; the CLI (`crate::cli::bench`) parses flags and prints.
//!
//! Layout: [`case`] (case models and the identity part of every row, shared by controller and
//! workers), [`stats`] (DeerFlow's statistics), [`digest`] (correctness digests) and [`native`]
//! (the native engine: dfck's writer of the LangGraph 1.2 format and its savers).

pub mod case;
pub mod digest;
pub mod native;
pub mod stats;
