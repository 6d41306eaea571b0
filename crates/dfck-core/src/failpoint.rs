//! Test-only fault injection, compiled in only with the `failpoints` cargo feature (test
//! builds enable it through the crate's self dev-dependency; release builds lack it, and
//! the variable's name is not even in the binary). `DFCK_FAILPOINT` holds one or more of
//! these, separated by commas:
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
//! - `group-threads:N` — a group transaction of the write engine takes N threads at most;
//! - `whole-bytes:N` — a write command holds a thread's values in memory only up to N stored
//!   bytes (`0`: every thread is read back one checkpoint at a time);
//! - `scan-body-bytes:N` — the store summary's scan reads checkpoint bodies of N bytes at
//!   most (a thread with a larger one takes the point reads);
//! - `summary-wait-bytes:N` — the store summary keeps a thread's full rows waiting for its
//!   first delta row up to N bytes (`0`: each is decoded at once);
//! - `report-held:1` — the store summary, `prune` and `migrate` hold every thread's report
//!   before rendering, as the formats and options that need them all do, instead of
//!   streaming;
//! - `spool-bytes:N` — a streamed report keeps N bytes of its rows in memory before it moves
//!   them to a temporary file (`0`: straight to the file);
//! - `spool-fail:N` — the N-th row a streamed report keeps fails to be written, as in a full
//!   temporary directory;
//! - `summary-pending-bytes:N` — the store summary's scan keeps N bytes of rows for its
//!   counting thread before it counts them itself (`0`: every row at once);
//! - `short-rows:N` — a PostgreSQL read of one thread's rows takes one statement only when
//!   they are N rows at most (`0`: every such read goes through a cursor);
//! - `summary-fetch-rows:N` — PostgreSQL's summary scan fetches N rows at a time (threads cut
//!   across fetches);
//! - `savepoint-fail:N` — the N-th thread savepoint of a PostgreSQL group transaction is
//!   sent as a statement the server refuses (its answer is not waited for);
//! - `together-fail:N` — the N-th deletion of threads written together (a PostgreSQL group
//!   without savepoints) is sent as a statement the server refuses;
//! - `together-unverified:N` — the N-th group written together fails its verification, as
//!   a thread whose rows are not what its plan said does;
//! - `thread-page:N` — a whole-store listing of threads reads pages of N thread ids (so a
//!   test's few threads span several pages);
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
    group_threads: Option<usize>,
    whole_bytes: Option<u64>,
    scan_body_bytes: Option<u64>,
    summary_wait_bytes: Option<u64>,
    report_held: bool,
    spool_bytes: Option<usize>,
    spool_fail: Option<u64>,
    thread_page: Option<usize>,
    summary_pending_bytes: Option<u64>,
    short_rows: Option<usize>,
    summary_fetch_rows: Option<usize>,
    savepoint_fail: Option<usize>,
    together_fail: Option<usize>,
    together_unverified: Option<usize>,
    later_most: Option<usize>,
    #[cfg(feature = "failpoints")]
    hold: bool,
}

impl Failpoints {
    /// Reads `DFCK_FAILPOINT` for `command`: one failpoint, or several separated by commas.
    #[cfg(feature = "failpoints")]
    pub fn from_env(command: &str) -> Self {
        let v = std::env::var("DFCK_FAILPOINT").unwrap_or_default();
        let entries: Vec<&str> = v.split(',').collect();
        let find = |prefix: &str| entries.iter().find_map(|e| e.strip_prefix(prefix));
        fn parse<T: std::str::FromStr>(v: Option<&str>) -> Option<T> {
            v.and_then(|n| n.parse().ok())
        }
        Failpoints {
            abort_after: find(command)
                .and_then(|r| r.strip_prefix("-abort-after:"))
                .and_then(|n| n.parse().ok()),
            free_bytes: parse(find("free-bytes:")),
            abort_after_backup: entries.contains(&"backup-abort"),
            pause_after_listing_ms: parse(find("pause-after-listing:")),
            scan_chunk_rows: parse(find("scan-chunk-rows:"))
                .or_else(|| parse(find("scan-helper-fail:"))),
            scan_helper_fail: find("scan-helper-fail:").is_some(),
            batch_bytes: parse(find("batch-bytes:")).or_else(|| parse(find("batch-required:"))),
            batch_required: find("batch-required:").is_some(),
            group_threads: parse(find("group-threads:")),
            whole_bytes: parse(find("whole-bytes:")),
            scan_body_bytes: parse(find("scan-body-bytes:")),
            summary_wait_bytes: parse(find("summary-wait-bytes:")),
            report_held: find("report-held:").is_some(),
            spool_bytes: parse(find("spool-bytes:")),
            spool_fail: parse(find("spool-fail:")),
            thread_page: parse(find("thread-page:")),
            summary_pending_bytes: parse(find("summary-pending-bytes:")),
            short_rows: parse(find("short-rows:")),
            summary_fetch_rows: parse(find("summary-fetch-rows:")),
            savepoint_fail: parse(find("savepoint-fail:")),
            together_fail: parse(find("together-fail:")),
            together_unverified: parse(find("together-unverified:")),
            later_most: parse(find("later-most:")),
            hold: find("hold:").is_some(),
        }
    }

    /// The value of the `prefix` entry of `DFCK_FAILPOINT`.
    #[cfg(feature = "failpoints")]
    fn entry(prefix: &str) -> Option<String> {
        let v = std::env::var("DFCK_FAILPOINT").ok()?;
        v.split(',')
            .find_map(|e| e.strip_prefix(prefix))
            .map(str::to_owned)
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
        let Some(path) = Self::entry("hold:") else {
            return;
        };
        if std::fs::write(&path, std::process::id().to_string()).is_err() {
            return;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while std::path::Path::new(&path).exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// No failpoints in this build.
    #[cfg(not(feature = "failpoints"))]
    pub fn hold(&self) {}

    /// `vacuum-slow:PATH`: the file a slowed `VACUUM` announces itself in.
    #[cfg(feature = "failpoints")]
    pub fn slow_vacuum(&self) -> Option<std::path::PathBuf> {
        Self::entry("vacuum-slow:").map(std::path::PathBuf::from)
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

    /// The most threads one group transaction of the write engine takes: `default` unless
    /// injected.
    pub fn group_threads(&self, default: usize) -> usize {
        self.group_threads.unwrap_or(default).max(1)
    }

    /// The stored bytes up to which a write command holds a thread's values: `default`
    /// unless injected.
    pub fn whole_thread_bytes(&self, default: u64) -> u64 {
        self.whole_bytes.unwrap_or(default)
    }

    /// The largest checkpoint body the store summary reads in its scan: `default` unless
    /// injected.
    pub fn scan_body_bytes(&self, default: u64) -> u64 {
        self.scan_body_bytes.unwrap_or(default)
    }

    /// The bytes of full rows the store summary keeps waiting for a thread's first delta
    /// row: `default` unless injected.
    pub fn summary_wait_bytes(&self, default: u64) -> u64 {
        self.summary_wait_bytes.unwrap_or(default)
    }

    /// Whether a whole-store report holds every thread instead of streaming them.
    pub fn report_held(&self) -> bool {
        self.report_held
    }

    /// The bytes a streamed report keeps in memory: `default` unless injected.
    pub fn spool_bytes(&self, default: usize) -> usize {
        self.spool_bytes.unwrap_or(default)
    }

    /// The row (counted from 1) whose writing into a streamed report's spool fails.
    pub fn spool_fail(&self) -> Option<u64> {
        self.spool_fail
    }

    /// The bytes of rows the store summary's scan keeps for its counting thread:
    /// `default` unless injected.
    pub fn summary_pending_bytes(&self, default: u64) -> u64 {
        self.summary_pending_bytes.unwrap_or(default)
    }

    /// Thread ids in a page of a whole-store listing: `default` unless injected.
    pub fn thread_page(&self, default: usize) -> usize {
        self.thread_page.unwrap_or(default).max(1)
    }

    /// Whether a thread of a batch read on its own fails the command.
    pub fn batch_required(&self) -> bool {
        self.batch_required
    }

    /// The most rows a one-statement read of a thread takes: `default` unless injected.
    pub fn short_rows(&self, default: usize) -> usize {
        self.short_rows.unwrap_or(default)
    }

    /// The rows a fetch of PostgreSQL's summary scan takes: `default` unless injected.
    pub fn summary_fetch_rows(&self, default: usize) -> usize {
        self.summary_fetch_rows.unwrap_or(default).max(1)
    }

    /// Whether the `n`-th (from 1) thread savepoint of the run is to fail.
    pub fn savepoint_fails(&self, n: u64) -> bool {
        self.savepoint_fail
            .is_some_and(|k| u64::try_from(k).is_ok_and(|k| k == n))
    }

    /// Whether the `n`-th (from 1) deletion of threads written together is to fail.
    pub fn together_fails(&self, n: u64) -> bool {
        self.together_fail
            .is_some_and(|k| u64::try_from(k).is_ok_and(|k| k == n))
    }

    /// Whether the `n`-th (from 1) group written together is to fail its verification.
    pub fn together_unverified(&self, n: u64) -> bool {
        self.together_unverified
            .is_some_and(|k| u64::try_from(k).is_ok_and(|k| k == n))
    }

    /// The most queries sent ahead a PostgreSQL connection may track at once (`None`: no
    /// bound): more fail the query, so a test sees a list that grows with the threads.
    pub fn later_most(&self) -> Option<usize> {
        self.later_most
    }
}
