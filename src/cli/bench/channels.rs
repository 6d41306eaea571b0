//! `dfck bench channels`: flags and their validation (DeerFlow's messages), then the library
//! runs the matrix ([`dfck_bench::launcher::Launcher`] over the shared controller loop) and
//! reports through [`crate::render::bench_reporter`]. With the hidden `--worker-case JSON` this
//! process is the child instead ([`dfck_bench::worker`]); its row is printed by
//! [`crate::render::bench`]. How children are started and where the langgraph worker script is
//! found: [`dfck_bench::launcher`]. Ctrl-C (SIGINT) or SIGTERM: the running child's process
//! group is killed, its case gets no row, every finished row stays in the file (gated), and the
//! command ends `Interrupted` (exit 130).

use crate::cli::GlobalArgs;
use crate::error::Error;
use crate::render::bench_reporter::{StderrReporter, note};
use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use dfck_bench::case::{Backend, ChannelMode, Engine};
use dfck_bench::channels::{
    CsvValues, MatrixSpec, apply_cap, cap_message, cross_mode_gate, expand_matrix,
    parse_choice_csv, parse_positive_int_csv, progress_line,
};
use dfck_bench::controller::PlannedCase;
use dfck_bench::error::BenchError;
use dfck_bench::launcher::{Launcher, locate_worker_script};
use dfck_bench::rows::ChannelRow;
use dfck_bench::worker;
use dfck_core::outcome::Outcome;
use std::path::PathBuf;

/// `--engine` of a bench command: the engine names with their help texts.
pub(super) fn engine_parser(
    native: &'static str,
    langgraph: &'static str,
) -> impl TypedValueParser<Value = Engine> {
    PossibleValuesParser::new([
        PossibleValue::new(Engine::Native.as_str()).help(native),
        PossibleValue::new(Engine::Langgraph.as_str()).help(langgraph),
    ])
    .try_map(|s: String| s.parse::<Engine>())
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
    #[arg(
        long,
        default_value_t = Engine::Native,
        value_parser = engine_parser(
            "dfck's own Rust writer/reader of the LangGraph 1.2 format",
            "The real Python LangGraph (needs --python with langgraph installed)",
        )
    )]
    pub engine: Engine,
    /// Python interpreter with langgraph installed (--engine langgraph).
    #[arg(long, value_name = "PATH", default_value = "python3")]
    pub python: PathBuf,
    /// The langgraph worker script (default: scripts/bench_worker_langgraph.py of the dfck
    /// repository; env DFCK_BENCH_LANGGRAPH_WORKER).
    #[arg(long, value_name = "PATH")]
    pub worker_script: Option<PathBuf>,
    /// Alias of --db here: the PostgreSQL server for --backends postgres (default: --db /
    /// DFCK_DB, else TEST_POSTGRES_URI). Children get it through the environment only; it
    /// never appears in rows.
    #[arg(long, value_name = "URL")]
    pub pg_url: Option<String>,
    /// Child mode: run one case (compact JSON) and print its row.
    #[arg(long, hide = true, value_name = "JSON")]
    pub worker_case: Option<String>,
}

/// A usage error (exit 2).
pub(super) fn usage(msg: impl Into<String>) -> Error {
    Error::usage(msg.into())
}

/// The parsed values; reports DeerFlow's duplicate warning on stderr.
pub(super) fn warn<T>(v: CsvValues<T>) -> Vec<T> {
    if let Some(w) = &v.warning {
        note(w);
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

fn plan(global: &GlobalArgs, args: &ChannelsArgs) -> Result<Plan, Error> {
    let modes = warn(parse_choice_csv(
        "--modes",
        &args.matrix.modes,
        &[ChannelMode::Full, ChannelMode::Delta],
    )?);
    let backends = warn(parse_choice_csv(
        "--backends",
        &args.matrix.backends,
        &[Backend::Memory, Backend::Sqlite, Backend::Postgres],
    )?);
    let updates = warn(parse_positive_int_csv("--updates", &args.matrix.updates)?);
    let payloads = warn(parse_positive_int_csv(
        "--payload-bytes",
        &args.matrix.payload_bytes,
    )?);
    let frequencies = warn(parse_positive_int_csv(
        "--snapshot-frequencies",
        &args.matrix.snapshot_frequencies,
    )?);
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
    let pg_url = super::pg_server(
        global,
        args.pg_url.as_deref(),
        backends.contains(&Backend::Postgres),
    )?;
    let engine = args.engine;
    let worker_script = match engine {
        Engine::Native => None,
        Engine::Langgraph => Some(locate_worker_script(args.worker_script.as_deref())?),
    };
    Ok(Plan {
        spec: MatrixSpec {
            modes,
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

/// Runs `dfck bench channels`.
pub fn run(global: &GlobalArgs, args: &ChannelsArgs) -> Result<Outcome, Error> {
    if let Some(case) = &args.worker_case {
        return super::print_worker_row(worker::run_worker_case(case));
    }
    let plan = plan(global, args)?;
    let cases = expand_matrix(&plan.spec);
    let capped = apply_cap(cases, plan.cap);
    if !capped.skipped.is_empty() {
        note(&cap_message(&capped));
    }
    if capped.kept.is_empty() {
        return Err(BenchError::NoCasesLeft.into());
    }
    let launcher = Launcher::new(
        "channels",
        &args.python,
        plan.worker_script.clone(),
        plan.pg_url.as_deref(),
        plan.timeout,
    )?;
    let n = capped.kept.len();
    let mut planned = Vec::with_capacity(n);
    for (i, case) in capped.kept.iter().enumerate() {
        let case_json = serde_json::to_string(case).map_err(|e| Error::render(e.to_string()))?;
        planned.push(PlannedCase {
            spec: launcher.spec(case_json),
            base: Box::new(ChannelRow::new(case, &launcher.row_env)),
            progress: progress_line(i + 1, n, case),
        });
    }
    let done = launcher.run(
        planned,
        &plan.output,
        &cross_mode_gate,
        &mut StderrReporter::new(),
    )?;
    Ok(done.outcome())
}
