//! dfck: inspect, verify and migrate LangGraph 1.2 / DeerFlow checkpoint stores without Python.
//!
//! The library reads stores ([`store`]), decodes LangGraph's serializer ([`codec`]) into the
//! checkpoint model ([`model`]), rebuilds state ([`materialize`]) and produces report values
//! ([`inspect`]). It never prints: the binary renders reports ([`render`]) at the edge.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod address;
pub mod bench;
pub mod cli;
pub mod codec;
pub mod config;
pub mod conversation;
pub mod copy;
pub mod diff;
pub mod error;
pub mod explain;
pub mod finding;
pub mod inspect;
pub mod lineage;
pub mod materialize;
pub mod migrate;
pub mod model;
pub mod outcome;
pub mod pool;
pub mod progress;
pub mod prune;
pub mod reclaim;
pub mod redact;
pub mod render;
pub mod savings;
pub mod space;
pub mod store;
pub mod suggest;
pub mod target;
pub mod verify;
pub mod write;
