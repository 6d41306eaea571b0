//! Test-only fault injection, compiled in only with the `failpoints` cargo feature (test
//! builds enable it through the crate's self dev-dependency; release builds lack it, and
//! the variable's name is not even in the binary). `DFCK_FAILPOINT` holds one of:
//!
//! - `<command>-abort-after:N` — abort the process (no rollback, no destructors, as a
//!   SIGKILL would) right after the N-th row change of the run;
//! - `free-bytes:N` — pretend the disk holding the store has N bytes free;
//! - `backup-abort` — abort the process right after the `--backup` copy is written under
//!   its temporary name, before it is renamed into place;
//! - `pause-after-listing:MS` — sleep MS milliseconds after a command has listed its threads
//!   (a test deletes a thread meanwhile, as DeerFlow's thread delete would);
//! - `scan-chunk-rows:N` — split every PostgreSQL thread scan that may use several
//!   connections into chunks of N checkpoints, however small the thread;
//! - `scan-helper-fail:N` — the same, and every helper connection's chunk read fails;
//! - `batch-bytes:N` — a batch of threads read together holds N bytes of rows at most
//!   (`0`: every thread is read on its own);
//! - `batch-required:N` — the same budget, and a thread of a batch read on its own (not
//!   with its batch) fails the command, so a test can tell that the batch took every thread;
//! - `hold:PATH` — with every connection of a write command open (inside the first thread
//!   transaction that writes, its locks held; or after `reclaim`'s VACUUM), write the process
//!   id to PATH and wait until a test removes it (at most two minutes): the test meanwhile
//!   looks at the locks dfck holds, or runs a second command against them;
//! - `vacuum-slow:PATH` — SQLite `VACUUM` runs slowly (a pause every thousand steps), and its
//!   first step writes the process id to PATH (a test then signals the process mid-VACUUM).

/// The failpoints of one run (all off without the `failpoints` feature).
#[derive(Debug, Default, Clone, Copy)]
pub struct Failpoints {
    abort_after: Option<usize>,
    free_bytes: Option<u64>,
    abort_after_backup: bool,
    pause_after_listing_ms: Option<u64>,
    scan_chunk_rows: Option<u64>,
    scan_helper_fail: bool,
    batch_bytes: Option<usize>,
    batch_required: bool,
    #[cfg(feature = "failpoints")]
    hold: bool,
}

impl Failpoints {
    /// Reads `DFCK_FAILPOINT` for `command`.
    #[cfg(feature = "failpoints")]
    pub fn from_env(command: &str) -> Self {
        let v = std::env::var("DFCK_FAILPOINT").unwrap_or_default();
        Failpoints {
            abort_after: v
                .strip_prefix(command)
                .and_then(|r| r.strip_prefix("-abort-after:"))
                .and_then(|n| n.parse().ok()),
            free_bytes: v.strip_prefix("free-bytes:").and_then(|n| n.parse().ok()),
            abort_after_backup: v == "backup-abort",
            pause_after_listing_ms: v
                .strip_prefix("pause-after-listing:")
                .and_then(|n| n.parse().ok()),
            scan_chunk_rows: v
                .strip_prefix("scan-chunk-rows:")
                .or_else(|| v.strip_prefix("scan-helper-fail:"))
                .and_then(|n| n.parse().ok()),
            scan_helper_fail: v.starts_with("scan-helper-fail:"),
            batch_bytes: v
                .strip_prefix("batch-bytes:")
                .or_else(|| v.strip_prefix("batch-required:"))
                .and_then(|n| n.parse().ok()),
            batch_required: v.starts_with("batch-required:"),
            hold: v.starts_with("hold:"),
        }
    }

    /// No failpoints in this build.
    #[cfg(not(feature = "failpoints"))]
    pub fn from_env(_command: &str) -> Self {
        Failpoints::default()
    }

    /// Aborts the process when `rows` row changes reach the crash failpoint.
    pub fn after_row(&self, rows: usize) {
        if self.abort_after == Some(rows) {
            std::process::abort();
        }
    }

    /// Pauses after the thread listing, at the listing failpoint.
    pub fn after_listing(&self) {
        if let Some(ms) = self.pause_after_listing_ms {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }

    /// Holds at the `hold:PATH` failpoint: writes the process id to PATH, then waits until
    /// PATH is gone (at most two minutes).
    #[cfg(feature = "failpoints")]
    pub fn hold(&self) {
        if !self.hold {
            return;
        }
        let v = std::env::var("DFCK_FAILPOINT").unwrap_or_default();
        let Some(path) = v.strip_prefix("hold:") else {
            return;
        };
        if std::fs::write(path, std::process::id().to_string()).is_err() {
            return;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while std::path::Path::new(path).exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// No failpoints in this build.
    #[cfg(not(feature = "failpoints"))]
    pub fn hold(&self) {}

    /// `vacuum-slow:PATH`: the file a slowed `VACUUM` announces itself in.
    #[cfg(feature = "failpoints")]
    pub fn slow_vacuum(&self) -> Option<std::path::PathBuf> {
        std::env::var("DFCK_FAILPOINT")
            .ok()
            .and_then(|v| v.strip_prefix("vacuum-slow:").map(std::path::PathBuf::from))
    }

    /// No failpoints in this build.
    #[cfg(not(feature = "failpoints"))]
    pub fn slow_vacuum(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// One step of a slowed `VACUUM`: the first announces the process in `path`; each
    /// pauses.
    pub fn slow_vacuum_step(path: &std::path::Path, first: &mut bool) {
        if std::mem::take(first) {
            let _ = std::fs::write(path, std::process::id().to_string());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    /// Aborts the process at the backup failpoint.
    pub fn after_backup(&self) {
        if self.abort_after_backup {
            std::process::abort();
        }
    }

    /// The free space the guard sees: the injected amount where the store knows its free
    /// space at all.
    pub fn free_space(&self, measured: Option<u64>) -> Option<u64> {
        measured.map(|f| self.free_bytes.unwrap_or(f))
    }

    /// The forced chunk size of a split thread scan, in checkpoints.
    pub fn scan_chunk_rows(&self) -> Option<u64> {
        self.scan_chunk_rows
    }

    /// Whether a split scan's helper connections fail their reads.
    pub fn scan_helper_fail(&self) -> bool {
        self.scan_helper_fail
    }

    /// The byte budget of a batch of threads read together: `default` unless injected.
    pub fn batch_bytes(&self, default: usize) -> usize {
        self.batch_bytes.unwrap_or(default)
    }

    /// Whether a thread of a batch read on its own fails the command.
    pub fn batch_required(&self) -> bool {
        self.batch_required
    }
}
