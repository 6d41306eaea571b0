//! The field lists of the benchmark rows the tests check (docs/bench-rows.md), written once.

/// The identity every v2 channel row starts with (case and environment), in row order.
pub const IDENTITY_KEYS: [&str; 20] = [
    "schema_version",
    "benchmark_version",
    "success",
    "error",
    "profiled",
    "git_sha",
    "python_version",
    "langgraph_version",
    "platform",
    "engine",
    "engine_version",
    "runtime_version",
    "mode",
    "backend",
    "scenario",
    "snapshot_frequency",
    "update_count",
    "payload_bytes",
    "repetition",
    "seed",
];

/// The measured fields of a successful channel row, in row order.
pub const MEASURED_FIELDS: [&str; 32] = [
    "write_total_ms",
    "write_p50_ms",
    "write_p90_ms",
    "write_p95_ms",
    "write_p99_ms",
    "write_p999_ms",
    "write_max_ms",
    "write_mean_ms",
    "write_stddev_ms",
    "write_first_window_ms",
    "write_middle_window_ms",
    "write_last_window_ms",
    "warm_read_ms",
    "logical_checkpoint_bytes",
    "logical_write_bytes",
    "checkpoint_rows",
    "write_rows",
    "checkpoint_bytes",
    "blob_rows",
    "blob_bytes",
    "write_bytes",
    "storage_stats_error",
    "cold_read_ms",
    "saver_reopen_ms",
    "db_bytes",
    "wal_bytes",
    "shm_bytes",
    "durable_db_bytes",
    "expected_message_count",
    "actual_message_count",
    "content_sha256",
    "reducer_replay_ms",
];

/// What a successful row ends with: the memory peak, where it was read, and the controller's
/// `child_process_ms`.
pub const ROW_TAIL: [&str; 3] = ["peak_rss_bytes", "rss_source", "child_process_ms"];

/// Every key of a successful v2 channel row, in row order.
pub fn v2_keys() -> Vec<&'static str> {
    [&IDENTITY_KEYS[..], &MEASURED_FIELDS, &ROW_TAIL].concat()
}
