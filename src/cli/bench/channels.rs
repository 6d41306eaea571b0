//! `dfck bench channels` (bench-harness.md §2, §9): flags and validation, then the controller
//! loop — one child per case, progress on stderr, each row appended and flushed to `--output`
//! as its case finishes, the cross-mode gate at the end (rewriting the file atomically when it
//! changes a row), and the summary line. With the hidden `--worker-case JSON` this process is
//! the child instead ([`crate::bench::worker`]).
//!
//! Children: `--engine native` re-executes this binary (`bench channels --worker-case JSON`);
//! `--engine langgraph` runs `<--python> <worker script> --worker-case JSON`. The worker script
//! is `--worker-script PATH` / `DFCK_BENCH_LANGGRAPH_WORKER` when given, else the first
//! `scripts/bench_worker_langgraph.py` found in the directories above the dfck executable
//! (`<repo>/target/release/dfck` → `<repo>/scripts/…`), else in the source tree dfck was built
//! from, else under the current directory. The PostgreSQL URL reaches children only through
//! `DFCK_BENCH_PG_URL`; the git SHA through `DFCK_BENCH_GIT_SHA` (and DeerFlow's
//! `DEERFLOW_CHECKPOINT_BENCH_GIT_SHA`).
//!
//! Ctrl-C (SIGINT) or SIGTERM: the running child's process group is killed (SIGTERM, 2 s, then
//! SIGKILL), its case gets no row, every finished row stays in the file (gated), and the run
//! exits 130.

use crate::bench::case::{Backend, ChannelMode, Engine, RowEnv};
use crate::bench::channels::{
    CsvValues, MatrixSpec, apply_cap, cap_message, cross_mode_gate, expand_matrix,
    parse_choice_csv, parse_positive_int_csv, progress_line,
};
use crate::bench::controller::{ChildEnd, ChildSpec, PlannedCase, run_child};
use crate::bench::rows::ChannelRow;
use crate::bench::{env, worker};
use crate::cli::GlobalArgs;
use crate::error::Error;
use clap::{Args, ValueEnum};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// The worker script of the langgraph engine, relative to the repository.
pub const LANGGRAPH_WORKER: &str = "scripts/bench_worker_langgraph.py";
/// Environment variable naming the langgraph worker script.
pub const LANGGRAPH_WORKER_ENV: &str = "DFCK_BENCH_LANGGRAPH_WORKER";

/// `--engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// dfck's own Rust writer/reader of the LangGraph 1.2 format.
    Native,
    /// The real Python LangGraph (needs --python with langgraph installed).
    Langgraph,
}

/// The matrix axes of `dfck bench channels` (comma-separated lists).
#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// Modes to run (comma-separated: full, delta); the order given is the base order for
    /// alternation.
    #[arg(long, default_value = "full,delta", value_name = "CSV")]
    pub modes: String,
    /// Savers (comma-separated: memory, sqlite, postgres).
    #[arg(long, default_value = "memory,sqlite", value_name = "CSV")]
    pub backends: String,
    /// Numbers of single-message updates per case (comma-separated positive integers).
    #[arg(long, default_value = "10,100", value_name = "CSV")]
    pub updates: String,
    /// Exact content size of every message in bytes (comma-separated positive integers).
    #[arg(long, default_value = "128", value_name = "CSV")]
    pub payload_bytes: String,
    /// DeltaChannel snapshot cadences, swept for delta cases only (e.g. 100,250,500,1000).
    #[arg(long, default_value = "10", value_name = "CSV")]
    pub snapshot_frequencies: String,
}

/// Arguments of `dfck bench channels`. A flag given twice takes its last value (as argparse).
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct ChannelsArgs {
    /// The matrix axes (boxed to keep the subcommand enum small).
    #[command(flatten)]
    pub matrix: Box<MatrixArgs>,
    /// Passes over the whole matrix.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
    pub repetitions: i64,
    /// Only used in the thread id; nothing is random.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: i64,
    /// Per-child timeout in seconds.
    #[arg(long, default_value_t = 900.0, allow_negative_numbers = true)]
    pub timeout_seconds: f64,
    /// Safety cap: skip every comparable group whose full case would re-serialize more than
    /// this many bytes (payload × N × (N+1) / 2). Delta-only runs are never capped.
    #[arg(long, default_value_t = 1_073_741_824, allow_negative_numbers = true)]
    pub max_estimated_full_bytes: i64,
    /// Disable the safety cap.
    #[arg(long)]
    pub allow_large_cases: bool,
    /// JSONL output (parent directories are created, the file is truncated; one row per case,
    /// appended as each case finishes).
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// The system under test.
    #[arg(long, value_enum, default_value_t = EngineArg::Native)]
    pub engine: EngineArg,
    /// Python interpreter with langgraph installed (--engine langgraph).
    #[arg(long, value_name = "PATH", default_value = "python3")]
    pub python: PathBuf,
    /// The langgraph worker script (default: scripts/bench_worker_langgraph.py of the dfck
    /// repository; env DFCK_BENCH_LANGGRAPH_WORKER).
    #[arg(long, value_name = "PATH")]
    pub worker_script: Option<PathBuf>,
    /// PostgreSQL server for --backends postgres (default: env TEST_POSTGRES_URI). Children get
    /// it through the environment only; it never appears in rows.
    #[arg(long, value_name = "URL")]
    pub pg_url: Option<String>,
    /// Child mode: run one case (compact JSON) and print its row.
    #[arg(long, hide = true, value_name = "JSON")]
    pub worker_case: Option<String>,
}

/// A usage error (exit 2).
pub(super) fn usage(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// The parsed values; prints DeerFlow's duplicate warning on stderr.
pub(super) fn warn<T>(v: CsvValues<T>) -> Vec<T> {
    if let Some(w) = &v.warning {
        eprintln!("{w}");
    }
    v.values
}

/// Everything `run` needs after validation.
struct Plan {
    spec: MatrixSpec,
    output: PathBuf,
    timeout: f64,
    cap: Option<u128>,
    pg_url: Option<String>,
    worker_script: Option<PathBuf>,
}

fn plan(args: &ChannelsArgs) -> Result<Plan, Error> {
    let modes =
        warn(parse_choice_csv("--modes", &args.matrix.modes, &["full", "delta"]).map_err(usage)?);
    let backends = warn(
        parse_choice_csv(
            "--backends",
            &args.matrix.backends,
            &["memory", "sqlite", "postgres"],
        )
        .map_err(usage)?,
    );
    let updates = warn(parse_positive_int_csv("--updates", &args.matrix.updates).map_err(usage)?);
    let payloads =
        warn(parse_positive_int_csv("--payload-bytes", &args.matrix.payload_bytes).map_err(usage)?);
    let frequencies = warn(
        parse_positive_int_csv("--snapshot-frequencies", &args.matrix.snapshot_frequencies)
            .map_err(usage)?,
    );
    let Some(output) = args.output.clone() else {
        return Err(usage("--output is required"));
    };
    if args.repetitions <= 0 {
        return Err(usage("--repetitions must be positive"));
    }
    if args.timeout_seconds.is_nan() || args.timeout_seconds <= 0.0 {
        return Err(usage("--timeout-seconds must be positive"));
    }
    if !args.allow_large_cases && args.max_estimated_full_bytes <= 0 {
        return Err(usage("--max-estimated-full-bytes must be positive"));
    }
    let backends: Vec<Backend> = backends
        .iter()
        .map(|b| match b.as_str() {
            "memory" => Backend::Memory,
            "sqlite" => Backend::Sqlite,
            _ => Backend::Postgres,
        })
        .collect();
    let pg_url = args
        .pg_url
        .clone()
        .or_else(|| std::env::var("TEST_POSTGRES_URI").ok())
        .filter(|u| !u.trim().is_empty());
    if backends.contains(&Backend::Postgres) {
        match &pg_url {
            None => {
                return Err(usage(
                    "--backends postgres needs a PostgreSQL server: pass --pg-url URL or set TEST_POSTGRES_URI",
                ));
            }
            Some(u) if !(u.starts_with("postgresql://") || u.starts_with("postgres://")) => {
                return Err(usage(format!(
                    "--pg-url must be a postgresql:// or postgres:// URL, got {}",
                    crate::target::redact_url(u)
                )));
            }
            Some(_) => {}
        }
    }
    let engine = match args.engine {
        EngineArg::Native => Engine::Native,
        EngineArg::Langgraph => Engine::Langgraph,
    };
    let worker_script = match engine {
        Engine::Native => None,
        Engine::Langgraph => Some(locate_worker_script(args.worker_script.as_deref())?),
    };
    Ok(Plan {
        spec: MatrixSpec {
            modes: modes
                .iter()
                .map(|m| {
                    if m == "full" {
                        ChannelMode::Full
                    } else {
                        ChannelMode::Delta
                    }
                })
                .collect(),
            backends,
            updates,
            payloads,
            frequencies,
            repetitions: u64::try_from(args.repetitions).unwrap_or(1),
            seed: args.seed,
            engine,
        },
        output,
        timeout: args.timeout_seconds,
        cap: if args.allow_large_cases {
            None
        } else {
            u128::try_from(args.max_estimated_full_bytes).ok()
        },
        pg_url,
        worker_script,
    })
}

/// Finds the langgraph worker script (see the module header for the search order).
pub fn locate_worker_script(explicit: Option<&Path>) -> Result<PathBuf, Error> {
    locate_script(explicit, LANGGRAPH_WORKER_ENV, LANGGRAPH_WORKER)
}

/// Finds a worker script shipped with dfck: `explicit` or the non-empty env var `env_var`
/// when given (it must exist), else the first `relative` (a path relative to the repository,
/// e.g. `scripts/x.py`) in the directories above the dfck executable, in the source tree dfck
/// was built from, or under the current directory.
pub fn locate_script(
    explicit: Option<&Path>,
    env_var: &str,
    relative: &str,
) -> Result<PathBuf, Error> {
    let from_env = std::env::var_os(env_var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    if let Some(p) = explicit.map(Path::to_path_buf).or(from_env) {
        return if p.is_file() {
            Ok(p)
        } else {
            Err(usage(format!(
                "langgraph worker script {} does not exist",
                p.display()
            )))
        };
    }
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().skip(1).map(|d| d.join(relative)));
    }
    candidates.push(env::build_dir().join(relative));
    if let Ok(cwd) = std::env::current_dir() {
        candidates.push(cwd.join(relative));
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        usage(format!(
            "cannot find {relative}; pass --worker-script PATH or set {env_var}"
        ))
    })
}

/// The identity the controller gives its own failure rows: the native engine's own, or what
/// `<python> <worker script> --identity` reports (`unknown`/null when that probe fails).
pub(super) fn controller_row_env(
    engine: Engine,
    git_sha: &str,
    probe: Option<&ChildSpec>,
    interrupt: &AtomicBool,
) -> RowEnv {
    match engine {
        Engine::Native => RowEnv {
            git_sha: git_sha.to_string(),
            ..worker::native_row_env()
        },
        Engine::Langgraph => {
            let reported = probe
                .and_then(|spec| run_child(spec, interrupt).ok())
                .filter(|r| r.end == ChildEnd::Exited(0))
                .and_then(|r| {
                    let last = r.stdout.lines().rev().find(|l| !l.trim().is_empty())?;
                    match serde_json::from_str::<Value>(last.trim()) {
                        Ok(Value::Object(m)) => Some(m),
                        _ => None,
                    }
                })
                .unwrap_or_default();
            let text = |k: &str| reported.get(k).and_then(Value::as_str).map(str::to_string);
            RowEnv {
                git_sha: git_sha.to_string(),
                python_version: text("python_version"),
                langgraph_version: text("langgraph_version"),
                platform: text("platform").unwrap_or_else(env::platform),
                engine_version: text("engine_version").unwrap_or_else(|| "unknown".into()),
                runtime_version: text("runtime_version").unwrap_or_else(|| "unknown".into()),
            }
        }
    }
}

/// Runs `dfck bench channels`.
pub fn run(_global: &GlobalArgs, args: &ChannelsArgs) -> Result<i32, Error> {
    if let Some(case) = &args.worker_case {
        return Ok(super::print_worker_row(worker::run_worker_case(case)));
    }
    let plan = plan(args)?;
    let cases = expand_matrix(&plan.spec);
    let capped = apply_cap(cases, plan.cap);
    if !capped.skipped.is_empty() {
        eprintln!("{}", cap_message(&capped));
    }
    if capped.kept.is_empty() {
        eprintln!("No benchmark cases remain after applying the safety cap.");
        return Ok(crate::error::EXIT_ERROR);
    }
    let launcher = super::Launcher::new(
        "channels",
        &args.python,
        plan.worker_script.clone(),
        plan.pg_url.as_deref(),
        plan.timeout,
    )?;
    let n = capped.kept.len();
    let mut planned = Vec::with_capacity(n);
    for (i, case) in capped.kept.iter().enumerate() {
        let case_json = serde_json::to_string(case).map_err(|e| Error::Render(e.to_string()))?;
        planned.push(PlannedCase {
            spec: launcher.spec(case_json),
            base: Box::new(ChannelRow::new(case, &launcher.row_env)),
            progress: progress_line(i + 1, n, case),
        });
    }
    launcher.run(planned, &plan.output, &cross_mode_gate)
}
