//! dfck's benchmark harness: the paired full/delta channel benchmark, the production-shaped
//! benchmark, their case models and JSONL rows, and the summarizers. The library computes rows
//! and summaries; the `dfck` command line parses flags and prints (through the
//! [`controller::Reporter`] it implements).
//!
//! Layout: [`case`] (case models and the identity every row carries), [`rows`] (the typed
//! JSONL rows: their field order is the schema, see docs/bench-rows.md), [`error`]
//! ([`error::BenchError`]), [`stats`] (DeerFlow's statistics), [`digest`] (correctness
//! digests), [`messages`] (LangChain messages as stored), [`native`] (dfck's own
//! LangGraph-format writer as the system under test; its SQL lives in `crate::savers`),
//! [`production`] (the production-shaped workload, reads and replays), [`summarize`] and
//! [`plot`] (paired summaries and SVG figures), [`channels`] (matrix, cap, gate), [`controller`]
//! (child processes and the runner loop, reporting to a [`controller::Reporter`]),
//! [`launcher`] (how children start, the identity probe, worker-script lookup), [`mod@env`]
//! (identity, RSS, redaction), [`pyfmt`] (Python number formatting) and [`worker`] (the child
//! side). The library prints nothing.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

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
pub mod savers;
pub mod stats;
pub mod summarize;
pub mod worker;
