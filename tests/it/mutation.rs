//! Mutation test: hundreds of damaged copies of the committed fixture stores, every read
//! command run on each under a memory cap and a timeout. Whatever the damage, dfck must
//! end with exit 0, 1 or 2, one stderr line on exit 2, JSON on stdout for `--format json`,
//! and never panic, die by a signal or hang.
//!
//! Deterministic: `DFCK_MUTATION_SEED` (default 1) and `DFCK_MUTATION_STORES` (default 500)
//! choose the run (`DFCK_MUTATION_VERBOSE=1` also prints every exit-2 line). A failing store is kept under `target/mutation-failures/` to reproduce.

use crate::common::capped::{contract_violation, dfck_capped};
use crate::mutation_mutate::{Rng, mutate};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const FIXTURES: &[&str] = &[
    "exit",
    "values",
    "subgraph",
    "pickle",
    "encrypted",
    "mixed",
    "deerflow",
    "delta_k3",
    "delta_k1",
    "full",
];

const TIMEOUT: Duration = Duration::from_secs(20);

fn env_num(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The commands to run on store `i`: `verify` in JSON always, and five of the others in
/// rotation, so that every command runs on every kind of damage over the whole run.
fn commands(i: usize, thread: &str) -> Vec<Vec<String>> {
    let t = thread.to_owned();
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let pool: Vec<Vec<String>> = vec![
        s(&["verify"]),
        s(&["inspect"]),
        s(&["--format", "json", "inspect"]),
        [s(&["inspect"]), vec![t.clone()]].concat(),
        [s(&["--format", "json", "inspect"]), vec![t.clone()]].concat(),
        [s(&["inspect"]), vec![t.clone()], s(&["--state"])].concat(),
        [
            s(&["--format", "json", "inspect"]),
            vec![t.clone()],
            s(&["--state"]),
        ]
        .concat(),
        [s(&["lineage"]), vec![t.clone()]].concat(),
        [s(&["--format", "json", "lineage"]), vec![t.clone()]].concat(),
        [s(&["lineage"]), vec![t.clone()], s(&["--tree"])].concat(),
        [
            s(&["--format", "json", "lineage"]),
            vec![t.clone()],
            s(&["--tree"]),
        ]
        .concat(),
        s(&["migrate", "delta-to-full", "--all"]),
        s(&["--format", "json", "migrate", "delta-to-full", "--all"]),
        [s(&["inspect"]), vec![t.clone()], s(&["--state", "--raw"])].concat(),
    ];
    let mut out = vec![s(&["--format", "json", "verify"])];
    for k in 0..5 {
        out.push(pool[(i * 5 + k) % pool.len()].clone());
    }
    out
}

struct Failure {
    store: usize,
    mutations: Vec<String>,
    args: Vec<String>,
    problem: String,
    kept: PathBuf,
}

fn keep(db: &Path, i: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mutation-failures");
    let _ = std::fs::create_dir_all(&dir);
    let dst = dir.join(format!("store-{i}.db"));
    let _ = std::fs::copy(db, &dst);
    dst
}

#[test]
fn damaged_stores_never_crash_hang_or_lie_about_their_exit() {
    let seed = env_num("DFCK_MUTATION_SEED", 1);
    let stores = env_num("DFCK_MUTATION_STORES", 500) as usize;
    let verbose = std::env::var_os("DFCK_MUTATION_VERBOSE").is_some();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sqlite");
    let next = AtomicUsize::new(0);
    let runs = AtomicUsize::new(0);
    let exits = Mutex::new([0usize; 3]);
    let failures: Mutex<Vec<Failure>> = Mutex::new(Vec::new());
    let slowest = Mutex::new((Duration::ZERO, String::new()));
    let start = Instant::now();
    let work = || {
        let tmp = tempfile::tempdir().expect("tempdir");
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= stores {
                return;
            }
            let mut rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
            let fixture = FIXTURES[i % FIXTURES.len()];
            let db = tmp.path().join(format!("m{i}.db"));
            std::fs::copy(root.join(format!("{fixture}.db")), &db).expect("copy fixture");
            let (mutations, thread) = mutate(&db, &mut rng);
            let mutations: Vec<String> = std::iter::once(format!("fixture {fixture}"))
                .chain(mutations)
                .collect();
            let target = db.to_string_lossy().into_owned();
            for args in commands(i, &thread) {
                let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                let r = dfck_capped(&target, &argv, TIMEOUT);
                runs.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut s) = slowest.lock() {
                    if r.elapsed > s.0 {
                        *s = (r.elapsed, format!("store {i} {args:?}"));
                    }
                }
                if let Some(c) = r.code.filter(|c| (0..3).contains(c)) {
                    exits.lock().unwrap()[c as usize] += 1;
                }
                if verbose && r.code == Some(2) {
                    println!(
                        "exit 2: store {i} ({}) {args:?}: {}",
                        mutations.join("; "),
                        r.stderr.trim_end()
                    );
                }
                let json = args.first().is_some_and(|a| a == "--format");
                if let Some(problem) = contract_violation(&r, json) {
                    failures.lock().unwrap().push(Failure {
                        store: i,
                        mutations: mutations.clone(),
                        args: args.clone(),
                        problem,
                        kept: keep(&db, i),
                    });
                }
            }
            let _ = std::fs::remove_file(&db);
        }
    };
    std::thread::scope(|s| {
        s.spawn(work);
        work();
    });
    let exits = exits.into_inner().unwrap();
    let (slow, slow_what) = slowest.into_inner().unwrap();
    println!(
        "mutation: seed {seed}, {stores} stores, {} runs in {:.1?} (exit 0/1/2: {}/{}/{}; slowest {slow:.1?}: {slow_what})",
        runs.load(Ordering::Relaxed),
        start.elapsed(),
        exits[0],
        exits[1],
        exits[2],
    );
    let failures = failures.into_inner().unwrap();
    for f in &failures {
        println!(
            "FAIL store {} ({}): dfck --db {} {} -> {}",
            f.store,
            f.mutations.join("; "),
            f.kept.display(),
            f.args.join(" "),
            f.problem
        );
    }
    assert!(stores >= 1 && runs.load(Ordering::Relaxed) >= stores);
    assert!(
        failures.is_empty(),
        "{} failing run(s), see above",
        failures.len()
    );
}
