//! The native engine: dfck's own writer and reader of the LangGraph 1.2 on-disk format, running
//! the channel workload of bench-harness.md §2.6 against memory, SQLite and PostgreSQL.

use super::case::{ChannelCase, WorkerContext};
use serde_json::{Map, Value};

/// Runs one channel case natively and returns its measured fields (everything after the
/// identity fields of [`super::case::channel_base_row`], in DeerFlow's key order, up to and
/// excluding `peak_rss_bytes`), or the error text for a failure row.
pub fn run_channel_case(
    case: &ChannelCase,
    ctx: &WorkerContext,
) -> Result<Map<String, Value>, String> {
    let _ = (case, ctx);
    Err("the native engine is not implemented yet".to_string())
}
