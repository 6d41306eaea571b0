//! The crash matrix of the write commands (see docs/reliability.md): each write command runs
//! on copies of the delta fixtures, SQLite and PostgreSQL, and is killed with SIGKILL at
//! random moments (seeded, spread over the run's measured duration) and at every crash
//! failpoint of a small store. After each kill every thread is either entirely old (its
//! `checkpoints`, writes and blob rows byte-identical to the original) or entirely new (the
//! materialized state at every checkpoint equals the original's); `verify` reports no new
//! error; a re-run finishes; a third run changes nothing. Kills and failpoints run with the
//! write engine's group transactions of one, two, three and the default number of threads
//! (`group-threads:N`): a crash rolls back the whole open group, never part of a thread.
//! On SQLite, as root, a small tmpfs
//! checks that a full disk refuses what does not fit and is not left full.
//!
//! A new write command adds one line to [`COMMANDS`]. The matrix rewrites the `--db` store;
//! `copy`, which writes another store, has its own crash test (`tests/copy_crash.rs`).
//! `DFCK_CRASH_SEED` replays a run;
//! `DFCK_CRASH_KILLS` sets the random kills per fixture.

use crate::common::*;
use rusqlite::Connection;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A write command under test.
struct WriteCommand {
    /// For messages.
    name: &'static str,
    /// The arguments of a run over the whole store (JSON output is added).
    args: &'static [&'static str],
    /// The failpoint prefix (`<failpoint>-abort-after:N`).
    failpoint: &'static str,
    /// The report's counter of threads changed by a run.
    changed: &'static str,
    /// The report's counters that, with `changed`, account for every thread of a finished run.
    finished: &'static [&'static str],
    /// Whether a changed thread must materialize exactly the original states (true for a
    /// format conversion; a prune or copy would check its own postcondition instead).
    keeps_states: bool,
    /// A dry run that must report a changed thread as `skipped` (entirely done, nothing
    /// left to do), or empty.
    settled: &'static [&'static str],
    /// The fixtures of the random kills.
    fixtures: &'static [&'static str],
    /// The fixture the small store of the failpoint sweep is cut from.
    small: &'static str,
    /// Whether a converted checkpoint is in the command's new form (`inspect` listing row).
    new_form: fn(&Json) -> bool,
}

/// One line per write command.
const COMMANDS: &[WriteCommand] = &[
    WriteCommand {
        name: "migrate delta-to-full",
        // The twin fixture holds one thread the real library contaminates: accept its delta view.
        args: &[
            "migrate",
            "delta-to-full",
            "--all",
            "--apply",
            "--accept-delta-view",
        ],
        failpoint: "migrate",
        changed: "converted",
        finished: &["converted", "skipped"],
        keeps_states: true,
        settled: &[],
        fixtures: &["delta_k3", "delta_k10", "deerflow", "mixed"],
        small: "delta_k3",
        new_form: |c| c["mode"] == "full",
    },
    WriteCommand {
        name: "prune --branches",
        args: &["prune", "--all", "--branches", "--apply"],
        failpoint: "prune",
        changed: "pruned",
        finished: &["pruned", "skipped"],
        keeps_states: false,
        settled: &["prune", "--branches"],
        fixtures: &["delta_k3", "retention"],
        small: "delta_k3",
        new_form: |_| true,
    },
    WriteCommand {
        name: "migrate full-to-delta",
        args: &[
            "migrate",
            "full-to-delta",
            "--all",
            "--apply",
            "--snapshot-frequency",
            "3",
        ],
        failpoint: "full-to-delta",
        changed: "done",
        finished: &["done", "skipped"],
        keeps_states: true,
        settled: &[],
        fixtures: &["full", "deerflow"],
        small: "full",
        new_form: |c| c["mode"] == "delta" || c["messages_encoding"] == "snapshot",
    },
];

/// The threads of the small store of the failpoint sweep (a part of each command's `small`
/// fixture).
const SMALL_THREADS: &[&str] = &["t-error", "t-exit", "t-linear"];

/// splitmix64: a seeded generator, enough to spread kill delays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

fn seed() -> u64 {
    std::env::var("DFCK_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x00df_c0c0)
}

fn kills_per_fixture() -> usize {
    std::env::var("DFCK_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6)
}

// ---- stores -------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Backend {
    Sqlite,
    Postgres,
}

/// A private copy of a fixture store.
enum Store {
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    Postgres {
        server: String,
        name: String,
        uri: String,
    },
}

static CREATE_LOCK: Mutex<()> = Mutex::new(());

use crate::common::pg::{connect, runtime};

fn pg_admin(server: &str, sql: &str) {
    let _guard = CREATE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = runtime();
    let admin = connect(&rt, server);
    rt.block_on(async {
        let mut tries = 0;
        loop {
            match admin.batch_execute(sql).await {
                Ok(()) => break,
                Err(e) if tries < 20 => {
                    tries += 1;
                    eprintln!("retrying {sql}: {e}");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => panic!("{sql}: {e}"),
            }
        }
    });
}

impl Store {
    fn fresh(backend: Backend, stem: &str, tag: &str) -> Store {
        match backend {
            Backend::Sqlite => {
                let (dir, path) = temp_copy(&sqlite_fixture(stem));
                Store::Sqlite { _dir: dir, path }
            }
            Backend::Postgres => {
                let server = pg_server().expect("postgres");
                let name = format!("dfck_crash_{stem}_{tag}");
                pg_admin(
                    &server,
                    &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
                );
                pg_admin(
                    &server,
                    &format!("CREATE DATABASE \"{name}\" TEMPLATE \"dfck_{stem}\""),
                );
                let uri = with_db(&server, &name);
                Store::Postgres { server, name, uri }
            }
        }
    }

    /// A copy of `stem` holding only [`SMALL_THREADS`].
    fn small(backend: Backend, stem: &str, tag: &str) -> Store {
        let s = Store::fresh(backend, stem, tag);
        let keep = SMALL_THREADS
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let tables: &[&str] = match backend {
            Backend::Sqlite => &["checkpoints", "writes"],
            Backend::Postgres => &["checkpoints", "checkpoint_writes", "checkpoint_blobs"],
        };
        let sql: String = tables
            .iter()
            .map(|t| format!("DELETE FROM {t} WHERE thread_id NOT IN ({keep});"))
            .collect();
        s.execute(&sql);
        s
    }

    fn target(&self) -> String {
        match self {
            Store::Sqlite { path, .. } => path.to_string_lossy().into_owned(),
            Store::Postgres { uri, .. } => uri.clone(),
        }
    }

    fn execute(&self, sql: &str) {
        match self {
            Store::Sqlite { path, .. } => {
                Connection::open(path).unwrap().execute_batch(sql).unwrap()
            }
            Store::Postgres { uri, .. } => {
                let rt = runtime();
                let c = connect(&rt, uri);
                rt.block_on(c.batch_execute(sql)).unwrap();
            }
        }
    }

    /// Every row of every table, as text, per thread.
    fn rows(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        match self {
            Store::Sqlite { path, .. } => {
                let c = Connection::open(path).unwrap();
                for sql in [
                    "SELECT thread_id, 'c|' || quote(checkpoint_ns) || '|' || quote(checkpoint_id) || '|' || \
                     quote(parent_checkpoint_id) || '|' || quote(type) || '|' || quote(checkpoint) || '|' || \
                     quote(metadata) FROM checkpoints ORDER BY 2",
                    "SELECT thread_id, 'w|' || quote(checkpoint_ns) || '|' || quote(checkpoint_id) || '|' || \
                     quote(task_id) || '|' || quote(task_path) || '|' || quote(idx) || '|' || quote(channel) || \
                     '|' || quote(type) || '|' || quote(value) FROM writes ORDER BY 2",
                ] {
                    let mut st = c.prepare(sql).unwrap();
                    let rows = st
                        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                        .unwrap();
                    for r in rows {
                        let (t, row) = r.unwrap();
                        out.entry(t).or_default().push(row);
                    }
                }
            }
            Store::Postgres { uri, .. } => {
                let rt = runtime();
                let c = connect(&rt, uri);
                for sql in [
                    "SELECT thread_id, concat_ws('|', 'c', checkpoint_ns, checkpoint_id, parent_checkpoint_id, \
                     type, checkpoint::text, metadata::text) FROM checkpoints ORDER BY 2",
                    "SELECT thread_id, concat_ws('|', 'w', checkpoint_ns, checkpoint_id, task_id, idx, channel, \
                     type, encode(blob, 'hex')) FROM checkpoint_writes ORDER BY 2",
                    "SELECT thread_id, concat_ws('|', 'b', checkpoint_ns, channel, version, type, \
                     encode(blob, 'hex')) FROM checkpoint_blobs ORDER BY 2",
                ] {
                    for r in rt.block_on(c.query(sql, &[])).unwrap() {
                        out.entry(r.get(0)).or_default().push(r.get(1));
                    }
                }
            }
        }
        out
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Store::Postgres { server, name, .. } = self {
            if !std::thread::panicking() {
                pg_admin(
                    server,
                    &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
                );
            }
        }
    }
}

// ---- what the original looks like ---------------------------------------------------

fn dfck_at(target: &str, args: &[&str]) -> std::process::Output {
    dfck(target, args)
}

/// Checkpoint ids of a thread, and whether every one is in the form `new_form` accepts.
fn listing(target: &str, thread: &str, new_form: fn(&Json) -> bool) -> (Vec<String>, bool) {
    let j = dfck_json(target, &["inspect", thread, "--format", "json"]);
    let cks = j["checkpoints"].as_array().unwrap();
    (
        cks.iter()
            .map(|c| c["checkpoint_id"].as_str().unwrap().to_owned())
            .collect(),
        cks.iter().all(new_form),
    )
}

/// The materialized values at every checkpoint of a thread.
fn states(target: &str, thread: &str) -> Vec<(String, Json)> {
    listing(target, thread, |_| true)
        .0
        .into_iter()
        .map(|id| {
            let j = dfck_json(
                target,
                &[
                    "inspect",
                    thread,
                    "--state",
                    "--checkpoint",
                    &id,
                    "--format",
                    "json",
                ],
            );
            (id, j["values"].clone())
        })
        .collect()
}

/// The `error` findings of `verify`, as (code, thread, checkpoint).
fn verify_errors(target: &str) -> BTreeSet<String> {
    let out = dfck_at(target, &["verify", "--format", "json"]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "verify: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| format!("{} {} {}", f["code"], f["thread_id"], f["checkpoint_id"]))
        .collect()
}

struct Original {
    rows: BTreeMap<String, Vec<String>>,
    states: BTreeMap<String, Vec<(String, Json)>>,
    errors: BTreeSet<String>,
    /// Rows of a thread already proven new (a conversion writes the same bytes every time,
    /// so each is checked through `inspect` once).
    proven_new: std::cell::RefCell<BTreeSet<(String, Vec<String>)>>,
}

impl Original {
    fn of(store: &Store) -> Original {
        let target = store.target();
        let rows = store.rows();
        let states = rows
            .keys()
            .map(|t| (t.clone(), states(&target, t)))
            .collect();
        Original {
            rows,
            states,
            errors: verify_errors(&target),
            proven_new: Default::default(),
        }
    }
}

fn run_json(cmd: &WriteCommand, target: &str) -> (Json, Option<i32>) {
    let mut args: Vec<&str> = cmd.args.to_vec();
    args.extend(["--format", "json"]);
    let out = dfck_at(target, &args);
    (
        serde_json::from_slice(&out.stdout).unwrap_or(Json::Null),
        out.status.code(),
    )
}

/// The checks after a crash; returns how many threads were new.
fn check_after_crash(cmd: &WriteCommand, store: &Store, orig: &Original, what: &str) -> usize {
    let target = store.target();
    let now = store.rows();
    assert_eq!(
        now.keys().collect::<Vec<_>>(),
        orig.rows.keys().collect::<Vec<_>>(),
        "{what}: the set of threads changed"
    );
    let mut new = 0;
    for (t, rows) in &now {
        if rows == &orig.rows[t] {
            continue;
        }
        new += 1;
        let key = (t.clone(), rows.clone());
        if cmd.keeps_states && !orig.proven_new.borrow().contains(&key) {
            let got = states(&target, t);
            assert!(
                got == orig.states[t],
                "{what}: thread {t} is neither old (rows differ) nor new (states differ)"
            );
            assert!(
                listing(&target, t, cmd.new_form).1,
                "{what}: thread {t} is half written"
            );
            orig.proven_new.borrow_mut().insert(key);
        }
        if !cmd.settled.is_empty() {
            let mut args: Vec<&str> = cmd.settled.to_vec();
            args.extend([t.as_str(), "--format", "json"]);
            let report: Json =
                serde_json::from_slice(&dfck_at(&target, &args).stdout).unwrap_or(Json::Null);
            assert_eq!(
                report["threads"][0]["status"], "skipped",
                "{what}: thread {t} is half done: {report}"
            );
        }
    }
    let errors = verify_errors(&target);
    let fresh: Vec<_> = errors.difference(&orig.errors).collect();
    assert!(fresh.is_empty(), "{what}: new verify errors {fresh:?}");
    // A re-run finishes the job, a third run changes nothing.
    let (report, code) = run_json(cmd, &target);
    assert_eq!(code, Some(0), "{what}: re-run: {report}");
    let accounted: u64 = cmd
        .finished
        .iter()
        .map(|k| report[*k].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        accounted as usize,
        orig.rows.len(),
        "{what}: re-run: {report}"
    );
    let (report, code) = run_json(cmd, &target);
    assert_eq!(code, Some(0), "{what}: third run: {report}");
    assert_eq!(report[cmd.changed], 0, "{what}: third run: {report}");
    new
}

fn spawn(cmd: &WriteCommand, target: &str, failpoint: Option<String>) -> std::process::Child {
    let mut c = crate::common::dfck_command();
    c.arg("--db")
        .arg(target)
        .args(cmd.args)
        .env_remove("DFCK_DB")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match failpoint {
        Some(f) => c.env("DFCK_FAILPOINT", f),
        None => c.env_remove("DFCK_FAILPOINT"),
    };
    c.spawn().unwrap()
}

/// Random SIGKILLs over every fixture; returns (kills that hit a running process, runs
/// that had finished first).
fn random_kills(backend: Backend, rng: &mut Rng) -> (usize, usize, usize) {
    let (mut killed, mut finished, mut new_threads) = (0, 0, 0);
    for cmd in COMMANDS {
        for stem in cmd.fixtures {
            let orig = Original::of(&Store::fresh(backend, stem, "orig"));
            // The run's duration, measured on a copy.
            let probe = Store::fresh(backend, stem, "probe");
            let t0 = Instant::now();
            assert_eq!(
                spawn(cmd, &probe.target(), None).wait().unwrap().code(),
                Some(0)
            );
            let span = t0.elapsed().as_micros() as u64;
            drop(probe);
            for k in 0..kills_per_fixture() {
                let store = Store::fresh(backend, stem, &format!("k{k}"));
                // Over the whole run, and a little past it.
                let delay = Duration::from_micros(rng.below(span + span / 5));
                // Groups of every size: one thread, two, three, and the default.
                let group = match rng.below(4) {
                    0 => None,
                    g => Some(format!("group-threads:{g}")),
                };
                let mut child = spawn(cmd, &store.target(), group.clone());
                std::thread::sleep(delay);
                let _ = child.kill();
                let status = child.wait().unwrap();
                if status.code().is_some() {
                    assert_eq!(status.code(), Some(0), "{} on {stem}", cmd.name);
                    finished += 1;
                } else {
                    killed += 1;
                }
                let what = format!(
                    "{} on {backend:?} {stem} ({group:?}), SIGKILL after {delay:?} of {span} µs",
                    cmd.name
                );
                new_threads += check_after_crash(cmd, &store, &orig, &what);
            }
        }
    }
    (killed, finished, new_threads)
}

/// Every failpoint N of the small store, until a run finishes, with `group` added to the
/// failpoint (the write engine's group size, or nothing); returns the number of failpoints
/// and how many of them left a thread new.
fn failpoint_sweep(backend: Backend, group: Option<&str>) -> (usize, usize) {
    let (mut total, mut with_new) = (0, 0);
    for cmd in COMMANDS {
        let orig = Original::of(&Store::small(backend, cmd.small, "sorig"));
        for n in 1.. {
            let store = Store::small(backend, cmd.small, &format!("s{n}"));
            let mut failpoint = format!("{}-abort-after:{n}", cmd.failpoint);
            if let Some(g) = group {
                failpoint = format!("{failpoint},{g}");
            }
            let status = spawn(cmd, &store.target(), Some(failpoint)).wait().unwrap();
            if status.code() == Some(0) {
                assert!(n > 1, "{}: the failpoint never fired", cmd.name);
                break;
            }
            assert_eq!(status.code(), None, "{}: failpoint {n} kills", cmd.name);
            let what = format!(
                "{} on {backend:?} small store, failpoint {n} ({group:?})",
                cmd.name
            );
            if check_after_crash(cmd, &store, &orig, &what) > 0 {
                with_new += 1;
            }
            total += 1;
        }
    }
    (total, with_new)
}

fn crash_matrix(backend: Backend) {
    let seed = seed();
    let mut rng = Rng(seed ^ backend as u64);
    let t0 = Instant::now();
    let (killed, finished, new) = random_kills(backend, &mut rng);
    // One transaction per thread: a crash after the first commit leaves threads new.
    let (single, single_new) = failpoint_sweep(backend, Some("group-threads:1"));
    // Groups of two: the first group's threads are new once it committed.
    let (pairs, pairs_new) = failpoint_sweep(backend, Some("group-threads:2"));
    // The default group takes the whole small store: a crash rolls every thread back.
    let (grouped, grouped_new) = failpoint_sweep(backend, None);
    assert!(
        single_new > 0 && pairs_new > 0,
        "crashes between committed threads"
    );
    assert!(
        grouped_new < single_new,
        "a crash inside a group rolls its committed threads back: {grouped_new} failpoints \
         left a thread new, {single_new} without groups"
    );
    println!(
        "write crash matrix ({backend:?}, seed {seed}): {} random SIGKILLs ({killed} mid-run, \
         {finished} after the run ended, {new} threads found new), {} failpoints ({single} \
         with a transaction per thread, {single_new} leaving threads new; {pairs} in groups \
         of two, {pairs_new}; {grouped} in one group, {grouped_new}), {:.1?}",
        killed + finished,
        single + pairs + grouped,
        t0.elapsed()
    );
}

#[test]
fn sqlite_write_commands_survive_sigkill_at_any_moment() {
    crash_matrix(Backend::Sqlite);
}

#[test]
fn postgres_write_commands_survive_sigkill_at_any_moment() {
    if pg_server().is_none() {
        return;
    }
    crash_matrix(Backend::Postgres);
}

// ---- full disk ----------------------------------------------------------------------

#[test]
fn a_full_sqlite_disk_refuses_what_does_not_fit_and_is_not_left_full() {
    let cmd = &COMMANDS[0];
    let src = sqlite_fixture("deerflow");
    let size = std::fs::metadata(&src).unwrap().len();
    // Room for the store and a little more: not for twice a thread's growth.
    let Some(fs) = Tmpfs::mount(size + 48 * 1024) else {
        println!("full-disk case skipped: needs root and a tmpfs mount");
        return;
    };
    let db = fs.0.path().join("deerflow.db");
    std::fs::copy(&src, &db).unwrap();
    let (_odir, orig_copy) = temp_copy(&src);
    let orig = Original::of(&Store::Sqlite {
        _dir: tempfile::tempdir().unwrap(),
        path: orig_copy,
    });
    let free_before = free_bytes(fs.0.path());
    let (report, code) = run_json(cmd, &db.to_string_lossy());
    assert_eq!(code, Some(1), "{report}");
    let refused: Vec<&Json> = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "refused")
        .collect();
    assert!(!refused.is_empty(), "{report}");
    for t in &refused {
        assert!(
            t["reason"]
                .as_str()
                .unwrap()
                .contains("not enough disk space"),
            "{report}"
        );
    }
    let free_after = free_bytes(fs.0.path());
    assert!(
        free_after >= free_before.min(16 * 1024),
        "the disk is left full: {free_after} bytes free (was {free_before})"
    );
    let wal = fs.0.path().join("deerflow.db-wal");
    assert!(
        !wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0,
        "the WAL is not truncated"
    );
    // Refused threads are old, the store reads and verifies as before.
    let store = Store::Sqlite {
        _dir: tempfile::tempdir().unwrap(),
        path: db.clone(),
    };
    let now = store.rows();
    for t in &refused {
        let tid = t["thread_id"].as_str().unwrap();
        assert_eq!(now[tid], orig.rows[tid], "refused thread {tid} was written");
    }
    let fresh: Vec<_> = verify_errors(&store.target())
        .difference(&orig.errors)
        .cloned()
        .collect();
    assert!(fresh.is_empty(), "new verify errors {fresh:?}");
    println!(
        "full disk: {} of {} thread(s) refused on a {} KiB tmpfs; {free_after} bytes free after",
        refused.len(),
        orig.rows.len(),
        (size + 48 * 1024) / 1024
    );
}
