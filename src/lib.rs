//! dfck: inspect, verify, convert, prune and copy LangGraph 1.2 / DeerFlow checkpoint stores
//! without Python. This crate is the command layer over [`dfck_core`] (stores, model, state,
//! the write engine) and [`dfck_bench`] (the benchmark harness): [`commands`] run one command
//! each and return its report, [`render`] turns reports into tables, JSON, NDJSON and CSV,
//! [`cli`] parses the command line. Only `render` and the binary print.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
pub mod commands;
pub mod error;
pub mod render;
